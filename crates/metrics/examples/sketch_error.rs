#![allow(clippy::print_stdout)] // An example reports on stdout.
//! How far the mergeable summary (DDSketch) is from the exact merge: N synthetic latencies
//! (default 1,000,000) split over 16 shards of different shapes, each shard sketched, the
//! sketches merged, and every reported percentile compared with the exact rank value of the
//! union. `scripts/sketch-error.sh` runs it; the arguments are the count and the accuracy α.

use servelab_metrics::sketch::{DdSketch, DEFAULT_ALPHA};

/// xorshift64*: a fixed, seedable stream with no dependency.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A log-normal latency in ms: median `median`, spread `sigma` (Box-Muller).
    fn latency(&mut self, median: f64, sigma: f64) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
        median * (sigma * z).exp()
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let alpha: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(DEFAULT_ALPHA);
    let shards = 16;
    let mut rng = Rng(0x5EED_0017);
    let mut all = Vec::with_capacity(n);
    let mut merged = DdSketch::new(alpha).expect("alpha in (0, 1)");
    let mut bytes = 0;
    for k in 0..shards {
        // Shards see different latencies (one host slower, one server replica busier): the
        // union's percentiles are no shard's.
        let median = 20.0 * (1.0 + k as f64 / 4.0);
        let sigma = 0.3 + 0.05 * k as f64;
        let mut s = DdSketch::new(alpha).expect("alpha in (0, 1)");
        for _ in 0..n / shards {
            let x = rng.latency(median, sigma);
            s.add(x);
            all.push(x);
        }
        bytes += serde_json::to_string(&s).map(|j| j.len()).unwrap_or(0);
        merged.merge(&s).expect("same alpha");
    }
    all.sort_by(f64::total_cmp);
    println!("{} latencies over {shards} shards, alpha {alpha}", all.len());
    println!(
        "sketch: {} bins merged; {:.1} KiB of JSON per shard on average",
        merged.bins(),
        bytes as f64 / shards as f64 / 1024.0
    );
    println!("{:>8} {:>12} {:>12} {:>10}", "pct", "exact ms", "sketch ms", "rel err");
    let mut worst: f64 = 0.0;
    for p in [1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99] {
        let q = p / 100.0;
        let exact = all[(q * (all.len() - 1) as f64).floor() as usize];
        let got = merged.quantile(q).unwrap_or(f64::NAN);
        let err = (got - exact).abs() / exact;
        worst = worst.max(err);
        println!("{p:>8} {exact:>12.4} {got:>12.4} {err:>10.2e}");
    }
    println!("worst relative error {worst:.2e} (bound {alpha})");
    if worst > alpha {
        std::process::exit(1);
    }
}
