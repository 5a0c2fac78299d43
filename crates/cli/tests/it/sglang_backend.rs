//! Issue 25: SGLang's block prints `Backend:` as the user typed it (`--backend vllm` is an
//! alias of the completions API, whose flavour is `openai`), for `bench` and `sweep` alike.

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
