//! Stage 3 of a run, after the clock stopped: the summary with everything set beside it (the
//! engine's account, the simulator's truth, the replay's rows, the run's warnings), then the
//! saved result (`save`). A new account of a run goes into [`summarize`].

use servelab_metrics::digest::ShardDigest;
use servelab_metrics::Summary;
use servelab_plan::{Plan, RunError};
use servelab_records::RequestRecord;

use crate::measure::Measured;
use crate::save::{save, BenchOutcome};

/// The summary of what was measured, then the store's record of it and the saved files. With
/// `truth`, the simulator's log from the given mark on is set next to the measurement.
pub(crate) fn finish(
    plan: &Plan,
    mut m: Measured,
    truth: Option<(&servelab_sim::SimHandle, usize)>,
) -> Result<BenchOutcome, RunError> {
    let (summary, digest) = summarize(plan, &mut m, truth);
    Ok(save(plan, m, summary, digest))
}

/// The run's summary (from the fold, or from the records kept whole) and, when the records
/// were folded, the shard digest the fold kept.
fn summarize(
    plan: &Plan,
    m: &mut Measured,
    truth: Option<(&servelab_sim::SimHandle, usize)>,
) -> (Summary, Option<ShardDigest>) {
    let (p, records, folded) = (&m.prepared, &m.records, &mut m.folded);
    let images = images_without_usage(records, &p.with_images);
    let mut summary = match folded.summary(&m.info) {
        Some(s) => s,
        None => servelab_metrics::summarize(records, &m.info, &plan.metrics),
    };
    servelab_metrics::engine::attach(&mut summary, &m.scrapes);
    let gpu = &plan.limits.gpu;
    let source = gpu.source.as_ref().map(|s| servelab_client::http::redact_url(s.label()));
    servelab_metrics::gpu::attach(
        &mut summary,
        &m.gpu_scrapes,
        source.as_deref(),
        gpu.hourly_cost_usd,
    );
    // A shard ships its GPU figures (with each GPU's readings) for the merge to count once.
    let (info, gpu) = (m.info.clone(), summary.gpu.clone());
    let digest = folded.digest.take().map(|d| ShardDigest { info, gpu, ..d });
    if let Some((sim, mark)) = truth {
        if digest.is_some() {
            summary.warnings.push(
                "the simulator's account is not set against the measurement: the records were \
                 folded",
            );
        } else {
            let truth = crate::truth::server_truth(&sim.truth_since(mark));
            servelab_metrics::truth::attach(&mut summary, records, &truth);
        }
    }
    if let Some(rows) = p.trace_rows {
        servelab_metrics::replay::attach(&mut summary, rows);
    }
    summary.warnings.extend(images);
    summary.warnings.extend(p.adaptation.notes.iter().cloned());
    if p.adaptation.dropped_ignore_eos {
        summary.warnings.extend(folded.conduct.ended_early());
    }
    if let Some(note) = &p.tokenizer.estimate_note {
        summary.warnings.push(note.clone());
    }
    if m.info.interrupted {
        // Counted from the records, not from the arrivals handed out: the arrival a request
        // was waiting for when the interrupt came was never sent.
        let sent = records.iter().filter(|r| !r.warmup).count() as u64 + folded.folded;
        summary.warnings.push(format!(
            "interrupted: {sent} of {} planned requests were sent; this is a partial result",
            p.share.requests
        ));
    }
    (summary, digest)
}

/// The warning for completed requests whose prompt carried images (`with_images[i]`: prompt
/// `i` does; records cycle through the prompts by index) but whose server sent no usage: their
/// prompt tokens are the text's alone, since only the server knows what an image costs.
fn images_without_usage(records: &[RequestRecord], with_images: &[bool]) -> Option<String> {
    if with_images.is_empty() {
        return None;
    }
    let n = records
        .iter()
        .filter(|r| !r.warmup && r.is_success() && r.usage.is_none())
        .filter(|r| with_images[(r.index % with_images.len() as u64) as usize])
        .count();
    (n > 0).then(|| {
        format!(
            "{n} completed requests carried images but the server sent no usage: their prompt \
             tokens (and the input totals) count the text only; what the images cost in tokens \
             is unknown"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_without_usage_are_counted_and_named() {
        let rec = |index: u64, usage: bool, warmup: bool| RequestRecord {
            index,
            warmup,
            usage: usage.then(|| servelab_records::Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                ..Default::default()
            }),
            scheduled_ns: 0,
            intended_ns: 0,
            sent_ns: 0,
            prompt_tokens: Some(8),
            max_tokens: Some(2),
            chunks: Vec::new(),
            end_ns: Some(1),
            status: Some(200),
            outcome: servelab_records::Outcome::Success,
            server: None,
            read_lag_ns: None,
            retries: 0,
            session: None,
            stream: Default::default(),
        };
        // Prompts 0 and 2 of 3 carry images; request 3 cycles back to prompt 0.
        let with_images = [true, false, true];
        let records = [
            rec(0, false, true),
            rec(0, false, false),
            rec(1, false, false),
            rec(2, true, false),
            rec(3, false, false),
        ];
        assert_eq!(
            images_without_usage(&records, &with_images).as_deref(),
            Some(
                "2 completed requests carried images but the server sent no usage: their prompt \
                 tokens (and the input totals) count the text only; what the images cost in \
                 tokens is unknown"
            )
        );
        assert_eq!(images_without_usage(&records[..4], &[false, false, false, false]), None);
        assert_eq!(images_without_usage(&records, &[]), None);
        assert_eq!(images_without_usage(&[rec(2, true, false)], &with_images), None);
    }
}
