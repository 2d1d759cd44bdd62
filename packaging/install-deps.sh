#!/usr/bin/env bash
# Installs the Debian 12 packages Spillway needs to build, test and run, if any are missing.
# Idempotent: installs nothing when all are present. apt-get as root, through sudo otherwise.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  nlohmann-json3-dev libcli11-dev libpcre2-dev libgtest-dev liburing-dev libcpp-httplib-dev
  libxxhash-dev libzstd-dev libsqlite3-dev libsentencepiece-dev libopenblas-dev
  qt6-base-dev qt6-base-dev-tools
  # the app's translations: Qt's Linguist tools (lupdate, lrelease) and their CMake package
  qt6-l10n-tools qt6-tools-dev
  # the .deb: dpkg-shlibdeps (dpkg-dev) and file compute its Depends; the validators check the
  # desktop entry and AppStream metadata (tests/packaging)
  dpkg-dev file desktop-file-utils appstream
  # the fuzz test (tests/fuzz): Clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # the Vulkan backend: headers and loader, the build-time shader compiler, and Mesa's drivers
  # (lavapipe, a CPU Vulkan device, runs its tests where there is no GPU)
  glslc libvulkan-dev mesa-vulkan-drivers
  # the app in a real X window (tests/ui/test_real_window.sh): a virtual display, keystrokes,
  # and the SQLite shell that reads back what the window stored
  xvfb xdotool sqlite3
)

# The server's client test runs the official OpenAI client on Node (tests/server): Debian's npm
# (and its nodejs) unless a Node with npm is there already.
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
