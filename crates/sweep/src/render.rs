//! Pure renderers from results to text: the per-scenario Markdown table, CSV, and the whole
//! `summary.md`.

use servelab_load::Axis;
use servelab_metrics::{Metric, MetricKey, Stat, GPU_KEYS, LOAD_KEYS};
use servelab_outputs::csv::field;
use servelab_outputs::fmt::{grouped, round2 as num, MISSING};
use servelab_outputs::markdown::{Align, Table};

use crate::error::{invalid, SweepError};
use crate::result::{PointResult, ScenarioResult, SweepResult};

/// One column of the sweep table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Column {
    /// The load level (concurrency or request rate).
    Load,
    /// A number of the point's run: a throughput, a count, or a latency statistic.
    Metric(MetricKey),
    /// Why the point ran: grid, probe or confirm.
    Role,
}

/// The table's default columns, those of the classic sweep report.
pub const DEFAULT_COLUMNS: &str =
    "load,request_throughput,output_throughput,e2el_mean,e2el_p99,ttft_mean,ttft_p99,tpot_mean,tpot_p99";

/// `load,output_throughput,ttft_p99,...` → columns. Latencies are `METRIC_STAT` with METRIC
/// in ttft, tpot, itl, e2el and STAT in mean, median, pNN.
pub fn parse_columns(s: &str) -> Result<Vec<Column>, SweepError> {
    let mut out = Vec::new();
    for key in s.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        let c = match key {
            "load" | "concurrency" | "request_rate" => Column::Load,
            "run" | "role" => Column::Role,
            other => match MetricKey::parse(other).filter(MetricKey::is_run_level) {
                Some(k) => Column::Metric(k),
                None => {
                    return Err(invalid(
                        "--columns",
                        format!(
                            "unknown column '{other}': use load, request_throughput, \
                             output_throughput, total_throughput, output_throughput_per_gpu, \
                             interactivity, joules_per_output_token, usd_per_million_output_tokens, \
                             peak_concurrency, completed, failed, delivered_rate, \
                             delivered_concurrency, steady_output_throughput, or a latency \
                             like ttft_p99, tpot_mean, e2el_median, itl_p90, steady_ttft_p99"
                        ),
                    ))
                }
            },
        };
        out.push(c);
    }
    if out.is_empty() {
        return Err(invalid("--columns", "give at least one column"));
    }
    Ok(out)
}

/// Percentiles the columns need the summaries to carry.
pub fn column_percentiles(cols: &[Column]) -> Vec<f64> {
    cols.iter()
        .filter_map(|c| match c {
            Column::Metric(k) => k.percentile(),
            _ => None,
        })
        .collect()
}

impl Column {
    /// The header, with its unit.
    pub fn header(self, axis: Axis) -> String {
        match self {
            Column::Load => axis.title().to_string(),
            Column::Metric(k) => k.header(),
            Column::Role => "Run".into(),
        }
    }

    /// The cell of one point.
    pub fn cell(self, p: &PointResult) -> String {
        match self {
            Column::Load => p.load.label(),
            Column::Metric(k) => match k.value(&p.summary) {
                // Counts print as whole numbers, like the summary's own fields.
                Some(v) if k.unit().is_empty() => format!("{v:.0}"),
                Some(v) => num(v),
                None => MISSING.to_string(),
            },
            Column::Role => p.role.as_str().to_string(),
        }
    }
}

/// The scenario's table: one row per point, centred columns.
pub fn markdown_table(points: &[PointResult], axis: Axis, cols: &[Column]) -> String {
    let mut t = Table::new(cols.iter().map(|c| c.header(axis)));
    t = t.with_align(&vec![Align::Center; cols.len()]);
    for p in points {
        t.push(cols.iter().map(|c| c.cell(p)));
    }
    t.to_markdown()
}

const CSV_LATENCIES: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// Every point (grid, probes, confirming runs) as CSV, full precision, one header line.
pub fn csv(points: &[PointResult]) -> String {
    let mut head: Vec<String> = [
        "scenario",
        "load_kind",
        "load",
        "role",
        "num_prompts",
        "seed",
        "completed",
        "failed",
        "duration_s",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "peak_concurrency",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stats = [Stat::Mean, Stat::Median, Stat::P(99.0)];
    for m in CSV_LATENCIES {
        for st in stats {
            head.push(format!("{}_ms", MetricKey::stat(m, st).key()));
        }
    }
    // Delivered against configured load, and the steady state's figures (empty when the point
    // reached none).
    for k in LOAD_KEYS {
        head.push(if k.unit() == "ms" { format!("{}_ms", k.key()) } else { k.key() });
    }
    // GPU energy and cost (empty without --gpu-metrics or --gpu-hourly-cost).
    head.extend(GPU_KEYS.iter().map(MetricKey::key));
    let mut out = head.join(",");
    out.push('\n');
    for p in points {
        let s = &p.summary;
        let kind = match p.load.axis() {
            Axis::Concurrency => "concurrency",
            Axis::Rate => "rate",
        };
        let mut row = vec![
            field(&p.scenario),
            kind.to_string(),
            p.load.label(),
            p.role.as_str().to_string(),
            p.num_prompts.to_string(),
            p.seed.to_string(),
            s.completed.to_string(),
            s.failed.to_string(),
            s.duration_s.to_string(),
            s.request_throughput.to_string(),
            s.output_throughput.to_string(),
            s.total_token_throughput.to_string(),
            s.peak_concurrency.to_string(),
        ];
        for m in CSV_LATENCIES {
            for st in stats {
                let v = MetricKey::stat(m, st).value(s);
                row.push(v.map_or(String::new(), |v| v.to_string()));
            }
        }
        for k in LOAD_KEYS {
            row.push(k.value(s).map_or(String::new(), |v| v.to_string()));
        }
        for k in GPU_KEYS {
            row.push(k.value(s).map_or(String::new(), |v| v.to_string()));
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// The sentence about saturation: where added load stops buying throughput, and beside it
/// (never as a reason for it) how TTFT has grown there; an SLO, when given, judges latency.
pub fn knee_sentence(s: &ScenarioResult) -> String {
    let unit = s.axis.noun();
    let Some(k) = &s.knee else {
        // Levels at rate inf send every prompt at once: no load axis to bend.
        return if s.points.is_empty() {
            "Saturation: no points measured.".into()
        } else {
            "Saturation: not applicable; every level sends all its prompts at once (rate inf), \
             so there is no load curve to bend."
                .into()
        };
    };
    if s.points.iter().filter(|p| p.load.value().is_finite()).count() == 1 {
        return format!("Saturation: one level measured ({unit} {}); no curve.", k.load);
    }
    let slo = if s.slo.is_some() {
        "the SLO below says which loads are acceptable"
    } else {
        "whether that is acceptable is for an SLO to say (`--slo ttft_p99:MS`)"
    };
    let latency = match (k.ttft_growth(), k.ttft_p99_ms, k.lowest) {
        (Some(g), Some(t), Some((l, _))) => format!(
            " P99 TTFT there is {} ms, {g:.1}x its value at {unit} {l}; {slo}.",
            grouped(Some(t), 2)
        ),
        _ => String::new(),
    };
    match &k.reason {
        Some(r) => format!(
            "Saturation: throughput stops rising past {unit} {} (the knee): {r}.{latency}",
            k.load
        ),
        None => format!(
            "Saturation: not reached; throughput still rises at the highest {unit} measured \
             ({}). Extend the grid to find the knee.{latency}",
            k.load
        ),
    }
}

/// `summary.md`: per scenario, the table, the knee, the SLO verdict and the charts.
pub fn summary_markdown(r: &SweepResult, cols: &[Column]) -> String {
    let md = servelab_outputs::markdown::escape;
    let mut out = match &r.label {
        Some(label) => format!("# {}\n\n", md(label)),
        None => String::from("# servelab sweep\n\n"),
    };
    if !r.tags.is_empty() {
        let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        out.push_str(&format!("{}\n\n", md(&tags.join(" · "))));
    }
    if r.interrupted {
        out.push_str("**Interrupted**: some points were not run; rerun with `--resume`.\n\n");
    }
    for s in &r.scenarios {
        out.push_str(&format!("## {}\n\nDataset: `{}`\n\n", s.name, s.dataset));
        out.push_str(&markdown_table(&s.points, s.axis, cols));
        out.push('\n');
        out.push_str(&knee_sentence(s));
        out.push('\n');
        if let Some(o) = &s.slo {
            out.push_str(&format!("\nSLO: {}\n", o.verdict));
            if !s.probes.is_empty() {
                out.push_str("\nSLO search runs:\n\n");
                let with_role: Vec<Column> =
                    std::iter::once(Column::Role).chain(cols.iter().copied()).collect();
                out.push_str(&markdown_table(&s.probes, s.axis, &with_role));
            }
        }
        out.push_str(&pareto_section(s));
        let stem = servelab_outputs::file_safe(&s.name);
        if crate::charts::has_charts(s) {
            out.push_str(&format!(
                "\n![throughput](charts/{stem}-throughput.svg) ![TTFT](charts/{stem}-ttft.svg)\n\
                 ![TPOT](charts/{stem}-tpot.svg) ![trade-off](charts/{stem}-tradeoff.svg)\n\
                 ![throughput per GPU vs interactivity](charts/{stem}-pareto.svg)\n\n"
            ));
        } else {
            out.push('\n');
        }
    }
    // The sweep's own warnings, then each point's (a client that fell behind, a server that
    // failed requests): a table row is only as good as the run behind it.
    let points: Vec<String> = r
        .scenarios
        .iter()
        .flat_map(|s| {
            s.points.iter().flat_map(move |p| {
                let at = match p.load {
                    servelab_load::Level::Concurrency(c) => {
                        format!("{} at concurrency {c}", s.name)
                    }
                    l => format!("{} at rate {}", s.name, l.label()),
                };
                p.summary.warnings.iter().map(move |w| format!("{at}: {w}"))
            })
        })
        .collect();
    if !r.warnings.is_empty() || !points.is_empty() {
        out.push_str("## Warnings\n\n");
        for w in r.warnings.iter().map(|w| w.to_string()).chain(points) {
            out.push_str(&format!("- {}\n", w.split_whitespace().collect::<Vec<_>>().join(" ")));
        }
    }
    out
}

/// A scenario's points as the chart deployments are chosen by: output tokens/s per GPU and
/// per user (1000 / mean TPOT) at each level, which are on the Pareto front, and why any is
/// left out; empty without grid points.
pub fn pareto_section(s: &ScenarioResult) -> String {
    if s.points.is_empty() {
        return String::new();
    }
    let f = crate::charts::frontier(s);
    let md = servelab_outputs::markdown::escape;
    let mut out = String::from(
        "\nThroughput per GPU vs interactivity (output tokens/s per user = 1000 / mean TPOT; \
         on the Pareto front: no other level has both more):\n\n",
    );
    out.push_str(&servelab_outputs::pareto::pareto_table(&f, s.axis.title()).to_markdown());
    let notes = f.notes();
    if !notes.is_empty() {
        out.push('\n');
    }
    for n in notes {
        out.push_str(&format!("- {}\n", md(&n)));
    }
    out
}

/// Each grid point's summary block under a heading naming its scenario, load and prompt count,
/// as a scripted suite prints one block per case: vLLM's layout, or SGLang's (`sglang`,
/// with the backend name to print, else the run's API flavour).
pub fn point_blocks(r: &SweepResult, sglang: Option<Option<&str>>) -> String {
    let mut out = String::new();
    for s in &r.scenarios {
        for p in &s.points {
            out.push_str(&format!(
                "== {} · {} · {} prompts ==\n",
                s.name,
                p.load.label(),
                p.num_prompts
            ));
            out.push_str(&match sglang {
                Some(backend) => servelab_outputs::sglang_block_as(
                    &p.summary,
                    backend.unwrap_or(&p.summary.info.backend),
                ),
                None => servelab_outputs::vllm_block(&p.summary),
            });
            // A case's block is posted on its own: its warnings go with it.
            out.push_str(&servelab_outputs::warning_lines(&p.summary));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_parse_and_name_themselves() {
        let c = parse_columns(DEFAULT_COLUMNS).unwrap();
        let h: Vec<String> = c.iter().map(|c| c.header(Axis::Concurrency)).collect();
        assert_eq!(
            h.join(" | "),
            "Concurrency | Request Throughput (req/s) | Output Token Throughput (tok/s) | \
             Mean E2E Latency (ms) | P99 E2E Latency (ms) | Mean TTFT (ms) | P99 TTFT (ms) | \
             Mean TPOT (ms) | P99 TPOT (ms)"
        );
        assert_eq!(column_percentiles(&c), vec![99.0, 99.0, 99.0]);
        let e = parse_columns("load,ttft_p999").unwrap_err().to_string();
        assert!(e.starts_with("--columns: unknown column 'ttft_p999'"), "{e}");
        assert_eq!(Column::Load.header(Axis::Rate), "Request Rate (req/s)");
    }
}
