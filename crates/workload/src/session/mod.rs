//! Multi-turn sessions: conversations whose turn `k` resends the whole history (the system
//! prompt, every earlier user message and the server's actual replies) plus a new user message.
//!
//! [`load_sessions`] prepares a [`SessionWorkload`]: each [`Session`] holds its new user messages
//! with exact token counts, requested output lengths and think times, all fixed by the seed.
//! The server's replies are not known before the run: the runner passes them to
//! [`Session::turn_messages`] as they arrive, which builds turn `k`'s request.

mod jsonl;
mod sharegpt;
mod synthetic;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use crate::error::DatasetError;
use crate::prompt::{ChatMessage, PromptBody};
use crate::tokenizer::Tokenizer;

pub(crate) use sharegpt::{role as sharegpt_role, Role};
pub use synthetic::SyntheticSessions;

/// A system prompt, shared (one allocation) by every session that starts with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPrompt {
    /// The system message's text.
    pub text: Arc<str>,
    /// Tokens of `text` under the run's tokenizer.
    pub tokens: u64,
}

/// One turn: what the user sends, how much to ask back, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The new user message.
    pub user: String,
    /// Tokens of `user` under the run's tokenizer (content only).
    pub user_tokens: u64,
    /// Requested output length (`max_tokens`), if the source sets one.
    pub output_tokens: Option<u64>,
    /// Time the user "thinks" between the end of the previous turn's reply and sending this
    /// turn; 0 for the first turn (the session's start is the load generator's business).
    pub think_time_ns: u64,
}

/// One conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Unique within the workload (the dataset's id when it has one).
    pub id: String,
    /// The system message every turn starts with, if any.
    pub system: Option<SystemPrompt>,
    /// The turns in order (at least one).
    pub turns: Vec<Turn>,
}

/// Turn `k`'s request cannot be built from the replies given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistoryError {
    /// The turn index is past the session's last turn.
    #[error("session {session} has {turns} turns; there is no turn {turn}")]
    NoSuchTurn {
        /// The session's id.
        session: String,
        /// How many turns it has.
        turns: usize,
        /// The 0-based turn asked for.
        turn: usize,
    },
    /// Fewer replies than earlier turns were given.
    #[error(
        "session {session}: turn {turn} needs the server's replies to turns 0..{turn}, \
         but only {replies} were given"
    )]
    MissingReplies {
        /// The session's id.
        session: String,
        /// The 0-based turn asked for.
        turn: usize,
        /// How many replies were given.
        replies: usize,
    },
}

impl Session {
    /// The messages of turn `k`'s request: the system prompt (if any), then for each earlier
    /// turn `i < k` its user message and `replies[i]` (the server's actual reply, as
    /// `assistant`), then turn `k`'s user message. `replies` must hold at least `k` replies;
    /// extra ones are ignored.
    pub fn turn_messages<S: AsRef<str>>(
        &self,
        k: usize,
        replies: &[S],
    ) -> Result<Vec<ChatMessage>, HistoryError> {
        let turn = self.turns.get(k).ok_or_else(|| HistoryError::NoSuchTurn {
            session: self.id.clone(),
            turns: self.turns.len(),
            turn: k,
        })?;
        if replies.len() < k {
            return Err(HistoryError::MissingReplies {
                session: self.id.clone(),
                turn: k,
                replies: replies.len(),
            });
        }
        let mut messages = Vec::with_capacity(2 * k + 2);
        if let Some(system) = &self.system {
            messages.push(ChatMessage::new("system", &*system.text));
        }
        for (earlier, reply) in self.turns[..k].iter().zip(replies) {
            messages.push(ChatMessage::new("user", earlier.user.as_str()));
            messages.push(ChatMessage::new("assistant", reply.as_ref()));
        }
        messages.push(ChatMessage::new("user", turn.user.as_str()));
        Ok(messages)
    }

    /// [`Self::turn_messages`] as a chat prompt body, ready for the request builder.
    pub fn turn_body<S: AsRef<str>>(
        &self,
        k: usize,
        replies: &[S],
    ) -> Result<PromptBody, HistoryError> {
        self.turn_messages(k, replies).map(PromptBody::Chat)
    }

    /// Tokens of turn `k`'s message contents: the system prompt, the user messages of turns
    /// `0..=k` and the replies' token counts `reply_tokens[0..k]` (as the client counted or the
    /// server reported them). Contents only: no chat template, no separators.
    pub fn turn_prompt_tokens(&self, k: usize, reply_tokens: &[u64]) -> Result<u64, HistoryError> {
        if k >= self.turns.len() {
            return Err(HistoryError::NoSuchTurn {
                session: self.id.clone(),
                turns: self.turns.len(),
                turn: k,
            });
        }
        if reply_tokens.len() < k {
            return Err(HistoryError::MissingReplies {
                session: self.id.clone(),
                turn: k,
                replies: reply_tokens.len(),
            });
        }
        let system = self.system.as_ref().map_or(0, |s| s.tokens);
        let users: u64 = self.turns[..=k].iter().map(|t| t.user_tokens).sum();
        Ok(system + users + reply_tokens[..k].iter().sum::<u64>())
    }
}

/// The prepared sessions of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionWorkload {
    /// The sessions, in the order they are started.
    pub sessions: Vec<Session>,
}

impl SessionWorkload {
    /// Turns in all sessions.
    pub fn total_turns(&self) -> usize {
        self.sessions.iter().map(|s| s.turns.len()).sum()
    }
}

/// The user's pause before each turn after the first.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ThinkTime {
    /// Send the next turn as soon as the reply ends.
    #[default]
    Zero,
    /// The same pause every time.
    Fixed(Duration),
    /// Exponentially distributed with this mean (a Poisson user).
    Exponential {
        /// The mean pause.
        mean: Duration,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// The shortest pause.
        min: Duration,
        /// The longest pause (not below `min`).
        max: Duration,
    },
}

impl ThinkTime {
    fn check(&self) -> Result<(), DatasetError> {
        match *self {
            Self::Uniform { min, max } if min > max => Err(DatasetError::Spec(format!(
                "think time: uniform minimum {min:?} is above the maximum {max:?}"
            ))),
            _ => Ok(()),
        }
    }

    /// One draw, in nanoseconds.
    pub(crate) fn draw(&self, rng: &mut StdRng) -> u64 {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        match *self {
            Self::Zero => 0,
            Self::Fixed(d) => ns(d),
            Self::Exponential { mean } => {
                // Inverse CDF; 1 − u is in (0, 1], so the logarithm is finite.
                let u: f64 = rng.random();
                (-(1.0 - u).ln() * ns(mean) as f64).round() as u64
            }
            Self::Uniform { min, max } => rng.random_range(ns(min)..=ns(max)),
        }
    }
}

/// Where sessions come from.
#[derive(Debug, Clone)]
pub enum SessionSource {
    /// A ShareGPT JSON file, every turn of each conversation (see `docs/datasets.md`).
    /// `output_len` fixes every turn's output length instead of the reference reply's length;
    /// `max_turns` keeps only the first turns of long conversations.
    ShareGpt {
        /// The JSON file.
        path: PathBuf,
        /// Output length of every turn, tokens; `None`: the reference reply's length.
        output_len: Option<u64>,
        /// Keep at most this many turns of each conversation; `None`: all.
        max_turns: Option<usize>,
    },
    /// One conversation per line: `{"messages": [...]}` or `{"turns": [...]}`.
    Jsonl {
        /// The JSON lines file.
        path: PathBuf,
        /// Output length of every turn, tokens; `None`: the line's own, else the reference
        /// reply's length, else the server decides.
        output_len: Option<u64>,
        /// Keep at most this many turns of each conversation; `None`: all.
        max_turns: Option<usize>,
    },
    /// Random sessions of exact lengths.
    Synthetic(SyntheticSessions),
}

/// A session workload: a source and the users' think time.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// Where the sessions come from.
    pub source: SessionSource,
    /// Drawn for every turn after the first (a JSONL turn's own `think_time_ms` wins).
    pub think_time: ThinkTime,
}

/// Exactly `num_sessions` sessions, deterministic for `seed`. File sources are shuffled with
/// the seed and repeated (ids suffixed `#2`, `#3`, ...) when they hold fewer conversations.
pub fn load_sessions(
    spec: &SessionSpec,
    num_sessions: usize,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<SessionWorkload, DatasetError> {
    spec.think_time.check()?;
    let sessions = match &spec.source {
        SessionSource::ShareGpt { path, output_len, max_turns } => {
            let limits = Limits { output_len: *output_len, max_turns: *max_turns };
            sharegpt::load(path, limits, num_sessions, tokenizer, seed)?
        }
        SessionSource::Jsonl { path, output_len, max_turns } => {
            let limits = Limits { output_len: *output_len, max_turns: *max_turns };
            jsonl::load(path, limits, num_sessions, tokenizer)?
        }
        SessionSource::Synthetic(params) => {
            return synthetic::generate(params, &spec.think_time, num_sessions, tokenizer, seed)
        }
    };
    let mut sessions = repeat(sessions, num_sessions);
    draw_think_times(&mut sessions, &spec.think_time, seed);
    Ok(SessionWorkload { sessions })
}

/// Per-file options shared by the file sources.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub output_len: Option<u64>,
    pub max_turns: Option<usize>,
}

/// A parsed turn before think times are drawn: `think_ns` is set when the file gives it.
pub(crate) struct ParsedTurn {
    pub turn: Turn,
    pub think_ns: Option<u64>,
}

/// Stream index of session `i`'s think times (sessions use `i` for their text).
const THINK_STREAM: u64 = 1 << 61;

/// Draw every turn's think time that the file did not set (`u64::MAX` marks those), from the
/// session's own stream so that the draws do not depend on other sessions.
fn draw_think_times(sessions: &mut [Session], think: &ThinkTime, seed: u64) {
    for (i, s) in sessions.iter_mut().enumerate() {
        let mut rng = crate::synth::item_rng(seed, THINK_STREAM + i as u64);
        for (k, t) in s.turns.iter_mut().enumerate() {
            let drawn = think.draw(&mut rng);
            if k == 0 {
                t.think_time_ns = 0;
            } else if t.think_time_ns == u64::MAX {
                t.think_time_ns = drawn;
            }
        }
    }
}

/// Repeat `sessions` in order until there are `n`, suffixing the ids of repeats.
fn repeat(sessions: Vec<Session>, n: usize) -> Vec<Session> {
    let len = sessions.len();
    if len >= n || len == 0 {
        let mut sessions = sessions;
        sessions.truncate(n);
        return sessions;
    }
    (0..n)
        .map(|i| {
            let mut s = sessions[i % len].clone();
            if i >= len {
                s.id = format!("{}#{}", s.id, i / len + 1);
            }
            s
        })
        .collect()
}

/// Turns from parsed ones: a file's think time, or the `u64::MAX` marker for a draw.
pub(crate) fn finish_turns(parsed: Vec<ParsedTurn>) -> Vec<Turn> {
    parsed
        .into_iter()
        .map(|p| Turn { think_time_ns: p.think_ns.unwrap_or(u64::MAX), ..p.turn })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::item_rng;

    fn turn(user: &str, tokens: u64) -> Turn {
        Turn { user: user.into(), user_tokens: tokens, output_tokens: Some(5), think_time_ns: 0 }
    }

    #[test]
    fn turn_messages_interleave_history_and_replies() {
        let s = Session {
            id: "s".into(),
            system: Some(SystemPrompt { text: "sys".into(), tokens: 1 }),
            turns: vec![turn("u0", 2), turn("u1", 3), turn("u2", 4)],
        };
        let m = |r: &str, c: &str| ChatMessage::new(r, c);
        assert_eq!(
            s.turn_messages(0, &[] as &[&str]).unwrap(),
            vec![m("system", "sys"), m("user", "u0")]
        );
        assert_eq!(
            s.turn_messages(2, &["r0", "r1", "ignored"]).unwrap(),
            vec![
                m("system", "sys"),
                m("user", "u0"),
                m("assistant", "r0"),
                m("user", "u1"),
                m("assistant", "r1"),
                m("user", "u2")
            ]
        );
        assert_eq!(
            s.turn_messages(2, &["r0"]).unwrap_err().to_string(),
            "session s: turn 2 needs the server's replies to turns 0..2, but only 1 were given"
        );
        assert!(matches!(s.turn_messages(3, &["a"; 3]), Err(HistoryError::NoSuchTurn { .. })));
        assert_eq!(s.turn_prompt_tokens(2, &[10, 20]).unwrap(), 1 + 2 + 3 + 4 + 10 + 20);
        assert_eq!(s.turn_prompt_tokens(0, &[]).unwrap(), 3);
    }

    #[test]
    fn think_times_are_drawn_as_asked() {
        let mut rng = item_rng(3, 0);
        assert_eq!(ThinkTime::Zero.draw(&mut rng), 0);
        assert_eq!(ThinkTime::Fixed(Duration::from_millis(7)).draw(&mut rng), 7_000_000);
        let u = ThinkTime::Uniform { min: Duration::from_secs(1), max: Duration::from_secs(2) };
        for _ in 0..100 {
            let d = u.draw(&mut rng);
            assert!((1_000_000_000..=2_000_000_000).contains(&d), "{d}");
        }
        let e = ThinkTime::Exponential { mean: Duration::from_secs(1) };
        let n = 20_000;
        let mean = (0..n).map(|_| e.draw(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!((mean / 1e9 - 1.0).abs() < 0.05, "{mean}");
        let bad = ThinkTime::Uniform { min: Duration::from_secs(2), max: Duration::from_secs(1) };
        assert!(bad.check().is_err());
    }

    #[test]
    fn repeats_get_suffixed_ids() {
        let s = |id: &str| Session { id: id.into(), system: None, turns: vec![] };
        let ids: Vec<String> = repeat(vec![s("a"), s("b")], 5).into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["a", "b", "a#2", "b#2", "a#3"]);
    }
}
