#!/usr/bin/env bash
# The README's two commands:
#   packaging/quickstart.sh run    install what is missing, build, start Spillway on the demo model
#   packaging/quickstart.sh test   install what is missing, build, run the whole test suite
# Environment: BUILD_DIR (default build), JOBS (default: cores), CTEST_ARGS (extra ctest flags).
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

# ccache shared between clean clones of the same tree.
export CCACHE_BASEDIR="$here" CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content

tests=OFF
[[ "$mode" == test ]] && tests=ON
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_BUILD_TESTS=$tests
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
