#!/usr/bin/env bash
# The official OpenAI JavaScript client (the openai npm package, installed into tests/server by
# packaging/quickstart.sh test) against spillway-cli serve on 127.0.0.1 with the demo model.
# Usage: test_openai_client.sh BIN_DIR MODEL
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$1
model=$2
if ! command -v node >/dev/null || [[ ! -d $here/node_modules/openai || ! -d $here/node_modules/ollama || ! -d $here/node_modules/ajv ]]; then
  echo "skipped: the openai, ollama and ajv npm packages are not installed (packaging/quickstart.sh test installs them into tests/server)"
  exit 77
fi
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d)}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
# What the model adds to the prompt, greedy: generate prints the prompt, then the new text, then a newline.
out=$("$bin/spillway-cli" generate -m "$model" -p "Once upon a time" -n 24 --temp 0 --seed 1 2>/dev/null; echo x)
out=${out%x}
out=${out%$'\n'}
generated=${out#Once upon a time}
"$bin/spillway-cli" serve -m "$model" --port 0 >"$work/port" 2>"$work/log" &
server=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(head -1 "$work/port")
[[ -n $port ]] || { echo "the server did not start:"; cat "$work/log"; exit 1; }
node "$here/openai_client.mjs" "http://127.0.0.1:$port/v1" "$(basename "$model")" "$generated"
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true

# Tools, structured output and reasoning, with Qwen3.5's own chat template on the demo model; the
# app's library (a data folder of the test's own) holds it and a second model, served beside it.
: >"$work/port"
export XDG_DATA_HOME=$work/data
other=$here/../data/models/moe/tiny-mixtral.gguf
"$bin/spillway-cli" library add "$model" "$other" 2>>"$work/log"
"$bin/spillway-cli" serve -m "$model" --port 0 --chat-template-file "$here/../chat/templates/qwen3.5.jinja" --library \
  >"$work/port" 2>"$work/log" &
server=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(head -1 "$work/port")
[[ -n $port ]] || { echo "the server did not start:"; cat "$work/log"; exit 1; }
node "$here/openai_tools.mjs" "http://127.0.0.1:$port/v1" "$(basename "$model")"
node "$here/ollama_client.mjs" "http://127.0.0.1:$port" "$(basename "$model")" "$(basename "$other")"
