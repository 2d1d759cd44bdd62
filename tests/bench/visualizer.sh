#!/usr/bin/env bash
# Visualizer frame-rate benchmark (issue 6): a synthetic TinyLlama-1.1B-shaped Q8_0 model (random
# weights, made once under BUILD_DIR/bench-models) decodes on the inference thread with 11 of its
# 22 layers read from the SSD every token, while a live 1200x400 BottleneckView (last 8 tokens)
# repaints every 16 ms on the GUI thread. Prints frames/s against the 30 frames/s target, paint
# and drain times, event-loop latency, and decode tokens/s with the view live and hidden.
# Offscreen (software raster), so it runs without a display.
# Usage: tests/bench/visualizer.sh [BUILD_DIR] [OUT_DIR] [extra bench-visualizer options...]
#        (writes OUT_DIR/visualizer-tinyllama-q8_0.json)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$out"
QT_QPA_PLATFORM=offscreen "$build/bin/bench-visualizer" --preset tinyllama-1.1b --type q8_0 \
  --ssd-layers 11 --tokens 64 --repeats 3 --json "$out/visualizer-tinyllama-q8_0.json" "$@"
