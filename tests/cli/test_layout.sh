#!/usr/bin/env bash
# The code base keeps its shape (docs/ARCHITECTURE.md): no include cycle
# between runtime folders, no folder reaching into one it may not call, the
# kernels and platform layer free of the runtime, the tools on kara.h alone,
# and no hand-written source file over 800 lines (tools/check_layout.py).
# A second check shows the checker fails on a planted cycle, and a third on
# KV methods reached from outside runtime/kv/methods/ (or switched on by a
# tool).
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
# a method switched on in decode, a method's table named by the CUDA
# backend, a method file that exports a helper, a baseline's selection
# called from the policy, and a tool comparing with a baseline
git -C "$tmp" checkout -q -- runtime/kv/kv_evict.c
printf 'static int kr_planted(int m) {\n    switch (m) {\n    case KARA_KV_METHOD_H2O: return 1;\n    default: return m != KARA_KV_METHOD_LAZY;\n    }\n}\n' >>"$tmp/runtime/decode/forward.c"
printf 'const void *kr_planted_table = &kr_kvm_rkv;\n' >>"$tmp/kernels_cuda/cuda_backend_kv.c"
printf 'int kr_kv_planted_helper(int x) { return x; }\n' >>"$tmp/runtime/kv/methods/h2o.c"
printf 'static void *kr_planted_call(void) { return (void *)kr_kv_select_lazy; }\n' >>"$tmp/runtime/kv/kv_policy.c"
printf 'static int kr_planted_tool(kara_kv_method m) { return m == KARA_KV_METHOD_SNAPKV || m == KARA_KV_METHOD_FULL; }\n' >>"$tmp/tools/kara/cmd_eval.c"
bad=$(python3 "$SRC/tools/check_layout.py" "$tmp" 2>&1)
rc=$?
echo "$bad" | grep "KV method\|kr_kvm_\|exports"
check "the planted method code fails the check (rc $rc)" '[ $rc -eq 1 ]'
check "a case on a method in decode is reported" \
    'printf "%s" "$bad" | grep -q "runtime/decode/forward.c: switches on a KV method (case KARA_KV_METHOD_H2O)"'
check "so is a comparison with one" \
    'printf "%s" "$bad" | grep -q "runtime/decode/forward.c: switches on a KV method (!= KARA_KV_METHOD_LAZY)"'
check "a method's table named outside methods/ is reported" \
    'printf "%s" "$bad" | grep -q "kernels_cuda/cuda_backend_kv.c: names kr_kvm_rkv"'
check "a method file exporting a helper is reported" \
    'printf "%s" "$bad" | grep -q "runtime/kv/methods/h2o.c: exports kr_kv_planted_helper"'
check "a tool comparing with a baseline is reported, with full it may" \
    'printf "%s" "$bad" | grep -q "tools/kara/cmd_eval.c: switches on a KV method (== KARA_KV_METHOD_SNAPKV): ask kara_kv_method_info_get"'
check "a baseline's selection called outside methods/ is reported" \
    'printf "%s" "$bad" | grep -q "runtime/kv/kv_policy.c: calls kr_kv_select_lazy, a method'"'"'s own"'
check "and nothing else" '[ "$(printf "%s\n" "$bad" | grep -c "^check_layout:")" -eq 6 ]'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
