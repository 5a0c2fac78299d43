//! The terminal summary: vLLM's block byte for byte, then servelab's own sections.

use servelab_metrics::truth::{TruthCheck, ITL_EXACT_MS};
use servelab_metrics::ReplaySummary;
use servelab_metrics::{Distribution, EngineMetrics, GpuSummary, SessionSummary, Summary};

use crate::fmt::{f2, kv, pct_word, rule};

/// One latency section as vLLM prints it: rule, Mean, Median, one line per percentile.
fn section(out: &mut String, header: &str, name: &str, d: &Distribution) {
    rule(out, header, '-');
    kv(out, &format!("Mean {name} (ms):"), f2(d.mean));
    kv(out, &format!("Median {name} (ms):"), f2(d.median));
    // The median is P50: a second row with the same value reads as two figures.
    for (p, v) in d.percentiles.iter().filter(|(p, _)| *p != 50.0) {
        kv(out, &format!("P{} {name} (ms):", pct_word(*p)), f2(*v));
    }
}

/// A latency section of vLLM's block, as `--percentile-metrics` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencySection {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// Inter-token latency.
    Itl,
    /// End-to-end latency.
    E2el,
}

impl LatencySection {
    /// Every section, in vLLM's print order (servelab's default: E2E included).
    pub const ALL: [LatencySection; 4] = [Self::Ttft, Self::Tpot, Self::Itl, Self::E2el];

    /// `ttft,tpot,itl` (vLLM's spelling, any order, any case); printed in vLLM's order.
    pub fn parse_list(s: &str) -> Result<Vec<LatencySection>, String> {
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let sec = match name.to_ascii_lowercase().as_str() {
                "ttft" => Self::Ttft,
                "tpot" => Self::Tpot,
                "itl" => Self::Itl,
                "e2el" => Self::E2el,
                _ => return Err(format!("'{name}' is not one of ttft, tpot, itl, e2el")),
            };
            if !out.contains(&sec) {
                out.push(sec);
            }
        }
        if out.is_empty() {
            return Err("name at least one of ttft, tpot, itl, e2el".into());
        }
        out.sort_by_key(|s| Self::ALL.iter().position(|a| a == s));
        Ok(out)
    }
}

/// The `vllm bench serve` result block (labels, order and padding as vLLM's), with the E2E
/// section always printed after ITL.
pub fn vllm_block(s: &Summary) -> String {
    vllm_block_with(s, &LatencySection::ALL)
}

/// [`vllm_block`] with only `sections` among the latency sections (`--percentile-metrics`).
pub fn vllm_block_with(s: &Summary, sections: &[LatencySection]) -> String {
    let mut out = String::new();
    rule(&mut out, " Serving Benchmark Result ", '=');
    kv(&mut out, "Successful requests:", s.completed);
    kv(&mut out, "Failed requests:", s.failed);
    if let Some(c) = s.info.load.max_concurrency {
        kv(&mut out, "Maximum request concurrency:", c);
    }
    if let Some(r) = s.info.load.request_rate {
        kv(&mut out, "Request rate configured (RPS):", f2(r));
    }
    kv(&mut out, "Benchmark duration (s):", f2(s.duration_s));
    kv(&mut out, "Total input tokens:", s.total_input_tokens);
    kv(&mut out, "Total generated tokens:", s.total_output_tokens);
    kv(&mut out, "Request throughput (req/s):", f2(s.request_throughput));
    if let Some(g) = s.request_goodput {
        kv(&mut out, "Request goodput (req/s):", f2(g));
    }
    kv(&mut out, "Output token throughput (tok/s):", f2(s.output_throughput));
    kv(&mut out, "Peak output token throughput (tok/s):", f2(s.peak_output_throughput));
    kv(&mut out, "Peak concurrent requests:", f2(s.peak_concurrency as f64));
    kv(&mut out, "Total token throughput (tok/s):", f2(s.total_token_throughput));
    for sec in sections {
        match sec {
            LatencySection::Ttft => section(&mut out, "Time to First Token", "TTFT", &s.ttft_ms),
            LatencySection::Tpot => {
                section(&mut out, "Time per Output Token (excl. 1st token)", "TPOT", &s.tpot_ms)
            }
            LatencySection::Itl => section(&mut out, "Inter-token Latency", "ITL", &s.itl_ms),
            LatencySection::E2el => section(&mut out, "End-to-end Latency", "E2EL", &s.e2el_ms),
        }
    }
    out.push_str(&"=".repeat(50));
    out.push('\n');
    out
}

/// One `label value` line of SGLang's block: the label padded to 40 like vLLM's, the value
/// unpadded (as the published SGLang summaries read).
fn sg(out: &mut String, label: &str, value: impl std::fmt::Display) {
    out.push_str(&format!("{label:<40} {value}\n"));
}

/// A rate as Python prints a float: `inf`, `16.0`, `2.5`.
fn py_float(r: Option<f64>) -> String {
    match r {
        None => "inf".into(),
        Some(r) if r.is_finite() && r.fract() == 0.0 => format!("{r:.1}"),
        Some(r) => format!("{r}"),
    }
}

/// The summary block in SGLang's `bench_serving` layout (shared/reference/
/// summary-sglang-style.txt): backend and traffic rate first, the retokenized count and the
/// input throughput among the totals, then E2E latency, TTFT, TPOT and ITL with mean, median
/// and P99. Its ITL is per chunk, as SGLang measures it; a value not measured prints `-`.
pub fn sglang_block(s: &Summary) -> String {
    sglang_block_as(s, &s.info.backend)
}

/// [`sglang_block`] with `backend` as its `Backend:` line: the `--backend` the user typed
/// (`vllm`), which the run's API flavour (`openai`) does not keep.
pub fn sglang_block_as(s: &Summary, backend: &str) -> String {
    let mut out = String::new();
    let p99 = |d: &Distribution| {
        d.percentile(99.0).filter(|_| d.count > 0).map_or(crate::fmt::MISSING.into(), f2)
    };
    let mean_median = |d: &Distribution| {
        if d.count > 0 {
            (f2(d.mean), f2(d.median))
        } else {
            (crate::fmt::MISSING.into(), crate::fmt::MISSING.into())
        }
    };
    rule(&mut out, " Serving Benchmark Result ", '=');
    sg(&mut out, "Backend:", backend);
    sg(&mut out, "Traffic request rate:", py_float(s.info.load.request_rate));
    if let Some(c) = s.info.load.max_concurrency {
        sg(&mut out, "Max request concurrency:", c);
    }
    sg(&mut out, "Successful requests:", s.completed);
    sg(&mut out, "Benchmark duration (s):", f2(s.duration_s));
    sg(&mut out, "Total input tokens:", s.total_input_tokens);
    sg(&mut out, "Total generated tokens:", s.total_output_tokens);
    let retok = s.retokenized_output_tokens.map_or(crate::fmt::MISSING.into(), |n| n.to_string());
    sg(&mut out, "Total generated tokens (retokenized):", retok);
    sg(&mut out, "Request throughput (req/s):", f2(s.request_throughput));
    sg(&mut out, "Input token throughput (tok/s):", f2(s.input_throughput));
    sg(&mut out, "Output token throughput (tok/s):", f2(s.output_throughput));
    rule(&mut out, "End-to-End Latency", '-');
    let (mean, median) = mean_median(&s.e2el_ms);
    sg(&mut out, "Mean E2E Latency (ms):", mean);
    sg(&mut out, "Median E2E Latency (ms):", median);
    for (title, name, d) in [
        ("Time to First Token", "TTFT", &s.ttft_ms),
        ("Time per Output Token (excl. 1st token)", "TPOT", &s.tpot_ms),
        ("Inter-token Latency", "ITL", &s.itl_chunk_ms),
    ] {
        rule(&mut out, title, '-');
        let (mean, median) = mean_median(d);
        sg(&mut out, &format!("Mean {name} (ms):"), mean);
        sg(&mut out, &format!("Median {name} (ms):"), median);
        sg(&mut out, &format!("P99 {name} (ms):"), p99(d));
    }
    out.push_str(&"=".repeat(50));
    out.push('\n');
    out
}

/// Reasoning models: each phase's times, counts and TPOT (only runs that had reasoning).
fn reasoning_section(out: &mut String, r: &servelab_metrics::ReasoningSummary) {
    rule(out, "Reasoning (thinking, then answer)", '-');
    kv(out, "Requests with reasoning:", r.requests);
    kv(out, "Reasoning tokens:", r.total_reasoning_tokens);
    kv(out, "Answer tokens:", r.total_answer_tokens);
    kv(out, "Mean reasoning tokens per request:", f2(r.reasoning_tokens.mean));
    kv(out, "Mean answer tokens per request:", f2(r.answer_tokens.mean));
    section(out, "Time to First Reasoning Token", "TTFT-reasoning", &r.ttfr_ms);
    section(out, "Time to First Answer Token", "TTFA", &r.ttfa_ms);
    section(
        out,
        "Reasoning TPOT (excl. 1st reasoning token)",
        "reasoning TPOT",
        &r.reasoning_tpot_ms,
    );
    section(out, "Answer TPOT (excl. 1st answer token)", "answer TPOT", &r.answer_tpot_ms);
}

/// servelab's sections, printed after vLLM's closing rule.
pub fn servelab_block(s: &Summary) -> String {
    let mut out = String::new();
    rule(&mut out, " servelab ", '=');
    match s.retokenized_output_tokens {
        Some(n) => kv(&mut out, "Total generated tokens (retokenized):", n),
        None => kv(&mut out, "Total generated tokens (retokenized):", "unknown"),
    }
    kv(&mut out, "Input token throughput (tok/s):", f2(s.input_throughput));
    kv(&mut out, "Mean concurrent requests:", f2(s.mean_concurrency));
    section(&mut out, "Inter-chunk Latency (peers' ITL)", "ITL per chunk", &s.itl_chunk_ms);
    match (&s.reasoning, &s.ttfc_ms) {
        // Its TTFA is the TTFC, with the rest of the phases.
        (Some(r), _) => reasoning_section(&mut out, r),
        (None, Some(d)) => section(&mut out, "Time to First Content (after reasoning)", "TTFC", d),
        (None, None) => {}
    }
    section(&mut out, "Schedule Lag (sent - intended)", "schedule lag", &s.schedule_lag_ms);
    section(&mut out, "Client Queue (intended - scheduled)", "client queue", &s.client_queue_ms);
    if let Some(d) = &s.read_lag_ms {
        section(&mut out, "Client Read Lag (handled - arrived, max)", "read lag", d);
    }
    load_section(&mut out, s);
    if let Some(sv) = &s.server {
        // The engine's own clock (llama.cpp `timings`) next to the client's.
        rule(&mut out, "Server Timings (engine clock)", '-');
        kv(&mut out, "Requests with server timings:", sv.requests);
        section(&mut out, "Server Prompt Time", "server prompt", &sv.server_prompt_ms);
        section(
            &mut out,
            "TTFT - Server Prompt (network+queue+client)",
            "TTFT outside prompt",
            &sv.ttft_outside_prompt_ms,
        );
        section(&mut out, "Server TPOT (excl. 1st token)", "server TPOT", &sv.server_tpot_ms);
    }
    if let Some(t) = &s.truth {
        truth_section(&mut out, t);
    }
    if let Some(ss) = &s.sessions {
        sessions_section(&mut out, ss);
    }
    if let Some(r) = &s.replay {
        replay_section(&mut out, r);
    }
    if let Some(e) = &s.engine {
        engine_section(&mut out, e);
    }
    if let Some(g) = &s.gpu {
        gpu_section(&mut out, g);
    }
    if s.retries > 0 {
        kv(&mut out, "Requests re-sent (idle connection closed):", s.retries);
    }
    if !s.failures.is_empty() {
        rule(&mut out, "Failures", '-');
        for f in &s.failures {
            kv(&mut out, &format!("{}:", f.kind), f.count);
            for m in &f.messages {
                out.push_str(&format!("  {}\n", one_line(m)));
            }
        }
    }
    let notes = notes(s);
    if !notes.is_empty() {
        rule(&mut out, "Warnings", '-');
        for n in notes {
            out.push_str(&format!("! {n}\n"));
        }
    }
    out.push_str(&"=".repeat(50));
    out.push('\n');
    out
}

/// The load section of the terminal block: `label value` lines as vLLM's, then the steady
/// figures as `steady / all`.
pub fn load_section(out: &mut String, s: &Summary) {
    let rows = crate::load::load_rows(s);
    if rows.is_empty() {
        return;
    }
    rule(out, "Load (delivered vs configured)", '-');
    for (k, v) in rows {
        kv(out, &format!("{k}:"), v);
    }
    let steady = crate::load::steady_rows(s);
    if !steady.is_empty() {
        rule(out, "Steady State (steady / all requests)", '-');
        for (k, a, b) in steady {
            kv(out, &format!("{k}:"), format!("{a} / {b}"));
        }
    }
}

/// Turns shown by index in the text summary (the JSON result has them all).
const TURNS_SHOWN: usize = 12;

/// Multi-turn figures: sessions, per-session latency, TTFT by turn (the prefix cache shows
/// as TTFT falling, or rising less than the history, with the turn).
fn sessions_section(out: &mut String, s: &SessionSummary) {
    rule(out, "Multi-turn Sessions", '-');
    kv(out, "Sessions started:", s.sessions);
    kv(out, "Sessions completed:", s.completed);
    kv(out, "Sessions cut by a failed turn:", s.cut);
    kv(out, "Mean turns per session:", f2(s.mean_turns));
    let d = &s.session_latency_ms;
    kv(out, "Mean session latency (ms):", f2(d.mean));
    kv(out, "Median session latency (ms):", f2(d.median));
    if let Some(&(p, v)) = d.percentiles.iter().rev().find(|(p, _)| *p > 50.0) {
        kv(out, &format!("P{} session latency (ms):", pct_word(p)), f2(v));
    }
    out.push_str("Turn  Requests  Mean prompt tok  Mean TTFT  Median TTFT\n");
    for t in s.by_turn.iter().take(TURNS_SHOWN) {
        let prompt = t.mean_prompt_tokens.map_or("-".to_string(), |v| format!("{v:.1}"));
        out.push_str(&format!(
            "{:<4}  {:>8}  {:>15}  {:>9}  {:>11}\n",
            t.turn,
            t.requests,
            prompt,
            f2(t.ttft_ms.mean),
            f2(t.ttft_ms.median)
        ));
    }
    if s.by_turn.len() > TURNS_SHOWN {
        out.push_str(&format!(
            "... {} more turn indices in the JSON result\n",
            s.by_turn.len() - TURNS_SHOWN
        ));
    }
}

/// A trace replay: which rows of the trace were sent, and how far behind its instants.
fn replay_section(out: &mut String, r: &ReplaySummary) {
    rule(out, "Trace Replay", '-');
    let rows = &r.rows;
    kv(out, "Trace rows read:", rows.rows);
    kv(out, "Rows left out by the model/log filter:", rows.filtered);
    kv(out, "Rows outside the window:", rows.outside_window);
    kv(out, "Rows with 0 input or output tokens:", rows.zero_length);
    kv(out, "Rows over --trace-max-requests:", rows.over_cap);
    kv(out, "Requests replayed:", rows.replayed);
    let d = &r.behind_ms;
    let p99 = d.percentile(99.0).unwrap_or(d.max);
    kv(out, "Sent behind the trace median/p99 (ms):", format!("{} / {}", f2(d.median), f2(p99)));
}

/// The simulator's log next to the measurement: what it was set to do, what it did, what
/// servelab measured, and the verdict on the per-token ITL.
fn truth_section(out: &mut String, t: &TruthCheck) {
    rule(out, "Simulator Truth (set / did / measured)", '-');
    kv(out, "Requests in the simulator's log:", t.requests);
    let row = |out: &mut String, label: &str, set: f64, did: f64, measured: f64| {
        kv(out, label, format!("{} / {} / {}", f2(set), f2(did), f2(measured)));
    };
    row(out, "Median TTFT (ms):", t.set_ttft_ms, t.server_ttft_ms, t.measured_ttft_ms);
    row(out, "Median ITL per token (ms):", t.set_itl_ms, t.server_itl_ms, t.measured_itl_ms);
    kv(
        out,
        "Simulator lateness median/p99 (ms):",
        format!("{} / {}", f2(t.server_late_ms), f2(t.server_late_p99_ms)),
    );
    kv(
        out,
        "TTFT outside the server median/p99 (ms):",
        format!("{} / {}", f2(t.ttft_overhead_ms), f2(t.ttft_overhead_p99_ms)),
    );
    let err = t.itl_error_ms();
    let verdict = if err.abs() <= ITL_EXACT_MS {
        format!("within {ITL_EXACT_MS} ms of the simulator's truth ({err:+.3} ms)")
    } else {
        format!(
            "{err:+.3} ms off the simulator's truth (more than {ITL_EXACT_MS} ms: see warnings)"
        )
    };
    out.push_str(&format!("Per-token ITL: {verdict}\n"));
    if (t.server_itl_ms - t.set_itl_ms).abs() > ITL_EXACT_MS {
        out.push_str(&format!(
            "But the simulator did not keep its own schedule (ITL set {}, did {} ms): it was \
             overloaded, so these are not the figures it was set to produce (see warnings)\n",
            f2(t.set_itl_ms),
            f2(t.server_itl_ms)
        ));
    }
}

/// What the engine's `/metrics` said over the run: only the figures it exports.
fn engine_section(out: &mut String, e: &EngineMetrics) {
    let header = format!("Engine /metrics ({}, {} scrapes)", e.engine, e.scrapes);
    rule(out, &header, '-');
    let count = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            kv(out, label, format!("{v:.0}"));
        }
    };
    let value = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            kv(out, label, f2(v));
        }
    };
    let percent = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            kv(out, label, f2(v * 100.0));
        }
    };
    count(out, "Engine prompt tokens:", e.prompt_tokens);
    count(out, "Engine cached prompt tokens:", e.cached_prompt_tokens);
    count(out, "Engine generated tokens:", e.generation_tokens);
    count(out, "Engine requests finished:", e.requests_finished);
    value(out, "Engine mean TTFT (ms):", e.server_mean_ttft_ms);
    value(out, "Engine mean E2EL (ms):", e.server_mean_e2e_ms);
    value(out, "Peak requests running:", e.peak_requests_running);
    value(out, "Mean requests running:", e.mean_requests_running);
    value(out, "Peak requests waiting:", e.peak_requests_waiting);
    value(out, "Mean requests waiting:", e.mean_requests_waiting);
    percent(out, "Peak KV-cache usage (%):", e.peak_kv_cache_usage);
    percent(out, "Prefix-cache hit rate (%):", e.prefix_cache_hit_rate);
    count(out, "Preemptions:", e.preemptions);
    percent(out, "Spec-decode acceptance (%):", e.spec_decode_acceptance);
    kv(out, "Engine restarts seen:", e.restarts_s.len());
    if e.failed_scrapes > 0 {
        kv(out, "Failed scrapes:", e.failed_scrapes);
    }
}

/// GPU energy and cost over the measured window (`--gpu-metrics`, `--gpu-hourly-cost`), then
/// one line per GPU.
fn gpu_section(out: &mut String, g: &GpuSummary) {
    rule(out, "GPU Energy and Cost (measured window)", '-');
    let value = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            kv(out, label, f2(v));
        }
    };
    if let Some(source) = &g.source {
        kv(out, "GPU telemetry:", source);
        let failed = if g.failed_scrapes > 0 {
            format!(" ({} failed)", g.failed_scrapes)
        } else {
            String::new()
        };
        kv(out, "GPU readings:", format!("{}{failed}", g.scrapes));
        kv(out, "GPUs seen:", g.gpus_seen);
    }
    if let Some(n) = g.gpus_declared {
        kv(out, "GPUs of the deployment (stated):", n);
    }
    kv(out, "Window (s):", f2(g.window_s));
    value(out, "GPU energy (J):", g.energy_j);
    if let Some(m) = g.energy_method {
        kv(out, "Energy from:", m.words());
    }
    value(out, "Energy per output token (J):", g.joules_per_output_token);
    value(out, "Mean power per GPU (W):", g.mean_w_per_gpu);
    value(out, "Peak power of a GPU (W):", g.peak_w);
    value(out, "Mean GPU utilisation (%):", g.mean_util_pct);
    if let (Some(h), Some(n)) = (g.hourly_cost_usd, g.cost_gpus) {
        kv(out, "GPU hourly cost (USD):", format!("{} x {n} GPUs", f2(h)));
    }
    value(out, "Cost per 1M output tokens (USD):", g.usd_per_million_output_tokens);
    if g.per_gpu.is_empty() {
        return;
    }
    out.push_str("GPU  Energy (J)  Mean W  Peak W  Util %  Peak mem (MiB)  Model\n");
    for p in &g.per_gpu {
        let cell = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
        out.push_str(&format!(
            "{:<3}  {:>10}  {:>6}  {:>6}  {:>6}  {:>14}  {}\n",
            p.gpu,
            cell(p.energy_j, 1),
            cell(p.mean_w, 1),
            cell(p.peak_w, 1),
            cell(p.mean_util_pct, 1),
            cell(p.peak_fb_used_mib, 0),
            p.model.as_deref().unwrap_or("-"),
        ));
    }
}

/// Warnings plus a note for each distribution printed as 0.00 because it had no sample.
pub fn notes(s: &Summary) -> Vec<String> {
    let mut v: Vec<String> = s
        .distributions()
        .into_iter()
        .filter(|(_, d)| d.is_empty())
        .map(|(name, _)| format!("no {name} samples: its 0.00 values are placeholders"))
        .collect();
    v.extend(s.warnings.iter().map(|w| one_line(&w.to_string())));
    v
}

/// The run's warnings (and the notes of [`notes`]) as lines to print under a block that has no
/// section for them (SGLang's block, a suite's per-case blocks), so a block pasted on its own
/// still says when its figures are not to be trusted; empty when there are none.
pub fn warning_lines(s: &Summary) -> String {
    let notes = notes(s);
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("Warnings:\n");
    for n in notes {
        out.push_str(&format!("- {n}\n"));
    }
    out
}

/// Messages may carry newlines (HTTP bodies); a report line must not.
fn one_line(m: &str) -> String {
    m.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The whole terminal summary: vLLM's block, then servelab's.
pub fn render_text(s: &Summary) -> String {
    render_text_with(s, &LatencySection::ALL)
}

/// [`render_text`] with only `sections` in vLLM's block (`--percentile-metrics`).
pub fn render_text_with(s: &Summary, sections: &[LatencySection]) -> String {
    let mut out = vllm_block_with(s, sections);
    out.push_str(&servelab_block(s));
    out
}
