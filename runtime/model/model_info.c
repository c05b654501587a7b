/* model_info.c - read-only accessors of kara_model and the public tokenizer
 * entry points (thin wrappers over vocab.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "status.h"

const char *kara_model_arch(const kara_model *m) { return m->arch_name; }
const char *kara_model_desc(const kara_model *m) { return m->desc; }
int32_t kara_model_n_vocab(const kara_model *m) { return m->hp.n_vocab; }
int32_t kara_model_n_ctx_train(const kara_model *m) { return m->hp.n_ctx_train; }
int32_t kara_model_n_embd(const kara_model *m) { return m->hp.n_embd; }
int32_t kara_model_n_layer(const kara_model *m) { return m->hp.n_layer; }
int32_t kara_model_n_head(const kara_model *m) { return m->hp.n_head; }
int32_t kara_model_n_head_kv(const kara_model *m) { return m->hp.n_head_kv; }
int32_t kara_model_head_dim(const kara_model *m) { return m->hp.head_dim; }
uint64_t kara_model_n_params(const kara_model *m) { return m->n_params; }
uint64_t kara_model_size_bytes(const kara_model *m) { return m->weight_bytes; }
uint64_t kara_model_repacked_bytes(const kara_model *m) { return m->repacked_bytes; }

/* Bytes of a matrix's first n_rows rows in its file layout (the CPU may
 * hold it repacked; a device reads the file's blocks). */
static uint64_t matrix_bytes(const kr_weight *w, int64_t n_rows) {
    if (!w->data) return 0;
    const kr_type_info *ti = kr_type_get(kr_layout_source(w->type));
    return (uint64_t)(w->n_cols / ti->block_size) * ti->type_size * (uint64_t)n_rows;
}

uint64_t kara_model_decode_bytes(const kara_model *m) {
    if (!m || m->vocab_only) return 0;
    const kr_hparams *hp = &m->hp;
    const uint64_t e = (uint64_t)hp->n_embd, hd = (uint64_t)hp->head_dim;
    const uint64_t qd = (uint64_t)hp->n_head * hd, kvd = (uint64_t)hp->n_head_kv * hd;
    uint64_t b = matrix_bytes(&m->output, m->output.n_rows) + e * 4; /* output projection and norm */
    if (m->tok_embd.data != m->output.data) b += matrix_bytes(&m->tok_embd, 1);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        const kr_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) b += matrix_bytes(ws[i], ws[i]->n_rows);
        b += 2 * e * 4 + (L->bq ? qd * 4 : 0) + (L->bk ? kvd * 4 : 0) + (L->bv ? kvd * 4 : 0) +
            (L->q_norm ? hd * 4 : 0) + (L->k_norm ? hd * 4 : 0);
    }
    return b;
}

/* Render one metadata value; arrays show their type, length and first items. */
static int format_value(const kara_gguf_value *v, char *buf, size_t size) {
    switch (v->type) {
    case KARA_GGUF_UINT8:
    case KARA_GGUF_UINT16:
    case KARA_GGUF_UINT32:
    case KARA_GGUF_UINT64: return snprintf(buf, size, "%" PRIu64, v->v.u64);
    case KARA_GGUF_INT8:
    case KARA_GGUF_INT16:
    case KARA_GGUF_INT32:
    case KARA_GGUF_INT64: return snprintf(buf, size, "%" PRId64, v->v.i64);
    case KARA_GGUF_FLOAT32:
    case KARA_GGUF_FLOAT64: return snprintf(buf, size, "%g", v->v.f64);
    case KARA_GGUF_BOOL: return snprintf(buf, size, "%s", v->v.u64 ? "true" : "false");
    case KARA_GGUF_STRING: return snprintf(buf, size, "%.*s", (int)v->v.str.len, v->v.str.ptr);
    case KARA_GGUF_ARRAY: {
        const kara_gguf_array *a = &v->v.arr;
        int n = snprintf(buf, size, "[%s x %" PRIu64 "]", kara_gguf_vtype_name(a->type), a->n);
        for (uint64_t i = 0; i < a->n && i < 4 && n >= 0 && (size_t)n < size; i++) {
            char item[64];
            if (a->type == KARA_GGUF_STRING)
                snprintf(item, sizeof item, "\"%.*s\"", (int)(a->strs[i].len > 40 ? 40 : a->strs[i].len),
                         a->strs[i].ptr);
            else if (a->type == KARA_GGUF_ARRAY)
                snprintf(item, sizeof item, "[...]");
            else if (a->type == KARA_GGUF_FLOAT32 || a->type == KARA_GGUF_FLOAT64)
                snprintf(item, sizeof item, "%g", kara_gguf_arr_float(a, i));
            else
                snprintf(item, sizeof item, "%" PRId64, kara_gguf_arr_int(a, i));
            n += snprintf(buf + n, size - (size_t)n, "%s%s", i ? ", " : " ", item);
        }
        if (a->n > 4 && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ", ...");
        return n;
    }
    default: return snprintf(buf, size, "?");
    }
}

bool kara_model_meta_str(const kara_model *m, const char *key, char *buf, size_t size, size_t *len) {
    const kara_gguf_kv *kv = m && key ? kara_gguf_find(m->gguf, key) : NULL;
    if (len) *len = 0;
    if (!kv) {
        if (buf && size) buf[0] = 0;
        return false;
    }
    int n = format_value(&kv->value, buf, size);
    if (len) *len = n > 0 ? (size_t)n : 0;
    return true;
}

int32_t kara_token_bos(const kara_model *m) { return m->vocab.bos; }
int32_t kara_token_eos(const kara_model *m) { return m->vocab.eos; }
bool kara_token_is_eog(const kara_model *m, int32_t token) { return kr_vocab_is_eog(&m->vocab, token); }
bool kara_vocab_add_bos(const kara_model *m) { return m->vocab.add_bos; }
bool kara_model_has_tokenizer(const kara_model *m) { return m->vocab.kind != KR_VOCAB_NONE; }

kara_status kara_tokenize(const kara_model *m, const char *text, int32_t len, int32_t *tokens, int32_t max_tokens,
                          bool add_special, bool parse_special, int32_t *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!m || !text || !n_tokens || max_tokens < 0 || (max_tokens > 0 && !tokens))
        return kr_set_error(KARA_ERR_ARG, "kara_tokenize: a NULL argument or a negative max_tokens");
    if (m->vocab.kind == KR_VOCAB_NONE)
        return kr_set_error(KARA_ERR_UNSUPPORTED, "this model has no tokenizer; pass token ids instead");
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    int32_t r = kr_vocab_tokenize(&m->vocab, text, n, tokens, max_tokens, add_special, parse_special);
    if (r == INT32_MIN) return kr_set_error(KARA_ERR_NOMEM, "kara_tokenize: out of memory tokenizing %zu bytes", n);
    *n_tokens = r < 0 ? -r : r;
    if (r < 0)
        return kr_set_error(KARA_ERR_BUFFER, "kara_tokenize: room for %d tokens, the text needs %d", max_tokens, -r);
    return KARA_OK;
}

kara_status kara_tokenize_ex(const kara_model *m, const char *text, int32_t len, int32_t *tokens, int32_t max_tokens,
                             uint32_t flags, int32_t *n_tokens) {
    if (flags & ~(uint32_t)(KARA_TOKENIZE_ADD_SPECIAL | KARA_TOKENIZE_PARSE_SPECIAL)) {
        if (n_tokens) *n_tokens = 0;
        return kr_set_error(KARA_ERR_ARG, "kara_tokenize_ex: unknown flags 0x%x", (unsigned)flags);
    }
    return kara_tokenize(m, text, len, tokens, max_tokens, flags & KARA_TOKENIZE_ADD_SPECIAL,
                         flags & KARA_TOKENIZE_PARSE_SPECIAL, n_tokens);
}

kara_status kara_token_to_piece(const kara_model *m, int32_t token, char *buf, int32_t size, bool special,
                                int32_t *len) {
    if (len) *len = 0;
    if (!m || !len || size < 0 || (size > 0 && !buf))
        return kr_set_error(KARA_ERR_ARG, "kara_token_to_piece: a NULL argument or a negative size");
    if (token < 0 || token >= m->vocab.n_tokens)
        return kr_set_error(KARA_ERR_TOKEN, "token %d is outside the vocabulary of %d", token, m->vocab.n_tokens);
    int32_t r = kr_vocab_token_to_piece(&m->vocab, token, buf, size, special);
    *len = r < 0 ? -r : r;
    if (r < 0)
        return kr_set_error(KARA_ERR_BUFFER, "kara_token_to_piece: a buffer of %d bytes, token %d needs %d", size,
                            token, -r);
    return KARA_OK;
}
