#!/usr/bin/env python3
"""Peak memory of servelab on inputs far larger than what a run uses (issue 28).

    scripts/bounded-inputs.py [LINES]     (default 10,000,000 JSONL lines, 2,000,000 trace rows)

Writes a JSONL dataset of LINES lines and a Mooncake trace of LINES/5 rows into a temporary
folder, then runs `servelab bench --no-store` against the built-in simulator drawing 5
prompts from each (and `/dev/zero` as a tokenizer and as a dataset, which must be refused),
and prints each run's exit code, wall time and peak resident set (from wait4's rusage).
SERVELAB: the binary (default target/release/servelab).
"""

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SERVELAB", os.path.join(ROOT, "target/release/servelab"))


def run(label, args):
    start = time.time()
    p = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read()
    code = os.waitstatus_to_exitcode(status)
    print(f"{label:<44} exit {code}  {time.time() - start:6.1f} s  peak {usage.ru_maxrss / 1024:7.0f} MB"
          + ("" if code == 0 else f"  ({err.strip().splitlines()[-1][:110]})"), flush=True)


def main():
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} not found: cargo build --release -p servelab first")
    with tempfile.TemporaryDirectory() as d:
        jsonl = os.path.join(d, "big.jsonl")
        with open(jsonl, "w") as f:
            row = '{"prompt": "hello world"}\n'
            chunk = row * 10_000
            for _ in range(lines // 10_000):
                f.write(chunk)
        trace = os.path.join(d, "trace.jsonl")
        with open(trace, "w") as f:
            for i in range(lines // 5):
                ids = ", ".join(str(i * 8 + k) for k in range(8))
                f.write(f'{{"timestamp": {i * 10}, "input_length": 4096, "output_length": 4, '
                        f'"hash_ids": [{ids}]}}\n')
        mb = lambda p: os.path.getsize(p) / 1e6
        print(f"JSONL dataset: {lines:,} lines, {mb(jsonl):.0f} MB; "
              f"Mooncake trace: {lines // 5:,} rows, {mb(trace):.0f} MB")
        common = ["bench", "--no-store", "--server-metrics-interval", "0"]
        run("jsonl, 5 prompts", [*common, "--dataset-name", "jsonl", "--dataset-path", jsonl,
                                 "--num-prompts", "5"])
        run("mooncake, --trace-max-requests 5", [*common, "--dataset-name", "mooncake",
                                                 "--dataset-path", trace,
                                                 "--trace-max-requests", "5",
                                                 "--trace-speedup", "1000"])
        run("--tokenizer /dev/zero (refused)", [*common, "--tokenizer", "/dev/zero",
                                                "--num-prompts", "5"])
        run("--dataset-path /dev/zero (refused)", [*common, "--dataset-name", "jsonl",
                                                   "--dataset-path", "/dev/zero",
                                                   "--num-prompts", "5"])


if __name__ == "__main__":
    main()
