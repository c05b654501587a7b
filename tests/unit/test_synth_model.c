/* test_synth_model.c - synthetic models: the tensors, shapes, types and
 * metadata llama.cpp expects for each architecture; weights that match the
 * generator's F32 values up to each type's quantization error (and byte for
 * byte what the reference quantizer makes of them); llama.cpp's type mix;
 * the built-in BPE vocabulary; deterministic output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftype.h"
#include "gguf.h"
#include "kernels.h"
#include "synth_model.h"
#include "test_util.h"

/* A small shape whose rows all fit 256-element K-quant blocks. */
static void small_shape(kr_synth_params *p, const char *arch, kr_ftype ftype, bool pure) {
    kr_synth_params_init(p);
    snprintf(p->arch, sizeof p->arch, "%s", arch);
    p->n_layer = 2;
    p->n_embd = 256;
    p->n_head = 4;
    p->n_head_kv = 2;
    p->head_dim = 64;
    p->n_ff = 256;
    p->n_vocab = 300;
    p->n_ctx = 128;
    p->ftype = ftype;
    p->pure = pure;
    p->seed = 42;
}

static kara_gguf *write_and_open(const kr_synth_params *p, const char *name) {
    char err[600];
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    kara_status st = kr_synth_write(p, path, NULL, NULL, err, sizeof err);
    CHECK_MSG(st == KARA_OK, "%s: %s", name, err);
    if (st != KARA_OK) return NULL;
    kara_gguf *g = NULL;
    CHECK_MSG(kara_gguf_open(path, &g) == KARA_OK, "%s: %s", name, kara_last_error());
    return g;
}

static uint64_t get_u(const kara_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s%s%s", arch ? arch : "", arch ? "." : "", suffix);
    uint64_t v = UINT64_MAX;
    CHECK_MSG(kara_gguf_get_u64(g, key, &v), "key %s missing", key);
    return v;
}

static double get_f(const kara_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v = NAN;
    CHECK_MSG(kara_gguf_get_f64(g, key, &v), "key %s missing", key);
    return v;
}

/* ---- expected tensor list, written out independently of the generator ---- */

typedef struct expect_tensor {
    char name[64];
    int n_dims;
    int64_t ne0, ne1;
    bool matrix;
} expect_tensor;

static int expected_tensors(const kr_synth_params *p, expect_tensor *out) {
    int n = 0;
    const int64_t d = p->n_embd, hd = p->head_dim, q = p->n_head * hd, kv = p->n_head_kv * hd;
#define T(nd, a, b, m, ...)                                                                                            \
    do {                                                                                                               \
        snprintf(out[n].name, 64, __VA_ARGS__);                                                                        \
        out[n].n_dims = nd;                                                                                            \
        out[n].ne0 = a;                                                                                                \
        out[n].ne1 = b;                                                                                                \
        out[n].matrix = m;                                                                                             \
        n++;                                                                                                           \
    } while (0)
    T(2, d, p->n_vocab, true, "token_embd.weight");
    T(1, d, 1, false, "output_norm.weight");
    if (!p->tied) T(2, d, p->n_vocab, true, "output.weight");
    for (int l = 0; l < p->n_layer; l++) {
        T(1, d, 1, false, "blk.%d.attn_norm.weight", l);
        T(2, d, q, true, "blk.%d.attn_q.weight", l);
        T(2, d, kv, true, "blk.%d.attn_k.weight", l);
        T(2, d, kv, true, "blk.%d.attn_v.weight", l);
        T(2, q, d, true, "blk.%d.attn_output.weight", l);
        T(1, d, 1, false, "blk.%d.ffn_norm.weight", l);
        T(2, d, p->n_ff, true, "blk.%d.ffn_gate.weight", l);
        T(2, d, p->n_ff, true, "blk.%d.ffn_up.weight", l);
        T(2, p->n_ff, d, true, "blk.%d.ffn_down.weight", l);
        if (!strcmp(p->arch, "qwen2")) {
            T(1, q, 1, false, "blk.%d.attn_q.bias", l);
            T(1, kv, 1, false, "blk.%d.attn_k.bias", l);
            T(1, kv, 1, false, "blk.%d.attn_v.bias", l);
        }
        if (!strcmp(p->arch, "qwen3")) {
            T(1, hd, 1, false, "blk.%d.attn_q_norm.weight", l);
            T(1, hd, 1, false, "blk.%d.attn_k_norm.weight", l);
        }
    }
#undef T
    return n;
}

/* Relative RMS error bounds per type for N(0, s^2) weights (and ~1 norms,
 * which stay F32). Round-to-nearest with a per-block scale gives an error of
 * about step/sqrt(12): 4-bit types ~7-9% of the RMS, 5-bit ~4%, 6-bit ~2%,
 * 8-bit ~0.5%; F16 keeps 11 mantissa bits, BF16 8. The bounds leave ~1.5x
 * headroom over what the reference quantizers measure here. */
static double max_rel_rmse(kr_type t) {
    switch (t) {
    case KR_TYPE_F32: return 0.0;
    case KR_TYPE_F16: return 3e-4;
    case KR_TYPE_BF16: return 3e-3;
    case KR_TYPE_Q8_0: return 0.008;
    case KR_TYPE_Q6_K: return 0.03;
    case KR_TYPE_Q5_0:
    case KR_TYPE_Q5_1:
    case KR_TYPE_Q5_K: return 0.06;
    case KR_TYPE_Q4_0:
    case KR_TYPE_Q4_1:
    case KR_TYPE_Q4_K: return 0.12;
    default: return -1;
    }
}

static double worst_rel[KR_TYPE_COUNT];

/* Check every tensor of a written model: present with the right shape and
 * type, values within the type's error of the generator's F32 values, bytes
 * equal to the reference quantizer's output. */
static void check_tensors(const kara_gguf *g, const kr_synth_params *p, const char *label,
                          kr_type (*want_type)(const kr_synth_params *, const char *, bool)) {
    static expect_tensor ex[512];
    int n = expected_tensors(p, ex);
    CHECK_MSG(g->n_tensors == (uint64_t)n, "%s: %llu tensors, expected %d", label, (unsigned long long)g->n_tensors, n);
    for (int i = 0; i < n; i++) {
        const kara_gguf_tensor *t = kara_gguf_find_tensor(g, ex[i].name);
        CHECK_MSG(t != NULL, "%s: tensor %s missing", label, ex[i].name);
        if (!t) continue;
        CHECK_MSG(t->n_dims == (uint32_t)ex[i].n_dims && t->ne[0] == ex[i].ne0 && t->ne[1] == ex[i].ne1,
                  "%s: %s has shape [%lld, %lld] (rank %u), expected [%lld, %lld]", label, ex[i].name,
                  (long long)t->ne[0], (long long)t->ne[1], t->n_dims, (long long)ex[i].ne0, (long long)ex[i].ne1);
        kr_type want = want_type(p, ex[i].name, ex[i].matrix);
        CHECK_MSG(t->type == (uint32_t)want, "%s: %s has type %s, expected %s", label, ex[i].name,
                  kr_type_get(t->type)->name, kr_type_get(want)->name);
        if (t->type != (uint32_t)want || t->ne[0] != ex[i].ne0 || t->ne[1] != ex[i].ne1) continue;

        int64_t ne = t->ne[0] * t->ne[1];
        float *x = malloc((size_t)ne * sizeof *x), *y = malloc((size_t)ne * sizeof *y);
        size_t row = kr_type_row_size(want, t->ne[0]);
        uint8_t *q = malloc(row * (size_t)t->ne[1]);
        CHECK(kr_synth_tensor_values(p, ex[i].name, x, ne));
        bool same_bytes = true;
        for (int64_t r = 0; r < t->ne[1]; r++) {
            CHECK(kr_quantize_row(want, x + r * t->ne[0], q + (size_t)r * row, t->ne[0]));
            if (want == KR_TYPE_F32)
                memcpy(y + r * t->ne[0], (const uint8_t *)t->data + (size_t)r * row, row);
            else
                kr_dequantize_row(want, (const uint8_t *)t->data + (size_t)r * row, y + r * t->ne[0], t->ne[0]);
        }
        same_bytes = memcmp(q, t->data, row * (size_t)t->ne[1]) == 0;
        CHECK_MSG(same_bytes, "%s: %s bytes differ from the reference quantizer's", label, ex[i].name);
        double se = 0, sx = 0;
        for (int64_t k = 0; k < ne; k++) {
            se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            sx += (double)x[k] * x[k];
        }
        double rel = sqrt(se / sx);
        if (rel > worst_rel[want]) worst_rel[want] = rel;
        CHECK_MSG(rel <= max_rel_rmse(want), "%s: %s (%s) relative RMS error %.5f > %.5f", label, ex[i].name,
                  kr_type_get(want)->name, rel, max_rel_rmse(want));
        free(x);
        free(y);
        free(q);
    }
}

static void print_worst(void) {
    printf("largest relative RMS error per type:");
    for (int t = 0; t < KR_TYPE_COUNT; t++)
        if (worst_rel[t] > 0)
            printf(" %s %.4f (bound %.4f)", kr_type_get((uint32_t)t)->name, worst_rel[t], max_rel_rmse((kr_type)t));
    printf("\n");
}

static kr_type type_pure(const kr_synth_params *p, const char *name, bool matrix) {
    (void)name;
    return matrix ? kr_ftype_base_type(p->ftype) : KR_TYPE_F32;
}

/* Q4_K_M / Q5_K_M with 2 layers: llama.cpp's "more bits" layers are those
 * with i >= 7n/8 = 1, so layer 1's attn_v and ffn_down are Q6_K; the output
 * matrix is Q6_K (and token_embd too when it doubles as the output). */
static kr_type type_km(const kr_synth_params *p, const char *name, bool matrix) {
    if (!matrix) return KR_TYPE_F32;
    if (!strcmp(name, "output.weight") || (p->tied && !strcmp(name, "token_embd.weight"))) return KR_TYPE_Q6_K;
    if (!strcmp(name, "blk.1.attn_v.weight") || !strcmp(name, "blk.1.ffn_down.weight")) return KR_TYPE_Q6_K;
    return kr_ftype_base_type(p->ftype);
}

/* Q8_0 / Q4_0 ...: the output matrix becomes Q6_K except for Q8_0 files. */
static kr_type type_legacy(const kr_synth_params *p, const char *name, bool matrix) {
    if (!matrix) return KR_TYPE_F32;
    kr_type base = kr_ftype_base_type(p->ftype);
    if ((!strcmp(name, "output.weight") || (p->tied && !strcmp(name, "token_embd.weight"))) && base != KR_TYPE_Q8_0 &&
        base != KR_TYPE_F32 && base != KR_TYPE_F16 && base != KR_TYPE_BF16)
        return KR_TYPE_Q6_K;
    return base;
}

static void check_metadata(const kara_gguf *g, const kr_synth_params *p, const char *label) {
    const char *a = p->arch;
    kara_gguf_str s;
    CHECK_MSG(kara_gguf_get_str(g, "general.architecture", &s) && kara_gguf_str_eq(s, a), "%s: architecture", label);
    CHECK_EQ_INT(get_u(g, NULL, "general.file_type"), p->ftype);
    CHECK_EQ_INT(get_u(g, NULL, "general.alignment"), 32);
    CHECK_EQ_INT(get_u(g, a, "context_length"), p->n_ctx);
    CHECK_EQ_INT(get_u(g, a, "embedding_length"), p->n_embd);
    CHECK_EQ_INT(get_u(g, a, "block_count"), p->n_layer);
    CHECK_EQ_INT(get_u(g, a, "feed_forward_length"), p->n_ff);
    CHECK_EQ_INT(get_u(g, a, "attention.head_count"), p->n_head);
    CHECK_EQ_INT(get_u(g, a, "attention.head_count_kv"), p->n_head_kv);
    CHECK_EQ_INT(get_u(g, a, "rope.dimension_count"), p->head_dim);
    CHECK_NEAR(get_f(g, a, "rope.freq_base"), p->rope_freq_base, 0);
    CHECK_NEAR(get_f(g, a, "attention.layer_norm_rms_epsilon"), strcmp(a, "llama") ? 1e-6 : 1e-5, 1e-12);
    char key[64];
    snprintf(key, sizeof key, "%s.attention.key_length", a);
    if (!strcmp(a, "qwen3")) {
        CHECK_EQ_INT(get_u(g, a, "attention.key_length"), p->head_dim);
        CHECK_EQ_INT(get_u(g, a, "attention.value_length"), p->head_dim);
    } else {
        /* head_dim * heads == hidden here: llama.cpp derives it */
        CHECK_MSG(kara_gguf_find(g, key) == NULL, "%s: %s present", label, key);
    }
    /* rope base etc. are float32, counts uint32, as convert_hf_to_gguf writes them */
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    CHECK(kara_gguf_find(g, key) && kara_gguf_find(g, key)->value.type == KARA_GGUF_FLOAT32);
    snprintf(key, sizeof key, "%s.block_count", a);
    CHECK(kara_gguf_find(g, key) && kara_gguf_find(g, key)->value.type == KARA_GGUF_UINT32);
}

/* The vocabulary: GPT-2 byte tokens, merges, specials, padding. */
static void check_vocab(const kara_gguf *g, int32_t n_vocab) {
    kara_gguf_str s;
    CHECK(kara_gguf_get_str(g, "tokenizer.ggml.model", &s) && kara_gguf_str_eq(s, "gpt2"));
    CHECK(kara_gguf_get_str(g, "tokenizer.ggml.pre", &s) && kara_gguf_str_eq(s, "qwen2"));
    const kara_gguf_array *tok = kara_gguf_get_arr(g, "tokenizer.ggml.tokens");
    const kara_gguf_array *typ = kara_gguf_get_arr(g, "tokenizer.ggml.token_type");
    const kara_gguf_array *mrg = kara_gguf_get_arr(g, "tokenizer.ggml.merges");
    CHECK(tok && tok->type == KARA_GGUF_STRING && tok->n == (uint64_t)n_vocab);
    CHECK(typ && typ->type == KARA_GGUF_INT32 && typ->n == (uint64_t)n_vocab);
    CHECK(mrg && mrg->type == KARA_GGUF_STRING && mrg->n >= 8);
    if (!tok || !typ || !mrg || tok->n != (uint64_t)n_vocab || typ->n != (uint64_t)n_vocab) return;
    /* GPT-2's byte-to-unicode mapping: printable Latin-1 maps to itself, the
     * 68 others to U+0100.. in byte order (0 -> U+0100, ' ' -> U+0120 'Ġ',
     * '\n' -> U+010A 'Ċ', 0xAD (the last) -> U+0143 'Ń') */
    CHECK(kara_gguf_str_eq(tok->strs[0], "\xc4\x80"));
    CHECK(kara_gguf_str_eq(tok->strs[' '], "\xc4\xa0"));
    CHECK(kara_gguf_str_eq(tok->strs['\n'], "\xc4\x8a"));
    CHECK(kara_gguf_str_eq(tok->strs['a'], "a"));
    CHECK(kara_gguf_str_eq(tok->strs[0xAD], "\xc5\x83"));
    CHECK(kara_gguf_str_eq(tok->strs[0xFF], "\xc3\xbf"));
    CHECK(kara_gguf_str_eq(tok->strs[0xA1], "\xc2\xa1"));
    CHECK(kara_gguf_str_eq(mrg->strs[0], "\xc4\xa0 t"));
    for (int i = 0; i < 256; i++) CHECK_EQ_INT(kara_gguf_arr_int(typ, (uint64_t)i), 1);
    /* every merge "A B" produces a token "AB" */
    for (uint64_t m = 0; m < mrg->n; m++) {
        char joined[64];
        const kara_gguf_str ms = mrg->strs[m];
        int sp = -1;
        for (uint64_t k = 0; k < ms.len; k++)
            if (ms.ptr[k] == ' ') sp = (int)k;
        CHECK_MSG(sp > 0 && ms.len < sizeof joined, "merge %llu has no space", (unsigned long long)m);
        if (sp <= 0 || ms.len >= sizeof joined) continue;
        snprintf(joined, sizeof joined, "%.*s%.*s", sp, ms.ptr, (int)(ms.len - (uint64_t)sp - 1), ms.ptr + sp + 1);
        bool found = false;
        for (uint64_t t = 0; t < tok->n && !found; t++) found = kara_gguf_str_eq(tok->strs[t], joined);
        CHECK_MSG(found, "merge result '%s' is not a token", joined);
    }
    /* specials */
    static const struct {
        const char *text;
        int type;
    } sp[] = {{"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<think>", 4}, {"</think>", 4}};
    int64_t id_eot = -1, id_end = -1;
    for (size_t k = 0; k < 5; k++) {
        int64_t id = -1;
        for (uint64_t t = 0; t < tok->n; t++)
            if (kara_gguf_str_eq(tok->strs[t], sp[k].text)) id = (int64_t)t;
        CHECK_MSG(id >= 0, "special token %s missing", sp[k].text);
        if (id >= 0) CHECK_EQ_INT(kara_gguf_arr_int(typ, (uint64_t)id), sp[k].type);
        if (k == 0) id_eot = id;
        if (k == 2) id_end = id;
    }
    CHECK_EQ_INT(get_u(g, NULL, "tokenizer.ggml.bos_token_id"), id_eot);
    CHECK_EQ_INT(get_u(g, NULL, "tokenizer.ggml.eos_token_id"), id_end);
    bool add_bos = true;
    CHECK(kara_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) && !add_bos);
    /* padding up to n_vocab: unused tokens, all texts unique */
    CHECK(tok->strs[n_vocab - 1].len > 6 && !memcmp(tok->strs[n_vocab - 1].ptr, "<|pad_", 6));
    CHECK_EQ_INT(kara_gguf_arr_int(typ, (uint64_t)n_vocab - 1), 5);
    int dups = 0;
    for (uint64_t a = 0; a < tok->n; a++)
        for (uint64_t b = a + 1; b < tok->n; b++)
            if (tok->strs[a].len == tok->strs[b].len && !memcmp(tok->strs[a].ptr, tok->strs[b].ptr, tok->strs[a].len))
                dups++;
    CHECK_EQ_INT(dups, 0);
    CHECK(kara_gguf_get_str(g, "tokenizer.chat_template", &s) && s.len > 0);
}

/* Weights ~N(0, 1/row), norms ~1 + N(0, 0.01), biases ~N(0, 0.04). */
static void check_distribution(const kara_gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kara_gguf_tensor *t = &g->tensors[i];
        if (t->type != KR_TYPE_F32) continue;
        int64_t n = t->ne[0] * t->ne[1];
        const float *x = t->data;
        double s = 0, ss = 0;
        for (int64_t k = 0; k < n; k++) {
            s += x[k];
            ss += (double)x[k] * x[k];
        }
        double mean = s / (double)n, sd = sqrt(ss / (double)n - mean * mean);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        double want_mean = 0, want_sd;
        if (strstr(name, "norm"))
            want_mean = 1, want_sd = 0.1;
        else if (strstr(name, "bias"))
            want_sd = 0.2;
        else
            want_sd = 1.0 / sqrt((double)t->ne[0]);
        CHECK_MSG(fabs(mean - want_mean) < 4 * want_sd / sqrt((double)n) + 1e-6, "%s: mean %g, expected %g", name, mean,
                  want_mean);
        CHECK_MSG(fabs(sd / want_sd - 1) < (n >= 1000 ? 0.05 : 0.25), "%s: std %g, expected %g", name, sd, want_sd);
    }
}

static void test_models(void) {
    static const char *const archs[] = {"llama", "qwen2", "qwen3"};
    static const struct {
        const char *type;
        bool pure;
        kr_type (*want)(const kr_synth_params *, const char *, bool);
    } types[] = {
        {"F32", false, type_pure},    {"F16", false, type_pure},    {"BF16", false, type_pure},
        {"Q8_0", false, type_legacy}, {"Q4_0", false, type_legacy}, {"Q4_1", true, type_pure},
        {"Q5_0", true, type_pure},    {"Q5_1", true, type_pure},    {"Q4_K", true, type_pure},
        {"Q5_K", true, type_pure},    {"Q6_K", false, type_pure},   {"Q4_K_M", false, type_km},
        {"Q5_K_M", false, type_km},
    };
    for (size_t a = 0; a < 3; a++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            /* every type for qwen3; a few for the other two */
            if (strcmp(archs[a], "qwen3") && strcmp(types[t].type, "F32") && strcmp(types[t].type, "Q8_0") &&
                strcmp(types[t].type, "Q4_K_M"))
                continue;
            kr_ftype ft;
            CHECK(kr_ftype_parse(types[t].type, &ft));
            kr_synth_params p;
            small_shape(&p, archs[a], ft, types[t].pure);
            char label[64];
            snprintf(label, sizeof label, "%s-%s%s", archs[a], types[t].type, types[t].pure ? "-pure" : "");
            char file[80];
            snprintf(file, sizeof file, "%s.gguf", label);
            kara_gguf *g = write_and_open(&p, file);
            if (!g) continue;
            check_metadata(g, &p, label);
            check_tensors(g, &p, label, types[t].want);
            if (ft == KR_FTYPE_ALL_F32) check_distribution(g);
            if (a == 2 && t == 0) check_vocab(g, p.n_vocab);
            kara_gguf_close(g);
        }
    }
    /* tied embeddings: no output.weight; in Q4_K_M token_embd becomes Q6_K */
    kr_synth_params p;
    small_shape(&p, "qwen3", KR_FTYPE_MOSTLY_Q4_K_M, false);
    p.tied = true;
    kara_gguf *g = write_and_open(&p, "tied-q4km.gguf");
    if (g) {
        check_tensors(g, &p, "tied-Q4_K_M", type_km);
        CHECK(kara_gguf_find_tensor(g, "output.weight") == NULL);
        kara_gguf_close(g);
    }
}

/* The full-size vocabulary of a real shape, and the tiny preset in Q4_K_M
 * whose 128-wide rows fall back from Q4_K the way llama.cpp does. */
static void test_presets(void) {
    kr_synth_params p;
    kr_synth_params_init(&p);
    CHECK(kr_synth_preset(&p, "qwen3-0.6b"));
    CHECK(p.n_layer == 28 && p.n_embd == 1024 && p.n_head == 16 && p.n_head_kv == 8 && p.head_dim == 128 &&
          p.n_ff == 3072 && p.n_vocab == 151936 && p.tied && p.rope_freq_base == 1000000.0f && p.n_ctx == 40960);
    CHECK(kr_synth_preset(&p, "qwen3-1.7b"));
    CHECK(p.n_layer == 28 && p.n_embd == 2048 && p.n_ff == 6144 && p.n_head == 16 && p.n_head_kv == 8 &&
          p.head_dim == 128 && p.tied);
    CHECK(!kr_synth_preset(&p, "qwen3-70b"));

    kr_synth_params_init(&p);
    CHECK(kr_synth_preset(&p, "tiny"));
    CHECK(p.n_layer == 4 && p.n_embd == 128 && p.n_head == 4 && p.n_head_kv == 2 && p.head_dim == 32 && p.n_ff == 256 &&
          p.n_vocab == 512 && p.n_ctx == 1024);
    snprintf(p.arch, sizeof p.arch, "qwen3");
    p.ftype = KR_FTYPE_MOSTLY_Q4_K_M;
    kara_gguf *g = write_and_open(&p, "tiny-q4km.gguf");
    if (g) {
        static const struct {
            const char *name;
            kr_type type;
        } want[] = {
            {"token_embd.weight", KR_TYPE_Q5_0}, /* Q4_K needs rows of 256: falls back to Q5_0 */
            {"output.weight", KR_TYPE_Q8_0},     /* output rule, rows not a multiple of 256 */
            {"blk.0.attn_q.weight", KR_TYPE_Q5_0},     {"blk.0.attn_v.weight", KR_TYPE_Q5_0},
            {"blk.2.attn_v.weight", KR_TYPE_Q8_0},   /* Q6_K layer (4 layers: 2 and 3), falls back */
            {"blk.0.ffn_down.weight", KR_TYPE_Q4_K}, /* rows of 256 fit */
            {"blk.2.ffn_down.weight", KR_TYPE_Q6_K},   {"blk.3.ffn_down.weight", KR_TYPE_Q6_K},
            {"blk.1.attn_q_norm.weight", KR_TYPE_F32},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const kara_gguf_tensor *t = kara_gguf_find_tensor(g, want[i].name);
            CHECK_MSG(t && t->type == (uint32_t)want[i].type, "tiny Q4_K_M: %s is %s, expected %s", want[i].name,
                      t ? kr_type_get(t->type)->name : "missing", kr_type_get(want[i].type)->name);
        }
        const kara_gguf_array *tok = kara_gguf_get_arr(g, "tokenizer.ggml.tokens");
        CHECK(tok && tok->n == 512);
        kara_gguf_close(g);
    }
}

/* The mix rule itself, on the 28-layer shapes the speed tests use. */
static void test_mix_rule(void) {
    /* llama.cpp's use_more_bits for 28 layers: i < 3, i >= 24, (i - 3) % 3 == 2 */
    const int more[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
    for (int il = 0; il < 28; il++) {
        bool m = false;
        for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) m |= more[k] == il;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, name, 2, 1024, 28, true),
                     m ? KR_TYPE_Q6_K : KR_TYPE_Q4_K);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q5_K_M, false, name, 2, 1024, 28, true),
                     m ? KR_TYPE_Q6_K : KR_TYPE_Q5_K);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_S, false, name, 2, 1024, 28, true),
                     il < 4 ? KR_TYPE_Q5_K : KR_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, name, 2, 3072, 28, true),
                     m ? KR_TYPE_Q6_K : KR_TYPE_Q4_K);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_S, false, name, 2, 3072, 28, true),
                     il < 3 ? KR_TYPE_Q5_K : KR_TYPE_Q4_K);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, true, name, 2, 3072, 28, true), KR_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", il);
        CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, name, 2, 1024, 28, true), KR_TYPE_Q4_K);
    }
    /* tied token_embd doubles as the output: Q6_K for Q4_K_M and Q4_0, Q8_0 stays */
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, "token_embd.weight", 2, 1024, 28, true),
                 KR_TYPE_Q6_K);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, "token_embd.weight", 2, 1024, 28, false),
                 KR_TYPE_Q4_K);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_0, false, "token_embd.weight", 2, 1024, 28, true),
                 KR_TYPE_Q6_K);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q8_0, false, "output.weight", 2, 1024, 28, false), KR_TYPE_Q8_0);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_0, true, "token_embd.weight", 2, 1024, 28, true),
                 KR_TYPE_Q4_0);
    /* shape fallbacks (stories260K: ffn_down rows of 172) */
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q8_0, false, "blk.0.ffn_down.weight", 2, 172, 5, false),
                 KR_TYPE_F16);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, "blk.0.ffn_gate.weight", 2, 64, 5, false),
                 KR_TYPE_Q5_0);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q5_K_M, false, "blk.0.ffn_gate.weight", 2, 64, 5, false),
                 KR_TYPE_Q5_1);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q6_K, false, "blk.0.ffn_gate.weight", 2, 160, 5, false),
                 KR_TYPE_Q8_0);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, "blk.0.ffn_down.weight", 2, 172, 5, false),
                 KR_TYPE_F16);
    /* norms, biases and 1-D tensors are F32 whatever the file type */
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q4_K_M, false, "blk.0.attn_norm.weight", 1, 1024, 28, true),
                 KR_TYPE_F32);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_Q8_0, false, "blk.0.attn_q.bias", 1, 1024, 28, true),
                 KR_TYPE_F32);
    CHECK_EQ_INT(kr_ftype_tensor_type(KR_FTYPE_MOSTLY_F16, false, "blk.0.attn_q.weight", 2, 100, 28, true),
                 KR_TYPE_F16);
    /* names */
    kr_ftype f;
    CHECK(kr_ftype_parse("q4_k_m", &f) && f == KR_FTYPE_MOSTLY_Q4_K_M);
    CHECK(kr_ftype_parse("Q4_K", &f) && f == KR_FTYPE_MOSTLY_Q4_K_M);
    CHECK(kr_ftype_parse("bf16", &f) && f == KR_FTYPE_MOSTLY_BF16 && f == 32);
    CHECK(!kr_ftype_parse("Q3_K_M", &f));
    CHECK(!strcmp(kr_ftype_name(KR_FTYPE_MOSTLY_Q5_K_M), "Q5_K_M"));
    CHECK_EQ_INT(kr_ftype_layer_of("blk.17.ffn_up.weight"), 17);
    CHECK_EQ_INT(kr_ftype_layer_of("output.weight"), -1);
    CHECK_EQ_INT(kr_ftype_layer_of("blk.x.ffn_up.weight"), -1);
}

/* Same seed, same bytes; another seed, other weights. */
static void test_determinism(void) {
    kr_synth_params p;
    small_shape(&p, "qwen2", KR_FTYPE_MOSTLY_Q4_K_M, false);
    char err[512];
    const char *a = kr_test_path(kr_test_tmpdir(), "det-a.gguf");
    const char *b = kr_test_path(kr_test_tmpdir(), "det-b.gguf");
    const char *c = kr_test_path(kr_test_tmpdir(), "det-c.gguf");
    CHECK(kr_synth_write(&p, a, NULL, NULL, err, sizeof err) == KARA_OK);
    CHECK(kr_synth_write(&p, b, NULL, NULL, err, sizeof err) == KARA_OK);
    p.seed = 43;
    CHECK(kr_synth_write(&p, c, NULL, NULL, err, sizeof err) == KARA_OK);
    size_t na = 0, nb = 0, nc = 0;
    char *da = kr_test_read_file(a, &na), *db = kr_test_read_file(b, &nb), *dc = kr_test_read_file(c, &nc);
    CHECK(da && db && dc);
    if (da && db && dc) {
        CHECK_MSG(na == nb && !memcmp(da, db, na), "two files from seed 42 differ");
        CHECK_MSG(na == nc && memcmp(da, dc, na) != 0, "seeds 42 and 43 give the same file");
    }
    free(da);
    free(db);
    free(dc);
}

static void test_validation(void) {
    kr_synth_params p;
    char err[256];
    small_shape(&p, "gpt9", KR_FTYPE_ALL_F32, false);
    CHECK(kr_synth_validate(&p, err, sizeof err) == KARA_ERR_ARG && strstr(err, "gpt9"));
    small_shape(&p, "llama", KR_FTYPE_ALL_F32, false);
    p.n_head_kv = 3;
    CHECK(kr_synth_validate(&p, err, sizeof err) == KARA_ERR_ARG && strstr(err, "kv-heads"));
    small_shape(&p, "llama", KR_FTYPE_ALL_F32, false);
    p.n_vocab = 100;
    CHECK(kr_synth_validate(&p, err, sizeof err) == KARA_ERR_ARG && strstr(err, "vocab"));
    small_shape(&p, "llama", KR_FTYPE_ALL_F32, false);
    p.head_dim = 33;
    CHECK(kr_synth_validate(&p, err, sizeof err) == KARA_ERR_ARG && strstr(err, "even"));
    small_shape(&p, "llama", KR_FTYPE_ALL_F32, false);
    CHECK(kr_synth_write(&p, "/nonexistent-dir/m.gguf", NULL, NULL, err, sizeof err) == KARA_ERR_IO);
    CHECK_MSG(strstr(err, "/nonexistent-dir/m.gguf") != NULL, "message '%s' should name the path", err);
}

int main(void) {
    test_mix_rule();
    test_models();
    test_presets();
    test_determinism();
    test_validation();
    print_worst();
    return kr_test_finish();
}
