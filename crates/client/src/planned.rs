//! A request ready to send, shared by the measuring loop and the session runner.

use bytes::Bytes;

/// One request, ready to send: its body was serialized before the run.
#[derive(Debug, Clone)]
pub struct PlannedRequest {
    /// The serialized JSON body ([`crate::openai::request_body`]).
    pub body: Bytes,
    /// The prompt's exact token count, copied into the record; `None`: not known (it then
    /// comes from the server's usage, if any).
    pub prompt_tokens: Option<u64>,
    /// The requested output length, copied into the record; `None`: the server decides.
    pub max_tokens: Option<u64>,
}

/// Measured requests written on demand, for workloads whose bodies are too large to hold all
/// at once (a long trace replay): the loop writes each a bounded number of arrivals ahead of
/// its send, on a thread of its own ([`crate::RequestSource::OnDemand`]).
pub trait RequestWriter: Send + Sync + std::fmt::Debug {
    /// How many requests there are.
    fn len(&self) -> usize;

    /// True when there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Request `i` (`i < len()`), written now.
    fn request(&self, i: usize) -> PlannedRequest;
}
