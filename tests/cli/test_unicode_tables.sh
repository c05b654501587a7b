#!/usr/bin/env bash
# runtime/tokenizer/unicode_tables.c is the committed output of
# tools/gen_unicode_tables.py: regenerate it from the Unicode data installed
# here (Debian package unicode-data) and require it to be identical.
# Skipped (77) when python3 or the Unicode data are not installed.
set -u
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
UCD="${KARA_UCD:-/usr/share/unicode}"
if ! command -v python3 >/dev/null || [ ! -f "$UCD/UnicodeData.txt" ] || [ ! -f "$UCD/PropList.txt" ]; then
    echo "SKIPPED: python3 or $UCD/UnicodeData.txt not available (apt-get install unicode-data)"
    exit 77
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
python3 "$SRC/tools/gen_unicode_tables.py" --ucd "$UCD" >"$tmp" || { echo "FAIL: generator failed"; exit 1; }
if ! cmp -s "$tmp" "$SRC/runtime/tokenizer/unicode_tables.c"; then
    # a different Unicode version is not an error of the tables, only stale output is
    ver=$(sed -n 's/^const char kr_unicode_version\[\] = "\(.*\)";/\1/p' "$tmp")
    old=$(sed -n 's/^const char kr_unicode_version\[\] = "\(.*\)";/\1/p' "$SRC/runtime/tokenizer/unicode_tables.c")
    if [ "$ver" != "$old" ]; then
        echo "SKIPPED: installed Unicode data is $ver, the committed tables are $old"
        exit 77
    fi
    echo "FAIL: runtime/tokenizer/unicode_tables.c differs from the generator's output; rerun tools/gen_unicode_tables.py"
    diff "$tmp" "$SRC/runtime/tokenizer/unicode_tables.c" | head -20
    exit 1
fi
echo "1 passed, 0 failed"
