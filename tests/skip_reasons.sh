#!/usr/bin/env bash
# Run by ctest after the suite (CTEST_CUSTOM_POST_TEST, tests/CMakeLists.txt):
# ctest's summary names skipped tests but not why, so print the line each of
# them ended with ("skipped: no CUDA device", "../shared not found", ...).
log=Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
awk '
/^[0-9]+\/[0-9]+ Test: / { name = $3 }
/^Output:$/ { out = 1; last = ""; getline; next }
/^<end of output>$/ { out = 0; if (tolower(last) ~ /skip/) reasons[++n] = name ": " last; next }
out && NF { last = $0 }
END {
    if (n == 0) exit 0
    print "Why tests were skipped:"
    for (i = 1; i <= n; i++) print "\t" reasons[i]
}' "$log"
