//! Property test of the experiment parser on hostile files: mutations of the shipped
//! experiments and random bytes never panic; each parses or says what is wrong. Seeded;
//! `SERVELAB_PROPERTY_SCALE` multiplies the count (see `testdata/fuzz.rs`).

#[path = "../../../../testdata/fuzz.rs"]
mod fuzz;

#[test]
fn experiment_files() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    let seeds: Vec<Vec<u8>> = ["lab-sim.yaml", "lab-vllm.yaml", "lab-llama-server.yaml"]
        .iter()
        .map(|f| std::fs::read(format!("{root}{f}")).unwrap())
        .collect();
    fuzz::hostile_texts("experiment", &seeds, 1000, |text| {
        servelab_lab::config::parse(text).is_ok()
    });
}
