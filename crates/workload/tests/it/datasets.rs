//! Dataset loading end to end: exact lengths, determinism, formats and error messages.

use std::path::{Path, PathBuf};

use servelab_workload::{
    load, ChatMessage, DatasetError, DatasetSpec, LengthRange, Prompt, PromptBody, Tokenizer,
};

fn smollm2() -> Tokenizer {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/smollm2-tokenizer.json");
    Tokenizer::from_path(&path).unwrap()
}

fn cl100k() -> Tokenizer {
    Tokenizer::builtin("cl100k_base").unwrap()
}

fn random(input_len: u64, output_len: u64, range_ratio: f64, prefix_len: u64) -> DatasetSpec {
    DatasetSpec::Random {
        input_len,
        output_len,
        range: LengthRange::Around(range_ratio),
        prefix_len,
    }
}

/// A file in a fresh temp dir (the dir lives as long as the returned guard).
fn write(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    (dir, path)
}

fn text(p: &Prompt) -> &str {
    match &p.body {
        PromptBody::Text(t) => t,
        PromptBody::Chat(_) => panic!("expected text"),
    }
}

/// Every prompt's count is what a full, independent encode of its text gives.
fn assert_counts_exact(tok: &Tokenizer, prompts: &[Prompt]) {
    for (i, p) in prompts.iter().enumerate() {
        assert_eq!(tok.encode(&p.text()).len() as u64, p.prompt_tokens, "prompt {i}");
    }
}

// ---------------------------------------------------------------- random

#[test]
fn random_lengths_are_exact_for_both_tokenizers() {
    for tok in [cl100k(), smollm2()] {
        let prompts = load(&random(1024, 128, 0.0, 0), 20, &tok, 0).unwrap();
        assert_eq!(prompts.len(), 20);
        assert!(prompts.iter().all(|p| p.prompt_tokens == 1024 && p.output_tokens == Some(128)));
        assert_counts_exact(&tok, &prompts);
        // Never a special token in the text.
        assert!(prompts.iter().all(|p| !p.text().contains("<|")), "{}", tok.name());
    }
}

#[test]
fn random_thousand_prompts_of_1024_tokens_are_quick() {
    // Release takes ~0.1-0.4 s (scripts/dataset-load.sh); this bound is for a debug build of
    // this crate on a busy 2-core machine, and catches a fall back to many encodes per prompt.
    for tok in [cl100k(), smollm2()] {
        let start = std::time::Instant::now();
        let prompts = load(&random(1024, 128, 0.0, 0), 1000, &tok, 0).unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(prompts.len(), 1000);
        assert!(secs < 20.0, "{}: {secs:.1} s", tok.name());
    }
}

#[test]
fn random_lengths_stay_in_range_ratio_bounds() {
    let tok = smollm2();
    // [floor(100·0.5), ceil(100·1.5)] = [50, 150]; output [5, 15].
    let prompts = load(&random(100, 10, 0.5, 0), 200, &tok, 3).unwrap();
    let inputs: Vec<u64> = prompts.iter().map(|p| p.prompt_tokens).collect();
    let outputs: Vec<u64> = prompts.iter().filter_map(|p| p.output_tokens).collect();
    assert!(inputs.iter().all(|n| (50..=150).contains(n)), "{inputs:?}");
    assert!(outputs.iter().all(|n| (5..=15).contains(n)), "{outputs:?}");
    // Both ends are reachable and the draw is not degenerate.
    assert!(*inputs.iter().min().unwrap() < 60 && *inputs.iter().max().unwrap() > 140);
    assert_counts_exact(&tok, &prompts);
}

#[test]
fn random_draws_are_fixed_by_the_seed() {
    let tok = cl100k();
    let spec = random(100, 10, 0.5, 0);
    let a = load(&spec, 5, &tok, 42).unwrap();
    let b = load(&spec, 5, &tok, 42).unwrap();
    let c = load(&spec, 5, &tok, 43).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let lengths: Vec<(u64, Option<u64>)> =
        a.iter().map(|p| (p.prompt_tokens, p.output_tokens)).collect();
    assert_eq!(lengths, LENGTHS_SEED_42);
    // The same seed gives the same lengths whatever the tokenizer.
    let d = load(&spec, 5, &smollm2(), 42).unwrap();
    let d_lengths: Vec<(u64, Option<u64>)> =
        d.iter().map(|p| (p.prompt_tokens, p.output_tokens)).collect();
    assert_eq!(d_lengths, LENGTHS_SEED_42);
}

/// SGLang's convention: lengths from floor(L × ratio) to L, never 0; its ratio 0 (its
/// default) draws from 1 to L.
#[test]
fn random_lengths_below_follow_sglangs_range() {
    let tok = smollm2();
    let below = |r: f64| DatasetSpec::Random {
        input_len: 100,
        output_len: 10,
        range: LengthRange::Below(r),
        prefix_len: 0,
    };
    let prompts = load(&below(0.8), 200, &tok, 3).unwrap();
    let inputs: Vec<u64> = prompts.iter().map(|p| p.prompt_tokens).collect();
    let outputs: Vec<u64> = prompts.iter().filter_map(|p| p.output_tokens).collect();
    assert!(inputs.iter().all(|n| (80..=100).contains(n)), "{inputs:?}");
    assert!(outputs.iter().all(|n| (8..=10).contains(n)), "{outputs:?}");
    assert!(inputs.contains(&80) && inputs.contains(&100), "{inputs:?}");
    assert_counts_exact(&tok, &prompts);
    let wide = load(&below(0.0), 200, &tok, 3).unwrap();
    let outputs: Vec<u64> = wide.iter().filter_map(|p| p.output_tokens).collect();
    assert!(outputs.iter().all(|n| (1..=10).contains(n)) && outputs.contains(&1), "{outputs:?}");
    let exact = load(&below(1.0), 5, &tok, 3).unwrap();
    assert!(exact.iter().all(|p| p.prompt_tokens == 100 && p.output_tokens == Some(10)));
    let err = load(&below(1.5), 1, &tok, 0).unwrap_err().to_string();
    assert!(err.contains("[0, 1] (lengths from L × ratio to L), got 1.5"), "{err}");
}

/// Input in [50, 150], output in [5, 15], drawn from seed 42.
const LENGTHS_SEED_42: &[(u64, Option<u64>)] =
    &[(77, Some(9)), (114, Some(10)), (54, Some(7)), (147, Some(12)), (90, Some(15))];

#[test]
fn random_prefix_is_shared_and_added_to_the_drawn_length() {
    for tok in [cl100k(), smollm2()] {
        let prompts = load(&random(200, 16, 0.2, 64), 30, &tok, 9).unwrap();
        let first = text(&prompts[0]);
        let prefix_ids = tok.encode(first)[..64].to_vec();
        let prefix_text = tok.decode(&prefix_ids).unwrap();
        assert_eq!(tok.count(&prefix_text), 64);
        for p in &prompts {
            assert!(text(p).starts_with(&prefix_text), "{}", tok.name());
            // The prefix's tokens are the same in every prompt (what a prefix cache needs).
            assert_eq!(tok.encode(text(p))[..64], prefix_ids[..]);
            // As vLLM: prefix_len + a length drawn in [200·0.8, 200·1.2].
            assert!((64 + 160..=64 + 240).contains(&p.prompt_tokens));
        }
        assert_counts_exact(&tok, &prompts);
    }
}

#[test]
fn random_rejects_impossible_parameters() {
    let tok = cl100k();
    let err = load(&random(100, 10, 1.0, 0), 1, &tok, 0).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid dataset parameter: range_ratio must be in [0, 1) (lengths within L × (1 ± \
         ratio)), got 1"
    );
    let long_prefix = load(&random(100, 10, 0.5, 60), 1, &tok, 0).unwrap()[0].prompt_tokens;
    assert!((60 + 50..=60 + 150).contains(&long_prefix), "{long_prefix}");
    let err = load(&random(0, 10, 0.0, 0), 1, &tok, 0).unwrap_err().to_string();
    assert!(err.contains("shortest prompt") && err.contains("at least 1 token"), "{err}");
    assert_eq!(load(&random(10, 10, 0.0, 0), 0, &tok, 0).unwrap(), vec![]);
    let err = load(&random(u64::MAX, 10, 0.0, 0), 1, &tok, 0).unwrap_err().to_string();
    assert!(err.contains("too long"), "{err}");
    let huge =
        DatasetSpec::Prefix { num_prefixes: 1, prefix_len: u64::MAX, suffix_len: 9, output_len: 1 };
    assert!(load(&huge, 1, &tok, 0).unwrap_err().to_string().contains("too long"));
    let nan = load(&random(10, 10, f64::NAN, 0), 1, &tok, 0).unwrap_err().to_string();
    assert!(
        nan.ends_with("range_ratio must be in [0, 1) (lengths within L × (1 ± ratio)), got NaN")
    );
}

// ---------------------------------------------------------------- prefix

#[test]
fn prefix_dataset_round_robins_prefixes_with_unique_suffixes() {
    for tok in [cl100k(), smollm2()] {
        let spec =
            DatasetSpec::Prefix { num_prefixes: 3, prefix_len: 40, suffix_len: 25, output_len: 7 };
        let prompts = load(&spec, 9, &tok, 1).unwrap();
        assert_counts_exact(&tok, &prompts);
        assert!(prompts.iter().all(|p| p.prompt_tokens == 65 && p.output_tokens == Some(7)));
        let prefix_of = |p: &Prompt| tok.encode(text(p))[..40].to_vec();
        for (i, p) in prompts.iter().enumerate() {
            assert_eq!(prefix_of(p), prefix_of(&prompts[i % 3]), "prompt {i}");
        }
        assert_ne!(prefix_of(&prompts[0]), prefix_of(&prompts[1]));
        assert_ne!(prefix_of(&prompts[1]), prefix_of(&prompts[2]));
        let mut texts: Vec<&str> = prompts.iter().map(text).collect();
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), 9, "suffixes are unique");
        assert_eq!(load(&spec, 9, &tok, 1).unwrap(), prompts);
    }
}

#[test]
fn prefix_dataset_needs_a_prefix() {
    let spec = DatasetSpec::Prefix { num_prefixes: 0, prefix_len: 4, suffix_len: 4, output_len: 1 };
    let err = load(&spec, 1, &cl100k(), 0).unwrap_err().to_string();
    assert_eq!(err, "invalid dataset parameter: num_prefixes must be at least 1");
}

// ---------------------------------------------------------------- sharegpt

/// cl100k_base counts: "What is the capital of France?" 7, "The capital of France is Paris." 7,
/// "Tell me a joke about cats please" 7, the cat joke 17, "Hi" 1, "Ok" 1.
const SHAREGPT: &str = r#"[
  {"id": "a", "conversations": [
    {"from": "human", "value": "What is the capital of France?"},
    {"from": "gpt", "value": "The capital of France is Paris."}]},
  {"id": "single", "conversations": [{"from": "human", "value": "Only one turn here, dropped"}]},
  {"id": "short-prompt", "conversations": [
    {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello! How can I help you today?"}]},
  {"id": "short-output", "conversations": [
    {"from": "human", "value": "Say ok and nothing more please"}, {"from": "gpt", "value": "Ok"}]},
  {"id": "no-conversations"},
  {"id": "b", "conversations": [
    {"from": "human", "value": "Tell me a joke about cats please"},
    {"from": "gpt", "value": "Why did the cat sit on the computer? To keep an eye on the mouse."},
    {"from": "human", "value": "Another"}, {"from": "gpt", "value": "No."}]},
  {"id": "long", "conversations": [
    {"from": "human", "value": "LONG"}, {"from": "gpt", "value": "fine answer of some length"}]}
]"#;

fn sharegpt_file() -> (tempfile::TempDir, PathBuf) {
    // 1,100 repetitions of " go" is 1,100 tokens: over the 1,024 prompt limit.
    write("sg.json", &SHAREGPT.replace("LONG", &" go".repeat(1100)))
}

fn by_prompt(prompts: &[Prompt]) -> Vec<(String, u64, Option<u64>)> {
    let mut v: Vec<_> = prompts
        .iter()
        .map(|p| (p.text().chars().take(20).collect(), p.prompt_tokens, p.output_tokens))
        .collect();
    v.sort();
    v
}

#[test]
fn sharegpt_filters_like_vllm() {
    let (_dir, path) = sharegpt_file();
    let spec = DatasetSpec::ShareGpt { path, output_len: None };
    let prompts = load(&spec, 2, &cl100k(), 0).unwrap();
    assert_eq!(
        by_prompt(&prompts),
        vec![
            ("Tell me a joke about".to_string(), 7, Some(17)),
            ("What is the capital ".to_string(), 7, Some(7)),
        ]
    );
    assert_eq!(load(&spec, 2, &cl100k(), 0).unwrap(), prompts, "deterministic");
}

#[test]
fn sharegpt_fixed_output_len_keeps_short_outputs_and_long_prompts() {
    let (_dir, path) = sharegpt_file();
    let spec = DatasetSpec::ShareGpt { path, output_len: Some(64) };
    let prompts = load(&spec, 4, &cl100k(), 0).unwrap();
    assert_eq!(
        by_prompt(&prompts),
        vec![
            (" go go go go go go g".to_string(), 1100, Some(64)),
            ("Say ok and nothing m".to_string(), 6, Some(64)),
            ("Tell me a joke about".to_string(), 7, Some(64)),
            ("What is the capital ".to_string(), 7, Some(64)),
        ]
    );
}

#[test]
fn sharegpt_takes_the_first_that_pass_in_seeded_order_and_cycles() {
    let (_dir, path) = sharegpt_file();
    let spec = DatasetSpec::ShareGpt { path, output_len: None };
    let tok = cl100k();
    let one = load(&spec, 1, &tok, 0).unwrap();
    let two = load(&spec, 2, &tok, 0).unwrap();
    assert_eq!(one[0], two[0]);
    let five = load(&spec, 5, &tok, 0).unwrap();
    assert_eq!(five.len(), 5);
    assert_eq!(five[0], two[0]);
    assert_eq!(five[2], two[0]);
    assert_eq!(five[3], two[1]);
    // Some seed puts the other conversation first.
    let firsts: Vec<String> = (0..8).map(|s| load(&spec, 1, &tok, s).unwrap()[0].text()).collect();
    assert!(firsts.iter().any(|t| t != &firsts[0]), "{firsts:?}");
}

#[test]
fn sharegpt_counts_with_a_real_llm_tokenizer() {
    let (_dir, path) = sharegpt_file();
    let tok = smollm2();
    let prompts = load(&DatasetSpec::ShareGpt { path, output_len: None }, 2, &tok, 0).unwrap();
    assert_counts_exact(&tok, &prompts);
    assert_eq!(prompts.len(), 2);
}

#[test]
fn sharegpt_errors_name_file_position_and_field() {
    let tok = cl100k();
    let load_sg = |content: &str| {
        let (_dir, path) = write("sg.json", content);
        let err = load(&DatasetSpec::ShareGpt { path: path.clone(), output_len: None }, 1, &tok, 0)
            .unwrap_err();
        (err.to_string(), path.display().to_string())
    };
    let (err, p) = load_sg("[{\"conversations\": [{\"from\": \"human\", \"value\": 5}]}]");
    assert_eq!(
        err,
        format!("{p}:1:48: field \"[0].conversations[0].value\" is invalid: invalid type: integer `5`, expected a string")
    );
    let (err, p) = load_sg("[\n{\"conversations\": [{\"from\": \"human\"}]}]");
    assert_eq!(
        err,
        format!("{p}:2:36: field \"[0].conversations[0]\" is invalid: missing field `value`")
    );
    let (err, p) = load_sg("[\n  {\"conversations\": [}\n]");
    assert_eq!(err, format!("{p}:2:22: invalid JSON: expected value"));
    let (err, p) = load_sg("{\"conversations\": []}");
    assert_eq!(
        err,
        format!("{p}:1: invalid type: map, expected a sequence; expected a JSON array of {{\"conversations\": [...]}} objects")
    );
    let (err, p) = load_sg("");
    assert_eq!(err, format!("{p}: the dataset is empty; expected a ShareGPT JSON array"));
    let (err, p) = load_sg("[]");
    assert_eq!(err, format!("{p}: the dataset is empty; expected a ShareGPT JSON array"));
    let (err, p) = load_sg("[{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}]}]");
    assert!(err.starts_with(&format!("{p}: no conversation has at least 2 turns")), "{err}");
    let (err, p) = load_sg(
        "[{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}, {\"from\": \"gpt\", \"value\": \"y\"}]}]",
    );
    assert!(
        err.starts_with(&format!("{p}: none of the 1 conversations passes the length filters")),
        "{err}"
    );
}

// ---------------------------------------------------------------- jsonl

#[test]
fn jsonl_reads_prompts_and_messages_and_cycles() {
    let content = concat!(
        "{\"prompt\": \"hello world\", \"max_tokens\": 12}\n",
        "\n",
        "   \n",
        "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi there\"}], \"output_tokens\": 5}\n",
        "{\"prompt\": \"no limit\"}\n",
    );
    let (_dir, path) = write("d.jsonl", content);
    let prompts = load(&DatasetSpec::Jsonl { path }, 5, &cl100k(), 0).unwrap();
    let msg =
        |role: &str, content: &str| ChatMessage { role: role.into(), content: content.into() };
    let hello = Prompt {
        body: PromptBody::Text("hello world".into()),
        prompt_tokens: 2,
        output_tokens: Some(12),
    };
    // "be brief\nhi there" is 5 cl100k tokens.
    let chat = Prompt {
        body: PromptBody::Chat(vec![msg("system", "be brief"), msg("user", "hi there")]),
        prompt_tokens: 5,
        output_tokens: Some(5),
    };
    let plain =
        Prompt { body: PromptBody::Text("no limit".into()), prompt_tokens: 2, output_tokens: None };
    assert_eq!(prompts, vec![hello.clone(), chat.clone(), plain, hello, chat]);
}

#[test]
fn jsonl_errors_name_line_and_field() {
    let tok = cl100k();
    let load_jl = |content: &str| {
        let (_dir, path) = write("data.jsonl", content);
        // Lines are read up to the prompts asked for: two reach the second line.
        let err = load(&DatasetSpec::Jsonl { path: path.clone() }, 2, &tok, 0).unwrap_err();
        (err.to_string(), path.display().to_string())
    };
    let ok = "{\"prompt\": \"a\"}\n";
    let (err, p) = load_jl(&format!("{ok}\n{{\"prompt\": 17}}\n"));
    assert_eq!(err, format!("{p}:3: field \"prompt\" must be a string (got number)"));
    let (err, p) = load_jl(&format!("{ok}{{\"prompt\": \"x\",}}\n"));
    assert_eq!(err, format!("{p}:2:16: invalid JSON: trailing comma"));
    let (err, p) = load_jl("{\"text\": \"x\"}\n");
    assert_eq!(
        err,
        format!("{p}:1: missing field \"prompt\" or \"messages\"; expected {{\"prompt\": \"...\"}} or {{\"messages\": [{{\"role\": \"user\", \"content\": \"...\"}}]}}")
    );
    let (err, p) = load_jl("{\"messages\": [{\"role\": \"user\", \"content\": [1]}]}\n");
    // An array is OpenAI content parts (text and images); each part must be an object.
    assert_eq!(
        err,
        format!("{p}:1: field \"messages[0].content[0]\" must be an object like {{\"type\": \"text\", \"text\": \"...\"}} (got number)")
    );
    let (err, p) = load_jl("{\"messages\": [{\"role\": \"user\", \"content\": 5}]}\n");
    assert_eq!(
        err,
        format!("{p}:1: field \"messages[0].content\" must be a string or an array of content parts (got number)")
    );
    let (err, p) = load_jl("{\"messages\": [{\"content\": \"x\"}]}\n");
    assert_eq!(err, format!("{p}:1: missing field \"messages[0].role\""));
    let (err, p) = load_jl("{\"prompt\": \"x\", \"max_tokens\": -3}\n");
    assert_eq!(
        err,
        format!("{p}:1: field \"max_tokens\" must be a non-negative integer (got number)")
    );
    let (err, p) = load_jl("{\"prompt\": \"x\", \"output_tokens\": \"9\"}\n");
    assert_eq!(
        err,
        format!("{p}:1: field \"output_tokens\" must be a non-negative integer (got string)")
    );
    let (err, p) = load_jl("[1, 2]\n");
    assert_eq!(
        err,
        format!("{p}:1: expected a JSON object like {{\"prompt\": \"...\"}} (got array)")
    );
    let (err, p) = load_jl("\n  \n");
    assert_eq!(
        err,
        format!("{p}: the dataset is empty; expected one JSON object per line, like {{\"prompt\": \"...\"}}")
    );
    let (err, p) = load_jl("");
    assert!(err.starts_with(&format!("{p}: the dataset is empty")), "{err}");
}

#[test]
fn missing_and_unreadable_files_are_named() {
    let missing = PathBuf::from("/nonexistent/servelab/data.jsonl");
    let err = load(&DatasetSpec::Jsonl { path: missing.clone() }, 1, &cl100k(), 0).unwrap_err();
    assert!(matches!(err, DatasetError::NotFound { .. }));
    assert_eq!(
        err.to_string(),
        "dataset file /nonexistent/servelab/data.jsonl does not exist; check --dataset-path"
    );
    let err = load(&DatasetSpec::ShareGpt { path: missing, output_len: None }, 1, &cl100k(), 0)
        .unwrap_err();
    assert!(matches!(err, DatasetError::NotFound { .. }));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bin.jsonl");
    std::fs::write(&path, [b'{', 0xff, 0xfe, b'}']).unwrap();
    let err = load(&DatasetSpec::Jsonl { path: path.clone() }, 1, &cl100k(), 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot read dataset file {}: not UTF-8 text (invalid byte at offset 1, line 1)",
            path.display()
        )
    );
}

#[test]
fn no_file_content_panics() {
    let tok = cl100k();
    let samples = [
        "",
        "\0",
        "[",
        "]",
        "{}",
        "null",
        "[null]",
        "[1]",
        "[{\"conversations\": null}]",
        "[{\"conversations\": {}}]",
        "[{\"conversations\": [1, 2]}]",
        "{\"prompt\": null}",
        "{\"messages\": null}",
        "{\"messages\": []}",
        "{\"messages\": [null]}",
        "\"x\"",
        "{\"prompt\": \"\\ud800\"}",
        "[{\"conversations\": [{\"value\": \"\"}, {\"value\": \"\"}]}]",
        "{\"prompt\": \"x\", \"messages\": []}",
        "{\"prompt\": \"x\", \"max_tokens\": 1e400}",
        "{\"prompt\": \"x\", \"max_tokens\": 18446744073709551616}",
    ];
    for s in samples {
        let (_dir, path) = write("f", s);
        let _ = load(&DatasetSpec::Jsonl { path: path.clone() }, 3, &tok, 0);
        let _ = load(&DatasetSpec::ShareGpt { path, output_len: None }, 3, &tok, 0);
    }
}

/// Endless inputs stop at a stated limit instead of filling memory (`/dev/zero` as a
/// tokenizer or a JSONL dataset grew until the process was killed).
#[test]
fn endless_files_are_refused_at_their_limit() {
    let zero = PathBuf::from("/dev/zero");
    if !zero.exists() {
        return;
    }
    let Err(err) = servelab_workload::Tokenizer::from_path(&zero) else { panic!("refused") };
    let err = err.to_string();
    assert!(err.contains("larger than the 128 MiB"), "{err}");
    let err = load(&DatasetSpec::Jsonl { path: zero }, 5, &cl100k(), 0).unwrap_err().to_string();
    assert!(err.contains("longer than 64 MiB"), "{err}");
}
