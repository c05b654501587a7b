#!/usr/bin/env bash
# stories260K from BOS, greedy, 200 tokens: byte-for-byte llama2.c's golden
# output; the F32 file and llama.cpp's Q8_0 copy must both reproduce it.
set -u
shared="${KARA_SHARED:-$KARA_SOURCE_DIR/../shared}"
if [ ! -d "$shared/models" ]; then
    echo "SKIPPED test_stories_golden: ../shared (or \$KARA_SHARED) not found"
    exit 77
fi
expected="$shared/models/stories260K.expected-t0-n200.txt"
pass=0 fail=0
for model in stories260K.gguf derived-stories260K-Q8_0.gguf; do
    for threads in 1 2; do
        out=$("$KARA_BIN" run -m "$shared/models/$model" -n 200 --temp 0 -t "$threads" 2>/dev/null)
        if [ "$out" == "$(cat "$expected")" ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: $model (-t $threads) differs from $expected"
            diff <(echo "$out") "$expected" | head -5
        fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
