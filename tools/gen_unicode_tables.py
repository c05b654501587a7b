#!/usr/bin/env python3
"""Generate runtime/tokenizer/unicode_tables.c from the Unicode Character Database.

The tokenizers' pre-split rules need each code point's general category
(\\p{L}, \\p{N}, \\p{M}, \\p{P}, \\p{S}), the White_Space property (\\s),
simple case mappings and canonical decompositions. This script reads them
from Debian's `unicode-data` package (apt-get install unicode-data) and
writes compact C tables; runtime/tokenizer/unicode.c holds the hand-written lookups.

    python3 tools/gen_unicode_tables.py [--ucd /usr/share/unicode] > runtime/tokenizer/unicode_tables.c

The output is committed, so building Kara never needs the package.
"""

import argparse
import os
import sys

MAX_CPT = 0x110000
MAX_DECOMP = 4  # must match KARA_UNICODE_MAX_DECOMP in runtime/tokenizer/unicode.h

# Order must match enum kr_ucat in runtime/tokenizer/unicode.h (Cn = unassigned = 0).
CATEGORIES = [
    "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
    "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
    "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co",
]
WHITESPACE_BIT = 0x20  # KARA_UPROP_WHITESPACE


def read_unicode_data(path):
    """Return (category per code point, simple upper map, simple lower map,
    canonical single-level decompositions)."""
    cat = bytearray(MAX_CPT)  # 0 = Cn
    upper, lower, decomp = {}, {}, {}
    range_start = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 15:
                continue
            cpt = int(fields[0], 16)
            name, gc = fields[1], fields[2]
            code = CATEGORIES.index(gc)
            if name.endswith(", First>"):
                range_start = cpt
                continue
            if name.endswith(", Last>"):
                for c in range(range_start, cpt + 1):
                    cat[c] = code
                range_start = None
                continue
            cat[cpt] = code
            if fields[5] and not fields[5].startswith("<"):
                decomp[cpt] = [int(x, 16) for x in fields[5].split()]
            if fields[12]:
                upper[cpt] = int(fields[12], 16)
            if fields[13]:
                lower[cpt] = int(fields[13], 16)
    return cat, upper, lower, decomp


def read_white_space(path):
    ws = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            rng, prop = [x.strip() for x in line.split(";")]
            if prop != "White_Space":
                continue
            if ".." in rng:
                a, b = [int(x, 16) for x in rng.split("..")]
            else:
                a = b = int(rng, 16)
            ws.update(range(a, b + 1))
    return ws


def full_decomposition(cpt, decomp):
    if cpt not in decomp:
        return [cpt]
    out = []
    for c in decomp[cpt]:
        out.extend(full_decomposition(c, decomp))
    return out


def two_stage(props, block):
    """Split a per-code-point byte table into stage1 (block -> index) and
    deduplicated stage2 blocks."""
    blocks, index, stage1 = [], {}, []
    for start in range(0, MAX_CPT, block):
        chunk = bytes(props[start:start + block])
        if chunk not in index:
            index[chunk] = len(blocks)
            blocks.append(chunk)
        stage1.append(index[chunk])
    return stage1, blocks


def emit_array(out, ctype, name, values, per_line, fmt):
    out.write("const %s %s[%d] = {\n" % (ctype, name, len(values)))
    for i in range(0, len(values), per_line):
        out.write(",".join(fmt % v for v in values[i:i + per_line]) + ",\n")
    out.write("};\n\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ucd", default="/usr/share/unicode", help="folder with UnicodeData.txt and PropList.txt")
    args = ap.parse_args()

    ud_path = os.path.join(args.ucd, "UnicodeData.txt")
    pl_path = os.path.join(args.ucd, "PropList.txt")
    version = "unknown"
    readme = os.path.join(args.ucd, "ReadMe.txt")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "Unicode" in line and "versions/Unicode" in line:
                    version = line.strip().rsplit("/Unicode", 1)[-1].strip("/ ")
                    break

    cat, upper, lower, decomp = read_unicode_data(ud_path)
    ws = read_white_space(pl_path)

    props = bytearray(cat)
    for c in ws:
        props[c] |= WHITESPACE_BIT

    # pick the block size that gives the smallest tables
    best = None
    for shift in (5, 6, 7, 8):
        s1, blocks = two_stage(props, 1 << shift)
        size = len(s1) * 2 + len(blocks) * (1 << shift)
        if best is None or size < best[0]:
            best = (size, shift, s1, blocks)
    _, shift, stage1, blocks = best
    assert len(blocks) < 65536

    nfd = {}
    for c in sorted(decomp):
        full = full_decomposition(c, decomp)
        assert len(full) <= MAX_DECOMP, "decomposition of U+%04X longer than %d" % (c, MAX_DECOMP)
        nfd[c] = full

    out = sys.stdout
    out.write("/*\n * unicode_tables.c - GENERATED by tools/gen_unicode_tables.py from the Unicode\n")
    out.write(" * Character Database %s (Debian package unicode-data: UnicodeData.txt,\n" % version)
    out.write(" * PropList.txt). Do not edit by hand; rerun the script instead.\n */\n")
    out.write('#include "unicode.h"\n\n')
    out.write("const char kr_unicode_version[] = \"%s\";\n\n" % version)
    out.write("/* props(c) = stage2[stage1[c >> %d] * %d + (c & %d)]: bits 0-4 general\n" % (shift, 1 << shift, (1 << shift) - 1))
    out.write(" * category (enum kr_ucat), bit 5 White_Space. */\n")
    out.write("const unsigned kr_unicode_block_shift = %d;\n\n" % shift)
    emit_array(out, "uint16_t", "kr_unicode_stage1", stage1, 32, "%d")
    flat = [b for blk in blocks for b in blk]
    emit_array(out, "uint8_t", "kr_unicode_stage2", flat, 40, "%d")

    def pairs(name, mapping):
        keys = sorted(mapping)
        out.write("const uint32_t %s[%d][2] = {\n" % (name, len(keys)))
        for i in range(0, len(keys), 4):
            out.write("    " + " ".join("{0x%05X, 0x%05X}," % (k, mapping[k]) for k in keys[i:i + 4]) + "\n")
        out.write("};\n")
        out.write("const size_t %s_count = %d;\n\n" % (name, len(keys)))

    pairs("kr_unicode_lower", lower)
    pairs("kr_unicode_upper", upper)

    keys = sorted(nfd)
    out.write("/* Full canonical decompositions (Hangul syllables are computed, not listed):\n")
    out.write(" * {code point, first index into kr_unicode_nfd_data, length}. */\n")
    out.write("const uint32_t kr_unicode_nfd_index[%d][3] = {\n" % len(keys))
    data, pos = [], 0
    rows = []
    for k in keys:
        rows.append("{0x%05X, %d, %d}," % (k, pos, len(nfd[k])))
        data.extend(nfd[k])
        pos += len(nfd[k])
    for i in range(0, len(rows), 4):
        out.write("    " + " ".join(rows[i:i + 4]) + "\n")
    out.write("};\n")
    out.write("const size_t kr_unicode_nfd_index_count = %d;\n\n" % len(keys))
    emit_array(out, "uint32_t", "kr_unicode_nfd_data", data, 8, "0x%05X")


if __name__ == "__main__":
    main()
