/*
 * unicode.c - lookups over the generated Unicode tables (unicode_tables.c)
 * and the UTF-8 decoding rules the tokenizers share.
 */
#include "unicode.h"

#define PROP_CATEGORY_MASK 0x1Fu
#define PROP_WHITESPACE 0x20u

/* Hangul syllable composition constants (Unicode 15, section 3.12). */
#define HANGUL_S_BASE 0xAC00u
#define HANGUL_L_BASE 0x1100u
#define HANGUL_V_BASE 0x1161u
#define HANGUL_T_BASE 0x11A7u
#define HANGUL_L_COUNT 19u
#define HANGUL_V_COUNT 21u
#define HANGUL_T_COUNT 28u
#define HANGUL_N_COUNT (HANGUL_V_COUNT * HANGUL_T_COUNT)
#define HANGUL_S_COUNT (HANGUL_L_COUNT * HANGUL_N_COUNT)

static uint8_t props_of(uint32_t cpt) {
    if (cpt >= 0x110000u) return 0;
    unsigned shift = kr_unicode_block_shift;
    uint32_t block = kr_unicode_stage1[cpt >> shift];
    return kr_unicode_stage2[(block << shift) | (cpt & ((1u << shift) - 1))];
}

kr_ucat kr_unicode_category(uint32_t cpt) { return (kr_ucat)(props_of(cpt) & PROP_CATEGORY_MASK); }

/* The regex class each general category belongs to. */
static const uint8_t category_class[KR_UCAT_COUNT] = {
    [KR_UCAT_Cn] = KR_UCLASS_OTHER,     [KR_UCAT_Lu] = KR_UCLASS_LETTER,    [KR_UCAT_Ll] = KR_UCLASS_LETTER,
    [KR_UCAT_Lt] = KR_UCLASS_LETTER,    [KR_UCAT_Lm] = KR_UCLASS_LETTER,    [KR_UCAT_Lo] = KR_UCLASS_LETTER,
    [KR_UCAT_Mn] = KR_UCLASS_MARK,      [KR_UCAT_Mc] = KR_UCLASS_MARK,      [KR_UCAT_Me] = KR_UCLASS_MARK,
    [KR_UCAT_Nd] = KR_UCLASS_NUMBER,    [KR_UCAT_Nl] = KR_UCLASS_NUMBER,    [KR_UCAT_No] = KR_UCLASS_NUMBER,
    [KR_UCAT_Pc] = KR_UCLASS_PUNCT,     [KR_UCAT_Pd] = KR_UCLASS_PUNCT,     [KR_UCAT_Ps] = KR_UCLASS_PUNCT,
    [KR_UCAT_Pe] = KR_UCLASS_PUNCT,     [KR_UCAT_Pi] = KR_UCLASS_PUNCT,     [KR_UCAT_Pf] = KR_UCLASS_PUNCT,
    [KR_UCAT_Po] = KR_UCLASS_PUNCT,     [KR_UCAT_Sm] = KR_UCLASS_SYMBOL,    [KR_UCAT_Sc] = KR_UCLASS_SYMBOL,
    [KR_UCAT_Sk] = KR_UCLASS_SYMBOL,    [KR_UCAT_So] = KR_UCLASS_SYMBOL,    [KR_UCAT_Zs] = KR_UCLASS_SEPARATOR,
    [KR_UCAT_Zl] = KR_UCLASS_SEPARATOR, [KR_UCAT_Zp] = KR_UCLASS_SEPARATOR, [KR_UCAT_Cc] = KR_UCLASS_OTHER,
    [KR_UCAT_Cf] = KR_UCLASS_OTHER,     [KR_UCAT_Cs] = KR_UCLASS_OTHER,     [KR_UCAT_Co] = KR_UCLASS_OTHER,
};

uint8_t kr_unicode_class(uint32_t cpt) {
    uint8_t p = props_of(cpt);
    uint8_t cls = category_class[p & PROP_CATEGORY_MASK];
    return (p & PROP_WHITESPACE) ? (uint8_t)(cls | KR_UCLASS_WHITESPACE) : cls;
}

/* Binary search in a sorted {from, to} table; cpt itself when absent. */
static uint32_t map_lookup(const uint32_t (*table)[2], size_t n, uint32_t cpt) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table[mid][0] < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < n && table[lo][0] == cpt) ? table[lo][1] : cpt;
}

uint32_t kr_unicode_tolower(uint32_t cpt) {
    if (cpt < 0x80) return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
    return map_lookup(kr_unicode_lower, kr_unicode_lower_count, cpt);
}

uint32_t kr_unicode_toupper(uint32_t cpt) {
    if (cpt < 0x80) return (cpt >= 'a' && cpt <= 'z') ? cpt - 32 : cpt;
    return map_lookup(kr_unicode_upper, kr_unicode_upper_count, cpt);
}

size_t kr_unicode_nfd(uint32_t cpt, uint32_t out[KARA_UNICODE_MAX_DECOMP]) {
    if (cpt >= HANGUL_S_BASE && cpt < HANGUL_S_BASE + HANGUL_S_COUNT) {
        uint32_t s = cpt - HANGUL_S_BASE;
        out[0] = HANGUL_L_BASE + s / HANGUL_N_COUNT;
        out[1] = HANGUL_V_BASE + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
        uint32_t t = s % HANGUL_T_COUNT;
        if (!t) return 2;
        out[2] = HANGUL_T_BASE + t;
        return 3;
    }
    size_t lo = 0, hi = kr_unicode_nfd_index_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kr_unicode_nfd_index[mid][0] < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < kr_unicode_nfd_index_count && kr_unicode_nfd_index[lo][0] == cpt) {
        uint32_t first = kr_unicode_nfd_index[lo][1], n = kr_unicode_nfd_index[lo][2];
        for (uint32_t i = 0; i < n; i++) out[i] = kr_unicode_nfd_data[first + i];
        return n;
    }
    out[0] = cpt;
    return 1;
}

size_t kr_utf8_seq_len(uint8_t lead) {
    static const uint8_t len_by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len_by_high_nibble[lead >> 4];
}

/* Follows llama.cpp's unicode_cpts_from_utf8 so token ids agree with it on
 * malformed input; values past U+10FFFF (which llama.cpp cannot re-encode)
 * count as malformed too. */
uint32_t kr_utf8_decode(const uint8_t *s, size_t len, size_t *n) {
    uint8_t b = s[0];
    *n = 1;
    if (b < 0x80) return b;
    if ((b & 0xE0) == 0xC0) {
        if (len < 2 || (s[1] & 0xC0) != 0x80) return 0xFFFD;
        *n = 2;
        return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3Fu);
    }
    if ((b & 0xF0) == 0xE0) {
        if (len < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0xFFFD;
        *n = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3Fu);
    }
    if ((b & 0xF8) == 0xF0) {
        if (len < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0xFFFD;
        uint32_t c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
            (s[3] & 0x3Fu);
        if (c > 0x10FFFF) return 0xFFFD;
        *n = 4;
        return c;
    }
    return 0xFFFD; /* continuation byte or 0xF8..0xFF as a lead */
}

size_t kr_utf8_encode(uint32_t cpt, uint8_t out[4]) {
    if (cpt < 0x80) {
        out[0] = (uint8_t)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cpt >> 6));
        out[1] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cpt >> 12));
        out[1] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cpt >> 18));
    out[1] = (uint8_t)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cpt & 0x3F));
    return 4;
}
