#!/usr/bin/env bash
# `kara chat` on a terminal: a scripted session in a tmux pseudo-terminal,
# checked by what the screen shows. The banner and prompt, a streamed
# reply with the thinking dimmed, /stats, /set nothink; Ctrl-C stopping a
# reply and leaving the session usable; a second Ctrl-C within 2 s, or one
# at the prompt, exiting with 130; --hide-thinking; TERM=dumb giving plain
# text. Uses a synthetic model (random weights: the flow is checked, not
# the words). Skips (77) when tmux is missing: tools/install_deps.sh
# installs it.
set -u
. "$(dirname "$0")/lib/common.sh"
if ! command -v tmux >/dev/null 2>&1; then
    echo "SKIPPED test_chat_pty: tmux is not installed (tools/install_deps.sh installs it)"
    exit 77
fi
sock="$tmp/tmux.sock"
T() { tmux -S "$sock" -f /dev/null "$@"; }
trap 'T kill-server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
check() { # name, condition
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; screen "$S" | tail -15 | sed 's/^/    | /'; fi
}
M="$tmp/m.gguf"
"$KARA" gen-model --arch qwen3 --vocab 277 --ctx 32768 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }

# start NAME TERM ARGS...: kara chat in a new 150x50 terminal; its exit status is printed as EXIT=N
start() {
    local name=$1 term=$2
    shift 2
    S=$name
    T new-session -d -s "$name" -x 150 -y 50 \
        "env TERM=$term $KARA chat -m $M -t 1 $*; echo EXIT=\$?; sleep 600"
}
screen() { T capture-pane -p -J -t "$1" -S -1000 2>/dev/null; }           # text
screen_e() { T capture-pane -p -e -J -t "$1" -S -1000 2>/dev/null; }      # with attributes as ANSI
# wait_for NAME TEXT [SECONDS]: until the screen shows TEXT (fixed string)
wait_for() {
    local i
    for ((i = 0; i < ${3:-20} * 10; i++)); do
        screen "$1" | grep -qF -- "$2" && return 0
        sleep 0.1
    done
    return 1
}
# prompts NAME: how many prompt lines ("> ...") the screen shows: on a colour
# terminal the bold ones only (the random model's replies can start a line
# with "> " too), plain ones on a dumb terminal
# (tmux writes the attribute as ESC[1m or, after other text, ESC[0;1m, then
# colour resets, before the "> ")
BOLD_PROMPT=$'^(\e\\[[0-9;]*m)*\e\\[(0;)?1m(\e\\[[0-9;]*m)*> '
prompts() {
    local e
    e=$(screen_e "$1")
    if printf '%s\n' "$e" | grep -qE "$BOLD_PROMPT"; then
        printf '%s\n' "$e" | grep -cE "$BOLD_PROMPT"
    else
        screen "$1" | grep -c '^> '
    fi
}
# wait_prompts NAME N: until at least N prompts are shown
wait_prompts() {
    local i
    for ((i = 0; i < 300; i++)); do
        [ "$(prompts "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
alive() { ! screen "$1" | grep -q '^EXIT='; }

# 1. a conversation: banner, prompt, dimmed thinking, commands, /exit
start a xterm-256color -n 24 -s 5 --chat-template deepseek-r1 --reasoning-budget 6
check "banner names the template and thinking" 'wait_for a "deepseek-r1 template, thinking on"'
check "a prompt is shown" 'wait_prompts a 1'
T send-keys -t a 'hello there' Enter
check "the reply ends with a new prompt" 'wait_prompts a 2'
check "the thinking is dimmed (SGR 2) and the colour reset after it" \
    'screen_e a | grep -q $'"'"'\033\[2m'"'"' && screen_e a | grep -q $'"'"'\033\[0m'"'"''
check "no plain-text markers on a terminal" '! screen a | grep -q "Start thinking"'
T send-keys -t a '/stats' Enter
check "/stats shows speed" 'wait_for a "tok/s"'
check "/stats shows KV memory" 'wait_for a "KV memory:"'
T send-keys -t a '/set nothink' Enter
check "/set nothink is acknowledged" 'wait_for a "(thinking off)"'
T send-keys -t a 'more \' Enter
check "a trailing \\ asks for the rest of the line" 'wait_for a "... "'
T send-keys -t a 'words' Enter
check "the continued message gets a reply" 'wait_prompts a 5'
T send-keys -t a '/bye' Enter
check "/bye exits 0" 'wait_for a "EXIT=0"'

# 2. Ctrl-C stops a long reply and the session goes on; a second Ctrl-C within 2 s exits 130
start b xterm-256color -c 32768 --ignore-eos -s 5
wait_prompts b 1
T send-keys -t b 'tell me a long story' Enter
sleep 1.5
check "the reply is still running before Ctrl-C" 'alive b && [ "$(prompts b)" -eq 1 ]'
T send-keys -t b C-c
check "Ctrl-C stops the reply" 'wait_for b "(stopped)" 10'
check "the session is back at a prompt" 'wait_prompts b 2 && alive b'
T send-keys -t b '/stats' Enter
check "the session still answers commands after Ctrl-C" 'wait_for b "KV memory:"'
T send-keys -t b 'and then?' Enter
sleep 1.5
T send-keys -t b C-c
sleep 0.3
T send-keys -t b C-c
check "a second Ctrl-C within 2 s exits with 130" 'wait_for b "EXIT=130" 10'

# 3. Ctrl-C at the prompt exits with 130
start c xterm-256color -n 8
wait_prompts c 1
T send-keys -t c C-c
check "Ctrl-C at the prompt exits with 130" 'wait_for c "EXIT=130" 10'

# 4. --hide-thinking: no thinking and no placeholder left on the screen, the answer shown
start d xterm-256color -n 24 -s 5 --chat-template deepseek-r1 --reasoning-budget 6 --hide-thinking
wait_prompts d 1
T send-keys -t d 'hello there' Enter
check "--hide-thinking: the reply ends with a prompt" 'wait_prompts d 2'
check "--hide-thinking: the placeholder is erased" '! screen d | grep -q "thinking\.\.\."'
check "--hide-thinking: nothing dimmed but the session notes" \
    '[ "$(screen_e d | grep -c $'"'"'\033\[2m'"'"')" -eq "$(screen d | grep -c "^(")" ]'
T send-keys -t d C-d
check "Ctrl-D exits 0" 'wait_for d "EXIT=0"'

# 5. TERM=dumb: plain text even on a terminal
start e dumb -n 24 -s 5 --chat-template deepseek-r1 --reasoning-budget 6
wait_prompts e 1
T send-keys -t e 'hello there' Enter
check "TERM=dumb: the thinking is between markers" 'wait_for e "[End thinking]"'
check "TERM=dumb: no SGR attributes at all" '! screen_e e | grep -q $'"'"'\033\[[0-9;]*m'"'"''
T send-keys -t e '/exit' Enter
check "/exit exits 0" 'wait_for e "EXIT=0"'

finish
