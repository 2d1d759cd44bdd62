#!/usr/bin/env bash
# The server's own overhead (issue 29): requests/s and time to first token of spillway-cli serve at
# 1, 2 and 4 concurrent streaming clients (tests/bench/server_load.py), beside the bare engine on
# the same requests (spillway-cli chat --json, the same prompt and length, the conversation reset
# between requests so each evaluates its prompt). Greedy, 2 CPU threads.
# Usage: tests/bench/server_bench.sh [BUILD_DIR] [MODEL] [TOKENS] [REQUESTS_PER_CLIENT]
set -euo pipefail
build=${1:-build}
model=${2:-resources/stories260K.gguf}
tokens=${3:-64}
requests=${4:-20}
cli=$build/bin/spillway-cli
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prompt="Once upon a time there was a little girl who"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d)}

# The bare engine: the same requests through one conversation, one after another.
input=$(for i in $(seq "$requests"); do
  printf '{"content":"%d %s"}\n{"command":"reset"}\n' "$i" "$prompt"; done)
engine=$("$cli" chat --json -m "$model" --temp 0 -n "$tokens" -t 2 <<<"$input" | python3 -c '
import json, statistics, sys
r = [json.loads(l) for l in sys.stdin if "\"reply\"" in l]
t = [x["time_to_first_token_ms"] for x in r]
req = [x["time_to_first_token_ms"] + 1000 * (x["completion_tokens"] - 1) / x["tokens_per_s"] for x in r]
print(json.dumps({"requests": len(r), "time_to_first_token_ms_median": statistics.median(t),
                  "request_ms_median": statistics.median(req), "requests_per_s": 1000 / statistics.median(req)}))')
echo "engine: $engine"
for clients in 1 2 4; do
  parallel=$(( clients < 2 ? 1 : 2 ))
  port_file=$(mktemp)
  "$cli" serve -m "$model" --port 0 -t 2 --parallel "$parallel" >"$port_file" 2>/dev/null &
  server=$!
  for _ in $(seq 100); do [[ -s $port_file ]] && break; sleep 0.1; done
  port=$(head -1 "$port_file")
  result=$(python3 "$here/server_load.py" "http://127.0.0.1:$port/v1" "$clients" "$requests" "$tokens" "$prompt")
  kill "$server"; wait "$server" 2>/dev/null || true
  rm -f "$port_file"
  echo "server, $clients client(s), --parallel $parallel: $result"
done
