#!/usr/bin/env bash
# Cross-check servelab against a real engine: llama.cpp's llama-server serving SmolLM2-135M.
#
#   scripts/test-real-engine.sh            install (first time: 10-20 min), start, test, stop
#
# Environment: PORT (default: a free port), SLOTS (-np, default 4), LLAMA_SERVER_SH (default
# ../shared/scripts/llama-server.sh beside the repo). The engine listens on 127.0.0.1 only and
# is stopped on exit, also on failure or Ctrl-C. Findings: docs/real-engine.md.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA=${LLAMA_SERVER_SH:-$(cd .. && pwd)/shared/scripts/llama-server.sh}
SLOTS=${SLOTS:-4}
if [ -z "${PORT:-}" ]; then
  PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
fi
export PORT

"$LLAMA" install
trap '"$LLAMA" stop' EXIT
# -c 8192 over SLOTS slots: each slot holds 8192/SLOTS tokens (the context-overflow test
# relies on a 4000-token prompt not fitting one slot). --no-repack: on CPUs that advertise
# AMX where the sandbox does not grant it, llama.cpp's AMX weight repacking dies at the first
# tile instruction (SIGILL/SIGSEGV right after "threadpool init"); plain CPU kernels work.
CTX=8192 "$LLAMA" start -np "$SLOTS" --no-repack ${LLAMA_EXTRA_ARGS:-}

export SERVELAB_REAL_ENGINE_URL="http://127.0.0.1:$PORT"
export SERVELAB_REAL_ENGINE_SLOTS="$SLOTS"
echo "engine: $SERVELAB_REAL_ENGINE_URL, -np $SLOTS"
curl -sf "$SERVELAB_REAL_ENGINE_URL/props" | python3 -c \
  'import json,sys;p=json.load(sys.stdin);print("engine build:",p.get("build_info","?"),"n_ctx:",p.get("default_generation_settings",{}).get("n_ctx","?"))' \
  || true
cargo test -p servelab --test real_engine -- --nocapture --test-threads 1 2>&1 \
  | tee /tmp/servelab-real-engine.log
grep -E '^(openai|openai-chat|queueing|context overflow):|test result' /tmp/servelab-real-engine.log \
  || true
