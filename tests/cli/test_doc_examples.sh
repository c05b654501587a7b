#!/usr/bin/env bash
# The documentation's example commands run as written (issue 22): every
# line of the ```sh blocks of README.md and configs/README.md, in order, in
# one shell at the repository root, with `kara` (and ./build/bin/kara) being
# the binary under test. Each must exit 0, or N when the line ends with
# "# exit N"; a line ending "# expect: TEXT" must also print TEXT on stdout
# as whole words (issue 48: an example that exits 0 printing nonsense is a
# failure). The setup
# line's install and build steps and the test command are what CI itself
# runs, so only their `kara` part is run here. A line that names ../shared
# runs on $KARA_SHARED (default: ../shared beside the source tree); without
# it, that line and every later line that uses a variable it sets are
# skipped, and the count is printed.
set -u
KARA="${KARA_BIN:?KARA_BIN must name the kara binary}"
SRC="${KARA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
ln -s "$KARA" "$tmp/bin/kara"

# The lines of the sh blocks, one command per line: "FILE:LINE<TAB>command"
extract() {
    awk -v f="$1" '
        /^```sh[[:space:]]*$/ { inblock = 1; next }
        /^```/ { inblock = 0; next }
        inblock && NF { printf "%s:%d\t%s\n", f, NR, $0 }' "$SRC/$1"
}
{ extract README.md; extract configs/README.md; } >"$tmp/lines"
n_lines=$(wc -l <"$tmp/lines")
if ! grep -q '^README.md:[0-9]*'$'\t''.*# expect: ' "$tmp/lines"; then
    echo "FAIL: no README.md example checks its output with '# expect: TEXT'"
    exit 1
fi
SHARED="${KARA_SHARED:-$SRC/../shared}"
have_shared=0
[ -d "$SHARED/models" ] && have_shared=1
if [ "$n_lines" -lt 10 ]; then
    echo "FAIL: only $n_lines example lines found in README.md and configs/README.md"
    exit 1
fi

# One script: each example, then a check of its status against the wanted one.
{
    echo 'cd "$SRC" || exit 1'
    echo 'pass=0; fail=0; skipped=0'
    skip_vars=()
    while IFS=$'\t' read -r where line; do
        want=0
        if [[ "$line" =~ \#\ exit\ ([0-9]+)[[:space:]]*$ ]]; then want=${BASH_REMATCH[1]}; fi
        expect=""
        if [[ "$line" =~ \#\ expect:\ (.*[^[:space:]])[[:space:]]*$ ]]; then expect=${BASH_REMATCH[1]}; fi
        # lines on ../shared: run on $SHARED, or skipped with what depends on them
        needs_skip=0
        if [[ "$line" == *../shared* ]]; then
            if [ "$have_shared" -eq 1 ]; then line=${line//..\/shared/$SHARED}; else needs_skip=1; fi
        fi
        for v in "${skip_vars[@]}"; do
            [[ "$line" =~ \$\{?$v([^A-Za-z0-9_]|$) ]] && needs_skip=1
        done
        if [ "$needs_skip" -eq 1 ]; then
            [[ "$line" =~ ^([A-Za-z_][A-Za-z0-9_]*)= ]] && skip_vars+=("${BASH_REMATCH[1]}")
            printf 'skipped=$((skipped+1)); echo "skipped (no %s): %s"\n' "${SHARED//\"/}" "$where"
            continue
        fi
        # the setup line: its install/build steps are CI's own; keep what follows them
        line=${line//.\/build\/bin\/kara/kara}
        line=$(printf '%s' "$line" | sed -E 's#^bash tools/install_deps.sh && cmake [^&]* && cmake --build [^&]* && ##')
        case "$line" in
        "cd build && ctest"*) continue ;;                 # the test command: CI runs it
        "export PATH="*) echo 'export PATH="$TMPBIN:$PATH"'; continue ;; # kara = the binary under test
        esac
        # a group, not a subshell, so M=... carries to the next line; the
        # line's own redirections and pipes take precedence inside it
        printf '{ %s\n} >"$TMPDIR_/out" 2>"$TMPDIR_/err" </dev/null\n' "$line"
        printf 'rc=$?; if [ $rc -ne %s ]; then fail=$((fail+1)); ' "$want"
        printf 'echo "FAIL: %s: exit $rc, wanted %s: %s"; head -c 400 "$TMPDIR_/err" | sed "s/^/    | /"; ' \
            "$where" "$want" "${line//\"/\\\"}"
        if [ -n "$expect" ]; then
            printf 'elif ! grep -qwF -- %q "$TMPDIR_/out"; then fail=$((fail+1)); ' "$expect"
            printf 'echo "FAIL: %s: stdout lacks %s"; tail -c 400 "$TMPDIR_/out" | sed "s/^/    | /"; ' \
                "$where" "${expect//\"/\\\"}"
        fi
        printf 'else pass=$((pass+1)); fi\n'
    done <"$tmp/lines"
    echo 'echo "$pass passed, $fail failed, $skipped skipped"; [ $fail -eq 0 ]'
} >"$tmp/run.sh"

SRC="$SRC" TMPBIN="$tmp/bin" TMPDIR_="$tmp" PATH="$tmp/bin:$PATH" bash "$tmp/run.sh"
