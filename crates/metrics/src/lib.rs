//! servelab-metrics
