//! The workload driver in virtual time: feeds requests to an [`Engine`] by an open- or
//! closed-loop load and records every token's time. Deterministic: same input, same output.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::{Engine, EngineGauges, RequestShape};
use crate::error::{EngineError, Result};

/// How the driver releases requests in virtual time. Not a second load model: the arrival
/// times come from `servelab_load`'s schedule (the predictor draws them with
/// `Schedule::take_n`, as the measuring client would); this adds only the closed loop's rule,
/// which the real client gets from its worker slots, in the driver's event queue.
#[derive(Debug, Clone, PartialEq)]
pub enum VirtualLoad {
    /// Request `i` is sent at `arrivals_ns[i]`.
    Open {
        /// Send times, one per request, ns.
        arrivals_ns: Vec<u64>,
    },
    /// At most `concurrency` requests in flight, in order: request `i`'s intended send time is
    /// `max(its arrival, the moment a slot frees)`; a slot frees when the client has the last
    /// token. No arrivals: all are available at 0.
    Closed {
        /// In-flight cap (>= 1).
        concurrency: u32,
        /// Availability times, ns; `None`: all at 0.
        arrivals_ns: Option<Vec<u64>>,
    },
}

/// When gauges are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaugeSampling {
    /// After every started step (exact, large for long runs).
    EveryStep,
    /// Every `n` ns of virtual time.
    Interval(u64),
    /// Never.
    Off,
}

/// A run's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// One-way client↔engine latency, ns: added when the request reaches the engine and
    /// when each token reaches the client.
    pub network_ns: u64,
    /// Gauge sampling.
    pub gauges: GaugeSampling,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self { network_ns: 0, gauges: GaugeSampling::Interval(100_000_000) }
    }
}

/// What the client saw of one request in virtual time, ns from the run's start.
///
/// Not [`servelab_records::RequestRecord`]: that one is what a measured response carried
/// (chunks with their text, status, usage, stream notes), and calibration sums millions of
/// virtual requests that need only their token times. The predictor turns each into a real
/// record (`servelab_predict`), so everything downstream reads one record type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VirtualRecord {
    /// Index in the input.
    pub index: usize,
    /// Intended send time (arrival for open loop; slot time for closed loop).
    pub intended_ns: u64,
    /// First token received.
    pub first_token_ns: Option<u64>,
    /// Every token's receive time, in order (ITLs are their differences).
    pub token_ns: Vec<u64>,
    /// Last token received.
    pub end_ns: Option<u64>,
    /// Times the engine preempted it.
    pub preemptions: u32,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens requested.
    pub output_tokens: u32,
    /// Why the engine refused it, if it did.
    pub error: Option<String>,
}

/// A gauge sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeSample {
    /// Virtual time, ns.
    pub t_ns: u64,
    /// The engine's gauges then.
    pub gauges: EngineGauges,
}

/// Result of [`run`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunResult {
    /// One record per input request, in input order.
    pub requests: Vec<VirtualRecord>,
    /// Gauge time series.
    pub gauges: Vec<GaugeSample>,
    /// Engine steps run.
    pub steps: u64,
    /// Final gauges and counters.
    pub final_gauges: EngineGauges,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Request reaches the engine.
    Arrive(usize),
    /// The client has the last token: a closed-loop slot frees.
    Done(usize),
    /// A closed-loop request becomes available (its arrival time).
    Available,
}

struct Run<'a> {
    engine: &'a mut Engine,
    shapes: &'a [RequestShape],
    opts: RunOptions,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    res: RunResult,
    /// Closed loop: cap, next request index, in flight, availability times.
    cap: Option<usize>,
    next: usize,
    in_flight: usize,
    avail: Vec<u64>,
    next_sample: u64,
}

/// Runs `shapes` through `engine` under `load` until every request finished or was refused.
pub fn run(
    engine: &mut Engine,
    shapes: &[RequestShape],
    load: &VirtualLoad,
    opts: RunOptions,
) -> Result<RunResult> {
    let n = shapes.len();
    let (cap, avail) = match load {
        VirtualLoad::Open { arrivals_ns } => {
            if arrivals_ns.len() != n {
                return Err(EngineError::invalid(
                    "arrivals_ns",
                    format!("{} arrival times for {n} requests", arrivals_ns.len()),
                ));
            }
            (None, arrivals_ns.clone())
        }
        VirtualLoad::Closed { concurrency, arrivals_ns } => {
            if *concurrency == 0 {
                return Err(EngineError::invalid("concurrency", "expected >= 1, got 0"));
            }
            let a = arrivals_ns.clone().unwrap_or_else(|| vec![0; n]);
            if a.len() != n {
                return Err(EngineError::invalid(
                    "arrivals_ns",
                    format!("{} arrival times for {n} requests", a.len()),
                ));
            }
            (Some(*concurrency as usize), a)
        }
    };
    let requests = shapes
        .iter()
        .enumerate()
        .map(|(index, s)| VirtualRecord {
            index,
            prompt_tokens: s.prompt_tokens,
            output_tokens: s.output_tokens,
            token_ns: Vec::with_capacity(s.output_tokens as usize),
            ..Default::default()
        })
        .collect();
    let mut r = Run {
        engine,
        shapes,
        opts,
        events: BinaryHeap::new(),
        seq: 0,
        res: RunResult { requests, ..Default::default() },
        cap,
        next: 0,
        in_flight: 0,
        avail,
        next_sample: 0,
    };
    r.start();
    r.run_loop()?;
    r.res.final_gauges = r.engine.snapshot();
    Ok(r.res)
}

impl Run<'_> {
    fn push(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    fn send(&mut self, i: usize, t: u64) {
        self.res.requests[i].intended_ns = t;
        self.push(t + self.opts.network_ns, Event::Arrive(i));
    }

    fn start(&mut self) {
        match self.cap {
            None => {
                for i in 0..self.avail.len() {
                    self.send(i, self.avail[i]);
                }
            }
            Some(_) => self.fill(0),
        }
    }

    /// Closed loop: sends requests while slots are free and the next one is available.
    fn fill(&mut self, now: u64) {
        let Some(cap) = self.cap else { return };
        while self.in_flight < cap && self.next < self.avail.len() {
            let a = self.avail[self.next];
            if a > now {
                self.push(a, Event::Available);
                return;
            }
            self.in_flight += 1;
            let i = self.next;
            self.next += 1;
            self.send(i, now);
        }
    }

    fn run_loop(&mut self) -> Result<()> {
        let mut now = 0u64;
        loop {
            while let Some(&Reverse((t, _, e))) = self.events.peek() {
                if t > now {
                    break;
                }
                self.events.pop();
                self.handle(e, now);
            }
            while let Some(o) = self.engine.step(now) {
                self.res.steps += 1;
                let seen = o.end_ns + self.opts.network_ns;
                for &(id, k) in &o.emitted {
                    let rec = &mut self.res.requests[id as usize];
                    for _ in 0..k {
                        rec.token_ns.push(seen);
                    }
                }
                for &id in &o.first_token {
                    self.res.requests[id as usize].first_token_ns = Some(seen);
                }
                for &id in &o.preempted {
                    self.res.requests[id as usize].preemptions += 1;
                }
                for &id in &o.finished {
                    self.res.requests[id as usize].end_ns = Some(seen);
                    self.push(seen, Event::Done(id as usize));
                }
                if self.opts.gauges == GaugeSampling::EveryStep {
                    let gauges = self.engine.snapshot();
                    self.res.gauges.push(GaugeSample { t_ns: now, gauges });
                }
            }
            let next_event = self.events.peek().map(|Reverse((t, _, _))| *t);
            let next = match (next_event, self.engine.next_event_ns()) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if next <= now {
                return Err(EngineError::invalid(
                    "engine",
                    format!("stalled at {now} ns with work it cannot schedule"),
                ));
            }
            self.sample_until(now, next);
            now = next;
        }
        self.sample_until(now, now + 1);
        Ok(())
    }

    /// Interval sampling: the state is constant on `[now, next)`.
    fn sample_until(&mut self, _now: u64, next: u64) {
        let GaugeSampling::Interval(dt) = self.opts.gauges else { return };
        let dt = dt.max(1);
        if self.next_sample >= next {
            return;
        }
        let gauges = self.engine.snapshot();
        while self.next_sample < next {
            self.res.gauges.push(GaugeSample { t_ns: self.next_sample, gauges });
            self.next_sample += dt;
        }
    }

    fn handle(&mut self, e: Event, now: u64) {
        match e {
            Event::Arrive(i) => {
                let shape = self.shapes[i].clone();
                if let Err(err) = self.engine.add_request(i as u64, shape, now) {
                    self.res.requests[i].error = Some(err.to_string());
                    self.push(now, Event::Done(i));
                }
            }
            Event::Done(_) => {
                if self.cap.is_some() {
                    self.in_flight = self.in_flight.saturating_sub(1);
                    self.fill(now);
                }
            }
            Event::Available => self.fill(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EngineFile;

    fn engine(yaml: &str) -> Engine {
        Engine::new(&EngineFile::parse(yaml).unwrap().build(None).unwrap()).unwrap()
    }

    fn shapes(n: usize, p: u32, o: u32) -> Vec<RequestShape> {
        vec![RequestShape { prompt_tokens: p, output_tokens: o, ..Default::default() }; n]
    }

    #[test]
    fn closed_loop_one_at_a_time_chains_requests() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\n");
        let load = VirtualLoad::Closed { concurrency: 1, arrivals_ns: None };
        let opts = RunOptions { network_ns: 1000, gauges: GaugeSampling::Off };
        let r = run(&mut e, &shapes(3, 100, 4), &load, opts).unwrap();
        assert_eq!(r.requests[0].intended_ns, 0);
        for w in r.requests.windows(2) {
            // The next request is sent the moment the previous one's last token arrives.
            assert_eq!(w[1].intended_ns, w[0].end_ns.unwrap());
        }
        let q = &r.requests[1];
        assert_eq!(q.token_ns.len(), 4);
        assert_eq!(q.first_token_ns, Some(q.token_ns[0]));
        assert_eq!(q.end_ns, Some(q.token_ns[3]));
        assert_eq!(r.steps, 12);
        assert!(r.gauges.is_empty());
    }

    #[test]
    fn open_loop_is_deterministic_and_samples_gauges() {
        let go = || {
            let mut e = engine("model: qwen3-8b\ngpu: h100\nreplicas: 2\n");
            let load = VirtualLoad::Open { arrivals_ns: (0..20).map(|i| i * 5_000_000).collect() };
            let opts = RunOptions { network_ns: 0, gauges: GaugeSampling::Interval(10_000_000) };
            run(&mut e, &shapes(20, 500, 20), &load, opts).unwrap()
        };
        let a = go();
        assert_eq!(a, go());
        assert!(a.requests.iter().all(|r| r.end_ns.is_some() && r.token_ns.len() == 20));
        assert!(a.gauges.windows(2).all(|w| w[1].t_ns - w[0].t_ns == 10_000_000));
        assert!(a.gauges.iter().any(|g| g.gauges.running > 1));
        assert_eq!(a.final_gauges.generation_tokens_total, 400);
        assert_eq!(a.final_gauges.running, 0);
    }

    #[test]
    fn refused_requests_are_recorded_and_free_their_slot() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\nscheduler: {num_gpu_blocks: 10}\n");
        let mut s = shapes(2, 50, 5);
        s[0].prompt_tokens = 5000;
        let load = VirtualLoad::Closed { concurrency: 1, arrivals_ns: None };
        let r = run(&mut e, &s, &load, RunOptions::default()).unwrap();
        assert!(r.requests[0].error.as_deref().unwrap_or("").contains("KV blocks"));
        assert_eq!(r.requests[1].token_ns.len(), 5);
    }

    #[test]
    fn bad_load_is_an_error() {
        let mut e = engine("model: qwen3-8b\ngpu: h100\n");
        let load = VirtualLoad::Open { arrivals_ns: vec![0] };
        assert!(run(&mut e, &shapes(2, 10, 2), &load, RunOptions::default()).is_err());
        let load = VirtualLoad::Closed { concurrency: 0, arrivals_ns: None };
        assert!(run(&mut e, &shapes(2, 10, 2), &load, RunOptions::default()).is_err());
    }
}
