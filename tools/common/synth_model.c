/*
 * synth_model.c - random-weight models for tests and speed measurements.
 *
 * Sections: presets and checks; the built-in byte-level BPE vocabulary; the
 * tensor list of each architecture; the value generator; the writer loop.
 */
#include "synth_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "kernels.h"

/* ------------------------------------------------------------------------ */
/* Presets and checks                                                        */
/* ------------------------------------------------------------------------ */

typedef struct preset {
    const char *name;
    const char *arch; /* NULL: keep the caller's */
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    float rope_freq_base;
    bool tied;
} preset;

static const preset k_presets[] = {
    {"tiny", NULL, 4, 128, 4, 2, 32, 256, 512, 1024, 10000.0f, false},
    {"tiny-k", NULL, 4, 256, 4, 2, 64, 512, 512, 1024, 10000.0f, false},
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, true},
    {"qwen3-1.7b", "qwen3", 28, 2048, 16, 8, 128, 6144, 151936, 40960, 1000000.0f, true},
};
#define N_PRESETS (sizeof k_presets / sizeof k_presets[0])

void kr_synth_params_init(kr_synth_params *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->arch, sizeof p->arch, "llama");
    kr_synth_preset(p, "tiny");
    p->ftype = KR_FTYPE_ALL_F32;
    p->seed = 1;
    p->alignment = 32;
}

bool kr_synth_preset(kr_synth_params *p, const char *name) {
    for (size_t i = 0; i < N_PRESETS; i++) {
        const preset *s = &k_presets[i];
        if (strcmp(s->name, name) != 0) continue;
        if (s->arch) snprintf(p->arch, sizeof p->arch, "%s", s->arch);
        p->n_layer = s->n_layer;
        p->n_embd = s->n_embd;
        p->n_head = s->n_head;
        p->n_head_kv = s->n_head_kv;
        p->head_dim = s->head_dim;
        p->n_ff = s->n_ff;
        p->n_vocab = s->n_vocab;
        p->n_ctx = s->n_ctx;
        p->rope_freq_base = s->rope_freq_base;
        p->tied = s->tied;
        return true;
    }
    return false;
}

const char *kr_synth_preset_names(void) { return "tiny, tiny-k, qwen3-0.6b, qwen3-1.7b"; }

static int32_t head_dim_of(const kr_synth_params *p) {
    return p->head_dim > 0 ? p->head_dim : (p->n_head > 0 ? p->n_embd / p->n_head : 0);
}

static float eps_of(const kr_synth_params *p) {
    if (p->rms_eps > 0) return p->rms_eps;
    return strcmp(p->arch, "llama") == 0 ? 1e-5f : 1e-6f;
}

static bool seterr(char *err, size_t size, const char *fmt, ...) {
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return false;
}

kara_status kr_synth_validate(const kr_synth_params *p, char *err, size_t err_size) {
    if (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen2") && strcmp(p->arch, "qwen3")) {
        seterr(err, err_size, "unknown architecture '%s' (llama, qwen2, qwen3)", p->arch);
        return KARA_ERR_ARG;
    }
    struct {
        const char *name;
        int64_t v, lo, hi;
    } f[] = {
        {"layers", p->n_layer, 1, 4096},
        {"hidden", p->n_embd, 1, 1 << 20},
        {"heads", p->n_head, 1, 4096},
        {"kv-heads", p->n_head_kv, 1, 4096},
        {"head-dim", head_dim_of(p), 2, 1 << 16},
        {"ffn", p->n_ff, 1, 1 << 22},
        {"vocab", p->n_vocab, kr_synth_min_vocab(), 1 << 24},
        {"ctx", p->n_ctx, 1, 1 << 30},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < f[i].lo || f[i].v > f[i].hi) {
            seterr(err, err_size, "%s = %lld is outside [%lld, %lld]", f[i].name, (long long)f[i].v, (long long)f[i].lo,
                   (long long)f[i].hi);
            return KARA_ERR_ARG;
        }
    }
    if (p->n_head % p->n_head_kv != 0) {
        seterr(err, err_size, "heads (%d) must be a multiple of kv-heads (%d)", p->n_head, p->n_head_kv);
        return KARA_ERR_ARG;
    }
    if (head_dim_of(p) % 2 != 0) {
        seterr(err, err_size, "head-dim %d must be even (RoPE rotates pairs)", head_dim_of(p));
        return KARA_ERR_ARG;
    }
    if (p->head_dim <= 0 && p->n_embd % p->n_head != 0) {
        seterr(err, err_size, "hidden %d is not a multiple of heads %d: give head-dim", p->n_embd, p->n_head);
        return KARA_ERR_ARG;
    }
    if (!(p->rope_freq_base > 0)) {
        seterr(err, err_size, "rope base must be positive");
        return KARA_ERR_ARG;
    }
    if (!strcmp(kr_ftype_name(p->ftype), "?")) {
        seterr(err, err_size, "unknown file type %d", (int)p->ftype);
        return KARA_ERR_ARG;
    }
    if (p->alignment == 0 || (p->alignment & (p->alignment - 1)) != 0) {
        seterr(err, err_size, "alignment %u is not a power of two", p->alignment);
        return KARA_ERR_ARG;
    }
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Vocabulary: 256 byte tokens in GPT-2's byte-to-unicode mapping, a few     */
/* merges, the chat/thinking special tokens, unused padding tokens.          */
/* ------------------------------------------------------------------------ */

/* Merges as raw byte strings; each result is a token. The order is the
 * merge rank. */
static const char *const k_merges[][2] = {
    {" ", "t"}, {"h", "e"}, {" ", "a"}, {"i", "n"}, {" t", "he"}, {"e", "r"}, {"o", "n"}, {" ", "s"},
    {"r", "e"}, {"a", "n"}, {" ", "w"}, {"o", "u"}, {"e", "n"},   {" ", "o"}, {"a", "t"}, {"\n", "\n"},
};
#define N_MERGES ((int32_t)(sizeof k_merges / sizeof k_merges[0]))

static const struct {
    const char *text;
    int type;
} k_specials[] = {
    {KR_SYNTH_TOK_ENDOFTEXT, 3},                                                    /* CONTROL */
    {KR_SYNTH_TOK_IM_START, 3},  {KR_SYNTH_TOK_IM_END, 3}, {KR_SYNTH_TOK_THINK, 4}, /* USER_DEFINED */
    {KR_SYNTH_TOK_THINK_END, 4},
};
#define N_SPECIALS ((int32_t)(sizeof k_specials / sizeof k_specials[0]))
#define TOKEN_NORMAL 1
#define TOKEN_UNUSED 5

int32_t kr_synth_min_vocab(void) { return 256 + N_MERGES + N_SPECIALS; }

/* GPT-2 maps every byte to a printable code point: printable Latin-1 bytes
 * map to themselves, the other 68 to U+0100.. in byte order. */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (uint32_t c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) n++;
    return 256 + n;
}

/* Append the UTF-8 of byte-level text for the raw bytes s. */
static size_t encode_bytes(const char *s, char *out) {
    size_t n = 0;
    for (; *s; s++) {
        uint32_t cp = byte_to_cp((uint8_t)*s);
        if (cp < 0x80) {
            out[n++] = (char)cp;
        } else {
            out[n++] = (char)(0xC0 | (cp >> 6));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[n] = 0;
    return n;
}

typedef struct vocab {
    char **tokens;
    int32_t *types;
    char **merges;
    int32_t n;
    int32_t id_endoftext, id_im_end;
} vocab;

static void vocab_free(vocab *v) {
    if (v->tokens)
        for (int32_t i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->types);
    if (v->merges)
        for (int32_t i = 0; i < N_MERGES; i++) free(v->merges[i]);
    free(v->merges);
    memset(v, 0, sizeof *v);
}

static bool vocab_build(vocab *v, int32_t n_vocab) {
    memset(v, 0, sizeof *v);
    v->n = n_vocab;
    v->tokens = calloc((size_t)n_vocab, sizeof *v->tokens);
    v->types = calloc((size_t)n_vocab, sizeof *v->types);
    v->merges = calloc(N_MERGES, sizeof *v->merges);
    if (!v->tokens || !v->types || !v->merges) return false;
    char buf[64];
    int32_t id = 0;
    for (int b = 0; b < 256; b++, id++) {
        char raw[2] = {(char)b, 0};
        if (b == 0) { /* encode_bytes stops at NUL: byte 0 maps to U+0100 */
            buf[0] = (char)0xC4;
            buf[1] = (char)0x80;
            buf[2] = 0;
        } else {
            encode_bytes(raw, buf);
        }
        v->tokens[id] = strdup(buf);
        v->types[id] = TOKEN_NORMAL;
    }
    for (int32_t m = 0; m < N_MERGES; m++, id++) {
        char l[32], r[32], joined[8];
        encode_bytes(k_merges[m][0], l);
        encode_bytes(k_merges[m][1], r);
        snprintf(buf, sizeof buf, "%s %s", l, r);
        v->merges[m] = strdup(buf);
        snprintf(joined, sizeof joined, "%s%s", k_merges[m][0], k_merges[m][1]);
        encode_bytes(joined, buf);
        v->tokens[id] = strdup(buf);
        v->types[id] = TOKEN_NORMAL;
    }
    for (int32_t s = 0; s < N_SPECIALS; s++, id++) {
        v->tokens[id] = strdup(k_specials[s].text);
        v->types[id] = k_specials[s].type;
        if (!strcmp(k_specials[s].text, KR_SYNTH_TOK_ENDOFTEXT)) v->id_endoftext = id;
        if (!strcmp(k_specials[s].text, KR_SYNTH_TOK_IM_END)) v->id_im_end = id;
    }
    for (int32_t k = 0; id < n_vocab; id++, k++) {
        snprintf(buf, sizeof buf, "<|pad_%d|>", k);
        v->tokens[id] = strdup(buf);
        v->types[id] = TOKEN_UNUSED;
    }
    for (int32_t i = 0; i < n_vocab; i++)
        if (!v->tokens[i]) return false;
    for (int32_t m = 0; m < N_MERGES; m++)
        if (!v->merges[m]) return false;
    return true;
}

static const char k_chat_template[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* ------------------------------------------------------------------------ */
/* Tensor list                                                               */
/* ------------------------------------------------------------------------ */

typedef enum tensor_kind { KIND_WEIGHT, KIND_NORM, KIND_BIAS } tensor_kind;

typedef struct tensor_spec {
    char name[64];
    int n_dims;
    int64_t ne[2];
    tensor_kind kind;
    kr_type type;
} tensor_spec;

typedef struct tensor_list {
    tensor_spec *t;
    int n, cap;
} tensor_list;

static bool add_spec(tensor_list *l, const char *name, int n_dims, int64_t ne0, int64_t ne1, tensor_kind kind) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        tensor_spec *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) return false;
        l->t = t;
        l->cap = cap;
    }
    tensor_spec *s = &l->t[l->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n_dims = n_dims;
    s->ne[0] = ne0;
    s->ne[1] = ne1;
    s->kind = kind;
    return true;
}

/* The tensors of a model in file order, with the type each one gets. */
static bool build_tensor_list(const kr_synth_params *p, tensor_list *l) {
    memset(l, 0, sizeof *l);
    const int64_t d = p->n_embd, hd = head_dim_of(p), nq = (int64_t)p->n_head * hd, nkv = (int64_t)p->n_head_kv * hd;
    const bool qwen2 = !strcmp(p->arch, "qwen2"), qwen3 = !strcmp(p->arch, "qwen3");
    bool ok = add_spec(l, "token_embd.weight", 2, d, p->n_vocab, KIND_WEIGHT);
    ok = ok && add_spec(l, "output_norm.weight", 1, d, 1, KIND_NORM);
    if (!p->tied) ok = ok && add_spec(l, "output.weight", 2, d, p->n_vocab, KIND_WEIGHT);
    char n[64];
#define BLK(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, il), n)
    for (int il = 0; il < p->n_layer && ok; il++) {
        ok = ok && add_spec(l, BLK("attn_norm.weight"), 1, d, 1, KIND_NORM);
        ok = ok && add_spec(l, BLK("attn_q.weight"), 2, d, nq, KIND_WEIGHT);
        ok = ok && add_spec(l, BLK("attn_k.weight"), 2, d, nkv, KIND_WEIGHT);
        ok = ok && add_spec(l, BLK("attn_v.weight"), 2, d, nkv, KIND_WEIGHT);
        if (qwen2) {
            ok = ok && add_spec(l, BLK("attn_q.bias"), 1, nq, 1, KIND_BIAS);
            ok = ok && add_spec(l, BLK("attn_k.bias"), 1, nkv, 1, KIND_BIAS);
            ok = ok && add_spec(l, BLK("attn_v.bias"), 1, nkv, 1, KIND_BIAS);
        }
        if (qwen3) {
            ok = ok && add_spec(l, BLK("attn_q_norm.weight"), 1, hd, 1, KIND_NORM);
            ok = ok && add_spec(l, BLK("attn_k_norm.weight"), 1, hd, 1, KIND_NORM);
        }
        ok = ok && add_spec(l, BLK("attn_output.weight"), 2, nq, d, KIND_WEIGHT);
        ok = ok && add_spec(l, BLK("ffn_norm.weight"), 1, d, 1, KIND_NORM);
        ok = ok && add_spec(l, BLK("ffn_gate.weight"), 2, d, p->n_ff, KIND_WEIGHT);
        ok = ok && add_spec(l, BLK("ffn_up.weight"), 2, d, p->n_ff, KIND_WEIGHT);
        ok = ok && add_spec(l, BLK("ffn_down.weight"), 2, p->n_ff, d, KIND_WEIGHT);
    }
#undef BLK
    if (!ok) {
        free(l->t);
        memset(l, 0, sizeof *l);
        return false;
    }
    for (int i = 0; i < l->n; i++) {
        tensor_spec *s = &l->t[i];
        s->type = kr_ftype_tensor_type(p->ftype, p->pure, s->name, s->n_dims, s->ne[0], p->n_layer, p->tied);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One stream per (seed, tensor name): values never depend on the type. */
static rng rng_for(uint64_t seed, const char *name) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001B3ull;
    rng r = {seed ^ h};
    splitmix64(&r.s);
    return r;
}

/* Approximately N(0,1): the sum of four 16-bit uniforms (Irwin-Hall), one
 * 64-bit draw per value, so a 2-billion-weight model stays quick to make. */
static float rng_normal(rng *r) {
    uint64_t x = splitmix64(&r->s);
    float sum = 0;
    for (int i = 0; i < 4; i++) sum += ((float)((x >> (16 * i)) & 0xFFFF) + 0.5f) * (1.0f / 65536.0f);
    return (sum - 2.0f) * 1.7320508f; /* variance of the sum is 4/12 */
}

static void gen_values(const tensor_spec *s, rng *r, float *out, int64_t n) {
    switch (s->kind) {
    case KIND_WEIGHT: {
        float std = 1.0f / sqrtf((float)s->ne[0]);
        for (int64_t i = 0; i < n; i++) out[i] = std * rng_normal(r);
        break;
    }
    case KIND_NORM:
        for (int64_t i = 0; i < n; i++) out[i] = 1.0f + 0.1f * rng_normal(r);
        break;
    case KIND_BIAS:
        for (int64_t i = 0; i < n; i++) out[i] = 0.2f * rng_normal(r);
        break;
    }
}

bool kr_synth_tensor_values(const kr_synth_params *p, const char *name, float *out, int64_t n) {
    tensor_list l;
    if (!build_tensor_list(p, &l)) return false;
    bool found = false;
    for (int i = 0; i < l.n && !found; i++) {
        if (strcmp(l.t[i].name, name) != 0) continue;
        if (n > l.t[i].ne[0] * l.t[i].ne[1]) break;
        rng r = rng_for(p->seed, name);
        gen_values(&l.t[i], &r, out, n);
        found = true;
    }
    free(l.t);
    return found;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

static kara_status set_metadata(kr_gguf_writer *w, const kr_synth_params *p, const vocab *v) {
    char k[128];
    const char *a = p->arch;
    char name[80];
    if (p->name[0])
        snprintf(name, sizeof name, "%s", p->name);
    else
        snprintf(name, sizeof name, "kara-synth-%s", a);
    kara_status st = kr_gguf_writer_set_str(w, "general.architecture", a);
#define SET(fn, suffix, val)                                                                                           \
    if (st == KARA_OK) {                                                                                               \
        snprintf(k, sizeof k, "%s." suffix, a);                                                                        \
        st = fn(w, k, val);                                                                                            \
    }
    if (st == KARA_OK) st = kr_gguf_writer_set_str(w, "general.name", name);
    /* in the order llama-quantize adds them */
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "general.alignment", p->alignment);
    SET(kr_gguf_writer_set_u32, "context_length", (uint32_t)p->n_ctx);
    SET(kr_gguf_writer_set_u32, "embedding_length", (uint32_t)p->n_embd);
    SET(kr_gguf_writer_set_u32, "block_count", (uint32_t)p->n_layer);
    SET(kr_gguf_writer_set_u32, "feed_forward_length", (uint32_t)p->n_ff);
    SET(kr_gguf_writer_set_u32, "attention.head_count", (uint32_t)p->n_head);
    SET(kr_gguf_writer_set_u32, "attention.head_count_kv", (uint32_t)p->n_head_kv);
    SET(kr_gguf_writer_set_f32, "attention.layer_norm_rms_epsilon", eps_of(p));
    SET(kr_gguf_writer_set_f32, "rope.freq_base", p->rope_freq_base);
    SET(kr_gguf_writer_set_u32, "rope.dimension_count", (uint32_t)head_dim_of(p));
    if (!strcmp(a, "qwen3") || head_dim_of(p) * p->n_head != p->n_embd) {
        SET(kr_gguf_writer_set_u32, "attention.key_length", (uint32_t)head_dim_of(p));
        SET(kr_gguf_writer_set_u32, "attention.value_length", (uint32_t)head_dim_of(p));
    }
#undef SET
    if (st == KARA_OK) st = kr_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == KARA_OK) st = kr_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    if (st == KARA_OK)
        st = kr_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (uint64_t)v->n);
    if (st == KARA_OK)
        st = kr_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KARA_GGUF_INT32, v->types, (uint64_t)v->n);
    if (st == KARA_OK)
        st = kr_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, N_MERGES);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->id_endoftext);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->id_im_end);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->id_endoftext);
    if (st == KARA_OK) st = kr_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (st == KARA_OK) st = kr_gguf_writer_set_str(w, "tokenizer.chat_template", k_chat_template);
    return st;
}

/* Generate, convert and write one tensor a chunk of rows at a time. The
 * values are drawn sequentially (one stream per tensor); the conversion of
 * the rows of a chunk, the slow part for K-quants, runs on all threads. */
static kara_status write_tensor(kr_gguf_writer *w, const kr_synth_params *p, const tensor_spec *s, float *xbuf,
                                uint8_t *ybuf, int64_t chunk_elems, char *err, size_t err_size) {
    const int64_t ne0 = s->ne[0], nrows = s->ne[1];
    const size_t row_bytes = kr_type_row_size(s->type, ne0);
    int64_t rows_per_chunk = chunk_elems / ne0;
    if (rows_per_chunk < 1) rows_per_chunk = 1;
    rng r = rng_for(p->seed, s->name);
    for (int64_t r0 = 0; r0 < nrows; r0 += rows_per_chunk) {
        int64_t nr = nrows - r0 < rows_per_chunk ? nrows - r0 : rows_per_chunk;
        gen_values(s, &r, xbuf, nr * ne0);
        bool ok = true;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(&& : ok)
#endif
        for (int64_t i = 0; i < nr; i++)
            ok = kr_quantize_row(s->type, xbuf + i * ne0, ybuf + (size_t)i * row_bytes, ne0) && ok;
        if (!ok) {
            seterr(err, err_size, "tensor '%s': no quantizer for type %s", s->name, kr_type_get(s->type)->name);
            return KARA_ERR_UNSUPPORTED;
        }
        kara_status st = kr_gguf_writer_write(w, ybuf, (size_t)nr * row_bytes);
        if (st != KARA_OK) {
            seterr(err, err_size, "%s", kr_gguf_writer_error(w));
            return st;
        }
    }
    return KARA_OK;
}

kara_status kr_synth_write(const kr_synth_params *p, const char *path, void (*progress)(float frac, void *user),
                           void *user, char *err, size_t err_size) {
    kara_status st = kr_synth_validate(p, err, err_size);
    if (st != KARA_OK) return st;
    vocab v;
    tensor_list l = {0};
    kr_gguf_writer *w = NULL;
    float *xbuf = NULL;
    uint8_t *ybuf = NULL;
    const int64_t chunk_elems = 1 << 20;
    int64_t max_row = 0;
    bool created = false;

    if (!vocab_build(&v, p->n_vocab) || !build_tensor_list(p, &l) || kr_gguf_writer_create(&w) != KARA_OK) {
        seterr(err, err_size, "out of memory");
        st = KARA_ERR_NOMEM;
        goto done;
    }
    st = set_metadata(w, p, &v);
    uint64_t total = 0, written = 0;
    for (int i = 0; i < l.n && st == KARA_OK; i++) {
        if (l.t[i].ne[0] > max_row) max_row = l.t[i].ne[0];
        st = kr_gguf_writer_add_tensor(w, l.t[i].name, l.t[i].type, l.t[i].n_dims, l.t[i].ne, NULL);
        total += kr_gguf_writer_tensor_nbytes(w, (uint64_t)i);
    }
    if (st != KARA_OK) {
        seterr(err, err_size, "%s", kr_gguf_writer_error(w));
        goto done;
    }
    /* buffers for a chunk: at least one row, F32 being the widest type */
    int64_t elems = max_row > chunk_elems ? max_row : chunk_elems;
    xbuf = malloc((size_t)elems * sizeof(float));
    ybuf = malloc((size_t)elems * sizeof(float));
    if (!xbuf || !ybuf) {
        seterr(err, err_size, "out of memory");
        st = KARA_ERR_NOMEM;
        goto done;
    }
    st = kr_gguf_writer_begin(w, path);
    created = st == KARA_OK;
    if (st != KARA_OK) {
        seterr(err, err_size, "%s", kr_gguf_writer_error(w));
        goto done;
    }
    for (int i = 0; i < l.n && st == KARA_OK; i++) {
        st = write_tensor(w, p, &l.t[i], xbuf, ybuf, elems, err, err_size);
        written += kr_gguf_writer_tensor_nbytes(w, (uint64_t)i);
        if (progress && st == KARA_OK) progress(total ? (float)written / (float)total : 1.0f, user);
    }
    if (st == KARA_OK) {
        st = kr_gguf_writer_end(w);
        if (st != KARA_OK) seterr(err, err_size, "%s", kr_gguf_writer_error(w));
    }
done:
    free(xbuf);
    free(ybuf);
    kr_gguf_writer_free(w);
    free(l.t);
    vocab_free(&v);
    if (st != KARA_OK && created) remove(path); /* no half-written model */
    return st;
}
