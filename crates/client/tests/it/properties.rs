//! Property tests on stable Rust: a seeded random-input harness (no shrinking; a failure
//! prints the seed and the input, which reproduces it exactly).
//!
//! | property | cases |
//! |---|---|
//! | SSE: random splits of a generated valid stream give the events of one push | 2,000 streams × 16 splits |
//! | SSE: random bytes never panic, the buffer never exceeds the limit, splits do not matter | 5,000 inputs |
//! | SSE: a limit above every event changes nothing | 1,000 streams |
//! | `openai::parse_event` on mutated and random JSON never panics | 20,000 inputs |
//! | `server_timings::from_event` on the same never panics | (same inputs) |
//! | `prom::parse`: generated exposition text parses back exactly | 2,000 documents |
//! | `prom::parse` and `engine_series` on mutated text never panic | 10,000 inputs |
//!
//! The generator is SplitMix64 (no dependency, the same sequence on every platform).
//! `SERVELAB_PROPERTY_SCALE=N` multiplies every count (a longer run, e.g. for
//! docs/reliability.md); `SERVELAB_PROPERTY_SEED=S` changes the seed.

use std::ops::{Bound, RangeBounds};

use servelab_client::openai::parse_event;
use servelab_client::prom::{engine_series, parse, Sample};
use servelab_client::server_timings::from_event;
use servelab_client::sse::{SseData, SseParser};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough to pick test inputs.
struct SmallRng(u64);

impl SmallRng {
    fn seed_from_u64(seed: u64) -> Self {
        SmallRng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `range` (the modulo bias is irrelevant for picking test inputs).
    fn random_range(&mut self, range: impl RangeBounds<usize>) -> usize {
        let lo = match range.start_bound() {
            Bound::Included(&a) => a,
            Bound::Excluded(&a) => a + 1,
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(&b) => b,
            Bound::Excluded(&b) => b - 1,
            Bound::Unbounded => usize::MAX,
        };
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    fn random_bool(&mut self, p: f64) -> bool {
        self.random::<f64>() < p
    }

    fn random<T: Draw>(&mut self) -> T {
        T::draw(self)
    }
}

trait Draw {
    fn draw(r: &mut SmallRng) -> Self;
}

impl Draw for u8 {
    fn draw(r: &mut SmallRng) -> Self {
        r.next_u64() as u8
    }
}

impl Draw for i64 {
    fn draw(r: &mut SmallRng) -> Self {
        r.next_u64() as i64
    }
}

/// Uniform in [0, 1).
impl Draw for f64 {
    fn draw(r: &mut SmallRng) -> Self {
        (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What `scripts/fuzz.sh` reports per target.
#[allow(clippy::print_stderr)]
fn executions(target: &str, n: u64) {
    eprintln!("{target}: {n} executions, 0 crashes");
}

fn scale() -> u64 {
    std::env::var("SERVELAB_PROPERTY_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

/// A generator for one property, seeded from the property's name (and the optional seed).
fn rng(property: &str) -> (SmallRng, u64) {
    let base: u64 =
        std::env::var("SERVELAB_PROPERTY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    // FNV-1a of the name: each property draws its own stream.
    let seed = property.bytes().fold(0xcbf2_9ce4_8422_2325u64 ^ base, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (SmallRng::seed_from_u64(seed), seed)
}

// ---------------------------------------------------------------- SSE

/// Random text for a data line: ASCII, multi-byte characters, JSON punctuation, no newline.
fn line_text(r: &mut SmallRng) -> String {
    const PIECES: &[&str] = &[
        "a",
        "Z",
        " ",
        ":",
        "{",
        "}",
        "\"",
        "data",
        "\u{e9}",
        "\u{1F600}",
        "\u{4e2d}",
        "\t",
        "[DONE]",
    ];
    (0..r.random_range(0..12)).map(|_| PIECES[r.random_range(0..PIECES.len())]).collect()
}

/// A valid SSE stream and the payloads a parser must hand out for it.
fn valid_stream(r: &mut SmallRng) -> (Vec<u8>, Vec<SseData>) {
    // A lone CR is a line end too, but CR then LF is one line end: a stream that ends lines
    // with CR keeps to it (mixing CR with LF would be ambiguous), the others mix LF and CRLF.
    let cr_only = r.random_bool(0.2);
    let eol = |r: &mut SmallRng| {
        if cr_only {
            "\r"
        } else if r.random_bool(0.3) {
            "\r\n"
        } else {
            "\n"
        }
    };
    let mut bytes = Vec::new();
    let mut want = Vec::new();
    for _ in 0..r.random_range(0..8) {
        let mut data: Option<String> = None;
        for _ in 0..r.random_range(1..4) {
            let e = eol(r);
            match r.random_range(0..5) {
                0 => bytes.extend_from_slice(format!(": comment {}{e}", line_text(r)).as_bytes()),
                1 => bytes.extend_from_slice(format!("event: x{e}id: 7{e}").as_bytes()),
                _ => {
                    let text = line_text(r);
                    let space = if r.random_bool(0.7) { " " } else { "" };
                    bytes.extend_from_slice(format!("data:{space}{text}{e}").as_bytes());
                    // A leading space after the colon is dropped, and only one.
                    let value = if space.is_empty() {
                        text.strip_prefix(' ').map(str::to_string).unwrap_or(text)
                    } else {
                        text
                    };
                    data = Some(match data {
                        None => value,
                        Some(d) => format!("{d}\n{value}"),
                    });
                }
            }
        }
        bytes.extend_from_slice(eol(r).as_bytes());
        if let Some(d) = data {
            want.push(SseData::Text(d));
        }
    }
    (bytes, want)
}

fn push_split(stream: &[u8], cuts: &[usize], limit: Option<usize>) -> (Vec<SseData>, SseParser) {
    let mut p = limit.map_or_else(SseParser::new, SseParser::with_limit);
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
        p.push(&stream[at..c], &mut out).expect("within the limit");
        at = c;
    }
    (out, p)
}

#[test]
fn sse_any_split_of_a_valid_stream_gives_the_events_of_one_push() {
    let (mut r, seed) = rng("sse_splits");
    for case in 0..2_000 * scale() {
        let (stream, want) = valid_stream(&mut r);
        let (whole, p) = push_split(&stream, &[], None);
        assert_eq!(whole, want, "seed {seed} case {case}: {:?}", String::from_utf8_lossy(&stream));
        assert!(p.pending().is_empty());
        for _ in 0..16 {
            let mut cuts: Vec<usize> =
                (0..r.random_range(0..6)).map(|_| r.random_range(0..=stream.len())).collect();
            cuts.sort_unstable();
            let (split, _) = push_split(&stream, &cuts, None);
            assert_eq!(
                split,
                want,
                "seed {seed} case {case} cuts {cuts:?}: {:?}",
                String::from_utf8_lossy(&stream)
            );
        }
    }
    executions("sse-split", 2_000 * scale());
}

#[test]
fn sse_a_limit_above_every_event_changes_nothing() {
    let (mut r, seed) = rng("sse_limit_above");
    for case in 0..1_000 * scale() {
        let (stream, want) = valid_stream(&mut r);
        let cuts: Vec<usize> = (1..stream.len()).collect();
        // No generated event is longer than the whole stream.
        let (out, p) = push_split(&stream, &cuts, Some(stream.len().max(4)));
        assert_eq!(out, want, "seed {seed} case {case}");
        assert!(p.capacity() <= stream.len().max(4));
    }
    executions("sse-limit", 1_000 * scale());
}

#[test]
fn sse_random_bytes_never_panic_nor_grow_past_the_limit() {
    let (mut r, seed) = rng("sse_random_bytes");
    const ALPHABET: &[u8] = b"data: \n\r\n:{}\"x\xff\xc3\xa9";
    for case in 0..5_000 * scale() {
        let limit = r.random_range(4..600);
        let mut p = SseParser::with_limit(limit);
        let mut out = Vec::new();
        let mut all = Vec::new();
        let mut overflowed = false;
        for _ in 0..r.random_range(1..30) {
            let n = r.random_range(0..200);
            let piece: Vec<u8> = (0..n)
                .map(|_| {
                    if r.random_bool(0.8) {
                        ALPHABET[r.random_range(0..ALPHABET.len())]
                    } else {
                        r.random()
                    }
                })
                .collect();
            all.extend_from_slice(&piece);
            let res = p.push(&piece, &mut out);
            assert!(
                p.pending().len() <= limit && p.capacity() <= limit,
                "seed {seed} case {case}: held {} (capacity {}) over a limit of {limit}",
                p.pending().len(),
                p.capacity()
            );
            if res.is_err() {
                assert!(
                    p.pending().is_empty(),
                    "seed {seed} case {case}: kept bytes after overflow"
                );
                overflowed = true;
                break;
            }
        }
        // Framing does not depend on how reads split the bytes: the same events as one push
        // without a limit, and as many as fit before an overflow.
        let mut whole = Vec::new();
        SseParser::with_limit(usize::MAX).push(&all, &mut whole).unwrap();
        if overflowed {
            assert!(whole.starts_with(&out), "seed {seed} case {case}: {all:?}");
        } else {
            assert_eq!(out, whole, "seed {seed} case {case}: {all:?}");
        }
    }
    executions("sse-random", 5_000 * scale());
}

// ---------------------------------------------------------------- OpenAI events

const EVENTS: &[&str] = &[
    r#"{"id":"c","object":"text_completion","choices":[{"index":0,"text":" a","finish_reason":null}]}"#,
    r#"{"choices":[{"delta":{"role":"assistant","content":"h\u00e9"},"finish_reason":null}]}"#,
    r#"{"choices":[{"delta":{"reasoning_content":"hm"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
    r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":2}}}"#,
    r#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#,
    r#"{"object":"error","message":"old style","code":400}"#,
    r#"{"choices":[{"text":"x","finish_reason":"length"}],"timings":{"prompt_n":12,"prompt_ms":18.2,"predicted_n":64,"predicted_ms":480.0}}"#,
];

/// A random JSON value, nested up to `depth`.
fn json_value(r: &mut SmallRng, depth: u32) -> String {
    match r.random_range(0..if depth == 0 { 6 } else { 8 }) {
        0 => "null".into(),
        1 => r.random_bool(0.5).to_string(),
        2 => r.random::<i64>().to_string(),
        3 => format!("{:e}", r.random::<f64>() * 1e300),
        4 => ["18446744073709551616", "-0", "1e400", "-1"][r.random_range(0..4)].into(),
        5 => serde_json::to_string(&line_text(r)).unwrap_or_default(),
        6 => format!(
            "[{}]",
            (0..r.random_range(0..3))
                .map(|_| json_value(r, depth - 1))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => {
            const KEYS: &[&str] = &[
                "choices",
                "text",
                "delta",
                "content",
                "reasoning_content",
                "usage",
                "prompt_tokens",
                "completion_tokens",
                "error",
                "message",
                "object",
                "finish_reason",
                "timings",
                "prompt_n",
                "predicted_ms",
            ];
            let fields: Vec<String> = (0..r.random_range(0..4))
                .map(|_| {
                    format!(
                        "\"{}\":{}",
                        KEYS[r.random_range(0..KEYS.len())],
                        json_value(r, depth - 1)
                    )
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

/// `s` with a few random byte edits (flips, inserts, deletions, a cut), as text.
fn mutate(r: &mut SmallRng, s: &str) -> String {
    let mut b = s.as_bytes().to_vec();
    for _ in 0..r.random_range(1..4) {
        if b.is_empty() {
            break;
        }
        let i = r.random_range(0..b.len());
        match r.random_range(0..4) {
            0 => b[i] = r.random(),
            1 => b.insert(i, b"{}[]\",:0-e\\"[r.random_range(0..11)]),
            2 => {
                b.remove(i);
            }
            _ => b.truncate(i),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn openai_events_parse_and_mutated_or_random_json_never_panics() {
    for e in EVENTS {
        // Each seed parses, as an event or as a server error.
        let _ = parse_event(e);
        assert!(serde_json::from_str::<serde_json::Value>(e).is_ok(), "{e}");
    }
    assert!(parse_event(EVENTS[0]).is_ok() && parse_event(EVENTS[4]).is_err());
    let (mut r, _) = rng("openai_events");
    for _ in 0..20_000 * scale() {
        let input = match r.random_range(0..3) {
            0 => {
                let e = EVENTS[r.random_range(0..EVENTS.len())];
                mutate(&mut r, e)
            }
            1 => json_value(&mut r, 4),
            _ => {
                // A valid event with one field replaced by random JSON.
                let e = EVENTS[r.random_range(0..EVENTS.len())];
                let mut v: serde_json::Value = serde_json::from_str(e).unwrap();
                if let Some(obj) = v.as_object_mut() {
                    let keys: Vec<String> = obj.keys().cloned().collect();
                    let k = &keys[r.random_range(0..keys.len())];
                    let repl = json_value(&mut r, 3);
                    obj.insert(k.clone(), serde_json::from_str(&repl).unwrap_or_default());
                }
                v.to_string()
            }
        };
        // Never panics; a usage it accepts is within bounds.
        if let Ok(ev) = parse_event(&input) {
            if let Some(u) = ev.usage {
                assert!(u.completion_tokens <= servelab_client::openai::MAX_TOKENS, "{input}");
            }
        }
        let _ = from_event(&input);
    }
    executions("openai-event", 20_000 * scale());
}

// ---------------------------------------------------------------- Prometheus text

fn metric_name(r: &mut SmallRng) -> String {
    const FIRST: &[u8] = b"abcxyzABC_:";
    const REST: &[u8] = b"abcxyz019_:";
    let mut s = String::from(FIRST[r.random_range(0..FIRST.len())] as char);
    for _ in 0..r.random_range(0..12) {
        s.push(REST[r.random_range(0..REST.len())] as char);
    }
    if r.random_bool(0.3) {
        s.insert_str(0, ["vllm:", "llamacpp:", "sglang:"][r.random_range(0..3)]);
    }
    s
}

fn label_value(r: &mut SmallRng) -> String {
    const PIECES: &[&str] =
        &["a", " ", "\"", "\\", "\n", "}", "{", ",", "=", "\u{e9}", "le", "+Inf"];
    (0..r.random_range(0..8)).map(|_| PIECES[r.random_range(0..PIECES.len())]).collect()
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn sample_value(r: &mut SmallRng) -> f64 {
    match r.random_range(0..5) {
        0 => r.random_range(0..1000) as f64,
        1 => r.random::<f64>() * 1e6 - 5e5,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        _ => r.random::<f64>() * 1e-9,
    }
}

fn render(s: &Sample) -> String {
    let value = match s.value {
        v if v == f64::INFINITY => "+Inf".to_string(),
        v if v == f64::NEG_INFINITY => "-Inf".to_string(),
        v => format!("{v:?}"),
    };
    if s.labels.is_empty() {
        format!("{} {value}", s.name)
    } else {
        let labels: Vec<String> =
            s.labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        format!("{}{{{}}} {value}", s.name, labels.join(","))
    }
}

#[test]
fn prometheus_text_parses_back_exactly() {
    let (mut r, seed) = rng("prom_round_trip");
    for case in 0..2_000 * scale() {
        let samples: Vec<Sample> = (0..r.random_range(0..10))
            .map(|_| Sample {
                name: metric_name(&mut r),
                labels: (0..r.random_range(0..4))
                    .map(|i| (format!("l{i}"), label_value(&mut r)))
                    .collect(),
                value: sample_value(&mut r),
            })
            .collect();
        let mut text = String::from("# HELP x a help line\n# TYPE x counter\n");
        for s in &samples {
            text.push_str(&render(s));
            if r.random_bool(0.2) {
                text.push_str(" 1700000000000");
            }
            text.push('\n');
            if r.random_bool(0.1) {
                text.push_str("\n# a comment\n");
            }
        }
        assert_eq!(parse(&text), samples, "seed {seed} case {case}:\n{text}");
        let _ = engine_series(&text);
    }
    executions("prom-roundtrip", 2_000 * scale());
}

#[test]
fn prometheus_mutated_or_random_text_never_panics() {
    let (mut r, _) = rng("prom_mutated");
    let base = "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3.0\n\
                vllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n\
                odd{a=\"x \\\"quoted\\\", y\",b=\"back\\\\slash\"} 1.5e3 1700000000000\n\
                # HELP h help\nno_labels 42\n";
    for _ in 0..10_000 * scale() {
        let text = if r.random_bool(0.7) {
            mutate(&mut r, base)
        } else {
            let n = r.random_range(0..120);
            const ALPHABET: &[u8] = b"a{}=\",\\ \n#:0.e+-Inf";
            let bytes: Vec<u8> =
                (0..n).map(|_| ALPHABET[r.random_range(0..ALPHABET.len())]).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let _ = parse(&text);
        for (_, v) in engine_series(&text) {
            assert!(v.is_finite(), "{text}");
        }
    }
    executions("prom-random", 10_000 * scale());
}
