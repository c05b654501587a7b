#!/usr/bin/env bash
# `kara chat`'s line editor on a terminal (tmux): text typed during a reply
# is neither echoed nor sent into it and waits in the next prompt; Up
# recalls a line; Left/Home/Right insertion, UTF-8 code points, Ctrl-W,
# Ctrl-U, Ctrl-K, Delete and Backspace change the sent line; Ctrl-L clears
# the screen and never reaches the model; /regen says how much of its
# prompt it reused; with NO_COLOR=1 the session writes no ESC byte at all
# (the raw pane output, taken with pipe-pane, against the same conversation
# piped, whose random replies may hold ESC bytes of their own).
# Synthetic model (random weights: the flow is checked, not the words).
# Skips (77) when tmux is missing: tools/install_deps.sh installs it.
set -u
. "$(dirname "$0")/lib/common.sh"
if ! command -v tmux >/dev/null 2>&1; then
    echo "SKIPPED test_chat_line_edit: tmux is not installed (tools/install_deps.sh installs it)"
    exit 77
fi
export LC_ALL=C.UTF-8 # tmux sends the UTF-8 keys as UTF-8
sock="$tmp/tmux.sock"
T() { tmux -S "$sock" -f /dev/null "$@"; }
trap 'T kill-server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
check() { # name, condition
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; screen "$S" | grep -v '^$' | tail -12 | sed 's/^/    | /'; fi
}
M="$tmp/m.gguf"
"$KARA" gen-model --arch qwen3 --vocab 277 --ctx 32768 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }

# start NAME ENV STDERR ARGS...: kara chat in a new 150x50 terminal with
# ENV (e.g. "TERM=xterm-256color NO_COLOR=1") and stderr to STDERR (a file,
# or - for the terminal). It waits for `T wait-for -S NAME` so pipe-pane can
# be attached first. Its exit status is printed as EXIT=N.
start() {
    local name=$1 envs=$2 err=$3 redir=""
    shift 3
    S=$name
    [ "$err" != - ] && redir="2>$err"
    T new-session -d -s "$name" -x 150 -y 50 \
        "tmux -S $sock wait-for $name; env $envs $KARA chat -m $M -t 1 $* $redir; echo EXIT=\$?; sleep 600"
}
go() { T wait-for -S "$1"; }
screen() { T capture-pane -p -J -t "$1" -S -3000 2>/dev/null; }      # text, with the scrollback
visible() { T capture-pane -p -J -t "$1" 2>/dev/null; }              # the visible screen only
screen_e() { T capture-pane -p -e -J -t "$1" -S -3000 2>/dev/null; } # with attributes as ANSI
wait_for() { # NAME TEXT [SECONDS]: until the screen shows TEXT (fixed string)
    local i
    for ((i = 0; i < ${3:-20} * 10; i++)); do
        screen "$1" | grep -qF -- "$2" && return 0
        sleep 0.1
    done
    return 1
}
wait_file() { # FILE PATTERN COUNT: until grep -c PATTERN FILE >= COUNT (20 s)
    local i
    for ((i = 0; i < 200; i++)); do
        [ "$(grep -ac -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
        sleep 0.1
    done
    return 1
}
# prompt lines ("> ...") as the editor draws them: bold on a colour terminal
# (random replies may start a line with "> " too); plain without colour
BOLD_PROMPT=$'^(\e\\[[0-9;]*m)*\e\\[(0;)?1m(\e\\[[0-9;]*m)*> '
prompt_lines() { screen_e "$1" | grep -E "$BOLD_PROMPT" | sed $'s/\e\\[[0-9;]*m//g'; }
prompts() { prompt_lines "$1" | wc -l; }
wait_prompts() { # NAME N: until at least N prompts are shown
    local i
    for ((i = 0; i < 300; i++)); do
        [ "$(prompts "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
alive() { ! screen "$1" | grep -q '^EXIT='; }
# the last user message of the last prompt (--verbose-prompt on stderr, chatml)
last_user() { awk '/^<\|im_start\|>user$/ { u = ""; inu = 1; next } inu && /<\|im_end\|>$/ { sub(/<\|im_end\|>$/, ""); u = u $0; inu = 0; last = u; next } inu { u = u $0 "\n" } END { print last }' "$1"; }

# 1. type-ahead: keys typed during a reply are not shown in it and wait in
#    the next prompt (kept across the Ctrl-C that stops the reply)
start a TERM=xterm-256color - -c 32768 --ignore-eos -s 5
go a
check "a prompt is shown" 'wait_prompts a 1'
T send-keys -t a 'tell me a long story' Enter
sleep 1
T send-keys -t a 'ahead'
sleep 1
check "the reply is still running after the typing" 'alive a && [ "$(prompts a)" -eq 1 ]'
check "typed text is not echoed into the reply" '! screen a | grep -q ahead'
T send-keys -t a C-c
check "Ctrl-C stops the reply" 'wait_for a "(stopped)" 10 && wait_prompts a 2'
check "the typed text is in the next prompt's line" '[ "$(prompt_lines a | tail -1)" == "> ahead" ]'
check "and nowhere else" '[ "$(screen a | grep -c ahead)" -eq 1 ]'
T send-keys -t a C-u C-d
check "Ctrl-U empties the line, then Ctrl-D exits 0" 'wait_for a "EXIT=0"'

# 2. history and editing: what is sent, read from --verbose-prompt
E="$tmp/b.err"
start b TERM=xterm-256color "$E" -n 6 -s 3 --chat-template qwen3 --verbose-prompt
go b
wait_prompts b 1
T send-keys -t b 'first line' Enter
wait_file "$E" '^prompt (' 1
T send-keys -t b 'second' Enter
wait_file "$E" '^prompt (' 2
check "a plain line is sent as typed" '[ "$(last_user "$E")" == "second" ]'
T send-keys -t b Up Up Enter
check "Up Up recalls the line before last" 'wait_file "$E" "^prompt (" 3 && [ "$(last_user "$E")" == "first line" ]'
T send-keys -t b Up Down 'helo world' Home Right Right Right l End '!' Enter
check "Up then Down returns to the new line; Home/Right insert in the middle" \
    'wait_file "$E" "^prompt (" 4 && [ "$(last_user "$E")" == "hello world!" ]'
T send-keys -t b -l 'añb'
T send-keys -t b Left X Left Left Y Enter
check "Left moves by UTF-8 code point" 'wait_file "$E" "^prompt (" 5 && [ "$(last_user "$E")" == "aYñXb" ]'
T send-keys -t b 'xx one two three' C-w 'four' C-a Right Right C-u C-e BSpace r Home DC Enter
check "Ctrl-W, Ctrl-A, Ctrl-U, Ctrl-E, Backspace, Delete" \
    'wait_file "$E" "^prompt (" 6 && [ "$(last_user "$E")" == "one two four" ]'
T send-keys -t b 'abcdef' Left Left Left C-k Enter
check "Ctrl-K cuts to the end" 'wait_file "$E" "^prompt (" 7 && [ "$(last_user "$E")" == "abc" ]'
wait_prompts b 8
T send-keys -t b 'ab' C-l
sleep 0.5
check "Ctrl-L clears the screen and redraws the prompt and line at the top" \
    '[ "$(visible b | head -1)" == "> ab" ] && [ "$(visible b | grep -c .)" -eq 1 ]'
T send-keys -t b 'cd' Enter
# (the last user message is exactly "abcd": no form feed, and nothing lost)
check "Ctrl-L is not sent to the model" \
    'wait_file "$E" "^prompt (" 8 && [ "$(last_user "$E")" == "abcd" ]'
T send-keys -t b '/regen' Enter
check "/regen notes how much of its prompt was reused" 'wait_file "$E" "^(regenerated: [0-9]* prompt tokens reused, [0-9]* decoded again)$" 1'
T send-keys -t b '/stats' Enter
check "/stats agrees with the note" 'wait_for b "KV memory:" &&
    r=$(sed -n "s/^(regenerated: \([0-9]*\) prompt tokens reused, \([0-9]*\) decoded again)$/\2 decoded, \1 reused/p" "$E") &&
    screen b | grep -q "tokens ($r)"'
T send-keys -t b C-d
check "Ctrl-D exits 0" 'wait_for b "EXIT=0"'

# 3. NO_COLOR=1: not one ESC byte from the session (prompt redraws, Ctrl-L,
#    the thinking placeholder erased, notes), counted in the raw pane output
start c "TERM=xterm-256color NO_COLOR=1" - -n 24 -s 5 --chat-template deepseek-r1 --reasoning-budget 6 --hide-thinking
T pipe-pane -t c -o "cat >$tmp/c.raw"
go c
wait_for c "Type a message"
T send-keys -t c 'hello wrld' Left Left Left o Enter
wait_for c "(reply cut at 24 tokens)"
T send-keys -t c Up Enter
T send-keys -t c 'abc' C-l BSpace Enter
T send-keys -t c '/regen' Enter
T send-keys -t c '/stats' Enter
check "NO_COLOR: the session runs to /stats" 'wait_for c "KV memory:"'
T send-keys -t c C-d
check "NO_COLOR: Ctrl-D exits 0" 'wait_for c "EXIT=0"'
check "NO_COLOR: no attributes on the screen" '! screen_e c | grep -q $'"'"'\033\['"'"''
# the same conversation piped: its replies' own ESC bytes (random text) are all the raw output may hold
printf 'hello world\nhello world\nab\n/regen\n' |
    "$KARA" chat -m "$M" -t 1 -n 24 -s 5 --chat-template deepseek-r1 --reasoning-budget 6 --hide-thinking >"$tmp/c.pipe" 2>/dev/null
want=$(tr -cd '\033' <"$tmp/c.pipe" | wc -c)
got=$(tr -cd '\033' <"$tmp/c.raw" | wc -c)
check "NO_COLOR: the raw output has no ESC but the replies' own ($got, replies $want)" '[ -s "$tmp/c.raw" ] && [ "$got" -eq "$want" ]'
first=$(grep -a -m1 . "$tmp/c.pipe")
check "NO_COLOR: the first reply matches the piped one (so the counts compare)" \
    '[ -n "$first" ] && tr -d "\r" <"$tmp/c.raw" | LC_ALL=C grep -aqF -- "$first"'

finish
