//! Property test of the experiment parser on hostile files: mutations of the shipped
//! experiments and random bytes never panic; each parses or says what is wrong. Seeded;
//! `SERVELAB_PROPERTY_SCALE` multiplies the count (see `testdata/fuzz.rs`).
#![allow(clippy::print_stderr)]

#[path = "../../../testdata/fuzz.rs"]
mod fuzz;
use fuzz::{cases, mutate, Rng};

#[test]
fn experiment_files() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
    let seeds: Vec<Vec<u8>> = ["lab-sim.yaml", "lab-vllm.yaml", "lab-llama-server.yaml"]
        .iter()
        .map(|f| std::fs::read(format!("{root}{f}")).unwrap())
        .collect();
    let (n, seed) = cases(1000);
    let mut rng = Rng::new(seed);
    let mut parsed = 0;
    for i in 0..n {
        let bytes = mutate(&mut rng, &seeds[i % seeds.len()], i);
        let text = String::from_utf8_lossy(&bytes);
        let ok = std::panic::catch_unwind(|| servelab_lab::config::parse(&text).is_ok())
            .unwrap_or_else(|_| panic!("panic on case {i} (seed {seed}); input:\n{text}"));
        parsed += usize::from(ok);
    }
    eprintln!("experiment: {n} executions, 0 crashes ({parsed} parsed, {} refused)", n - parsed);
}
