//! How the server kept the contract: what its streams did that servelab accepted (no
//! `[DONE]`, compressed bodies, ...) and whether it generated what each request asked for.
//! Counted per request as records arrive, merged across workers and shards, and said once per
//! run as warnings, so a server's quirk is never silently folded into the figures.

use servelab_records::RequestRecord;

use crate::warning::Warning;

/// Counts over a run's successful measured requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conduct {
    /// Successful requests.
    pub completed: u64,
    /// Streams that ended after a `finish_reason` without `data: [DONE]`.
    pub no_done: u64,
    /// Streams with bytes after `[DONE]`.
    pub after_done: u64,
    /// Streams with choices other than 0.
    pub other_choices: u64,
    /// Content-encoded streams.
    pub encoded: u64,
    /// Streams that began with a byte-order mark.
    pub bom: u64,
    /// Streams whose output was tool calls or a refusal.
    pub other_output: u64,
    /// Requests that asked for a length and whose usage reported one.
    pub asked: u64,
    /// ... of which the server generated more than asked.
    pub over: u64,
    /// ... of which it generated fewer than asked.
    pub under: u64,
    /// The largest ask among `over`, and what was generated for it.
    pub over_example: Option<(u64, u64)>,
}

impl Conduct {
    /// Count one record (only successful ones count).
    pub fn add(&mut self, r: &RequestRecord) {
        if !r.is_success() {
            return;
        }
        self.completed += 1;
        let s = &r.stream;
        self.no_done += u64::from(s.no_done);
        self.after_done += u64::from(s.after_done);
        self.other_choices += u64::from(s.other_choices);
        self.encoded += u64::from(s.encoding.is_some());
        self.bom += u64::from(s.bom);
        self.other_output += u64::from(s.other_output.is_some());
        if let (Some(asked), Some(u)) = (r.max_tokens, r.usage) {
            self.asked += 1;
            let got = u.completion_tokens;
            if got > asked {
                self.over += 1;
                self.over_example = self.over_example.max(Some((got, asked)));
            } else if got < asked {
                self.under += 1;
            }
        }
    }

    /// Both runs' counts.
    pub fn merge(self, o: Conduct) -> Conduct {
        Conduct {
            completed: self.completed + o.completed,
            no_done: self.no_done + o.no_done,
            after_done: self.after_done + o.after_done,
            other_choices: self.other_choices + o.other_choices,
            encoded: self.encoded + o.encoded,
            bom: self.bom + o.bom,
            other_output: self.other_output + o.other_output,
            asked: self.asked + o.asked,
            over: self.over + o.over,
            under: self.under + o.under,
            over_example: self.over_example.max(o.over_example),
        }
    }

    /// Requests that ended short of their asked length, in words; for a run that meant every
    /// request to generate exactly its length but could not pin it (`ignore_eos` refused).
    pub fn ended_early(&self) -> Option<String> {
        (self.under > 0).then(|| {
            format!(
                "{} of {} requests ended before their requested output length (at the model's \
                 end of sequence): output lengths are partly the model's, not the workload's",
                self.under, self.asked
            )
        })
    }

    /// What to tell the user, once per run; `chat` when the requests were chat completions
    /// (whose default length field is `max_completion_tokens`).
    pub fn warnings(&self, chat: bool) -> Vec<Warning> {
        let mut w = Vec::new();
        let n = self.completed;
        if self.no_done > 0 {
            w.push(Warning::NoDone { streams: self.no_done, of: n });
        }
        if let Some((got, asked)) = self.over_example {
            w.push(Warning::IgnoresMaxTokens { asked, got, over: self.over, of: self.asked, chat });
        }
        let found: Vec<(&'static str, u64)> = [
            (self.after_done, "bytes after data: [DONE] (not read as output)"),
            (self.other_choices, "choices other than index 0 (n > 1; only choice 0 measured)"),
            (self.encoded, "a compressed body (decoded)"),
            (self.bom, "a byte-order mark before the first event (skipped)"),
            (self.other_output, "output as tool calls or a refusal (counted as output)"),
        ]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, what)| (what, count))
        .collect();
        if !found.is_empty() {
            w.push(Warning::StreamQuirks { found, of: n });
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_records::{Outcome, StreamNotes, Usage};

    fn rec(asked: Option<u64>, got: Option<u64>, stream: StreamNotes) -> RequestRecord {
        RequestRecord {
            index: 0,
            warmup: false,
            scheduled_ns: 0,
            intended_ns: 0,
            sent_ns: 0,
            prompt_tokens: None,
            max_tokens: asked,
            usage: got.map(|g| Usage {
                prompt_tokens: 1,
                completion_tokens: g,
                reasoning_tokens: None,
            }),
            chunks: Vec::new(),
            end_ns: Some(1),
            status: Some(200),
            outcome: Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream,
        }
    }

    #[test]
    fn counts_merge_and_say_what_the_server_did() {
        let no_done = StreamNotes { no_done: true, ..StreamNotes::default() };
        let mut a = Conduct::default();
        a.add(&rec(Some(32), Some(1024), no_done.clone()));
        a.add(&rec(Some(32), Some(32), StreamNotes::default()));
        let mut b = Conduct::default();
        b.add(&rec(Some(64), Some(1024), no_done));
        b.add(&rec(
            Some(32),
            Some(7),
            StreamNotes { encoding: Some("gzip".into()), ..Default::default() },
        ));
        b.add(&rec(None, Some(7), StreamNotes::default()));
        let mut failed = rec(Some(32), Some(1), StreamNotes::default());
        failed.outcome =
            Outcome::Failure { kind: servelab_records::FailureKind::Reset, message: String::new() };
        b.add(&failed);
        let m = a.merge(b);
        assert_eq!(m, b.merge(a), "merging is symmetric");
        assert_eq!(
            (m.completed, m.no_done, m.asked, m.over, m.under, m.encoded),
            (5, 2, 4, 2, 1, 1)
        );
        assert_eq!(m.over_example, Some((1024, 64)));
        assert_eq!(
            m.warnings(true),
            vec![
                "the server sent no data: [DONE] in 2 of 5 successful streams; each ended cleanly \
                 after its finish_reason and was counted as complete",
                "asked 64, the server generated 1024 (more than asked in 2 of 4 requests): it \
                 ignores max_completion_tokens; servelab doctor tells which field it honours, \
                 --max-tokens-field max_tokens sends the other",
                "the server's streams had a compressed body (decoded) in 1 of 5",
            ]
        );
        assert_eq!(
            m.ended_early().unwrap(),
            "1 of 4 requests ended before their requested output length (at the model's end of \
             sequence): output lengths are partly the model's, not the workload's"
        );
        assert!(Conduct::default().warnings(false).is_empty());
        assert!(Conduct::default().ended_early().is_none());
    }
}
