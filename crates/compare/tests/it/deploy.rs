//! Deployment tables per scenario and per-model verdicts on hand-made runs with exact
//! figures: the shapes of the published reports (see crates/compare/tests/it/seeds.rs for the
//! same shapes rebuilt from simulator runs).

use servelab_compare::deploy::{deployment_charts, deployment_table, render_views, scenario_views};
use servelab_compare::report::{build, html, markdown};
use servelab_compare::verdict::verdicts;
use servelab_compare::{CompareOptions, RunData, SCENARIO_TAG};
use servelab_records::{LoadSpec, RunInfo};
use servelab_store::{Headline, RunSetup};

/// A run with the three figures verdicts and deployment tables read.
fn run(name: &str, dataset: &str, prompts: u64, c: Option<u64>, f: [f64; 3]) -> RunData {
    let [total, ttft, tpot] = f;
    let load = LoadSpec { max_concurrency: c, ..LoadSpec::default() };
    let info =
        RunInfo { dataset: dataset.into(), num_prompts: prompts, load, ..RunInfo::default() };
    let headline = Headline {
        output_throughput: Some(total / 2.0),
        total_token_throughput: Some(total),
        ttft_mean_ms: Some(ttft),
        ttft_p99_ms: Some(ttft * 1.5),
        tpot_mean_ms: Some(tpot),
        completed: Some(prompts),
        failed: Some(0),
        ..Headline::default()
    };
    let mut d = RunData::from_headline(name, &info, headline);
    d.config = Some(RunSetup { info, ..RunSetup::default() });
    d
}

fn tagged(mut r: RunData, tags: &[(&str, &str)]) -> RunData {
    r.tags.extend(tags.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    r
}

/// A model's name, its `model=` tag, and (total tok/s, mean TTFT, mean TPOT) at 1, 10 and
/// 100 prompts.
type Model = (&'static str, Option<&'static str>, [[f64; 3]; 3]);

/// Seed-000: four models (two variants of one) at rate inf over 1, 10 and 100 prompts.
fn models() -> Vec<RunData> {
    let ds = "random(512:128)";
    let mut out = Vec::new();
    let table: [Model; 4] = [
        // name, model tag, (total tok/s, mean TTFT, mean TPOT) at 1, 10, 100 prompts
        ("fast-8b", None, [[150.0, 20.0, 6.0], [1400.0, 35.0, 7.0], [9800.0, 140.0, 9.5]]),
        ("snappy-32b", None, [[90.0, 12.0, 10.0], [800.0, 30.0, 11.0], [5200.0, 160.0, 17.0]]),
        (
            "big-70b-fp8",
            Some("big-70b"),
            [[60.0, 80.0, 16.0], [420.0, 400.0, 24.0], [1100.0, 3900.0, 60.0]],
        ),
        (
            "big-70b-awq",
            Some("big-70b"),
            [[75.0, 60.0, 12.0], [500.0, 300.0, 21.0], [1000.0, 4100.0, 66.0]],
        ),
    ];
    for (name, model, figs) in table {
        for (n, f) in [1, 10, 100].into_iter().zip(figs) {
            let r = run(name, ds, n, None, f);
            out.push(match model {
                Some(m) => tagged(r, &[("model", m)]),
                None => r,
            });
        }
    }
    out
}

/// Seed-002: two deployments, each a sweep of two scenarios over concurrency 1, 2, 4.
fn sweeps() -> Vec<RunData> {
    let mut out = Vec::new();
    let scen = [("500x100", "random(500:100)"), ("3000x150", "random(3000:150)")];
    for (dep, layout, speed) in [("qwen-tp4", "TP4", 1.0), ("qwen-3p1d", "3P1D", 1.5)] {
        for (k, (sc, ds)) in scen.iter().enumerate() {
            let heavy = (k + 1) as f64;
            for c in [1u64, 2, 4] {
                let cf = c as f64;
                let f = [
                    100.0 * cf * speed / heavy,
                    (50.0 + 10.0 * cf) * heavy / speed,
                    (10.0 + cf) * heavy,
                ];
                let r = run(&format!("{dep} [{sc}]"), ds, 10 * c, Some(c), f);
                out.push(tagged(r, &[("gpu", "H20"), ("layout", layout), (SCENARIO_TAG, sc)]));
            }
        }
    }
    out
}

#[test]
fn per_model_verdicts_carry_their_figures() {
    let o = CompareOptions::default();
    let v = verdicts(&scenario_views(&models()), &o);
    assert_eq!(v.len(), 1, "one workload");
    let s = &v[0];
    assert_eq!(
        (s.levels.0.words(), s.levels.1.words()),
        ("1 concurrent".into(), "100 concurrent".into())
    );
    let rules: Vec<(&str, &str)> = s.models.iter().map(|m| (m.model.as_str(), m.rule)).collect();
    assert_eq!(
        rules,
        [("fast-8b", "V1"), ("snappy-32b", "V3"), ("big-70b-fp8", "V4"), ("big-70b-awq", "V2")]
    );
    assert_eq!(s.models[0].headline, "fast-8b is the throughput champion.");
    assert_eq!(
        s.models[0].text,
        "Highest total token throughput at every level (9,800.00 tok/s at 100 concurrent, 65.3x \
         its 150.00 tok/s at 1 concurrent); lowest mean TPOT under load 9.50 ms; single-request \
         TTFT 20.00 ms."
    );
    assert_eq!(
        s.models[3].headline,
        "big-70b-awq degrades the hardest under load (latency-bound: TTFT explodes with concurrency)."
    );
    assert_eq!(
        s.models[3].text,
        "Mean TTFT reaches 4,100.00 ms at 100 concurrent, the highest of 4 models and 25.6x the \
         median of the others (160.00 ms), from 60.00 ms at 1 concurrent (68.3x); mean TPOT \
         12.00 → 66.00 ms; total throughput caps at 1,000.00 tok/s."
    );
    assert_eq!(s.variants.len(), 1);
    assert_eq!(
        s.variants[0].headline,
        "big-70b-awq improves significantly over big-70b-fp8 at 1 concurrent and 10 concurrent but is \
         significantly slower at 100 concurrent (model=big-70b)."
    );
    assert!(s.variants[0].text.starts_with("At 1 concurrent: mean TPOT 16.00 → 12.00 ms (-25.0%), mean TTFT 80.00 → 60.00 ms (-25.0%)"), "{}", s.variants[0].text);
}

/// Issue 25: a prediction beside the measured deployments is judged apart: it is never the
/// champion or the best balance of the deployment it predicts (here it beats every measured
/// figure), and its line says it is a prediction.
#[test]
fn a_prediction_is_judged_apart_from_the_measurements() {
    let mut runs = sweeps();
    for c in [1u64, 2, 4] {
        let cf = c as f64;
        let f = [300.0 * cf, 20.0, 5.0];
        let r = run("qwen-tp4 [500x100] (predicted)", "random(500:100)", 10 * c, Some(c), f);
        runs.push(tagged(r, &[(SCENARIO_TAG, "500x100")]));
    }
    let v = verdicts(&scenario_views(&runs), &CompareOptions::default());
    let s =
        v.iter().find(|s| s.models.iter().any(|m| m.rule == "P")).expect("the 500x100 scenario");
    let rules: Vec<(&str, &str)> = s.models.iter().map(|m| (m.model.as_str(), m.rule)).collect();
    assert_eq!(rules, [("qwen-tp4", "V5"), ("qwen-3p1d", "V1"), ("qwen-tp4 (predicted)", "P")]);
    let p = &s.models[2];
    assert_eq!(
        p.headline,
        "qwen-tp4 (predicted) is a prediction, not judged against the measured deployments:"
    );
    assert!(p.text.contains("1,200.00 tok/s at 4 concurrent"), "{}", p.text);
    assert!(!p.text.contains("rank"), "no rank among the measured: {}", p.text);
}

#[test]
fn verdicts_markdown_snapshot() {
    let r = build("Four models at rate inf", models(), &CompareOptions::default());
    let md = markdown(&r);
    let end = md.find("## Configuration\n").expect("the configuration follows");
    insta::assert_snapshot!(&md[..end]);
}

#[test]
fn deployment_tables_never_mix_scenarios() {
    let o = CompareOptions::default();
    let views = scenario_views(&sweeps());
    let names: Vec<String> = views.iter().map(|v| v.workload.name()).collect();
    assert_eq!(names, ["500x100 (random(500:100))", "3000x150 (random(3000:150))"]);
    for v in &views {
        let deps: Vec<&str> = v.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(deps, ["qwen-tp4", "qwen-3p1d"]);
        // Every run of a view is of its scenario.
        for e in &v.entries {
            for s in e.cells.iter().flatten() {
                assert!(s.runs.iter().all(|r| r
                    .tags
                    .contains(&(SCENARIO_TAG.into(), v.workload.scenario.clone().unwrap()))));
            }
        }
    }
    let t = deployment_table(&views[1], &o);
    // 3000x150 at c=4: qwen-tp4 200 out... output = total / 2.
    assert_eq!(t.rows[2][0], "4");
    assert_eq!(t.rows[2][1], "100.00");
    assert_eq!(t.rows[2][2], "150.00 (+50.0%) *");
    let charts = deployment_charts(&views[0], &o);
    let names: Vec<&str> = charts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["500x100-output_throughput", "500x100-ttft_mean", "500x100-tpot_mean"]);
    assert_eq!(charts[0].series.len(), 2, "both deployments on one chart");
    assert_eq!(charts[0].series[1].label, "qwen-3p1d (layout=3P1D)");
    assert_eq!(charts[0].series[1].points, [(1.0, 75.0), (2.0, 150.0), (4.0, 300.0)]);
}

#[test]
fn deployment_report_snapshot() {
    let r = build("Qwen TP4 vs 3P1D on H20", sweeps(), &CompareOptions::default());
    // Comparisons and rankings: one per scenario and concurrency.
    let points: Vec<&str> = r.comparisons.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        points,
        [
            "scenario 500x100, random(500:100), 10 prompts, c=1",
            "scenario 3000x150, random(3000:150), 10 prompts, c=1",
            "scenario 500x100, random(500:100), 20 prompts, c=2",
            "scenario 3000x150, random(3000:150), 20 prompts, c=2",
            "scenario 500x100, random(500:100), 40 prompts, c=4",
            "scenario 3000x150, random(3000:150), 40 prompts, c=4",
        ]
    );
    for (_, c) in &r.comparisons {
        assert!(c.differences.is_empty(), "never a baseline of another scenario");
    }
    for lr in &r.rankings {
        let sc = if lr.point.contains("500x100") { "[500x100]" } else { "[3000x150]" };
        assert!(lr.entries.iter().all(|e| e.name.ends_with(sc)), "{lr:?}");
    }
    // One champion per scenario, never one across them; the verdicts are the summary.
    let champs: Vec<(String, &str)> = r
        .verdicts
        .iter()
        .flat_map(|s| s.models.iter().map(move |m| (s.workload.name(), m)))
        .filter(|(_, m)| m.rule == "V1")
        .map(|(w, m)| (w, m.model.as_str()))
        .collect();
    assert_eq!(
        champs,
        [
            ("500x100 (random(500:100))".to_string(), "qwen-3p1d"),
            ("3000x150 (random(3000:150))".to_string(), "qwen-3p1d")
        ]
    );
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    let md = markdown(&r);
    let end = md.find("## Configuration\n").expect("the configuration follows");
    insta::assert_snapshot!(&md[..end]);
}

#[test]
fn deployment_html_and_chart_snapshots() {
    let r = build("Qwen TP4 vs 3P1D on H20", sweeps(), &CompareOptions::default());
    let page = html(&r);
    let start = page.find("<h2 id=\"deployments\">").expect("a deployments section");
    let end = page.find("<h2 id=\"charts\">").expect("the charts follow");
    // The inline SVGs are the chart backend's (snapshotted as chart models below).
    let mut section = String::new();
    for part in page[start..end].split("<figure class=\"chart\">") {
        match part.split_once("</figure>") {
            Some((_, rest)) => {
                section.push_str("<figure class=\"chart\">[svg]</figure>");
                section.push_str(rest);
            }
            None => section.push_str(part),
        }
    }
    insta::assert_snapshot!(section);
    let views = scenario_views(&sweeps());
    insta::assert_debug_snapshot!(deployment_charts(&views[1], &CompareOptions::default()));
}

#[test]
fn by_scenario_text_snapshot() {
    let views = scenario_views(&sweeps());
    insta::assert_snapshot!(render_views(&views, &CompareOptions::default(), false, false));
}

/// Seed-000 shape: before, the written summary ran over series split per prompt count and
/// named "fast-8b [100 prompts]" the best balance beside the verdict naming snappy-32b. The
/// report now has one set of findings: the verdicts, with no second summary that could
/// disagree.
#[test]
fn the_report_never_holds_two_summaries_that_disagree() {
    let r = build("Four models", models(), &CompareOptions::default());
    assert!(r.findings.is_empty(), "verdicts judge this scenario: {:?}", r.findings);
    let md = markdown(&r);
    let page = html(&r);
    for text in [&md, &page] {
        assert_eq!(text.matches("best balance").count(), 1, "{text}");
        assert_eq!(text.matches("throughput champion").count(), 1);
        assert!(!text.contains("Best balance:") && !text.contains("Best throughput:"));
    }
    let summary = &md[..md.find("## Deployments").expect("the deployments follow")];
    assert!(!summary.contains("[100 prompts]"), "levels are rows, not series: {summary}");
    assert!(md.contains("**snappy-32b offers the best balance"), "{md}");
}

/// Where the verdicts cannot judge (two models that share no level), the R rules speak, over
/// the same per-scenario view: each model's lightest level is its own, and the degradation
/// runs over a model's prompt counts at rate inf.
#[test]
fn rules_without_verdicts_read_the_levels_of_the_view() {
    let ds = "random(512:128)";
    let runs = vec![
        run("a", ds, 1, None, [100.0, 20.0, 10.0]),
        run("a", ds, 10, None, [900.0, 80.0, 11.0]),
        run("b", ds, 100, None, [5000.0, 400.0, 15.0]),
    ];
    let r = build("Disjoint", runs, &CompareOptions::default());
    assert!(r.verdicts.is_empty(), "no level shared by two models");
    let texts: Vec<(&str, &str)> = r.findings.iter().map(|f| (f.rule, f.text.as_str())).collect();
    assert_eq!(
        texts,
        [
            ("R1", "Best throughput: b with 2500.0 output tok/s at 100 concurrent."),
            (
                "R2",
                "Best single-request latency: a, mean TTFT 20.0 ms, mean TPOT 10.00 ms at 1 concurrent, its lightest level."
            ),
            (
                "R4",
                "Worst degradation under load: a, p99 TTFT grows 4.0x from 30.0 ms at 1 concurrent to 120.0 ms at 10 concurrent."
            ),
        ]
    );
    let md = markdown(&r);
    assert!(md.contains("## Summary of results\n\nrandom(512:128):\n\n- Best throughput"), "{md}");
}

#[test]
fn chart_titles_lead_with_the_report_title() {
    use servelab_compare::report::{chart_title, deployment_charts as report_charts};
    let r = build("Qwen TP4 vs 3P1D on H20", sweeps(), &CompareOptions::default());
    let titles: Vec<String> = report_charts(&r).into_iter().map(|c| c.title).collect();
    assert_eq!(titles[0], "Qwen TP4 vs 3P1D on H20: 500x100: Output throughput (tok/s)");
    assert_eq!(
        chart_title("servelab report", "500x100: TTFT mean (ms)"),
        "500x100: TTFT mean (ms)"
    );
    let long = "Four simulated models at rate inf: 1, 10 and 100 prompts, on a shared VM";
    let t = chart_title(long, "random(512:32): Output throughput (tok/s)");
    assert_eq!(t, "Four simulated models at rat…: random(512:32): Output throughput (tok/s)");
    assert!(t.chars().count() <= 72, "{t}");
}

#[test]
fn per_deployment_tables_snapshot() {
    let views = scenario_views(&sweeps());
    let o = CompareOptions::default();
    let t = servelab_compare::deploy::published_table(&views[0], &views[0].entries[1], &o);
    assert_eq!(t.headers.len(), 9, "Concurrency and the eight published figures");
    assert_eq!(t.rows.len(), 3, "a row per concurrency the deployment ran");
    insta::assert_snapshot!("per_deployment_markdown", render_views(&views, &o, true, true));
    insta::assert_snapshot!("per_deployment_text", render_views(&views[..1], &o, false, true));
    // In the report, under each scenario, only when asked for.
    let mut r = build("Qwen TP4 vs 3P1D on H20", sweeps(), &o);
    assert!(!markdown(&r).contains("| Concurrency | Request Throughput (req/s)"));
    r.per_deployment = true;
    let md = markdown(&r);
    assert_eq!(md.matches("| Concurrency | Request Throughput (req/s)").count(), 4, "2 × 2");
    assert!(md.contains("#### qwen-3p1d (layout=3P1D)\n"), "{md}");
    let page = html(&r);
    let start = page.find("<h4>").expect("per-deployment tables");
    let end = page[start..].find("<div class=\"deployment-charts\">").unwrap() + start;
    insta::assert_snapshot!("per_deployment_html", &page[start..end]);
}

#[test]
fn verdict_html_snapshot() {
    let page = html(&build("Four models at rate inf", models(), &CompareOptions::default()));
    let start = page.find("<h2 id=\"verdicts\">").unwrap();
    let end = page.find("<h2 id=\"deployments\">").unwrap();
    insta::assert_snapshot!(&page[start..end]);
}

#[test]
fn point_by_point_text_snapshot() {
    use servelab_compare::render::render_points;
    use servelab_compare::{compare, pair, subjects_of};
    let runs = models();
    let operand =
        |name: &str| subjects_of(name, runs.iter().filter(|r| r.name == name).cloned().collect());
    let p = pair(vec![operand("fast-8b"), operand("snappy-32b")]).unwrap();
    let o = CompareOptions::default();
    let points: Vec<(Option<String>, servelab_compare::Comparison)> =
        p.points.into_iter().map(|x| (x.heading, compare(&x.subjects, &o))).collect();
    assert_eq!(points.len(), 3, "1, 10 and 100 prompts, each its own comparison");
    insta::assert_snapshot!(render_points(&points, &p.unmatched, false));
}

/// The shape of a published nine-model write-up at 1, 10 and 100 prompts all at once, where
/// every model's TTFT grows tens of times (queueing at 100 concurrent is normal): the
/// verdicts must still tell the models apart. `None` is a level a model did not run.
type Published = (&'static str, [Option<[f64; 3]>; 3]);

fn published() -> Vec<RunData> {
    let table: [Published; 9] = [
        (
            "qwen3-8b",
            [Some([110.0, 25.0, 9.0]), Some([1000.0, 60.0, 10.0]), Some([6500.0, 900.0, 14.0])],
        ),
        // 181x its 37 ms base, but 6.7 s is far from the worst in absolute terms.
        (
            "llama-3.1-8b",
            [Some([105.0, 37.0, 9.5]), Some([950.0, 80.0, 10.5]), Some([6000.0, 6700.0, 15.0])],
        ),
        (
            "qwen3-32b",
            [Some([40.0, 60.0, 24.0]), Some([360.0, 120.0, 26.0]), Some([2400.0, 2500.0, 38.0])],
        ),
        (
            "llama-3.3-70b-fp8",
            [Some([25.0, 90.0, 38.0]), Some([220.0, 200.0, 42.0]), Some([1500.0, 6000.0, 60.0])],
        ),
        (
            "llama-3.3-70b-awq",
            [Some([30.0, 70.0, 32.0]), Some([260.0, 160.0, 36.0]), Some([1400.0, 7000.0, 64.0])],
        ),
        (
            "gemma-3-27b",
            [Some([45.0, 50.0, 21.0]), Some([400.0, 140.0, 23.0]), Some([2600.0, 3000.0, 33.0])],
        ),
        (
            "mistral-small-24b",
            [Some([50.0, 45.0, 20.0]), Some([430.0, 110.0, 22.0]), Some([2800.0, 2200.0, 30.0])],
        ),
        // 95x its 400 ms base, and 38 s at 100 concurrent: the worst by far.
        (
            "mixtral-8x22b",
            [Some([20.0, 400.0, 50.0]), Some([150.0, 1800.0, 70.0]), Some([600.0, 38000.0, 160.0])],
        ),
        // Never run at 100 prompts.
        ("phi-4-14b", [Some([60.0, 30.0, 15.0]), Some([550.0, 70.0, 16.0]), None]),
    ];
    let mut out = Vec::new();
    for (name, figs) in table {
        for (n, f) in [1, 10, 100].into_iter().zip(figs) {
            if let Some(f) = f {
                out.push(run(name, "random(1000:1000)", n, None, f));
            }
        }
    }
    out
}

#[test]
fn published_verdicts_tell_nine_models_apart() {
    let o = CompareOptions::default();
    let v = verdicts(&scenario_views(&published()), &o);
    let s = &v[0];
    let rules: Vec<(&str, &str)> = s.models.iter().map(|m| (m.model.as_str(), m.rule)).collect();
    assert_eq!(
        rules,
        [
            ("qwen3-8b", "V1"),
            ("llama-3.1-8b", "V5"),
            ("qwen3-32b", "V3L"),
            ("llama-3.3-70b-fp8", "V5"),
            ("llama-3.3-70b-awq", "V5"),
            ("gemma-3-27b", "V5"),
            ("mistral-small-24b", "V5"),
            ("mixtral-8x22b", "V2"),
            ("phi-4-14b", "V5"),
        ]
    );
    let by = |m: &str| s.models.iter().find(|v| v.model == m).unwrap();
    assert_eq!(
        by("mixtral-8x22b").headline,
        "mixtral-8x22b degrades the hardest under load (latency-bound: TTFT explodes with concurrency)."
    );
    assert_eq!(
        by("mixtral-8x22b").text,
        "Mean TTFT reaches 38,000.00 ms at 100 concurrent, the highest of 8 models and 12.7x the \
         median of the others (3,000.00 ms), from 400.00 ms at 1 concurrent (95.0x); mean TPOT \
         50.00 → 160.00 ms; total throughput caps at 600.00 tok/s."
    );
    assert_eq!(by("qwen3-32b").headline, "qwen3-32b offers the best balance for a large model.");
    // A model without the heaviest level is judged at its own heaviest, never ranked last
    // with a missing figure.
    let phi = by("phi-4-14b");
    assert_eq!(
        phi.text,
        "Not run at 100 concurrent; at 10 concurrent, its heaviest level: 550.00 tok/s, mean \
         TPOT 16.00 ms there; mean TTFT 30.00 ms at 1 concurrent → 70.00 ms at 10 concurrent \
         (2.3x)."
    );
    assert!(
        s.models.iter().all(|m| !m.text.contains("- tok/s") && !m.text.contains("9 of 9")),
        "{:#?}",
        s.models
    );
    assert_eq!(s.variants.len(), 1);
    assert_eq!(
        s.variants[0].headline,
        "llama-3.3-70b-awq improves significantly over llama-3.3-70b-fp8 at 1 concurrent and 10 \
         concurrent (one model by label: llama-3.3-70b)."
    );
}

/// Issue 25 item 9: a report over many runs reads top-down (one summary, then the scenario
/// sections, then one table of the runs), without a comparison and a ranking per point.
#[test]
fn a_report_of_many_runs_is_one_summary_then_the_scenarios() {
    let mut runs = Vec::new();
    for dep in ["a", "b", "c", "d", "e"] {
        for (sc, ds) in [("500x100", "random(500:100)"), ("3000x150", "random(3000:150)")] {
            for c in [1u64, 2, 4, 8] {
                let f = [100.0 * c as f64, 50.0 + c as f64, 10.0];
                let r = run(&format!("{dep} [{sc}]"), ds, 10 * c, Some(c), f);
                runs.push(tagged(r, &[(SCENARIO_TAG, sc)]));
            }
        }
    }
    assert_eq!(runs.len(), 40);
    let r = build("Many", runs, &CompareOptions::default());
    assert!(!r.detail && r.comparisons.is_empty() && r.rankings.is_empty());
    let md = markdown(&r);
    let h2: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(h2, ["## Summary of results", "## Deployments by scenario", "## Results"]);
    assert_eq!(md.matches("\n### ").count(), 2, "one section per scenario");
    assert!(md.contains("This report covers 40 runs (more than 32)"), "{md}");
    let page = html(&r);
    assert!(!page.contains("Comparison at") && !page.contains("Rankings at"));
}

/// Issue 25 item 9: two sweeps of two scenarios (6 points) read as the scenario sections; the
/// comparison and ranking per point (12 sections) are not written, and the report says where
/// to get one. A report of few points keeps them.
#[test]
fn a_sweep_report_has_no_section_per_point() {
    let r = build("Qwen TP4 vs 3P1D on H20", sweeps(), &CompareOptions::default());
    assert_eq!(r.comparisons.len(), 6, "computed, for JSON and tests");
    let md = markdown(&r);
    assert!(!md.contains("## Comparison at") && !md.contains("## Rankings at"), "{md}");
    assert!(md.contains("The 6 points (workload and load) are compared in the tables by scenario"));
    assert!(!html(&r).contains("<h2>Comparison at"));
    let few = build("Models", models(), &CompareOptions::default());
    assert_eq!(markdown(&few).matches("## Comparison at").count(), 3);
}
