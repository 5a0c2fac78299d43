//! How far this host's wall clock is from a reference clock: the target's (or another HTTP
//! server's) `Date` header, or an NTP server.
//!
//! Shards of one run share a wall-clock time zero, so the merged timeline is as aligned as
//! their clocks. Each shard reads its offset against one reference; the merge compares them.
//!
//! `Date` has whole seconds, so one exchange only bounds the offset to a second. The reading
//! here narrows it at the reference's second boundaries (the htpdate idea): probes timed to
//! straddle the instant its `Date` ticks over tell on which side of the tick each landed. Two
//! or three rounds of [`PROBES_PER_ROUND`] probes bring the bound from a second to a few
//! milliseconds plus the round trip. The bound is exact for a server that stamps each
//! response from its clock (hyper, nginx); a server that refreshes a cached `Date` on a timer
//! (uvicorn, under vLLM and SGLang, once a second) reads as behind by that refresh's phase,
//! alike for every shard that reads it within seconds of the others.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;

use crate::http::{connect, drive, Conn, Target};

/// Probes sent around one second boundary of the reference: each round divides the bound by
/// this many (plus the round trip).
pub const PROBES_PER_ROUND: usize = 16;

/// Rounds after the first exchange: 1,000 ms → ~62 ms → ~4 ms → ~0.3 ms, each plus the
/// round trip.
const MAX_ROUNDS: usize = 3;

/// What one reading found: the reference's clock minus this host's, within ± uncertainty.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockReading {
    /// Reference − local, ms (the middle of the offsets the exchanges allow).
    pub offset_ms: f64,
    /// Half the width of the offsets the exchanges allow, ms: the true offset is within
    /// `offset_ms ± uncertainty_ms` (for a reference that stamps its clock exactly).
    pub uncertainty_ms: f64,
    /// Exchanges the reading took.
    pub exchanges: u32,
    /// What a reader should know (a reference that contradicted itself, a deadline that
    /// allowed no refinement).
    pub note: Option<String>,
}

/// Offsets (reference − local, ms) still possible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Smallest possible offset, ms.
    pub lo: f64,
    /// Largest possible offset, ms.
    pub hi: f64,
}

impl Bounds {
    /// `hi − lo`.
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }

    /// Offsets both allow; `None` when they contradict each other.
    pub fn intersect(&self, other: &Bounds) -> Option<Bounds> {
        let b = Bounds { lo: self.lo.max(other.lo), hi: self.hi.min(other.hi) };
        (b.lo <= b.hi).then_some(b)
    }

    fn reading(&self, exchanges: u32, note: Option<String>) -> ClockReading {
        ClockReading {
            offset_ms: (self.lo + self.hi) / 2.0,
            uncertainty_ms: self.width() / 2.0,
            exchanges,
            note,
        }
    }
}

/// One `Date` exchange: local wall-clock instants (ms since the Unix epoch) just before the
/// request left and just after the answer's head arrived, and the whole second the answer's
/// `Date` carried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DateProbe {
    /// Local instant before sending, ms since the epoch.
    pub before_ms: f64,
    /// Local instant after the answer's head, ms since the epoch.
    pub after_ms: f64,
    /// The answer's `Date`, seconds since the epoch.
    pub date_s: i64,
}

impl DateProbe {
    /// The offsets this exchange allows. The reference stamped `Date` at some local instant
    /// in `[before, after]`, when its own clock read in `[date, date + 1 s)` (`Date`
    /// truncates): the offset is above `date − after` and below `date + 1 s − before`.
    pub fn bounds(&self) -> Bounds {
        let date_ms = self.date_s as f64 * 1e3;
        Bounds { lo: date_ms - self.after_ms, hi: date_ms + 1e3 - self.before_ms }
    }
}

/// One round of probes that splits `b` at a second boundary of the reference: returns the
/// boundary (reference ms since the epoch) and the local instants to send at, earliest first,
/// none before `earliest_ms`. Probe `j` assumes the offset is the middle of the `j`-th of
/// `k` equal slices of `b` and sends so that, were it so, the reference would stamp it at the
/// boundary half a round trip later: whichever side of the tick it lands on rules out the
/// slices on the other side.
pub fn plan_round(b: Bounds, earliest_ms: f64, rtt_ms: f64, k: usize) -> (f64, Vec<f64>) {
    let k = k.max(1);
    let slice = b.width() / k as f64;
    // Aimed offsets, largest first: the largest offset sends earliest.
    let aims: Vec<f64> = (0..k).rev().map(|j| b.lo + (j as f64 + 0.5) * slice).collect();
    let first_aim = aims[0];
    let boundary = ((earliest_ms + first_aim + rtt_ms / 2.0) / 1e3).ceil() * 1e3;
    let sends = aims.iter().map(|aim| boundary - aim - rtt_ms / 2.0).collect();
    (boundary, sends)
}

/// Milliseconds since the Unix epoch (negative before it).
pub fn unix_ms(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

/// The target's clock minus this host's from its `Date` header, narrowed at its second
/// boundaries while `deadline` allows (the last round must end before it). `path` is what
/// is fetched (`/v1/models` on an engine). `Ok(None)`: the answers carry no readable `Date`.
/// With no time for a round the reading is one exchange's, good to about ±500 ms; a
/// reference whose `Date` contradicts itself (several workers with their own clocks, or a
/// stale cache) keeps that first reading and says so in its note.
pub async fn date_reading(
    target: &Target,
    path: &str,
    deadline: Instant,
) -> std::io::Result<Option<ClockReading>> {
    let mut first = connect(target.addr).await?;
    // Two exchanges on one connection: the second's round trip is a warm one.
    if probe(&mut first, target, path).await?.is_none() {
        return Ok(None);
    }
    let Some(p) = probe(&mut first, target, path).await? else { return Ok(None) };
    let coarse = p.bounds();
    let rtt = (p.after_ms - p.before_ms).max(0.0);
    let mut bounds = coarse;
    let mut exchanges = 2u32;
    let mut conns: Vec<Conn> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        // Narrow enough: the round trip, not the second, is what is left.
        if bounds.width() <= 2.0 * rtt + 1.0 {
            break;
        }
        if conns.is_empty() {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..PROBES_PER_ROUND {
                set.spawn(connect(target.addr));
            }
            while let Some(c) = set.join_next().await {
                conns.push(c.map_err(std::io::Error::other)??);
            }
        }
        let (now, start) = (unix_ms(SystemTime::now()), Instant::now());
        let (_, sends) = plan_round(bounds, now + 20.0, rtt, conns.len());
        let last = sends.last().copied().unwrap_or(now);
        // The round must end (its last answer back, with room for a late wakeup) in time.
        let ends = start + Duration::from_secs_f64(((last - now) + rtt + 50.0) / 1e3);
        if ends > deadline {
            break;
        }
        let mut set = tokio::task::JoinSet::new();
        for (mut conn, at) in conns.drain(..).zip(sends) {
            let (target, path) = (target.clone(), path.to_string());
            let wait = Duration::from_secs_f64(((at - now) / 1e3).max(0.0));
            set.spawn(async move {
                tokio::time::sleep_until(start + wait).await;
                let p = probe(&mut conn, &target, &path).await;
                (conn, p)
            });
        }
        let mut probes = Vec::new();
        while let Some(done) = set.join_next().await {
            let (conn, p) = done.map_err(std::io::Error::other)?;
            conns.push(conn);
            if let Some(p) = p? {
                probes.push(p);
            }
        }
        exchanges += probes.len() as u32;
        match narrow(bounds, &probes) {
            Some(b) => bounds = b,
            None => {
                let note = "the reference's Date header contradicted itself (several workers, \
                            or a cached Date): offset from whole seconds only"
                    .to_string();
                return Ok(Some(coarse.reading(exchanges, Some(note))));
            }
        }
    }
    let note = (bounds == coarse).then(|| "no time to refine it: whole seconds only".to_string());
    Ok(Some(bounds.reading(exchanges, note)))
}

/// `b` narrowed by every probe; `None` when they contradict it or each other.
pub fn narrow(b: Bounds, probes: &[DateProbe]) -> Option<Bounds> {
    probes.iter().try_fold(b, |acc, p| acc.intersect(&p.bounds()))
}

/// One `GET path` on `conn`, timed on the wall clock; `Ok(None)` without a readable `Date`.
async fn probe(conn: &mut Conn, target: &Target, path: &str) -> std::io::Result<Option<DateProbe>> {
    let mut req = http::Request::get(path).header(http::header::HOST, target.authority.as_str());
    for (k, v) in &target.headers {
        req = req.header(k, v);
    }
    let req = req.body(Full::new(Bytes::new())).map_err(std::io::Error::other)?;
    let before = SystemTime::now();
    let sent = conn.sender.send_request(req);
    let resp = drive(&mut conn.driver, sent).await.map_err(std::io::Error::other)?;
    let after = SystemTime::now();
    let date = resp
        .headers()
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    // Read the body to its end so the connection can carry the next probe.
    let body = http_body_util::Limited::new(resp.into_body(), crate::http::MAX_GET_BODY);
    drive(&mut conn.driver, http_body_util::BodyExt::collect(body))
        .await
        .map_err(std::io::Error::other)?;
    Ok(date.map(|d| DateProbe {
        before_ms: unix_ms(before),
        after_ms: unix_ms(after),
        date_s: (unix_ms(d) / 1e3).round() as i64,
    }))
}

/// SNTP exchanges with one NTP server.
const NTP_SAMPLES: usize = 3;

/// The NTP server's clock minus this host's by SNTP (RFC 4330): [`NTP_SAMPLES`] exchanges
/// 200 ms apart (servers rate-limit bursts), keeping the one with the shortest round trip,
/// whose offset is exact within half that round trip. `server` is `HOST[:PORT]` (port 123 by
/// default); `timeout` bounds each exchange.
pub async fn ntp_reading(server: &str, timeout: Duration) -> std::io::Result<ClockReading> {
    let addr = resolve_ntp(server).await?;
    let bind: SocketAddr =
        if addr.is_ipv6() { "[::]:0".parse() } else { "0.0.0.0:0".parse() }.expect("an address");
    let client = rsntp::AsyncSntpClient::with_config(
        rsntp::Config::default().bind_address(bind).timeout(timeout),
    );
    let mut best: Option<(f64, f64)> = None;
    let mut last_error = None;
    let mut exchanges = 0;
    for i in 0..NTP_SAMPLES {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        match client.synchronize(addr).await {
            Ok(r) => {
                exchanges += 1;
                let offset = r.clock_offset().as_secs_f64() * 1e3;
                let delay = r.round_trip_delay().as_secs_f64().max(0.0) * 1e3;
                if best.is_none_or(|(_, d)| delay < d) {
                    best = Some((offset, delay));
                }
            }
            Err(e) => last_error = Some(e.to_string()),
        }
    }
    match best {
        Some((offset_ms, delay)) => {
            Ok(ClockReading { offset_ms, uncertainty_ms: delay / 2.0, exchanges, note: None })
        }
        None => Err(std::io::Error::other(format!(
            "no answer from NTP server {server}: {}",
            last_error.unwrap_or_default()
        ))),
    }
}

/// `HOST[:PORT]` (an IPv6 address in brackets) to one socket address, port 123 by default.
async fn resolve_ntp(server: &str) -> std::io::Result<SocketAddr> {
    let has_port = match server.rfind(']') {
        Some(close) => server[close..].contains(':'),
        None => server.matches(':').count() == 1,
    };
    let spec = if has_port { server.to_string() } else { format!("{server}:123") };
    let first = tokio::net::lookup_host(spec.as_str()).await?.next();
    first.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, format!("'{server}' has no address"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_exchange_bounds_the_offset_to_a_second_and_the_round_trip() {
        // Sent at 1,000.2 s, answered at 1,000.4 s, stamped 1,000 s: the reference read
        // between 1,000 and 1,001 s at some instant in [1,000.2, 1,000.4] s.
        let p = DateProbe { before_ms: 1_000_200.0, after_ms: 1_000_400.0, date_s: 1_000 };
        assert_eq!(p.bounds(), Bounds { lo: -400.0, hi: 800.0 });
        assert_eq!(p.bounds().reading(1, None).offset_ms, 200.0);
        assert_eq!(p.bounds().reading(1, None).uncertainty_ms, 600.0);
    }

    #[test]
    fn bounds_intersect_or_contradict() {
        let a = Bounds { lo: -10.0, hi: 30.0 };
        assert_eq!(a.intersect(&Bounds { lo: 0.0, hi: 50.0 }), Some(Bounds { lo: 0.0, hi: 30.0 }));
        assert_eq!(a.intersect(&Bounds { lo: 31.0, hi: 50.0 }), None);
    }

    #[test]
    fn a_round_straddles_the_next_reachable_boundary() {
        // Offset between 0 and 800 ms, now 1,000.1 s, round trip 2 ms, 4 probes: aims 700,
        // 500, 300, 100 ms. The earliest (aim 700) must leave after 1,000.1 s, so the
        // boundary is the first whole second at or after 1,000.1 + 0.7 + 0.001 s: 1,001 s.
        let (boundary, sends) = plan_round(Bounds { lo: 0.0, hi: 800.0 }, 1_000_100.0, 2.0, 4);
        assert_eq!(boundary, 1_001_000.0);
        assert_eq!(sends, vec![1_000_299.0, 1_000_499.0, 1_000_699.0, 1_000_899.0]);
    }

    /// A reference `offset` ms ahead of this host, stamping each probe `half_rtt` after it
    /// leaves: what it answers to a probe sent at `send`.
    fn answer(offset: f64, half_rtt: f64, send: f64) -> DateProbe {
        let stamped = send + half_rtt + offset;
        DateProbe {
            before_ms: send,
            after_ms: send + 2.0 * half_rtt,
            date_s: (stamped / 1e3).floor() as i64,
        }
    }

    #[test]
    fn rounds_narrow_to_the_round_trip_around_the_true_offset() {
        for offset in [-1_234.5, -3.0, 0.0, 0.4, 77.7, 499.9, 2_500.25] {
            let half_rtt = 0.15;
            let mut now = 5_000_000.0;
            let mut b = answer(offset, half_rtt, now).bounds();
            assert!(b.width() <= 1_000.0 + 2.0 * half_rtt);
            for _ in 0..MAX_ROUNDS {
                let (_, sends) = plan_round(b, now + 20.0, 2.0 * half_rtt, PROBES_PER_ROUND);
                let probes: Vec<DateProbe> =
                    sends.iter().map(|&s| answer(offset, half_rtt, s)).collect();
                now = sends.last().unwrap() + 10.0;
                b = narrow(b, &probes).expect("consistent");
                assert!(b.lo <= offset && offset <= b.hi, "{offset} in {b:?}");
            }
            // 1,000 / 16³ ≈ 0.24 ms plus the round trip.
            assert!(b.width() < 0.25 + 2.0 * 2.0 * half_rtt, "{offset}: {b:?}");
        }
    }

    #[test]
    fn a_reference_that_jumps_a_second_contradicts_itself() {
        let b = answer(100.0, 0.1, 1_000_000.0).bounds();
        let honest = answer(100.0, 0.1, 1_000_950.0);
        let jumped = DateProbe { date_s: honest.date_s + 1, ..honest };
        assert!(narrow(b, &[honest]).is_some());
        assert_eq!(narrow(b, &[honest, jumped]), None);
    }
}
