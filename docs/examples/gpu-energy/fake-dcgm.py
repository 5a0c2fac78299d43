#!/usr/bin/env python3
"""A stand-in for NVIDIA's dcgm-exporter, for this example: serves the recorded answer
testdata/dcgm/h100x2.prom (two H100s on one node) on 127.0.0.1:PORT/metrics, its values moving
on at each scrape as the tests' fake exporter (testdata/dcgm.rs) moves them: each GPU's power
alternates between two readings, its energy counter rises with this process's clock at their
mean. Usage: python3 fake-dcgm.py PORT"""
import http.server
import math
import pathlib
import sys
import time

FIXTURE = (pathlib.Path(__file__).resolve().parents[3] / "testdata/dcgm/h100x2.prom").read_text()
POWER_W = [[400.0, 420.0], [300.0, 320.0]]
ENERGY_RATE_W = [410.0, 310.0]
STARTED = time.monotonic()
SCRAPES = [0]


def text_at(k, elapsed_ms):
    out = []
    for line in FIXTURE.splitlines():
        gpu = int(line.split('gpu="', 1)[1].split('"', 1)[0]) if 'gpu="' in line else None
        head, _, value = line.rpartition(" ")
        if gpu is not None and line.startswith("DCGM_FI_DEV_POWER_USAGE"):
            line = f"{head} {POWER_W[gpu][k % 2]:.6f}"
        elif gpu is not None and line.startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
            line = f"{head} {math.floor(float(value) + ENERGY_RATE_W[gpu] * elapsed_ms):.0f}"
        out.append(line)
    return "\n".join(out) + "\n"


class Exporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = text_at(SCRAPES[0], (time.monotonic() - STARTED) * 1e3).encode()
        SCRAPES[0] += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Exporter).serve_forever()
