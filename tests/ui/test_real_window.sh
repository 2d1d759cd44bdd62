#!/usr/bin/env bash
# The desktop app in a real X window (Xvfb at 1600x1000, not Qt's offscreen platform), driven as
# a user would: `spillway --data-dir D MODEL` opens a model given on its command line; the first
# launch is quit with Ctrl+Q (exit 0); the second types a prompt with xdotool and presses Enter,
# and the reply is read back from the chat database the window wrote; Ctrl+Q quits it cleanly
# (exit 0) and the database passes SQLite's integrity check.
# Usage: test_real_window.sh SPILLWAY MODEL    (exit 77: Xvfb, xdotool or sqlite3 missing)
set -euo pipefail
app=$1
model=$2
for tool in Xvfb xdotool sqlite3; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed (packaging/install-deps.sh)"; exit 77; }
done
tmp=$(mktemp -d)
xvfb=
cleanup() {
  [[ -n $xvfb ]] && kill "$xvfb" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [[ -f $tmp/app.log ]] && cat "$tmp/app.log"; exit 1; }

# A display of our own: Xvfb picks a free number and writes it to fd 3 once it accepts clients;
# -noreset: it does not restart (refusing connections for a moment) each time its last client goes.
fail_display() { echo "FAIL: $*"; cat "$tmp/xvfb.log" 2>/dev/null; exit 1; }
Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp -noreset 3>"$tmp/display" >"$tmp/xvfb.log" 2>&1 &
xvfb=$!
for _ in $(seq 200); do
  [[ -s $tmp/display ]] && break
  kill -0 "$xvfb" 2>/dev/null || fail_display "Xvfb exited at start"
  sleep 0.05
done
[[ -s $tmp/display ]] || fail_display "Xvfb gave no display number within 10 s"
export DISPLAY=:$(head -1 "$tmp/display")
ready=
for _ in $(seq 100); do
  if xdotool getdisplaygeometry >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.1
done
[[ -n $ready ]] || fail_display "Xvfb on $DISPLAY does not answer"
unset QT_QPA_PLATFORM WAYLAND_DISPLAY
export XDG_CACHE_HOME=$tmp/cache XDG_RUNTIME_DIR=$tmp/runtime SPILLWAY_QUICK_PROBE=1
mkdir -m 700 -p "$XDG_RUNTIME_DIR"
cp "$model" "$tmp/story.gguf"

# Starts the app; waits for its window ($window).
start() {
  "$app" --data-dir "$tmp/data" --backend cpu "$tmp/story.gguf" >"$tmp/app.log" 2>&1 &
  pid=$!
  window=
  for _ in $(seq 300); do
    window=$(xdotool search --onlyvisible --name '^Spillway$' 2>/dev/null | head -1 || true)
    [[ -n $window ]] && break
    kill -0 "$pid" 2>/dev/null || fail "spillway exited before showing its window"
    sleep 0.1
  done
  [[ -n $window ]] || fail "no Spillway window within 30 s"
}
# Quits with Ctrl+Q and checks the exit status.
quit() {
  xdotool windowfocus --sync "$window" key --clearmodifiers ctrl+q
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "spillway did not quit on Ctrl+Q"
  wait "$pid" || fail "spillway exited with $?"
}
db=$tmp/data/spillway.db

# First launch: the window comes up on the model from the command line; quit.
start
sleep 1
quit
[[ -f $db ]] || fail "no chat database in the data folder"
sqlite3 "$db" "SELECT count(*) FROM models WHERE path = '$tmp/story.gguf'" | grep -qx 1 ||
  fail "the model from the command line is not in the library"
# Past the first-launch screen (it measures the machine; the offscreen tests cover it).
sqlite3 "$db" "INSERT INTO settings (key, value) VALUES ('ui.welcomeDone', 'true')
               ON CONFLICT (key) DO UPDATE SET value = excluded.value"

# Second launch: type a prompt, press Enter, wait for the stored reply.
start
sleep 1
xdotool windowfocus --sync "$window" key --clearmodifiers ctrl+l
xdotool type --delay 20 "Once upon a time"
xdotool key Return
reply=
for _ in $(seq 600); do
  reply=$(sqlite3 "$db" "SELECT content FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1" 2>/dev/null || true)
  [[ -n $reply ]] && break
  sleep 0.1
done
[[ -n $reply ]] || fail "no reply was stored within 60 s"
prompt=$(sqlite3 "$db" "SELECT content FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1")
[[ $prompt == "Once upon a time" ]] || fail "the stored prompt is '$prompt'"
echo "reply: ${reply:0:120}"
quit
[[ $(sqlite3 "$db" "PRAGMA integrity_check") == ok ]] || fail "integrity check failed"
echo "ok: a real window opened the model, answered and quit cleanly"
