//! Recording a run as it happens: a hook the conductor calls, implemented by the results
//! store, so the conductor needs no store and a store problem never stops a benchmark.

use servelab_metrics::Summary;
use servelab_records::{RequestRecord, RunInfo};

use crate::RecordSpec;

/// Begins the recording of runs.
pub trait Recording: Send + Sync {
    /// A run is about to send its first request: file it (as running) and return where its
    /// records go.
    fn begin(&self, info: &RunInfo, spec: &RecordSpec) -> Box<dyn RecordSink>;
}

/// Where one run's records go while it runs. Called from a blocking thread, never from the
/// tasks that time requests.
pub trait RecordSink: Send {
    /// One finished request.
    fn push(&mut self, record: &RequestRecord);

    /// Every request has finished: write what is waiting now, before the slower work after
    /// the run (a crash there must not lose records).
    fn flush(&mut self) {}

    /// The run ended: store the final records (with token counts), the summary and the
    /// status. Returns a line for the user saying where the run is, if it was recorded.
    fn finish(
        self: Box<Self>,
        records: &[RequestRecord],
        summary: &Summary,
        interrupted: bool,
    ) -> Option<String>;
}

/// Records nothing.
pub struct NoRecording;

impl RecordSink for NoRecording {
    fn push(&mut self, _: &RequestRecord) {}

    fn finish(self: Box<Self>, _: &[RequestRecord], _: &Summary, _: bool) -> Option<String> {
        None
    }
}
