//! Issue 25: what the built-in simulator and SGLang's block say. SGLang's block prints
//! `Backend:` as the user typed it (`--backend vllm` is an alias of the completions API, whose
//! flavour is `openai`), for `bench` and `sweep` alike.

use std::process::Command;

fn servelab(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_servelab")).args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

const SMALL: [&str; 7] =
    ["--num-prompts", "2", "--random-input-len", "16", "--random-output-len", "4", "--no-store"];

fn backend_line(name: &str) -> String {
    format!("{:<40} {name}\n", "Backend:")
}

#[test]
fn bench_format_sglang_prints_the_backend_typed() {
    let bench = |backend: &[&str]| {
        let mut args = vec!["bench", "--format", "sglang"];
        args.extend(backend);
        args.extend(SMALL);
        servelab(&args)
    };
    let out = bench(&["--backend", "vllm"]);
    assert!(out.contains(&backend_line("vllm")), "{out}");
    let out = bench(&["--backend", "sglang"]);
    assert!(out.contains(&backend_line("sglang")), "{out}");
    // Not typed: the API flavour, as before.
    let out = bench(&[]);
    assert!(out.contains(&backend_line("openai")), "{out}");
}

#[test]
fn sweep_format_sglang_prints_the_backend_typed() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["sweep", "--backend", "vllm", "--format", "sglang", "--concurrency", "1"];
    args.extend(SMALL);
    args.extend(["--output-dir", dir.path().to_str().unwrap()]);
    let out = servelab(&args);
    assert!(out.contains(&backend_line("vllm")), "{out}");
    assert!(!out.contains(&backend_line("openai")), "{out}");
}

/// Issue 25: which timing the built-in simulator runs is said in `--help` too (the banner and
/// the README say it already): the engine model for the zero-setup run, fixed timing once a
/// workload or load flag is given, unless `--sim-engine` names a deployment.
#[test]
fn the_help_says_when_the_built_in_simulator_runs_fixed_timing() {
    // Whitespace folded: the help may be wrapped to the terminal's width.
    let help = servelab(&["bench", "--help"]).split_whitespace().collect::<Vec<_>>().join(" ");
    let base_url = help.split("--base-url <BASE_URL>").nth(1).unwrap();
    let base_url = &base_url[..base_url.find("--host <HOST>").unwrap()];
    assert!(base_url.contains("the engine model of Qwen3-8B on one H100"), "{base_url}");
    assert!(base_url.contains("fixed timing (TTFT 50 ms, ITL 10 ms"), "{base_url}");
    let sim_engine = help.split("--sim-engine <FILE|NAME>").nth(1).unwrap();
    let fixed = "Without it, a run with any workload or load flag gets fixed timing";
    assert!(sim_engine.contains(fixed), "{sim_engine}");
}
