#!/usr/bin/env bash
# How exactly a shard reads its clock (`servelab scale clock`, the reading every shard takes
# before its run), against local references whose clocks are this host's: the simulator's
# Date header (hyper: stamped per response), an SNTP server, and, when Python's uvicorn is
# installed (`pip install uvicorn`), a uvicorn server's Date header (vLLM's and SGLang's HTTP
# server, which refreshes a cached Date about once a second; the script also prints how often
# it ticks). The true offset is 0 against each: a reading whose |offset| exceeds its
# uncertainty is a wrong bound (exit 1).
#
#   BIN=target/release/servelab scripts/clock-reading.sh [READINGS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/servelab}
N=${1:-5}
OUT=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$OUT"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

SIM_PORT=$(free_port)
$BIN sim serve --port "$SIM_PORT" 2>"$OUT/sim.log" &
PIDS+=($!)

# An SNTP server on this host's clock (mode 4, stratum 2, the client's transmit time echoed).
cat >"$OUT/sntp.py" <<'EOF'
import socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
def ntp(t):
    secs = int(t) + 2208988800
    return struct.pack("!II", secs, int((t - int(t)) * 2**32))
while True:
    data, peer = s.recvfrom(512)
    got = time.time()
    if len(data) < 48:
        continue
    head = struct.pack("!BBbb", 0x24, 2, 0, -20) + b"\0" * 8 + b"TEST"
    s.sendto(head + ntp(got - 60) + data[40:48] + ntp(got) + ntp(time.time()), peer)
EOF
python3 "$OUT/sntp.py" >"$OUT/sntp.port" &
PIDS+=($!)

REFS=("--base-url http://127.0.0.1:$SIM_PORT")
NAMES=("sim (hyper)")
if python3 -c 'import uvicorn' 2>/dev/null; then
  UV_PORT=$(free_port)
  cat >"$OUT/app.py" <<'EOF'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"object":"list","data":[]}'})
EOF
  (cd "$OUT" && python3 -m uvicorn app:app --port "$UV_PORT" --log-level warning) &
  PIDS+=($!)
  REFS+=("--base-url http://127.0.0.1:$UV_PORT")
  NAMES+=("uvicorn")
else
  echo "uvicorn is not installed: its row is skipped (pip install uvicorn)" >&2
fi
sleep 2
REFS+=("--clock-reference ntp://127.0.0.1:$(cat "$OUT/sntp.port")")

# How often uvicorn's cached Date ticks: its Date polled every 0.5 ms for 6 s.
if [ -n "${UV_PORT:-}" ]; then
  python3 - "$UV_PORT" <<'EOF_POLL'
import email.utils, http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
last, ticks, end = None, [], time.time() + 6
while time.time() < end:
    t0 = time.time(); c.request("GET", "/"); r = c.getresponse(); r.read(); t1 = time.time()
    d = email.utils.parsedate_to_datetime(r.getheader("date")).timestamp()
    if last is not None and d != last:
        ticks.append((t0 + t1) / 2)
    last = d
    time.sleep(0.0005)
gaps = ["%.1f" % ((b - a) * 1000) for a, b in zip(ticks, ticks[1:])]
print("uvicorn Date ticks every (ms): " + " ".join(gaps))
EOF_POLL
fi
NAMES+=("sntp")

bad=0
printf '%-12s %4s %12s %14s %9s %8s  %s\n' reference run offset_ms uncertainty_ms exchanges seconds note
for i in "${!REFS[@]}"; do
  for r in $(seq 1 "$N"); do
    # shellcheck disable=SC2086
    json=$($BIN scale clock --json ${REFS[$i]})
    line=$(python3 -c '
import json, sys
v = json.loads(sys.argv[1])
ok = abs(v["offset_ms"]) <= v["uncertainty_ms"]
print("%-12s %4s %12.3f %14.3f %9d %8.2f  %s%s" % (sys.argv[2], sys.argv[3], v["offset_ms"],
      v["uncertainty_ms"], v["exchanges"], v["seconds"], v["note"] or "",
      "" if ok else "  <- WRONG BOUND"))
sys.exit(0 if ok else 3)' "$json" "${NAMES[$i]}" "$r") || bad=1
    echo "$line"
  done
done
exit $bad
