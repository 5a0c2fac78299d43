//! `servelab scale clock` against the simulator's Date header and an NTP server.

use std::process::Command;

use servelab_sim::SimConfig;

// The SNTP server of the client's clock tests.
#[path = "../../../client/tests/common/ntp.rs"]
mod ntp;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `scale clock` reads this host's clock as a shard does: against the simulator's Date
/// (this host's clock: offset 0) and against an NTP server 300 ms ahead; without a target
/// it says what it needs (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_clock_reads_the_target_and_an_ntp_server() {
    let _serial = crate::serial::one_at_a_time();
    let sim = servelab_sim::start(SimConfig::fixed(10.0, 2.0).with_port(0)).await.unwrap();
    let ntp = format!("ntp://{}", ntp::ntp_server(300).await);
    let url = sim.base_url();
    let read = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_servelab")).args(&args).output().unwrap()
        })
    };
    let args = |more: &[&str]| -> Vec<String> {
        ["scale", "clock", "--json"].iter().chain(more).map(|s| s.to_string()).collect()
    };
    // Both readings at once (each mostly waits: for the Date's second boundaries, or the
    // NTP server's answers).
    let (date, sntp) =
        (read(args(&["--base-url", &url])), read(args(&["--clock-reference", &ntp])));
    for (out, truth) in [(date.await.unwrap(), 0.0), (sntp.await.unwrap(), 300.0)] {
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let (offset, within) =
            (v["offset_ms"].as_f64().unwrap(), v["uncertainty_ms"].as_f64().unwrap());
        assert!((offset - truth).abs() <= within, "{v}");
        assert!(within < 100.0, "{v}");
    }
    let out = read(args(&[])).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--base-url: reading the target's clock needs its URL"));
    sim.shutdown().await;
}
