//! The lab tests' engines: `servelab sim serve` processes told apart by a marker in their
//! model name, and the experiment files and arguments the tests give the lab.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use servelab::args::LabRunArgs;

pub const BIN: &str = env!("CARGO_BIN_EXE_servelab");

/// Processes whose command line contains `marker` (engines are started with it as their
/// model name), zombies excluded.
pub fn survivors(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .map(|s| s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')))
            .unwrap_or(true);
        if cmd.contains(marker) && !zombie {
            out.push(format!("{name}: {cmd}"));
        }
    }
    out
}

/// No process with `marker` left, allowing the kernel a moment to finish killing.
pub fn assert_no_survivors(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = survivors(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "engine processes survived: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn marker(test: &str) -> String {
    format!("labtest-{test}-{}", std::process::id())
}

pub fn sim(marker: &str, flags: &str) -> String {
    format!("{BIN} sim serve --port {{port}} --served-model-name {marker} --ttft-ms 10 {flags}")
}

/// 32 requests of 16 output tokens at concurrency 16: with 2 slots, 16 waves of ~85 ms.
pub const TINY: &str =
    "  - {name: tiny, dataset_name: random, random_input_len: 32, random_output_len: 16, \
                    ignore_eos: true, num_prompts: 32, max_concurrency: 16, seed: 1, \
                    tokenizer: cl100k_base}\n";

pub fn args(file: &Path, dir: &Path) -> LabRunArgs {
    LabRunArgs {
        experiment: file.to_path_buf(),
        resume: false,
        output_dir: Some(dir.to_path_buf()),
        db: Some(dir.parent().unwrap_or(dir).join("store.db")),
        no_store: false,
        shard: Default::default(),
    }
}

pub fn write(dir: &Path, yaml: &str) -> PathBuf {
    let p = dir.join("exp.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}
