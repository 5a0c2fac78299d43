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
# The restart test leaves the engine it stopped to exit in its own time (llama-server holds
# open requests for a while after SIGTERM); nothing of ours outlives the script.
trap '"$LLAMA" stop; pkill -KILL -f -- "llama-server .*--port $PORT " || true' EXIT
# -c 8192 over SLOTS slots: each slot holds 8192/SLOTS tokens (the context-overflow test
# relies on a 4000-token prompt not fitting one slot). --no-repack: on CPUs that advertise
# AMX where the sandbox does not grant it, llama.cpp's AMX weight repacking dies at the first
# tile instruction (SIGILL/SIGSEGV right after "threadpool init"); plain CPU kernels work.
export CTX=8192
START_ARGS="-np $SLOTS --no-repack ${LLAMA_EXTRA_ARGS:-}"
# shellcheck disable=SC2086
"$LLAMA" start $START_ARGS

# The restart test stops the engine and starts it again with the same script and arguments.
export SERVELAB_REAL_ENGINE_CTL="$LLAMA"
export SERVELAB_REAL_ENGINE_START_ARGS="$START_ARGS"

export SERVELAB_REAL_ENGINE_URL="http://127.0.0.1:$PORT"
export SERVELAB_REAL_ENGINE_SLOTS="$SLOTS"
echo "engine: $SERVELAB_REAL_ENGINE_URL, -np $SLOTS"
curl -sf "$SERVELAB_REAL_ENGINE_URL/props" | python3 -c \
  'import json,sys;p=json.load(sys.stdin);print("engine build:",p.get("build_info","?"),"n_ctx:",p.get("default_generation_settings",{}).get("n_ctx","?"))' \
  || true
cargo test -p servelab --test it -- --nocapture real_engine:: --test-threads 1 2>&1 \
  | tee /tmp/servelab-real-engine.log
# The figures (libtest prints each test's name before its output, on the same line).
grep -oE '(openai|openai-chat|queueing|context overflow|keep-alive|restart): .*|test result.*' \
  /tmp/servelab-real-engine.log || true
