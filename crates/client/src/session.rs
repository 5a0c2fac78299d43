//! Multi-turn sessions in the measuring loop: each arrival starts a session, whose turns are
//! sent one after another by the same task, so two turns of one session are never in flight
//! together. Turn `k` carries the conversation so far with the server's actual replies
//! ([`servelab_workload::Session::turn_body`]) and is due `think_time_ns` after the reply to
//! turn `k − 1` ended: its latencies count from that instant, so a late client shows.

use std::sync::Arc;

use bytes::Bytes;
use servelab_records::{ChunkKind, RequestRecord};
use servelab_workload::{HistoryError, Session};

use crate::openai::{request_body, BodyOptions};
use crate::planned::PlannedRequest;

/// Sessions ready to run: the prepared sessions and how to write their requests.
#[derive(Debug)]
pub struct SessionRun {
    sessions: Vec<Session>,
    opts: BodyOptions,
    /// Record index of each session's first turn (turns of all earlier sessions before it).
    first_index: Vec<u64>,
    total_turns: u64,
}

impl SessionRun {
    /// Sessions `sessions`, whose requests are written with `opts`.
    pub fn new(sessions: Vec<Session>, opts: BodyOptions) -> Arc<Self> {
        let mut first_index = Vec::with_capacity(sessions.len());
        let mut total = 0u64;
        for s in &sessions {
            first_index.push(total);
            total += s.turns.len() as u64;
        }
        Arc::new(Self { sessions, opts, first_index, total_turns: total })
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// True when there is no session.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Turns over all sessions.
    pub fn total_turns(&self) -> u64 {
        self.total_turns
    }

    /// The sessions.
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// The first turn of session `s` as a single request (warm-ups); `None` for a session
    /// without turns.
    pub fn first_turn(&self, s: usize) -> Option<PlannedRequest> {
        self.turn(s, 0, &[]).ok()
    }

    /// The session global arrival `g` starts: arrivals cycle through the sessions (a
    /// duration run), and a shard's arrivals carry their global index.
    pub fn session_of(&self, g: u64) -> usize {
        (g % self.sessions.len().max(1) as u64) as usize
    }

    /// Turns of session `s`.
    pub(crate) fn turns(&self, s: usize) -> usize {
        self.sessions[s].turns.len()
    }

    /// The record index of turn `k` of the session global arrival `g` started: unique over
    /// the run, also when a duration run cycles through the sessions.
    pub(crate) fn record_index(&self, g: u64, k: usize) -> u64 {
        let cycle = g / self.sessions.len().max(1) as u64;
        cycle * self.total_turns + self.first_index[self.session_of(g)] + k as u64
    }

    /// Think time before turn `k` of session `s` (0 for the first turn).
    pub(crate) fn think_ns(&self, s: usize, k: usize) -> u64 {
        if k == 0 {
            0
        } else {
            self.sessions[s].turns[k].think_time_ns
        }
    }

    /// The request of turn `k` of session `s`, given the replies to its earlier turns (text,
    /// and tokens when known). The prompt's token count is that of the messages' contents
    /// (as for single prompts), known when every earlier reply's count is. An error (no such
    /// turn, fewer replies than earlier turns) is the loop's to record as a failed turn.
    pub(crate) fn turn(
        &self,
        s: usize,
        k: usize,
        replies: &[Reply],
    ) -> Result<PlannedRequest, HistoryError> {
        let session = &self.sessions[s];
        let texts: Vec<&str> = replies.iter().map(|r| r.text.as_str()).collect();
        let body = session.turn_body(k, &texts)?;
        let output_tokens = session.turns[k].output_tokens;
        let tokens: Option<Vec<u64>> = replies.iter().map(|r| r.tokens).collect();
        Ok(PlannedRequest {
            body: Bytes::from(request_body(&self.opts, &body, output_tokens)),
            prompt_tokens: tokens.and_then(|t| session.turn_prompt_tokens(k, &t).ok()),
            max_tokens: output_tokens,
        })
    }
}

/// The server's reply to one turn, as the next turn resends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The answer text (reasoning is not resent, as chat clients do not).
    pub text: String,
    /// Its tokens: the server's usage, else the sum of per-chunk counts when all are known.
    pub tokens: Option<u64>,
}

impl Reply {
    /// The reply carried by a finished record.
    pub(crate) fn of(rec: &RequestRecord) -> Reply {
        let (mut text, mut from_chunks, mut reasoned) = (String::new(), Some(0u64), false);
        for c in &rec.chunks {
            if c.kind == ChunkKind::Content {
                text.push_str(&c.text);
                from_chunks = from_chunks.zip(c.tokens).map(|(n, k)| n + u64::from(k));
            } else {
                reasoned = true;
            }
        }
        // Usage counts reasoning too: only usable alone when no reasoning was streamed or the
        // server broke it out.
        let from_usage = rec.usage.and_then(|u| match (reasoned, u.reasoning_tokens) {
            (false, _) => Some(u.completion_tokens),
            (true, Some(r)) => Some(u.completion_tokens.saturating_sub(r)),
            (true, None) => None,
        });
        let tokens = from_usage.or(from_chunks);
        Reply { text, tokens }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_workload::{Api, Turn};

    fn session(turns: usize) -> Session {
        Session {
            id: "s".into(),
            system: None,
            turns: (0..turns)
                .map(|i| Turn {
                    user: format!("question {i}"),
                    user_tokens: 2,
                    output_tokens: Some(5),
                    think_time_ns: 1_000 * i as u64,
                })
                .collect(),
        }
    }

    fn run(sessions: Vec<Session>) -> Arc<SessionRun> {
        let opts = BodyOptions {
            api: Api::Chat,
            model: "m".into(),
            max_tokens_field: Default::default(),
            ignore_eos: false,
            min_tokens: false,
            stream_usage: true,
            continuous_usage: false,
            extra: Default::default(),
        };
        SessionRun::new(sessions, opts)
    }

    #[test]
    fn record_indices_are_unique_across_sessions_and_cycles() {
        let r = run(vec![session(2), session(3)]);
        assert_eq!(r.total_turns(), 5);
        assert_eq!(r.record_index(0, 1), 1);
        assert_eq!(r.record_index(1, 0), 2);
        assert_eq!(r.record_index(1, 2), 4);
        // The third arrival cycles back to session 0.
        assert_eq!(r.record_index(2, 0), 5);
        assert_eq!(r.think_ns(1, 0), 0);
        assert_eq!(r.think_ns(1, 2), 2_000);
    }

    #[test]
    fn a_turn_resends_the_history_with_the_replies() {
        let r = run(vec![session(3)]);
        let replies = [
            Reply { text: "answer 0".into(), tokens: Some(4) },
            Reply { text: "answer 1".into(), tokens: Some(6) },
        ];
        let t = r.turn(0, 2, &replies).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&t.body).unwrap();
        let contents: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents, ["question 0", "answer 0", "question 1", "answer 1", "question 2"]);
        // 3 user messages of 2 tokens and replies of 4 + 6.
        assert_eq!(t.prompt_tokens, Some(16));
        assert_eq!(t.max_tokens, Some(5));
        let unknown = [Reply { text: "a".into(), tokens: None }];
        assert_eq!(r.turn(0, 1, &unknown).unwrap().prompt_tokens, None);
        // A history missing a reply is an error, never a request with a wrong prompt.
        let e = r.turn(0, 2, &unknown).unwrap_err().to_string();
        assert!(e.contains("turn 2"), "{e}");
        assert!(r.first_turn(0).is_some());
    }
}
