#!/usr/bin/env bash
# Run the libFuzzer harnesses of tests/fuzz for SECONDS each (default 60;
# CI runs them briefly, a long campaign is `tools/fuzz.sh 3600`). Builds
# them first with clang, ASan and UBSan in build-fuzz/ (only the harnesses
# and what they link). Each explores from its checked-in seeds, the
# project's own files and a working corpus kept in build-fuzz/corpus/NAME/.
# A crash is written to tests/fuzz/regress/NAME/ - commit it with the fix:
# from then on every build's CTest replays it (fuzz/NAME) - and the script
# fails. Prints one summary line per harness: runs, coverage, corpus.
# KARA_FUZZ_SEED=N fixes libFuzzer's random seed, so that a run from the
# same corpus explores the same inputs in the same order (CI uses it: a
# build lands or not on its own merits, not on what a random walk found
# that day; new findings are the long campaigns' job).
#   usage: [KARA_FUZZ_SEED=N] tools/fuzz.sh [SECONDS] [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(gguf config jsonl tokenizer chat_template think)
command -v clang >/dev/null || { echo "fuzz: clang is not installed (tools/install_deps.sh --dev installs it)"; exit 1; }
jobs=$(nproc)
if [ ! -f build-fuzz/CMakeCache.txt ]; then
    CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKARA_FUZZ=ON -DKARA_OPENMP=OFF -DKARA_CUDA=OFF >/dev/null
fi
targets=()
for n in "${names[@]}"; do targets+=("fuzz_$n"); done
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}" >/dev/null
failed=0
for n in "${names[@]}"; do
    corpus=build-fuzz/corpus/$n
    mkdir -p "$corpus" "tests/fuzz/regress/$n"
    extra=()
    [ "$n" = config ] && extra=(configs)
    [ -n "${KARA_FUZZ_SEED:-}" ] && extra=(-seed="$KARA_FUZZ_SEED" "${extra[@]}")
    log=build-fuzz/fuzz-$n.log
    # -timeout: one input taking longer than 10 s is a finding (bounded work)
    if ! ASAN_OPTIONS=detect_leaks=1 "build-fuzz/tests/fuzz/fuzz_$n" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="tests/fuzz/regress/$n/" \
        "$corpus" "tests/fuzz/seeds/$n" "${extra[@]}" >"$log" 2>&1; then
        failed=1
        echo "fuzz $n: FAILED - the input is in tests/fuzz/regress/$n/; log: $log"
        grep -m3 -E "ERROR|invariant failed|Timeout|deadly signal" "$log" | sed 's/^/    /'
    fi
    runs=$(grep -m1 -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' || true)
    echo "fuzz $n: $runs runs in ${secs}s, $last"
done
exit $failed
