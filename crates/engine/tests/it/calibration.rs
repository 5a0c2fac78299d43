//! The calibration figures docs/predict.md states: the shipped fitted engine file of the
//! reference deployment, evaluated on the reference table it was fitted to, must reach the
//! median absolute errors the docs print (and the default calibration the "before" ones), so a
//! change to the model or the file cannot leave the docs stale without failing here.

use std::path::Path;

use servelab_engine::calibrate::{compare, error_stats, ErrorStats};
use servelab_engine::{load_engine_file, parse_sweep_tables, Calibration, FitOptions};

/// Largest drift, in percentage points, between a computed median error and the docs' figure
/// (the docs print one decimal; the model is deterministic, so this only absorbs rounding).
const MARGIN_PP: f64 = 0.1;

/// The docs' table rows: (cells, metric) -> (before, after).
fn stated() -> Vec<(String, String, f64, f64)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/predict.md")).unwrap();
    let section = doc
        .split("### Error on `shared/reference/calibration-qwen3-32b-h20-vllm-v1.md`")
        .nth(1)
        .expect("docs/predict.md has the calibration error section");
    let num = |s: &str| s.trim().trim_matches('*').parse::<f64>().ok();
    section
        .lines()
        .skip_while(|l| !l.starts_with("| cells"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            Some((c.first()?.to_string(), c.get(1)?.to_string(), num(c.get(2)?)?, num(c.get(3)?)?))
        })
        .collect()
}

fn stat(s: &ErrorStats, metric: &str) -> f64 {
    match metric {
        "output throughput" => s.throughput,
        "mean TPOT" => s.tpot,
        "mean TTFT" => s.ttft,
        other => panic!("unknown metric `{other}` in docs/predict.md"),
    }
}

#[test]
fn the_reference_fit_reaches_the_errors_the_docs_state() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fitted =
        load_engine_file(root.join("../../examples/engines/qwen3-32b-h20-tp4.yaml")).unwrap();
    let mut defaults = fitted.clone();
    defaults.calibration = Calibration::default();
    let table = root.join("testdata/calibration-qwen3-32b-h20-vllm-v1.md");
    let tables = parse_sweep_tables(&std::fs::read_to_string(table).unwrap()).unwrap();
    let opts = FitOptions::default();
    // Two evaluations of the 32 cells: about 8 s in the test profile here (a re-fit, 80
    // evaluations, would take minutes).
    let after = compare(&fitted, &tables, &opts).unwrap();
    let before = compare(&defaults, &tables, &opts).unwrap();
    let rows = stated();
    assert_eq!(rows.len(), 6, "the docs' table: {rows:?}");
    // Every stale figure at once, so one run tells what the docs' table should say.
    let mut stale = Vec::new();
    for (cells, metric, doc_before, doc_after) in rows {
        let with_noisy = cells.starts_with("all");
        let (b, a) = (error_stats(&before, with_noisy), error_stats(&after, with_noisy));
        let n: usize = cells.split_whitespace().find_map(|w| w.parse().ok()).unwrap();
        assert_eq!(a.cells, n, "{cells}");
        for (what, doc, got) in
            [("before", doc_before, stat(&b, &metric)), ("after", doc_after, stat(&a, &metric))]
        {
            if (got - doc).abs() > MARGIN_PP {
                stale.push(format!(
                    "{cells}, {metric}, {what}: docs/predict.md says {doc} %, the model gives \
                     {got:.2} %"
                ));
            }
        }
    }
    assert!(stale.is_empty(), "update the docs (or the fit):\n{}", stale.join("\n"));
}
