//! How far this host's wall clock is from a reference clock: the target's (or another HTTP
//! server's) `Date` header, or an NTP server.
//!
//! Shards of one run share a wall-clock time zero, so the merged timeline is as aligned as
//! their clocks. Each shard reads its offset against one reference; the merge compares them.
//!
//! `Date` has whole seconds, so one exchange only bounds the offset to a second. The reading
//! here narrows it at the reference's second boundaries (the htpdate idea): probes timed to
//! straddle the instant its `Date` ticks over tell on which side of the tick each landed.
//! Three rounds of [`PROBES_PER_ROUND`] probes, each at its own boundary, bring the bound from
//! a second to a fraction of a millisecond plus the round trip, and a fourth checks it. Each
//! round also aims a quarter of the bound's width (1 to 100 ms) beyond either side of it: a
//! `Date` stamped per response from the server's clock (hyper, Go, nginx) ticks where the
//! earlier rounds said, one refreshed on a timer (uvicorn, under vLLM and SGLang, every
//! ~1,006 ms) has moved by then, and the rounds contradict each other. Only four consistent
//! rounds give a millisecond bound (about 4 s); otherwise the reading allows for a `Date` up to
//! [`STALE_MS`] stale (about ±1.25 s) and says why. A cached `Date` refreshed exactly once a
//! second, or drifting less than a millisecond a second, cannot be told from a clock that is
//! behind.
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use servelab_records::time::unix_ms_exact as unix_ms;
use tokio::time::Instant;

use crate::http::{connect, drive, get_request, read_body, split_host_port, within, Conn, Target};

/// Probes sent around one second boundary of the reference. They span the bound and a
/// quarter of its width (1 to 100 ms) beyond either side, so each round divides the bound by
/// 16 to 24 (plus the round trip).
pub const PROBES_PER_ROUND: usize = 24;

/// Rounds after the first exchanges, each at its own second boundary: 1,000 ms → ~50 ms →
/// ~3 ms → ~0.2 ms, each plus the round trip; the fourth checks, at that precision, that the
/// tick has not moved in a second (a `Date` refreshed every ~1,006 ms moves 6 ms).
const ROUNDS: usize = 4;

/// Rounds at most: past [`ROUNDS`], more while the deadline allows and the bound is still
/// wider than the round trip (a busy machine that delayed a round's probes widened it).
const MOST_ROUNDS: usize = 7;

/// How stale a `Date` may be when the reading cannot show it is stamped per response, ms:
/// uvicorn refreshes its cached `Date` every ~1,006 ms, later when its loop is busy.
pub const STALE_MS: f64 = 1_500.0;

/// What one reading found: the reference's clock minus this host's, within ± uncertainty.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockReading {
    /// Reference − local, ms (the middle of the offsets the exchanges allow).
    pub offset_ms: f64,
    /// Half the width of the offsets the exchanges allow, ms: the true offset is within
    /// `offset_ms ± uncertainty_ms` (for a `Date` reference: one whose `Date` is stamped per
    /// response, or at most [`STALE_MS`] stale when the note says it could not be shown to be).
    pub uncertainty_ms: f64,
    /// Exchanges the reading took.
    pub exchanges: u32,
    /// Why the reading is only to whole seconds; `None` for a reading to its round trip.
    pub coarse: Option<Coarse>,
}

/// Why a `Date` reading is only to whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coarse {
    /// There was no time for the four rounds: reading again with more time may narrow it.
    NoTime,
    /// The rounds contradicted each other: the `Date` is cached (uvicorn's), or several
    /// workers with their own clocks answer. Reading it again will not narrow it.
    NotPerResponse,
}

impl ClockReading {
    /// Why the reading is coarse, in words; `None` for a reading to its round trip.
    pub fn note(&self) -> Option<String> {
        let why = match self.coarse? {
            Coarse::NoTime => {
                "no time for the four rounds that show a Date is stamped per response"
            }
            Coarse::NotPerResponse => {
                "its Date is not stamped per response (a cached Date, as uvicorn's, or several \
                 workers)"
            }
        };
        Some(format!("{why}: whole seconds only, allowing for a Date up to {STALE_MS:.0} ms old"))
    }
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

    fn reading(&self, exchanges: u32, coarse: Option<Coarse>) -> ClockReading {
        ClockReading {
            offset_ms: (self.lo + self.hi) / 2.0,
            uncertainty_ms: self.width() / 2.0,
            exchanges,
            coarse,
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
        self.bounds_stale(0.0)
    }

    /// [`DateProbe::bounds`] for a `Date` that may be up to `stale_ms` old when sent: the
    /// reference's clock read in `[date, date + 1 s + stale)`.
    pub fn bounds_stale(&self, stale_ms: f64) -> Bounds {
        let date_ms = self.date_s as f64 * 1e3;
        Bounds { lo: date_ms - self.after_ms, hi: date_ms + 1e3 + stale_ms - self.before_ms }
    }
}

/// One round of `k` probes around a second boundary of the reference: the boundary
/// (reference ms since the epoch) and the local instants to send at, earliest first, none
/// before `earliest_ms`. The probes aim at offsets evenly over `b` widened by a quarter of its
/// width (at least 1 ms, at most 100 ms) on either side; probe `j`, aimed at offset `θ`, leaves so that the
/// reference would stamp it at the boundary half a round trip later were the offset `θ`:
/// whichever side of the tick it lands on rules out the offsets on the other side. The
/// probes aimed outside `b` check it: for a `Date` stamped per response they land where `b`
/// says.
pub fn plan_round(b: Bounds, earliest_ms: f64, rtt_ms: f64, k: usize) -> (f64, Vec<f64>) {
    let k = k.max(1);
    let margin = (b.width() / 4.0).clamp(1.0, 100.0);
    let (lo, width) = (b.lo - margin, b.width() + 2.0 * margin);
    let slice = width / k as f64;
    // Aimed offsets, largest first: the largest offset sends earliest.
    let aims: Vec<f64> = (0..k).rev().map(|j| lo + (j as f64 + 0.5) * slice).collect();
    let first_aim = aims[0];
    let boundary = ((earliest_ms + first_aim + rtt_ms / 2.0) / 1e3).ceil() * 1e3;
    let sends = aims.iter().map(|aim| boundary - aim - rtt_ms / 2.0).collect();
    (boundary, sends)
}

/// The target's clock minus this host's from its `Date` header, narrowed and checked at four
/// of its second boundaries when `deadline` allows (the last round must end before it). `path` is
/// what is fetched (`/v1/models` on an engine). `Ok(None)`: the answers carry no readable
/// `Date`. Without time for the four rounds, or when they contradict each other (a cached
/// `Date`, several workers), the reading allows for a `Date` up to [`STALE_MS`] stale and says
/// why ([`ClockReading::coarse`]); a `Date` that contradicts even that is an error.
pub async fn date_reading(
    target: &Target,
    path: &str,
    deadline: Instant,
) -> std::io::Result<Option<ClockReading>> {
    // Two exchanges on one connection (a new one if the server closed it): the second's
    // round trip is a warm one.
    let mut first = within(PROBE_TIMEOUT, connect(target.addr)).await?;
    let Some(p0) = within(PROBE_TIMEOUT, probe(&mut first, target, path)).await? else {
        return Ok(None);
    };
    if first.is_stale() {
        first = within(PROBE_TIMEOUT, connect(target.addr)).await?;
    }
    let Some(p) = within(PROBE_TIMEOUT, probe(&mut first, target, path)).await? else {
        return Ok(None);
    };
    let rtt = (p.after_ms - p.before_ms).max(0.0);
    let mut all = vec![p0, p];
    let mut bounds = narrow(p0.bounds(), &[p]);
    let mut rounds = 0;
    let mut conns: Vec<Conn> = Vec::new();
    // Narrow enough: what is left is the round trip, not the second.
    let narrow_enough = |b: &Bounds| b.width() <= 2.0 * rtt + 1.0;
    while let Some(b) =
        bounds.filter(|b| rounds < ROUNDS || (rounds < MOST_ROUNDS && !narrow_enough(b)))
    {
        // Connections opened before the round, so no handshake is timed; one the server
        // closed (or a probe failed on) is opened again.
        conns.retain(|c| !c.is_stale());
        let mut set = tokio::task::JoinSet::new();
        for _ in conns.len()..PROBES_PER_ROUND {
            set.spawn(within(PROBE_TIMEOUT, connect(target.addr)));
        }
        while let Some(c) = set.join_next().await {
            if let Ok(Ok(c)) = c {
                conns.push(c);
            }
        }
        let (now, start) = (unix_ms(SystemTime::now()), Instant::now());
        let (_, sends) = plan_round(b, now + 20.0, rtt, conns.len());
        let last = sends.last().copied().unwrap_or(now);
        // The round must end (its last answer back, with room for a late wakeup) in time.
        let ends = start + Duration::from_secs_f64(((last - now) + rtt + 50.0) / 1e3);
        if conns.is_empty() || ends > deadline {
            break;
        }
        let mut set = tokio::task::JoinSet::new();
        for (mut conn, at) in conns.drain(..).zip(sends) {
            let (target, path) = (target.clone(), path.to_string());
            let wait = Duration::from_secs_f64(((at - now) / 1e3).max(0.0));
            set.spawn(async move {
                tokio::time::sleep_until(start + wait).await;
                let p = within(PROBE_TIMEOUT, probe(&mut conn, &target, &path)).await;
                (conn, p)
            });
        }
        let mut probes = Vec::new();
        while let Some(done) = set.join_next().await {
            // A probe that failed rules nothing out; its connection is opened again.
            if let Ok((conn, p)) = done {
                conns.push(conn);
                if let Ok(Some(p)) = p {
                    probes.push(p);
                }
            }
        }
        if probes.is_empty() {
            break;
        }
        bounds = narrow(b, &probes);
        all.extend(probes);
        rounds += 1;
    }
    conclude(&all, bounds, rounds).map(Some).map_err(std::io::Error::other)
}

/// One exchange (or connect) of a reading may take this long: a server that accepts and
/// then says nothing must not hold a shard before its start.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The reading from every probe of a `Date` reading (`all`), the bounds the rounds left
/// (`None`: they contradicted each other) and how many rounds ran: the rounds' bound after
/// all four rounds, else the bound that allows for a `Date` up to [`STALE_MS`] stale, with
/// why ([`Coarse`]); an error when even that contradicts itself.
pub fn conclude(
    all: &[DateProbe],
    bounds: Option<Bounds>,
    rounds: usize,
) -> Result<ClockReading, String> {
    let exchanges = all.len() as u32;
    let coarse = match bounds {
        Some(b) if rounds >= ROUNDS => return Ok(b.reading(exchanges, None)),
        Some(_) => Coarse::NoTime,
        None => Coarse::NotPerResponse,
    };
    let stale = all.iter().map(|p| p.bounds_stale(STALE_MS));
    match stale.map(Some).reduce(|a, b| a?.intersect(&b?)).flatten() {
        Some(b) => Ok(b.reading(exchanges, Some(coarse))),
        None => Err("its Date header jumps by more than a stale Date can (several workers with \
                     their own clocks?)"
            .to_string()),
    }
}

/// `b` narrowed by every probe; `None` when they contradict it or each other.
pub fn narrow(b: Bounds, probes: &[DateProbe]) -> Option<Bounds> {
    probes.iter().try_fold(b, |acc, p| acc.intersect(&p.bounds()))
}

/// One `GET path` on `conn`, timed on the wall clock; `Ok(None)` without a readable `Date`.
async fn probe(conn: &mut Conn, target: &Target, path: &str) -> std::io::Result<Option<DateProbe>> {
    let req = get_request(target, path)?;
    let before = SystemTime::now();
    let sent = conn.sender.send_request(req);
    let resp = drive(&mut conn.driver, sent).await.map_err(std::io::Error::other)?;
    let after = SystemTime::now();
    let date = resp
        .headers()
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    read_body(conn, resp.into_body()).await?;
    Ok(date.map(|d| DateProbe {
        before_ms: unix_ms(before),
        after_ms: unix_ms(after),
        date_s: (unix_ms(d) / 1e3).round() as i64,
    }))
}

/// SNTP exchanges with one NTP server.
const NTP_SAMPLES: usize = 3;

/// The NTP server's clock minus this host's by SNTP (RFC 4330): three exchanges
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
            Ok(ClockReading { offset_ms, uncertainty_ms: delay / 2.0, exchanges, coarse: None })
        }
        None => Err(std::io::Error::other(format!(
            "no answer from NTP server {server}: {}",
            last_error.unwrap_or_default()
        ))),
    }
}

/// `HOST[:PORT]` (an IPv6 address in brackets) to one socket address, port 123 by default.
async fn resolve_ntp(server: &str) -> std::io::Result<SocketAddr> {
    let bad =
        |why: &str| std::io::Error::new(std::io::ErrorKind::NotFound, format!("'{server}' {why}"));
    let (host, port) = split_host_port(server).ok_or_else(|| bad("is not HOST[:PORT]"))?;
    let port = match port {
        None | Some("") => 123,
        Some(p) => p.parse::<u16>().map_err(|_| bad("has no valid port"))?,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let first = tokio::net::lookup_host((host, port)).await?.next();
    first.ok_or_else(|| bad("has no address"))
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
        // Offset between 0 and 800 ms, widened by 100 ms each side; now 1,000.1 s, round trip
        // 2 ms, 4 probes: aims 775, 525, 275, 25 ms. The earliest (aim 775) must leave after
        // 1,000.1 s, so the boundary is the first whole second at or after
        // 1,000.1 + 0.775 + 0.001 s: 1,001 s.
        let (boundary, sends) = plan_round(Bounds { lo: 0.0, hi: 800.0 }, 1_000_100.0, 2.0, 4);
        assert_eq!(boundary, 1_001_000.0);
        assert_eq!(sends, vec![1_000_224.0, 1_000_474.0, 1_000_724.0, 1_000_974.0]);
        // A narrow bound is widened by at least 1 ms each side.
        let (_, sends) = plan_round(Bounds { lo: 10.0, hi: 12.0 }, 1_000_100.0, 0.0, 2);
        assert_eq!(sends, vec![1_000_988.0, 1_000_990.0]);
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

    /// The probes of a whole reading against `answer` (a reference answering a probe sent at
    /// a local instant), as [`date_reading`] times them: two exchanges, then the rounds. The
    /// reading and whether the rounds contradicted each other.
    fn read(answer: impl Fn(f64) -> DateProbe) -> (Result<ClockReading, String>, bool) {
        let mut now = 5_000_000.0;
        let mut all = vec![answer(now), answer(now + 1.0)];
        let rtt = all[1].after_ms - all[1].before_ms;
        let mut b = narrow(all[0].bounds(), &all[1..]);
        let mut rounds = 0;
        while let Some(bounds) = b.filter(|_| rounds < ROUNDS) {
            let (_, sends) = plan_round(bounds, now + 20.0, rtt, PROBES_PER_ROUND);
            let probes: Vec<DateProbe> = sends.iter().map(|&s| answer(s)).collect();
            now = sends.last().unwrap() + 10.0;
            b = narrow(bounds, &probes);
            all.extend(probes);
            rounds += 1;
        }
        (conclude(&all, b, rounds), b.is_none())
    }

    #[test]
    fn four_rounds_narrow_to_the_round_trip_around_the_true_offset() {
        for offset in [-1_234.5, -3.0, 0.0, 0.4, 77.7, 499.9, 2_500.25] {
            let (r, contradicted) = read(|s| answer(offset, 0.15, s));
            let r = r.unwrap();
            assert!(!contradicted && r.coarse.is_none(), "{offset}: {r:?}");
            assert!((r.offset_ms - offset).abs() <= r.uncertainty_ms, "{offset}: {r:?}");
            // 1,000 / 16³ ≈ 0.24 ms plus the round trip (the fourth round checks, and narrows
            // a little more).
            assert!(r.uncertainty_ms < (0.25 + 0.3 * 2.0) / 2.0, "{offset}: {r:?}");
            assert_eq!(r.exchanges as usize, 2 + ROUNDS * PROBES_PER_ROUND);
        }
    }

    /// A uvicorn-like reference on this host's clock: its `Date` is refreshed every
    /// `period` ms from `phase` on and shows the whole second of the last refresh.
    fn cached(period: f64, phase: f64, half_rtt: f64, send: f64) -> DateProbe {
        let stamped = send + half_rtt;
        let refresh = phase + ((stamped - phase) / period).floor() * period;
        DateProbe {
            before_ms: send,
            after_ms: send + 2.0 * half_rtt,
            date_s: (refresh / 1e3).floor() as i64,
        }
    }

    #[test]
    fn a_cached_date_is_caught_and_read_as_whole_seconds_that_hold_the_truth() {
        // uvicorn's refresh period was measured here at 1,003-1,008 ms.
        for period in [1_003.0, 1_006.0, 1_010.0] {
            for phase in (0..50).map(|i| 5_000_000.0 + f64::from(i) * 41.0) {
                let (r, contradicted) = read(|s| cached(period, phase, 0.15, s));
                let r = r.unwrap();
                assert!(contradicted, "{period} {phase}: {r:?}");
                assert_eq!(r.coarse, Some(Coarse::NotPerResponse), "{r:?}");
                assert!(r.offset_ms.abs() <= r.uncertainty_ms, "{period} {phase}: {r:?}");
                assert!(r.uncertainty_ms <= 1_250.5, "{r:?}");
            }
        }
    }

    #[test]
    fn without_the_four_rounds_a_reading_allows_for_a_stale_date() {
        let p = answer(0.0, 0.1, 1_000_300.0);
        let r = conclude(&[p], Some(p.bounds()), 2).unwrap();
        assert_eq!(r.coarse, Some(Coarse::NoTime));
        assert!(r.note().is_some_and(|n| n.starts_with("no time for the four")));
        // [date − after, date + 1 s + 1.5 s − before]: 2.5 s wide.
        assert!((r.uncertainty_ms - (2_500.0 + 0.2) / 2.0).abs() < 1e-6, "{r:?}");
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
