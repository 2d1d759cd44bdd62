#!/usr/bin/env bash
# End-to-end decode with every layer on the SSD tier, dense vs ENDOR bitmap sparse (issue 4):
# a synthetic TinyLlama-1.1B-shaped F16 model (real shapes, RANDOM weights) and its package with
# every layer matrix magnitude-pruned to 50% and stored bitmap-f16, both decoded with
# `bench --tier ssd` (same placement: each token reads every layer from the SSD with O_DIRECT).
# The quality check is skipped: a random-weight model's KL says nothing (see test_quality and
# the package manifests of real models for that). Prints both figures and the speed-up (goal
# >= 1.6x, ENDOR's SSD-mapped layers reached 1.64x); writes OUT_DIR/compress-e2e.json.
# Usage: tests/bench/compress_e2e.sh [BUILD_DIR] [OUT_DIR] [THREADS]
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
threads=${3:-2}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
dense=$models/tinyllama-1.1b-f16.gguf
sparse=$models/tinyllama-1.1b-f16-bitmap50
[[ -f $dense ]] || "$cli" make-synthetic --preset tinyllama-1.1b --type f16 -o "$dense"
[[ -d $sparse ]] || "$cli" compress -m "$dense" -o "$sparse" --prune magnitude:0.5 --quant none --no-quality -t "$threads"
"$cli" bench -m "$dense" -t "$threads" -n 16 -r 3 --tier ssd --json "$out/e2e-dense.json"
"$cli" bench -m "$sparse" -t "$threads" -n 16 -r 3 --tier ssd --json "$out/e2e-bitmap.json"
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
d = json.load(open(os.path.join(out, "e2e-dense.json")))
s = json.load(open(os.path.join(out, "e2e-bitmap.json")))
td, ts = d["measured"]["tokens_per_s"], s["measured"]["tokens_per_s"]
bd, bs = d["measured"]["ssd_bytes_per_token"], s["measured"]["ssd_bytes_per_token"]
ratio, bytes_ratio = ts / td, bd / bs
print(f"\nevery layer on the SSD tier ({d['device']}), synthetic TinyLlama-1.1B shape, random weights")
print(f"{'':22}{'tokens/s':>10}{'SSD MiB/token':>15}{'bottleneck':>34}")
print(f"{'dense f16':22}{td:10.3f}{bd / 2**20:15.1f}{d['measured']['bottleneck']:>34}")
print(f"{'bitmap-f16, 50%':22}{ts:10.3f}{bs / 2**20:15.1f}{s['measured']['bottleneck']:>34}")
print(f"speed-up {ratio:.2f}x (goal 1.6x); ceiling when the SSD alone bounds both: bytes ratio {bytes_ratio:.2f}x "
      f"-> {ratio / bytes_ratio:.0%} of it")
json.dump({"dense": d, "bitmap": s, "speedup": ratio, "goal": 1.6, "bytes_ratio_ceiling": bytes_ratio,
           "model": "synthetic tinyllama-1.1b shape, random weights, F16; bitmap: magnitude 50%, f16 values"},
          open(os.path.join(out, "compress-e2e.json"), "w"), indent=2)
PY
