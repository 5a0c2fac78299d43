//! servelab-sim: a simulated OpenAI-compatible LLM engine with exactly controlled timing and a
//! ground-truth log of when every chunk was sent.
//!
//! Start one with [`start`] (tests, examples) or [`serve`] (the CLI). See docs/sim.md.
//!
//! A [`SimConfig`] (or the CLI's [`SimArgs`], validated into one) says what the engine
//! serves and how it times tokens: an [`EngineModel`] ([`FixedModel`], [`PerTokenModel`], or
//! any other) decides TTFT and ITL, [`Jitter`] adds seeded noise, and in engine-model mode an
//! engine file's scheduler decides instead. A [`Fault`] can be injected per request, and
//! [`Quirks`] make every request behave like a particular real server's. The
//! running sim, a [`SimHandle`], keeps one [`TruthRecord`] per finished request: when every
//! chunk was meant to go out and when it did, the timing a client's measurements are checked
//! against.

#![warn(missing_docs)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod api;
mod body;
mod config;
mod conn;
mod engine;
mod fault;
mod metrics;
mod model;
mod parse_pool;
mod quirk;
pub mod reasoning;
pub mod replay;
mod server;
pub mod spec;
mod stepper;
mod sys;
mod truth;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{ChunkSize, SimArgs, SimConfig, TimingKind};
pub use fault::{Fault, FaultParseError};
pub use model::{
    EngineModel, EngineState, FixedModel, Jitter, JitterDist, PerTokenModel, RequestShape,
};
pub use quirk::{Quirk, QuirkParseError, Quirks};
pub use reasoning::{Reasoning, ReasoningFormat};
pub use spec::Speculation;
pub use truth::{ImageSeen, TruthChunk, TruthRecord};

use engine::SimEngine;

/// Why the sim could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An option or value is invalid (tokenizer, timing, engine file, ...); the message names
    /// it.
    #[error("invalid sim configuration: {0}")]
    Config(String),
    /// The listening address could not be bound.
    #[error("cannot bind {addr}: {message} (is the port in use? try --port 0)")]
    Bind {
        /// The `HOST:PORT` asked for.
        addr: String,
        /// The operating system's reason.
        message: String,
    },
    /// A resource the sim needs could not be set up (truth log file, timer or parser
    /// threads, the listener's address).
    #[error("sim I/O error: {0}")]
    Io(String),
}

/// A running sim: where it listens and its ground truth. Dropping it also stops the sim, but
/// only [`SimHandle::shutdown`] waits for that and flushes the truth log.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    engine: Arc<SimEngine>,
    stop: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl SimHandle {
    /// The address it listens on (the port actually bound when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// All finished requests so far.
    pub fn truth(&self) -> Vec<TruthRecord> {
        self.engine.truth.snapshot()
    }

    /// Requests finished so far (a mark for [`SimHandle::truth_since`]).
    pub fn truth_len(&self) -> usize {
        self.engine.truth.len()
    }

    /// The finished requests from the `start`-th on.
    pub fn truth_since(&self, start: usize) -> Vec<TruthRecord> {
        self.engine.truth.since(start)
    }

    /// Stop accepting, abort open streams, flush the truth log.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.accept.await;
        let truth = self.engine.truth.clone();
        let _ = tokio::task::spawn_blocking(move || truth.close()).await;
    }
}

/// Start a sim on `config.host:config.port` (port 0 picks a free one). Also raises the soft
/// RLIMIT_NOFILE to the hard limit.
pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
    // Thousands of streams need thousands of sockets; failure only lowers the ceiling.
    let _ = sys::raise_nofile_limit();
    let addr = format!("{}:{}", config.host, config.port);
    let engine = tokio::task::spawn_blocking(move || SimEngine::new(config))
        .await
        .map_err(|e| SimError::Io(format!("engine setup task failed: {e}")))??;
    let engine = Arc::new(engine);
    let listener = bind(&addr)
        .await
        .map_err(|e| SimError::Bind { addr: addr.clone(), message: e.to_string() })?;
    let local = listener.local_addr().map_err(|e| SimError::Io(e.to_string()))?;
    let (stop, rx) = watch::channel(false);
    let accept = tokio::spawn(server::accept_loop(engine.clone(), listener, rx));
    Ok(SimHandle { addr: local, engine, stop, accept })
}

/// Listen backlog: thousands of clients connecting at once must not hit SYN drops (which
/// cost them a 1 s retransmit and skew any benchmark's start).
const LISTEN_BACKLOG: u32 = 4096;

async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address resolved");
    for a in tokio::net::lookup_host(addr).await? {
        let sock = if a.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        sock.set_reuseaddr(true)?;
        match sock.bind(a).and_then(|()| sock.listen(LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Run the sim for the CLI: start, `announce` where it listens, serve until Ctrl-C, shut
/// down.
pub async fn serve(args: SimArgs, announce: impl FnOnce(&str)) -> Result<(), SimError> {
    let config = args.into_config()?;
    let handle = start(config).await?;
    announce(&format!("servelab sim listening on {}", handle.base_url()));
    let _ = tokio::signal::ctrl_c().await;
    handle.shutdown().await;
    Ok(())
}

/// Raise the soft open-file limit to the hard limit (also done by [`serve`]); returns the new
/// soft limit. Useful for load drivers that open thousands of sockets.
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    sys::raise_nofile_limit()
}
