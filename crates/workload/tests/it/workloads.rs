//! The workload sources of today's serving: multi-turn sessions, trace replay, multimodal
//! prompts and Hugging Face datasets. Exact token lengths, determinism, formats and errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use servelab_workload::hf::{dataset_dir, load_hf, resolve_hf_dataset};
use servelab_workload::hub::HubConfig;
use servelab_workload::{
    load, load_sessions, load_trace, ContentPart, DatasetError, DatasetSpec, HfDatasetSpec,
    ImageFormat, ImageOptions, ImageSize, MessageContent, Prompt, PromptBody, SessionSource,
    SessionSpec, SyntheticSessions, ThinkTime, Tokenizer, TraceFormat, TraceOptions, TraceSpec,
};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(name)
}

fn smollm2() -> Tokenizer {
    Tokenizer::from_path(&testdata("smollm2-tokenizer.json")).unwrap()
}

fn cl100k() -> Tokenizer {
    Tokenizer::builtin("cl100k_base").unwrap()
}

fn write(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    (dir, path)
}

// ---------------------------------------------------------------- sessions

fn synthetic(turns: (u32, u32), system: u64) -> SessionSpec {
    SessionSpec {
        source: SessionSource::Synthetic(SyntheticSessions {
            turns_min: turns.0,
            turns_max: turns.1,
            input_len: 40,
            output_len: 20,
            range_ratio: 0.5,
            system_prompt_len: system,
        }),
        think_time: ThinkTime::Uniform {
            min: Duration::from_millis(100),
            max: Duration::from_millis(300),
        },
    }
}

#[test]
fn synthetic_sessions_are_exact_shared_and_deterministic() {
    for tok in [cl100k(), smollm2()] {
        let w = load_sessions(&synthetic((2, 5), 64), 30, &tok, 7).unwrap();
        assert_eq!(w.sessions.len(), 30);
        let system = w.sessions[0].system.clone().unwrap();
        assert_eq!(system.tokens, 64);
        assert_eq!(tok.encode(&system.text).len(), 64);
        for s in &w.sessions {
            // One shared system prompt, byte-identical (and one allocation).
            let sys = s.system.as_ref().unwrap();
            assert!(std::sync::Arc::ptr_eq(&sys.text, &system.text));
            assert!((2..=5).contains(&s.turns.len()), "{}", s.turns.len());
            for (k, t) in s.turns.iter().enumerate() {
                assert_eq!(tok.encode(&t.user).len() as u64, t.user_tokens, "{} turn {k}", s.id);
                assert!((20..=60).contains(&t.user_tokens), "{}", t.user_tokens);
                assert!((10..=30).contains(&t.output_tokens.unwrap()));
                if k == 0 {
                    assert_eq!(t.think_time_ns, 0);
                } else {
                    assert!((100_000_000..=300_000_000).contains(&t.think_time_ns));
                }
            }
            // The whole history of the last turn counts as the sum of its parts.
            let k = s.turns.len() - 1;
            let replies: Vec<String> = (0..k).map(|i| format!(" reply number {i}")).collect();
            let reply_tokens: Vec<u64> = replies.iter().map(|r| tok.count(r) as u64).collect();
            let messages = s.turn_messages(k, &replies).unwrap();
            let sum: u64 = messages.iter().map(|m| tok.count(&m.text()) as u64).sum();
            assert_eq!(s.turn_prompt_tokens(k, &reply_tokens).unwrap(), sum);
        }
        assert_eq!(w, load_sessions(&synthetic((2, 5), 64), 30, &tok, 7).unwrap());
        assert_ne!(w, load_sessions(&synthetic((2, 5), 64), 30, &tok, 8).unwrap());
    }
}

#[test]
fn turn_k_is_turn_k_minus_1_plus_reply_plus_new_message() {
    let w = load_sessions(&synthetic((4, 4), 16), 2, &cl100k(), 1).unwrap();
    let s = &w.sessions[1];
    let replies = ["first answer", "second answer", "third answer"];
    for k in 1..4 {
        let before = s.turn_messages(k - 1, &replies).unwrap();
        let now = s.turn_messages(k, &replies).unwrap();
        assert_eq!(now.len(), before.len() + 2);
        assert_eq!(now[..before.len()], before[..]);
        assert_eq!(now[before.len()].role, "assistant");
        assert_eq!(now[before.len()].text(), replies[k - 1]);
        assert_eq!(
            (now[before.len() + 1].role.as_str(), now[before.len() + 1].text()),
            ("user", s.turns[k].user.as_str().into())
        );
    }
    assert_eq!(s.turn_messages(0, &[] as &[String]).unwrap()[0].role, "system");
    assert!(matches!(s.turn_body(2, &replies).unwrap(), PromptBody::Chat(m) if m.len() == 6));
}

#[test]
fn sharegpt_sessions_keep_every_turn() {
    let tok = cl100k();
    let spec = |output_len| SessionSpec {
        source: SessionSource::ShareGpt {
            path: testdata("sharegpt-multiturn.json"),
            output_len,
            max_turns: None,
        },
        think_time: ThinkTime::Fixed(Duration::from_secs(1)),
    };
    let w = load_sessions(&spec(None), 2, &tok, 0).unwrap();
    let mut by_id: Vec<_> = w.sessions.iter().map(|s| (s.id.as_str(), s)).collect();
    by_id.sort_by_key(|(id, _)| *id);
    let (_, a) = by_id[0];
    let (_, b) = by_id[1];
    assert_eq!(a.system.as_ref().map(|s| &*s.text), Some("Be concise."));
    assert_eq!(a.turns.len(), 2);
    assert_eq!(a.turns[1].user, "Does it help multi-turn chats?");
    assert_eq!(
        a.turns[1].output_tokens,
        Some(
            tok.count("Yes: each turn resends the whole history, which is a shared prefix.") as u64
        )
    );
    assert_eq!((a.turns[0].think_time_ns, a.turns[1].think_time_ns), (0, 1_000_000_000));
    // The leading assistant message is dropped; the unanswered last question has no length.
    assert_eq!(b.system, None);
    assert_eq!(b.turns.len(), 1);
    assert_eq!(b.turns[0].user, "Name three prime numbers.");
    // With a fixed output length an unanswered question is a turn: "c" becomes a session and
    // "b" has 2 turns; 4 sessions asked of 3 repeat the first.
    let w = load_sessions(&spec(Some(50)), 4, &tok, 0).unwrap();
    let b = w.sessions.iter().find(|s| s.id == "b").unwrap();
    assert_eq!(b.turns.len(), 2);
    assert!(w.sessions.iter().any(|s| s.id == "c"));
    assert!(w.sessions.iter().all(|s| s.turns.iter().all(|t| t.output_tokens == Some(50))));
    assert_eq!(w.sessions[3].id, format!("{}#2", w.sessions[0].id));
    assert_eq!(
        w.sessions[3].turns,
        w.sessions[0].turns[..]
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let mut t = t.clone();
                t.think_time_ns = w.sessions[3].turns[k].think_time_ns;
                t
            })
            .collect::<Vec<_>>()
    );
}

#[test]
fn jsonl_conversations_in_both_shapes() {
    let tok = cl100k();
    let spec = SessionSpec {
        source: SessionSource::Jsonl {
            path: testdata("conversations.jsonl"),
            output_len: None,
            max_turns: None,
        },
        think_time: ThinkTime::Zero,
    };
    let w = load_sessions(&spec, 3, &tok, 0).unwrap();
    let ids: Vec<&str> = w.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["trip", "code", "line-3"]);
    let trip = &w.sessions[0];
    assert_eq!(trip.turns.len(), 2);
    assert_eq!(
        trip.turns[1].output_tokens,
        Some(tok.count("Start with Alfama and the castle, then walk down to the river.") as u64)
    );
    let code = &w.sessions[1];
    assert_eq!(code.system.as_ref().unwrap().tokens, tok.count("You review Rust code.") as u64);
    assert_eq!(
        code.turns.iter().map(|t| (t.output_tokens, t.think_time_ns)).collect::<Vec<_>>(),
        [(Some(64), 0), (Some(128), 1_500_000_000)]
    );
    assert_eq!(w.sessions[2].turns[0].output_tokens, Some(32));
    assert_eq!(w.sessions[2].turns[0].user_tokens, tok.count("Tell me a joke.") as u64);

    let bad = |content: &str| {
        let (_d, path) = write("c.jsonl", content);
        let spec = SessionSpec {
            source: SessionSource::Jsonl { path: path.clone(), output_len: None, max_turns: None },
            think_time: ThinkTime::Zero,
        };
        (load_sessions(&spec, 1, &tok, 0).unwrap_err().to_string(), path.display().to_string())
    };
    let (e, p) = bad("{\"turns\": [{\"user\": \"a\", \"max_tokens\": \"x\"}]}\n");
    assert_eq!(
        e,
        format!("{p}:1: field \"turns[0].max_tokens\" must be a non-negative integer (got string)")
    );
    let (e, p) = bad("\n{\"turns\": [{\"user\": \"a\", \"think_time_ms\": -1}]}\n");
    assert_eq!(e, format!("{p}:2: field \"turns[0].think_time_ms\" must be a non-negative number of milliseconds (got number)"));
    let (e, p) = bad("{\"text\": 1}\n");
    assert!(e.starts_with(&format!("{p}:1: missing field \"messages\" or \"turns\"")), "{e}");
}

// ---------------------------------------------------------------- traces

fn mooncake(path: PathBuf, options: TraceOptions) -> TraceSpec {
    TraceSpec { path, format: TraceFormat::Mooncake { block_size: 512 }, options }
}

#[test]
fn mooncake_equal_hash_ids_are_identical_blocks() {
    for tok in [cl100k(), smollm2()] {
        let w = load_trace(
            &mooncake(testdata("mooncake-trace.jsonl"), TraceOptions::default()),
            &tok,
            3,
        )
        .unwrap();
        assert_eq!(w.len(), 6);
        assert_eq!(
            w.arrivals_ns,
            [0, 250_000_000, 250_000_000, 900_000_000, 1_500_000_000, 2_100_000_000]
        );
        assert_eq!(w.input_tokens, [1200, 700, 1100, 300, 1024, 2000]);
        assert_eq!(w.output_tokens, [40, 12, 64, 8, 30, 100]);
        let texts: Vec<String> = (0..w.len()).map(|i| w.text(i)).collect();
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(tok.encode(t).len() as u64, w.input_tokens[i], "request {i}");
            assert_eq!(w.prompt(i).prompt_tokens, w.input_tokens[i]);
        }
        // Token-exact blocks: the first 512 tokens are block 0 in every request.
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t)).collect();
        let block = |r: usize, b: usize| {
            tok.decode(&ids[r][b * 512..((b + 1) * 512).min(ids[r].len())]).unwrap()
        };
        for r in 1..6 {
            if r != 3 {
                assert_eq!(block(r, 0), block(0, 0), "request {r} block 0");
            }
        }
        // [0, 1, ...] shared by requests 0, 2, 4, 5; [0, 1, 2] by 0 and 5 (2 is partial in 0).
        for r in [2, 4, 5] {
            assert_eq!(block(r, 1), block(0, 1), "request {r} block 1");
        }
        let shared = tok.decode(&ids[0][..1200]).unwrap();
        assert!(texts[5].starts_with(&shared), "request 5 starts with all of request 0");
        assert!(texts[0].starts_with(&texts[4]), "request 4 is blocks 0 and 1 exactly");
        // Different ids: different blocks.
        assert_ne!(block(1, 1), block(0, 1));
        assert_ne!(block(2, 2), block(0, 2));
        assert!(!texts[3].starts_with(&block(0, 0)[..20]));
        // Deterministic for the seed, different for another.
        let again = load_trace(
            &mooncake(testdata("mooncake-trace.jsonl"), TraceOptions::default()),
            &tok,
            3,
        )
        .unwrap();
        assert_eq!(again.text(5), texts[5]);
        let other = load_trace(
            &mooncake(testdata("mooncake-trace.jsonl"), TraceOptions::default()),
            &tok,
            4,
        )
        .unwrap();
        assert_ne!(other.text(5), texts[5]);
    }
}

#[test]
fn trace_window_speedup_and_cap() {
    let o = TraceOptions {
        speedup: 4.0,
        window_start: Duration::from_millis(250),
        window_duration: Some(Duration::from_millis(1750)),
        max_requests: Some(3),
    };
    let w = load_trace(&mooncake(testdata("mooncake-trace.jsonl"), o), &cl100k(), 0).unwrap();
    // Window [250, 2000) ms keeps lines 2, 3, 4, 5; the cap keeps 3 of them; (t − 250) / 4.
    assert_eq!(w.lines, [2, 3, 4]);
    assert_eq!(w.arrivals_ns, [0, 0, 162_500_000]);
    assert_eq!((w.stats.rows, w.stats.outside_window, w.stats.over_cap), (6, 2, 1));
    let zero = TraceOptions { speedup: 0.0, ..TraceOptions::default() };
    let e =
        load_trace(&mooncake(testdata("mooncake-trace.jsonl"), zero), &cl100k(), 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid dataset parameter: trace speedup must be a positive number, got 0"
    );
}

#[test]
fn azure_trace_offsets_from_the_first_row() {
    let tok = smollm2();
    let spec = TraceSpec {
        path: testdata("azure-trace.csv"),
        format: TraceFormat::Azure,
        options: TraceOptions::default(),
    };
    let w = load_trace(&spec, &tok, 0).unwrap();
    assert_eq!(w.arrivals_ns, [0, 4_314_579_000, 4_319_410_000, 7_819_410_000, 15_000_000_000]);
    assert_eq!(w.input_tokens, [374, 396, 879, 91, 2001]);
    assert_eq!(w.stats.zero_length, 1, "GeneratedTokens 0 is skipped");
    for i in 0..w.len() {
        assert_eq!(tok.encode(&w.text(i)).len() as u64, w.input_tokens[i]);
    }
    // Unique heads: no two prompts share their first 16 tokens.
    let heads: std::collections::HashSet<Vec<u32>> =
        (0..w.len()).map(|i| tok.encode(&w.text(i))[..16].to_vec()).collect();
    assert_eq!(heads.len(), w.len());
}

#[test]
fn burstgpt_filters_by_model_and_log_type() {
    let spec = |model: Option<&str>, log: Option<&str>| TraceSpec {
        path: testdata("burstgpt.csv"),
        format: TraceFormat::BurstGpt {
            model: model.map(Into::into),
            log_type: log.map(Into::into),
        },
        options: TraceOptions::default(),
    };
    let w = load_trace(&spec(None, None), &cl100k(), 0).unwrap();
    assert_eq!(w.lines, [2, 3, 5, 6, 7, 8]);
    assert_eq!(w.stats.zero_length, 1);
    assert_eq!(w.arrivals_ns[1], 40_000_000_000);
    let w = load_trace(&spec(Some("gpt-4"), Some("Conversation log")), &cl100k(), 0).unwrap();
    // GPT-4 conversation rows: line 4 (0 response tokens, skipped) and line 6; offsets count
    // from the first kept row (118 s).
    assert_eq!((w.lines.clone(), w.arrivals_ns.clone()), (vec![6], vec![13_000_000_000]));
    assert_eq!((w.stats.filtered, w.stats.zero_length), (5, 1));
    assert_eq!(w.input_tokens, [1913]);
    assert_eq!(cl100k().encode(&w.text(0)).len(), 1913);
}

#[test]
fn trace_errors_name_line_and_field() {
    let tok = cl100k();
    let err = |format: TraceFormat, content: &str| {
        let (_d, path) = write("t", content);
        let spec = TraceSpec { path: path.clone(), format, options: TraceOptions::default() };
        (load_trace(&spec, &tok, 0).unwrap_err().to_string(), path.display().to_string())
    };
    let mc = || TraceFormat::Mooncake { block_size: 512 };
    let ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
    let (e, p) = err(mc(), &format!("{ok}{{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}}\n"));
    assert_eq!(e, format!("{p}:2: field \"hash_ids\" has 1 ids, but input_length 600 needs ceil(600 / 512) = 2 blocks of 512 tokens; pass the trace's block size if it is not 512"));
    let (e, p) = err(mc(), &format!("{ok}\n{{\"timestamp\": 5, \"input_length\": -1, \"output_length\": 1, \"hash_ids\": []}}\n"));
    assert!(
        e.starts_with(&format!("{p}:3:")) && e.contains("field \"input_length\" is invalid"),
        "{e}"
    );
    let (e, p) = err(mc(), "{\"timestamp\": 5, \"output_length\": 1, \"hash_ids\": []}\n");
    assert!(e.starts_with(&format!("{p}:1: missing field `input_length`")), "{e}");
    let (e, p) = err(
        TraceFormat::Azure,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,x\n",
    );
    assert_eq!(
        e,
        format!("{p}:2: field \"GeneratedTokens\" must be a non-negative integer (got \"x\")")
    );
    let (e, p) =
        err(TraceFormat::Azure, "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,5\n");
    assert!(e.starts_with(&format!("{p}:2: field \"TIMESTAMP\" must be a date and time")), "{e}");
    let (e, p) = err(TraceFormat::Azure, "time,in,out\n1,2,3\n");
    assert!(e.starts_with(&format!("{p}:1: the header has no column \"TIMESTAMP\"")), "{e}");
    let bg = || TraceFormat::BurstGpt { model: None, log_type: None };
    let (e, p) = err(
        bg(),
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,5\n",
    );
    assert!(e.starts_with(&format!("{p}:2: has 3 fields but the header has 6")), "{e}");
    let (e, p) = err(bg(), "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\nsoon,ChatGPT,5,5,10,API log\n");
    assert_eq!(e, format!("{p}:2: field \"Timestamp\" must be a number of seconds (got \"soon\")"));
    let (e, _) = err(mc(), "");
    assert!(e.contains("the dataset is empty"), "{e}");
}

// ---------------------------------------------------------------- multimodal

fn decode_data_url(url: &str) -> (String, Vec<u8>) {
    let (head, b64) = url.strip_prefix("data:").unwrap().split_once(";base64,").unwrap();
    (head.to_string(), base64::engine::general_purpose::STANDARD.decode(b64).unwrap())
}

fn image_dims(mime: &str, bytes: &[u8]) -> (u32, u32) {
    match mime {
        "image/png" => {
            let reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
            (reader.info().width, reader.info().height)
        }
        "image/jpeg" => {
            let mut d = jpeg_decoder::Decoder::new(bytes);
            let pixels = d.decode().unwrap();
            let info = d.info().unwrap();
            assert_eq!(pixels.len(), info.width as usize * info.height as usize * 3);
            (info.width as u32, info.height as u32)
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn random_images_decode_to_the_requested_sizes() {
    let tok = cl100k();
    for format in [ImageFormat::Jpeg, ImageFormat::Png] {
        let spec = DatasetSpec::RandomMultimodal {
            input_len: 50,
            output_len: 10,
            range: servelab_workload::LengthRange::EXACT,
            images: ImageOptions {
                per_prompt: 2,
                sizes: vec![
                    ImageSize { width: 64, height: 48 },
                    ImageSize { width: 17, height: 33 },
                ],
                format,
            },
        };
        let prompts = load(&spec, 4, &tok, 9).unwrap();
        let mut seen = std::collections::HashSet::new();
        for p in &prompts {
            assert_eq!(p.prompt_tokens, 50);
            assert_eq!(tok.encode(&p.text()).len(), 50, "text only");
            assert_eq!(p.image_count(), 2);
            let PromptBody::Chat(m) = &p.body else { panic!("chat expected") };
            assert_eq!((m.len(), m[0].role.as_str()), (1, "user"));
            for url in m[0].content.image_urls() {
                let (mime, bytes) = decode_data_url(url);
                assert_eq!(mime, format.mime());
                let dims = image_dims(&mime, &bytes);
                assert!(dims == (64, 48) || dims == (17, 33), "{dims:?}");
                assert!(seen.insert(bytes), "every image differs");
            }
        }
        assert_eq!(prompts, load(&spec, 4, &tok, 9).unwrap());
    }
}

#[test]
fn jsonl_images_are_read_or_passed_through() {
    let tok = cl100k();
    let prompts =
        load(&DatasetSpec::Jsonl { path: testdata("multimodal.jsonl") }, 3, &tok, 0).unwrap();
    let file = std::fs::read(testdata("images/red-4x3.png")).unwrap();
    let local = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&file)
    );
    let parts = |p: &Prompt| match &p.body {
        PromptBody::Chat(m) => match &m[0].content {
            MessageContent::Parts(parts) => parts.clone(),
            MessageContent::Text(_) => panic!("parts expected"),
        },
        PromptBody::Text(_) => panic!("chat expected"),
    };
    assert_eq!(
        parts(&prompts[0]),
        [ContentPart::text("What colour is this image?"), ContentPart::image(local.clone())]
    );
    assert_eq!(prompts[0].prompt_tokens, tok.count("What colour is this image?") as u64);
    assert_eq!(prompts[0].output_tokens, Some(8));
    assert_eq!(parts(&prompts[1])[2], ContentPart::image("https://example.invalid/cat.jpg"));
    assert_eq!(parts(&prompts[2]), [ContentPart::text("Is this red?"), ContentPart::image(local)]);
    let (mime, bytes) = decode_data_url(prompts[2].body_image(0));
    assert_eq!(image_dims(&mime, &bytes), (4, 3));

    let (_d, path) = write("m.jsonl", "{\"prompt\": \"x\", \"images\": [\"missing.png\"]}\n");
    let e = load(&DatasetSpec::Jsonl { path: path.clone() }, 1, &tok, 0).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:1: cannot read image file", path.display())), "{e}");
    let (_d, path) = write("m.jsonl", "{\"prompt\": \"x\", \"images\": [3]}\n");
    let e = load(&DatasetSpec::Jsonl { path: path.clone() }, 1, &tok, 0).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:1: field \"images[0]\" must be a path or URL string (got number)",
            path.display()
        )
    );
}

trait FirstImage {
    fn body_image(&self, i: usize) -> &str;
}

impl FirstImage for Prompt {
    fn body_image(&self, i: usize) -> &str {
        match &self.body {
            PromptBody::Chat(m) => m.iter().flat_map(|m| m.content.image_urls()).nth(i).unwrap(),
            PromptBody::Text(_) => panic!("no image"),
        }
    }
}

// ---------------------------------------------------------------- hugging face

fn offline(cache: &Path) -> HubConfig {
    HubConfig {
        endpoint: "http://127.0.0.1:9".into(),
        cache_dir: cache.to_path_buf(),
        token: None,
        offline: true,
        connect_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(5),
    }
}

fn hf(name: &str, split: Option<&str>, subset: Option<&str>) -> HfDatasetSpec {
    HfDatasetSpec {
        name: name.into(),
        split: split.map(Into::into),
        subset: subset.map(Into::into),
        output_len: None,
    }
}

#[test]
fn hf_cache_resolution_from_a_fixture() {
    let cache = testdata("hf-cache");
    let config = offline(&cache);
    let snap = dataset_dir(&cache, "servelab/tiny-instruct").join("snapshots/0a1b2c3d");
    let files =
        resolve_hf_dataset(&hf("servelab/tiny-instruct", None, None), Some(&config)).unwrap();
    assert_eq!(
        files,
        [snap.join("chat/train/part-0.json"), snap.join("data/train-00000-of-00001.jsonl")]
    );
    let files =
        resolve_hf_dataset(&hf("servelab/tiny-instruct", Some("test"), None), Some(&config))
            .unwrap();
    assert_eq!(files, [snap.join("data/test-00000-of-00001.jsonl")]);
    let files =
        resolve_hf_dataset(&hf("servelab/tiny-instruct", None, Some("chat")), Some(&config))
            .unwrap();
    assert_eq!(files, [snap.join("chat/train/part-0.json")]);
    // A local directory works the same way.
    let files = resolve_hf_dataset(&hf(snap.to_str().unwrap(), Some("test"), None), None).unwrap();
    assert_eq!(files, [snap.join("data/test-00000-of-00001.jsonl")]);

    let tok = cl100k();
    let prompts =
        load_hf(&hf("servelab/tiny-instruct", None, None), Some(&config), 5, &tok, 0).unwrap();
    assert_eq!(prompts.len(), 5);
    let mut texts: Vec<String> = prompts.iter().map(Prompt::text).collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            "Answer briefly.\nCapital of Italy?",
            "Hi, who are you?",
            "Name a primary colour.",
            "Translate to French.\n\nGood morning",
            "Write a haiku about caches.",
        ]
    );
    for p in &prompts {
        assert_eq!(p.prompt_tokens, tok.count(&p.text()) as u64);
    }
    let haiku = prompts.iter().find(|p| p.text().starts_with("Write")).unwrap();
    assert_eq!(
        haiku.output_tokens,
        Some(
            tok.count("Keys kept warm in rows / the second question answers / before it is asked")
                as u64
        )
    );

    let e = resolve_hf_dataset(&hf("servelab/absent", None, None), Some(&config))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "--hf-name servelab/absent: not a local directory and not in the Hugging Face cache ("
        ),
        "{e}"
    );
    assert!(e.contains("datasets--servelab--absent") && e.contains("HF_HUB_OFFLINE"), "{e}");
    let e = resolve_hf_dataset(&hf("servelab/tiny-instruct", Some("dev"), None), Some(&config))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no data file of split \"dev\""), "{e}");
}

/// A 127.0.0.1 server that answers GETs by path from `routes` (404 otherwise), records the
/// request heads, and stops after `max` requests.
fn serve(
    routes: Vec<(String, Vec<u8>)>,
    max: usize,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max) {
            let Ok(mut stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            log.lock().unwrap().push(head);
            let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
                Some((_, b)) => ("200 OK", b.clone()),
                None => ("404 Not Found", Vec::new()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    (endpoint, seen)
}

#[test]
fn hf_download_into_the_cache_then_offline() {
    let info = r#"{"id": "org/data", "sha": "abc123", "siblings": [{"rfilename": "README.md"},
        {"rfilename": "data/train.jsonl"}, {"rfilename": "data/test.jsonl"}, {"rfilename": "../evil.jsonl"}]}"#;
    let train = "{\"question\": \"Why cache?\", \"answer\": \"Speed.\"}\n";
    let (endpoint, seen) = serve(
        vec![
            ("/api/datasets/org/data".into(), info.as_bytes().to_vec()),
            (
                "/datasets/org/data/resolve/abc123/data/train.jsonl".into(),
                train.as_bytes().to_vec(),
            ),
        ],
        2,
    );
    let cache = tempfile::tempdir().unwrap();
    let config =
        HubConfig { endpoint, token: Some("tok".into()), offline: false, ..offline(cache.path()) };
    let files = resolve_hf_dataset(&hf("org/data", None, None), Some(&config)).unwrap();
    let expected = dataset_dir(cache.path(), "org/data").join("snapshots/abc123/data/train.jsonl");
    assert_eq!(files, std::slice::from_ref(&expected));
    assert_eq!(std::fs::read_to_string(&expected).unwrap(), train);
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    assert!(
        heads.iter().all(|h| h.to_ascii_lowercase().contains("authorization: bearer tok")),
        "{heads:?}"
    );
    // Now cached: no network needed.
    let prompts =
        load_hf(&hf("org/data", None, None), Some(&offline(cache.path())), 1, &cl100k(), 0)
            .unwrap();
    assert_eq!(prompts[0].text(), "Why cache?");
    assert_eq!(prompts[0].output_tokens, Some(cl100k().count("Speed.") as u64));
}

#[test]
fn hf_download_errors_say_what_was_tried() {
    let (endpoint, _) = serve(Vec::new(), 1);
    let cache = tempfile::tempdir().unwrap();
    let config = HubConfig { endpoint: endpoint.clone(), offline: false, ..offline(cache.path()) };
    let e = resolve_hf_dataset(&hf("org/none", None, None), Some(&config)).unwrap_err();
    assert!(matches!(e, DatasetError::Hub(_)));
    let e = e.to_string();
    assert!(e.contains(&format!("{endpoint}/api/datasets/org/none was not found")), "{e}");
    assert!(e.contains("huggingface-cli download --repo-type dataset org/none"), "{e}");
}
