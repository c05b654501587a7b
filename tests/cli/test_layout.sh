#!/usr/bin/env bash
# The code base keeps its shape (docs/ARCHITECTURE.md): no include cycle
# between runtime folders, no folder reaching into one it may not call, the
# kernels and platform layer free of the runtime, the tools on kara.h alone,
# and no hand-written source file over 800 lines (tools/check_layout.py).
# A second check shows the checker fails on a planted cycle.
set -u
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
command -v git >/dev/null || { echo "SKIP: git is not installed"; exit 77; }
[ -e "$SRC/.git" ] || { echo "SKIP: $SRC is not a git checkout"; exit 77; }
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
out=$(python3 "$SRC/tools/check_layout.py" "$SRC" 2>&1)
rc=$?
echo "$out"
check "the tree keeps its layout (rc $rc)" '[ $rc -eq 0 ]'
# a copy of the tree with kv including decode's context.h: a forbidden call
# and a cycle (decode includes kv)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$SRC" ls-files -z | (cd "$SRC" && xargs -0 cp --parents -t "$tmp") 2>/dev/null
git -C "$tmp" init -q && git -C "$tmp" add -A >/dev/null 2>&1
sed -i 's/#include "status.h"/#include "status.h"\n#include "context.h"/' "$tmp/runtime/kv/kv_evict.c"
bad=$(python3 "$SRC/tools/check_layout.py" "$tmp" 2>&1)
check "a planted include of decode in kv is reported" 'printf "%s" "$bad" | grep -q "runtime/kv/kv_evict.c: includes context.h"'
check "and so is the cycle it makes" 'printf "%s" "$bad" | grep -q "include cycle between runtime folders"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
