//! Property test of the importers of peers' result files (vLLM, SGLang, GuideLLM and
//! servelab's own) on hostile files: mutations of the fixtures and random bytes never panic;
//! each imports or says what is wrong. Seeded; `SERVELAB_PROPERTY_SCALE` multiplies the count
//! (see `testdata/fuzz.rs`).
#![allow(clippy::print_stderr)]

#[path = "../../../testdata/fuzz.rs"]
mod fuzz;
use fuzz::{cases, mutate, Rng};

#[test]
fn result_files() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let seeds: Vec<Vec<u8>> = ["vllm.json", "sglang.jsonl", "guidellm.json"]
        .iter()
        .map(|f| std::fs::read(format!("{root}{f}")).unwrap())
        .collect();
    let (n, seed) = cases(1000);
    let mut rng = Rng::new(seed);
    let mut imported = 0;
    for i in 0..n {
        let bytes = mutate(&mut rng, &seeds[i % seeds.len()], i);
        let text = String::from_utf8_lossy(&bytes);
        let ok = std::panic::catch_unwind(|| {
            servelab_store::parse_result_text(&text, "hostile.json").is_ok()
        })
        .unwrap_or_else(|_| panic!("panic on case {i} (seed {seed}); input:\n{text}"));
        imported += usize::from(ok);
    }
    eprintln!("import: {n} executions, 0 crashes ({imported} imported, {} refused)", n - imported);
}
