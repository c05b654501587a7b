#!/usr/bin/env bash
# The command line as a llama.cpp user types it (issue 22): llama-cli's own
# command line runs unchanged, habit flags are aliases or ignored with a
# note, unknown flags get a did-you-mean, --help shows defaults, bench has
# the same names and defaults, NO_COLOR and --color are obeyed, `kara run`
# ends its text with a newline, and the long commands report progress.
# Uses the shipped model and models written by `kara gen-model`; `script`
# (util-linux) gives a pseudo-terminal where one is needed.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
R="$SRC/tools/train/model/kara-reasoner-1m.gguf"
check() { # name, condition (shows the last stderr on failure)
    if eval "$2"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: $1"
        [ -s "$tmp/err" ] && head -c 600 "$tmp/err" | sed 's/^/    | /'
    fi
}
# run CMD...: stdout to $tmp/out, stderr to $tmp/err, exit status in $rc
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
has_esc() { LC_ALL=C grep -q $'\x1b' "$1"; }

M="$tmp/m.gguf"
"$KARA" gen-model --preset tiny --arch llama --type f32 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }

# --- llama-cli's command line, unchanged --------------------------------------------------
run "$KARA" run -m "$M" -p "hello" -n 12 --temp 0 -t 1
ref=$(cat "$tmp/out")
# A build with the CUDA backend takes -ngl N > 0 as --device cuda (which needs
# a GPU), so the CPU comparison there asks for -ngl 0.
if "$KARA" run --help-all 2>/dev/null | grep -q -- "-ngl N is --device cuda"; then cuda_build=1; ngl=0; else cuda_build=0; ngl=99; fi
run "$KARA" -m "$M" -p "hello" -n 12 -t 1 -c 256 --temp 0 --top-k 40 --top-p 0.9 --repeat-penalty 1.0 \
    -ngl $ngl -fa --no-mmap -ctk f16 -ctv f16 -s 42 -no-cnv --color --no-warmup --mlock
check "llama-cli's command line runs as kara run (exit $rc)" '[ $rc -eq 0 ]'
check "and writes the same text" '[ "$(cat "$tmp/out")" == "$ref" ]'
if [ $cuda_build -eq 0 ]; then
    check "GPU flags are ignored with a note that says why" 'grep -q "note: -ngl 99 ignored: this build has no GPU backend and runs on the CPU" "$tmp/err" && grep -q "note: -fa ignored" "$tmp/err"'
    run "$KARA" run -m "$M" -p "hello" -n 12 --temp 0 -t 1 -fa on --n-gpu-layers=20
    check "-fa on and --n-gpu-layers=N are taken" '[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" == "$ref" ] && grep -q "fa on ignored" "$tmp/err"'
    run "$KARA" run -m "$M" -p "hello" -n 2 -t 1 --device cuda
    check "--device cuda in a CPU build: exit 69, says how to get one (rc $rc)" '[ $rc -eq 69 ] && grep -q "built without the CUDA backend: rebuild with -DKARA_CUDA=ON" "$tmp/err"'
else
    check "-ngl 0 says it means the CPU" 'grep -q "note: -ngl 0 means --device cpu" "$tmp/err"'
    run "$KARA" run -m "$M" -ngl 99 --print-config
    check "-ngl 99 in a CUDA build: --device cuda, or the CPU where no GPU answers" \
        '[ $rc -eq 0 ] && { { grep -q "means --device cuda" "$tmp/err" && grep -Eq "^ *device: cuda" "$tmp/out"; } ||
          { grep -q "no usable GPU here, so it runs on the CPU" "$tmp/err" && grep -Eq "^ *device: cpu" "$tmp/out"; }; }'
fi
run "$KARA" run -m "$M" -p "hello" -n 12 --temp 0 --threads=1 --ctx-size=128
check "--flag=value" '[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" == "$ref" ]'

# --- aliases ---------------------------------------------------------------------------
run "$KARA" run -m "$M" --no-mmap --print-config
check "--no-mmap is model.mmap off" 'grep -q "mmap: false *# --no-mmap" "$tmp/out"'
run "$KARA" run -m "$M" --mmap --print-config
check "a bare --mmap is on" 'grep -q "mmap: true *# --mmap" "$tmp/out"'
run "$KARA" run -m "$M" -ctk f32 -ctv f32 --print-config
check "-ctk/-ctv set kv_cache.dtype" 'grep -q "dtype: f32 *# -ctv" "$tmp/out"'
run "$KARA" run -m "$M" -ctk f16 -ctv f32
check "-ctk and -ctv that differ are refused" '[ $rc -eq 64 ] && grep -q "differ" "$tmp/err"'
run "$KARA" run -m "$M" -ctk q5_1
check "an unknown cache type names the choices" '[ $rc -eq 64 ] && grep -q "f16 | f32 | q8_0 | q4_0" "$tmp/err"'
run "$KARA" run -m "$M" -ctk q8_0 -ctv q8_0 --print-config
check "-ctk/-ctv q8_0 set kv_cache.dtype" '[ $rc -eq 0 ] && grep -q "dtype: q8_0 *# -ctv" "$tmp/out"'
run "$KARA" run -m "$M" -ctk q8_0 -ctv f16
check "-ctk q8_0 -ctv f16 are refused as different" '[ $rc -eq 64 ] && grep -q "differ" "$tmp/err"'
for t in q8_0 q4_0; do
    run "$KARA" run -m "$M" -p "hello" -n 12 --temp 0 -t 1 -ctk $t
    check "kara run with a $t KV cache writes text" '[ $rc -eq 0 ] && [ -s "$tmp/out" ]'
done
run "$KARA" run -m "$M" --seed -1 --print-config
s1=$(grep -o "seed: [0-9]*" "$tmp/out" | head -1)
run "$KARA" run -m "$M" --seed -1 --print-config
s2=$(grep -o "seed: [0-9]*" "$tmp/out" | head -1)
check "--seed -1 draws a seed and shows it ($s1, $s2)" '[ -n "$s1" ] && [ "$s1" != "$s2" ]'
run "$KARA" run -m "$M" -p 'a\tb' -e -n 0 --temp 0
check "-e turns \\t into a tab" '[ "$(head -c 3 "$tmp/out")" == "$(printf "a\tb")" ]'
run "$KARA" run -m "$M" -p 'a\tb' -n 0 --temp 0
check "without -e the prompt is taken as typed" '[ "$(head -c 4 "$tmp/out")" == "a\\tb" ]'
run "$KARA" run -m "$M" -cnv
check "-cnv points at kara chat" '[ $rc -eq 64 ] && grep -q "kara chat" "$tmp/err"'

# --- --prompt-cache (llama.cpp's flag) ----------------------------------------------------
P='Sum #1 58*2 + #2 35*26.'
run "$KARA" run -m "$R" -p "$P" -n 40 --temp 0 --prompt-cache "$tmp/pc.bin"
first=$(cat "$tmp/out")
check "--prompt-cache writes the file on the first run" '[ $rc -eq 0 ] && [ -s "$tmp/pc.bin" ] && grep -q "prompt: 23 tokens (23 decoded)" "$tmp/err"'
run "$KARA" run -m "$R" -p "$P" -n 40 --temp 0 --prompt-cache "$tmp/pc.bin" --prompt-cache-ro
check "the second run decodes 2 prompt tokens and writes the same text" '[ $rc -eq 0 ] && grep -q "(2 decoded)" "$tmp/err" && [ "$(cat "$tmp/out")" == "$first" ]'
cp "$tmp/pc.bin" "$tmp/pc.keep"
run "$KARA" run -m "$M" -p "hello" -n 4 --temp 0 --prompt-cache "$tmp/pc.bin" --prompt-cache-ro
check "a cache of another model is a note, not an error" '[ $rc -eq 0 ] && grep -q "not used: sequence state: made with another model" "$tmp/err" && cmp -s "$tmp/pc.bin" "$tmp/pc.keep"'
printf 'KARASEQ1 damaged' >"$tmp/pc.bad"
run "$KARA" run -m "$R" -p "$P" -n 4 --temp 0 --prompt-cache "$tmp/pc.bad"
check "a damaged cache is a note, and is replaced" '[ $rc -eq 0 ] && grep -q "not used" "$tmp/err" && [ $(stat -c %s "$tmp/pc.bad") -gt 1000 ]'
printf 'garbage' >"$tmp/pc.foreign"
run "$KARA" run -m "$R" -p "$P" -n 4 --temp 0 --prompt-cache "$tmp/pc.foreign"
check "a file that is no cache is a note, and is kept" '[ $rc -eq 0 ] && grep -q "does not start with \"KARASEQ\"" "$tmp/err" && [ "$(cat "$tmp/pc.foreign")" = garbage ]'

# --- did-you-mean --------------------------------------------------------------------
run "$KARA" run -m "$M" --thread 2
check "did-you-mean for --thread" '[ $rc -eq 64 ] && grep -q "did you mean .--threads." "$tmp/err"'
run "$KARA" run -m "$M" --ctx_size 256
check "did-you-mean for --ctx_size" '[ $rc -eq 64 ] && grep -q "did you mean .--ctx-size." "$tmp/err"'
run "$KARA" eval -m "$M" --task x.jsonl
check "did-you-mean for a command's own flag" '[ $rc -eq 64 ] && grep -q "did you mean .--tasks." "$tmp/err"'
run "$KARA" run -m "$M" --frobnicate
check "no suggestion when nothing is near" '[ $rc -eq 64 ] && grep -q "unknown option" "$tmp/err" && ! grep -q "did you mean" "$tmp/err"'
run "$KARA" rnu -m "$M"
check "did-you-mean for a command" '[ $rc -eq 64 ] && grep -q "did you mean .run." "$tmp/err"'

# --- defaults in --help --------------------------------------------------------------
for c in run chat batch eval eval-kv bench; do
    run "$KARA" $c --help
    check "$c --help shows the threads default" '[ $rc -eq 0 ] && grep -q "^  -t,--threads X .*(default: auto)" "$tmp/out"'
done
run "$KARA" run --help
check "run --help shows the KV method default" 'grep -q "^  --kv-method X .*(default: kara)" "$tmp/out"'

# --- bench: the same names and defaults ----------------------------------------------
run "$KARA" bench -m "$M" -p 16 -n 4 -r 1 --kv-dtype f32 --mmap on
check "bench takes --kv-dtype and --mmap on" '[ $rc -eq 0 ] && grep -q "\"test\":\"tg4\"" "$tmp/out"'
run "$KARA" bench -m "$M" -p 16 -n 4 -r 1 -ctk f32 --no-mmap
check "bench takes -ctk and --no-mmap" '[ $rc -eq 0 ]'
ncpu=$(nproc)
check "bench defaults to all cores ($ncpu)" 'grep -q "\"threads\":$ncpu," "$tmp/out"'
run "$KARA" bench -m "$M" -p 16 -n 4 -r 1 -t 1 --kv-dtype q4_0
check "bench takes --kv-dtype q4_0" '[ $rc -eq 0 ] && grep -q "\"test\":\"tg4\"" "$tmp/out"'
run "$KARA" bench -m "$M" --kv-type f32
check "bench's old --kv-type gets a did-you-mean" '[ $rc -eq 64 ] && grep -q "did you mean .--kv-dtype." "$tmp/err"'

# --- terminal manners ----------------------------------------------------------------
run "$KARA" run -m "$M" -p "hello" -n 5 --temp 0
check "kara run's stdout ends with a newline" '[ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d " ")" == "\n" ]'
if command -v script >/dev/null 2>&1; then
    # eval on a terminal: a progress line with an ETA, and no escape code
    NO_COLOR=1 script -qec "$KARA eval -m $R --tasks $SRC/tests/data/reuse-tier1.jsonl --limit 8 --methods streaming --budgets 0.5 -t 1 >$tmp/eval.out" "$tmp/tty.log" >/dev/null 2>&1
    check "eval shows progress with an ETA on a terminal" 'grep -q "kara eval: [0-9]*/16 problems.*ETA" "$tmp/tty.log"'
    check "NO_COLOR=1: no escape code on the terminal" '! has_esc "$tmp/tty.log"'
    check "eval's table is whole" '[ $(grep -c "%" "$tmp/eval.out") -eq 2 ]'
    script -qec "$KARA eval -m $R --tasks $SRC/tests/data/reuse-tier1.jsonl --limit 4 --methods kara --budgets 0.5 -t 1 --no-progress >/dev/null" "$tmp/tty2.log" >/dev/null 2>&1
    check "--no-progress: no progress line" '! grep -q "problems" "$tmp/tty2.log"'
    NO_COLOR=1 script -qec "$KARA run -m $M -p hello -n 8 --temp 0" "$tmp/tty3.log" >/dev/null 2>&1
    check "NO_COLOR=1: kara run writes no escape code" '! has_esc "$tmp/tty3.log"'
else
    echo "SKIPPED (part): script(1) is missing, no pseudo-terminal checks"
fi
run "$KARA" eval-kv -m "$M" --methods kara --needle-depths none --max-tokens 64 -t 1
check "eval-kv piped: plain progress lines, no escape" 'grep -q "^kara eval-kv: 2/3 rows" "$tmp/err" && ! has_esc "$tmp/err"'
run "$KARA" eval-kv -m "$M" --methods kara --needle-depths none --max-tokens 64 -t 1 --no-progress
check "eval-kv --no-progress: none" '[ $rc -eq 0 ] && ! grep -q "rows" "$tmp/err"'
run "$KARA" quantize -q "$M" "$tmp/q.gguf" Q8_0 --no-progress --color off
check "quantize takes --no-progress and --color" '[ $rc -eq 0 ] && [ -s "$tmp/q.gguf" ]'
# the shipped model thinks first: its thinking is dimmed where colour is allowed
printf 'Sum #1 58*2.\n' | "$KARA" chat -m "$R" -n 24 --temp 0 --color on >"$tmp/out" 2>"$tmp/err"
check "chat --color on: escape codes even into a file" 'has_esc "$tmp/out"'
printf 'Sum #1 58*2.\n' | "$KARA" chat -m "$R" -n 24 --temp 0 >"$tmp/out" 2>"$tmp/err"
check "chat into a file: no escape code" '! has_esc "$tmp/out" && ! has_esc "$tmp/err" && grep -q "Start thinking" "$tmp/out"'

finish
