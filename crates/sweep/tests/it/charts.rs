//! Charts decode as PNG (the embedded font needs no system fonts) and parse as SVG with the
//! expected series.

use servelab_outputs::chart::{render_png, render_svg, SIZE};
use servelab_sweep::charts::{scenario_charts, write_charts};
use servelab_sweep::grid::parse_scenario;
use servelab_sweep::{PointResult, Role, ScenarioResult};

use crate::common;

fn scenario() -> ScenarioResult {
    let points: Vec<PointResult> = [1usize, 2, 4, 8, 16, 32, 64]
        .iter()
        .map(|&c| PointResult {
            scenario: "100x20".into(),
            load: servelab_load::Level::Concurrency(c),
            role: Role::Grid,
            num_prompts: 10,
            seed: 0,
            complete: true,
            summary: common::summary(c, 10),
        })
        .collect();
    let curve = servelab_sweep::run::curve(&points);
    let knee = servelab_sweep::find_knee(&curve, &Default::default());
    let sc = parse_scenario("100:20").unwrap();
    ScenarioResult {
        name: sc.name,
        axis: servelab_load::Axis::Concurrency,
        dataset: "random(100:20)".into(),
        points,
        probes: vec![],
        knee,
        slo: None,
    }
}

#[test]
fn png_decodes_at_the_chart_size() {
    let dir = tempfile::tempdir().unwrap();
    for c in scenario_charts(&scenario()) {
        let path = dir.path().join(format!("{}.png", c.name));
        render_png(&c, &path).unwrap();
        let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut buf).unwrap();
        assert_eq!((frame.width, frame.height), SIZE, "{}", c.name);
        // Not blank: some pixels are dark (text, axes).
        let dark = buf[..frame.buffer_size()].chunks(3).filter(|p| p.iter().all(|&v| v < 80));
        assert!(dark.count() > 500, "{} has almost no dark pixels", c.name);
    }
}

#[test]
fn svg_parses_with_series_axes_and_knee() {
    let charts = scenario_charts(&scenario());
    let texts = |svg: &str| -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).expect("SVG is XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|s| s.trim().to_string())
            .collect()
    };
    let expect: [&[&str]; 5] = [
        &[
            "Output tokens/s",
            "Total tokens/s (input + output)",
            "knee: concurrency 4",
            "Throughput (tokens/s)",
            "Concurrency (requests in flight)",
        ],
        &["Mean TTFT", "P99 TTFT", "TTFT (ms)"],
        &["Mean TPOT", "P99 TPOT", "TPOT (ms)"],
        &[
            "knee: concurrency 4",
            "Total throughput (tokens/s)",
            "Output tokens/s per user (1000 / mean TPOT)",
        ],
        &[
            "Points, labelled with their concurrency",
            "Pareto front (points off it faded)",
            "Interactivity: output tokens/s per user (1000 / mean TPOT)",
            "Output tokens/s per deployment (per GPU unknown: pass --gpus)",
        ],
    ];
    for (c, want) in charts.iter().zip(expect) {
        let t = texts(&render_svg(c).unwrap());
        for w in want {
            assert!(t.iter().any(|x| x == w), "{}: no text '{w}' in {t:?}", c.name);
        }
    }
    // Concurrency 1..64 spans 64x: a log2 axis with power-of-two ticks.
    let t = texts(&render_svg(&charts[0]).unwrap());
    for tick in ["1", "2", "4", "8", "16", "32", "64"] {
        assert!(t.iter().any(|x| x == tick), "no x tick {tick} in {t:?}");
    }
    assert_eq!(charts[0].x_log, Some(2.0));
}

#[test]
fn writes_png_and_svg_per_chart() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_charts(dir.path(), &scenario()).unwrap();
    assert_eq!(files.len(), 10);
    assert!(files.iter().all(|f| f.is_file()));
}

/// Issue 25: a scenario whose every level is all at once (a scripted suite's case) has no
/// load axis to draw on: no charts are written, rather than four saying "no data".
#[test]
fn an_all_at_once_scenario_has_no_charts() {
    let mut s = scenario();
    s.points.truncate(1);
    s.points[0].load = servelab_load::Level::Rate(f64::INFINITY);
    assert!(scenario_charts(&s).is_empty());
    let dir = tempfile::tempdir().unwrap();
    assert!(write_charts(&dir.path().join("charts"), &s).unwrap().is_empty());
    assert!(!dir.path().join("charts").exists());
    assert_eq!(scenario_charts(&scenario()).len(), 5);
}
