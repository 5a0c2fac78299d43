//! servelab-load
