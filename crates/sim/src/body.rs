//! The streaming (SSE) response body: a hand-written `http_body::Body` whose `poll_frame`
//! returns each event when it is due, so the moment hyper receives a frame is the moment we
//! record as the chunk's actual send time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::{AcquireError, OwnedSemaphorePermit};

use crate::api::{stream_error_events, Endpoint, GenRequest, Render};
use crate::engine::{finish, Arrival, Generation, SimEngine, Slot, Waiting};
use crate::fault::Fault;
use crate::truth::TruthChunk;
use servelab_timer::Sleep;

type Acquire =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send + Sync>>;

/// Gap between the two halves of a split UTF-8 character.
const SPLIT_GAP: Duration = Duration::from_millis(1);

/// A multi-byte character appended to the first event under the `split-utf8` fault.
pub const SPLIT_CHAR: char = 'é';

enum Phase {
    /// Waiting for a decode slot.
    Queued(Option<Acquire>, Option<Waiting>),
    /// Generating events.
    Run,
    /// The second half of a split event (and whether it ends the tokens), due at `sleep`.
    SplitRest(Bytes, bool, Sleep),
    /// The `reset-mid` fault fires at `sleep` (after yielding once to let hyper flush).
    ResetAt(Sleep, bool),
    /// Everything sent: the next poll ends the stream.
    Finish,
    Done,
}

/// An event built and waiting for its due time.
struct Due {
    frame: String,
    /// `--truth-text`: the answer text of the event.
    text: Option<String>,
    tokens: u32,
    due_ns: u64,
    last: bool,
    sleep: Sleep,
}

/// Everything about one request that a response needs, fixed at arrival.
pub struct Job {
    pub engine: Arc<SimEngine>,
    pub arrival: Arrival,
    pub req: GenRequest,
    pub render: Render,
    pub gen: Generation,
    pub fault: Option<Fault>,
    /// Set to make the connection end with a TCP RST.
    pub reset: Arc<crate::conn::ConnFlags>,
}

impl Job {
    /// Token count after which a mid-stream fault fires.
    pub fn fault_point(&self) -> u64 {
        let total = self.gen.total;
        match self.fault {
            Some(Fault::ResetMid { after_tokens: Some(n) }) => n.min(total.saturating_sub(1)),
            _ => total / 2,
        }
    }

    pub fn outcome(&self) -> &'static str {
        self.fault.map_or("ok", |f| f.kind())
    }
}

/// The SSE body of one streaming request.
pub struct SseBody {
    job: Job,
    phase: Phase,
    pending: Option<Due>,
    queue_ns: u64,
    /// Whether the request had to wait for a `--max-num-seqs` slot.
    waited: bool,
    chunks: Vec<TruthChunk>,
    last_actual_ns: Option<u64>,
    fault_fired: bool,
    first_event: bool,
    slot: Option<Slot>,
    finished: bool,
    /// Engine-model mode: the engine refused the request.
    refused: bool,
    /// `--truth-text`: the answer text sent so far.
    reply: Option<String>,
}

impl SseBody {
    pub fn new(job: Job) -> Self {
        let reply = job.engine.cfg.truth_text.then(String::new);
        let phase = match &job.engine.slots {
            Some(sem) => {
                let waiting = Waiting::new(&job.engine);
                Phase::Queued(Some(Box::pin(sem.clone().acquire_owned())), Some(waiting))
            }
            None => Phase::Queued(None, None),
        };
        Self {
            job,
            phase,
            pending: None,
            queue_ns: 0,
            waited: false,
            chunks: Vec::new(),
            last_actual_ns: None,
            fault_fired: false,
            first_event: true,
            slot: None,
            finished: false,
            refused: false,
            reply,
        }
    }

    fn record(&mut self, outcome: &str) {
        if self.finished {
            return;
        }
        self.finished = true;
        let engine = self.job.engine.clone();
        let completion: u64 = self.chunks.iter().map(|c| c.tokens as u64).sum();
        if outcome == "ok" {
            let m = &engine.metrics;
            let c = if self.job.gen.finish == "stop" { &m.success_stop } else { &m.success_length };
            c.fetch_add(1, Relaxed);
        }
        if let Some(reply) = self.reply.take() {
            let _ = self.job.arrival.reply.set(reply);
        }
        finish(
            &engine,
            &self.job.arrival,
            self.job.req.endpoint.name(),
            self.job.req.prompt_tokens,
            completion,
            self.queue_ns,
            std::mem::take(&mut self.chunks),
            outcome,
        );
        self.slot = None;
    }

    /// Build the next event (or a fault's frame). `Err` schedules a reset at that time;
    /// `Pending` waits for the engine model's step (engine-model mode).
    fn plan(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<String>, Sleep>> {
        let job = &mut self.job;
        let engine = job.engine.clone();
        if !self.fault_fired && job.gen.sent() >= job.fault_point() {
            match job.fault {
                Some(Fault::ResetMid { .. }) => {
                    // The connection dies when the next token would have been sent, so the
                    // tokens already written have time to reach the client before the RST.
                    self.fault_fired = true;
                    let due_ns =
                        job.gen.next_event(&engine).map_or(job.arrival.now_ns(), |e| e.due_ns);
                    let at = job.arrival.at(due_ns);
                    return Poll::Ready(Err(engine.timer.sleep_until(at)));
                }
                Some(Fault::StreamError) => {
                    self.fault_fired = true;
                    let mut s = String::new();
                    stream_error_events(&mut s, !engine.cfg.quirks.no_done);
                    return Poll::Ready(Ok(Some(s)));
                }
                Some(Fault::Malformed) => {
                    self.fault_fired = true;
                    return Poll::Ready(Ok(Some(format!(
                        "data: {{\"id\":\"{}\",\"choices\":[{{\n\n",
                        job.render.id
                    ))));
                }
                Some(Fault::Stall { secs }) => {
                    self.fault_fired = true;
                    job.gen.stall(Duration::from_secs_f64(secs));
                }
                _ => {}
            }
        }
        let ev = match job.gen.poll_event(&engine, cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(ev)) => ev,
            Poll::Ready(None) if job.gen.refused.is_some() => {
                // The engine model can never fit the request: an error in the stream, as an
                // engine that fails a request after accepting it.
                self.refused = true;
                let mut s = String::new();
                stream_error_events(&mut s, !engine.cfg.quirks.no_done);
                return Poll::Ready(Ok(Some(s)));
            }
            Poll::Ready(None) => return Poll::Ready(Ok(None)),
        };
        let r = &job.render;
        let usage = |c: u64| job.req.continuous_usage.then_some(c);
        // The stream's usage: its own final event, or on the finish_reason event (quirks).
        let final_usage = job.req.include_usage && job.fault != Some(Fault::NoUsage);
        let on_finish = final_usage && job.req.usage_on_finish;
        let mut frame = String::with_capacity(512);
        if self.first_event && r.endpoint == Endpoint::Chat {
            // vLLM sends the role chunk when the first token is produced.
            r.role_event(&mut frame, usage(0));
        }
        let mut text = ev.text;
        if self.first_event && job.fault == Some(Fault::SplitUtf8) {
            text.push(SPLIT_CHAR);
        }
        self.first_event = false;
        let answer = (self.reply.is_some() && !ev.reasoning).then(|| text.clone());
        // The no-done fault cuts the stream short: no finish_reason either (the no-done quirk
        // keeps it, as transformers serve does).
        let finish = (ev.last && job.fault != Some(Fault::NoDone)).then_some(job.gen.finish);
        let ev_usage =
            if ev.last && on_finish { Some(ev.cumulative) } else { usage(ev.cumulative) };
        let shape = (ev.reasoning, ev.tokens, ev.cumulative);
        let (text, field) =
            crate::reasoning::sent_as(&engine.cfg.reasoning, job.gen.reasoning, shape, text);
        r.token_event(&mut frame, &text, field, finish, ev_usage);
        if ev.last {
            if final_usage && !on_finish {
                r.usage_event(&mut frame, ev.cumulative);
            }
            if job.fault != Some(Fault::NoDone) && !engine.cfg.quirks.no_done {
                frame.push_str("data: [DONE]\n\n");
            }
        }
        let deadline = job.arrival.at(ev.due_ns);
        self.pending = Some(Due {
            frame,
            text: answer,
            tokens: ev.tokens,
            due_ns: ev.due_ns,
            last: ev.last,
            sleep: engine.timer.sleep_until(deadline),
        });
        Poll::Ready(Ok(None))
    }

    /// A due event is handed to hyper now: record the truth and metrics.
    fn sent(&mut self, due: &Due) -> u64 {
        let now = self.job.arrival.now_ns();
        let m = &self.job.engine.metrics;
        if let Some(prev) = self.last_actual_ns {
            m.itl.observe_ns(now.saturating_sub(prev));
        }
        m.generation_tokens.fetch_add(due.tokens as u64, Relaxed);
        self.last_actual_ns = Some(now);
        if let (Some(reply), Some(t)) = (&mut self.reply, &due.text) {
            reply.push_str(t);
        }
        self.chunks.push(TruthChunk {
            tokens: due.tokens,
            intended_ns: due.due_ns,
            actual_ns: now,
        });
        now
    }
}

fn data(s: impl Into<Bytes>) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
    Poll::Ready(Some(Ok(Frame::data(s.into()))))
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        loop {
            match &mut this.phase {
                Phase::Queued(acquire, waiting) => {
                    let permit = match acquire.as_mut() {
                        None => None,
                        Some(fut) => match fut.as_mut().poll(cx) {
                            Poll::Pending => {
                                this.waited = true;
                                return Poll::Pending;
                            }
                            Poll::Ready(p) => p.ok(),
                        },
                    };
                    waiting.take();
                    let engine = this.job.engine.clone();
                    this.slot = Some(Slot::new(&engine, permit));
                    engine.metrics.prompt_tokens.fetch_add(this.job.req.prompt_tokens, Relaxed);
                    // The clock starts at receipt unless the request really waited for a slot:
                    // parsing and tokenizing the prompt happen inside the TTFT budget, as in an
                    // engine, instead of silently extending it.
                    this.queue_ns = if this.waited { this.job.arrival.now_ns() } else { 0 };
                    let received = this.job.arrival.received;
                    this.job.gen.start(&engine, this.queue_ns, received);
                    this.phase = Phase::Run;
                }
                Phase::Run => {
                    if this.pending.is_none() {
                        let planned = match this.plan(cx) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(p) => p,
                        };
                        match planned {
                            Err(sleep) => {
                                this.phase = Phase::ResetAt(sleep, false);
                                continue;
                            }
                            Ok(Some(fault_frame)) => {
                                if this.job.fault == Some(Fault::StreamError) || this.refused {
                                    this.phase = Phase::Finish;
                                }
                                return data(fault_frame);
                            }
                            Ok(None) if this.pending.is_none() => this.phase = Phase::Finish,
                            Ok(None) => {}
                        }
                        continue;
                    }
                    let Some(due) = this.pending.as_mut() else { continue };
                    if Pin::new(&mut due.sleep).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let Some(due) = this.pending.take() else { continue };
                    this.sent(&due);
                    let frame = Bytes::from(due.frame);
                    if this.job.fault == Some(Fault::SplitUtf8) && !this.fault_fired {
                        this.fault_fired = true;
                        if let Some(cut) = split_point(&frame) {
                            let at = std::time::Instant::now() + SPLIT_GAP;
                            let sleep = this.job.engine.timer.sleep_until(at);
                            this.phase = Phase::SplitRest(frame.slice(cut..), due.last, sleep);
                            return data(frame.slice(..cut));
                        }
                    }
                    if due.last {
                        this.phase = Phase::Finish;
                        if this.job.fault == Some(Fault::CloseAfter) {
                            this.job.reset.close.store(true, Relaxed);
                        }
                    }
                    return data(frame);
                }
                Phase::SplitRest(rest, last, sleep) => {
                    if Pin::new(sleep).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let rest = std::mem::take(rest);
                    this.phase = if *last { Phase::Finish } else { Phase::Run };
                    return data(rest);
                }
                Phase::ResetAt(sleep, yielded) => {
                    if !*yielded {
                        // Return Pending once so hyper flushes the frames already handed to
                        // it; otherwise a late wakeup could reset before the last token
                        // left (our socket refuses writes once the reset flag is set).
                        *yielded = true;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    if Pin::new(sleep).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.job.reset.reset.store(true, Relaxed);
                    this.record(this.job.outcome());
                    this.phase = Phase::Done;
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "servelab-sim injected reset-mid",
                    ))));
                }
                Phase::Finish => {
                    let outcome = if this.refused { "refused" } else { this.job.outcome() };
                    this.record(outcome);
                    this.phase = Phase::Done;
                    return Poll::Ready(None);
                }
                Phase::Done => return Poll::Ready(None),
            }
        }
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        // The client went away or the server shut down mid-stream.
        if !self.finished {
            let m = &self.job.engine.metrics;
            if !matches!(self.phase, Phase::Queued(..)) {
                m.success_abort.fetch_add(1, Relaxed);
            }
            self.record("aborted");
        }
    }
}

/// Byte offset inside the first multi-byte UTF-8 character of `frame`, if any.
pub fn split_point(frame: &[u8]) -> Option<usize> {
    frame.iter().position(|&b| b >= 0xC0).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_point_cuts_inside_the_character() {
        let s = "data: {\"text\":\" caf\u{e9}\"}";
        let cut = split_point(s.as_bytes()).unwrap();
        assert!(std::str::from_utf8(&s.as_bytes()[..cut]).is_err());
        assert_eq!(s.as_bytes()[cut - 1], 0xC3);
        assert_eq!(split_point(b"ascii"), None);
    }
}
