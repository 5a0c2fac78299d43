//! The built-in simulator's log, in the terms of the metrics stage.

use servelab_client::runner::measured_index;
use servelab_metrics::truth::{ServerTruth, TruthEvent};
use servelab_sim::TruthRecord;

/// The measured requests of a simulator's log, by their `x-request-id` (warm-ups and requests
/// it did not finish are left out).
pub fn server_truth(log: &[TruthRecord]) -> Vec<ServerTruth> {
    log.iter()
        .filter(|t| t.outcome == "ok")
        .filter_map(|t| {
            let index = measured_index(t.request_id.as_deref()?)?;
            let events = t
                .chunks
                .iter()
                .map(|c| TruthEvent {
                    tokens: c.tokens,
                    intended_ns: c.intended_ns,
                    actual_ns: c.actual_ns,
                })
                .collect();
            Some(ServerTruth { index, events })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use servelab_sim::TruthChunk;

    fn rec(id: Option<&str>, outcome: &str) -> TruthRecord {
        TruthRecord {
            request_id: id.map(str::to_string),
            seq: 0,
            endpoint: "completions".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            queue_ns: 0,
            chunks: vec![TruthChunk { tokens: 2, intended_ns: 5, actual_ns: 7 }],
            outcome: outcome.into(),
            images: Vec::new(),
            prompt: None,
            reply: None,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn keeps_finished_measured_requests_by_index() {
        let log = [
            rec(Some("servelab-3"), "ok"),
            rec(Some("servelab-w0"), "ok"),
            rec(Some("servelab-4"), "aborted"),
            rec(None, "ok"),
            rec(Some("other-1"), "ok"),
        ];
        let t = server_truth(&log);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].index, 3);
        assert_eq!(t[0].events, vec![TruthEvent { tokens: 2, intended_ns: 5, actual_ns: 7 }]);
    }
}
