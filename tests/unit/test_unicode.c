/*
 * test_unicode.c - the generated Unicode tables and the UTF-8 rules:
 *   - code points per general category equal the totals that the Unicode
 *     15.0 file extracted/DerivedGeneralCategory.txt states (a derivation
 *     independent of UnicodeData.txt, which the generator reads);
 *   - White_Space is exactly PropList.txt's 25 code points;
 *   - case mappings and canonical decompositions on known characters, and
 *     every decomposition fully decomposed;
 *   - UTF-8 decoding of malformed input as llama.cpp does it, encoding
 *     round-trips;
 *   - GPT-2's byte alphabet is a bijection onto U+0021..U+0143.
 */
#include <string.h>

#include "test_util.h"
#include "unicode.h"
#include "vocab_impl.h"

static void test_categories(void) {
    /* Totals from DerivedGeneralCategory-15.0.0.txt */
    static const struct {
        kr_ucat cat;
        long count;
    } totals[] = {
        {KR_UCAT_Cn, 825345}, {KR_UCAT_Lu, 1831}, {KR_UCAT_Ll, 2233},   {KR_UCAT_Lt, 31},   {KR_UCAT_Lm, 397},
        {KR_UCAT_Lo, 131612}, {KR_UCAT_Mn, 1985}, {KR_UCAT_Me, 13},     {KR_UCAT_Mc, 452},  {KR_UCAT_Nd, 680},
        {KR_UCAT_Nl, 236},    {KR_UCAT_No, 915},  {KR_UCAT_Zs, 17},     {KR_UCAT_Zl, 1},    {KR_UCAT_Zp, 1},
        {KR_UCAT_Cc, 65},     {KR_UCAT_Cf, 170},  {KR_UCAT_Co, 137468}, {KR_UCAT_Cs, 2048}, {KR_UCAT_Pd, 26},
        {KR_UCAT_Ps, 79},     {KR_UCAT_Pe, 77},   {KR_UCAT_Pc, 10},     {KR_UCAT_Po, 628},  {KR_UCAT_Sm, 948},
        {KR_UCAT_Sc, 63},     {KR_UCAT_Sk, 125},  {KR_UCAT_So, 6634},   {KR_UCAT_Pi, 12},   {KR_UCAT_Pf, 10},
    };
    long count[KR_UCAT_COUNT] = {0};
    long ws = 0, letters = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        kr_ucat cat = kr_unicode_category(c);
        if ((unsigned)cat < KR_UCAT_COUNT) count[cat]++;
        uint8_t cls = kr_unicode_class(c);
        if (cls & KR_UCLASS_WHITESPACE) ws++;
        if (cls & KR_UCLASS_LETTER) letters++;
    }
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++)
        CHECK_MSG(count[totals[i].cat] == totals[i].count, "category %d has %ld code points, Unicode says %ld",
                  totals[i].cat, count[totals[i].cat], totals[i].count);
    CHECK_EQ_INT(letters, 1831 + 2233 + 31 + 397 + 131612);
    CHECK_EQ_INT(ws, 25);

    static const uint32_t white[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,
                                     0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof white / sizeof white[0]; i++)
        CHECK_MSG(kr_unicode_class(white[i]) & KR_UCLASS_WHITESPACE, "U+%04X is white space", white[i]);
    CHECK(!(kr_unicode_class(0x200B) & KR_UCLASS_WHITESPACE)); /* zero width space is Cf */
    CHECK(!(kr_unicode_class(0x1C) & KR_UCLASS_WHITESPACE));

    CHECK_EQ_INT(kr_unicode_category('A'), KR_UCAT_Lu);
    CHECK_EQ_INT(kr_unicode_category('z'), KR_UCAT_Ll);
    CHECK_EQ_INT(kr_unicode_category('7'), KR_UCAT_Nd);
    CHECK_EQ_INT(kr_unicode_category('$'), KR_UCAT_Sc);
    CHECK_EQ_INT(kr_unicode_category('_'), KR_UCAT_Pc);
    CHECK_EQ_INT(kr_unicode_category(0x0301), KR_UCAT_Mn);
    CHECK_EQ_INT(kr_unicode_category(0x4E00), KR_UCAT_Lo); /* inside a First/Last range */
    CHECK_EQ_INT(kr_unicode_category(0xD7A3), KR_UCAT_Lo); /* last Hangul syllable */
    CHECK_EQ_INT(kr_unicode_category(0x1F600), KR_UCAT_So);
    CHECK_EQ_INT(kr_unicode_category(0x0378), KR_UCAT_Cn);
    CHECK_EQ_INT(kr_unicode_category(0x110000), KR_UCAT_Cn);
    CHECK_EQ_INT(kr_unicode_class(0x00BD), KR_UCLASS_NUMBER); /* ½ is No */
    CHECK_EQ_INT(kr_unicode_class(0x3002), KR_UCLASS_PUNCT);
    CHECK_EQ_INT(kr_unicode_class(0x3000), KR_UCLASS_SEPARATOR | KR_UCLASS_WHITESPACE);
    CHECK_EQ_INT(kr_unicode_class(0xFFFD), KR_UCLASS_SYMBOL);
}

static void test_case_and_nfd(void) {
    CHECK_EQ_INT(kr_unicode_tolower('A'), 'a');
    CHECK_EQ_INT(kr_unicode_tolower('a'), 'a');
    CHECK_EQ_INT(kr_unicode_tolower(0xC9), 0xE9);
    CHECK_EQ_INT(kr_unicode_tolower(0x130), 'i');
    CHECK_EQ_INT(kr_unicode_tolower(0x212A), 'k'); /* Kelvin sign */
    CHECK_EQ_INT(kr_unicode_toupper(0xFF), 0x178);
    CHECK_EQ_INT(kr_unicode_toupper(0x1C6), 0x1C4);
    CHECK_EQ_INT(kr_unicode_toupper(0x10428), 0x10400);
    CHECK_EQ_INT(kr_unicode_toupper('!'), '!');

    uint32_t d[KARA_UNICODE_MAX_DECOMP];
    CHECK(kr_unicode_nfd(0xE9, d) == 2 && d[0] == 'e' && d[1] == 0x301);
    CHECK(kr_unicode_nfd(0x212B, d) == 2 && d[0] == 'A' && d[1] == 0x30A);
    CHECK(kr_unicode_nfd(0x1F87, d) == 4 && d[0] == 0x3B1 && d[1] == 0x314 && d[2] == 0x342 && d[3] == 0x345);
    CHECK(kr_unicode_nfd(0xAC00, d) == 2 && d[0] == 0x1100 && d[1] == 0x1161);
    CHECK(kr_unicode_nfd(0xAC01, d) == 3 && d[0] == 0x1100 && d[1] == 0x1161 && d[2] == 0x11A8);
    CHECK(kr_unicode_nfd('A', d) == 1 && d[0] == 'A');

    /* every decomposition is complete: its parts do not decompose further */
    long n_decomposed = 0, not_full = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        size_t n = kr_unicode_nfd(c, d);
        if (n == 1 && d[0] == c) continue;
        n_decomposed++;
        for (size_t i = 0; i < n; i++) {
            uint32_t e[KARA_UNICODE_MAX_DECOMP];
            if (kr_unicode_nfd(d[i], e) != 1 || e[0] != d[i]) not_full++;
        }
    }
    /* 2061 listed canonical decompositions + 11172 Hangul syllables */
    CHECK_EQ_INT(n_decomposed, 2061 + 11172);
    CHECK_EQ_INT(not_full, 0);
}

static void test_utf8(void) {
    size_t n;
    CHECK(kr_utf8_decode((const uint8_t *)"\xC3\xA9", 2, &n) == 0xE9 && n == 2);
    CHECK(kr_utf8_decode((const uint8_t *)"\xF0\x9F\x98\x80", 4, &n) == 0x1F600 && n == 4);
    CHECK(kr_utf8_decode((const uint8_t *)"\xC3", 1, &n) == 0xFFFD && n == 1); /* truncated */
    CHECK(kr_utf8_decode((const uint8_t *)"\xE4\xBD"
                                          "A",
                         3, &n) == 0xFFFD &&
          n == 1);                                                             /* bad continuation */
    CHECK(kr_utf8_decode((const uint8_t *)"\x80", 1, &n) == 0xFFFD && n == 1); /* lone continuation */
    CHECK(kr_utf8_decode((const uint8_t *)"\xFF", 1, &n) == 0xFFFD && n == 1);
    CHECK(kr_utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &n) == 0xFFFD && n == 1); /* > U+10FFFF */
    /* as in llama.cpp: overlong forms and surrogates decode to their value */
    CHECK(kr_utf8_decode((const uint8_t *)"\xC0\x80", 2, &n) == 0 && n == 2);
    CHECK(kr_utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &n) == 0xD800 && n == 3);
    CHECK_EQ_INT(kr_utf8_seq_len(0x41), 1);
    CHECK_EQ_INT(kr_utf8_seq_len(0x80), 1);
    CHECK_EQ_INT(kr_utf8_seq_len(0xC3), 2);
    CHECK_EQ_INT(kr_utf8_seq_len(0xE2), 3);
    CHECK_EQ_INT(kr_utf8_seq_len(0xF0), 4);

    long bad = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        uint8_t buf[4];
        size_t k = kr_utf8_encode(c, buf);
        if (kr_utf8_decode(buf, k, &n) != c || n != k) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_gpt2_bytes(void) {
    bool seen[0x144] = {false};
    int above = 0, bad = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t c = kr_bpe_byte_to_cpt((uint8_t)b);
        if (c < 0x21 || c > 0x143 || seen[c])
            bad++;
        else
            seen[c] = true;
        if (kr_bpe_cpt_to_byte(c) != b) bad++;
        if (c >= 0x100) above++;
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (printable && c != (uint32_t)b) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(above, 68);
    CHECK_EQ_INT(kr_bpe_byte_to_cpt(' '), 0x120);  /* 'Ġ' */
    CHECK_EQ_INT(kr_bpe_byte_to_cpt('\n'), 0x10A); /* 'Ċ' */
    CHECK_EQ_INT(kr_bpe_cpt_to_byte(0x144), -1);
    CHECK_EQ_INT(kr_bpe_cpt_to_byte(0x20), -1);
}

int main(void) {
    printf("Unicode tables: version %s\n", kr_unicode_version);
    test_categories();
    test_case_and_nfd();
    test_utf8();
    test_gpt2_bytes();
    return kr_test_finish();
}
