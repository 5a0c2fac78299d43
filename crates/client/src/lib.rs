//! servelab-client
