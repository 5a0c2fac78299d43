//! `servelab doctor`: resolve the target, run the checks ([`servelab_client::doctor`]), render
//! them (a pure function of the diagnosis), and say how to exit.

use std::time::Duration;

use serde_json::json;
use servelab_client::doctor::{advise, diagnose, Advice, Diagnosis, Options, Verdict};
use servelab_client::{Api, Target};
use servelab_outputs::markdown::{Align, Table};
use servelab_outputs::term;

use crate::args::{Backend, DoctorArgs};
use crate::exit::{ExitStatus, Failure};

/// Run `servelab doctor`: 0 when streaming works in the API asked for, 1 when a check asked
/// for fails (that streaming, a `--clock` reading), 2 when the server does not answer, no
/// model is known, or the flags are wrong.
pub async fn doctor(a: &DoctorArgs) -> Result<ExitStatus, Failure> {
    if !(a.request_timeout.is_finite() && a.request_timeout > 0.0 && a.request_timeout < 3600.0) {
        return Err(Failure::usage(format!(
            "--request-timeout {}: expected seconds, more than 0",
            a.request_timeout
        )));
    }
    let api = match a.backend {
        Backend::Openai => Api::Completions,
        Backend::OpenaiChat => Api::Chat,
    };
    let mut target =
        Target::resolve(&a.base_url, api.default_endpoint()).await.map_err(Failure::usage)?;
    for h in &a.headers {
        target.add_header(h).map_err(Failure::usage)?;
    }
    if let Some(key) = crate::resolve::api_key() {
        target.set_api_key(&key).map_err(Failure::usage)?;
    }
    let opts = Options {
        api,
        model: a.model.clone(),
        tokenizer: a.tokenizer.clone(),
        request_timeout: Duration::from_secs_f64(a.request_timeout),
        clock: a.clock,
    };
    let d = diagnose(&target, &opts).await;
    let advice = advise(&d);
    term::stdout(&if a.json { render_json(&d, &advice) } else { render_text(&d, &advice) });
    Ok(match d.verdict() {
        Verdict::Ok => ExitStatus::Success,
        Verdict::CheckFailed => {
            term::error("a check asked for failed (see the table)");
            ExitStatus::ThresholdFailed
        }
        Verdict::Unreachable => {
            term::error(advice.blocked.as_deref().unwrap_or("the server cannot be probed"));
            ExitStatus::Error
        }
    })
}

/// The diagnosis as a plain-text table (check, result, detail), then the flags to use and
/// the notes behind them.
pub fn render_text(d: &Diagnosis, advice: &Advice) -> String {
    let mut t = Table::new(["check", "result", "detail"]).with_align(&[Align::Left; 3]);
    for c in d.checks() {
        t.push([c.check, c.result, c.detail]);
    }
    let mut out = format!(
        "servelab doctor: {} (--backend {})\n\n",
        d.preflight.base_url,
        d.preflight.api.backend()
    );
    out.push_str(&t.to_plain());
    out.push('\n');
    out.push_str(&advice.line());
    out.push('\n');
    for n in &advice.notes {
        out.push_str(&format!("  - {n}\n"));
    }
    out
}

/// The diagnosis as one JSON object: every check with its status and typed value, the
/// advice (flags and notes), and the verdict.
pub fn render_json(d: &Diagnosis, advice: &Advice) -> String {
    let v = json!({
        "base_url": d.preflight.base_url,
        "backend": d.preflight.api.backend(),
        "verdict": d.verdict(),
        "checks": d.checks(),
        "advice": {
            "flags": advice.flags(),
            "drop": advice.drop(),
            "optional": advice.optional(),
            "detail": advice,
        },
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
