#!/usr/bin/env bash
# `spillway --screenshot OUT.png --scene welcome|chat|settings|dark|library|tuning|visualizer|remote|experts|discover` renders each scene with real
# content (the demo model answering, compressing, the engine's trace; for `experts` the tiny
# Mixtral of tests/data/models/moe with its experts on the SSD; `tuning-hybrid` is the tuning
# scene with the tiny Qwen3.5 mixture of tests/data/models/families, whose plan must name its
# recurrent state and whose reply must be measured; for `discover` the test tree's
# Hub in miniature, tests/data/hub, served on loopback by spillway-fixture-hub, its content
# paced at 300 kB/s so that a download is seen part-way) without a display: each PNG
# must be written, be a PNG, and be large enough to hold more than an empty window. The scenes
# run as a user's first launch does: the full hardware probe (the first scene measures, the later
# ones read its cache), not the tests' quick one.
# Usage: test_screenshots.sh APP [KEEP_DIR]; the fixture hub is $SPILLWAY_FIXTURE_HUB, else
# tests/spillway-fixture-hub of APP's build folder. With KEEP_DIR (e.g. resources/screenshots, the
# README's pictures) the PNGs are copied there once every scene has passed. A bad --size is a usage
# error too.
set -euo pipefail
app=$1
keep=${2:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
moe=$(cd "$(dirname "$0")/../data/models/moe" && pwd)/tiny-mixtral.gguf
hybrid=$(cd "$(dirname "$0")/../data/models/families" && pwd)/tiny-qwen35moe.gguf
hubdata=$(cd "$(dirname "$0")/../data/hub" && pwd)
fixture_hub=${SPILLWAY_FIXTURE_HUB:-$(dirname "$app")/../tests/spillway-fixture-hub}
[[ -x $fixture_hub ]] || { echo "FAIL: no fixture hub at $fixture_hub (build the target spillway-fixture-hub)"; exit 1; }
# The hub runs while its standard input is open: a FIFO held by this script, closed on exit.
mkfifo "$out/hub.in"
"$fixture_hub" "$hubdata" 0 300000 <"$out/hub.in" >"$out/hub.url" 2>"$out/hub.log" &
hub_pid=$!
exec 3>"$out/hub.in"
trap 'exec 3>&-; wait $hub_pid 2>/dev/null; rm -rf "$out"' EXIT
for _ in $(seq 50); do [[ -s $out/hub.url ]] && break; sleep 0.1; done
[[ -s $out/hub.url ]] || { echo "FAIL: the fixture hub did not start"; cat "$out/hub.log"; exit 1; }
hub_url=$(cat "$out/hub.url")
export XDG_CACHE_HOME=$out/cache  # the machine's profile (the probe's test file goes to the app's temporary data)
unset SPILLWAY_QUICK_PROBE
# Each scene at 1200x800; the chat also as a laptop (1366x768) and a desktop (1600x1000) shows it,
# light and dark (NAME@WxH).
scenes=(welcome chat settings dark library tuning tuning-hybrid visualizer remote experts discover
        chat@1366x768 dark@1366x768 chat@1600x1000 dark@1600x1000)
for shot in "${scenes[@]}"; do
  started=$SECONDS
  scene=${shot%@*}
  size=1200x800
  [[ $shot == *@* ]] && size=${shot#*@}
  name=${shot/@/-}
  model=()
  [[ $scene == experts ]] && model=(--model "$moe")
  [[ $scene == tuning-hybrid ]] && { scene=tuning; model=(--model "$hybrid"); }
  HF_ENDPOINT=$hub_url HF_TOKEN= HF_TOKEN_PATH=$out/no-token \
    "$app" --screenshot "$out/$name.png" --scene "$scene" --size "$size" "${model[@]}" >"$out/$name.log" 2>&1 || {
    echo "FAIL: scene $shot exited with $?"; cat "$out/$name.log"; exit 1; }
  if [[ $name == tuning-hybrid ]]; then
    for want in "recurrent state" "last run"; do
      grep -q "$want" "$out/$name.log" || { echo "FAIL: the hybrid's Tuning view does not say '$want'"; cat "$out/$name.log"; exit 1; }
    done
  fi
  scene=$name
  [[ -s $out/$scene.png ]] || { echo "FAIL: no $scene.png"; exit 1; }
  magic=$(head -c 8 "$out/$scene.png" | od -An -tx1 | tr -d ' \n')
  [[ $magic == 89504e470d0a1a0a ]] || { echo "FAIL: $scene.png is not a PNG ($magic)"; exit 1; }
  want=$size
  read -r w1 w2 w3 w4 h1 h2 h3 h4 < <(od -An -tu1 -j16 -N8 "$out/$scene.png")
  got=$(( (w1 << 24) + (w2 << 16) + (w3 << 8) + w4 ))x$(( (h1 << 24) + (h2 << 16) + (h3 << 8) + h4 ))
  [[ $got == "$want" || $scene == visualizer || $scene == experts ]] || { echo "FAIL: $scene.png is $got, not $want"; exit 1; }
  size=$(stat -c %s "$out/$scene.png")
  (( size > 20000 )) || { echo "FAIL: $scene.png is only $size bytes"; exit 1; }
  echo "ok: $scene.png, $size bytes, $((SECONDS - started)) s"
done
# A scene that does not exist is a usage error.
if "$app" --screenshot "$out/x.png" --scene nonsense >/dev/null 2>&1; then echo "FAIL: bad scene accepted"; exit 1; fi
[[ ! -e $out/x.png ]]
if "$app" --screenshot "$out/x.png" --scene chat --size 12x3 >/dev/null 2>&1; then echo "FAIL: bad size accepted"; exit 1; fi
[[ ! -e $out/x.png ]]
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  for shot in "${scenes[@]}"; do cp "$out/${shot/@/-}.png" "$keep/"; done
  echo "kept the scenes in $keep"
fi
