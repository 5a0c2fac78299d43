//! [`Recorder`]: how a bench writes to the store. A store problem must never cost the
//! benchmark itself, so every failure is a warning on stderr and the recorder turns itself
//! off; the bench goes on and still prints and saves its result.

use std::path::Path;
use std::time::{Duration, Instant};

use std::path::PathBuf;

use servelab_metrics::Summary;
use servelab_outputs::term;
use servelab_plan::{RecordSink, RecordSpec, Recording};
use servelab_records::{RequestRecord, RunInfo};

use crate::model::{NewRun, RunId, RunSetup, RunStatus};
use crate::store::{Store, StoreError};

/// Records are written when this many are waiting...
pub const BATCH_RECORDS: usize = 256;
/// ...or when the oldest waiting one is this old, so a crash loses at most this much.
pub const BATCH_AGE: Duration = Duration::from_millis(500);

/// What went wrong recording a run (the bench itself goes on).
#[derive(Debug)]
pub enum RecorderWarning {
    /// The store could not be opened, or the run not begun in it.
    NotRecorded(StoreError),
    /// A batch of records could not be appended; recording stopped.
    AppendFailed(StoreError),
    /// The final records could not be stored.
    FinalRecordsFailed(StoreError),
    /// The summary could not be stored.
    SummaryFailed(StoreError),
}

impl std::fmt::Display for RecorderWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecorderWarning::NotRecorded(e) => write!(f, "{e}; this run is not recorded"),
            RecorderWarning::AppendFailed(e) => {
                write!(f, "cannot append records: {e}; recording stops, the bench goes on")
            }
            RecorderWarning::FinalRecordsFailed(e) => {
                write!(f, "cannot store the final records: {e}")
            }
            RecorderWarning::SummaryFailed(e) => write!(f, "cannot store the summary: {e}"),
        }
    }
}

/// Writes one run to the store, or does nothing when the store is off or has failed.
#[derive(Debug)]
pub struct Recorder {
    store: Option<Store>,
    id: Option<RunId>,
    pending: Vec<RequestRecord>,
    oldest: Option<Instant>,
    warnings: Vec<RecorderWarning>,
}

impl Recorder {
    /// A recorder that records nothing (`--no-store`).
    pub fn disabled() -> Recorder {
        Recorder { store: None, id: None, pending: Vec::new(), oldest: None, warnings: Vec::new() }
    }

    /// Open the store at `path` and begin `run` as `running`. On failure, warns and returns a
    /// disabled recorder.
    pub fn begin(path: &Path, run: &NewRun) -> Recorder {
        match Store::open(path) {
            Ok(store) => Recorder::begin_in(store, run),
            Err(e) => {
                let mut r = Recorder::disabled();
                r.warn(RecorderWarning::NotRecorded(e));
                r
            }
        }
    }

    /// Begin `run` in an open store.
    pub fn begin_in(mut store: Store, run: &NewRun) -> Recorder {
        let mut r = Recorder::disabled();
        match store.begin_run(run) {
            Ok(id) => {
                r.store = Some(store);
                r.id = Some(id);
            }
            Err(e) => r.warn(RecorderWarning::NotRecorded(e)),
        }
        r
    }

    /// The run's id, while recording.
    pub fn run_id(&self) -> Option<RunId> {
        self.id.filter(|_| self.store.is_some())
    }

    /// Warnings so far (each was also printed).
    pub fn warnings(&self) -> &[RecorderWarning] {
        &self.warnings
    }

    fn warn(&mut self, w: RecorderWarning) {
        term::warn(&format!("results store: {w}"));
        self.warnings.push(w);
    }

    /// Queue one record; writes a batch when enough are waiting or the oldest is old enough.
    pub fn push(&mut self, record: &RequestRecord) {
        if self.store.is_none() {
            return;
        }
        self.pending.push(record.clone());
        let oldest = *self.oldest.get_or_insert_with(Instant::now);
        if self.pending.len() >= BATCH_RECORDS || oldest.elapsed() >= BATCH_AGE {
            self.flush();
        }
    }

    /// Write every waiting record now.
    pub fn flush(&mut self) {
        self.oldest = None;
        if self.pending.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.pending);
        let (Some(store), Some(id)) = (self.store.as_mut(), self.id) else { return };
        if let Err(e) = store.append_records(id, &batch) {
            self.fail(RecorderWarning::AppendFailed(e));
        }
    }

    fn fail(&mut self, w: RecorderWarning) {
        self.store = None;
        self.warn(w);
    }

    /// Write the final records (replacing those appended during the run: token counts are
    /// attributed after the clock stops), then the summary and final status. Returns the run
    /// id when the whole run was recorded.
    pub fn finish(
        mut self,
        records: &[RequestRecord],
        summary: &Summary,
        status: RunStatus,
    ) -> Option<RunId> {
        self.pending.clear();
        let (Some(store), Some(id)) = (self.store.as_mut(), self.id) else { return None };
        if let Err(e) = store.append_records(id, records) {
            self.fail(RecorderWarning::FinalRecordsFailed(e));
            return None;
        }
        let (Some(store), Some(id)) = (self.store.as_mut(), self.id) else { return None };
        match store.finish_run(id, summary, status) {
            Ok(()) => Some(id),
            Err(e) => {
                self.fail(RecorderWarning::SummaryFailed(e));
                None
            }
        }
    }
}

/// Records every run of a conductor in the store at `db` (default: the user's data dir).
#[derive(Debug, Clone)]
pub struct StoreRecording {
    /// The store file; `None`: the default under the user's data dir.
    pub db: Option<PathBuf>,
}

impl Recording for StoreRecording {
    fn begin(&self, info: &RunInfo, spec: &RecordSpec) -> Box<dyn RecordSink> {
        let Some(path) = crate::resolve_db_path(self.db.clone()) else {
            term::warn(
                "results store: no HOME or XDG_DATA_HOME to put it in; pass --db PATH (or \
                 --no-store). This run is not recorded.",
            );
            return Box::new(Recorder::disabled());
        };
        let run = NewRun {
            label: spec.label.clone(),
            kind: spec.kind,
            config: RunSetup::new(info.clone(), &spec.tags),
            tags: spec.tags.clone(),
        };
        Box::new(Recorder::begin(&path, &run))
    }
}

impl RecordSink for Recorder {
    fn push(&mut self, record: &RequestRecord) {
        Recorder::push(self, record);
    }

    fn flush(&mut self) {
        Recorder::flush(self);
    }

    fn finish(
        self: Box<Self>,
        records: &[RequestRecord],
        summary: &Summary,
        interrupted: bool,
    ) -> Option<String> {
        let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
        let id = Recorder::finish(*self, records, summary, status)?;
        Some(format!("Recorded as run #{id} (servelab runs show {id})"))
    }
}
