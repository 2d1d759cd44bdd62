#!/usr/bin/env bash
# The desktop app in a real X window (Xvfb at 1600x1000, not Qt's offscreen platform), driven as
# a user would: `spillway --data-dir D MODEL` opens a model given on its command line; the first
# launch is quit with Ctrl+Q (exit 0); the second types a prompt with xdotool and presses Enter,
# and the reply is read back from the chat database the window wrote; Ctrl+Q quits it cleanly
# (exit 0) and the database passes SQLite's integrity check. With SPILLWAY-CLI and a thinking
# template (Qwen3.5's) a third launch opens the model rewritten with that template (spillway-cli
# convert --chat-template-file) with a thinking budget set last session: the reply is stored with
# its reasoning, its time and an answer apart; SHOT_DIR, where set, gets a screenshot of the
# window (xwd, where installed).
# Usage: test_real_window.sh SPILLWAY MODEL [SPILLWAY-CLI TEMPLATE]
#        (exit 77: Xvfb, xdotool or sqlite3 missing)
set -euo pipefail
app=$1
model=$2
cli=${3:-}
thinking_template=${4:-}
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

# Starts the app on $1 (the story model); waits for its window ($window).
start() {
  "$app" --data-dir "$tmp/data" --backend cpu "${1:-$tmp/story.gguf}" >"$tmp/app.log" 2>&1 &
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

[[ -n $cli && -n $thinking_template ]] || exit 0
# Third launch: a thinking model. The settings set last (a thinking budget of 12 tokens, greedy)
# start the new chat; the story model never closes its thinking itself, so the budget does.
"$cli" convert -m "$tmp/story.gguf" -o "$tmp/thinking.gguf" --to gguf --chat-template-file "$thinking_template" \
  >"$tmp/convert.log" 2>&1 || { cat "$tmp/convert.log"; fail "spillway-cli convert --chat-template-file failed"; }
sqlite3 "$db" "INSERT INTO settings (key, value) VALUES ('ui.newChat.generation',
               '{\"temperature\": 0, \"maxTokens\": 40, \"reasoningBudget\": 12}')
               ON CONFLICT (key) DO UPDATE SET value = excluded.value"
before=$(sqlite3 "$db" "SELECT count(*) FROM messages WHERE role = 'assistant'")
start "$tmp/thinking.gguf"
sleep 1
xdotool windowfocus --sync "$window" key --clearmodifiers ctrl+n
xdotool windowfocus --sync "$window" key --clearmodifiers ctrl+l
xdotool type --delay 20 "Tell me a story"
xdotool key Return
row=
for _ in $(seq 600); do
  if [[ $(sqlite3 "$db" "SELECT count(*) FROM messages WHERE role = 'assistant'" 2>/dev/null || echo 0) -gt $before ]]; then
    row=$(sqlite3 -separator '|' "$db" "SELECT length(trim(reasoning)) > 0, length(trim(content)) > 0, reasoning_ms > 0
                                       FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")
    break
  fi
  sleep 0.1
done
[[ -n $row ]] || fail "no reply of the thinking model was stored within 60 s"
[[ $row == "1|1|1" ]] || fail "the thinking model's reply is not reasoning, answer and time apart (reasoning|answer|time: $row)"
echo "thinking reply: $(sqlite3 "$db" "SELECT printf('%.0f ms: ', reasoning_ms) || substr(reasoning, 1, 60) || ' | ' ||
                                        substr(content, 1, 60) FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")"
if [[ -n ${SHOT_DIR:-} ]] && command -v xwd >/dev/null; then
  # The reply as it folded, then with its reasoning opened and the chat's settings shown (the
  # fold and the Settings button where a 1200x800 window has them).
  sleep 0.5
  xwd -id "$window" -out "$SHOT_DIR/thinking.xwd" && echo "screenshot: $SHOT_DIR/thinking.xwd"
  xdotool mousemove --window "$window" 420 110 click 1 mousemove --window "$window" 1150 39 click 1
  sleep 0.5
  xwd -id "$window" -out "$SHOT_DIR/thinking-open.xwd" && echo "screenshot: $SHOT_DIR/thinking-open.xwd"
fi
quit
[[ $(sqlite3 "$db" "PRAGMA integrity_check") == ok ]] || fail "integrity check failed"
echo "ok: a thinking model's reply came with its reasoning, its time and its answer apart"
