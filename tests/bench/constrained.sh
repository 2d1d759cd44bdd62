#!/usr/bin/env bash
# The cost of constrained decoding: decode tokens/s with a JSON Schema against without, on the
# demo model (stories260K, trained, 512-token vocabulary) and on a synthetic model with Qwen's
# 151,936-token vocabulary (qwen3-30b-a3b shapes, 2 layers, random weights, Q4_K): every token
# of a random model is a draw the grammar refuses, so each step makes the whole mask (the
# unfavourable case); a trained model's first draw is mostly allowed (the favourable one).
# The peer, where IK_LLAMA_CLI names ik_llama.cpp's llama-cli, runs the same files with -j.
# The demo runs on one thread (two are slower for a 260K-parameter model: the pool's handoffs
# cost more than its arithmetic), the synthetic model on two.
# Usage: constrained.sh BUILD_DIR OUT_JSON [RUNS]
set -euo pipefail
build=$1
out=$2
runs=${3:-5}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-/tmp/bench-models}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
demo=$here/../../resources/stories260K.gguf
big=$models/synthetic-qwen3-30b-a3b-2layers-q4k.gguf
[[ -f $big ]] || "$cli" make-synthetic --preset qwen3-30b-a3b --type q4_k --layers 2 -o "$big" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A long answer: an array of at least 48 strings of 4 to 40 characters.
echo '{"type": "array", "items": {"type": "string", "minLength": 4, "maxLength": 40}, "minItems": 48}' >"$work/schema.json"

# Sums "generated: N tokens in T ms" over the runs: tokens/s.
measure() {
  local model=$1 tokens=$2 threads=$3
  shift 3
  local n=0 ms=0
  for seed in $(seq 1 "$runs"); do
    line=$("$cli" generate -m "$model" -p "Once upon a time" -n "$tokens" --temp 1 --seed "$seed" -t "$threads" "$@" 2>&1 >/dev/null |
      grep '^generated:')
    n=$((n + $(sed -E 's/generated: ([0-9]+) tokens.*/\1/' <<<"$line")))
    ms=$(awk -v a="$ms" -v b="$(sed -E 's/.* in ([0-9.]+) ms.*/\1/' <<<"$line")" 'BEGIN{print a+b}')
  done
  awk -v n="$n" -v ms="$ms" 'BEGIN{printf "%.1f", n / (ms / 1000)}'
}

peer() {
  local model=$1 tokens=$2 threads=$3
  shift 3
  [[ -n ${IK_LLAMA_CLI:-} ]] || { echo null; return; }
  local n=0 ms=0
  for seed in $(seq 1 "$runs"); do
    line=$("$IK_LLAMA_CLI" -m "$model" -p "Once upon a time" -n "$tokens" --temp 1 --seed "$seed" -t "$threads" "$@" 2>&1 </dev/null |
      grep 'eval time' | grep -v prompt | tail -1)
    n=$((n + $(sed -E 's/.*\/ +([0-9]+) tokens.*/\1/' <<<"$line")))
    ms=$(awk -v a="$ms" -v b="$(sed -E 's/.*= +([0-9.]+) ms \/.*/\1/' <<<"$line")" 'BEGIN{print a+b}')
  done
  awk -v n="$n" -v ms="$ms" 'BEGIN{printf "%.1f", n / (ms / 1000)}'
}

rows=()
for entry in "demo:$demo:256:1" "qwen-vocab-synthetic:$big:128:2"; do
  IFS=: read -r name model tokens threads <<<"$entry"
  free=$(measure "$model" "$tokens" "$threads")
  schema=$(measure "$model" "$tokens" "$threads" --json-schema "$work/schema.json")
  object=$(measure "$model" "$tokens" "$threads" --json-schema -)
  peerFree=$(peer "$model" "$tokens" "$threads")
  peerSchema=$(peer "$model" "$tokens" "$threads" -j "$(cat "$work/schema.json")")
  echo "$name: free $free tokens/s, schema $schema, json_object $object; ik_llama.cpp free $peerFree, schema $peerSchema" >&2
  rows+=("{\"model\": \"$name\", \"threads\": $threads, \"tokens\": $tokens, \"free\": $free, \"schema\": $schema, \"json_object\": $object, \"ik_free\": $peerFree, \"ik_schema\": $peerSchema}")
done
{
  echo "{\"runs\": $runs, \"date\": \"$(date -u +%F)\", \"rows\": ["
  (IFS=,; echo "${rows[*]}")
  echo "]}"
} >"$out"
