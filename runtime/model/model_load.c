/* model_load.c - from a parsed GGUF to a kara_model: read the architecture's
 * hyper-parameters, find every tensor the forward pass needs, and check its
 * type and shape before anything runs, so a bad file fails here with a
 * message naming the tensor instead of misbehaving later. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "params_size.h"
#include "status.h"

typedef struct arch_desc {
    const char *name;
    kr_arch arch;
    bool rope_neox;
    bool qkv_bias;
    bool qk_norm;
} arch_desc;

/* The RoPE style each architecture uses in GGUF: llama files carry Q/K rows
 * permuted for interleaved pairs; Qwen files keep HF's half-split (NeoX). */
static const arch_desc archs[] = {
    {"llama", KR_ARCH_LLAMA, false, false, false},
    {"qwen2", KR_ARCH_QWEN2, true, true, false},
    {"qwen3", KR_ARCH_QWEN3, true, false, true},
};

typedef struct loader {
    kara_model *m;
    const char *path;
    float *store; /* next free float in m->f32_store */
} loader;

static kara_status get_u32(loader *ld, const char *suffix, int32_t *out, bool required) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->m->arch_name, suffix);
    uint64_t v;
    if (!kara_gguf_get_u64(ld->m->gguf, key, &v)) {
        if (!kara_gguf_find(ld->m->gguf, key)) {
            if (!required) return KARA_OK;
            return kr_set_error(KARA_ERR_FORMAT, "%s: required metadata key '%s' is missing", ld->path, key);
        }
        return kr_set_error(KARA_ERR_FORMAT, "%s: metadata key '%s' must be a non-negative integer", ld->path, key);
    }
    if (v == 0 || v > (1u << 30))
        return kr_set_error(KARA_ERR_FORMAT, "%s: metadata key '%s' = %llu is out of range", ld->path, key,
                            (unsigned long long)v);
    *out = (int32_t)v;
    return KARA_OK;
}

static kara_status get_f32(loader *ld, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->m->arch_name, suffix);
    double v;
    if (!kara_gguf_find(ld->m->gguf, key)) return KARA_OK;
    if (!kara_gguf_get_f64(ld->m->gguf, key, &v) || !isfinite(v) || v <= 0)
        return kr_set_error(KARA_ERR_FORMAT, "%s: metadata key '%s' must be a positive number", ld->path, key);
    *out = (float)v;
    return KARA_OK;
}

/* A name from the file as C-escaped text (\\0 for a NUL byte, \\xHH for
 * other control bytes, at most 64 bytes of it), so a message never cuts a
 * name short at a NUL or prints raw control bytes. */
static void escape_text(kara_gguf_str s, char *buf, size_t size) {
    size_t n = 0, len = s.len > 64 ? 64 : (size_t)s.len;
    for (size_t i = 0; i < len && n + 5 < size; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == 0)
            n += (size_t)snprintf(buf + n, size - n, "\\0");
        else if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'')
            n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
        else
            buf[n++] = (char)c;
    }
    if (s.len > 64 && n + 4 < size) n += (size_t)snprintf(buf + n, size - n, "...");
    buf[n] = 0;
}

static kara_status read_hparams(loader *ld) {
    kara_model *m = ld->m;
    kr_hparams *hp = &m->hp;
    const kara_gguf_kv *arch_kv = kara_gguf_find(m->gguf, "general.architecture");
    if (!arch_kv) return kr_set_error(KARA_ERR_FORMAT, "%s: metadata key 'general.architecture' is missing", ld->path);
    if (arch_kv->value.type != KARA_GGUF_STRING)
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: metadata key 'general.architecture' has the wrong type (%s, expected "
                            "string)",
                            ld->path, kara_gguf_vtype_name(arch_kv->value.type));
    kara_gguf_str arch = arch_kv->value.v.str;
    const arch_desc *ad = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (kara_gguf_str_eq(arch, archs[i].name)) ad = &archs[i];
    if (!ad) {
        char shown[64 * 4 + 4];
        escape_text(arch, shown, sizeof shown);
        return kr_set_error(
            KARA_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (llama, qwen2, qwen3)%s", ld->path, shown,
            arch.len && memchr(arch.ptr, 0, arch.len) ? "; the name holds a NUL byte, shown as \\0" : "");
    }
    snprintf(m->arch_name, sizeof m->arch_name, "%s", ad->name);
    hp->arch = ad->arch;
    hp->rope_neox = ad->rope_neox;
    hp->qkv_bias = ad->qkv_bias;
    hp->qk_norm = ad->qk_norm;

    kara_status st;
    if ((st = get_u32(ld, "embedding_length", &hp->n_embd, true))) return st;
    if ((st = get_u32(ld, "block_count", &hp->n_layer, true))) return st;
    if ((st = get_u32(ld, "feed_forward_length", &hp->n_ff, true))) return st;
    if ((st = get_u32(ld, "attention.head_count", &hp->n_head, true))) return st;
    hp->n_ctx_train = 2048;
    if ((st = get_u32(ld, "context_length", &hp->n_ctx_train, false))) return st;
    hp->n_head_kv = hp->n_head;
    if ((st = get_u32(ld, "attention.head_count_kv", &hp->n_head_kv, false))) return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return kr_set_error(KARA_ERR_FORMAT, "%s: head_count %d is not a multiple of head_count_kv %d", ld->path,
                            hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = get_u32(ld, "attention.key_length", &hp->head_dim, false))) return st;
    hp->head_dim_v = hp->head_dim;
    if ((st = get_u32(ld, "attention.value_length", &hp->head_dim_v, false))) return st;
    if (hp->head_dim_v != hp->head_dim)
        return kr_set_error(KARA_ERR_UNSUPPORTED, "%s: key_length %d != value_length %d is not supported", ld->path,
                            hp->head_dim, hp->head_dim_v);
    hp->rope_dim = hp->head_dim;
    if ((st = get_u32(ld, "rope.dimension_count", &hp->rope_dim, false))) return st;
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return kr_set_error(KARA_ERR_FORMAT, "%s: rope.dimension_count %d is invalid for head dim %d", ld->path,
                            hp->rope_dim, hp->head_dim);
    hp->rope_freq_base = 10000.0f;
    if ((st = get_f32(ld, "rope.freq_base", &hp->rope_freq_base))) return st;
    hp->rms_eps = 1e-5f;
    if ((st = get_f32(ld, "attention.layer_norm_rms_epsilon", &hp->rms_eps))) return st;
    return KARA_OK;
}

/* Find a tensor and check its type is usable and its shape is exactly
 * {ne0, ne1} (ne1 = 0 for a vector). */
static kara_status find_tensor(loader *ld, const char *name, int64_t ne0, int64_t ne1, bool required,
                               const kara_gguf_tensor **out) {
    *out = NULL;
    const kara_gguf_tensor *t = kara_gguf_find_tensor(ld->m->gguf, name);
    if (!t) {
        if (!required) return KARA_OK;
        return kr_set_error(KARA_ERR_FORMAT, "%s: tensor '%s' is missing", ld->path, name);
    }
    const kr_type_info *ti = kr_type_get(t->type);
    if (!ti->supported)
        return kr_set_error(KARA_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which Kara does not support", ld->path,
                            name, ti->name);
    uint32_t want_dims = ne1 ? 2 : 1;
    bool ok = t->ne[0] == ne0 && (ne1 ? t->ne[1] == ne1 : true) && t->ne[2] == 1 && t->ne[3] == 1 &&
        (t->n_dims == want_dims || (t->n_dims > want_dims && t->ne[want_dims] == 1));
    if (!ne1) ok = ok && t->ne[1] == 1;
    if (!ok)
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", ld->path, name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)ne0, (long long)(ne1 ? ne1 : 1));
    *out = t;
    return KARA_OK;
}

static kara_status load_matrix(loader *ld, const char *name, int64_t n_cols, int64_t n_rows, bool required,
                               kr_weight *w) {
    const kara_gguf_tensor *t;
    kara_status st = find_tensor(ld, name, n_cols, n_rows, required, &t);
    if (st || !t) return st;
    w->data = t->data;
    w->type = (kr_type)t->type;
    w->n_cols = n_cols;
    w->n_rows = n_rows;
    w->row_bytes = kr_type_row_size(w->type, n_cols);
    ld->m->n_params += (uint64_t)(n_cols * n_rows);
    ld->m->weight_bytes += t->nbytes;
    return KARA_OK;
}

/* Vectors (norms, biases) are converted to f32 once: they are tiny and the
 * kernels then need only one element type for them. */
static kara_status load_vector(loader *ld, const char *name, int64_t n, bool required, const float **out) {
    const kara_gguf_tensor *t;
    *out = NULL;
    kara_status st = find_tensor(ld, name, n, 0, required, &t);
    if (st || !t) return st;
    float *dst = ld->store;
    ld->store += n;
    kr_dequantize_row((kr_type)t->type, t->data, dst, n);
    ld->m->n_params += (uint64_t)n;
    ld->m->weight_bytes += t->nbytes;
    *out = dst;
    return KARA_OK;
}

static kara_status load_weights(loader *ld) {
    kara_model *m = ld->m;
    const kr_hparams *hp = &m->hp;
    const kara_gguf_tensor *emb = kara_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return kr_set_error(KARA_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", ld->path);
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return kr_set_error(KARA_ERR_FORMAT, "%s: token_embd.weight has %lld rows", ld->path, (long long)emb->ne[1]);
    m->hp.n_vocab = (int32_t)emb->ne[1];
    int64_t e = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;

    /* The metadata's sizes (each up to 2^30) are only claims: the vectors
     * and layers they ask memory for must exist as tensors in the file, so
     * a header that asks for more than the file holds is refused before
     * anything is allocated for it (in double: the products overflow). */
    double want = (double)e * (1 + 2.0 * hp->n_layer) + (double)hp->n_layer * ((double)qd + 2.0 * (double)kvd) +
        (double)hp->n_layer * 2.0 * hp->head_dim;
    double have = 0;
    uint64_t n_tensors = kara_gguf_n_tensors(m->gguf);
    for (uint64_t i = 0; i < n_tensors; i++) {
        const kara_gguf_tensor *t = kara_gguf_tensor_at(m->gguf, i);
        have += (double)t->ne[0] * (double)t->ne[1] * (double)t->ne[2] * (double)t->ne[3];
    }
    if ((uint64_t)hp->n_layer * 9 + 2 > n_tensors || want > have)
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: metadata describes %d layers of width %d, more than the file's %llu tensors "
                            "(%.0f values) hold",
                            ld->path, hp->n_layer, hp->n_embd, (unsigned long long)n_tensors, have);
    size_t floats = (size_t)want;
    m->f32_store = malloc(floats * sizeof(float));
    m->layers = calloc((size_t)hp->n_layer, sizeof(kr_layer));
    if (!m->f32_store || !m->layers) return kr_set_error(KARA_ERR_NOMEM, "out of memory loading %s", ld->path);
    ld->store = m->f32_store;

    kara_status st;
    if ((st = load_matrix(ld, "token_embd.weight", e, hp->n_vocab, true, &m->tok_embd))) return st;
    if ((st = load_vector(ld, "output_norm.weight", e, true, &m->output_norm))) return st;
    if ((st = load_matrix(ld, "output.weight", e, hp->n_vocab, false, &m->output))) return st;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

    for (int il = 0; il < hp->n_layer; il++) {
        kr_layer *L = &m->layers[il];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
        if ((st = load_vector(ld, NAME("attn_norm.weight"), e, true, &L->attn_norm))) return st;
        if ((st = load_matrix(ld, NAME("attn_q.weight"), e, qd, true, &L->wq))) return st;
        if ((st = load_matrix(ld, NAME("attn_k.weight"), e, kvd, true, &L->wk))) return st;
        if ((st = load_matrix(ld, NAME("attn_v.weight"), e, kvd, true, &L->wv))) return st;
        if ((st = load_matrix(ld, NAME("attn_output.weight"), qd, e, true, &L->wo))) return st;
        if (hp->qkv_bias) {
            if ((st = load_vector(ld, NAME("attn_q.bias"), qd, true, &L->bq))) return st;
            if ((st = load_vector(ld, NAME("attn_k.bias"), kvd, true, &L->bk))) return st;
            if ((st = load_vector(ld, NAME("attn_v.bias"), kvd, true, &L->bv))) return st;
        }
        if (hp->qk_norm) {
            if ((st = load_vector(ld, NAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm))) return st;
            if ((st = load_vector(ld, NAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm))) return st;
        }
        if ((st = load_vector(ld, NAME("ffn_norm.weight"), e, true, &L->ffn_norm))) return st;
        if ((st = load_matrix(ld, NAME("ffn_gate.weight"), e, hp->n_ff, true, &L->w_gate))) return st;
        if ((st = load_matrix(ld, NAME("ffn_up.weight"), e, hp->n_ff, true, &L->w_up))) return st;
        if ((st = load_matrix(ld, NAME("ffn_down.weight"), hp->n_ff, e, true, &L->w_down))) return st;
#undef NAME
    }
    return KARA_OK;
}

/* The matrices of layer il (il == n_layer: the output matrix, which may be
 * the token embeddings). Returns how many. */
static int layer_matrices(kara_model *m, int il, kr_weight **ws) {
    if (il == m->hp.n_layer) {
        ws[0] = &m->output;
        return 1;
    }
    kr_layer *L = &m->layers[il];
    kr_weight *lw[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    memcpy(ws, lw, sizeof lw);
    return 7;
}

/* Rewrite the matrices whose type the kernel table reads faster in another
 * layout (kr_kernels.repack), in place: the file image is writable only
 * for this step. An output matrix tied to the token embeddings is rewritten
 * too (the lookup reads rows through kr_dequantize_matrix_row); untied
 * token embeddings are only looked up and keep the file's layout, as does a
 * matrix whose shape the layout cannot take (rows past the last whole group
 * of 16 keep it too, kernels.h). */
static void repack_weights(kara_model *m) {
    const kr_kernels *k = kr_kernels_get();
    if (!kr_gguf_set_writable(m->gguf, true)) return;
    for (int il = 0; il <= m->hp.n_layer; il++) {
        kr_weight *ws[7];
        const int n = layer_matrices(m, il, ws);
        for (int i = 0; i < n; i++) {
            kr_weight *w = ws[i];
            const kr_type to = k->repack[w->type];
            if (to && kr_repack_matrix(&w->type, to, (void *)w->data, w->n_rows, w->n_cols))
                m->repacked_bytes += w->row_bytes * (uint64_t)kr_layout_group_rows(w->type, w->n_rows);
            if (w == &m->output && m->output.data == m->tok_embd.data) m->tok_embd.type = m->output.type;
        }
    }
    (void)kr_gguf_set_writable(m->gguf, false);
}

static const char *file_type_name(const kara_model *m) {
    /* name the model by its dominant weight type, like "Q4_K" */
    return kr_type_get(m->layers ? m->layers[0].w_gate.type : m->tok_embd.type)->name;
}

void kara_model_params_init(kara_model_params *p) {
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
}

/* The loaders' common body: open the source (in_ram: into memory of the
 * model's own), then read, check and repack; src->name names it in errors. */
static kara_status load_model(const kr_gguf_source *src, bool in_ram, const kara_model_params *params,
                              kara_model **out) {
    const char *path = src->name;
    kara_model *m = calloc(1, sizeof *m);
    if (!m) return kr_set_error(KARA_ERR_NOMEM, "out of memory loading %s", path);
    kara_status st = kr_gguf_open_source(src, in_ram, &m->gguf);
    if (st) {
        free(m);
        return st;
    }
    /* weights read in place from a caller's buffer need the file's alignment (a mapping always has it) */
    if (src->kind == KR_GGUF_FROM_BUFFER && !in_ram && m->gguf->alignment &&
        (uintptr_t)src->data % m->gguf->alignment != 0) {
        unsigned long long align = (unsigned long long)m->gguf->alignment;
        kara_model_free(m);
        return kr_set_error(KARA_ERR_ARG,
                            "%s: the buffer is not aligned to the file's %llu-byte alignment, which weights read in "
                            "place (use_mmap) need; without use_mmap the image is copied",
                            path, align);
    }
    loader ld = {m, path, NULL};
    /* vocab-only files (tokenizer tests, `kara tokenize`) carry no
     * hyper-parameters: only the tokenizer is read */
    if (!params->vocab_only) {
        st = read_hparams(&ld);
    } else {
        kara_gguf_str arch;
        if (kara_gguf_get_str(m->gguf, "general.architecture", &arch))
            snprintf(m->arch_name, sizeof m->arch_name, "%.*s", (int)(arch.len > 15 ? 15 : arch.len), arch.ptr);
    }
    if (!st) {
        st = kr_vocab_load(&m->vocab, m->gguf);
        if (st) kr_error_prefix(st, "%s", path);
    }
    m->vocab_only = params->vocab_only;
    if (!st && !params->vocab_only) st = load_weights(&ld);
    if (!st && !params->vocab_only) st = kr_model_load_prior(m, path);
    if (!st && !params->vocab_only && m->vocab.kind != KR_VOCAB_NONE && m->vocab.n_tokens != m->hp.n_vocab)
        st = kr_set_error(KARA_ERR_FORMAT, "%s: vocabulary has %d tokens but token_embd.weight has %d rows", path,
                          m->vocab.n_tokens, m->hp.n_vocab);
    if (!st && params->vocab_only) m->hp.n_vocab = m->vocab.n_tokens;
    if (!st && params->progress && !params->progress(1.0f, params->progress_user))
        st = kr_set_error(KARA_ERR_ABORTED, "%s: load cancelled by the progress callback", path);
    if (st) {
        kara_model_free(m);
        return st;
    }
    if (params->vocab_only)
        snprintf(m->desc, sizeof m->desc, "%s vocab-only (%d tokens)", m->arch_name, m->vocab.n_tokens);
    else
        snprintf(m->desc, sizeof m->desc, "%s %dL %dd %s", m->arch_name, m->hp.n_layer, m->hp.n_embd,
                 file_type_name(m));
    if (!params->vocab_only && !params->use_mmap && !params->no_repack) repack_weights(m);
    *out = m;
    return KARA_OK;
}

/* NULL params mean the defaults; out is cleared first. */
static kara_status begin_load(const char *fn, const kara_model_params **params, kara_model_params *defaults,
                              kara_model **out) {
    if (out) *out = NULL;
    kara_status st = kr_params_size_check(*params, sizeof **params, fn, "kara_model_params_init");
    if (st) return st;
    if (!*params) {
        kara_model_params_init(defaults);
        *params = defaults;
    }
    if (!out) return kr_set_error(KARA_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    return KARA_OK;
}

kara_status kara_model_load(const char *path, const kara_model_params *params, kara_model **out) {
    kara_model_params defaults;
    kara_status st = begin_load("kara_model_load", &params, &defaults, out);
    if (st) return st;
    if (!path) return kr_set_error(KARA_ERR_ARG, "kara_model_load: path is NULL");
    kr_gguf_source src = {.kind = KR_GGUF_FROM_PATH, .path = path, .name = path};
    return load_model(&src, !params->use_mmap && !params->vocab_only, params, out);
}

kara_status kara_model_load_from_fd(int fd, const kara_model_params *params, kara_model **out) {
    kara_model_params defaults;
    kara_status st = begin_load("kara_model_load_from_fd", &params, &defaults, out);
    if (st) return st;
    char name[32];
    snprintf(name, sizeof name, "file descriptor %d", fd);
    kr_gguf_source src = {.kind = KR_GGUF_FROM_FD, .fd = fd, .name = name};
    return load_model(&src, !params->use_mmap && !params->vocab_only, params, out);
}

kara_status kara_model_load_from_buffer(const void *data, size_t size, const kara_model_params *params,
                                        kara_model **out) {
    kara_model_params defaults;
    kara_status st = begin_load("kara_model_load_from_buffer", &params, &defaults, out);
    if (st) return st;
    if (!data && size) return kr_set_error(KARA_ERR_ARG, "kara_model_load_from_buffer: data is NULL");
    kr_gguf_source src = {.kind = KR_GGUF_FROM_BUFFER, .data = data, .size = size, .name = "memory buffer"};
    /* a buffer is copied unless use_mmap asks to read it in place, vocab_only or not: the caller may free it on return */
    return load_model(&src, !params->use_mmap, params, out);
}

void kara_model_free(kara_model *m) {
    if (!m) return;
    kr_vocab_free(&m->vocab);
    kara_gguf_close(m->gguf);
    free(m->f32_store);
    free(m->layers);
    free(m);
}
