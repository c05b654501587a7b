/*
 * vocab_special.c - matching special and added tokens in text before the
 * tokenizer sees it.
 *
 * Tokens of type CONTROL, USER_DEFINED and UNKNOWN are cut out of the text
 * as whole tokens, longest text first, each one splitting whatever raw text
 * the longer ones left (llama.cpp's tokenizer_st_partition). CONTROL and
 * UNKNOWN tokens are matched only when the caller asks for special-token
 * parsing; USER_DEFINED tokens (added, non-special tokens such as Qwen3's
 * <think>) are always matched, as Hugging Face tokenizers do.
 *
 * A trie over the special texts finds, in one pass, which of them occur at
 * all, so that the per-token splitting only runs for those: vocabularies
 * with thousands of added tokens stay linear in the text length.
 */
#include "vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

typedef struct len_id {
    uint32_t len;
    int32_t id;
} len_id;

/* Longest first; equal lengths by id so the order is reproducible. */
static int by_length_desc(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int32_t trie_child(const kr_vocab_impl *im, int32_t node, uint8_t byte) {
    for (int32_t c = im->trie[node].first_child; c >= 0; c = im->trie[c].next_sibling)
        if (im->trie[c].byte == byte) return c;
    return -1;
}

kara_status kr_vocab_special_build(kr_vocab *v) {
    kr_vocab_impl *im = v->impl;
    uint32_t n = 0;
    size_t total = 1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint8_t t = im->types[i];
        if (t == KR_TOKEN_CONTROL || t == KR_TOKEN_USER_DEFINED || t == KR_TOKEN_UNKNOWN) {
            n++;
            total += im->strs[i].len;
        }
    }
    im->n_special = n;
    if (!n) return KARA_OK;
    len_id *order = malloc((size_t)n * sizeof *order);
    im->special = malloc((size_t)n * sizeof *im->special);
    if (total > (size_t)INT32_MAX) total = 0; /* cannot happen with validated token lengths */
    im->trie = malloc(total * sizeof *im->trie);
    if (!order || !im->special || !im->trie) {
        free(order);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for the special-token table");
    }
    uint32_t k = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint8_t t = im->types[i];
        if (t == KR_TOKEN_CONTROL || t == KR_TOKEN_USER_DEFINED || t == KR_TOKEN_UNKNOWN)
            order[k++] = (len_id){im->strs[i].len, i};
    }
    qsort(order, n, sizeof *order, by_length_desc);

    im->trie[0] = (kr_special_trie){-1, -1, -1, 0};
    im->n_trie = 1;
    memset(im->special_first_byte, 0, sizeof im->special_first_byte);
    for (uint32_t s = 0; s < n; s++) {
        int32_t id = order[s].id;
        im->special[s] = id;
        const kr_strref *text = &im->strs[id];
        int32_t node = 0;
        for (uint32_t j = 0; j < text->len; j++) {
            uint8_t b = (uint8_t)text->ptr[j];
            int32_t c = trie_child(im, node, b);
            if (c < 0) {
                c = (int32_t)im->n_trie++;
                im->trie[c] = (kr_special_trie){-1, im->trie[node].first_child, -1, b};
                im->trie[node].first_child = c;
            }
            node = c;
        }
        im->trie[node].special = (int32_t)s;
        if (text->len) im->special_first_byte[(uint8_t)text->ptr[0]] = 1;
    }
    free(order);
    return KARA_OK;
}

static bool is_c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static bool push_frag(kr_tok_work *w, size_t *n, size_t off, size_t len, int32_t token) {
    if (!kr_work_reserve((void **)&w->frags2, &w->cap_frags2, *n + 1, sizeof *w->frags2)) return false;
    w->frags2[(*n)++] = (kr_fragment){off, len, token};
    return true;
}

/* Cut every occurrence of one special token out of the raw fragments. */
static bool split_on(const kr_vocab *v, kr_tok_work *w, const char *text, size_t *n_frags, int32_t id) {
    const kr_strref *tok = &v->impl->strs[id];
    bool rstrip = (v->impl->attrs[id] & KR_TOKEN_ATTR_RSTRIP) != 0;
    size_t n = 0;
    for (size_t i = 0; i < *n_frags; i++) {
        kr_fragment f = w->frags[i];
        if (f.token >= 0) {
            if (!push_frag(w, &n, f.off, f.len, f.token)) return false;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        for (;;) {
            const char *m = memmem(text + pos, end - pos, tok->ptr, tok->len);
            if (!m) break;
            size_t at = (size_t)(m - text);
            if (at > pos && !push_frag(w, &n, pos, at - pos, -1)) return false;
            if (!push_frag(w, &n, at, tok->len, id)) return false;
            pos = at + tok->len;
            if (rstrip)
                while (pos < end && is_c_space(text[pos])) pos++;
        }
        if (pos < end && !push_frag(w, &n, pos, end - pos, -1)) return false;
    }
    kr_fragment *t = w->frags;
    size_t c = w->cap_frags;
    w->frags = w->frags2;
    w->cap_frags = w->cap_frags2;
    w->frags2 = t;
    w->cap_frags2 = c;
    *n_frags = n;
    return true;
}

kara_status kr_vocab_partition(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, bool parse_special,
                               size_t *n_frags) {
    const kr_vocab_impl *im = v->impl;
    *n_frags = 0;
    if (!len) return KARA_OK;
    if (!kr_work_reserve((void **)&w->frags, &w->cap_frags, 1, sizeof *w->frags)) return KARA_ERR_NOMEM;
    w->frags[0] = (kr_fragment){0, len, -1};
    *n_frags = 1;
    if (!im->n_special) return KARA_OK;

    w->found = calloc(im->n_special, 1);
    if (!w->found) return KARA_ERR_NOMEM;
    bool any = false;
    for (size_t i = 0; i < len; i++) {
        if (!im->special_first_byte[(uint8_t)text[i]]) continue;
        int32_t node = trie_child(im, 0, (uint8_t)text[i]);
        for (size_t j = i + 1; node >= 0; j++) {
            if (im->trie[node].special >= 0) {
                w->found[im->trie[node].special] = 1;
                any = true;
            }
            if (j >= len) break;
            node = trie_child(im, node, (uint8_t)text[j]);
        }
    }
    if (!any) return KARA_OK;

    for (uint32_t s = 0; s < im->n_special; s++) {
        if (!w->found[s]) continue;
        int32_t id = im->special[s];
        uint8_t type = im->types[id];
        if (!parse_special && (type == KR_TOKEN_CONTROL || type == KR_TOKEN_UNKNOWN)) continue;
        if (!split_on(v, w, text, n_frags, id)) return KARA_ERR_NOMEM;
    }
    return KARA_OK;
}
