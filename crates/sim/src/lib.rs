//! servelab-sim
