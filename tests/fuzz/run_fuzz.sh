#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp) with Clang in a build folder of their own
# and runs each for a while over its seeds. Exit 0: no finding; 1: a crash, leak, timeout or
# out-of-memory (the reproducer's path and a command to replay it are printed) or a build
# failure; 77: cannot fuzz here (no Clang, or no libFuzzer), with the reason.
#
#   run_fuzz.sh <source-dir> <fuzz-build-dir> [<target>...]
#
# Environment: SPILLWAY_FUZZ_SECONDS (per target, default 15), SPILLWAY_FUZZ_JOBS (build jobs, and
# targets run side by side, default 2), SPILLWAY_FUZZ_CXX / SPILLWAY_FUZZ_CC (default clang++ / clang).
# Each target's corpus grows in <fuzz-build-dir>/work/<target>/corpus across runs; its seeds
# are tests/fuzz/corpus/<target>/ and the files of the source tree that the target's
# "// run_fuzz seeds:" lines name (globs relative to <source-dir>, e.g. tests/data/models/*.gguf).
# "// run_fuzz:" lines give extra libFuzzer flags.
set -uo pipefail

skip() { echo "fuzz_parsers: SKIPPED: $*"; exit 77; }
die() { echo "fuzz_parsers: FAILED: $*"; exit 1; }

[[ $# -ge 2 ]] || die "usage: run_fuzz.sh <source-dir> <fuzz-build-dir> [<target>...]"
src=$(cd "$1" && pwd) || die "no source folder $1"
build=$2
shift 2
seconds=${SPILLWAY_FUZZ_SECONDS:-15}
jobs=${SPILLWAY_FUZZ_JOBS:-2}
cxx=${SPILLWAY_FUZZ_CXX:-clang++}
cc=${SPILLWAY_FUZZ_CC:-clang}
fuzz_dir=$src/tests/fuzz

# ---- can we fuzz here? -------------------------------------------------------------------------
command -v "$cxx" >/dev/null || skip "$cxx not found (Debian: apt-get install clang libclang-rt-14-dev)"
command -v "$cc" >/dev/null || skip "$cc not found (Debian: apt-get install clang)"
command -v cmake >/dev/null || die "cmake not found"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' > "$probe_dir/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
     > "$probe_dir/probe.log" 2>&1; then
  sed 's/^/  /' "$probe_dir/probe.log" | head -5
  skip "$cxx cannot link -fsanitize=fuzzer,address,undefined: libFuzzer or the sanitizer" \
       "runtimes are missing (Debian: apt-get install libclang-rt-14-dev)"
fi

# ---- build -------------------------------------------------------------------------------------
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f $build/CMakeCache.txt ]] && generator=()  # keep what the folder was made with
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
started=$SECONDS
echo "fuzz_parsers: configuring and building the fuzzers in $build ($cxx, -j$jobs)"
if ! cmake -S "$src" -B "$build" "${generator[@]}" "${launcher[@]}" \
     -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Debug \
     -DSPILLWAY_FUZZ=ON -DSPILLWAY_BUILD_TESTS=OFF -DSPILLWAY_CUDA=OFF -DSPILLWAY_VULKAN=OFF \
     > "$probe_dir/configure.log" 2>&1; then
  tail -30 "$probe_dir/configure.log"
  die "configuring $build failed"
fi
if ! cmake --build "$build" --target spillway_fuzzers --parallel "$jobs" > "$probe_dir/build.log" 2>&1; then
  grep -E 'error|Error' "$probe_dir/build.log" | head -30
  tail -20 "$probe_dir/build.log"
  die "building the fuzzers failed"
fi
echo "fuzz_parsers: built in $((SECONDS - started)) s"

# ---- run ---------------------------------------------------------------------------------------
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$fuzz_dir"/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
symbolizer=$(command -v llvm-symbolizer || ls /usr/bin/llvm-symbolizer-* 2>/dev/null | head -1 || true)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:symbolize=1${symbolizer:+:external_symbolizer_path=$symbolizer}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

# One target: its report goes to $build/work/<target>/report.txt; exit 1 on a finding.
run_target() {
  local target=$1
  local exe=$build/fuzz/$target
  local source_file=$fuzz_dir/$target.cpp
  local work=$build/work/$target
  local report=$work/report.txt
  mkdir -p "$work/corpus" "$work/artifacts" "$work/tree-seeds"
  local seeds=()
  [[ -d $fuzz_dir/corpus/$target ]] && seeds+=("$fuzz_dir/corpus/$target")
  # Seeds from the tree's test data, copied so that libFuzzer never writes beside the real models.
  local pattern f
  while read -r pattern; do
    for f in "$src"/$pattern; do
      [[ -f $f ]] && cp -fL "$f" "$work/tree-seeds/$(echo "${f#"$src"/}" | tr / _)"
    done
  done < <(sed -n 's|^// run_fuzz seeds:[[:space:]]*||p' "$source_file" | tr ' ' '\n' | grep -v '^$')
  [[ -n $(ls -A "$work/tree-seeds") ]] && seeds+=("$work/tree-seeds")
  local extra=()
  read -r -a extra <<< "$(sed -n 's|^// run_fuzz:[[:space:]]*||p' "$source_file" | tr '\n' ' ')"
  local dict=()
  [[ -f $fuzz_dir/$target.dict ]] && dict=(-dict="$fuzz_dir/$target.dict")
  local log=$work/last-run.log
  {
    echo "fuzz_parsers: $target for ${seconds} s (${extra[*]}; seeds: ${seeds[*]:-none})"
    rm -f "$work/artifacts"/*
    "$exe" "$work/corpus" "${seeds[@]}" "${dict[@]}" "${extra[@]}" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
      -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/" > "$log" 2>&1
    local status=$?
    grep -E '^(#[0-9]+.*(DONE|pulse)|Done [0-9]+ runs)|stat::number_of_executed_units|stat::peak_rss_mb' "$log" \
      | tail -3 | sed "s/^/  /"
    echo "  corpus: $(ls "$work/corpus" | wc -l) inputs"
    local artifacts
    artifacts=$(ls "$work/artifacts" 2>/dev/null | grep -Ev '^slow-unit-' || true)
    if [[ $status -ne 0 || -n $artifacts ]]; then
      echo "fuzz_parsers: $target FOUND A PROBLEM (exit $status); the end of $log:"
      grep -vE '^#[0-9]+ ' "$log" | tail -60 | sed 's/^/  | /'
      local a path
      for a in $artifacts; do
        path=$work/artifacts/$a
        echo "  reproducer: $path ($(stat -c %s "$path") bytes)"
        echo "  replay:     ASAN_OPTIONS=detect_leaks=1 $exe $path"
        if [[ $(stat -c %s "$path") -le 4096 ]]; then
          echo "  base64:     $(base64 -w0 "$path")"
        fi
      done
      echo FOUND > "$work/verdict"
    else
      echo ok > "$work/verdict"
    fi
  } > "$report" 2>&1
}

# The targets run $jobs at a time (one core each), their reports printed in order.
for target in "${targets[@]}"; do
  [[ -x $build/fuzz/$target ]] || die "$build/fuzz/$target was not built"
  rm -f "$build/work/$target/verdict"
done
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  for target in "${batch[@]}"; do run_target "$target" & done
  wait
  for target in "${batch[@]}"; do
    cat "$build/work/$target/report.txt" 2>/dev/null
    [[ $(cat "$build/work/$target/verdict" 2>/dev/null) == ok ]] || failed+=("$target")
  done
done

if [[ ${#failed[@]} -gt 0 ]]; then
  die "findings in: ${failed[*]}"
fi
echo "fuzz_parsers: passed: ${targets[*]} (${seconds} s each, $((SECONDS - started)) s in all)"
