#!/bin/bash
# Packs what run_all.sh needs on a lent GPU machine (a bare image with the NVIDIA driver and
# CUDA, without Spillway's Debian libraries) into one archive, small enough to travel with the
# working tree: spillway-cli, the CUDA and Vulkan modules, the conformance tests, bench-cuda, the
# reference text, and every shared library they link beyond glibc, libstdc++ and the driver's
# (OpenBLAS, SentencePiece, liburing, xxHash, PCRE2, ...).
# Usage: tests/bench/gpu/stage.sh BUILD_DIR DEST_DIR   (DEST_DIR ignored by git, e.g. .devcarry)
# On the device: tar -xzf DEST_DIR/spillway-bin.tar.gz -C /tmp && tests/bench/gpu/run_all.sh /tmp/spillway-bin $OUT
# (run_all.sh puts its BIN_DIR first on LD_LIBRARY_PATH, so the carried libraries are found).
set -euo pipefail
build=$(cd "${1:?usage: stage.sh BUILD_DIR DEST_DIR}" && pwd)
dest=${2:?usage: stage.sh BUILD_DIR DEST_DIR}
data=$(cd "$(dirname "$0")/../../data" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bin=$stage/spillway-bin
mkdir -p "$bin" "$dest"
files=("$build/bin/spillway-cli")
for f in lib/libspillway_cuda.so lib/libspillway_vulkan.so tests/test_cuda_conformance tests/test_cuda_generate \
         tests/test_vulkan_conformance tests/bench-cuda; do
  [ -e "$build/$f" ] && files+=("$build/$f") || echo "stage: $f not built, left out" >&2
done
cp "${files[@]}" "$bin/"
cp "$data/reference/stories260K.greedy48.tsv" "$bin/"
# The libraries: what ldd resolves, less the C and C++ runtimes every image has and the NVIDIA
# libraries the device brings (cuBLAS and the driver are loaded from there).
ldd "${files[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | \
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas[^/]*|libcudart)\.so' | \
  while read -r lib; do cp -L "$lib" "$bin/"; done
tar -czf "$dest/spillway-bin.tar.gz" -C "$stage" spillway-bin
echo "stage: $(ls "$bin" | wc -l) files, $(du -h "$dest/spillway-bin.tar.gz" | cut -f1) in $dest/spillway-bin.tar.gz"
