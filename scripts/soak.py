#!/usr/bin/env python3
"""Soak: a long closed-loop run against the simulator, in bounded memory on both sides.

    scripts/soak.py [REQUESTS]      (default 10,000,000; SOAK_SECONDS caps the run instead)

Starts `servelab sim serve` (fixed timing, no delays: the client's and the simulator's own
cost is what is measured), then `servelab bench` in duration mode (prompts cycled, the
records folded past --keep-records) until REQUESTS have been sent, sampling both processes'
resident memory every 5 s. Prints the samples, the requests sent, the throughput, and each
process's peak resident set (VmHWM). The target (issue 28): 10 M requests in < 500 MB for
servelab and < 500 MB for the simulator.

Environment: SERVELAB (binary; default target/release/servelab), CONCURRENCY (64),
CALIBRATE_S (20: seconds of a first short run that sets the duration for REQUESTS).
Everything listens on 127.0.0.1 only and is stopped on exit.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SERVELAB", os.path.join(ROOT, "target/release/servelab"))
CONC = os.environ.get("CONCURRENCY", "64")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def bench(url, seconds, out_dir, samples, sim_pid):
    args = [
        BIN, "bench", "--base-url", url, "--random-input-len", "8",
        "--random-output-len", "4", "--ignore-eos", "--num-prompts", "1000",
        "--max-concurrency", CONC, "--duration", str(seconds), "--no-store",
        "--server-metrics-interval", "0", "--save-result", "--result-dir", out_dir,
        "--result-filename", "soak.json",
    ]
    start = time.time()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    next_sample = start
    while p.poll() is None:
        now = time.time()
        hwm = status_kb(p.pid, "VmHWM")
        if hwm:
            peak = max(peak, hwm)
        if now >= next_sample:
            samples.append((round(now - start), status_kb(p.pid, "VmRSS"), status_kb(sim_pid, "VmRSS")))
            next_sample += 5
        time.sleep(0.2)
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"bench failed ({p.returncode}):\n{err[-2000:]}")
    with open(os.path.join(out_dir, "soak.json")) as f:
        result = json.load(f)
    return result, peak, time.time() - start, out


def main():
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} not found: cargo build --release -p servelab first")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sim = subprocess.Popen(
        [BIN, "sim", "serve", "--port", str(port), "--ttft-ms", "0", "--itl-ms", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        with tempfile.TemporaryDirectory() as d:
            cal = float(os.environ.get("CALIBRATE_S", "20"))
            first, _, _, _ = bench(url, cal, d, [], sim.pid)
            rate = first["completed"] / max(first["duration"], 1e-9)
            # A long run is slower than its first 20 s on a shared machine: aim past REQUESTS.
            seconds = (float(os.environ["SOAK_SECONDS"]) if "SOAK_SECONDS" in os.environ
                       else 1.6 * requests / rate)
            print(f"calibration: {first['completed']} requests in {first['duration']:.1f} s "
                  f"({rate:.0f}/s): running {seconds:.0f} s for ~{requests:,} requests", flush=True)
            samples = []
            result, peak, wall, text = bench(url, seconds, d, samples, sim.pid)
        sim_peak = status_kb(sim.pid, "VmHWM")
        print("t (s)   servelab RSS (MB)   simulator RSS (MB)")
        # Every minute (the samples are 5 s apart).
        for t, a, b in samples[::12]:
            print(f"{t:>5}   {(a or 0) / 1024:>17.0f}   {(b or 0) / 1024:>18.0f}")
        done = result["completed"] + result.get("failed", 0)
        print(f"requests sent:        {done:,} ({result['completed']:,} completed) in {wall:.0f} s "
              f"({done / wall:.0f}/s)")
        print(f"servelab peak RSS:    {peak / 1024:.0f} MB")
        print(f"simulator peak RSS:   {(sim_peak or 0) / 1024:.0f} MB")
        folded = [w for w in result["servelab"]["warnings"] if "kept whole" in w]
        print("summary:", "folded from sketches" if folded else "from the records")
        m = re.search(r"Mean TTFT \(ms\):\s+([\d.]+)", text)
        if m:
            print(f"mean TTFT (ms):       {m.group(1)}")
    finally:
        sim.terminate()
        try:
            sim.wait(10)
        except subprocess.TimeoutExpired:
            sim.kill()


if __name__ == "__main__":
    main()
