#!/usr/bin/env python3
"""SIGINT, SIGTERM and SIGKILL at random points of bench, sweep and lab: is the result usable?

    BIN=target/release/servelab python3 scripts/signal-trials.py [--trials 20] [--seed 1]

Each trial runs the command into one shared store (and a fresh output folder), sends the
signal after a random delay, and checks:
  * the exit code: 2 when SIGINT/SIGTERM interrupted the run (0 if it had already finished),
    killed by signal 9 for SIGKILL;
  * the per-request records file (bench --save-detailed) parses line by line (SIGKILL may cut
    the line being written; nothing before it);
  * the store passes `PRAGMA integrity_check`, and the run is marked after SIGINT/SIGTERM
    (`interrupted`; `running` stays after SIGKILL: nothing can run after it);
  * no engine process of the lab survives SIGINT/SIGTERM (after SIGKILL the engines are
    orphaned; counted and reported);
  * after all trials, a new run into the same store succeeds.
Prints one Markdown table; exits 1 if a check failed.
"""

import argparse
import json
import os
import pathlib
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = os.environ.get("BIN", str(ROOT / "target" / "debug" / "servelab"))
SMALL = ["--random-input-len", "16", "--random-output-len", "32", "--ignore-eos", "--no-progress"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marker_processes(marker):
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if marker in cmd and not stat.rsplit(") ", 1)[-1].startswith("Z"):
            n += 1
    return n


def kill_marker(marker):
    subprocess.run(["pkill", "-KILL", "-f", marker], check=False)


def command(which, url, work, db, marker):
    if which == "bench":
        return [BIN, "bench", "--base-url", url, "--num-prompts", "400", "--max-concurrency", "16",
                "--save-detailed", "--result-dir", str(work), "--db", str(db)] + SMALL
    if which == "sweep":
        return [BIN, "sweep", "--base-url", url, "--concurrency", "4,8,16", "--num-prompts", "64",
                "--settle-secs", "0", "--output-dir", str(work / "sweep"), "--db", str(db)] + SMALL
    engine = (f"{BIN} sim serve --port {{port}} --served-model-name {marker} --ttft-ms 20 "
              "--itl-ms 5")
    (work / "exp.yaml").write_text(
        "name: signals\nstrategy: grid\nengines:\n"
        f"  - {{name: sim, command: '{engine}', ready_timeout_secs: 30, stop_grace_secs: 2}}\n"
        "profiles:\n  - {name: p, dataset_name: random, random_input_len: 16, "
        "random_output_len: 32, ignore_eos: true, num_prompts: 64, max_concurrency: 8, "
        "tokenizer: cl100k_base}\noptions:\n  a: --max-num-seqs 4\n  b: --max-num-seqs 8\n"
    )
    return [BIN, "lab", "run", str(work / "exp.yaml"), "--output-dir", str(work / "lab"),
            "--db", str(db)]


def records_ok(work, sig):
    """Every records file parses line by line (a cut last line only after SIGKILL)."""
    for p in work.glob("*.records.jsonl"):
        lines = p.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for i, line in enumerate(lines):
            try:
                json.loads(line)
            except ValueError:
                if not (sig == signal.SIGKILL and i == len(lines) - 1):
                    return f"{p.name} line {i + 1} unreadable"
    return None


def store_state(db):
    if not db.exists():
        return "no store", None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        ok = c.execute("PRAGMA integrity_check").fetchone()[0]
        row = c.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return ok, row[0] if row else None


def trial(which, sig, rng, url, db, base):
    work = pathlib.Path(tempfile.mkdtemp(dir=base))
    marker = f"sigtrial-{os.getpid()}-{rng.randrange(1 << 30)}"
    p = subprocess.Popen(command(which, url, work, db, marker), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, cwd=work)
    time.sleep(rng.uniform(0.3, 3.0))
    finished = p.poll() is not None
    if not finished:
        p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        return ["did not exit within 60 s of the signal"], finished, 0
    problems = []
    code = p.returncode
    if finished:
        if code != 0:
            problems.append(f"finished early with exit {code}")
    elif sig == signal.SIGKILL:
        if code != -9:
            problems.append(f"exit {code} after SIGKILL")
    elif code not in (0, 2):
        problems.append(f"exit {code} after {sig.name}: {err.decode(errors='replace')[-200:]}")
    bad = records_ok(work, sig)
    if bad:
        problems.append(bad)
    ok, status = store_state(db)
    if ok != "ok":
        problems.append(f"integrity_check: {ok}")
    if which != "lab" and not finished and sig != signal.SIGKILL and code == 2 \
            and status not in ("interrupted", "complete"):
        problems.append(f"stored run is {status!r} after {sig.name}")
    time.sleep(0.5)
    left = marker_processes(marker)
    if left and sig != signal.SIGKILL:
        problems.append(f"{left} engine processes survived {sig.name}")
    kill_marker(marker)
    return problems, finished, left


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commands", default="bench,sweep,lab")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    base = pathlib.Path(tempfile.mkdtemp(prefix="servelab-signals-"))
    db = base / "store.db"
    port = free_port()
    sim = subprocess.Popen([BIN, "sim", "serve", "--port", str(port), "--ttft-ms", "20",
                            "--itl-ms", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    url = f"http://127.0.0.1:{port}"
    print(f"{a.trials} trials per cell, signal after 0.3-3 s (seed {a.seed}); "
          "cells: trials ok / interrupted before the end.\n")
    print("| command | SIGINT | SIGTERM | SIGKILL |")
    print("|---|---|---|---|")
    failures = 0
    orphans = 0
    try:
        for which in a.commands.split(","):
            cells = []
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                good = interrupted = 0
                notes = []
                for _ in range(a.trials):
                    problems, finished, left = trial(which, sig, rng, url, db, base)
                    interrupted += not finished
                    if sig == signal.SIGKILL:
                        orphans += left
                    if problems:
                        notes.append(problems[0])
                    else:
                        good += 1
                failures += a.trials - good
                cell = f"{good}/{a.trials} ok, {interrupted} interrupted"
                if notes:
                    cell += " (" + "; ".join(sorted(set(notes))[:2]) + ")"
                cells.append(cell)
                sys.stderr.write(f"{which} {sig.name}: {cell}\n")
            print(f"| {which} | " + " | ".join(cells) + " |", flush=True)
        after = subprocess.run([BIN, "bench", "--base-url", url, "--num-prompts", "8",
                                "--db", str(db)] + SMALL, capture_output=True)
        print(f"\nA new run into the same store afterwards: exit {after.returncode}.")
        ok, _ = store_state(db)
        print(f"Store integrity after every trial: {ok}.")
        print(f"Lab engine processes orphaned by SIGKILL of the lab (then killed): {orphans}.")
        if after.returncode != 0 or ok != "ok":
            failures += 1
    finally:
        sim.terminate()
    print(f"\n{failures} failed trials")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
