//! A dataset file, read by every loader of user files (ShareGPT, JSONL prompts, Mooncake,
//! Azure and BurstGPT traces, ShareGPT and JSONL sessions): none panics. The first byte picks
//! the loader, the rest is the file.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use servelab_workload::{
    load, load_sessions, load_trace, DatasetSpec, SessionSource, SessionSpec, ThinkTime,
    Tokenizer, TraceFormat, TraceOptions, TraceSpec,
};

fn tokenizer() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| Tokenizer::builtin("cl100k_base").expect("built-in encoding"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, file)) = data.split_first() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("data");
    std::fs::write(&path, file).expect("write");
    let tok = tokenizer();
    let trace = |format| {
        let options = TraceOptions { max_requests: Some(50), ..TraceOptions::default() };
        let _ = load_trace(&TraceSpec { path: path.clone(), format, options }, tok, 0);
    };
    let session = |source| {
        let _ = load_sessions(&SessionSpec { source, think_time: ThinkTime::Zero }, 4, tok, 0);
    };
    match which % 7 {
        0 => {
            let _ = load(&DatasetSpec::ShareGpt { path: path.clone(), output_len: None }, 8, tok, 0);
        }
        1 => {
            let _ = load(&DatasetSpec::Jsonl { path: path.clone() }, 8, tok, 0);
        }
        2 => trace(TraceFormat::Mooncake { block_size: 512 }),
        3 => trace(TraceFormat::Azure),
        4 => trace(TraceFormat::BurstGpt { model: None, log_type: None }),
        5 => session(SessionSource::ShareGpt { path: path.clone(), output_len: None, max_turns: Some(4) }),
        _ => session(SessionSource::Jsonl { path: path.clone(), output_len: None, max_turns: Some(4) }),
    }
});
