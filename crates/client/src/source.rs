//! What the measuring loop sends: one seam for every workload.
//!
//! Each arrival of the schedule starts one *unit*: a single request, or a whole multi-turn
//! session. A [`RequestSource`] says how many units there are, which requests warm the server
//! up, how many requests a shard's share of the units makes, and writes each request's body;
//! the loop asks it and never which workload it runs. A new kind of workload is a variant
//! here, with its loader in `servelab-workload` ([`Workload`]).

use std::sync::Arc;

use servelab_load::{LoadSpec, Schedule, Shard};
use servelab_workload::{Prompt, TraceWorkload, Workload};

use crate::openai::{request_body, BodyOptions};
use crate::planned::{PlannedRequest, RequestWriter};
use crate::session::SessionRun;

/// The measured requests of a run, by unit.
#[derive(Debug, Clone)]
pub enum RequestSource {
    /// Requests written before the run (single prompts): unit `g` is request `g` (cycled).
    Prompts {
        /// The measured requests.
        requests: Arc<[PlannedRequest]>,
        /// Requests written for the warm-ups alone; `None`: warm-ups resend the first ones.
        warmups: Option<Arc<[PlannedRequest]>>,
    },
    /// Requests written on demand, a bounded number of arrivals ahead of their sends (the
    /// first ones before the clock starts): a long trace's bodies are never all in memory.
    OnDemand(Arc<dyn RequestWriter>),
    /// Multi-turn sessions: unit `g` is a session, whose turns go one after another.
    Sessions(Arc<SessionRun>),
}

impl RequestSource {
    /// The requests of `workload`, written with `opts`: prompts now, a trace's rows when the
    /// loop asks for them, a session's turns when the replies they resend are in.
    pub fn new(workload: Workload, opts: &BodyOptions) -> RequestSource {
        let planned = |p: &Prompt| PlannedRequest {
            body: request_body(opts, &p.body, p.output_tokens).into(),
            prompt_tokens: Some(p.prompt_tokens),
            max_tokens: p.output_tokens,
        };
        match workload {
            Workload::Prompts { prompts, warmups } => RequestSource::Prompts {
                requests: prompts.iter().map(planned).collect(),
                warmups: warmups.map(|w| w.iter().map(planned).collect()),
            },
            Workload::Trace(trace) => {
                RequestSource::OnDemand(Arc::new(TraceRows { trace, opts: opts.clone() }))
            }
            Workload::Sessions(sessions) => {
                RequestSource::Sessions(SessionRun::new(sessions, opts.clone()))
            }
        }
    }

    /// Requests written before the run, in order; warm-ups resend the first ones.
    pub fn requests(requests: Vec<PlannedRequest>) -> RequestSource {
        RequestSource::Prompts { requests: requests.into(), warmups: None }
    }

    /// What the arrivals start, before cycling: requests, trace rows or sessions.
    pub fn units(&self) -> usize {
        match self {
            RequestSource::Prompts { requests, .. } => requests.len(),
            RequestSource::OnDemand(w) => w.len(),
            RequestSource::Sessions(s) => s.len(),
        }
    }

    /// True when a unit is a session of several requests, whose records must stay together
    /// to be counted.
    pub fn multi_turn(&self) -> bool {
        matches!(self, RequestSource::Sessions(_))
    }

    /// The warm-up requests `shard` sends of the run's `n`. Warm-ups are single requests: the
    /// warm-ups' own, the first requests, or the first turns of the first sessions. A shard
    /// sends its share of them (by index), so N shards warm the server as much as one
    /// process does.
    pub fn warmups(&self, n: usize, shard: Shard) -> Vec<PlannedRequest> {
        let warm: Vec<PlannedRequest> = match self {
            RequestSource::Prompts { requests, warmups } => {
                warmups.as_ref().unwrap_or(requests).iter().take(n).cloned().collect()
            }
            RequestSource::OnDemand(w) => (0..w.len().min(n)).map(|i| w.request(i)).collect(),
            RequestSource::Sessions(s) => {
                (0..s.len().min(n)).filter_map(|i| s.first_turn(i)).collect()
            }
        };
        (0u64..).zip(warm).filter(|(i, _)| shard.owns(*i)).map(|(_, r)| r).collect()
    }

    /// The requests a process sends: every unit's, or with `ids` those of the units of its
    /// share (by global index). A session makes one request per turn.
    pub fn requests_of(&self, ids: Option<&[u64]>) -> u64 {
        match (self, ids) {
            (RequestSource::Sessions(s), Some(ids)) => {
                ids.iter().map(|&g| s.sessions()[s.session_of(g)].turns.len() as u64).sum()
            }
            (RequestSource::Sessions(s), None) => s.total_turns(),
            (_, Some(ids)) => ids.len() as u64,
            (_, None) => self.units() as u64,
        }
    }
}

/// The units of a run one process sends, and when.
#[derive(Debug, Clone)]
pub struct Share {
    /// What the whole run's arrivals start (requests or sessions).
    pub units: usize,
    /// The global index of each unit sent here; `None`: all of them, in order.
    pub ids: Option<Arc<[u64]>>,
    /// When each is due (ns from time zero); `None`: the arrival process decides.
    pub send_at: Option<Arc<[u64]>>,
    /// The requests those units make (a session makes one per turn).
    pub requests: u64,
}

impl Share {
    /// Units sent by this process.
    pub fn units_here(&self) -> usize {
        self.ids.as_ref().map_or(self.units, |ids| ids.len())
    }
}

impl RequestSource {
    /// What `shard` sends of a run whose arrivals are drawn from `load` and `seed`, or fall
    /// at the `explicit` instants (a trace's own, a ramp's). A shard sends its part of the
    /// global schedule under the global indices, so the shards' records merge as one run's.
    pub fn share(
        &self,
        shard: Shard,
        explicit: Option<Arc<[u64]>>,
        load: &LoadSpec,
        seed: u64,
    ) -> Share {
        let units = self.units();
        let (ids, send_at): (Option<Arc<[u64]>>, _) = if shard.is_whole() {
            (None, explicit)
        } else {
            let global = match &explicit {
                Some(at) => at.to_vec(),
                None => global_schedule(load, seed, units),
            };
            let (ids, at) = shard.share(&global);
            (Some(ids.into()), Some(at.into()))
        };
        let requests = self.requests_of(ids.as_deref());
        Share { units, ids, send_at, requests }
    }
}

/// The whole run's intended send instants (ns from time zero), as one process would draw
/// them: `prompts` of them, or in duration mode every one before the end (prompts cycled).
/// Every shard draws the same from the seed. A duration with no rate would be endless; a plan
/// with shards refuses that (`Plan::check`), and it yields nothing here.
pub fn global_schedule(load: &LoadSpec, seed: u64, prompts: usize) -> Vec<u64> {
    let schedule = Schedule::new(load.arrivals(), seed);
    match load.duration_s {
        None => schedule.take(prompts).collect(),
        Some(_) if load.request_rate.is_none() => Vec::new(),
        Some(d) => {
            let end = (d * 1e9) as u64;
            schedule.take_while(|t| *t < end).collect()
        }
    }
}

/// A trace's rows, each request written when the loop asks for it.
#[derive(Debug)]
struct TraceRows {
    trace: TraceWorkload,
    opts: BodyOptions,
}

impl RequestWriter for TraceRows {
    fn len(&self) -> usize {
        self.trace.len()
    }

    fn request(&self, i: usize) -> PlannedRequest {
        let p = self.trace.prompt(i);
        PlannedRequest {
            body: request_body(&self.opts, &p.body, p.output_tokens).into(),
            prompt_tokens: Some(p.prompt_tokens),
            max_tokens: p.output_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn request(i: u64) -> PlannedRequest {
        PlannedRequest {
            body: Bytes::from(i.to_string()),
            prompt_tokens: Some(i),
            max_tokens: None,
        }
    }

    #[test]
    fn the_global_schedule_is_the_one_process_schedule() {
        let load = LoadSpec { request_rate: Some(4.0), ..LoadSpec::default() };
        let global = global_schedule(&load, 7, 5);
        assert_eq!(global, Schedule::take_n(load.arrivals(), 7, 5));
        assert_eq!(global.len(), 5);
        // Duration mode: every instant before the end, prompts cycled (a constant 4/s for
        // 1 s is 0, 250, 500 and 750 ms).
        let timed = LoadSpec {
            request_rate: Some(4.0),
            burstiness: f64::INFINITY,
            duration_s: Some(1.0),
            ..LoadSpec::default()
        };
        assert_eq!(global_schedule(&timed, 7, 2), vec![0, 250_000_000, 500_000_000, 750_000_000]);
        let endless = LoadSpec { duration_s: Some(1.0), ..LoadSpec::default() };
        assert_eq!(global_schedule(&endless, 7, 2), Vec::<u64>::new());
    }

    #[test]
    fn a_shard_sends_its_part_of_the_global_schedule_under_global_indices() {
        let source = RequestSource::requests((0..5).map(request).collect());
        let load = LoadSpec { request_rate: Some(4.0), ..LoadSpec::default() };
        let whole = source.share(Shard::WHOLE, None, &load, 7);
        assert_eq!((whole.units, whole.units_here(), whole.requests), (5, 5, 5));
        assert!(whole.ids.is_none() && whole.send_at.is_none());
        let second = source.share(Shard { index: 1, count: 2 }, None, &load, 7);
        let global = global_schedule(&load, 7, 5);
        assert_eq!(second.ids.as_deref(), Some(&[1, 3][..]));
        assert_eq!(second.send_at.as_deref(), Some(&[global[1], global[3]][..]));
        assert_eq!((second.units, second.units_here(), second.requests), (5, 2, 2));
        // Explicit instants are shared the same way.
        let at: Arc<[u64]> = vec![0, 10, 20, 30, 40].into();
        let replay = source.share(Shard { index: 0, count: 2 }, Some(at), &load, 7);
        assert_eq!(replay.send_at.as_deref(), Some(&[0, 20, 40][..]));
    }

    #[test]
    fn a_shard_warms_its_share_and_counts_its_requests() {
        let source = RequestSource::requests((0..6).map(request).collect());
        assert_eq!(source.units(), 6);
        assert!(!source.multi_turn());
        let whole: Vec<_> =
            source.warmups(3, Shard::WHOLE).iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(whole, [Some(0), Some(1), Some(2)]);
        let second = Shard { index: 1, count: 2 };
        let share: Vec<_> = source.warmups(3, second).iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(share, [Some(1)]);
        assert_eq!(source.requests_of(None), 6);
        assert_eq!(source.requests_of(Some(&[1, 3, 5])), 3);
        // Warm-ups of their own replace the first requests.
        let own = RequestSource::Prompts {
            requests: (0..6).map(request).collect(),
            warmups: Some((10..12).map(request).collect()),
        };
        let warm: Vec<_> = own.warmups(5, Shard::WHOLE).iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(warm, [Some(10), Some(11)]);
    }
}
