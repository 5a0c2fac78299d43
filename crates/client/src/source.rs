//! What the measuring loop sends: one seam for every workload.
//!
//! Each arrival of the schedule starts one *unit*: a single request, or a whole multi-turn
//! session. A [`RequestSource`] says how many units there are, which requests warm the server
//! up, how many requests a shard's share of the units makes, and writes each request's body;
//! the loop asks it and never which workload it runs. A new kind of workload is a variant
//! here, with its loader in `servelab-workload` ([`Workload`]).

use std::sync::Arc;

use servelab_load::Shard;
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
