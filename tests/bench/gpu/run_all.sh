#!/bin/bash
# GPU checks and benchmarks in one run, on a machine with an NVIDIA GPU (issue 8):
#   CUDA conformance; reference text through the CUDA backend with every tier; bench-cuda (copy
#   and GEMV bandwidth); offloaded decode of a synthetic TinyLlama-1.1B (CPU and CUDA backends);
#   a synthetic Llama-2-13B fp16 with an 8 GiB GPU budget, Spillway against Hugging Face
#   Accelerate's offloading (random weights in both; needs python3 with torch, transformers,
#   accelerate); then the Vulkan backend on the same GPU where a Vulkan driver for it exists:
#   conformance, reference text, and decode tokens/s against CUDA's on the same model; and the
#   neuron cache against dense offloading on an OPT-6.7B shape with an 8 GiB budget (issue 9).
# Usage: tests/bench/gpu/run_all.sh BIN_DIR [OUT_DIR]
#   Parts, in order: conformance, e2e (test_cuda_generate: reference texts through every tier,
#   placements, batches, the neuron cache, the timeline marks), reference, bench-cuda, resident
#   (TinyLlama-1.1B shape F16, Q8_0 and Q4_K on the GPU: a 515-token prompt's time to first token
#   and decode tokens/s, beside llama.cpp's llama-bench on the same files when LLAMA_BENCH names
#   one built with CUDA, e.g. carried beside the staged binaries; SPILLWAY_BENCH_TYPES="q4_k"
#   narrows the types), offload, 7b (Llama-2-7B shape Q4_K and Q8_0: resident, and with a device
#   budget of half the file against llama.cpp's -ngl 16), bitmap, accelerate, 13b,
#   neuron-package (the issue-9 model and package: ~60 s + ~6 min on a 16-core host), neuron (its
#   benchmarks), moe (issue 30: synthetic Qwen3-30B-A3B and Mixtral-8x7B Q4_0 at an 8 GiB budget
#   beside ik_llama.cpp's --n-cpu-moe; IK_LLAMA_BENCH names its llama-bench built with CUDA),
#   vulkan (now with the GGUF types and batched prompts). SPILLWAY_BENCH_SKIP="accelerate 13b" leaves out the named parts;
#   SPILLWAY_BENCH_ONLY="neuron-package" runs only those named. A lease's 10-minute calls fit
#   e.g. ONLY="conformance reference bench-cuda neuron-package", then ONLY="neuron offload vulkan"
#   (models are kept in SPILLWAY_BENCH_MODELS while the machine stays warm).
#   BIN_DIR holds spillway-cli, libspillway_cuda.so, libspillway_vulkan.so, test_cuda_conformance,
#   test_cuda_generate,
#   test_vulkan_conformance, bench-cuda, stories260K.greedy48.tsv and the libraries they link that
#   the machine lacks: tests/bench/gpu/stage.sh packs them from a build into one archive.
set -o pipefail
D=$(cd "${1:?usage: run_all.sh BIN_DIR [OUT_DIR]}" && pwd)
OUT=${2:-${OUT:-$PWD/gpu-bench-out}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
lib=$(ldconfig -p | grep -o '/[^ ]*libcublas.so.13$' | head -1)
[ -z "$lib" ] && lib=$(find /usr/local /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$D:$(dirname "$lib"):$LD_LIBRARY_PATH
export SPILLWAY_CUDA_MODULE=$D/libspillway_cuda.so
export SPILLWAY_VULKAN_MODULE=$D/libspillway_vulkan.so
B=$D/spillway-cli
M=${SPILLWAY_BENCH_MODELS:-/var/tmp/spillway-models}
mkdir -p "$M"
dropCaches() { sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches; }
# skip NAME: true (and says so) when the part is left out.
skip() {
  case " ${SPILLWAY_BENCH_SKIP:-} " in *" $1 "*) echo "($1: skipped)"; return 0;; esac
  if [ -n "${SPILLWAY_BENCH_ONLY:-}" ]; then
    case " $SPILLWAY_BENCH_ONLY " in *" $1 "*) return 1;; esac
    return 0
  fi
  return 1
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
if ! skip conformance; then
  "$D/test_cuda_conformance" > "$OUT/cuda-conformance.txt" 2>&1; tail -2 "$OUT/cuda-conformance.txt"; grep -E "FAILED|rel L2" "$OUT/cuda-conformance.txt" | tail -12
fi
if ! skip e2e; then
  SPILLWAY_TEST_DATA_DIR=$(cd "$here/../../data" && pwd) SPILLWAY_BIN_DIR=$D "$D/test_cuda_generate" \
    > "$OUT/cuda-generate.txt" 2>&1
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|INFO" "$OUT/cuda-generate.txt" | tail -40
fi
if ! skip reference; then
  while IFS=$'\t' read -r prompt expected; do
    for tier in default device ram ssd; do
      args=(); [ "$tier" != default ] && args=(--tier "$tier")
      got=$("$B" generate --backend cuda -p "$prompt" -n 48 --temp 0 "${args[@]}" 2>/dev/null)
      [ "$got" == "$expected" ] && echo "cuda $tier '$prompt': MATCH" || echo "cuda $tier '$prompt': DIFFERS"
    done
  done < "$D/stories260K.greedy48.tsv"
fi
skip bench-cuda || "$D/bench-cuda" --json "$OUT/bench-cuda.json" | tail -60

tinyllama() {
  local type=${1:-f16}
  [ -f "$M/tinyllama-$type.gguf" ] || "$B" make-synthetic --preset tinyllama-1.1b --type "$type" -o "$M/tinyllama-$type.gguf"
}
# Resident on the GPU (synthetic TinyLlama-1.1B shape, random weights): spillway-cli generate with
# a 515-token prompt (time to first token, decode tokens/s), bench's decode against the bandwidth
# bound, and llama.cpp's llama-bench -p 512 -n 128 on the same file, alternating per type.
if ! skip resident; then
  prompt=$(for i in $(seq 1 19); do printf 'The little robot walked to the market and bought seven red apples. '; done)
  for type in ${SPILLWAY_BENCH_TYPES:-f16 q8_0 q4_k}; do
    tinyllama $type
    "$B" generate --backend cuda -m "$M/tinyllama-$type.gguf" -p "$prompt" -n 128 --temp 0 2>&1 >/dev/null | \
      grep -E "prompt:|generated:" | sed "s/^/spillway $type: /"
    "$B" bench -m "$M/tinyllama-$type.gguf" --backend cuda -n 64 --vram-budget 64GiB --ram-budget 8GiB \
      --json "$OUT/resident-tinyllama-$type-cuda.json" | grep -E "tokens/s|bound" | sed "s/^/spillway $type: /"
    [ -n "${LLAMA_BENCH:-}" ] && "$LLAMA_BENCH" -m "$M/tinyllama-$type.gguf" -ngl 99 -p 512 -n 128 -r 3 2>/dev/null | \
      grep -E "^\|" | sed "s/^/llama.cpp $type: /"
  done
fi
if ! skip offload; then
  tinyllama
  dropCaches
  "$B" bench -m "$M/tinyllama-f16.gguf" -t 2 -n 8 --vram-budget 1GiB --ram-budget 256MiB \
    --json "$OUT/offload-tinyllama-cpu.json" | grep -E "tokens/s|SSD throughput|naive"
  dropCaches
  "$B" bench -m "$M/tinyllama-f16.gguf" --backend cuda -n 16 --vram-budget 1GiB --ram-budget 512MiB \
    --json "$OUT/offload-tinyllama-cuda.json" | grep -E "tokens/s|SSD throughput|naive"
fi

# Llama-2-7B shape (synthetic, random weights) in Q4_K and Q8_0: resident (515-token prompt and
# decode; llama-bench -p 512 -n 128 -ngl 99 beside it), then with a device budget of half the
# file (Spillway's plan) against llama.cpp with 16 of its 32 layers on the GPU (about half of
# the weights; its KV cache and compute buffers come on top, in its favour).
if ! skip 7b; then
  prompt=$(for i in $(seq 1 19); do printf 'The little robot walked to the market and bought seven red apples. '; done)
  for type in q4_k q8_0; do
    f=$M/llama2-7b-$type.gguf
    [ -f "$f" ] || "$B" make-synthetic --preset llama2-7b --type $type -o "$f"
    "$B" generate --backend cuda -m "$f" -p "$prompt" -n 128 --temp 0 2>&1 >/dev/null | \
      grep -E "prompt:|generated:" | sed "s/^/spillway 7b $type resident: /"
    [ -n "${LLAMA_BENCH:-}" ] && "$LLAMA_BENCH" -m "$f" -ngl 99 -p 512 -n 128 -r 2 2>/dev/null | \
      grep -E "^\|" | sed "s/^/llama.cpp 7b $type resident: /"
    half=$(( $(stat -c %s "$f") / 2 / 1048576 ))MiB
    "$B" bench -m "$f" --backend cuda -n 32 --vram-budget $half --ram-budget 32GiB \
      --json "$OUT/half-7b-$type-cuda.json" | grep -E "tokens/s|where the time" | sed "s/^/spillway 7b $type $half: /"
    [ -n "${LLAMA_BENCH:-}" ] && "$LLAMA_BENCH" -m "$f" -ngl 16 -p 512 -n 32 -r 2 2>/dev/null | \
      grep -E "^\|" | sed "s/^/llama.cpp 7b $type -ngl 16: /"
  done
fi

# ENDOR end to end: the same model pruned to 50% (magnitude) as a bitmap sparse fp16 package,
# streamed at the same budgets: fewer bytes cross the SSD and PCIe, the GPU decodes the bitmap.
if ! skip bitmap; then
  tinyllama
  [ -d "$M/tinyllama-bitmap" ] || "$B" compress -m "$M/tinyllama-f16.gguf" -o "$M/tinyllama-bitmap" --backend cuda \
    --prune magnitude:0.5 --quant none --no-quality | grep -E "size|bitmap sparse"
  dropCaches
  "$B" bench -m "$M/tinyllama-bitmap" --backend cuda -n 16 --vram-budget 1GiB --ram-budget 512MiB \
    --json "$OUT/offload-tinyllama-bitmap-cuda.json" | grep -E "tokens/s|SSD throughput|naive"
fi
skip accelerate || PYTHONUNBUFFERED=1 python3 "$here/accelerate_13b.py" 8 2>&1 | grep -viE "warn" | tail -3
if ! skip 13b; then
  [ -f "$M/llama2-13b-f16.gguf" ] || "$B" make-synthetic --preset llama2-13b --type f16 -o "$M/llama2-13b-f16.gguf"
  dropCaches
  "$B" bench -m "$M/llama2-13b-f16.gguf" --backend cuda -n 8 --vram-budget 8GiB --ram-budget 48GiB \
    --json "$OUT/offload-13b-cuda.json" | grep -E "tokens/s|naive|where the time"
fi

# Issue 9 on the GPU: an OPT-6.7B-shaped ReLU model (32 layers, fp16, random weights, 3% of each
# FFN active per token as on the real model) with an 8 GiB device budget: dense offloading against
# the neuron cache (bundles and rank-64 attention-input predictors; predicted mode), bundles from
# RAM and from the SSD, cold neurons shipped, on the CPU, or as the cost model picks. `bench` runs both paths at the same budgets and prints the ratios.
neuronPackage() {
  [ -f "$M/opt-6.7b-f16-d3.gguf" ] || "$B" make-synthetic --preset opt-6.7b --type f16 --align 4096 \
    --ffn-density 0.03 -o "$M/opt-6.7b-f16-d3.gguf"
  [ -d "$M/opt-6.7b-d3-attention" ] || "$B" compress -m "$M/opt-6.7b-f16-d3.gguf" --prune none --quant none \
    --bundles --predictors 64 --predictor-input attention --no-quality -o "$M/opt-6.7b-d3-attention" | tail -4
}
skip neuron-package || neuronPackage
if ! skip neuron; then
  neuronPackage
  # Cold neurons: the cost model's choice per layer (auto), always shipped, always on the CPU.
  for from in ram ssd; do
    for cold in auto ship cpu; do
      dropCaches
      echo "bundles from $from, cold neurons $cold:"
      "$B" bench -m "$M/opt-6.7b-d3-attention" --backend cuda -n 16 --vram-budget 8GiB --ram-budget 48GiB \
        --neuron-cache 2048 --neuron-mode predicted --bundles-from $from --cold-neurons $cold \
        --json "$OUT/neuron-cache-opt-6.7b-d3-cuda-$from-$cold.json" | grep -E "tokens/s|neuron|bytes moved|attention ran|hot and cold"
    done
  done
fi

# Issue 30 on the GPU: mixtures of experts bigger than an 8 GiB device budget (synthetic
# Qwen3-30B-A3B and Mixtral-8x7B in Q4_0, real shapes, random weights). Spillway plans the
# budget (experts through the expert cache, the likeliest misses in RAM; the routing `sparsity`
# measures first) against ik_llama.cpp (IK_LLAMA_BENCH, built with CUDA) with -ngl 99 and
# --n-cpu-moe N at the smallest N whose other layers' experts fit the same 8 GiB beside the
# model's non-expert weights (1.5 GiB kept for its KV cache and buffers, in its favour): decode
# tokens/s and a 512-token prompt (time to first token) on each side.
moeFor() {  # FILE: the --n-cpu-moe that fits 8 GiB
  "$B" info -m "$1" | awk '/^(blk\.|token_embd|output)/ { if ($1 ~ /_exps/) e += $NF; else o += $NF;
      if ($1 ~ /^blk\./) { split($1, a, "."); if (a[2] + 1 > L) L = a[2] + 1 } }
    END { fit = int((8 * 2^30 - o - 1.5 * 2^30) / (e / L)); if (fit < 0) fit = 0; if (fit > L) fit = L; print L - fit }'
}
if ! skip moe; then
  prompt=$(for i in $(seq 1 19); do printf 'The little robot walked to the market and bought seven red apples. '; done)
  for preset in qwen3-30b-a3b mixtral-8x7b; do
    f=$M/$preset-q4_0.gguf
    [ -f "$f" ] || "$B" make-synthetic --preset $preset --type q4_0 -o "$f" | tail -1
    routing=$OUT/routing-$preset-q4_0.json
    [ -f "$routing" ] || "$B" sparsity -m "$f" -n 16 --continue 0 --routing-out "$routing" | tail -1
    n=$(moeFor "$f")
    dropCaches
    "$B" bench -m "$f" --backend cuda -n 32 --vram-budget 8GiB --ram-budget 48GiB --routing "$routing" --no-baseline \
      --json "$OUT/moe-$preset-q4_0-cuda.json" | grep -E "^note: experts|tokens/s|expert cache|where the time" | \
      sed "s/^/spillway $preset 8GiB: /"
    "$B" generate --backend cuda -m "$f" -p "$prompt" -n 32 --temp 0 --vram-budget 8GiB --ram-budget 48GiB \
      --routing "$routing" 2>&1 >/dev/null | grep -E "prompt:|generated:|expert cache" | sed "s/^/spillway $preset 8GiB: /"
    dropCaches
    [ -n "${IK_LLAMA_BENCH:-}" ] && "$IK_LLAMA_BENCH" -m "$f" -ngl 99 --n-cpu-moe "$n" -p 512 -n 128 -r 2 2>/dev/null | \
      grep -E "^\|" | sed "s/^/ik_llama.cpp $preset --n-cpu-moe $n: /"
  done
fi

# Vulkan on the same GPU (a discrete device is preferred; lavapipe alone is not worth timing).
skip vulkan && exit 0
vk=$("$B" probe --quick --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(next((x["name"] for x in d.get("devices",[]) if x.get("backend")=="vulkan"), ""))' 2>/dev/null)
echo "vulkan device: ${vk:-none}"
if [ -n "$vk" ] && ! echo "$vk" | grep -qi llvmpipe; then
  tinyllama
  [ -x "$D/test_vulkan_conformance" ] && "$D/test_vulkan_conformance" > "$OUT/vulkan-conformance.txt" 2>&1; tail -2 "$OUT/vulkan-conformance.txt"; grep -E "FAILED" "$OUT/vulkan-conformance.txt" | tail -5
  while IFS=$'\t' read -r prompt expected; do
    got=$("$B" generate --backend vulkan -p "$prompt" -n 48 --temp 0 2>/dev/null)
    [ "$got" == "$expected" ] && echo "vulkan '$prompt': MATCH" || echo "vulkan '$prompt': DIFFERS"
  done < "$D/stories260K.greedy48.tsv"
  # Decode, and a 515-token prompt (Vulkan: tiled matrix products, one dispatch of attention per
  # layer; never timed on a GPU before), F16 and the K-quant file, CUDA beside Vulkan.
  prompt=$(for i in $(seq 1 19); do printf 'The little robot walked to the market and bought seven red apples. '; done)
  for type in f16 q4_k; do
    tinyllama $type
    for backend in cuda vulkan; do
      "$B" bench -m "$M/tinyllama-$type.gguf" --backend "$backend" -n 32 --vram-budget 8GiB --ram-budget 8GiB \
        --json "$OUT/decode-tinyllama-$type-$backend.json" | grep -E "tokens/s" | sed "s/^/$backend $type: /"
      "$B" generate --backend "$backend" -m "$M/tinyllama-$type.gguf" -p "$prompt" -n 32 --temp 0 2>&1 >/dev/null | \
        grep -E "prompt:|generated:" | sed "s/^/$backend $type: /"
    done
  done
fi
