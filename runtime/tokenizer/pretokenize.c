/*
 * pretokenize.c - the pre-split rules named by tokenizer.ggml.pre, written as
 * matchers over Unicode classes instead of a regex engine.
 *
 * Every rule is a list of passes. A pass looks at each segment left by the
 * previous pass and, from left to right, finds the leftmost match of its
 * pattern; matches become words and the text between two matches becomes a
 * word of its own (what llama.cpp's unicode_regex_split does). A matcher
 * returns the length of the match starting exactly at `pos`, or 0; it
 * follows the pattern's alternatives in order with greedy quantifiers and the
 * backtracking a regex engine would do.
 *
 * Two details of llama.cpp's regex setup carry over: `\s` is the White_Space
 * property, and in the patterns written with literal character ranges any
 * non-ASCII white space is first replaced by U+000B, so it never falls inside
 * those ranges.
 */
#include "pretokenize.h"

#include <string.h>

#include "unicode.h"

#define WS KR_UCLASS_WHITESPACE
#define LETTER KR_UCLASS_LETTER
#define NUMBER KR_UCLASS_NUMBER
#define MARK KR_UCLASS_MARK
#define PUNCT KR_UCLASS_PUNCT

/* The segment a pass is working on. */
typedef struct seg {
    const uint32_t *cpt;
    const uint8_t *cls;
    size_t end;            /* end of the segment (exclusive) */
    size_t ws_from, ws_to; /* cached white-space run, for `\s+$` */
} seg;

typedef size_t (*matcher)(seg *s, size_t pos);

/* ------------------------------------------------------------------------ */
/* Class tests                                                               */
/* ------------------------------------------------------------------------ */

static inline bool any_of(const seg *s, size_t p, uint8_t bits) { return p < s->end && (s->cls[p] & bits); }

/* In range and in none of the classes: [^...] over classes. */
static inline bool none_of(const seg *s, size_t p, uint8_t bits) { return p < s->end && !(s->cls[p] & bits); }

static inline bool is_cpt(const seg *s, size_t p, uint32_t c) { return p < s->end && s->cpt[p] == c; }

static inline bool is_newline(const seg *s, size_t p) { return p < s->end && (s->cpt[p] == '\r' || s->cpt[p] == '\n'); }

static size_t run_any(const seg *s, size_t p, uint8_t bits) {
    size_t q = p;
    while (any_of(s, q, bits)) q++;
    return q - p;
}

static size_t run_none(const seg *s, size_t p, uint8_t bits) {
    size_t q = p;
    while (none_of(s, q, bits)) q++;
    return q - p;
}

static inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* The code point a pattern with literal ranges sees (see the file comment). */
static inline uint32_t literal_cpt(const seg *s, size_t p) {
    uint32_t c = s->cpt[p];
    return (c > 0x7F && (s->cls[p] & WS)) ? 0x0B : c;
}

typedef struct cpt_range {
    uint32_t first, last;
} cpt_range;

static bool in_ranges(uint32_t c, const cpt_range *r, size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].last < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && r[lo].first <= c;
}

/* ------------------------------------------------------------------------ */
/* Shared pieces of patterns                                                 */
/* ------------------------------------------------------------------------ */

/* 's|'t|'re|'ve|'m|'ll|'d, case-sensitive (gpt2) or with each letter as
 * [sS] etc. (llama3, qwen2: llama.cpp's spelling of (?i:...)). */
static size_t match_contraction(const seg *s, size_t pos, bool both_cases) {
    if (!is_cpt(s, pos, '\'') || pos + 1 >= s->end) return 0;
    uint32_t a = s->cpt[pos + 1];
    if (both_cases) a = ascii_lower(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= s->end) return 0;
    uint32_t b = s->cpt[pos + 2];
    if (both_cases) b = ascii_lower(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* The white-space tail shared by the gpt2 family:
 * \s+(?!\S) then, where the pattern has it, \s+. A run of n spaces followed
 * by a non-space gives n-1 (the last space goes with the next word). */
static size_t match_space_tail(const seg *s, size_t pos, bool plain_run_too) {
    size_t n = run_any(s, pos, WS);
    if (!n) return 0;
    if (pos + n == s->end) return n;
    if (n > 1) return n - 1;
    return plain_run_too ? n : 0;
}

/* ------------------------------------------------------------------------ */
/* Single-pattern rules                                                      */
/* ------------------------------------------------------------------------ */

/* gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static size_t m_gpt2(seg *s, size_t pos) {
    size_t n = match_contraction(s, pos, false);
    if (n) return n;
    size_t q = pos + (is_cpt(s, pos, ' ') ? 1 : 0);
    if (any_of(s, q, LETTER)) return q - pos + run_any(s, q, LETTER);
    if (any_of(s, q, NUMBER)) return q - pos + run_any(s, q, NUMBER);
    if (none_of(s, q, WS | LETTER | NUMBER)) return q - pos + run_none(s, q, WS | LETTER | NUMBER);
    return match_space_tail(s, pos, false);
}

/* The Llama 3 / Qwen2 / Qwen3.5 shape:
 * (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 * |[^\r\n\p{L}\p{N}]?W+ | \p{N}{1,D} | ?[^\s W \p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * where W is \p{L} (llama3, qwen2) or [\p{L}\p{M}] (qwen35) and D is 3
 * (llama3) or 1 (qwen2, qwen35). */
static size_t match_llama3_shape(const seg *s, size_t pos, uint8_t word, size_t max_digits) {
    size_t n = match_contraction(s, pos, true);
    if (n) return n;

    /* [^\r\n\p{L}\p{N}]?W+ : a one-character prefix is taken when a word follows */
    if (!is_newline(s, pos) && none_of(s, pos, LETTER | NUMBER) && any_of(s, pos + 1, word))
        return 1 + run_any(s, pos + 1, word);
    if (any_of(s, pos, word)) return run_any(s, pos, word);

    if (any_of(s, pos, NUMBER)) {
        n = 1;
        while (n < max_digits && any_of(s, pos + n, NUMBER)) n++;
        return n;
    }

    /*  ?[^\s W \p{N}]+[\r\n]* */
    uint8_t not_other = (uint8_t)(WS | word | NUMBER);
    size_t q = pos + ((is_cpt(s, pos, ' ') && none_of(s, pos + 1, not_other)) ? 1 : 0);
    if (none_of(s, q, not_other)) {
        size_t e = q + run_none(s, q, not_other);
        while (is_newline(s, e)) e++;
        return e - pos;
    }

    /* \s*[\r\n]+ : up to the last line break of the white-space run */
    n = run_any(s, pos, WS);
    if (!n) return 0;
    for (size_t k = n; k > 0; k--)
        if (is_newline(s, pos + k - 1)) return k;
    return match_space_tail(s, pos, true);
}

static size_t m_llama3(seg *s, size_t pos) { return match_llama3_shape(s, pos, LETTER, 3); }
static size_t m_qwen2(seg *s, size_t pos) { return match_llama3_shape(s, pos, LETTER, 1); }
static size_t m_qwen35(seg *s, size_t pos) { return match_llama3_shape(s, pos, LETTER | MARK, 1); }

/* ------------------------------------------------------------------------ */
/* Passes of the multi-pattern rules                                         */
/* ------------------------------------------------------------------------ */

/* [\r\n] */
static size_t m_newline(seg *s, size_t pos) { return is_newline(s, pos) ? 1 : 0; }

/* \p{N}+ */
static size_t m_numbers(seg *s, size_t pos) { return run_any(s, pos, NUMBER); }

/* \p{N} */
static size_t m_number(seg *s, size_t pos) { return any_of(s, pos, NUMBER) ? 1 : 0; }

/* \s?C+ for a class C that contains no white space. */
static size_t match_opt_space_run(const seg *s, size_t pos, bool (*in_class)(const seg *, size_t)) {
    size_t q = pos;
    if (any_of(s, q, WS) && q + 1 < s->end && in_class(s, q + 1)) q++;
    size_t e = q;
    while (e < s->end && in_class(s, e)) e++;
    return e > q ? e - pos : 0;
}

static bool is_letter(const seg *s, size_t p) { return (s->cls[p] & LETTER) != 0; }
static bool is_punct(const seg *s, size_t p) { return (s->cls[p] & PUNCT) != 0; }

/* deepseek-llm's letters: the cased letters listed in its tokenizer.json. */
static const cpt_range deepseek_letters[] = {
    {0x00041, 0x0005A}, {0x00061, 0x0007A}, {0x000B5, 0x000B5}, {0x000C0, 0x000D6}, {0x000D8, 0x000F6},
    {0x000F8, 0x001BA}, {0x001BC, 0x001BF}, {0x001C4, 0x00293}, {0x00295, 0x002AF}, {0x00370, 0x00373},
    {0x00376, 0x00377}, {0x0037B, 0x0037D}, {0x0037F, 0x0037F}, {0x00386, 0x00386}, {0x00388, 0x0038A},
    {0x0038C, 0x0038C}, {0x0038E, 0x003A1}, {0x003A3, 0x003F5}, {0x003F7, 0x00481}, {0x0048A, 0x0052F},
    {0x00531, 0x00556}, {0x010A0, 0x010C5}, {0x013A0, 0x013F5}, {0x013F8, 0x013FD}, {0x01C90, 0x01CBA},
    {0x01CBD, 0x01CBF}, {0x01D00, 0x01D2B}, {0x01D6B, 0x01D77}, {0x01D79, 0x01D9A}, {0x01E00, 0x01F15},
    {0x01F18, 0x01F1D}, {0x01F20, 0x01F45}, {0x01F48, 0x01F4D}, {0x01F50, 0x01F57}, {0x01F59, 0x01F59},
    {0x01F5B, 0x01F5B}, {0x01F5D, 0x01F5D}, {0x01F5F, 0x01F7D}, {0x01F80, 0x01FB4}, {0x01FB6, 0x01FBC},
    {0x01FBE, 0x01FBE}, {0x01FC2, 0x01FC4}, {0x01FC6, 0x01FCC}, {0x01FD0, 0x01FD3}, {0x01FD6, 0x01FDB},
    {0x01FE0, 0x01FEC}, {0x01FF2, 0x01FF4}, {0x01FF6, 0x01FFC}, {0x02102, 0x02102}, {0x02107, 0x02107},
    {0x0210A, 0x02113}, {0x02115, 0x02115}, {0x02119, 0x0211D}, {0x02124, 0x02124}, {0x02126, 0x02126},
    {0x02128, 0x02128}, {0x0212A, 0x0212D}, {0x0212F, 0x02134}, {0x02139, 0x02139}, {0x0213C, 0x0213F},
    {0x02145, 0x02149}, {0x0214E, 0x0214E}, {0x02183, 0x02184}, {0x02C00, 0x02C7B}, {0x02C7E, 0x02CE4},
    {0x02CEB, 0x02CEE}, {0x02CF2, 0x02CF3}, {0x0A640, 0x0A66D}, {0x0A680, 0x0A69B}, {0x0A722, 0x0A76F},
    {0x0A771, 0x0A787}, {0x0A78B, 0x0A78E}, {0x0AB70, 0x0ABBF}, {0x0FB00, 0x0FB06}, {0x0FB13, 0x0FB17},
    {0x0FF21, 0x0FF3A}, {0x0FF41, 0x0FF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* deepseek-llm's punctuation: [!-/:-~！-／：-～‘-‟　-。] (sorted). */
static const cpt_range deepseek_punct[] = {
    {0x00021, 0x0002F}, {0x0003A, 0x0007E}, {0x02018, 0x0201F},
    {0x03000, 0x03002}, {0x0FF01, 0x0FF0F}, {0x0FF1A, 0x0FF5E},
};

/* deepseek's CJK runs: [一-龥ࠀ-一가-퟿] (sorted, overlapping at U+4E00). */
static const cpt_range deepseek_cjk[] = {
    {0x00800, 0x09FA5},
    {0x0AC00, 0x0D7FF},
};

#define N_RANGES(r) (sizeof(r) / sizeof((r)[0]))

static bool is_deepseek_letter(const seg *s, size_t p) {
    return in_ranges(literal_cpt(s, p), deepseek_letters, N_RANGES(deepseek_letters));
}

static bool is_deepseek_punct(const seg *s, size_t p) {
    return in_ranges(literal_cpt(s, p), deepseek_punct, N_RANGES(deepseek_punct));
}

static size_t m_deepseek_letters(seg *s, size_t pos) { return match_opt_space_run(s, pos, is_deepseek_letter); }
static size_t m_deepseek_punct(seg *s, size_t pos) { return match_opt_space_run(s, pos, is_deepseek_punct); }
static size_t m_space_letters(seg *s, size_t pos) { return match_opt_space_run(s, pos, is_letter); }
static size_t m_space_punct(seg *s, size_t pos) { return match_opt_space_run(s, pos, is_punct); }

/* [一-龥ࠀ-一가-퟿]+ */
static size_t m_cjk(seg *s, size_t pos) {
    size_t e = pos;
    while (e < s->end && in_ranges(literal_cpt(s, e), deepseek_cjk, N_RANGES(deepseek_cjk))) e++;
    return e - pos;
}

/* \s+$ : a white-space run that reaches the end of the segment. The run's
 * end is cached so that a long run not at the end costs linear time. */
static size_t m_space_at_end(seg *s, size_t pos) {
    if (!any_of(s, pos, WS)) return 0;
    if (!(pos >= s->ws_from && pos < s->ws_to)) {
        s->ws_from = pos;
        s->ws_to = pos + run_any(s, pos, WS);
    }
    return s->ws_to == s->end ? s->ws_to - pos : 0;
}

/* [\p{P}\$\+<=>\^~\|]+ */
static bool is_default_punct(const seg *s, size_t p) {
    uint32_t c = s->cpt[p];
    return (s->cls[p] & PUNCT) || (c < 0x80 && c && strchr("$+<=>^~|", (int)c));
}

static size_t m_default_punct(seg *s, size_t pos) {
    size_t e = pos;
    while (e < s->end && is_default_punct(s, e)) e++;
    return e - pos;
}

/* [0-9][0-9][0-9] */
static size_t m_three_digits(seg *s, size_t pos) {
    if (pos + 3 > s->end) return 0;
    for (size_t k = 0; k < 3; k++)
        if (s->cpt[pos + k] < '0' || s->cpt[pos + k] > '9') return 0;
    return 3;
}

/* ------------------------------------------------------------------------ */
/* Rules and the split driver                                                */
/* ------------------------------------------------------------------------ */

#define MAX_PASSES 6

typedef struct rule {
    const char *name;
    size_t n_passes;
    matcher passes[MAX_PASSES];
} rule;

static const rule rules[] = {
    [KR_PRETOK_DEFAULT] = {"default", 4, {m_default_punct, m_gpt2, m_numbers, m_three_digits}},
    [KR_PRETOK_GPT2] = {"gpt-2", 1, {m_gpt2}},
    [KR_PRETOK_LLAMA3] = {"llama3", 1, {m_llama3}},
    [KR_PRETOK_QWEN2] = {"qwen2", 1, {m_qwen2}},
    [KR_PRETOK_QWEN35] = {"qwen35", 1, {m_qwen35}},
    [KR_PRETOK_DEEPSEEK_LLM] = {"deepseek-llm",
                                6,
                                {m_newline, m_deepseek_letters, m_deepseek_punct, m_space_at_end, m_cjk, m_numbers}},
    [KARA_PRETOK_DEEPSEEK_CODER] = {"deepseek-coder", 5, {m_newline, m_space_letters, m_space_punct, m_cjk, m_number}},
};

/* One pass over every segment of `in`; returns the number of words written
 * to `out`. Each word is non-empty, so out never needs more than n entries. */
static size_t split_pass(matcher match, const uint32_t *cpt, const uint8_t *cls, const uint32_t *in, size_t n_in,
                         uint32_t *out) {
    size_t n_out = 0, start = 0;
    for (size_t i = 0; i < n_in; i++) {
        seg s = {cpt, cls, in[i], 0, 0};
        size_t last = start, pos = start;
        while (pos < s.end) {
            size_t len = match(&s, pos);
            if (!len) {
                pos++;
                continue;
            }
            if (pos > last) out[n_out++] = (uint32_t)pos;
            pos += len;
            out[n_out++] = (uint32_t)pos;
            last = pos;
        }
        if (last < s.end) out[n_out++] = (uint32_t)s.end;
        start = s.end;
    }
    return n_out;
}

size_t kr_pretokenize(kr_pretok kind, const uint32_t *cpts, const uint8_t *cls, size_t n, uint32_t *ends,
                      uint32_t *tmp) {
    if (n == 0) return 0;
    const rule *r = &rules[kind];
    uint32_t whole = (uint32_t)n;
    const uint32_t *in = &whole;
    size_t n_in = 1;
    for (size_t p = 0; p < r->n_passes; p++) {
        /* alternate buffers so that the last pass writes `ends` */
        uint32_t *out = ((r->n_passes - 1 - p) % 2 == 0) ? ends : tmp;
        n_in = split_pass(r->passes[p], cpts, cls, in, n_in, out);
        in = out;
    }
    return n_in;
}

/* tokenizer.ggml.pre names accepted, grouped by the rule llama.cpp gives
 * them. */
typedef struct pre_name {
    const char *name;
    kr_pretok kind;
    bool ignore_merges;
    bool add_bos;
} pre_name;

static const pre_name pre_names[] = {
    {"default", KR_PRETOK_DEFAULT, false, false},
    {"gpt-2", KR_PRETOK_GPT2, false, false},
    {"phi-2", KR_PRETOK_GPT2, false, false},
    {"mpt", KR_PRETOK_GPT2, false, false},
    {"olmo", KR_PRETOK_GPT2, false, false},
    {"jais", KR_PRETOK_GPT2, false, false},
    {"llama3", KR_PRETOK_LLAMA3, true, true},
    {"llama-v3", KR_PRETOK_LLAMA3, true, true},
    {"llama-bpe", KR_PRETOK_LLAMA3, true, true},
    {"falcon3", KR_PRETOK_LLAMA3, true, true},
    {"dbrx", KR_PRETOK_LLAMA3, false, false},
    {"smaug-bpe", KR_PRETOK_LLAMA3, false, false},
    {"qwen2", KR_PRETOK_QWEN2, false, false},
    {"deepseek-r1-qwen", KR_PRETOK_QWEN2, false, false},
    {"stablelm2", KR_PRETOK_QWEN2, false, false},
    {"qwen35", KR_PRETOK_QWEN35, false, false},
    {"deepseek-llm", KR_PRETOK_DEEPSEEK_LLM, false, false},
    {"deepseek-coder", KARA_PRETOK_DEEPSEEK_CODER, false, false},
};

bool kr_pretok_lookup(const char *name, size_t len, kr_pretok_info *out) {
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        const pre_name *p = &pre_names[i];
        if (strlen(p->name) == len && memcmp(p->name, name, len) == 0) {
            out->kind = p->kind;
            out->ignore_merges = p->ignore_merges;
            out->add_bos = p->add_bos;
            return true;
        }
    }
    return false;
}

const char *kr_pretok_name(kr_pretok kind) { return rules[kind].name; }
