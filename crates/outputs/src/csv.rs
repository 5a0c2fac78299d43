//! CSV: one row per request, and a one-row run summary for spreadsheets that collect runs.

use servelab_metrics::{Distribution, RequestRow, Summary};

use crate::fmt::pct_word;

/// Quotes a field when it holds a comma, quote or line break (RFC 4180).
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn line(out: &mut String, cells: &[String]) {
    let cells: Vec<String> = cells.iter().map(|c| field(c)).collect();
    out.push_str(&cells.join(","));
    out.push('\n');
}

/// Per-request columns; times in milliseconds since the run origin, full precision.
pub const REQUEST_COLUMNS: [&str; 20] = [
    "index",
    "outcome",
    "status",
    "scheduled_ms",
    "intended_ms",
    "sent_ms",
    "first_token_ms",
    "end_ms",
    "ttft_ms",
    "ttfc_ms",
    "tpot_ms",
    "e2el_ms",
    "schedule_lag_ms",
    "client_queue_ms",
    "read_lag_ms",
    "prompt_tokens",
    "output_tokens",
    "retokenized_tokens",
    "chunks",
    "error",
];

fn request_cells(r: &RequestRow) -> Vec<String> {
    vec![
        r.index.to_string(),
        r.outcome.clone(),
        opt(r.status),
        r.scheduled_ms.to_string(),
        r.intended_ms.to_string(),
        r.sent_ms.to_string(),
        opt(r.first_token_ms),
        opt(r.end_ms),
        opt(r.ttft_ms),
        opt(r.ttfc_ms),
        opt(r.tpot_ms),
        opt(r.e2el_ms),
        r.schedule_lag_ms.to_string(),
        r.client_queue_ms.to_string(),
        opt(r.read_lag_ms),
        opt(r.prompt_tokens),
        opt(r.output_tokens),
        opt(r.retokenized_tokens),
        r.chunks.to_string(),
        r.error.clone().unwrap_or_default(),
    ]
}

/// Per-request columns added after [`REQUEST_COLUMNS`] when the run had reasoning.
pub const REASONING_COLUMNS: [&str; 6] = [
    "ttfr_ms",
    "ttfa_ms",
    "reasoning_tokens",
    "answer_tokens",
    "reasoning_tpot_ms",
    "answer_tpot_ms",
];

fn reasoning_cells(r: &RequestRow) -> [String; 6] {
    let p = r.reasoning.unwrap_or_default();
    [
        opt(p.ttfr_ms),
        opt(p.ttfa_ms),
        opt(p.reasoning_tokens),
        opt(p.answer_tokens),
        opt(p.reasoning_tpot_ms),
        opt(p.answer_tpot_ms),
    ]
}

/// One header line, then one line per measured request (with [`REASONING_COLUMNS`] when the
/// run had reasoning).
pub fn render_csv(s: &Summary) -> String {
    let mut out = String::new();
    let reasoning = s.reasoning.is_some();
    let mut header: Vec<String> = REQUEST_COLUMNS.map(String::from).into();
    if reasoning {
        header.extend(REASONING_COLUMNS.map(String::from));
    }
    line(&mut out, &header);
    for r in &s.requests {
        let mut cells = request_cells(r);
        if reasoning {
            cells.extend(reasoning_cells(r));
        }
        line(&mut out, &cells);
    }
    out
}

/// One header line and one line for the run: setup, counts, throughputs, then
/// mean/median/std/pN of TTFT, TPOT, ITL and E2EL.
pub fn render_csv_summary(s: &Summary) -> String {
    let i = &s.info;
    let mut cols: Vec<(String, String)> = vec![
        ("started_at".into(), i.started_at.clone()),
        ("backend".into(), i.backend.clone()),
        ("model".into(), i.model.clone()),
        ("dataset".into(), i.dataset.clone()),
        ("num_prompts".into(), i.num_prompts.to_string()),
        ("request_rate".into(), i.load.request_rate.map_or("inf".into(), |r| r.to_string())),
        ("max_concurrency".into(), opt(i.load.max_concurrency)),
        ("completed".into(), s.completed.to_string()),
        ("failed".into(), s.failed.to_string()),
        ("duration_s".into(), s.duration_s.to_string()),
        ("total_input_tokens".into(), s.total_input_tokens.to_string()),
        ("total_output_tokens".into(), s.total_output_tokens.to_string()),
        ("retokenized_output_tokens".into(), opt(s.retokenized_output_tokens)),
        ("request_throughput".into(), s.request_throughput.to_string()),
        ("request_goodput".into(), opt(s.request_goodput)),
        ("output_throughput".into(), s.output_throughput.to_string()),
        ("peak_output_throughput".into(), s.peak_output_throughput.to_string()),
        ("total_token_throughput".into(), s.total_token_throughput.to_string()),
        ("peak_concurrency".into(), s.peak_concurrency.to_string()),
        ("mean_concurrency".into(), s.mean_concurrency.to_string()),
    ];
    for (name, d) in
        [("ttft", &s.ttft_ms), ("tpot", &s.tpot_ms), ("itl", &s.itl_ms), ("e2el", &s.e2el_ms)]
    {
        dist_cols(&mut cols, &format!("{name}_ms"), d, true);
    }
    if let Some(r) = &s.reasoning {
        cols.push(("reasoning_requests".into(), r.requests.to_string()));
        cols.push(("total_reasoning_tokens".into(), r.total_reasoning_tokens.to_string()));
        cols.push(("total_answer_tokens".into(), r.total_answer_tokens.to_string()));
        for (name, d) in r.distributions() {
            let unit = if name.ends_with("tokens") { "" } else { "_ms" };
            dist_cols(&mut cols, &format!("{name}{unit}"), d, false);
        }
    }
    if let Some(g) = &s.gpu {
        cols.push(("gpu_energy_j".into(), opt(g.energy_j)));
        cols.push(("gpu_energy_method".into(), opt(g.energy_method.map(|m| m.name()))));
        cols.push(("joules_per_output_token".into(), opt(g.joules_per_output_token)));
        cols.push(("gpu_mean_watts".into(), opt(g.mean_w_per_gpu)));
        cols.push(("gpu_peak_watts".into(), opt(g.peak_w)));
        cols.push(("gpu_mean_util_pct".into(), opt(g.mean_util_pct)));
        cols.push(("gpus_seen".into(), g.gpus_seen.to_string()));
        cols.push(("gpu_hourly_cost_usd".into(), opt(g.hourly_cost_usd)));
        cols.push(("cost_gpus".into(), opt(g.cost_gpus)));
        cols.push(("usd_per_million_output_tokens".into(), opt(g.usd_per_million_output_tokens)));
    }
    if let Some(l) = &s.load {
        let state = match &l.steady {
            servelab_metrics::load::Steady::Reached(_) => "reached",
            servelab_metrics::load::Steady::NotReached(_) => "not_reached",
            servelab_metrics::load::Steady::NotDefined { .. } => "not_defined",
        };
        cols.push(("delivered_rate".into(), opt(l.delivered_rate)));
        cols.push(("delivered_concurrency".into(), l.delivered_concurrency.to_string()));
        cols.push(("mean_send_lag_ms".into(), l.send_lag.mean_ms.to_string()));
        cols.push(("p99_send_lag_ms".into(), l.send_lag.p99_ms.to_string()));
        cols.push(("mean_slot_wait_ms".into(), opt(l.slot_wait.map(|w| w.mean_ms))));
        cols.push(("in_flight_growth".into(), l.in_flight_growth.to_string()));
        cols.push(("ttft_drift_ms_per_s".into(), opt(l.ttft_drift_ms_per_s)));
        cols.push(("steady_state".into(), state.into()));
        let f = l.steady_figures();
        cols.push(("steady_requests".into(), opt(f.map(|f| f.requests))));
        cols.push(("steady_request_throughput".into(), opt(f.map(|f| f.request_throughput))));
        cols.push(("steady_output_throughput".into(), opt(f.map(|f| f.output_throughput))));
        for (i, name) in servelab_metrics::load::STEADY_LATENCIES.into_iter().enumerate() {
            let d = f.map(|f| f.distributions()[i].1);
            cols.push((format!("mean_steady_{name}_ms"), opt(d.map(|d| d.mean))));
            cols.push((format!("p99_steady_{name}_ms"), opt(d.and_then(|d| d.percentile(99.0)))));
        }
    }
    let mut out = String::new();
    line(&mut out, &cols.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
    line(&mut out, &cols.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>());
    out
}

/// A distribution's CSV columns: `mean_{name}`, `median_{name}`, `std_{name}` (with
/// `with_std`), and `p{P}_{name}` for each percentile.
fn dist_cols(cols: &mut Vec<(String, String)>, name: &str, d: &Distribution, with_std: bool) {
    cols.push((format!("mean_{name}"), d.mean.to_string()));
    cols.push((format!("median_{name}"), d.median.to_string()));
    if with_std {
        cols.push((format!("std_{name}"), d.std.to_string()));
    }
    for (p, v) in &d.percentiles {
        cols.push((format!("p{}_{name}", pct_word(*p)), v.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\"\n"), "\"say \"\"hi\"\"\n\"");
    }
}
