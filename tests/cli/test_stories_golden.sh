#!/usr/bin/env bash
# stories260K from BOS, greedy, 200 tokens: byte-for-byte llama2.c's golden
# output, with 1 and 2 threads.
#
# llama.cpp's Q8_0 copy does not reproduce the golden text in full: at step
# 114 the F32 model prefers " you" over " m" by a margin of only 0.042, and
# 8-bit weights and activations move that logit gap by about 0.08, so
# llama.cpp (v0.4.0, checked on this machine) and Kara both continue "with my
# ball" instead of "with your ball". The Q8_0 copy must therefore match the
# golden text up to that point (the first 295 bytes) and Kara's own F32 run
# everywhere else is checked exactly.
set -u
shared="${KARA_SHARED:-$KARA_SOURCE_DIR/../shared}"
if [ ! -d "$shared/models" ]; then
    echo "SKIPPED test_stories_golden: ../shared (or \$KARA_SHARED) not found"
    exit 77
fi
expected="$shared/models/stories260K.expected-t0-n200.txt"
pass=0 fail=0
check() { # name, condition
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}
for threads in 1 2; do
    out=$("$KARA_BIN" run -m "$shared/models/stories260K.gguf" -n 200 --temp 0 --kv-method full -t "$threads" 2>/dev/null)
    check "stories260K F32 -t $threads equals the golden text" '[ "$out" == "$(cat "$expected")" ]'
    out8=$("$KARA_BIN" run -m "$shared/models/derived-stories260K-Q8_0.gguf" -n 200 --temp 0 --kv-method full -t "$threads" 2>/dev/null)
    check "stories260K Q8_0 -t $threads shares the golden's first 295 bytes" \
        '[ "${out8:0:295}" == "$(head -c 295 "$expected")" ] && [ ${#out8} -gt 400 ]'
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
