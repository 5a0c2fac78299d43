//! Before a run against a real server: the fast part of `servelab doctor`, and what the run
//! changes because of it.
//!
//! A server that refuses `ignore_eos` (HTTP 422 from `transformers serve`) would fail every
//! request of the run; one that ignores `max_completion_tokens` would generate its default
//! length instead of the workload's. Where it is safe, the run adapts (leaves the refused
//! field out, sends the length in the field the server reads) and says so in its warnings;
//! it never changes what is measured silently. `--no-preflight` sends the fields as given.

use std::collections::HashMap;
use std::time::Duration;

use servelab_client::doctor::{run_preflight, FieldCheck, Preflight};
use servelab_client::{BodyOptions, Target};
use servelab_workload::{Api, MaxTokensField};

/// How long one probe request may take: eight output tokens, on a server that may queue.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// What the preflight changed in the request bodies, and why.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Adaptation {
    /// One sentence per change or finding, for the run's warnings.
    pub notes: Vec<String>,
    /// `ignore_eos` was asked for but left out: requests may end early, which the run counts.
    pub dropped_ignore_eos: bool,
}

/// What each target's preflight found, so the points of a sweep probe their server once:
/// by base URL, endpoint, model and the fields asked for. Forgotten when the target is
/// launched anew ([`servelab_plan::Runner::target_restarted`]).
#[derive(Debug, Default)]
pub struct Preflights(HashMap<Asked, (Sent, Adaptation)>);

/// The target and the request fields a run asks for.
type Asked = (String, String, String, Api, bool, bool, MaxTokensField);

/// The fields sent after adapting.
type Sent = (bool, bool, MaxTokensField);

impl Preflights {
    /// [`check`], or what it found for the same target and fields before.
    pub async fn check(
        &mut self,
        base_url: &str,
        target: &Target,
        opts: &mut BodyOptions,
    ) -> Adaptation {
        let asked: Asked = (
            base_url.to_string(),
            target.path.clone(),
            opts.model.clone(),
            opts.api,
            opts.ignore_eos,
            opts.min_tokens,
            opts.max_tokens_field,
        );
        if let Some(((eos, min, field), a)) = self.0.get(&asked) {
            (opts.ignore_eos, opts.min_tokens, opts.max_tokens_field) = (*eos, *min, *field);
            return a.clone();
        }
        let a = check(target, opts).await;
        let sent = (opts.ignore_eos, opts.min_tokens, opts.max_tokens_field);
        self.0.insert(asked, (sent, a.clone()));
        a
    }

    /// Forget every finding (the server may not be the one probed).
    pub fn forget(&mut self) {
        self.0.clear();
    }
}

/// Probe `target` and adapt `opts` to it. The built-in simulator without quirks (its
/// `/health` says `x-servelab-sim: exact`) honours every field and is not probed.
pub async fn check(target: &Target, opts: &mut BodyOptions) -> Adaptation {
    let p = run_preflight(target, opts.api, Some(&opts.model), PROBE_TIMEOUT).await;
    if p.reach.exact_sim {
        return Adaptation::default();
    }
    adapt(&p, opts)
}

/// The changes `p` calls for in `opts` (a pure function of the probes' findings).
pub fn adapt(p: &Preflight, opts: &mut BodyOptions) -> Adaptation {
    let mut a = Adaptation::default();
    let Some(c) = &p.checks else {
        a.notes.push(
            "preflight: the server could not be probed (no model known or no answer); the run \
             sends its requests as asked"
                .into(),
        );
        return a;
    };
    let backend = opts.api.backend();
    if !c.stream.ok() {
        a.notes.push(format!(
            "preflight: a short streamed {backend} request did not succeed; the run goes ahead \
             as asked (servelab doctor --base-url ... tells why)"
        ));
        return a;
    }
    let refusal = |f: &FieldCheck| match f {
        FieldCheck::Refused { status, message } => Some(format!("HTTP {status}: {message}")),
        _ => None,
    };
    if opts.ignore_eos {
        if let Some(why) = refusal(&c.ignore_eos) {
            opts.ignore_eos = false;
            a.dropped_ignore_eos = true;
            a.notes.push(format!(
                "preflight: the server refuses ignore_eos ({why}); sent without it, so requests \
                 may end before their requested length"
            ));
        }
    }
    if opts.min_tokens {
        if let Some(why) = refusal(&c.min_tokens) {
            opts.min_tokens = false;
            a.notes
                .push(format!("preflight: the server refuses min_tokens ({why}); sent without it"));
        }
    }
    if opts.max_tokens_field == MaxTokensField::Auto {
        let default = opts.max_tokens_field.names(opts.api)[0];
        match c.max_tokens.as_ref().map(|m| m.field()) {
            Some(Some(MaxTokensField::Auto)) | None => {}
            Some(Some(f)) => {
                opts.max_tokens_field = f;
                a.notes.push(format!(
                    "preflight: the server ignores {default}; the length was sent as {} \
                     (--max-tokens-field {})",
                    f.names(opts.api).join(" and "),
                    f.as_str()
                ));
            }
            Some(None) => a.notes.push(
                "preflight: the server honoured neither max_tokens nor max_completion_tokens in \
                 its probe; outputs may run to its own limit"
                    .into(),
            ),
        }
    }
    a
}
