#!/usr/bin/env bash
# The README's two commands:
#   packaging/quickstart.sh run    install what is missing, build, start Spillway on the demo model
#   packaging/quickstart.sh test   install what is missing, build, run the whole test suite
# Environment: BUILD_DIR (default build), JOBS (default: cores), CTEST_ARGS (extra ctest flags),
# CUDA_ARCHITECTURES (default: 80-virtual for test, the shipped set for run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
mode=${1:-}
shift || true
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

case "$mode" in
  run|test) ;;
  *) echo "usage: packaging/quickstart.sh run|test [args for the app]" >&2; exit 2 ;;
esac

packaging/install-deps.sh

# Test-only tools from npm: the official OpenAI client for the server's test (tests/server,
# pinned by its package-lock.json). Without the registry that one test reports itself skipped.
if [[ "$mode" == test ]]; then
  npm ci --prefix tests/server --no-audit --no-fund --loglevel=error ||
    echo "quickstart: could not install the openai npm package; test_openai_client will be skipped" >&2
fi

# ccache shared between clean clones of the same tree.
export CCACHE_BASEDIR="$here" CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content

tests=OFF
extra=()
if [[ "$mode" == test ]]; then
  tests=ON
  # The tests check the CUDA kernels' results, not their speed: one PTX build for compute_80 (run
  # on Ampere, Hopper and newer, compiled for the card when loaded) instead of the shipped build's
  # sm_80 and sm_90 machine code plus PTX, a third of the CUDA compile time.
  # CUDA_ARCHITECTURES=... overrides it.
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-80-virtual}")
elif [[ -n ${CUDA_ARCHITECTURES:-} ]]; then
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES")
else
  extra+=(-UCMAKE_CUDA_ARCHITECTURES)  # the shipped default (packaging/cmake/Backends.cmake)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_BUILD_TESTS=$tests "${extra[@]}"
cmake --build "$build" -j "$jobs"

if [[ "$mode" == test ]]; then
  cd "$build"
  # shellcheck disable=SC2086
  exec ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
fi

# The desktop app where there is a display; the terminal app (same engine) where there is none,
# or when arguments for spillway-cli are given.
if (($# == 0)) && [[ -x "$build/bin/spillway" ]] && [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  exec "$build/bin/spillway"
fi
if (($# == 0)); then
  [[ -x "$build/bin/spillway" ]] && echo "quickstart: no display found; running the terminal app instead" >&2
  set -- generate --prompt "Once upon a time" --tokens 200
fi
exec "$build/bin/spillway-cli" "$@"
