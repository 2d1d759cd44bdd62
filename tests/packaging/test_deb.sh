#!/usr/bin/env bash
# test_deb.sh CPACK CPACK_CONFIG NAME VERSION HAVE_UI HAVE_CUDA
# Builds the .deb from this build tree's CPackConfig.cmake into a temporary folder, then checks
# with dpkg-deb: its name, version and fields (--info), the files it installs (--contents), and
# that the installed spillway-cli runs. The folder is removed at the end.
set -euo pipefail
cpack=$1 config=$2 name=$3 version=$4 have_ui=$5 have_cuda=$6

is_on() { [[ "${1^^}" =~ ^(ON|TRUE|YES|Y|1)$ ]]; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spillway-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- build -----------------------------------------------------------------------------------
start=$SECONDS
if ! "$cpack" -G DEB --config "$config" -B "$tmp/out" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log"
  echo "FAIL: cpack -G DEB"
  exit 1
fi
arch=$(dpkg --print-architecture)
deb=$tmp/out/${name}_${version}_${arch}.deb
if [[ ! -f "$deb" ]]; then
  cat "$tmp/cpack.log"
  echo "FAIL: no $(basename "$deb") in the cpack output folder:"; ls "$tmp/out"
  exit 1
fi
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes) in $((SECONDS - start)) s"

# ---- control fields --------------------------------------------------------------------------
info=$(dpkg-deb --info "$deb")
echo "--- dpkg-deb --info"; echo "$info"
field() { dpkg-deb --field "$deb" "$1"; }
[[ "$(field Package)" == "$name" ]] || fail "Package is '$(field Package)', not '$name'"
[[ "$(field Version)" == "$version" ]] || fail "Version is '$(field Version)', not '$version'"
[[ "$(field Architecture)" == "$arch" ]] || fail "Architecture is '$(field Architecture)'"
[[ -n "$(field Maintainer)" ]] || fail "no Maintainer"
[[ -n "$(field Section)" ]] || fail "no Section"
[[ -n "$(field Description)" ]] || fail "no Description"
depends=$(field Depends)
[[ "$depends" == *libc6* ]] || fail "Depends does not name libc6: '$depends'"
if is_on "$have_ui"; then
  [[ "$depends" == *libqt6widgets6* ]] || fail "Depends does not name libqt6widgets6: '$depends'"
fi

# ---- contents --------------------------------------------------------------------------------
listing=$(dpkg-deb --contents "$deb")
echo "--- dpkg-deb --contents"; echo "$listing"
paths=$(awk '{print $NF}' <<<"$listing")
has() { grep -qxF "$1" <<<"$paths"; }

expected=(./usr/bin/spillway-cli ./usr/share/spillway/models/stories260K.gguf)
desktop_files=(./usr/share/applications/io.spillway.Spillway.desktop
               ./usr/share/icons/hicolor/scalable/apps/io.spillway.Spillway.svg
               ./usr/share/metainfo/io.spillway.Spillway.metainfo.xml)
if is_on "$have_ui"; then
  expected+=(./usr/bin/spillway "${desktop_files[@]}")
else
  # Without the desktop app there is nothing for a desktop entry to start.
  for p in ./usr/bin/spillway "${desktop_files[@]}"; do
    has "$p" && fail "$p is in the package, but the desktop app was not built"
  done
fi
is_on "$have_cuda" && expected+=(./usr/lib/spillway/libspillway_cuda.so)
for p in "${expected[@]}"; do
  has "$p" || fail "$p is not in the package"
done

# Every entry belongs to root; the programs are executable by everyone.
awk '$2 != "root/root" {print "FAIL: owner " $2 ": " $NF; bad = 1} END {exit bad}' \
  <<<"$listing" || failures=$((failures + 1))
for p in ./usr/bin/spillway-cli ./usr/bin/spillway; do
  has "$p" || continue
  mode=$(awk -v p="$p" '$NF == p {print $1}' <<<"$listing")
  [[ "$mode" == -rwxr-xr-x ]] || fail "$p has mode $mode, not -rwxr-xr-x"
done

# ---- the installed program runs --------------------------------------------------------------
dpkg-deb -x "$deb" "$tmp/root"
out=$("$tmp/root/usr/bin/spillway-cli" --version 2>&1) || fail "spillway-cli --version: $out"
[[ "$out" == "spillway-cli $version" ]] || fail "spillway-cli --version printed '$out'"

echo "---"
if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "ok: $(basename "$deb") has the expected fields and files (ui: $have_ui, cuda: $have_cuda)"
