/*
 * test_tokenizer_vocab.c - the tokenizers against llama.cpp's vocabularies
 * and test vectors in ../shared:
 *   - every case of every vocab/ggml-vocab-NAME.gguf.inp/.out pair gives the
 *     listed ids exactly (add_special=false, parse_special=false, as
 *     llama.cpp's test-tokenizer-0 tokenizes them);
 *   - detokenize(tokenize(s)) == s on those cases and on random valid UTF-8;
 *     malformed UTF-8 tokenizes like the same text with each bad byte
 *     replaced by U+FFFD (BPE) or round-trips byte for byte (SPM);
 *   - special tokens on real vocabularies, end-of-generation tokens;
 *   - the prompt ids and greedy text of every ../shared/reference model;
 *   - SPM word-by-word merging gives the same ids as merging the whole text;
 *   - speed: 1 MB of mixed text (figure printed; a bound that catches a
 *     quadratic blow-up, not a benchmark).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "ref_json.h"
#include "test_util.h"
#include "vocab.h"
#include "vocab_impl.h"

static const char *shared;

static const char *const vocab_names[] = {"qwen2",        "qwen35",         "llama-bpe", "llama-spm",
                                          "deepseek-llm", "deepseek-coder", "gpt-2",     "phi-3"};
#define N_VOCABS (sizeof vocab_names / sizeof vocab_names[0])

typedef struct loaded {
    kara_gguf *g;
    kr_vocab v;
} loaded;

static bool open_vocab(const char *path, loaded *l) {
    kara_status st = kara_gguf_open(path, &l->g);
    if (!st) st = kr_vocab_load(&l->v, l->g);
    CHECK_MSG(st == KARA_OK, "load %s: %s", path, kara_last_error());
    if (st) kara_gguf_close(l->g);
    return st == KARA_OK;
}

static void close_vocab(loaded *l) {
    kr_vocab_free(&l->v);
    kara_gguf_close(l->g);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Tokenize into a malloc'd array; returns the count (or the error). */
static int32_t tokenize(const kr_vocab *v, const char *text, size_t len, bool add, bool parse, int32_t **ids) {
    int32_t cap = (int32_t)len + 16;
    *ids = malloc((size_t)cap * sizeof **ids);
    return kr_vocab_tokenize(v, text, len, *ids, cap, add, parse);
}

/* detokenize(ids) == want? */
static bool round_trips(const kr_vocab *v, const int32_t *ids, int32_t n, const char *want, size_t len) {
    size_t cap = len * 2 + 64;
    char *back = malloc(cap);
    int32_t m = kr_vocab_detokenize(v, ids, n, back, (int32_t)cap, true);
    bool ok = m >= 0 && (size_t)m == len && memcmp(back, want, len) == 0;
    free(back);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Test vectors                                                              */
/* ------------------------------------------------------------------------ */

static void test_vectors(const char *name, const kr_vocab *v) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", name);
    size_t n_inp, n_out;
    char *inp = kr_test_read_file(kr_test_path(shared, rel), &n_inp);
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", name);
    char *out = kr_test_read_file(kr_test_path(shared, rel), &n_out);
    CHECK_MSG(inp && out, "%s: test vectors readable", name);
    if (!inp || !out) {
        free(inp);
        free(out);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = inp, *line = out;
    int cases = 0, ok = 0, trips = 0;
    for (;;) {
        char *e = strstr(s, sep);
        char *eol = strchr(line, '\n');
        if (!e || !eol) break;
        *eol = 0;
        /* expected ids, space-separated */
        int32_t want[4096];
        int n_want = 0;
        for (char *p = line; *p;) {
            char *q;
            long x = strtol(p, &q, 10);
            if (q == p) break;
            if (n_want < 4096) want[n_want++] = (int32_t)x;
            p = q;
        }
        int32_t *ids;
        size_t len = (size_t)(e - s);
        int32_t n = tokenize(v, s, len, false, false, &ids);
        bool same = n == n_want && memcmp(ids, want, (size_t)n_want * sizeof *ids) == 0;
        if (same) {
            ok++;
        } else {
            char got[512];
            int k = 0;
            for (int32_t i = 0; i < n && k < 400; i++) k += snprintf(got + k, sizeof got - (size_t)k, " %d", ids[i]);
            got[k] = 0;
            CHECK_MSG(false, "%s case %d '%.*s': got%s, want %s", name, cases, (int)(len > 60 ? 60 : len), s, got,
                      line);
        }
        if (n >= 0 && round_trips(v, ids, n, s, len))
            trips++;
        else
            CHECK_MSG(false, "%s case %d '%.*s' does not round-trip", name, cases, (int)(len > 60 ? 60 : len), s);
        free(ids);
        cases++;
        s = e + strlen(sep);
        line = eol + 1;
    }
    printf("%-15s %d/%d cases match, %d round-trip\n", name, ok, cases, trips);
    CHECK_MSG(cases >= 40, "%s: only %d cases found", name, cases);
    CHECK_EQ_INT(ok, cases);
    free(inp);
    free(out);
}

/* ------------------------------------------------------------------------ */
/* Random text                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)((rng_state >> 11) % n);
}

static size_t put_utf8(uint32_t c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* A code point from a mix of scripts, white space, marks and emoji. */
static uint32_t random_cpt(void) {
    static const uint32_t pools[][2] = {
        {0x20, 0x7E},     {0x20, 0x7E},     {0x20, 0x7E},       {0x61, 0x7A},        {0x61, 0x7A},     {0x30, 0x39},
        {0x09, 0x0D},     {0xA0, 0x24F},    {0x300, 0x36F},     {0x370, 0x3FF},      {0x400, 0x4FF},   {0x591, 0x6FF},
        {0x900, 0x97F},   {0xE00, 0xE7F},   {0x2000, 0x206F},   {0x2190, 0x23FF},    {0x3000, 0x30FF}, {0x4E00, 0x9FFF},
        {0xAC00, 0xD7A3}, {0xFF01, 0xFF5E}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF},
    };
    const uint32_t *p = pools[rnd(sizeof pools / sizeof pools[0])];
    for (;;) {
        uint32_t c = p[0] + rnd(p[1] - p[0] + 1);
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        if (c == 0x2581) continue; /* SentencePiece's space stand-in */
        return c;
    }
}

/* Independent statement of llama.cpp's UTF-8 rule: a malformed sequence, or
 * one above U+10FFFF, stands for U+FFFD and consumes one byte; everything
 * else is its value, re-encoded. Returns the new length. */
static size_t sanitize(const unsigned char *s, size_t n, char *o) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        size_t need = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : 9;
        bool ok = need != 9;
        uint32_t c = need == 0 ? b : need == 1 ? (b & 0x1Fu) : need == 2 ? (b & 0x0Fu) : (b & 0x07u);
        for (size_t j = 1; ok && j <= need; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
                ok = false;
            else
                c = (c << 6) | (s[i + j] & 0x3Fu);
        }
        if (ok && c > 0x10FFFF) ok = false;
        if (!ok) {
            k += put_utf8(0xFFFD, o + k);
            i++;
        } else {
            k += put_utf8(c, o + k);
            i += need + 1;
        }
    }
    return k;
}

static void test_random(const char *name, const kr_vocab *v) {
    int bad_trip = 0, bad_invalid = 0;
    char text[4096], clean[8192];
    for (int iter = 0; iter < 150; iter++) {
        size_t len = 0, n_cp = 1 + rnd(300);
        for (size_t i = 0; i < n_cp; i++) len += put_utf8(random_cpt(), text + len);
        int32_t *ids;
        int32_t n = tokenize(v, text, len, false, false, &ids);
        if (n < 0 || !round_trips(v, ids, n, text, len)) {
            if (!bad_trip++) CHECK_MSG(false, "%s: random text %d does not round-trip", name, iter);
        }
        free(ids);

        /* arbitrary bytes */
        len = 1 + rnd(400);
        for (size_t i = 0; i < len; i++) text[i] = (char)(rnd(3) ? 0x80 + rnd(128) : rnd(256));
        n = tokenize(v, text, len, true, true, &ids);
        if (n < 0) {
            if (!bad_invalid++) CHECK_MSG(false, "%s: malformed UTF-8 gives %d", name, n);
            free(ids);
            continue;
        }
        if (v->kind == KR_VOCAB_SPM) {
            int32_t skip = v->add_bos ? 1 : 0;
            if (!round_trips(v, ids + skip, n - skip, text, len) && !bad_invalid++)
                CHECK_MSG(false, "%s: bytes %d do not round-trip", name, iter);
        } else {
            size_t clen = sanitize((const unsigned char *)text, len, clean);
            int32_t *ids2;
            int32_t n2 = tokenize(v, clean, clen, true, true, &ids2);
            int32_t skip = v->add_bos ? 1 : 0;
            bool same = n2 == n && memcmp(ids, ids2, (size_t)n * sizeof *ids) == 0;
            if ((!same || !round_trips(v, ids + skip, n - skip, clean, clen)) && !bad_invalid++)
                CHECK_MSG(false, "%s: malformed bytes %d differ from their U+FFFD form", name, iter);
            free(ids2);
        }
        free(ids);
    }
    CHECK_MSG(bad_trip == 0, "%s: %d random texts fail to round-trip", name, bad_trip);
    CHECK_MSG(bad_invalid == 0, "%s: %d malformed inputs misbehave", name, bad_invalid);
}

/* ------------------------------------------------------------------------ */
/* Special tokens on real vocabularies                                       */
/* ------------------------------------------------------------------------ */

/* ids(text) == concatenation of the given parts, each a token text to find
 * (special) or plain text to tokenize on its own. */
static void expect_parts(const kr_vocab *v, const char *text, const char *const *parts, const bool *is_special,
                         size_t n_parts) {
    int32_t want[512];
    int32_t n_want = 0;
    for (size_t i = 0; i < n_parts; i++) {
        if (is_special[i]) {
            int32_t id = kr_vocab_find(v, parts[i], strlen(parts[i]));
            CHECK_MSG(id >= 0, "token '%s' exists", parts[i]);
            want[n_want++] = id;
        } else {
            int32_t n = kr_vocab_tokenize(v, parts[i], strlen(parts[i]), want + n_want, 512 - n_want, false, false);
            CHECK(n >= 0);
            if (n > 0) n_want += n;
        }
    }
    int32_t *ids;
    int32_t n = tokenize(v, text, strlen(text), false, true, &ids);
    CHECK_MSG(n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0, "special parsing of '%s'", text);
    free(ids);
}

static bool contains(const int32_t *ids, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_special(const char *name, const kr_vocab *v) {
    if (!strcmp(name, "qwen2")) {
        const char *parts[] = {"<|im_start|>", "user\nHello", "<|im_end|>", "\n"};
        const bool sp[] = {true, false, true, false};
        expect_parts(v, "<|im_start|>user\nHello<|im_end|>\n", parts, sp, 4);
        int32_t *ids;
        const char *t = "<|im_start|>user<|im_end|>";
        int32_t n = tokenize(v, t, strlen(t), false, false, &ids);
        CHECK(n > 2 && !contains(ids, n, 151644) && !contains(ids, n, 151645));
        CHECK(round_trips(v, ids, n, t, strlen(t)));
        free(ids);
        CHECK(kr_vocab_is_eog(v, 151643) && kr_vocab_is_eog(v, 151645) && !kr_vocab_is_eog(v, 151644));
        CHECK_EQ_INT(v->eot, 151645);
    } else if (!strcmp(name, "llama-bpe")) {
        const char *parts[] = {"<|begin_of_text|>", "<|start_header_id|>", "user", "<|end_header_id|>", "\n\nHi",
                               "<|eot_id|>"};
        const bool sp[] = {true, true, false, true, false, true};
        expect_parts(v, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", parts, sp, 6);
        CHECK(kr_vocab_is_eog(v, 128001) && kr_vocab_is_eog(v, 128009) && !kr_vocab_is_eog(v, 128000));
        CHECK(v->add_bos && v->bos == 128000);
    } else if (!strcmp(name, "deepseek-coder")) {
        /* a user-defined FIM token that llama.cpp turns into a control one */
        const char *hole = "<\xef\xbd\x9c"
                           "fim\xe2\x96\x81hole\xef\xbd\x9c>";
        int32_t id = kr_vocab_find(v, hole, strlen(hole));
        CHECK(id == 32015 && kr_vocab_token_type(v, id) == KR_TOKEN_CONTROL);
        char t[128];
        snprintf(t, sizeof t, "x%sy", hole);
        int32_t *ids;
        int32_t n = tokenize(v, t, strlen(t), false, false, &ids);
        CHECK(n > 0 && !contains(ids, n, id));
        free(ids);
        n = tokenize(v, t, strlen(t), false, true, &ids);
        CHECK(n > 0 && contains(ids, n, id));
        free(ids);
        /* user-defined single characters are matched even without parse_special */
        int32_t oslash = kr_vocab_find(v, "\xc3\xb8", 2);
        CHECK(oslash >= 32000 && kr_vocab_token_type(v, oslash) == KR_TOKEN_USER_DEFINED);
        n = tokenize(v,
                     "a\xc3\xb8"
                     "b",
                     4, false, false, &ids);
        CHECK(n == 3 && ids[1] == oslash);
        free(ids);
    } else if (!strcmp(name, "phi-3")) {
        const char *parts[] = {"<|user|>", "hello", "<|end|>", "hi"};
        const bool sp[] = {true, false, true, false};
        /* Phi-3 drops the white space after its special tokens */
        expect_parts(v, "<|user|>\nhello<|end|> \n hi", parts, sp, 4);
        CHECK(kr_vocab_is_eog(v, 32000) && kr_vocab_is_eog(v, 32007));
    } else if (!strcmp(name, "llama-spm")) {
        CHECK(kr_vocab_is_eog(v, 2) && !kr_vocab_is_eog(v, 1));
        CHECK_EQ_INT(v->nl, 13);
    }
}

/* SPM: merging word by word must equal merging the whole text. */
static void test_spm_word_split(const char *name, const kr_vocab *v, const char *text, size_t len) {
    if (v->kind != KR_VOCAB_SPM) return;
    CHECK_MSG(v->impl->spm_word_split, "%s merges word by word", name);
    int32_t *a, *b;
    int32_t na = tokenize(v, text, len, true, false, &a);
    v->impl->spm_word_split = false;
    int32_t nb = tokenize(v, text, len, true, false, &b);
    v->impl->spm_word_split = true;
    CHECK_MSG(na == nb && na > 0 && memcmp(a, b, (size_t)na * sizeof *a) == 0,
              "%s: word-by-word merging gives the same %d ids (%d)", name, na, nb);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------ */
/* Reference prompts and greedy text                                         */
/* ------------------------------------------------------------------------ */

/* The string value of a flat key (\n, \t, \", \\ and \uXXXX escapes). */
static char *json_string(const char *json, const char *key, size_t *len) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(json, pat);
    if (!p) return NULL;
    p = strchr(p + strlen(pat), '"');
    if (!p) return NULL;
    p++;
    char *out = malloc(strlen(p) + 1);
    size_t k = 0;
    while (*p && *p != '"') {
        if (*p != '\\') {
            out[k++] = *p++;
            continue;
        }
        p++;
        switch (*p) {
        case 'n':
            out[k++] = '\n';
            p++;
            break;
        case 't':
            out[k++] = '\t';
            p++;
            break;
        case 'r':
            out[k++] = '\r';
            p++;
            break;
        case 'u': {
            uint32_t c = (uint32_t)strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
            k += put_utf8(c, out + k);
            p += 5;
            break;
        }
        default: out[k++] = *p++; break;
        }
    }
    out[k] = 0;
    *len = k;
    return out;
}

static void test_reference(const char *json_name) {
    size_t n;
    char *json = kr_test_read_file(kr_test_path(shared, json_name), &n);
    if (!json) return;
    size_t len;
    char *model = json_string(json, "model_file", &len);
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", model);
    const char *path = kr_test_path(shared, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(rel, sizeof rel, "models/synth/%s", model);
        path = kr_test_path(shared, rel);
    } else {
        fclose(f);
    }
    loaded l;
    if (!open_vocab(path, &l)) {
        free(model);
        free(json);
        return;
    }
    char *prompt = json_string(json, "prompt", &len);
    double *want = NULL;
    int n_want = kr_ref_array(json, "prompt_ids", &want);
    int32_t *ids;
    int32_t m = tokenize(&l.v, prompt, len, true, false, &ids);
    bool same = m == n_want;
    for (int i = 0; same && i < m; i++) same = ids[i] == (int32_t)want[i];
    CHECK_MSG(same, "%s: prompt ids (%d vs %d)", json_name, m, n_want);
    free(ids);
    free(want);

    /* greedy text = concatenated pieces (special = false) */
    double *greedy = NULL;
    int n_greedy = kr_ref_array(json, "greedy_ids", &greedy);
    size_t hex_len;
    char *hex = json_string(json, "greedy_text_hex", &hex_len);
    char *text = malloc(hex_len / 2 + 1), *got = malloc(hex_len / 2 + 4096);
    for (size_t i = 0; i + 1 < hex_len; i += 2) text[i / 2] = (char)strtoul((char[3]){hex[i], hex[i + 1], 0}, NULL, 16);
    size_t k = 0;
    for (int i = 0; i < n_greedy; i++) {
        int32_t r = kr_vocab_token_to_piece(&l.v, (int32_t)greedy[i], got + k, 4096, false);
        if (r > 0) k += (size_t)r;
    }
    CHECK_MSG(k == hex_len / 2 && memcmp(got, text, k) == 0, "%s: greedy text from pieces", json_name);
    double bos;
    if (kr_ref_number(json, "bos_id", &bos)) CHECK_EQ_INT(l.v.bos, (int)bos);
    free(text);
    free(got);
    free(hex);
    free(greedy);
    free(prompt);
    free(model);
    free(json);
    close_vocab(&l);
}

/* ------------------------------------------------------------------------ */
/* Speed                                                                     */
/* ------------------------------------------------------------------------ */

/* About 1 MB of mixed text: the test vectors, English, code, CJK, emoji. */
static char *mixed_text(size_t *len) {
    size_t cap = (1u << 20) + 8192, n = 0;
    char *t = malloc(cap);
    char *inputs[N_VOCABS];
    size_t in_len[N_VOCABS];
    char rel[256];
    for (size_t i = 0; i < N_VOCABS; i++) {
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", vocab_names[i]);
        inputs[i] = kr_test_read_file(kr_test_path(shared, rel), &in_len[i]);
    }
    static const char *snippets[] = {
        "The quick brown fox jumps over the lazy dog. It's 3:45pm and we've got 1,234,567 reasons! ",
        "for (int i = 0; i < n; i++) {\n    sum += x[i] * y[i];\n}\n",
        "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\xe8\x8b\xb9\xe6\x9e\x9c\xe5\xb7\xa5\xe4\xbd\x9c\xef\xbc\x8c\xe4\xbb\x8a"
        "\xe5\xa4\xa9\xe5\xa4\xa9\xe6\xb0\x94\xe5\xbe\x88\xe5\xa5\xbd\xe3\x80\x82 ",
        "\xf0\x9f\x9a\x80\xf0\x9f\xa6\x99\xe2\x9c\x85 na\xc3\xafve caf\xc3\xa9 \xd1\x80\xd1\x83\xd1\x81\xd1\x81\xd0\xba"
        "\xd0\xb8\xd0\xb9 \xe2\x80\x9cquotes\xe2\x80\x9d\t\n",
    };
    while (n < (1u << 20)) {
        uint32_t r = rnd(N_VOCABS + 4);
        const char *s;
        size_t sl;
        if (r < N_VOCABS) {
            s = inputs[r];
            sl = inputs[r] ? in_len[r] : 0;
        } else {
            s = snippets[r - N_VOCABS];
            sl = strlen(s);
        }
        if (!s || n + sl > cap) break;
        memcpy(t + n, s, sl);
        n += sl;
    }
    for (size_t i = 0; i < N_VOCABS; i++) free(inputs[i]);
    *len = n;
    return t;
}

static void test_speed(const kr_vocab *qwen2, const char *text, size_t len) {
    size_t cap = (len > (1u << 20) ? len : (1u << 20)) + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    double t0 = now();
    int32_t n = kr_vocab_tokenize(qwen2, text, len, ids, (int32_t)cap, false, false);
    double dt = now() - t0;
    printf("qwen2: %zu bytes of mixed text -> %d tokens in %.3f s (%.1f MB/s)\n", len, n, dt, (double)len / dt / 1e6);
    CHECK(n > 0 && round_trips(qwen2, ids, n, text, len));
    CHECK_MSG(dt < 5.0, "1 MB took %.2f s", dt);

    /* one long digit run: each digit is a word (this was once quadratic) */
    char *digits = malloc(1u << 20);
    for (size_t i = 0; i < (1u << 20); i++) digits[i] = (char)('0' + i % 10);
    t0 = now();
    n = kr_vocab_tokenize(qwen2, digits, 1u << 20, ids, (int32_t)cap, false, false);
    dt = now() - t0;
    printf("qwen2: 1 MB of digits -> %d tokens in %.3f s\n", n, dt);
    CHECK_EQ_INT(n, 1 << 20);
    CHECK_MSG(dt < 5.0, "1 MB of digits took %.2f s", dt);
    free(digits);
    free(ids);
}

int main(void) {
    shared = kr_test_require_shared("test_tokenizer_vocab");
    size_t mixed_len;
    char *mixed = mixed_text(&mixed_len);

    for (size_t i = 0; i < N_VOCABS; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", vocab_names[i]);
        loaded l;
        double t0 = now();
        if (!open_vocab(kr_test_path(shared, rel), &l)) continue;
        printf("%-15s loaded in %.3f s (%d tokens, pre '%s')\n", vocab_names[i], now() - t0, l.v.n_tokens, l.v.pre);
        test_vectors(vocab_names[i], &l.v);
        test_random(vocab_names[i], &l.v);
        test_special(vocab_names[i], &l.v);
        test_spm_word_split(vocab_names[i], &l.v, mixed, mixed_len);
        if (!strcmp(vocab_names[i], "qwen2")) test_speed(&l.v, mixed, mixed_len);
        close_vocab(&l);
    }

    static const char *refs[] = {"stories260K.json", "llama-2-tiny-random.json", "tiny-random-llama.json",
                                 "tiny-random-qwen2.json", "tiny-random-qwen3.json"};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "reference/%s", refs[i]);
        test_reference(rel);
    }
    free(mixed);
    return kr_test_finish();
}
