# common.sh - sourced by the shell tests of tests/cli/ (the folder's *.sh
# files are the tests; this one, one level down, is not). It gives:
#   KARA        the kara binary (KARA_BIN, set by CTest)
#   tmp         a fresh folder, removed on exit (a test that needs more on
#               exit sets its own trap, removing "$tmp" too)
#   pass, fail  counters, and check NAME CONDITION (CONDITION is eval'd)
#   expect_stderr NAME CODE TEXT COMMAND...: COMMAND (stdin empty, 120 s at
#               most) exits CODE with TEXT, a fixed string, on stderr; its
#               output is left in $tmp/out and $tmp/err
#   finish      prints "P passed, F failed"; its status is the test's
#   torch_python WHY: PY and T for tests of the PyTorch tools, or a skip
KARA="${KARA_BIN:?KARA_BIN must name the kara binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # name, condition
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi
}
expect_stderr() {
    local name=$1 code=$2 text=$3
    shift 3
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    if [ "$rc" -eq "$code" ] && grep -qF -- "$text" "$tmp/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name: exit $rc (wanted $code), stderr: $(head -c 600 "$tmp/err")"
    fi
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
# torch_python WHY: sets PY to KARA_TORCH_PYTHON (default /usr/bin/python3)
# and T to the training tools' folder, or skips the test (exit 77) when
# that Python cannot import PyTorch and NumPy; WHY says what needs them
torch_python() {
    PY="${KARA_TORCH_PYTHON:-/usr/bin/python3}"
    if ! "$PY" -c 'import torch, numpy' >/dev/null 2>&1; then
        echo "$PY cannot import torch and numpy ($1): skipped"
        exit 77
    fi
    T="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}/tools/train"
    export OMP_NUM_THREADS=1
}
