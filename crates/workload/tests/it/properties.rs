//! Property tests of every dataset loader on hostile files: random bytes and mutations of
//! the shipped examples never panic; each either loads or says what is wrong. Seeded (a
//! failure prints its seed); `SERVELAB_PROPERTY_SCALE` multiplies the counts and
//! `SERVELAB_PROPERTY_SEED` changes the seed. `scripts/fuzz.sh` runs them at scale.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

use servelab_workload::DatasetSpec;
use servelab_workload::Tokenizer;
use servelab_workload::{load_sessions, SessionSource, SessionSpec, ThinkTime};
use servelab_workload::{load_trace, TraceFormat, TraceOptions, TraceSpec};

#[path = "../../../../testdata/fuzz.rs"]
mod fuzz;
use fuzz::{cases, mutate, Rng};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(name)
}

/// Runs `load` on `cases()` hostile variants of `seed_file`, written to a temp file.
fn hostile_files(target: &str, seed_file: &str, load: impl Fn(&Path) -> bool) {
    let seed_text = std::fs::read(testdata(seed_file)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(seed_file);
    // Relative references (a JSONL's images) resolve as beside the shipped example.
    std::os::unix::fs::symlink(testdata("images"), dir.path().join("images")).unwrap();
    let (n, seed) = cases(300);
    let mut rng = Rng::new(seed ^ target.len() as u64);
    let mut loaded = 0;
    for i in 0..n {
        let bytes = mutate(&mut rng, &seed_text, i);
        std::fs::write(&path, &bytes).unwrap();
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load(&path)))
            .unwrap_or_else(|_| {
                panic!("{target}: panic on case {i} (seed {seed}); input:\n{}", {
                    String::from_utf8_lossy(&bytes)
                })
            });
        loaded += usize::from(ok);
    }
    eprintln!("{target}: {n} executions, 0 crashes ({loaded} loaded, {} refused)", n - loaded);
}

fn tokenizer() -> Tokenizer {
    Tokenizer::builtin("cl100k_base").unwrap()
}

#[test]
fn sharegpt_and_jsonl_prompts() {
    let tok = tokenizer();
    hostile_files("sharegpt", "sharegpt-multiturn.json", |p| {
        let spec = DatasetSpec::ShareGpt { path: p.into(), output_len: None };
        servelab_workload::load(&spec, 8, &tok, 0).is_ok()
    });
    hostile_files("jsonl", "multimodal.jsonl", |p| {
        let spec = DatasetSpec::Jsonl { path: p.into() };
        servelab_workload::load(&spec, 8, &tok, 0).is_ok()
    });
}

#[test]
fn traces() {
    let tok = tokenizer();
    let trace = |p: &Path, format: TraceFormat| {
        let options = TraceOptions { max_requests: Some(50), ..TraceOptions::default() };
        let spec = TraceSpec { path: p.into(), format, options };
        load_trace(&spec, &tok, 0).is_ok()
    };
    hostile_files("mooncake", "mooncake-trace.jsonl", |p| {
        trace(p, TraceFormat::Mooncake { block_size: 512 })
    });
    hostile_files("azure", "azure-trace.csv", |p| trace(p, TraceFormat::Azure));
    hostile_files("burstgpt", "burstgpt.csv", |p| {
        trace(p, TraceFormat::BurstGpt { model: None, log_type: None })
    });
}

#[test]
fn sessions() {
    let tok = tokenizer();
    let load = |source: SessionSource| {
        let spec = SessionSpec { source, think_time: ThinkTime::Zero };
        load_sessions(&spec, 4, &tok, 0).is_ok()
    };
    hostile_files("sessions-sharegpt", "sharegpt-multiturn.json", |p| {
        load(SessionSource::ShareGpt { path: p.into(), output_len: None, max_turns: Some(4) })
    });
    hostile_files("sessions-jsonl", "conversations.jsonl", |p| {
        load(SessionSource::Jsonl { path: p.into(), output_len: None, max_turns: Some(4) })
    });
}
