#!/usr/bin/env bash
# The documentation's example commands run as written (issue 22): every
# line of the ```sh blocks of README.md and configs/README.md, in order, in
# one shell at the repository root, with `kara` (and ./build/bin/kara) being
# the binary under test. Each must exit 0, or N when the line ends with
# "# exit N". The setup line's install and build steps and the test command
# are what CI itself runs, so only their `kara` part is run here.
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
if [ "$n_lines" -lt 10 ]; then
    echo "FAIL: only $n_lines example lines found in README.md and configs/README.md"
    exit 1
fi

# One script: each example, then a check of its status against the wanted one.
{
    echo 'cd "$SRC" || exit 1'
    echo 'pass=0; fail=0'
    while IFS=$'\t' read -r where line; do
        want=0
        if [[ "$line" =~ \#\ exit\ ([0-9]+)[[:space:]]*$ ]]; then want=${BASH_REMATCH[1]}; fi
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
        printf 'rc=$?; if [ $rc -eq %s ]; then pass=$((pass+1)); else fail=$((fail+1)); ' "$want"
        printf 'echo "FAIL: %s: exit $rc, wanted %s: %s"; head -c 400 "$TMPDIR_/err" | sed "s/^/    | /"; fi\n' \
            "$where" "$want" "${line//\"/\\\"}"
    done <"$tmp/lines"
    echo 'echo "$pass passed, $fail failed"; [ $fail -eq 0 ]'
} >"$tmp/run.sh"

SRC="$SRC" TMPBIN="$tmp/bin" TMPDIR_="$tmp" PATH="$tmp/bin:$PATH" bash "$tmp/run.sh"
