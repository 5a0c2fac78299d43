//! servelab-outputs
