//! Injected faults: what can go wrong, how it is named, and how a request gets one.
//!
//! A fault comes from the request header `x-servelab-fault: <kind>[=<arg>]` or from a seeded
//! rate (`--fault-rate <kind>=<p>`). The header wins over the rates.

use std::str::FromStr;

use rand::Rng;

/// Default pause of `stall` when no seconds are given (e.g. via `--fault-rate stall=0.1`).
pub(crate) const DEFAULT_STALL_SECS: f64 = 1.0;

/// One injectable fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// 429 with `Retry-After: 1`.
    RateLimit,
    /// 500.
    ServerError,
    /// 503.
    Unavailable,
    /// TCP RST before the first response byte.
    ResetBefore,
    /// A clean close (FIN) after reading the request, without a response byte. To a client
    /// that sent the request on a kept-alive connection this is indistinguishable from the
    /// server closing the idle connection just as it was reused (the keep-alive race).
    CloseBefore,
    /// TCP RST after some tokens: after `after_tokens`, or half the output when `None`.
    ResetMid {
        /// Tokens sent before the reset (at most all but one); `None`: half the output.
        after_tokens: Option<u64>,
    },
    /// A pause of `secs` mid-stream (after half the output), then the stream continues.
    Stall {
        /// Length of the pause, in seconds (0 to 3600 when parsed).
        secs: f64,
    },
    /// One SSE line whose payload is not valid JSON.
    Malformed,
    /// An error object inside the stream, then `[DONE]`.
    StreamError,
    /// The stream is cut short: it ends without a `finish_reason` and without `data: [DONE]`
    /// (the `no-done` quirk, by contrast, keeps the `finish_reason`, as real servers do).
    NoDone,
    /// No usage chunk even if requested.
    NoUsage,
    /// A multi-byte UTF-8 character split across two body frames ~1 ms apart.
    SplitUtf8,
    /// After a complete streamed response, close the kept-alive connection without having
    /// sent `Connection: close` (llama-server does this).
    CloseAfter,
}

/// Why a fault spec was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultParseError {
    /// A kind that is not one of the faults.
    #[error(
        "unknown fault kind '{0}'; expected one of rate-limit, server-error, unavailable, \
         reset-before, close-before, reset-mid[=TOKENS], stall=SECS, malformed, stream-error, no-done, \
         no-usage, split-utf8, close-after"
    )]
    UnknownKind(String),
    /// A known kind with an argument it does not take or cannot parse.
    #[error("fault '{kind}' has an invalid argument '{arg}': {why}")]
    BadArg {
        /// The fault kind as written.
        kind: String,
        /// The rejected argument.
        arg: String,
        /// What the kind expects instead.
        why: &'static str,
    },
    /// A `--fault-rate` value that is not `KIND=P` with P in [0, 1].
    #[error("fault rate '{0}' must look like KIND=P with P in [0, 1] (e.g. rate-limit=0.05)")]
    BadRate(String),
}

impl Fault {
    /// The kind name, as written in headers and in the truth record's `outcome`.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::RateLimit => "rate-limit",
            Fault::ServerError => "server-error",
            Fault::Unavailable => "unavailable",
            Fault::ResetBefore => "reset-before",
            Fault::CloseBefore => "close-before",
            Fault::ResetMid { .. } => "reset-mid",
            Fault::Stall { .. } => "stall",
            Fault::Malformed => "malformed",
            Fault::StreamError => "stream-error",
            Fault::NoDone => "no-done",
            Fault::NoUsage => "no-usage",
            Fault::CloseAfter => "close-after",
            Fault::SplitUtf8 => "split-utf8",
        }
    }

    /// Faults answered with an HTTP error status before any generation.
    pub fn status(&self) -> Option<u16> {
        match self {
            Fault::RateLimit => Some(429),
            Fault::ServerError => Some(500),
            Fault::Unavailable => Some(503),
            _ => None,
        }
    }
}

impl FromStr for Fault {
    type Err = FaultParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (kind, arg) = match s.split_once('=') {
            Some((k, a)) => (k.trim(), Some(a.trim())),
            None => (s, None),
        };
        let no_arg = |f: Fault| match arg {
            None => Ok(f),
            Some(a) => Err(FaultParseError::BadArg {
                kind: kind.to_string(),
                arg: a.to_string(),
                why: "this kind takes no argument",
            }),
        };
        match kind {
            "rate-limit" => no_arg(Fault::RateLimit),
            "server-error" => no_arg(Fault::ServerError),
            "unavailable" => no_arg(Fault::Unavailable),
            "reset-before" => no_arg(Fault::ResetBefore),
            "close-before" => no_arg(Fault::CloseBefore),
            "malformed" => no_arg(Fault::Malformed),
            "stream-error" => no_arg(Fault::StreamError),
            "no-done" => no_arg(Fault::NoDone),
            "no-usage" => no_arg(Fault::NoUsage),
            "close-after" => no_arg(Fault::CloseAfter),
            "split-utf8" => no_arg(Fault::SplitUtf8),
            "reset-mid" => match arg {
                None => Ok(Fault::ResetMid { after_tokens: None }),
                Some(a) => a
                    .parse::<u64>()
                    .map(|n| Fault::ResetMid { after_tokens: Some(n) })
                    .map_err(|_| FaultParseError::BadArg {
                        kind: kind.to_string(),
                        arg: a.to_string(),
                        why: "expected a whole number of tokens",
                    }),
            },
            "stall" => match arg {
                None => Ok(Fault::Stall { secs: DEFAULT_STALL_SECS }),
                Some(a) => match a.parse::<f64>() {
                    Ok(secs) if secs.is_finite() && (0.0..=3600.0).contains(&secs) => {
                        Ok(Fault::Stall { secs })
                    }
                    _ => Err(FaultParseError::BadArg {
                        kind: kind.to_string(),
                        arg: a.to_string(),
                        why: "expected seconds between 0 and 3600",
                    }),
                },
            },
            other => Err(FaultParseError::UnknownKind(other.to_string())),
        }
    }
}

/// Parse one `--fault-rate KIND[=ARG]=P` value: the probability is after the LAST `=`.
pub(crate) fn parse_fault_rate(s: &str) -> Result<(Fault, f64), FaultParseError> {
    let (spec, p) = s.rsplit_once('=').ok_or_else(|| FaultParseError::BadRate(s.to_string()))?;
    let p: f64 = p.trim().parse().map_err(|_| FaultParseError::BadRate(s.to_string()))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(FaultParseError::BadRate(s.to_string()));
    }
    Ok((spec.parse()?, p))
}

/// Draw the rate-based fault for one request: each configured rate in order gets one uniform
/// draw from the request's seeded RNG; the first hit wins.
pub(crate) fn draw_fault(rates: &[(Fault, f64)], rng: &mut impl Rng) -> Option<Fault> {
    rates.iter().find(|(_, p)| rng.random::<f64>() < *p).map(|(f, _)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_every_kind() {
        assert_eq!("rate-limit".parse(), Ok(Fault::RateLimit));
        assert_eq!("reset-mid".parse(), Ok(Fault::ResetMid { after_tokens: None }));
        assert_eq!("close-after".parse(), Ok(Fault::CloseAfter));
        assert_eq!(Fault::CloseAfter.kind(), "close-after");
        assert_eq!("close-before".parse(), Ok(Fault::CloseBefore));
        assert_eq!(Fault::CloseBefore.kind(), "close-before");
        assert_eq!("reset-mid=3".parse(), Ok(Fault::ResetMid { after_tokens: Some(3) }));
        assert_eq!(" stall=0.5 ".parse(), Ok(Fault::Stall { secs: 0.5 }));
        assert_eq!("split-utf8".parse(), Ok(Fault::SplitUtf8));
        assert!(
            matches!("bogus".parse::<Fault>(), Err(FaultParseError::UnknownKind(k)) if k == "bogus")
        );
        assert!("stall=-1".parse::<Fault>().is_err());
        assert!("no-done=1".parse::<Fault>().is_err());
    }

    #[test]
    fn parses_rates_with_args() {
        assert_eq!(parse_fault_rate("rate-limit=0.25"), Ok((Fault::RateLimit, 0.25)));
        assert_eq!(parse_fault_rate("stall=2=0.5"), Ok((Fault::Stall { secs: 2.0 }, 0.5)));
        assert!(parse_fault_rate("rate-limit=2").is_err());
        assert!(parse_fault_rate("rate-limit").is_err());
    }

    #[test]
    fn draws_are_seeded_and_respect_extremes() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        assert_eq!(draw_fault(&[(Fault::NoDone, 1.0)], &mut rng), Some(Fault::NoDone));
        assert_eq!(draw_fault(&[(Fault::NoDone, 0.0)], &mut rng), None);
        let rates = [(Fault::ServerError, 0.5)];
        let a: Vec<_> = {
            let mut r = rand::rngs::SmallRng::seed_from_u64(7);
            (0..20).map(|_| draw_fault(&rates, &mut r)).collect()
        };
        let b: Vec<_> = {
            let mut r = rand::rngs::SmallRng::seed_from_u64(7);
            (0..20).map(|_| draw_fault(&rates, &mut r)).collect()
        };
        assert_eq!(a, b);
    }
}
