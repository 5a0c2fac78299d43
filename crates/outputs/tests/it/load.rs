//! The load section: delivered against configured load, and the steady state beside the
//! all-requests figures, in the terminal block and the Markdown summary.

use servelab_metrics::{summarize, MetricsConfig, Summary};
use servelab_outputs::load_text_section as text_section;
use servelab_outputs::markdown::load_section as markdown_section;
use servelab_records::{Chunk, ChunkKind, LoadSpec, RequestRecord, RunInfo};

const MS: u64 = 1_000_000;

/// A request due at `intended` ms, sent 1 ms later, with a token 20, 60 and 100 ms after it
/// was sent (the last ends it).
fn request(index: u64, intended: u64) -> RequestRecord {
    let sent = intended + 1;
    let token = |t: u64| Chunk {
        t_ns: (sent + t) * MS,
        kind: ChunkKind::Content,
        text: "x".into(),
        tokens: Some(1),
    };
    RequestRecord {
        sent_ns: sent * MS,
        prompt_tokens: Some(16),
        max_tokens: Some(3),
        chunks: vec![token(20), token(60), token(100)],
        end_ns: Some((sent + 100) * MS),
        status: Some(200),
        ..RequestRecord::due(index, 0, intended * MS)
    }
}

/// Two slots of 12 requests each, every request sent 1 ms after its slot freed.
fn closed_loop() -> Summary {
    let records: Vec<RequestRecord> = (0..24).map(|i| request(i, 101 * (i / 2))).collect();
    let info = RunInfo {
        load: LoadSpec { max_concurrency: Some(2), ..LoadSpec::default() },
        ..RunInfo::default()
    };
    summarize(&records, &info, &MetricsConfig::default())
}

#[test]
fn a_steady_run_shows_its_window_and_both_sets_of_figures() {
    let s = closed_loop();
    let mut text = String::new();
    text_section(&mut text, &s);
    insta::assert_snapshot!("text", text);
    let mut md = String::new();
    markdown_section(&mut md, &s);
    insta::assert_snapshot!("markdown", md);
    // The terminal block carries the section.
    assert!(servelab_outputs::render_text(&s).contains(&text));
}

#[test]
fn all_at_once_has_no_steady_state_by_design() {
    let mut s = closed_loop();
    s.info.load.max_concurrency = None;
    let s = summarize(&[request(0, 0), request(1, 0)], &s.info, &MetricsConfig::default());
    let mut text = String::new();
    text_section(&mut text, &s);
    assert!(
        text.contains("none by design: all at once (no rate, no cap): in flight only falls"),
        "{text}"
    );
    assert!(!text.contains("Steady State"), "{text}");
    // Nothing sent, nothing to say.
    let mut empty = String::new();
    text_section(&mut empty, &summarize(&[], &s.info, &MetricsConfig::default()));
    assert_eq!(empty, "");
}

#[test]
fn the_json_load_object_validates_against_the_shipped_schema() {
    let schema_text = include_str!("../../../../docs/schema/servelab-result-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let steady = closed_loop();
    let mut burst = steady.clone();
    burst.info.load.max_concurrency = None;
    let burst = summarize(&[request(0, 0), request(1, 0)], &burst.info, &MetricsConfig::default());
    let short =
        summarize(&[request(0, 0), request(1, 101)], &steady.info, &MetricsConfig::default());
    for (name, s, state) in [
        ("steady", &steady, "reached"),
        ("burst", &burst, "not_defined"),
        ("short", &short, "not_reached"),
    ] {
        let doc = servelab_outputs::result_value(s, false);
        assert_eq!(doc["servelab"]["load"]["steady"]["state"], state, "{name}");
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
    let doc = servelab_outputs::result_value(&steady, false);
    let l = &doc["servelab"]["load"];
    assert_eq!(l["steady"]["requests"], 22);
    assert_eq!(l["steady"]["ttft"]["mean"], 21.0);
    assert_eq!(l["delivered_rate"], 22.0 / 1.111);
}
