/*
 * vocab.c - loading the vocabulary: tokenizer.* read from a GGUF and
 * validated (errors name the key), with llama.cpp's defaults for absent
 * keys, special ids, end-of-generation tokens, and the tables each tokenizer
 * builds. Lookups live in vocab_strings.c, text <-> ids in vocab_text.c.
 */
#include "vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* ------------------------------------------------------------------------ */
/* Reading keys                                                              */
/* ------------------------------------------------------------------------ */

static bool is_int_type(kara_gguf_vtype t) {
    return t == KARA_GGUF_UINT8 || t == KARA_GGUF_INT8 || t == KARA_GGUF_UINT16 || t == KARA_GGUF_INT16 ||
        t == KARA_GGUF_UINT32 || t == KARA_GGUF_INT32 || t == KARA_GGUF_UINT64 || t == KARA_GGUF_INT64;
}

static bool is_signed_type(kara_gguf_vtype t) {
    return t == KARA_GGUF_INT8 || t == KARA_GGUF_INT16 || t == KARA_GGUF_INT32 || t == KARA_GGUF_INT64;
}

/* A special token id key. Absent: *id keeps its default. Negative values and
 * 0xFFFFFFFF (how converters write "none") mean no such token. */
static kara_status read_id(const kara_gguf *g, const char *key, int32_t n_tokens, int32_t *id) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) return KARA_OK;
    if (!is_int_type(kv->value.type))
        return kr_set_error(KARA_ERR_FORMAT, "%s: expected an integer token id, got %s", key,
                            kara_gguf_vtype_name(kv->value.type));
    if (is_signed_type(kv->value.type) && kv->value.v.i64 < 0) {
        *id = -1;
        return KARA_OK;
    }
    uint64_t u = is_signed_type(kv->value.type) ? (uint64_t)kv->value.v.i64 : kv->value.v.u64;
    if (u == UINT32_MAX || u == UINT64_MAX) {
        *id = -1;
        return KARA_OK;
    }
    if (u >= (uint64_t)n_tokens)
        return kr_set_error(KARA_ERR_FORMAT, "%s = %llu is outside the vocabulary of %d tokens", key,
                            (unsigned long long)u, n_tokens);
    *id = (int32_t)u;
    return KARA_OK;
}

static kara_status read_bool(const kara_gguf *g, const char *key, bool *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) return KARA_OK;
    if (kv->value.type != KARA_GGUF_BOOL)
        return kr_set_error(KARA_ERR_FORMAT, "%s: expected a bool, got %s", key, kara_gguf_vtype_name(kv->value.type));
    *out = kv->value.v.u64 != 0;
    return KARA_OK;
}

/* An array key with n elements of the allowed kind ("strings", "integers",
 * "floats"); NULL with *st = OK when absent and optional. */
static const kara_gguf_array *read_array(const kara_gguf *g, const char *key, const char *kind, bool required,
                                         uint64_t n, kara_status *st) {
    *st = KARA_OK;
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) {
        if (required) *st = kr_set_error(KARA_ERR_FORMAT, "%s: missing", key);
        return NULL;
    }
    const kara_gguf_array *a = &kv->value.v.arr;
    bool ok = kv->value.type == KARA_GGUF_ARRAY;
    if (ok && !strcmp(kind, "strings")) ok = a->type == KARA_GGUF_STRING;
    if (ok && !strcmp(kind, "integers")) ok = is_int_type(a->type);
    if (ok && !strcmp(kind, "floats")) ok = a->type == KARA_GGUF_FLOAT32 || a->type == KARA_GGUF_FLOAT64;
    if (!ok) {
        *st = kr_set_error(KARA_ERR_FORMAT, "%s: expected an array of %s, got %s%s%s", key, kind,
                           kv->value.type == KARA_GGUF_ARRAY ? "an array of " : "",
                           kara_gguf_vtype_name(kv->value.type == KARA_GGUF_ARRAY ? a->type : kv->value.type),
                           kv->value.type == KARA_GGUF_ARRAY ? " values" : "");
        return NULL;
    }
    if (n != UINT64_MAX && a->n != n) {
        *st = kr_set_error(KARA_ERR_FORMAT, "%s: has %llu entries but tokenizer.ggml.tokens has %llu", key,
                           (unsigned long long)a->n, (unsigned long long)n);
        return NULL;
    }
    return a;
}

/* ------------------------------------------------------------------------ */
/* Special tokens found by their text                                        */
/* ------------------------------------------------------------------------ */

/* When a metadata id is absent, llama.cpp finds these tokens by their text
 * and treats them as control tokens; the first text of each list present in
 * the vocabulary wins. */
static const char *const eot_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "<|end_of_text|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "<\xef\xbd\x9c"
                                        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                        "<end_of_utterance>",
                                        NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>",
                                            "<fim-prefix>",
                                            "<fim_prefix>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81"
                                            "begin\xef\xbd\x9c>",
                                            "<PRE>",
                                            "\xe2\x96\x81<PRE>",
                                            "<|code_prefix|>",
                                            "<|prefix|>",
                                            NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>",
                                            "<fim-suffix>",
                                            "<fim_suffix>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                                            "<SUF>",
                                            "\xe2\x96\x81<SUF>",
                                            "<|code_suffix|>",
                                            "<|suffix|>",
                                            NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>",
                                            "<fim-middle>",
                                            "<fim_middle>",
                                            "<\xef\xbd\x9c"
                                            "fim\xe2\x96\x81"
                                            "end\xef\xbd\x9c>",
                                            "<MID>",
                                            "\xe2\x96\x81<MID>",
                                            "<|code_middle|>",
                                            "<|middle|>",
                                            NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>",       "<reponame>",    NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* Tokens that end generation whatever their metadata says. */
static const char *const eog_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "<|eom_id|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<\xef\xbd\x9c"
                                        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                        NULL};

static int32_t find_cstr(const kr_vocab *v, const char *s) { return kr_vocab_find(v, s, strlen(s)); }

static void force_control(kr_vocab *v, int32_t id) {
    uint8_t *t = &v->impl->types[id];
    if (*t != KR_TOKEN_CONTROL) {
        kr_log(KARA_LOG_DEBUG, "token %d '%.*s' looks like a control token; treating it as one", id,
               (int)v->impl->strs[id].len, v->impl->strs[id].ptr);
        *t = KR_TOKEN_CONTROL;
    }
}

static int32_t detect(kr_vocab *v, int32_t id, const char *const *texts) {
    if (id >= 0) return id;
    for (size_t i = 0; texts[i]; i++) {
        int32_t t = find_cstr(v, texts[i]);
        if (t >= 0) {
            force_control(v, t);
            return t;
        }
    }
    return -1;
}

static void mark_eog(kr_vocab *v, int32_t id) {
    if (id >= 0) v->impl->attrs[id] |= KR_TOKEN_ATTR_EOG;
}

/* ------------------------------------------------------------------------ */
/* Load                                                                      */
/* ------------------------------------------------------------------------ */

static void reset_ids(kr_vocab *v) { v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->sep = v->nl = -1; }

/* The SPM byte token: "<0xXX>", else the byte as a one-character token. */
static void find_byte_tokens_spm(kr_vocab *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = kr_vocab_find(v, buf, 6);
        if (id < 0) {
            char c = (char)b;
            id = kr_vocab_find(v, &c, 1);
        }
        v->impl->byte_token[b] = id;
    }
}

static kara_status load_tokens(kr_vocab *v, const kara_gguf *g) {
    kr_vocab_impl *im = v->impl;
    kara_status st;
    const kara_gguf_array *toks = read_array(g, "tokenizer.ggml.tokens", "strings", true, UINT64_MAX, &st);
    if (!toks) return st;
    if (toks->n == 0) return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.tokens: the vocabulary is empty");
    if (toks->n > (uint64_t)INT32_MAX / 2)
        return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens is too many",
                            (unsigned long long)toks->n);
    uint32_t n = (uint32_t)toks->n;
    v->n_tokens = (int32_t)n;

    const kara_gguf_array *scores = read_array(g, "tokenizer.ggml.scores", "floats", false, n, &st);
    if (st) return st;
    const kara_gguf_array *types = read_array(g, "tokenizer.ggml.token_type", "integers", false, n, &st);
    if (st) return st;

    im->cap_strs = n + 1024;
    im->strs = malloc((size_t)im->cap_strs * sizeof *im->strs);
    im->types = malloc(n);
    im->attrs = calloc(n, 1);
    if (scores) im->scores = malloc((size_t)n * sizeof *im->scores);
    if (!im->strs || !im->types || !im->attrs || (scores && !im->scores) || !kr_vocab_table_reserve(im, n))
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for a vocabulary of %u tokens", n);

    for (uint32_t i = 0; i < n; i++) {
        kara_gguf_str s = toks->strs[i];
        if (s.len > UINT32_MAX) return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.tokens: token %u is too long", i);
        kr_strref r = {s.ptr, (uint32_t)s.len};
        if (s.len == 0) { /* llama.cpp renames empty tokens so that lookups stay unique */
            char name[32];
            int k = snprintf(name, sizeof name, "[EMPTY_%u]", i);
            r.ptr = kr_vocab_arena_copy(im, name, (size_t)k, "", 0);
            r.len = (uint32_t)k;
            if (!r.ptr) return kr_set_error(KARA_ERR_NOMEM, "out of memory for the vocabulary");
        }
        int32_t dup = kr_vocab_sym_find(im, r.ptr, r.len);
        if (dup >= 0)
            return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.tokens: token %u '%.*s' repeats token %d", i,
                                (int)(r.len > 64 ? 64 : r.len), r.ptr, dup);
        im->strs[i] = r;
        im->n_strs = i + 1;
        kr_vocab_sym_insert(im, i);
        int64_t t = types ? kara_gguf_arr_int(types, i) : KR_TOKEN_NORMAL;
        im->types[i] = (t >= KR_TOKEN_UNDEFINED && t <= KR_TOKEN_BYTE) ? (uint8_t)t : KR_TOKEN_UNDEFINED;
        if (scores) im->scores[i] = (float)kara_gguf_arr_float(scores, i);
    }
    return KARA_OK;
}

static kara_status load_special_ids(kr_vocab *v, const kara_gguf *g) {
    int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1, fim_pre = -1, fim_suf = -1, fim_mid = -1, mask = -1;
    struct {
        const char *key;
        int32_t *id;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},      {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},      {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},  {"tokenizer.ggml.seperator_token_id", &v->sep},
        {"tokenizer.ggml.padding_token_id", &v->pad},  {"tokenizer.ggml.mask_token_id", &mask},
        {"tokenizer.ggml.fim_pre_token_id", &fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* a default outside a small vocabulary just means "none" */
        if (*keys[i].id >= v->n_tokens) *keys[i].id = -1;
        kara_status st = read_id(g, keys[i].key, v->n_tokens, keys[i].id);
        if (st) return st;
    }

    v->eot = detect(v, v->eot, eot_texts);
    v->eom = detect(v, v->eom, eom_texts);
    detect(v, fim_pre, fim_pre_texts);
    detect(v, fim_suf, fim_suf_texts);
    detect(v, fim_mid, fim_mid_texts);
    fim_pad = detect(v, fim_pad, fim_pad_texts);
    fim_rep = detect(v, fim_rep, fim_rep_texts);
    fim_sep = detect(v, fim_sep, fim_sep_texts);

    mark_eog(v, fim_pad);
    mark_eog(v, fim_rep);
    mark_eog(v, fim_sep);
    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t t = find_cstr(v, eog_texts[i]);
        if (t >= 0) {
            mark_eog(v, t);
            force_control(v, t);
        }
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, v->eom);
    return KARA_OK;
}

/* Phi-3 vocabularies drop the white space after their special tokens when
 * matching them in text (llama.cpp keys this on the model name). */
static void apply_name_rules(kr_vocab *v, const kara_gguf *g) {
    kara_gguf_str name;
    if (!kara_gguf_get_str(g, "general.name", &name)) return;
    char lower[256];
    size_t n = name.len < sizeof lower - 1 ? (size_t)name.len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++) {
        char c = name.ptr[i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    lower[n] = 0;
    if (!strstr(lower, "phi-3") && !strstr(lower, "phi3")) return;
    kr_vocab_impl *im = v->impl;
    for (uint32_t i = 0; i < im->n_special; i++) im->attrs[im->special[i]] |= KR_TOKEN_ATTR_RSTRIP;
    int32_t t = find_cstr(v, "</s>");
    if (t >= 0) im->attrs[t] |= KR_TOKEN_ATTR_RSTRIP;
    const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < 3; i++)
        if ((t = find_cstr(v, keep[i])) >= 0) im->attrs[t] &= (uint8_t)~KR_TOKEN_ATTR_RSTRIP;
}

kara_status kr_vocab_load(kr_vocab *v, const kara_gguf *g) {
    memset(v, 0, sizeof *v);
    reset_ids(v);

    const kara_gguf_kv *model_kv = kara_gguf_find(g, "tokenizer.ggml.model");
    if (!model_kv) return KARA_OK; /* ids only */
    if (model_kv->value.type != KARA_GGUF_STRING)
        return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.model: expected a string, got %s",
                            kara_gguf_vtype_name(model_kv->value.type));
    kara_gguf_str model = model_kv->value.v.str;
    if (kara_gguf_str_eq(model, "no_vocab") || kara_gguf_str_eq(model, "none")) return KARA_OK;

    kr_vocab_kind kind;
    if (kara_gguf_str_eq(model, "llama"))
        kind = KR_VOCAB_SPM;
    else if (kara_gguf_str_eq(model, "gpt2"))
        kind = KR_VOCAB_BPE;
    else
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "tokenizer.ggml.model: unsupported tokenizer '%.*s' (supported: llama, gpt2)",
                            (int)(model.len > 64 ? 64 : model.len), model.ptr);

    const kara_gguf_kv *pre_kv = kara_gguf_find(g, "tokenizer.ggml.pre");
    if (pre_kv) {
        if (pre_kv->value.type != KARA_GGUF_STRING)
            return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.pre: expected a string, got %s",
                                kara_gguf_vtype_name(pre_kv->value.type));
        kara_gguf_str pre = pre_kv->value.v.str;
        if (pre.len >= sizeof v->pre)
            return kr_set_error(KARA_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer '%.*s'",
                                (int)(sizeof v->pre), pre.ptr);
        memcpy(v->pre, pre.ptr, pre.len);
        v->pre[pre.len] = 0;
    }

    kr_vocab_impl *im = calloc(1, sizeof *im);
    if (!im) return kr_set_error(KARA_ERR_NOMEM, "out of memory for the vocabulary");
    v->impl = im;
    v->kind = kind;
    kara_status st = KARA_OK;

    /* llama.cpp's defaults for each tokenizer model */
    if (kind == KR_VOCAB_SPM) {
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
    } else {
        if (!v->pre[0]) {
            kr_log(KARA_LOG_WARN,
                   "tokenizer.ggml.pre is missing: using the 'default' pre-tokenizer, which "
                   "may not match the model");
            im->pre.kind = KR_PRETOK_DEFAULT;
        } else if (!kr_pretok_lookup(v->pre, strlen(v->pre), &im->pre)) {
            st = kr_set_error(KARA_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer '%s'", v->pre);
            goto done;
        }
        v->bos = 11;
        v->eos = 11;
        v->add_bos = im->pre.add_bos;
    }
    if ((st = read_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix))) goto done;
    if ((st = load_tokens(v, g))) goto done;
    if ((st = load_special_ids(v, g))) goto done;
    if ((st = read_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos))) goto done;
    if ((st = read_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos))) goto done;
    if (v->add_bos && v->bos < 0) v->add_bos = false;
    if (v->add_eos && v->eos < 0) v->add_eos = false;

    if (kind == KR_VOCAB_BPE) {
        const kara_gguf_array *merges = read_array(g, "tokenizer.ggml.merges", "strings", true, UINT64_MAX, &st);
        if (!merges) goto done;
        /* each merge makes a token of the vocabulary; converted files repeat
         * some (llama 3: 2.2 per token), so more than KR_BPE_MERGES_PER_TOKEN
         * per token is not a tokenizer, and its tables would cost memory */
        uint64_t most = (uint64_t)v->n_tokens * KR_BPE_MERGES_PER_TOKEN;
        if (merges->n > most) {
            st = kr_set_error(KARA_ERR_FORMAT,
                              "tokenizer.ggml.merges: %llu merges for %d tokens; at most %llu (%d per token) are "
                              "plausible",
                              (unsigned long long)merges->n, v->n_tokens, (unsigned long long)most,
                              KR_BPE_MERGES_PER_TOKEN);
            goto done;
        }
        if ((st = kr_bpe_build(v, merges))) goto done;
    } else {
        find_byte_tokens_spm(v);
        kr_spm_prepare(v);
    }
    if ((st = kr_vocab_special_build(v))) goto done;
    apply_name_rules(v, g);

    /* the newline token */
    if (kind == KR_VOCAB_SPM) {
        v->nl = im->byte_token['\n'] >= 0 ? im->byte_token['\n'] : v->pad;
    } else {
        int32_t ids[8];
        int32_t n = kr_vocab_tokenize(v, "\n", 1, ids, 8, false, false);
        if (n == INT32_MIN) { /* out of memory: fail the load, not a model whose newline is the pad (issue 19) */
            st = kr_set_error(KARA_ERR_NOMEM, "out of memory tokenizing the newline");
            goto done;
        }
        v->nl = n >= 1 ? ids[0] : v->pad;
    }

done:
    if (st) kr_vocab_free(v);
    return st;
}

void kr_vocab_free(kr_vocab *v) {
    if (!v) return;
    kr_vocab_impl *im = v->impl;
    if (im) {
        kr_vocab_arena_free(im);
        free(im->strs);
        free(im->slots);
        free(im->scores);
        free(im->types);
        free(im->attrs);
        free(im->special);
        free(im->trie);
        free(im->merge_keys);
        free(im->merge_rank);
        free(im->merge_result);
        free(im);
    }
    memset(v, 0, sizeof *v);
    reset_ids(v);
}
