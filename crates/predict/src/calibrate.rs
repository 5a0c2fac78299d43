//! `servelab predict calibrate`: the measured tables a fit reads (a published Markdown sweep
//! table, or a servelab `sweep.json`), and the fitted engine file it writes.

use std::path::Path;

use serde::Deserialize;
use servelab_engine::{EngineFile, RequestShape, SweepTable};
use servelab_load::Level;
use servelab_metrics::{MetricKey, Summary};
use servelab_records::{IslOsl, PointSummary, RequestRecord, PUBLISHED_COLUMNS};
use servelab_workload::DatasetSpec;

/// The sweep tables of the file at `path`: a servelab `sweep.json` (a JSON object), else
/// Markdown tables as published or as `servelab sweep` writes `summary.md`. Errors name the
/// file and say what was expected.
pub fn read_tables(path: &Path) -> Result<Vec<SweepTable>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the table {}: {e}", path.display()))?;
    let tables = if text.trim_start().starts_with('{') {
        sweep_json_tables(&text)
    } else {
        servelab_engine::parse_sweep_tables(&text).map_err(|e| e.to_string())
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    if tables.iter().all(|t| t.rows.is_empty() || t.scenario.is_none()) {
        return Err(format!(
            "{}: no table with an ISL:OSL scenario and concurrency rows; expected a Markdown \
             sweep table under a heading naming ISL:OSL (e.g. `## Qwen3-32B (ISL:OSL=3000:150)`) \
             or a servelab sweep.json of --scenario ISL:OSL at --concurrency levels",
            path.display()
        ));
    }
    Ok(tables)
}

/// The parts of `sweep.json` a fit reads.
#[derive(Deserialize)]
struct SweepFile {
    scenarios: Vec<ScenarioFile>,
}

#[derive(Deserialize)]
struct ScenarioFile {
    name: String,
    dataset: String,
    points: Vec<PointFile>,
}

#[derive(Deserialize)]
struct PointFile {
    load: Level,
    summary: Summary,
}

/// The grid points of a servelab `sweep.json` as sweep tables: one per scenario, one row per
/// concurrency level. Scenarios of random lengths only (`--scenario ISL:OSL`); where they were
/// drawn per request, each point's are drawn again from its label, seed and count
/// ([`redrawn_lengths`]).
pub fn sweep_json_tables(text: &str) -> Result<Vec<SweepTable>, String> {
    let f: SweepFile =
        serde_json::from_str(text).map_err(|e| format!("not a servelab sweep.json: {e}"))?;
    let points = f.scenarios.into_iter().flat_map(|sc| {
        let (name, dataset) = (sc.name, sc.dataset);
        sc.points.into_iter().map(move |p| {
            let drawn = redrawn_lengths(&p.summary);
            MeasuredPoint {
                name: name.clone(),
                dataset: undrawn_label(&dataset, &drawn, summary_mean(&p.summary)),
                load: p.load,
                figures: figures_of(&p.summary),
                drawn,
            }
        })
    });
    tables_from_points(points)
}

/// One measured point a fit reads.
#[derive(Debug, Clone)]
pub struct MeasuredPoint {
    /// The scenario's name; points of one name make one table.
    pub name: String,
    /// The dataset's label (`random(1024:128)`, `sharegpt(path)`).
    pub dataset: String,
    /// Its load level.
    pub load: Level,
    /// Its published figures ([`figures_of`] a summary; the concurrency is set from `load`).
    pub figures: PointSummary,
    /// Its requests' lengths in send order ([`drawn_lengths`]); empty when not known.
    pub drawn: Vec<RequestShape>,
}

/// Measured points as sweep tables: one per scenario name in first-seen order, one row per
/// point in the order given. Every point must be at a concurrency level, and either of fixed
/// random lengths (`random(ISL:OSL)` or a name `ISL:OSL`) or carry its requests' lengths
/// (then its scenario is their mean, unless its label names one); the error names the first
/// point that is neither. Datasets whose prompts share prefixes or carry images are refused:
/// their lengths do not say what the engine computed.
pub fn tables_from_points(
    points: impl IntoIterator<Item = MeasuredPoint>,
) -> Result<Vec<SweepTable>, String> {
    let mut out: Vec<SweepTable> = Vec::new();
    for p in points {
        let name = &p.name;
        let dataset = &p.dataset;
        if let Some(kind) = ["prefix(", "sessions(", "trace(", "random-mm("]
            .iter()
            .find(|k| dataset.starts_with(**k))
        {
            return Err(format!(
                "scenario '{name}' ({dataset}): calibrate reads datasets of independent text \
                 prompts, and {}...) requests share prompt prefixes or carry images, which \
                 their lengths do not show; fit on a random, ShareGPT or JSONL sweep",
                kind.trim_end_matches('(')
            ));
        }
        let random = servelab_workload::random_spec_of_label(dataset);
        if let Some(DatasetSpec::Random { prefix_len: 1.., .. }) = random {
            return Err(format!(
                "scenario '{name}' ({dataset}): its prompts share prompt prefixes, which their \
                 lengths do not show; fit on a sweep without --random-prefix-len"
            ));
        }
        let nominal = match random {
            Some(DatasetSpec::Random { input_len, output_len, .. }) => Some(IslOsl {
                isl: u32::try_from(input_len).unwrap_or(u32::MAX),
                osl: u32::try_from(output_len).unwrap_or(u32::MAX),
            }),
            _ => None,
        };
        let fixed =
            nominal.or_else(|| IslOsl::of_label(dataset)).or_else(|| IslOsl::of_label(name));
        let Some(scenario) = fixed.or_else(|| mean_lengths(&p.drawn)) else {
            return Err(format!(
                "scenario '{name}' ({dataset}) has no fixed ISL:OSL and its requests' lengths \
                 are not known; calibrate reads --scenario ISL:OSL sweeps, or stored runs \
                 (--runs LABEL) of any text dataset"
            ));
        };
        let Level::Concurrency(c) = p.load else {
            return Err(format!(
                "scenario '{name}' is a request-rate sweep; calibrate reads concurrency sweeps"
            ));
        };
        let row = PointSummary { concurrency: u32::try_from(c).unwrap_or(u32::MAX), ..p.figures };
        let i = match out.iter().position(|t| t.name == *name) {
            Some(i) => i,
            None => {
                out.push(SweepTable::new(name.clone(), Some(scenario), Vec::new()));
                out.len() - 1
            }
        };
        let table = &mut out[i];
        // Rows before this one ran at the scenario's lengths: their lists stay empty.
        if !p.drawn.is_empty() {
            table.drawn.resize(table.rows.len(), Vec::new());
            table.drawn.push(p.drawn);
        }
        table.rows.push(row);
    }
    Ok(out)
}

/// A point's dataset label for the fit: as it is, unless it names a range whose draw could
/// not be had (`drawn` empty): then `mean`, the mean lengths its totals give, which a point
/// without its lengths runs at (the range's nominal lengths are not its mean under SGLang's
/// convention, nor when outputs ended at EOS).
pub fn undrawn_label(label: &str, drawn: &[RequestShape], mean: Option<IslOsl>) -> String {
    let ranged = matches!(
        servelab_workload::random_spec_of_label(label),
        Some(DatasetSpec::Random { range, .. }) if !range.is_exact()
    );
    match mean {
        Some(m) if ranged && drawn.is_empty() => m.to_string(),
        _ => label.to_string(),
    }
}

/// A summary's mean prompt and output lengths (its totals over its completed requests).
fn summary_mean(s: &Summary) -> Option<IslOsl> {
    let mean = |total: u64| (total as f64 / s.completed as f64).round().max(1.0) as u32;
    (s.completed > 0)
        .then(|| IslOsl { isl: mean(s.total_input_tokens), osl: mean(s.total_output_tokens) })
}

/// The draw a random dataset's label names when its lengths vary (`random(1024:1024, ratio
/// 0.8 sglang)`, no shared prefix): `n` requests as servelab's workload draws them from
/// `seed`, when the measured mean lengths (`totals` of prompt and output tokens over
/// `completed` requests) agree with the draw's within 10 % (outputs that ended at EOS,
/// prompts retokenised, do not). Empty for exact lengths, any other label, or a
/// disagreement.
fn label_draw(
    label: &str,
    n: usize,
    seed: u64,
    completed: f64,
    totals: [f64; 2],
) -> Vec<RequestShape> {
    let Some(spec @ DatasetSpec::Random { range, prefix_len: 0, .. }) =
        servelab_workload::random_spec_of_label(label)
    else {
        return Vec::new();
    };
    if range.is_exact() || n == 0 || completed <= 0.0 {
        return Vec::new();
    }
    let no_text = || Err(servelab_workload::DatasetError::Spec("lengths only".into()));
    let Ok(drawn) = servelab_workload::lengths(&spec, n, no_text, seed) else {
        return Vec::new();
    };
    let Some(shapes) = drawn
        .iter()
        .map(|l| shape_of(l.prompt_tokens, l.output_tokens?))
        .collect::<Option<Vec<_>>>()
    else {
        return Vec::new();
    };
    let agrees = |total: f64, f: fn(&RequestShape) -> u32| {
        let mean = shapes.iter().map(|d| f64::from(f(d))).sum::<f64>() / shapes.len() as f64;
        (total / completed - mean).abs() <= 0.1 * mean
    };
    if !agrees(totals[0], |d| d.prompt_tokens) || !agrees(totals[1], |d| d.output_tokens) {
        return Vec::new();
    }
    shapes
}

/// The lengths a servelab run of the random dataset drew, drawn again from what its summary
/// records (the label's lengths and range, its prompt count and seed: the same draw), when
/// they were drawn per request and the totals agree within 10 % (`label_draw`).
pub fn redrawn_lengths(summary: &Summary) -> Vec<RequestShape> {
    let info = &summary.info;
    let totals = [summary.total_input_tokens as f64, summary.total_output_tokens as f64];
    let n = usize::try_from(info.num_prompts).unwrap_or(0);
    label_draw(&info.dataset, n, info.seed, summary.completed as f64, totals)
}

/// A request of `prompt` and `output` tokens, when both fit the engine's counts.
fn shape_of(prompt: u64, output: u64) -> Option<RequestShape> {
    Some(RequestShape {
        prompt_tokens: u32::try_from(prompt).ok()?,
        output_tokens: u32::try_from(output).ok()?,
        ..Default::default()
    })
}

/// The lengths a run's requests were sent with, in send order: its completed, measured
/// (not warm-up) requests, each with the prompt the server counted (template included) and
/// the output it generated; the client's own counts where the server reported none. Empty
/// when a request's lengths are unknown: a list with holes would misstate the load.
pub fn drawn_lengths(records: &[RequestRecord]) -> Vec<RequestShape> {
    let mut done: Vec<&RequestRecord> =
        records.iter().filter(|r| !r.warmup && r.is_success()).collect();
    done.sort_by_key(|r| r.index);
    let shape = |r: &RequestRecord| {
        let output = r.output_tokens().filter(|&o| o > 0)?;
        shape_of(servelab_metrics::request::prompt_tokens(r)?, output)
    };
    done.into_iter().map(shape).collect::<Option<Vec<_>>>().unwrap_or_default()
}

/// The mean prompt and output lengths of `drawn`, rounded; `None` when it is empty.
fn mean_lengths(drawn: &[RequestShape]) -> Option<IslOsl> {
    let n = drawn.len() as f64;
    let mean = |f: fn(&RequestShape) -> u32| {
        (drawn.iter().map(|d| f64::from(f(d))).sum::<f64>() / n).round() as u32
    };
    (!drawn.is_empty())
        .then(|| IslOsl { isl: mean(|d| d.prompt_tokens), osl: mean(|d| d.output_tokens) })
}

/// The published columns of a measured summary (NaN for a figure it lacks).
pub fn figures_of(s: &Summary) -> PointSummary {
    figures_by(|k| k.value(s))
}

/// The published columns `value` gives (NaN for a figure it lacks): a summary's, or an
/// imported run's headline.
pub fn figures_by(value: impl Fn(&MetricKey) -> Option<f64>) -> PointSummary {
    let mut p = PointSummary::missing(0);
    for c in PUBLISHED_COLUMNS {
        if let Some(v) = MetricKey::published(c).and_then(|k| value(&k)) {
            p.set(c, v);
        }
    }
    p
}

/// The lengths an imported result file gives per request (`input_lens` and `output_lens`, as
/// `vllm bench serve --save-detailed` and SGLang's `bench_serving --output-details` write
/// them), in the file's order: the requests that produced output (vLLM writes 0 for a failed
/// one). Else the draw its dataset's `label` names (an SGLang file states its draw, and the
/// import labels it so: `label_draw`, `completed` requests from a fixed seed; the file does
/// not keep its own draw, and the distribution is what the fit needs). Empty when neither is
/// had, or the arrays disagree in length.
pub fn imported_lengths(raw: &serde_json::Value, label: &str) -> Vec<RequestShape> {
    if let Some(arrays) = file_lengths(raw) {
        return arrays;
    }
    let num = |k: &str| raw.get(k).and_then(serde_json::Value::as_f64);
    let Some(completed) = num("completed").filter(|n| (1.0..=1e6).contains(n)) else {
        return Vec::new();
    };
    let totals = [num("total_input_tokens"), num("total_output_tokens")];
    let [Some(input), Some(output)] = totals else { return Vec::new() };
    label_draw(label, completed as usize, 0x5EED_5617, completed, [input, output])
}

/// A file's per-request arrays as lengths (`None` without them; empty when they disagree).
fn file_lengths(raw: &serde_json::Value) -> Option<Vec<RequestShape>> {
    let lens = |k: &str| -> Option<Vec<u64>> {
        raw.get(k)?.as_array()?.iter().map(serde_json::Value::as_u64).collect()
    };
    let (inputs, outputs) = (lens("input_lens")?, lens("output_lens")?);
    if inputs.len() != outputs.len() {
        return Some(Vec::new());
    }
    let pairs = inputs.into_iter().zip(outputs).filter(|&(i, o)| i > 0 && o > 0);
    Some(pairs.filter_map(|(i, o)| shape_of(i, o)).collect())
}

/// The scenario an imported result file ran: its totals' mean lengths, else its per-request
/// arrays'.
pub fn imported_scenario(raw: &serde_json::Value) -> Option<IslOsl> {
    imported_mean_lengths(raw).or_else(|| mean_lengths(&file_lengths(raw)?))
}

/// The mean lengths an imported result file's totals give (`total_input_tokens` and
/// `total_output_tokens` over `completed`, as vLLM and SGLang write them).
pub fn imported_mean_lengths(raw: &serde_json::Value) -> Option<IslOsl> {
    let n = raw.get("completed")?.as_f64().filter(|&n| n > 0.0)?;
    let mean = |k: &str| -> Option<u32> {
        let v = (raw.get(k)?.as_f64()? / n).round();
        (v >= 1.0 && v <= f64::from(u32::MAX)).then_some(v as u32)
    };
    Some(IslOsl { isl: mean("total_input_tokens")?, osl: mean("total_output_tokens")? })
}

/// The engine file `original` (YAML text) with its calibration replaced by `fitted` and its
/// domain by `fitted_on` (what predictions from it will say they extrapolate from), headed by
/// `note` as comment lines. The original's own comments are not kept. The engine file's own
/// error when `original` does not parse.
pub fn fitted_engine_yaml(
    original: &str,
    fitted: servelab_engine::Calibration,
    fitted_on: servelab_engine::FittedOn,
    note: &str,
) -> servelab_engine::Result<String> {
    let mut file = EngineFile::parse(original)?;
    file.calibration = fitted;
    file.fitted_on = Some(fitted_on);
    let yaml = file.to_yaml()?;
    let head: String = note.lines().map(|l| format!("# {l}\n")).collect();
    Ok(format!("{head}{yaml}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64, prompt: Option<u64>, usage: Option<(u64, u64)>) -> RequestRecord {
        RequestRecord {
            prompt_tokens: prompt,
            usage: usage.map(|(p, c)| servelab_records::Usage {
                prompt_tokens: p,
                completion_tokens: c,
                reasoning_tokens: None,
            }),
            ..RequestRecord::due(index, 0, 0)
        }
    }

    fn shape(prompt_tokens: u32, output_tokens: u32) -> RequestShape {
        RequestShape { prompt_tokens, output_tokens, ..Default::default() }
    }

    /// Send order, the server's counts first, warm-ups and failures out; a hole empties it.
    #[test]
    fn drawn_lengths_are_the_completed_requests_in_send_order() {
        let mut warm = record(0, Some(7), Some((7, 7)));
        warm.warmup = true;
        let mut failed = record(4, Some(9), Some((9, 9)));
        failed.outcome = servelab_records::Outcome::Failure {
            kind: servelab_records::FailureKind::Reset,
            message: "reset".into(),
        };
        // The server's prompt count includes the chat template: 130, not the client's 120.
        let records = vec![
            record(3, Some(50), Some((50, 4))),
            warm,
            failed,
            record(1, Some(120), Some((130, 8))),
        ];
        assert_eq!(drawn_lengths(&records), vec![shape(130, 8), shape(50, 4)]);
        // No usage: the client's prompt count and the chunks' token counts.
        let mut client = record(2, Some(64), None);
        client.chunks = [3u32, 2]
            .iter()
            .map(|&n| servelab_records::Chunk {
                t_ns: 0,
                kind: servelab_records::ChunkKind::Content,
                text: "x".into(),
                tokens: Some(n),
            })
            .collect();
        assert_eq!(drawn_lengths(&[client.clone()]), vec![shape(64, 5)]);
        assert_eq!(drawn_lengths(&[client, record(5, None, None)]), vec![]);
    }

    fn point(name: &str, dataset: &str, c: usize, drawn: Vec<RequestShape>) -> MeasuredPoint {
        let info = servelab_records::RunInfo::default();
        let figures = figures_of(&servelab_metrics::summarize(&[], &info, &Default::default()));
        let load = Level::Concurrency(c);
        MeasuredPoint { name: name.into(), dataset: dataset.into(), load, figures, drawn }
    }

    /// A label's ISL:OSL names the scenario; a dataset without one takes its requests' mean;
    /// lengths stay with their rows; shared prefixes and unknown lengths are refused.
    #[test]
    fn points_become_tables_with_their_lengths() {
        let sg = "sharegpt(sg.json)";
        let drawn = vec![shape(100, 10), shape(301, 21)];
        let t = tables_from_points([
            point("r", "random(64:8)", 1, Vec::new()),
            point("r", "random(64:8)", 2, vec![shape(60, 8)]),
            point(sg, sg, 4, drawn.clone()),
        ])
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].scenario, Some(IslOsl { isl: 64, osl: 8 }));
        assert_eq!(t[0].drawn, vec![vec![], vec![shape(60, 8)]]);
        assert_eq!((t[0].drawn_at(0), t[0].drawn_at(1)), (None, Some(&[shape(60, 8)][..])));
        assert_eq!(t[1].scenario, Some(IslOsl { isl: 201, osl: 16 }));
        assert_eq!((t[1].rows[0].concurrency, &t[1].drawn), (4, &vec![drawn]));
        let e = tables_from_points([point(sg, sg, 1, Vec::new())]).unwrap_err();
        assert!(e.contains("lengths are not known") && e.contains("--runs"), "{e}");
        let e = tables_from_points([point("p", "prefix(4x512+128)", 1, vec![shape(640, 8)])])
            .unwrap_err();
        assert!(e.contains("prefix") && e.contains("share prompt prefixes"), "{e}");
    }

    /// vLLM's per-request arrays (a failed request's output 0 left out) and its totals.
    #[test]
    fn imported_files_give_their_lengths() {
        let raw = serde_json::json!({
            "completed": 3, "total_input_tokens": 3001, "total_output_tokens": 301,
            "input_lens": [1000, 1001, 999, 1000], "output_lens": [100, 0, 100, 101],
        });
        assert_eq!(
            imported_lengths(&raw, ""),
            vec![shape(1000, 100), shape(999, 100), shape(1000, 101)]
        );
        assert_eq!(imported_mean_lengths(&raw), Some(IslOsl { isl: 1000, osl: 100 }));
        // SGLang's file names its draw, labelled so by the import: 819..=1,024 for 1,024 at
        // 0.8; totals that agree.
        let sglang = serde_json::json!({
            "dataset_name": "random", "random_input_len": 1024, "random_output_len": 1024,
            "random_range_ratio": 0.8, "completed": 400, "total_input_tokens": 368_600,
            "total_output_tokens": 368_000,
        });
        let label = "random(1024:1024, ratio 0.8 sglang)";
        let drawn = imported_lengths(&sglang, label);
        assert_eq!(drawn.len(), 400);
        assert!(drawn.iter().all(|d| (819..=1024).contains(&d.prompt_tokens)), "{drawn:?}");
        assert!(drawn.iter().all(|d| (819..=1024).contains(&d.output_tokens)), "{drawn:?}");
        let mean = drawn.iter().map(|d| f64::from(d.prompt_tokens)).sum::<f64>() / 400.0;
        assert!((mean - 921.5).abs() < 10.0, "{mean}");
        // Outputs that ended early (no --ignore-eos): the draw is not what ran.
        let mut early = sglang.clone();
        early["total_output_tokens"] = 200_000.into();
        assert_eq!(imported_lengths(&early, label), vec![]);
        assert_eq!(imported_scenario(&early), Some(IslOsl { isl: 922, osl: 500 }));
        let short = serde_json::json!({"input_lens": [1, 2], "output_lens": [1]});
        assert_eq!(imported_lengths(&short, label), vec![]);
        assert_eq!(imported_mean_lengths(&serde_json::json!({"completed": 0})), None);
        let arrays = serde_json::json!({"input_lens": [10, 21], "output_lens": [3, 4]});
        assert_eq!(imported_scenario(&arrays), Some(IslOsl { isl: 16, osl: 4 }));
        let h =
            |k: &MetricKey| (k.metric == servelab_metrics::Metric::OutputThroughput).then_some(9.5);
        let f = figures_by(h);
        assert_eq!(f.output_throughput, 9.5);
        assert!(f.mean_ttft_ms.is_nan());
    }

    /// A sweep point's summary draws its lengths again: the workload's own draw for its label,
    /// count and seed; not when its totals say the outputs ended early.
    #[test]
    fn a_summary_redraws_its_runs_lengths() {
        let info = servelab_records::RunInfo {
            dataset: "random(100:10, ratio 0.5 vllm)".into(),
            num_prompts: 20,
            seed: 3,
            ..Default::default()
        };
        let mut s = servelab_metrics::summarize(&[], &info, &Default::default());
        let spec = servelab_workload::random_spec_of_label(&info.dataset).unwrap();
        let want = servelab_workload::lengths(&spec, 20, || unreachable!(), 3).unwrap();
        s.completed = 20;
        s.total_input_tokens = want.iter().map(|l| l.prompt_tokens).sum();
        s.total_output_tokens = want.iter().filter_map(|l| l.output_tokens).sum();
        let got = redrawn_lengths(&s);
        assert_eq!(got.len(), 20);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(u64::from(g.prompt_tokens), w.prompt_tokens);
            assert_eq!(Some(u64::from(g.output_tokens)), w.output_tokens);
        }
        assert!(got.iter().any(|g| g.prompt_tokens != got[0].prompt_tokens), "{got:?}");
        assert_eq!(undrawn_label(&s.info.dataset, &got, summary_mean(&s)), s.info.dataset);
        s.total_output_tokens /= 2;
        assert_eq!(redrawn_lengths(&s), vec![]);
        let mean_in = (s.total_input_tokens as f64 / 20.0).round();
        let mean_out = (s.total_output_tokens as f64 / 20.0).round();
        let undrawn = undrawn_label(&s.info.dataset, &[], summary_mean(&s));
        assert_eq!(undrawn, format!("{mean_in}:{mean_out}"));
        s.info.dataset = "random(100:10)".into();
        assert_eq!(redrawn_lengths(&s), vec![]);
    }

    #[test]
    fn the_fitted_file_keeps_the_deployment_and_takes_the_fit() {
        let yaml = "# mine\nmodel: qwen3-8b\ngpu: h100\ntp: 2\nscheduler: {max_num_seqs: 64}\n";
        let c = servelab_engine::Calibration { eta_gemm: 0.61, ..Default::default() };
        let on = servelab_engine::FittedOn {
            engine: servelab_engine::EngineFamily::VllmV1,
            engine_version: None,
            gpu: "h100".into(),
            tp: 2,
            model: "qwen3-8b".into(),
            pd: false,
            source: Some("t.md".into()),
            error_pct: Some(8.5),
            scenarios: vec![servelab_engine::IslOsl { isl: 32, osl: 8 }],
        };
        let out = fitted_engine_yaml(yaml, c, on.clone(), "fitted by servelab\non t.md").unwrap();
        assert!(out.starts_with("# fitted by servelab\n# on t.md\n"), "{out}");
        let back = EngineFile::parse(&out).unwrap();
        assert_eq!(back.calibration.eta_gemm, 0.61);
        assert_eq!((back.tp, back.scheduler.max_num_seqs), (Some(2), 64));
        assert_eq!(back.model.as_deref(), Some("qwen3-8b"));
        assert_eq!(back.fitted_on, Some(on));
    }
}
