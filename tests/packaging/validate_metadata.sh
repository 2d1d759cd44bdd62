#!/usr/bin/env bash
# validate_metadata.sh DIR: validates DIR's desktop entry and AppStream metainfo (and that the
# icon is an SVG). Exit 77 (skipped) when a validator is not installed.
set -euo pipefail
dir=$1
desktop=$dir/io.spillway.Spillway.desktop
metainfo=$dir/io.spillway.Spillway.metainfo.xml
icon=$dir/io.spillway.Spillway.svg

missing=()
command -v desktop-file-validate >/dev/null \
  || missing+=("desktop-file-validate (desktop-file-utils)")
command -v appstreamcli >/dev/null || missing+=("appstreamcli (appstream)")
if ((${#missing[@]})); then
  echo "skipped: not installed: ${missing[*]}; packaging/install-deps.sh installs them"
  exit 77
fi

# desktop-file-validate prints errors and hints; it exits non-zero only on errors, so any output
# at all counts as a failure.
out=$(desktop-file-validate "$desktop" 2>&1) || true
if [[ -n "$out" ]]; then
  echo "FAIL: desktop-file-validate $desktop:"; echo "$out"; exit 1
fi
echo "ok: desktop-file-validate $(basename "$desktop")"

# --no-net: no URL checks (tests run offline). --strict: errors, warnings and infos fail;
# pedantic notes (the id has capitals, no release listed yet) do not.
if ! appstreamcli validate --no-net --strict "$metainfo"; then
  echo "FAIL: appstreamcli validate $metainfo"; exit 1
fi
echo "ok: appstreamcli validate $(basename "$metainfo")"

# The desktop entry names the icon and the metainfo names the desktop entry.
grep -qx 'Icon=io.spillway.Spillway' "$desktop" \
  || { echo "FAIL: Icon= is not io.spillway.Spillway"; exit 1; }
grep -q '<launchable type="desktop-id">io.spillway.Spillway.desktop</launchable>' "$metainfo" \
  || { echo "FAIL: metainfo does not launch io.spillway.Spillway.desktop"; exit 1; }
head -c 512 "$icon" | grep -q '<svg' || { echo "FAIL: $icon is not an SVG"; exit 1; }
echo "ok: icon, desktop entry and metainfo name one another"
