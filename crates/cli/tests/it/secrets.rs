//! Secrets never leave servelab: an API key from the environment, a secret header and a
//! password in the base URL are used on the wire but appear in no artefact a run writes
//! (stdout, stderr, result JSON, per-request records, CSV, the store, Markdown and HTML
//! reports, sweep outputs, lab reports and the engine logs the lab keeps).

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_servelab");
const KEY: &str = "sk-servelab-secret-key-0123456789";
const HEADER_SECRET: &str = "hdr-secret-9876543210";
const PASSWORD: &str = "url-password-5555";

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("SERVELAB_DB", dir.join("store.db"))
        .env("OPENAI_API_KEY", KEY)
        .output()
        .expect("binary runs")
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for secret in [KEY, HEADER_SECRET, PASSWORD] {
        assert!(!text.contains(secret), "{what} contains a secret ({secret})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_any_artefact() {
    let sim = servelab_sim::start(servelab_sim::SimConfig::fixed(5.0, 1.0)).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let addr = sim.addr();
    let url = format!("http://user:{PASSWORD}@{addr}");
    let header = format!("X-Secret-Token: {HEADER_SECRET}");
    let target = ["--base-url", &url, "--header", &header];
    let small = [
        "--num-prompts",
        "6",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--ignore-eos",
        "--no-progress",
    ];
    let mut outputs = Vec::new();
    let bench = |label: &str, extra: &[&str]| {
        let args = [&["bench"][..], &target, &small, &["--label", label], extra].concat();
        run(dir, &args)
    };
    // A run that succeeds, one that fails at the server (a 4xx quoting the request), one
    // that cannot connect: errors are where secrets usually leak.
    outputs.push(bench("ok", &["--save-result", "--save-detailed", "--format", "json"]));
    outputs.push(bench("csv", &["--format", "csv"]));
    outputs.push(bench("bad-model", &["--model", "no-such-model"]));
    outputs.push(run(
        dir,
        &[
            &["bench", "--ready-timeout", "1", "--base-url"][..],
            &[format!("http://user:{PASSWORD}@127.0.0.1:1").as_str()],
            &small,
        ]
        .concat(),
    ));
    let sweep = [
        &["sweep"][..],
        &target,
        &small,
        &["--concurrency", "1,2", "--output-dir", "sweep-out", "--label", "sw"],
    ]
    .concat();
    outputs.push(run(dir, &sweep));
    outputs.push(run(dir, &["runs", "export", "ok", "--detailed", "-o", "export.json"]));
    outputs.push(run(dir, &["runs", "list"]));
    outputs.push(run(dir, &["runs", "show", "ok"]));
    outputs.push(run(dir, &["compare", "ok", "csv"]));
    outputs.push(run(dir, &["report", "ok", "csv", "-o", "report.html"]));

    // A lab whose engine is a simulator; the key is in the lab's environment (the engine
    // inherits it, as vLLM's --api-key users do) and the profile sends it. (A secret written
    // into the experiment file itself travels with that file, which the lab keeps a copy of
    // for --resume: keys belong in the environment.)
    let yaml = format!(
        "name: secret-test\nstrategy: grid\nengines:\n  - {{name: sim, command: '{BIN} sim \
         serve --port {{port}} --ttft-ms 5 --itl-ms 1', ready_timeout_secs: 60, \
         stop_grace_secs: 3}}\nprofiles:\n  - {{name: tiny, dataset_name: random, \
         random_input_len: 16, random_output_len: 4, ignore_eos: true, num_prompts: 4, \
         max_concurrency: 2, tokenizer: cl100k_base, header: ['X-Trace: lab']}}\noptions:\n  slots: --max-num-seqs 4\n"
    );
    std::fs::write(dir.join("exp.yaml"), yaml).unwrap();
    outputs.push(run(dir, &["lab", "run", "exp.yaml", "--output-dir", "lab-out"]));

    for (i, o) in outputs.iter().enumerate() {
        assert_clean(&format!("stdout of command {i}"), &o.stdout);
        assert_clean(&format!("stderr of command {i}"), &o.stderr);
    }
    // The commands did run and wrote what is being checked.
    assert_eq!(
        outputs[0].status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&outputs[0].stderr)
    );
    let written = files(dir);
    for name in ["store.db", "export.json", "report.html", "exp.yaml"] {
        assert!(written.iter().any(|p| p.ends_with(name)), "{name} missing: {written:?}");
    }
    assert!(written.iter().any(|p| p.to_string_lossy().contains("records.jsonl")), "{written:?}");
    assert!(written.iter().any(|p| p.starts_with(dir.join("sweep-out"))), "{written:?}");
    let lab = outputs.last().unwrap();
    assert!(
        written.iter().any(|p| p.starts_with(dir.join("lab-out"))),
        "lab: {}",
        String::from_utf8_lossy(&lab.stderr)
    );
    for p in &written {
        assert_clean(&p.display().to_string(), &std::fs::read(p).unwrap());
    }
    sim.shutdown().await;
}
