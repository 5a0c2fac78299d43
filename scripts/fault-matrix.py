#!/usr/bin/env python3
"""Every simulator fault kind under every load mode: is every request accounted for?

    BIN=target/release/servelab python3 scripts/fault-matrix.py [--rate 0.2] [--faults K,..] [--modes M,..]

For each fault kind x mode (open-loop rate, closed-loop concurrency, duration-bound, sweep,
lab) it starts `servelab sim serve --fault-rate KIND=RATE --truth-log ...` (the lab starts its
own), runs the mode into a fresh store, and checks:
  * sent = successful + failed, from servelab's stored runs (every request it issued);
  * the server's truth log saw every request sent, and any beyond them is a counted re-send
    (sent <= seen <= sent + re-sends: nothing hidden, nothing lost);
  * every failure has a kind, and the kinds are the ones the fault should produce;
  * the exit code is the documented one (0: the run completed, failures are data, not errors;
    the lab: 1 when failures made every configuration invalid).
Prints a Markdown table (docs/reliability.md holds the last one) and exits 1 if a cell fails.
"""

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = os.environ.get("BIN", str(ROOT / "target" / "debug" / "servelab"))

# Fault kind (sim spelling) -> failure kinds servelab may report for it.
FAULTS = {
    "none": set(),
    "rate-limit": {"http_status"},
    "server-error": {"http_status"},
    "unavailable": {"http_status"},
    "reset-before": {"reset"},
    "close-before": {"reset"},  # after one counted re-send on a reused connection
    "reset-mid": {"reset"},
    "stall:0.3": set(),  # a pause shorter than the stall timeout: measured, not failed
    "malformed": {"malformed"},
    "stream-error": {"stream_error"},
    "no-done": {"incomplete"},
    "no-usage": set(),
    "split-utf8": set(),
    "close-after": set(),
}

SMALL = ["--random-input-len", "16", "--random-output-len", "8", "--ignore-eos", "--no-progress"]
MODES = {
    "rate": ["bench", "--request-rate", "200", "--num-prompts", "40"] + SMALL,
    "concurrency": ["bench", "--max-concurrency", "8", "--num-prompts", "40"] + SMALL,
    "duration": ["bench", "--max-concurrency", "8", "--duration", "1", "--num-prompts", "100000"]
    + SMALL,
    "sweep": ["sweep", "--concurrency", "2,4", "--num-prompts", "20", "--settle-secs", "0"] + SMALL,
    "lab": None,
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fault_flag(kind, rate):
    if kind == "none":
        return []
    name, _, arg = kind.partition(":")
    spec = f"{name}={rate}" if not arg else f"{name}={arg}={rate}"
    return ["--fault-rate", spec]


def wait_ready(port, proc, limit=20.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("simulator exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("simulator not ready")


def truth_count(paths):
    n = 0
    for p in paths:
        if p.exists():
            n += sum(1 for line in p.read_text().splitlines() if line.strip())
    return n


def stored(db):
    """(sent, failed, kinds, retries) over every run in the store."""
    out = subprocess.run(
        [BIN, "runs", "list", "--db", str(db), "--format", "json"],
        capture_output=True, text=True, check=True,
    )
    sent = failed = retries = 0
    kinds = {}
    for row in json.loads(out.stdout):
        h = row["headline"]
        sent += (h.get("completed") or 0) + (h.get("failed") or 0)
        failed += h.get("failed") or 0
        exp = subprocess.run(
            [BIN, "runs", "export", str(row["id"]), "--db", str(db)],
            capture_output=True, text=True, check=True,
        )
        sl = json.loads(exp.stdout).get("servelab", {})
        retries += sl.get("retries", 0)
        for f in sl.get("failures", []):
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + f["count"]
    return sent, failed, kinds, retries


def run_cell(kind, mode, rate, work):
    db = work / "store.db"
    truth_dir = work / "truth"
    truth_dir.mkdir()
    if mode == "lab":
        cmd = (
            f"{BIN} sim serve --port {{port}} --ttft-ms 5 --itl-ms 2 "
            + " ".join(fault_flag(kind, rate))
            + f" --truth-log {truth_dir}/t-{{port}}.jsonl"
        )
        (work / "exp.yaml").write_text(
            "name: faults\nstrategy: grid\nengines:\n"
            f"  - {{name: sim, command: '{cmd}', ready_timeout_secs: 30, stop_grace_secs: 2}}\n"
            "profiles:\n  - {name: p, dataset_name: random, random_input_len: 16, "
            "random_output_len: 8, ignore_eos: true, num_prompts: 20, max_concurrency: 4, "
            "tokenizer: cl100k_base}\noptions:\n  slots: --max-num-seqs 64\n"
        )
        args = [BIN, "lab", "run", str(work / "exp.yaml"), "--output-dir", str(work / "lab"),
                "--db", str(db)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=work)
        code, err = p.returncode, p.stderr
    else:
        port = free_port()
        sim = subprocess.Popen(
            [BIN, "sim", "serve", "--port", str(port), "--ttft-ms", "5", "--itl-ms", "2",
             "--truth-log", str(truth_dir / "t.jsonl")] + fault_flag(kind, rate),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_ready(port, sim)
            args = [BIN] + MODES[mode] + ["--base-url", f"http://127.0.0.1:{port}", "--db", str(db)]
            if mode == "sweep":
                args += ["--output-dir", str(work / "sweep")]
            p = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=work)
            code, err = p.returncode, p.stderr
        finally:
            sim.terminate()
            sim.wait(10)
    seen = truth_count(sorted(truth_dir.glob("*.jsonl")))
    sent, failed, kinds, retries = stored(db) if db.exists() else (0, 0, {}, 0)
    problems = []
    # The lab exits 1 when no configuration was valid: with 20% of requests failing, every
    # trial misses the lab's success-rate threshold (docs/lab.md).
    expected = {0, 1} if mode == "lab" and FAULTS[kind] else {0}
    if code not in expected:
        problems.append(f"exit {code}: {err.strip().splitlines()[-1] if err.strip() else ''}")
    if sent == 0:
        problems.append("nothing stored")
    # A re-send happens when a kept-alive connection was closed unanswered: the server saw
    # the first attempt when it closed after reading it (close-before), not when it had
    # closed the idle connection before the request arrived (close-after, the keep-alive
    # race). Either way every request beyond the ones sent is a counted re-send.
    if not sent <= seen <= sent + retries:
        problems.append(f"server saw {seen}, servelab sent {sent} + {retries} re-sends")
    if sum(kinds.values()) != failed:
        problems.append(f"{failed} failed but {sum(kinds.values())} classified")
    unexpected = set(kinds) - FAULTS[kind]
    if unexpected:
        problems.append(f"unexpected kinds {sorted(unexpected)}")
    return dict(code=code, sent=sent, seen=seen, failed=failed, retries=retries, kinds=kinds,
                problems=problems)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=0.2, help="fault probability per request")
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated fault kinds")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    a = ap.parse_args()
    if not pathlib.Path(BIN).exists():
        sys.exit(f"{BIN} not found: build it (cargo build --release) and pass BIN=")
    modes = a.modes.split(",")
    print(f"Fault rate {a.rate} per request; cells: sent/seen by server (failed: kinds), exit code.\n")
    print("| fault | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    bad = 0
    for kind in a.faults.split(","):
        cells = []
        for mode in modes:
            work = pathlib.Path(tempfile.mkdtemp(prefix="servelab-fault-"))
            try:
                r = run_cell(kind, mode, a.rate, work)
            except Exception as e:  # a cell that cannot run is a failed cell, not a crash
                r = dict(problems=[f"{type(e).__name__}: {e}"])
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if r["problems"]:
                bad += 1
                cells.append("FAIL: " + "; ".join(r["problems"]))
            else:
                kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items())) or "none"
                re = f", {r['retries']} re-sent" if r["retries"] else ""
                cells.append(f"ok {r['sent']}/{r['seen']} ({r['failed']}: {kinds}{re}), exit {r['code']}")
            sys.stderr.write(f"{kind} x {mode}: {cells[-1]}\n")
        print(f"| {kind} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{bad} failing cells")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
