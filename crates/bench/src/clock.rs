//! A shard's clock reading: against what (`--clock-reference`), within what time (before the
//! shared start), again after the run when there was no time before it, and kept for the next
//! runs of the same conductor.

use std::time::{Duration, SystemTime};

use servelab_client::clock::{self, ClockReading, Coarse};
use servelab_client::{http, Target};
use servelab_outputs::term;
use servelab_plan::ClockReference;
use tokio::time::Instant;

/// The longest a reading may take: four rounds at four second boundaries, the first up to
/// ~1.6 s away (measured: 4.5-4.9 s in all), with room for a busy machine.
const MOST: Duration = Duration::from_secs(6);

/// A kept reading is used again this long: a free-running clock drifts well under a
/// millisecond in that time, and a sweep's points start seconds apart.
const KEEP: Duration = Duration::from_secs(600);

/// One NTP exchange waits this long for its answer.
const NTP_TIMEOUT: Duration = Duration::from_secs(2);

/// The last reading, by the clock it read ([`kept_by`]), for the runs after it.
#[derive(Debug, Default)]
pub(crate) struct Clocks {
    last: Option<(String, Instant, ClockReading)>,
}

/// What a reading is kept by: the clock it read. A target's clock is its host's whatever the
/// port, so a lab's trials, each launching its engine on a new port of one host, read it once
/// (each reading costs up to [`MOST`] around every profile run otherwise).
fn kept_by(reference: &ClockReference, target: &Target, label: &str) -> String {
    match reference {
        ClockReference::Target => format!("date {}", target.addr.ip()),
        _ => label.to_string(),
    }
}

/// What a shard records of its clock: the reading and what it was read against.
#[derive(Debug, Clone)]
pub(crate) struct Reading {
    pub reading: ClockReading,
    pub reference: String,
}

/// The time a reading may take before a run that starts at `start_at`: what is left but half
/// a second, or half of that when warm-ups must go before the start too; at most [`MOST`];
/// none without a shared start.
pub(crate) fn budget(start_at: Option<SystemTime>, now: SystemTime, warmups: bool) -> Duration {
    let left = start_at.and_then(|t| t.duration_since(now).ok()).unwrap_or_default();
    let left = if warmups { left / 2 } else { left };
    left.saturating_sub(Duration::from_millis(500)).min(MOST)
}

/// A shard's clock between its reading before the run and the one after it.
#[derive(Debug, Clone)]
pub(crate) enum ShardClock {
    /// Read (perhaps only to whole seconds, for want of time: read again after the run).
    Read(Reading),
    /// No time before the start for even one round: read after the run, against this.
    Later(String),
}

impl ShardClock {
    /// The reading, if there is one yet.
    pub(crate) fn reading(&self) -> Option<&Reading> {
        match self {
            ShardClock::Read(r) => Some(r),
            ShardClock::Later(_) => None,
        }
    }
}

/// Below this much time before the start, a reading waits for the end of the run: one round
/// needs up to a second to reach a boundary of the reference's clock.
const LEAST: Duration = Duration::from_millis(1_500);

impl Clocks {
    /// This host's clock against `reference` before a run (`target`: the run's target,
    /// `base_url` as shown), measured within [`budget`] or kept from an earlier run. With no
    /// time for it, or cut short by the start, it is read (again) after the run
    /// ([`Clocks::after`]). Problems are warnings: a shard with no reading still runs, and the
    /// merge says its offset is unknown.
    pub(crate) async fn before(
        &mut self,
        reference: &ClockReference,
        target: &Target,
        base_url: &str,
        start_at: Option<SystemTime>,
        warmups: bool,
        interrupt: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<ShardClock> {
        let label = label(reference, base_url)?;
        if let Some((key, at, kept)) = &self.last {
            // Only a reading cut short by time is worth taking again.
            let same_clock = *key == kept_by(reference, target, &label);
            if same_clock && at.elapsed() < KEEP && kept.coarse != Some(Coarse::NoTime) {
                // Filed against this run's URL: the same host's clock, and the shards of this
                // run compare their offsets by that name.
                let reading = Reading { reading: kept.clone(), reference: label };
                return Some(ShardClock::Read(reading));
            }
        }
        let budget = budget(start_at, SystemTime::now(), warmups);
        if budget < LEAST {
            return Some(ShardClock::Later(label));
        }
        let read = self.take(reference, target, label, budget, interrupt, false).await;
        read.map(ShardClock::Read)
    }

    /// After the run: a reading there was no time for before it, or one cut short, is taken
    /// with all the time it needs (nothing waits on this shard but the merge).
    pub(crate) async fn after(
        &mut self,
        clock: Option<ShardClock>,
        reference: &ClockReference,
        target: &Target,
        interrupt: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<Reading> {
        let (label, kept) = match clock? {
            ShardClock::Read(r) if r.reading.coarse != Some(Coarse::NoTime) => return Some(r),
            ShardClock::Read(r) => (r.reference.clone(), Some(r)),
            ShardClock::Later(label) => (label, None),
        };
        let again = self.take(reference, target, label, MOST, interrupt, true).await;
        again.or(kept)
    }

    /// One reading, said, and kept.
    async fn take(
        &mut self,
        reference: &ClockReference,
        target: &Target,
        label: String,
        budget: Duration,
        interrupt: &mut tokio::sync::watch::Receiver<bool>,
        last_chance: bool,
    ) -> Option<Reading> {
        let key = kept_by(reference, target, &label);
        let reading = measure(reference, Some(target), budget);
        let measured = http::unless_interrupted(interrupt, reading).await?;
        let reading = match measured {
            Ok(Some(r)) => r,
            Ok(None) => {
                term::warn(&format!(
                    "{label}: the answer had no Date header; this shard's clock offset is \
                     unknown (try --clock-reference ntp://HOST)"
                ));
                return None;
            }
            Err(e) => {
                term::warn(&format!("cannot read the clock of {label} ({e}): offset unknown"));
                return None;
            }
        };
        match (reading.note(), reading.coarse) {
            (None, _) => term::note(&format!("clock against {label}: {}", said(&reading))),
            // Cut short before the run: read again after it.
            (Some(_), Some(Coarse::NoTime)) if !last_chance => {}
            (Some(note), _) => term::warn(&format!(
                "clock against {label}: {} ({note}; --clock-reference ntp://HOST reads to \
                 milliseconds)",
                said(&reading)
            )),
        }
        self.last = Some((key, Instant::now(), reading.clone()));
        Some(Reading { reading, reference: label })
    }
}

/// What a reading is recorded as having been read against; `None` for no reading.
fn label(reference: &ClockReference, base_url: &str) -> Option<String> {
    Some(match reference {
        ClockReference::Off => return None,
        ClockReference::Target => format!("date {base_url}/v1/models"),
        ClockReference::Http(url) => format!("date {}", http::redact_url(url)),
        ClockReference::Ntp(host) => format!("ntp {host}"),
    })
}

/// `+0.12 ms ± 0.84 ms (50 exchanges)`.
pub fn said(r: &ClockReading) -> String {
    format!("{:+.2} ms ± {:.2} ms ({} exchanges)", r.offset_ms, r.uncertainty_ms, r.exchanges)
}

/// One reading against `reference` (`target`: the run's target, needed for
/// [`ClockReference::Target`]) within `budget`.
async fn measure(
    reference: &ClockReference,
    target: Option<&Target>,
    budget: Duration,
) -> std::io::Result<Option<ClockReading>> {
    let deadline = Instant::now() + budget;
    match (reference, target) {
        (ClockReference::Off, _) => Ok(None),
        (ClockReference::Ntp(host), _) => {
            // A silent server must not hold the shard past its start: each exchange waits a
            // third of the budget at most, and the whole reading the budget.
            let each = NTP_TIMEOUT.min(budget / 3);
            http::within(budget, clock::ntp_reading(host, each)).await.map(Some)
        }
        (ClockReference::Http(url), _) => {
            let t = Target::resolve(url, "").await.map_err(std::io::Error::other)?;
            let path = match t.path.trim_end_matches('/') {
                "" => "/".to_string(),
                p => p.to_string(),
            };
            clock::date_reading(&t, &path, deadline).await
        }
        (ClockReference::Target, Some(t)) => clock::date_reading(t, "/v1/models", deadline).await,
        (ClockReference::Target, None) => Err(std::io::Error::other("no target to read")),
    }
}

/// This host's clock against `reference` as a shard reads it before its run (`target`: the
/// server at `base_url`), taking at most `within`: for checking the hosts of a scaled run
/// before it starts (`servelab scale clock`). The reading and what it was read against.
pub async fn read_clock(
    reference: &ClockReference,
    base_url: Option<&str>,
    within: Duration,
) -> Result<(String, ClockReading), String> {
    let target = match base_url {
        Some(u) => Some(Target::resolve(u, "/v1/models").await.map_err(|e| e.to_string())?),
        None if *reference == ClockReference::Target => {
            return Err("--base-url: reading the target's clock needs its URL (or give \
                        --clock-reference ntp://HOST)"
                .into())
        }
        None => None,
    };
    let shown = base_url.map(|u| http::redact_url(u.trim_end_matches('/'))).unwrap_or_default();
    let Some(label) = label(reference, &shown) else {
        return Err("--clock-reference none: nothing to read".into());
    };
    match measure(reference, target.as_ref(), within).await {
        Ok(Some(r)) => Ok((label, r)),
        Ok(None) => Err(format!("{label}: the answer had no Date header")),
        Err(e) => Err(format!("cannot read the clock of {label}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_target_s_clock_is_kept_by_its_host_not_its_port() {
        let at = |url: &str| {
            let url = url.to_string();
            async move { Target::resolve(&url, "/v1/models").await.unwrap() }
        };
        let (a, b) = (at("http://127.0.0.1:8000").await, at("http://127.0.0.1:9001/x").await);
        let other = at("http://127.0.0.2:8000").await;
        let t = ClockReference::Target;
        assert_eq!(kept_by(&t, &a, "date A"), "date 127.0.0.1");
        assert_eq!(kept_by(&t, &a, "date A"), kept_by(&t, &b, "date B"));
        assert_ne!(kept_by(&t, &a, "date A"), kept_by(&t, &other, "date A"));
        // Other references are the server named, whatever the target.
        let ntp = ClockReference::Ntp("10.0.0.1:123".into());
        assert_eq!(kept_by(&ntp, &a, "ntp 10.0.0.1:123"), "ntp 10.0.0.1:123");
    }

    #[test]
    fn a_reading_takes_the_time_before_the_start_but_half_a_second_up_to_a_cap() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let at = |s: f64| Some(now + Duration::from_secs_f64(s));
        assert_eq!(budget(None, now, false), Duration::ZERO);
        assert_eq!(budget(Some(now - Duration::from_secs(3)), now, false), Duration::ZERO);
        assert_eq!(budget(at(0.4), now, false), Duration::ZERO);
        assert_eq!(budget(at(2.0), now, false), Duration::from_millis(1_500));
        // Warm-ups get half of what is left.
        assert_eq!(budget(at(2.0), now, true), Duration::from_millis(500));
        assert_eq!(budget(at(7.0), now, true), Duration::from_millis(3_000));
        assert_eq!(budget(at(300.0), now, true), MOST);
    }
}
