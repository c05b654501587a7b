/*
 * test_tokenizer_synth.c - the tokenizers on tiny vocabularies built here, in
 * memory, byte by byte as GGUF files (no ../shared needed):
 *   - a byte-level BPE vocabulary (qwen2 pre-tokenizer) with five merges, and
 *     the expected ids worked out by hand from the merge ranks;
 *   - an SPM vocabulary whose scores force a particular merge order, with
 *     byte fallback;
 *   - special-token parsing on and off, user-defined tokens, end of
 *     generation, pieces, BOS/EOS rules, undersized output buffers;
 *   - malformed metadata: each error names the key (and the bad value).
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "test_models.h"
#include "test_util.h"
#include "vocab.h"

/* ------------------------------------------------------------------------ */
/* A minimal in-memory GGUF v3 image                                         */
/* ------------------------------------------------------------------------ */

typedef struct image {
    unsigned char *data;
    size_t len, cap;
    uint64_t n_kv;
} image;

static void put(image *im, const void *p, size_t n) {
    if (im->len + n > im->cap) {
        im->cap = (im->len + n) * 2 + 256;
        im->data = realloc(im->data, im->cap);
    }
    memcpy(im->data + im->len, p, n);
    im->len += n;
}

static void put_u32(image *im, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(im, b, 4);
}

static void put_u64(image *im, uint64_t v) {
    put_u32(im, (uint32_t)v);
    put_u32(im, (uint32_t)(v >> 32));
}

static void put_str(image *im, const char *s) {
    put_u64(im, strlen(s));
    put(im, s, strlen(s));
}

static void key(image *im, const char *k, uint32_t type) {
    put_str(im, k);
    put_u32(im, type);
    im->n_kv++;
}

static void kv_str(image *im, const char *k, const char *v) {
    key(im, k, 8);
    put_str(im, v);
}

static void kv_u32(image *im, const char *k, uint32_t v) {
    key(im, k, 4);
    put_u32(im, v);
}

static void kv_bool(image *im, const char *k, bool v) {
    key(im, k, 7);
    unsigned char b = v;
    put(im, &b, 1);
}

static void kv_strs(image *im, const char *k, const char *const *s, size_t n) {
    key(im, k, 9);
    put_u32(im, 8);
    put_u64(im, n);
    for (size_t i = 0; i < n; i++) put_str(im, s[i]);
}

static void kv_i32s(image *im, const char *k, const int32_t *v, size_t n) {
    key(im, k, 9);
    put_u32(im, 5);
    put_u64(im, n);
    for (size_t i = 0; i < n; i++) put_u32(im, (uint32_t)v[i]);
}

static void kv_f32s(image *im, const char *k, const float *v, size_t n) {
    key(im, k, 9);
    put_u32(im, 6);
    put_u64(im, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_u32(im, u);
    }
}

/* Header + the key-values collected in body, padded to 32 bytes. */
static image finish(const image *body) {
    image out = {0};
    put(&out, "GGUF", 4);
    put_u32(&out, 3);
    put_u64(&out, 0);
    put_u64(&out, body->n_kv);
    put(&out, body->data, body->len);
    static const unsigned char zero[32];
    put(&out, zero, (32 - out.len % 32) % 32);
    return out;
}

/* Parse an image and load its vocabulary; returns the status, with the
 * message of a failure in kara_last_error(). */
static kara_status load(const image *body, kara_gguf **g, image *file, kr_vocab *v) {
    *file = finish(body);
    kr_test_clear_error();
    kara_status st = kr_gguf_parse(file->data, file->len, g);
    if (st) return st;
    return kr_vocab_load(v, *g);
}

/* ------------------------------------------------------------------------ */
/* Byte-level BPE                                                            */
/* ------------------------------------------------------------------------ */

/* GPT-2's printable spelling of a byte, written out independently of the
 * runtime: printable bytes as themselves, the rest at U+0100 + n in order. */
static void gpt2_char(int b, char out[3]) {
    int cpt;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) {
        cpt = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
        cpt = 256 + n;
    }
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3F));
        out[2] = 0;
    }
}

enum { BPE_T_SPACE_T = 256, BPE_HE, BPE_SPACE_THE, BPE_IN, BPE_SPACE_A, BPE_EOT, BPE_IM_START, BPE_THINK, BPE_N };

/* Ids 0..255 are the bytes (id = byte value), then the merge results and
 * three special tokens. */
static void bpe_body(image *im, const char *pre, bool with_merges, bool add_bos) {
    static char bytes[256][3];
    static const char *tokens[BPE_N];
    int32_t types[BPE_N];
    for (int b = 0; b < 256; b++) {
        gpt2_char(b, bytes[b]);
        tokens[b] = bytes[b];
        types[b] = 1;
    }
    tokens[BPE_T_SPACE_T] = "\xc4\xa0t"; /* "Ġt" */
    tokens[BPE_HE] = "he";
    tokens[BPE_SPACE_THE] = "\xc4\xa0the";
    tokens[BPE_IN] = "in";
    tokens[BPE_SPACE_A] = "\xc4\xa0"
                          "a";
    tokens[BPE_EOT] = "<|endoftext|>";
    tokens[BPE_IM_START] = "<|im_start|>";
    tokens[BPE_THINK] = "<think>";
    for (int i = BPE_T_SPACE_T; i < BPE_EOT; i++) types[i] = 1;
    types[BPE_EOT] = 3;
    types[BPE_IM_START] = 3;
    types[BPE_THINK] = 4;
    static const char *merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "\xc4\xa0 a"};

    kv_str(im, "general.architecture", "qwen2");
    kv_str(im, "tokenizer.ggml.model", "gpt2");
    if (pre) kv_str(im, "tokenizer.ggml.pre", pre);
    kv_strs(im, "tokenizer.ggml.tokens", tokens, BPE_N);
    kv_i32s(im, "tokenizer.ggml.token_type", types, BPE_N);
    if (with_merges) kv_strs(im, "tokenizer.ggml.merges", merges, 5);
    kv_u32(im, "tokenizer.ggml.eos_token_id", BPE_EOT);
    kv_u32(im, "tokenizer.ggml.bos_token_id", BPE_EOT);
    if (add_bos) kv_bool(im, "tokenizer.ggml.add_bos_token", true);
}

/* Tokenize and compare with the expected ids. */
static void expect_ids(const kr_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                       const int32_t *want, int32_t n_want, const char *what) {
    int32_t got[256];
    int32_t n = kr_vocab_tokenize(v, text, len, got, 256, add_special, parse_special);
    bool same = n == n_want && (n == 0 || memcmp(got, want, (size_t)n * sizeof *got) == 0);
    char desc[2048];
    int k = 0;
    for (int32_t i = 0; i < n && i < 64 && k < 1800; i++)
        k += snprintf(desc + k, sizeof desc - (size_t)k, " %d", got[i]);
    desc[k] = 0;
    CHECK_MSG(same, "%s: got %d tokens:%s", what, n, desc);
}

#define EXPECT(v, text, add, parse, ...)                                                                               \
    do {                                                                                                               \
        const int32_t want_[] = {__VA_ARGS__};                                                                         \
        expect_ids(v, text, sizeof(text) - 1, add, parse, want_, (int32_t)(sizeof want_ / sizeof want_[0]), text);     \
    } while (0)

static void test_bpe(void) {
    image body = {0}, file;
    kara_gguf *g = NULL;
    kr_vocab v;
    bpe_body(&body, "qwen2", true, false);
    kara_status st = load(&body, &g, &file, &v);
    CHECK_MSG(st == KARA_OK, "BPE vocab loads: %s", kara_last_error());
    if (st) return;
    CHECK_EQ_INT(v.kind, KR_VOCAB_BPE);
    CHECK_EQ_INT(v.n_tokens, BPE_N);
    CHECK_EQ_INT(v.eos, BPE_EOT);
    CHECK(!v.add_bos && !v.add_space_prefix);
    CHECK_EQ_INT(v.nl, '\n');

    /* "the": t,h,e; only (h,e) merges */
    EXPECT(&v, "the", false, false, 't', BPE_HE);
    /* " the": (Ġ,t) rank 0, (h,e) rank 1, then (Ġt,he) rank 2 */
    EXPECT(&v, " the", false, false, BPE_SPACE_THE);
    /* words " in" and " the"; (i,n) merges, Ġ stays alone before it */
    EXPECT(&v, " in the", false, false, ' ', BPE_IN, BPE_SPACE_THE);
    /* qwen2 splits digits one by one; "a" after a space merges with it */
    EXPECT(&v, "2024 a", false, false, '2', '0', '2', '4', BPE_SPACE_A);
    /* a line break after a space: " \n" is one white-space word */
    EXPECT(&v, "in \nhe", false, false, BPE_IN, ' ', '\n', BPE_HE);
    /* invalid UTF-8 becomes U+FFFD (EF BF BD), as in llama.cpp */
    EXPECT(&v,
           "a\xff"
           "b",
           false, false, 'a', 0xEF, 0xBF, 0xBD, 'b');

    /* control tokens only with parse_special; user-defined ones always */
    EXPECT(&v, "<|im_start|>in", false, true, BPE_IM_START, BPE_IN);
    EXPECT(&v, "<|im_start|>in", false, false, '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>', BPE_IN);
    EXPECT(&v, "he<think>in", false, false, BPE_HE, BPE_THINK, BPE_IN);
    EXPECT(&v, "he<think>in", false, true, BPE_HE, BPE_THINK, BPE_IN);
    EXPECT(&v, "<|endoftext|><|endoftext|>", false, true, BPE_EOT, BPE_EOT);

    /* add_bos is off for qwen2 unless the file says otherwise */
    EXPECT(&v, "he", true, false, BPE_HE);

    /* undersized output: -(needed) */
    int32_t one[1];
    CHECK_EQ_INT(kr_vocab_tokenize(&v, " in the", 7, one, 1, false, false), -3);
    CHECK_EQ_INT(kr_vocab_tokenize(&v, "", 0, one, 1, false, false), 0);

    /* pieces */
    char buf[64];
    int32_t n = kr_vocab_token_to_piece(&v, BPE_SPACE_THE, buf, sizeof buf, false);
    CHECK(n == 4 && memcmp(buf, " the", 4) == 0);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, BPE_SPACE_THE, buf, 2, false), -4);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, '\n', buf, sizeof buf, false), 1);
    CHECK(buf[0] == '\n');
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, 0xAD, buf, sizeof buf, false), 1);
    CHECK((unsigned char)buf[0] == 0xAD);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, BPE_EOT, buf, sizeof buf, false), 0);
    n = kr_vocab_token_to_piece(&v, BPE_EOT, buf, sizeof buf, true);
    CHECK(n == 13 && memcmp(buf, "<|endoftext|>", 13) == 0);
    n = kr_vocab_token_to_piece(&v, BPE_THINK, buf, sizeof buf, false);
    CHECK(n == 7 && memcmp(buf, "<think>", 7) == 0);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, BPE_N, buf, sizeof buf, true), 0);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, -1, buf, sizeof buf, true), 0);

    /* every byte round-trips through its token */
    for (int b = 0; b < 256; b++) {
        n = kr_vocab_token_to_piece(&v, b, buf, sizeof buf, false);
        if (n != 1 || (unsigned char)buf[0] != b) {
            CHECK_MSG(false, "byte token %d gives %d bytes", b, n);
            break;
        }
    }

    /* detokenize(tokenize(s)) == s, also for text with the special tokens */
    const char *text = "he said \"2024\"\n\tthe <think>in\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd <|im_start|>";
    int32_t ids[256];
    n = kr_vocab_tokenize(&v, text, strlen(text), ids, 256, false, true);
    CHECK(n > 0);
    char back[256];
    int32_t m = kr_vocab_detokenize(&v, ids, n, back, sizeof back, true);
    CHECK(m == (int32_t)strlen(text) && memcmp(back, text, (size_t)m) == 0);
    CHECK_EQ_INT(kr_vocab_detokenize(&v, ids, n, back, 3, true), -(int32_t)strlen(text));

    /* end of generation, types, lookups */
    CHECK(kr_vocab_is_eog(&v, BPE_EOT));
    CHECK(!kr_vocab_is_eog(&v, BPE_IM_START));
    CHECK(!kr_vocab_is_eog(&v, BPE_N));
    CHECK_EQ_INT(kr_vocab_token_type(&v, BPE_THINK), KR_TOKEN_USER_DEFINED);
    CHECK_EQ_INT(kr_vocab_find(&v, "he", 2), BPE_HE);
    CHECK_EQ_INT(kr_vocab_find(&v, "hex", 3), -1);
    kara_gguf_str t = kr_vocab_token_text(&v, BPE_SPACE_THE);
    CHECK(t.len == 5 && memcmp(t.ptr, "\xc4\xa0the", 5) == 0);

    kr_vocab_free(&v);
    kara_gguf_close(g);
    free(file.data);
    free(body.data);

    /* add_bos from metadata; and the llama3 defaults (BOS added) */
    body = (image){0};
    bpe_body(&body, "qwen2", true, true);
    st = load(&body, &g, &file, &v);
    CHECK_MSG(st == KARA_OK, "%s", kara_last_error());
    if (!st) {
        EXPECT(&v, "he", true, false, BPE_EOT, BPE_HE);
        EXPECT(&v, "he", false, false, BPE_HE);
        kr_vocab_free(&v);
    }
    kara_gguf_close(g);
    free(file.data);
    free(body.data);

    body = (image){0};
    bpe_body(&body, "llama-bpe", true, false);
    st = load(&body, &g, &file, &v);
    CHECK_MSG(st == KARA_OK, "%s", kara_last_error());
    if (!st) {
        CHECK(v.add_bos);
        /* llama3 keeps digits in groups of three (no merges for them here) */
        EXPECT(&v, "12345", true, false, BPE_EOT, '1', '2', '3', '4', '5');
        kr_vocab_free(&v);
    }
    kara_gguf_close(g);
    free(file.data);
    free(body.data);
}

/* ------------------------------------------------------------------------ */
/* SPM                                                                       */
/* ------------------------------------------------------------------------ */

enum {
    SPM_UNK,
    SPM_BOS,
    SPM_EOS,
    SPM_BYTE0,
    SPM_SPACE = SPM_BYTE0 + 256,
    SPM_H,
    SPM_E,
    SPM_L,
    SPM_O,
    SPM_HE,
    SPM_LL,
    SPM_LLO,
    SPM_HELLO,
    SPM_SPACE_HELLO,
    SPM_N
};

#define SPM_BYTE(b) (SPM_BYTE0 + (b))

static void spm_body(image *im, const char *name) {
    static char bytes[256][7];
    static const char *tokens[SPM_N];
    int32_t types[SPM_N];
    float scores[SPM_N];
    tokens[SPM_UNK] = "<unk>";
    tokens[SPM_BOS] = "<s>";
    tokens[SPM_EOS] = "</s>";
    types[SPM_UNK] = 2;
    types[SPM_BOS] = types[SPM_EOS] = 3;
    scores[SPM_UNK] = scores[SPM_BOS] = scores[SPM_EOS] = 0;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[SPM_BYTE(b)] = bytes[b];
        types[SPM_BYTE(b)] = 6;
        scores[SPM_BYTE(b)] = 0;
    }
    /* scores chosen so that "ll" merges first, then "llo", then "he",
     * then "hello", then "▁hello" */
    struct {
        int id;
        const char *text;
        float score;
    } words[] = {{SPM_SPACE, "\xe2\x96\x81", -1},
                 {SPM_H, "h", -2},
                 {SPM_E, "e", -2},
                 {SPM_L, "l", -2},
                 {SPM_O, "o", -2},
                 {SPM_HE, "he", -5},
                 {SPM_LL, "ll", -1},
                 {SPM_LLO, "llo", -2},
                 {SPM_HELLO, "hello", -3},
                 {SPM_SPACE_HELLO, "\xe2\x96\x81hello", -4}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        tokens[words[i].id] = words[i].text;
        types[words[i].id] = 1;
        scores[words[i].id] = words[i].score;
    }
    kv_str(im, "general.architecture", "llama");
    if (name) kv_str(im, "general.name", name);
    kv_str(im, "tokenizer.ggml.model", "llama");
    kv_strs(im, "tokenizer.ggml.tokens", tokens, SPM_N);
    kv_f32s(im, "tokenizer.ggml.scores", scores, SPM_N);
    kv_i32s(im, "tokenizer.ggml.token_type", types, SPM_N);
}

static void test_spm(void) {
    image body = {0}, file;
    kara_gguf *g = NULL;
    kr_vocab v;
    spm_body(&body, NULL);
    kara_status st = load(&body, &g, &file, &v);
    CHECK_MSG(st == KARA_OK, "SPM vocab loads: %s", kara_last_error());
    if (st) return;
    /* llama.cpp's SPM defaults when the keys are absent */
    CHECK_EQ_INT(v.kind, KR_VOCAB_SPM);
    CHECK_EQ_INT(v.bos, 1);
    CHECK_EQ_INT(v.eos, 2);
    CHECK_EQ_INT(v.unk, 0);
    CHECK(v.add_bos && !v.add_eos && v.add_space_prefix);
    CHECK_EQ_INT(v.nl, SPM_BYTE('\n'));
    CHECK(kr_vocab_is_eog(&v, SPM_EOS));

    EXPECT(&v, "hello", false, false, SPM_SPACE_HELLO);
    EXPECT(&v, "hello", true, false, SPM_BOS, SPM_SPACE_HELLO);
    /* "▁hex": "he" merges; 'x' is not a token: byte fallback */
    EXPECT(&v, "hex", false, false, SPM_SPACE, SPM_HE, SPM_BYTE('x'));
    /* a two-byte character falls back to its two bytes */
    EXPECT(&v, "\xc3\xa9", false, false, SPM_SPACE, SPM_BYTE(0xC3), SPM_BYTE(0xA9));
    /* spaces become U+2581: "▁hello▁hello" */
    EXPECT(&v, "hello hello", false, false, SPM_SPACE_HELLO, SPM_SPACE_HELLO);
    /* special tokens, and the space prefix after them */
    EXPECT(&v, "<s>hello", false, true, SPM_BOS, SPM_SPACE_HELLO);
    EXPECT(&v, "<s>hello", false, false, SPM_SPACE, SPM_BYTE('<'), SPM_BYTE('s'), SPM_BYTE('>'), SPM_HELLO);
    EXPECT(&v, "", true, false, SPM_BOS);

    char buf[64];
    int32_t n = kr_vocab_token_to_piece(&v, SPM_SPACE_HELLO, buf, sizeof buf, false);
    CHECK(n == 6 && memcmp(buf, " hello", 6) == 0);
    n = kr_vocab_token_to_piece(&v, SPM_BYTE(0xC3), buf, sizeof buf, false);
    CHECK(n == 1 && (unsigned char)buf[0] == 0xC3);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, SPM_BOS, buf, sizeof buf, false), 0);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, SPM_UNK, buf, sizeof buf, true), 5);

    /* detokenize drops the prefix space only */
    const char *text = " hello\n\xc3\xa9hex  ";
    int32_t ids[128];
    n = kr_vocab_tokenize(&v, text, strlen(text), ids, 128, true, false);
    CHECK(n > 1 && ids[0] == SPM_BOS);
    char back[128];
    int32_t m = kr_vocab_detokenize(&v, ids + 1, n - 1, back, sizeof back, false);
    CHECK(m == (int32_t)strlen(text) && memcmp(back, text, (size_t)m) == 0);

    kr_vocab_free(&v);
    kara_gguf_close(g);
    free(file.data);
    free(body.data);

    /* Phi-3: white space after a special token is dropped */
    body = (image){0};
    spm_body(&body, "Phi3 mini");
    st = load(&body, &g, &file, &v);
    CHECK_MSG(st == KARA_OK, "%s", kara_last_error());
    if (!st) {
        EXPECT(&v, "</s>  \nhello", false, true, SPM_EOS, SPM_SPACE_HELLO);
        kr_vocab_free(&v);
    }
    kara_gguf_close(g);
    free(file.data);
    free(body.data);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Load a vocabulary that must fail with st and a message holding needle(s). */
static void expect_error(const image *body, kara_status want, const char *needle, const char *needle2) {
    image file;
    kara_gguf *g = NULL;
    kr_vocab v;
    kara_status st = load(body, &g, &file, &v);
    const char *err = kara_last_error();
    CHECK_MSG(st == want, "expected status %d, got %d (%s)", want, st, err);
    CHECK_MSG(strstr(err, needle) != NULL, "error '%s' names '%s'", err, needle);
    if (needle2) CHECK_MSG(strstr(err, needle2) != NULL, "error '%s' names '%s'", err, needle2);
    if (!st) kr_vocab_free(&v);
    kara_gguf_close(g);
    free(file.data);
}

static void test_errors(void) {
    image body = {0};
    bpe_body(&body, "klingon-bpe", true, false);
    expect_error(&body, KARA_ERR_UNSUPPORTED, "tokenizer.ggml.pre", "klingon-bpe");
    free(body.data);

    body = (image){0};
    bpe_body(&body, "qwen2", false, false);
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.merges", NULL);
    free(body.data);

    body = (image){0};
    bpe_body(&body, "qwen2", true, false);
    kv_u32(&body, "tokenizer.ggml.padding_token_id", BPE_N);
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.padding_token_id", "264");
    free(body.data);

    body = (image){0};
    bpe_body(&body, "qwen2", true, false);
    kv_str(&body, "tokenizer.ggml.add_bos_token", "yes");
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.add_bos_token", NULL);
    free(body.data);

    /* wrong sizes and types */
    const char *toks[] = {"a", "b", "c"};
    const char *dup[] = {"a", "b", "a"};
    const int32_t types2[] = {1, 1};
    const float scores3[] = {0, 0, 0};
    body = (image){0};
    kv_str(&body, "tokenizer.ggml.model", "llama");
    kv_strs(&body, "tokenizer.ggml.tokens", toks, 3);
    kv_i32s(&body, "tokenizer.ggml.token_type", types2, 2);
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.token_type", "2 entries");
    free(body.data);

    body = (image){0};
    kv_str(&body, "tokenizer.ggml.model", "llama");
    kv_strs(&body, "tokenizer.ggml.tokens", dup, 3);
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.tokens", "repeats token 0");
    free(body.data);

    body = (image){0};
    kv_str(&body, "tokenizer.ggml.model", "llama");
    kv_f32s(&body, "tokenizer.ggml.tokens", scores3, 3);
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.tokens", "strings");
    free(body.data);

    body = (image){0};
    kv_str(&body, "tokenizer.ggml.model", "llama");
    expect_error(&body, KARA_ERR_FORMAT, "tokenizer.ggml.tokens", "missing");
    free(body.data);

    body = (image){0};
    kv_str(&body, "tokenizer.ggml.model", "bert");
    kv_strs(&body, "tokenizer.ggml.tokens", toks, 3);
    expect_error(&body, KARA_ERR_UNSUPPORTED, "tokenizer.ggml.model", "bert");
    free(body.data);

    /* a tokenizer-less file: ids only */
    body = (image){0};
    kv_str(&body, "general.architecture", "llama");
    image file;
    kara_gguf *g = NULL;
    kr_vocab v;
    char err[256];
    kara_status st = load(&body, &g, &file, &v);
    CHECK_EQ_INT(st, KARA_OK);
    CHECK_EQ_INT(v.kind, KR_VOCAB_NONE);
    CHECK_EQ_INT(v.bos, -1);
    int32_t ids[4];
    CHECK_EQ_INT(kr_vocab_tokenize(&v, "abc", 3, ids, 4, true, false), INT32_MIN);
    CHECK_EQ_INT(kr_vocab_token_to_piece(&v, 0, err, sizeof err, true), 0);
    kr_vocab_free(&v);
    kara_gguf_close(g);
    free(file.data);
    free(body.data);
}

int main(void) {
    test_bpe();
    test_spm();
    test_errors();
    return kr_test_finish();
}
