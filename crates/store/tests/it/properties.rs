//! Property test of the importers of peers' result files (vLLM, SGLang, GuideLLM and
//! servelab's own) on hostile files: mutations of the fixtures and random bytes never panic;
//! each imports or says what is wrong. Seeded; `SERVELAB_PROPERTY_SCALE` multiplies the count
//! (see `testdata/fuzz.rs`).

#[path = "../../../../testdata/fuzz.rs"]
mod fuzz;

#[test]
fn result_files() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let seeds: Vec<Vec<u8>> = ["vllm.json", "sglang.jsonl", "guidellm.json"]
        .iter()
        .map(|f| std::fs::read(format!("{root}{f}")).unwrap())
        .collect();
    fuzz::hostile_texts("import", &seeds, 1000, |text| {
        servelab_store::parse_result_text(text, "hostile.json").is_ok()
    });
}
