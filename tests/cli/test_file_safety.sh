#!/usr/bin/env bash
# Files the `kara` command writes (docs/RELIABILITY.md, "Files the CLI
# writes"): what is planted where a file is written - the model, the prompt
# file, a FIFO, a directory, a symlink to a file elsewhere, a hard link, a
# stale PATH.tmp - is left as it was (byte-identical, still a FIFO, still a
# link) or the command says why and exits non-zero; a symlinked batch output
# keeps its link through the atomic rewrite; the batch output is never an
# input, however spelled; and a failed write to stdout is exit 74 with a
# message, for every command. Uses the project's own 1M model (no ../shared).
set -u
. "$(dirname "$0")/lib/common.sh"
M0="${KARA_SOURCE_DIR:-$(dirname "$0")/../..}/tools/train/model/kara-reasoner-1m.gguf"
[ -f "$M0" ] || { echo "FAIL: no model at $M0"; exit 1; }
cd "$tmp" || exit 1
cp "$M0" m.gguf
mkdir outside
run() { "$KARA" run -m m.gguf -t 1 -n 4 --temp 0 "$@"; }
same() { cmp -s "$1" "$2"; }

# --- the prompt cache ------------------------------------------------------
cp m.gguf keep.gguf
run -p hi --prompt-cache m.gguf >/dev/null 2>err
check "cache over the model: model untouched" "same m.gguf keep.gguf"
check "cache over the model: says why" "grep -q \"'m.gguf' is the same file as the model (-m)\" err"

echo "a prompt" >p.txt && cp p.txt p.keep
run -f p.txt --prompt-cache p.txt >/dev/null 2>err
check "cache over the prompt file: untouched" "same p.txt p.keep"
check "cache over the prompt file: says why" "grep -q 'same file as the prompt file' err"

run -f p.txt --prompt-cache ./p.txt >/dev/null 2>err
check "cache over ./prompt: untouched" "same p.txt p.keep"

ln m.gguf hard.gguf
run -p hi --prompt-cache hard.gguf >/dev/null 2>err
check "cache over a hard link of the model: untouched" "same m.gguf keep.gguf"
ln -s m.gguf link.gguf
run -p hi --prompt-cache link.gguf >/dev/null 2>err
check "cache over a symlink to the model: untouched" "same m.gguf keep.gguf && [ -L link.gguf ]"

mkfifo fifo
timeout 20 "$KARA" run -m m.gguf -t 1 -n 4 -p hi --prompt-cache fifo >/dev/null 2>err
rc=$?
check "cache over a FIFO: no hang, exit 0 ($rc)" "[ $rc -eq 0 ]"
check "cache over a FIFO: still a FIFO" "[ -p fifo ]"
check "cache over a FIFO: says why" "grep -q \"'fifo' is a FIFO, not a regular file\" err"

mkdir adir
run -p hi --prompt-cache adir >/dev/null 2>err
check "cache over a directory: still an empty directory" "[ -d adir ] && [ -z \"\$(ls -A adir)\" ]"

echo "someone else's notes" >outside/notes.txt && cp outside/notes.txt notes.keep
ln -s outside/notes.txt notes.link
run -p hi --prompt-cache notes.link >/dev/null 2>err
check "cache over a symlink to a foreign file: link and file kept" "[ -L notes.link ] && same outside/notes.txt notes.keep"
check "cache over a foreign file: says why" "grep -q 'does not start with \"KARASEQ\"' err"

echo "stale" >pc.bin.tmp && cp pc.bin.tmp stale.keep
run -p hi --prompt-cache pc.bin >/dev/null 2>err
check "a stale PATH.tmp is not truncated" "same pc.bin.tmp stale.keep"
check "the cache is written" "head -c 7 pc.bin | grep -q KARASEQ"
check "no temporary file left" "[ -z \"\$(ls | grep 'pc.bin.tmp.')\" ]"

# a symlink to a real cache: the target gets the new cache, the link stays
mv pc.bin outside/pc.bin && ln -s outside/pc.bin pc.link && cp outside/pc.bin pc.before
run -p "hello there" --prompt-cache pc.link >/dev/null 2>err
check "cache through a symlink: link kept, target rewritten" "[ -L pc.link ] && ! same outside/pc.bin pc.before"
check "cache through a symlink: still a cache" "head -c 7 outside/pc.bin | grep -q KARASEQ"

# --- the batch output -------------------------------------------------------
batch() { "$KARA" batch -m m.gguf -t 1 --no-progress --temp 0 "$@"; }
printf '{"id":"a","prompt":"one","max_tokens":4}\n{"id":"b","prompt":"two","max_tokens":4}\n' >in.jsonl
cp in.jsonl in.keep
ln -s in.jsonl in.link
ln in.jsonl in.hard
for spelling in in.jsonl ./in.jsonl in.link in.hard "$tmp/in.jsonl"; do
    batch -i in.jsonl -o "$spelling" --no-resume >/dev/null 2>err
    rc=$?
    check "--no-resume, output $spelling = input: refused ($rc)" "[ $rc -eq 73 ]"
    check "--no-resume, output $spelling = input: input untouched" "same in.jsonl in.keep"
    check "--no-resume, output $spelling = input: says why" "grep -q 'same file as the batch input (-i)' err"
done
batch -i in.jsonl -o in.jsonl >/dev/null 2>err
rc=$?
check "resume, output = input: refused ($rc), input untouched" "[ $rc -eq 73 ] && same in.jsonl in.keep"
printf 'sampling:\n  temperature: 0\n' >job.yaml && cp job.yaml job.keep
batch job.yaml -i in.jsonl -o ./job.yaml --no-resume >/dev/null 2>err
rc=$?
check "output = the job file: refused ($rc), untouched" "[ $rc -eq 73 ] && same job.yaml job.keep"
check "output = the job file: says why" "grep -q 'same file as the config file' err"
batch -i in.jsonl -o m.gguf --no-resume >/dev/null 2>err
rc=$?
check "output = the model: refused ($rc), model untouched" "[ $rc -eq 73 ] && same m.gguf keep.gguf"
timeout 20 "$KARA" batch -m m.gguf -t 1 --no-progress -i in.jsonl -o fifo --no-resume >/dev/null 2>err
rc=$?
check "output = a FIFO: refused ($rc), no hang, still a FIFO" "[ $rc -eq 73 ] && [ -p fifo ]"
batch -i in.jsonl -o adir >/dev/null 2>err
rc=$?
check "output = a directory: refused ($rc)" "[ $rc -eq 73 ] && grep -q 'is a directory' err"

# a symlinked output: answers go to the target, and --on-changed rerun's
# rewrite leaves the link in place with the new answer behind it
echo "stale" >out.jsonl.tmp && cp out.jsonl.tmp ostale.keep
echo "stale" >outside/res.jsonl.rewrite && cp outside/res.jsonl.rewrite rstale.keep
: >outside/res.jsonl
ln -s outside/res.jsonl out.jsonl
batch -i in.jsonl -o out.jsonl >/dev/null 2>err
check "symlinked output: answers in the target" "[ -L out.jsonl ] && [ \$(grep -c '\"custom_id\"' outside/res.jsonl) -eq 2 ]"
printf '{"id":"a","prompt":"one changed","max_tokens":4}\n{"id":"b","prompt":"two","max_tokens":4}\n' >in2.jsonl
batch -i in2.jsonl -o out.jsonl --on-changed rerun >/dev/null 2>err
rc=$?
check "rerun through a symlinked output: exit 0 ($rc)" "[ $rc -eq 0 ]"
check "rerun through a symlinked output: still a link" "[ -L out.jsonl ] && [ \"\$(readlink out.jsonl)\" = outside/res.jsonl ]"
check "rerun through a symlinked output: the target holds both answers once" \
    "[ \$(grep -c '\"custom_id\"' outside/res.jsonl) -eq 2 ]"
check "rerun through a symlinked output: the old answer superseded" \
    "[ \$(grep -c '\"custom_id\":\"a\"' out.jsonl.superseded outside/res.jsonl.superseded 2>/dev/null | awk -F: '{s+=\$NF} END {print s+0}') -eq 1 ]"
check "stale PATH.tmp and PATH.rewrite untouched" "same out.jsonl.tmp ostale.keep && same outside/res.jsonl.rewrite rstale.keep"
check "no temporary file left" "[ -z \"\$(ls outside | grep 'res.jsonl.tmp.')\" ]"

# side files: a FIFO planted at OUTPUT.superseded is refused, not waited on
batch -i in.jsonl -o side.jsonl >/dev/null 2>&1
mkfifo side.jsonl.superseded
timeout 20 "$KARA" batch -m m.gguf -t 1 --no-progress --temp 0 -i in2.jsonl -o side.jsonl --on-changed rerun \
    >/dev/null 2>err
rc=$?
check "a FIFO at OUTPUT.superseded: refused ($rc), no hang" "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -p side.jsonl.superseded ]"
check "a FIFO at OUTPUT.superseded: says why" "grep -q \"'side.jsonl.superseded' is a FIFO\" err"

# --- other whole-file writes: gen-model, quantize, eval --out ---------------
"$KARA" quantize m.gguf hard.gguf Q8_0 >/dev/null 2>err
rc=$?
check "quantize over a hard link of its input: refused ($rc), input untouched" "[ $rc -ne 0 ] && same m.gguf keep.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 -o fifo >/dev/null 2>err
rc=$?
check "gen-model over a FIFO: refused ($rc)" "[ $rc -ne 0 ] && [ -p fifo ]"
echo '{"id":"t1","prompt":"1+1?","answer":"2"}' >tasks.jsonl && cp tasks.jsonl tasks.keep
"$KARA" eval -m m.gguf -t 1 --tasks tasks.jsonl --methods full --budgets none -n 4 --out tasks.jsonl >/dev/null 2>err
rc=$?
check "eval --out over its tasks file: refused ($rc), untouched" "[ $rc -eq 73 ] && same tasks.jsonl tasks.keep"

check "no temporary file left anywhere" "[ -z \"\$(find . -name '*.tmp.*')\" ]"

# --- a failed write to stdout: exit 74 and a message ------------------------
full() { # name, command...
    local name=$1
    shift
    "$@" >/dev/full 2>err </dev/null
    local rc=$?
    check "$name > /dev/full: exit 74 ($rc)" "[ $rc -eq 74 ]"
    check "$name > /dev/full: says so" "grep -q 'cannot write stdout: No space left on device' err"
}
full run "$KARA" run -m m.gguf -t 1 -p hi -n 50
full chat bash -c "printf 'hi\n' | \"$KARA\" chat -m m.gguf -t 1 -n 8"
full inspect "$KARA" inspect m.gguf
full tokenize "$KARA" tokenize -m m.gguf -p hello
full eval "$KARA" eval -m m.gguf -t 1 --tasks tasks.jsonl --methods full --budgets none -n 4
full bench "$KARA" bench -m m.gguf -t 1 -p 8 -n 4 -r 1
full batch "$KARA" batch -m m.gguf -i in.jsonl -o out2.jsonl --print-config
finish
