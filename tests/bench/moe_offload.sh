#!/usr/bin/env bash
# A mixture of experts bigger than its budgets (issue 30): synthetic Qwen3-30B-A3B (48 layers, 128
# experts of FFN 768, 8 used per token; random weights) in Q4_0, 16 GiB, decoded with 2 threads on
# the CPU device with a device budget of 4 GiB and a RAM budget of 12 GiB (the rest on the SSD):
#   1. Spillway with its expert cache (slots on the device, the likeliest misses kept in RAM, the
#      rest read from the SSD as tokens choose them), placed for uniform routing (unless a routing
#      profile is kept for the file);
#   2. the same placed by the routing `sparsity` measures first on the built-in calibration text;
#   3. Spillway streaming each layer's expert stacks whole (--no-expert-cache: dense offloading);
#   4. ik_llama.cpp (llama.cpp's fork that runs qwen3moe) on the same file, its memory limited by
#      a cgroup to the same total (16 GiB: what does not fit it reads again through mmap);
#   5. Spillway with its expert cache under a real model's routing skew: the published statistics
#      of Qwen3-30B-A3B's measured per-expert counts (two workloads, routing_from_published.py)
#      made into a profile that places the experts and from which each token's experts are drawn
#      (--draw-routing: synthetic routing, the outputs are not the model's); the dense path too.
# Every run decodes the same seeded random tokens (llama-bench's way). The page cache is dropped
# before each run (root). Prints each run's figures; the JSON of Spillway's runs goes to
# OUT_DIR/moe-qwen3-30b-a3b-q4_0-{cache-uniform,cache-routed,dense}.json and
# moe-qwen3-30b-a3b-q4_0-{cache,dense}-published-{diverse,narrow}.json, the profiles to
# OUT_DIR/routing-qwen3-30b-a3b-q4_0-synthetic.json and routing-qwen3-30b-a3b-published-*.json.
# Usage: IK_LLAMA_BENCH=/path/to/llama-bench tests/bench/moe_offload.sh [BUILD_DIR] [OUT_DIR]
#   (ik_llama.cpp built from source as tests/bench/PEERS.md says; SPILLWAY_BENCH_MODELS: where
#   the synthetic model is kept, default BUILD_DIR/bench-models; TOKENS: decoded tokens, default 16)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
peer=${IK_LLAMA_BENCH:?set IK_LLAMA_BENCH to an ik_llama.cpp llama-bench built from source}
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
tokens=${TOKENS:-16}
mkdir -p "$out" "$models"
model=$models/qwen3-30b-a3b-q4_0.gguf
[[ -f $model ]] || "$cli" make-synthetic --preset qwen3-30b-a3b --type q4_0 -o "$model" >&2
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
budgets=(--vram-budget 4GiB --ram-budget 12GiB)

routing=$out/routing-qwen3-30b-a3b-q4_0-synthetic.json
echo "== synthetic Qwen3-30B-A3B Q4_0 (random weights), 2 threads, device 4 GiB + RAM 12 GiB"
"$cli" sparsity -m "$model" --threads 2 -n 16 --continue 16 --routing-out "$routing" | tail -2
for run in cache-uniform cache-routed dense; do
  extra=()
  [[ $run == cache-routed ]] && extra=(--routing "$routing")
  [[ $run == dense ]] && extra=(--no-expert-cache)
  cold
  echo "-- Spillway, $run"
  "$cli" bench -m "$model" --threads 2 -n "$tokens" -r 1 --prompt-tokens 0 --no-baseline --random-tokens "${budgets[@]}" "${extra[@]}" \
    --json "$out/moe-qwen3-30b-a3b-q4_0-$run.json" | grep -E "^(note: experts|  tokens/s|  expert cache|  where|  device memory)" || true
done

# The published routing statistics of the real Qwen3-30B-A3B (Q4_K_M, per-expert counts from
# llama-imatrix, 90 % coverage target): mcp-tool-shop-org/gpu-container,
# docs/derisk-concentration.md, "The real result": the hottest expert's share of a layer's
# choices (median over layers), 1 - normalized entropy (mean over layers), the experts that
# cover 90 % (median).
published="Qwen3-30B-A3B-Q4_K_M routing measured with llama-imatrix, github.com/mcp-tool-shop-org/gpu-container docs/derisk-concentration.md"
here=$(dirname "$0")
for workload in "diverse 0.043 0.111 65 ~1k tokens of prose, code and math" "narrow 0.063 0.154 58 ~8k tokens of Python"; do
  read -r name top conc k90 what <<<"$workload"
  skew=$out/routing-qwen3-30b-a3b-published-$name.json
  python3 "$here/routing_from_published.py" --layers 48 --experts 128 --used 8 --top-share "$top" \
    --concentration "$conc" --coverage90 "$k90" --source "$published, $name workload ($what)" -o "$skew"
  for run in cache dense; do
    extra=(--routing "$skew" --draw-routing "$skew")
    [[ $run == dense ]] && extra+=(--no-expert-cache)
    cold
    echo "-- Spillway, $run, experts drawn at the published $name skew (synthetic routing)"
    "$cli" bench -m "$model" --threads 2 -n "$tokens" -r 1 --prompt-tokens 0 --no-baseline --random-tokens "${budgets[@]}" "${extra[@]}" \
      --json "$out/moe-qwen3-30b-a3b-q4_0-$run-published-$name.json" | grep -E "^(note: experts|  tokens/s|  expert cache|  where|  device memory|  routing)" || true
  done
done

group=/sys/fs/cgroup/memory/spillway-peer
mkdir -p "$group"
echo $((16 << 30)) > "$group/memory.limit_in_bytes"
cold
echo "-- ik_llama.cpp, memory limited to 16 GiB (cgroup), tg$tokens"
sh -c "echo \$\$ > $group/cgroup.procs && exec '$peer' -m '$model' -t 2 -p 0 -n $tokens -r 1" 2>&1 | grep -E "^\|" || true
echo "   peak memory of the group: $(( $(cat "$group/memory.max_usage_in_bytes") >> 20 )) MiB"
rmdir "$group"
