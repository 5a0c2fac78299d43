//! Load driver and truth analyzer for scripts/sim-precision.sh.
//!
//! `precision drive --url http://127.0.0.1:PORT --streams N --tokens T` opens N concurrent
//! streaming requests (one keep-alive connection each, plain hyper client) and reads them to
//! the end. `precision analyze --truth FILE` prints the sim's send precision (actual −
//! intended per chunk) from its truth log.
#![allow(clippy::print_stdout, clippy::print_stderr)] // printing the figures is the point

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use clap::{Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use servelab_sim::TruthRecord;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Drive N concurrent streams against a running sim.
    Drive {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 100)]
        streams: usize,
        #[arg(long, default_value_t = 100)]
        tokens: u64,
        /// Connections being opened at once (avoids SYN-backlog drops and 1 s retransmits).
        #[arg(long, default_value_t = 200)]
        connect_parallelism: usize,
        /// Spread stream starts evenly over this many ms (0: all at once, the worst case).
        #[arg(long, default_value_t = 0)]
        ramp_ms: u64,
    },
    /// Summarize a truth log.
    Analyze {
        #[arg(long)]
        truth: std::path::PathBuf,
    },
}

/// One streaming request started at `start_at`; returns the body bytes read.
async fn one(
    addr: SocketAddr,
    i: usize,
    body: Arc<String>,
    gate: Arc<Semaphore>,
    start_at: Instant,
) -> Result<usize, String> {
    tokio::time::sleep_until(start_at.into()).await;
    let permit = gate.acquire_owned().await.map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    drop(permit);
    let _ = tcp.set_nodelay(true);
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::post("/v1/completions")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("x-request-id", format!("servelab-{i}"))
        .body(Full::new(Bytes::from(body.as_str().to_owned())))
        .map_err(|e| e.to_string())?;
    let resp = tx.send_request(req).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("status {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut n = 0;
    while let Some(f) = body.frame().await {
        let f = f.map_err(|e| e.to_string())?;
        n += f.data_ref().map_or(0, |d| d.len());
    }
    Ok(n)
}

async fn drive(
    url: &str,
    streams: usize,
    tokens: u64,
    par: usize,
    ramp_ms: u64,
) -> Result<(), String> {
    let _ = servelab_sim::raise_nofile_limit();
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| format!("--url {url}: {e}"))?;
    let body = Arc::new(format!(
        r#"{{"prompt":"hello","max_tokens":{tokens},"ignore_eos":true,"stream":true}}"#
    ));
    let gate = Arc::new(Semaphore::new(par.max(1)));
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|i| {
            let offset_us = ramp_ms * 1000 * i as u64 / streams as u64;
            let at = t0 + std::time::Duration::from_micros(offset_us);
            tokio::spawn(one(addr, i, body.clone(), gate.clone(), at))
        })
        .collect();
    let (mut ok, mut errors, mut bytes) = (0usize, Vec::new(), 0usize);
    for t in tasks {
        match t.await {
            Ok(Ok(n)) => {
                ok += 1;
                bytes += n;
            }
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
    println!(
        "client: {ok}/{streams} streams ok, {} errors, {:.1} MB read, {:.2} s wall",
        errors.len(),
        bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    if let Some(e) = errors.first() {
        println!("client: first error: {e}");
    }
    Ok(())
}

fn pct(v: &[i64], p: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn analyze(path: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let recs: Vec<TruthRecord> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut late: Vec<i64> = recs
        .iter()
        .flat_map(|r| r.chunks.iter())
        .map(|c| c.actual_ns as i64 - c.intended_ns as i64)
        .collect();
    late.sort_unstable();
    let ok = recs.iter().filter(|r| r.outcome == "ok").count();
    println!(
        "sim: {} requests ({ok} ok), {} chunks, actual-intended median {:.1} us, p99 {:.1} us, \
         max {:.1} us",
        recs.len(),
        late.len(),
        pct(&late, 0.5) as f64 / 1e3,
        pct(&late, 0.99) as f64 / 1e3,
        late.last().copied().unwrap_or(0) as f64 / 1e3
    );
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let r = match Cli::parse().cmd {
        Cmd::Drive { url, streams, tokens, connect_parallelism, ramp_ms } => {
            drive(&url, streams, tokens, connect_parallelism, ramp_ms).await
        }
        Cmd::Analyze { truth } => analyze(&truth),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
