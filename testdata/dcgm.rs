//! A fake DCGM exporter for the tests: serves the recorded answer `dcgm/h100x2.prom` (two
//! H100s on one node, labelled as dcgm-exporter 4.x labels them) on 127.0.0.1, port 0, with
//! its values moving on at each scrape as a real exporter's do: each GPU's power alternates
//! between two readings ([`POWER_W`]) and its energy counter rises with the exporter's own
//! clock at a constant rate ([`ENERGY_RATE_W`], mJ per ms). Without the energy counter it
//! serves the answer of an exporter whose counters list leaves it out.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The recorded answer, as scrape 0 finds it.
pub const FIXTURE: &str = include_str!("dcgm/h100x2.prom");
/// Each GPU's power at even and odd scrapes, W.
pub const POWER_W: [[f64; 2]; 2] = [[400.0, 420.0], [300.0, 320.0]];
/// The rate each GPU's energy counter rises at, W (the mean of its two power readings).
pub const ENERGY_RATE_W: [f64; 2] = [410.0, 310.0];
/// The GPUs' ids as a run reports them (host / UUID).
pub const IDS: [&str; 2] = [
    "gpu-node-a/GPU-3f1c9a52-7d0e-4b8a-9c61-2e5d8f0a4b17",
    "gpu-node-a/GPU-a84e2b6d-15c3-4f97-8d20-6b9e7c3f1a05",
];

const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";

/// The exporter's answer at scrape `k`, `elapsed_ms` after it started.
pub fn text_at(k: u64, elapsed_ms: f64, with_energy: bool) -> String {
    let mut out = String::with_capacity(FIXTURE.len());
    for line in FIXTURE.lines() {
        if !with_energy && line.contains(ENERGY) {
            continue;
        }
        let gpu = line
            .split_once("gpu=\"")
            .and_then(|(_, rest)| rest.split('"').next())
            .and_then(|g| g.parse::<usize>().ok());
        let (head, value) = line.rsplit_once(' ').unwrap_or((line, ""));
        match (gpu, line.starts_with(POWER), line.starts_with(ENERGY)) {
            (Some(g), true, _) => {
                out.push_str(&format!("{head} {:.6}\n", POWER_W[g][(k % 2) as usize]));
            }
            (Some(g), _, true) => {
                let base: f64 = value.parse().unwrap_or(0.0);
                let mj = (base + ENERGY_RATE_W[g] * elapsed_ms).floor();
                out.push_str(&format!("{head} {mj:.0}\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A running fake exporter; stops when dropped.
pub struct FakeDcgm {
    /// `http://127.0.0.1:PORT/metrics`.
    pub url: String,
    scrapes: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl FakeDcgm {
    /// Start serving, with or without the energy counter.
    pub async fn start(with_energy: bool) -> FakeDcgm {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let url = format!("http://{}/metrics", listener.local_addr().expect("local address"));
        let scrapes = Arc::new(AtomicU64::new(0));
        let counted = scrapes.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    // The request head, at most 8 KiB.
                    let mut buf = vec![0u8; 8192];
                    let mut n = 0;
                    while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf[n..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(m) => n += m,
                        }
                    }
                    let k = counted.fetch_add(1, Ordering::SeqCst);
                    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
                    let body = text_at(k, elapsed_ms, with_energy);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; \
                         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.write_all(body.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        FakeDcgm { url, scrapes, task }
    }

    /// Scrapes answered so far.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::SeqCst)
    }
}

impl Drop for FakeDcgm {
    fn drop(&mut self) {
        self.task.abort();
    }
}
