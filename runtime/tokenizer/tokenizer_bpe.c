/*
 * tokenizer_bpe.c - byte-level BPE (the `gpt2` tokenizer model): the text is
 * split into words by the pre-tokenizer (pretokenize.c), each word's bytes
 * are spelled with GPT-2's printable byte alphabet, and adjacent symbols are
 * merged by the rank of their pair in tokenizer.ggml.merges, lowest rank
 * first, through a priority queue over adjacent pairs.
 *
 * Symbols are identified by "symbol ids": token ids for strings that are
 * tokens, and ids past the vocabulary for the few merge strings that are
 * not (vocab_impl.h). A merge is then a hash lookup on two integers.
 */
#include "pair_heap.h"
#include "vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "unicode.h"

/* ------------------------------------------------------------------------ */
/* GPT-2 byte alphabet                                                       */
/* ------------------------------------------------------------------------ */

/* Printable bytes stand for themselves; the 68 others (controls, space, DEL,
 * 0x80-0xA0, soft hyphen) map in byte order to U+0100..U+0143. */
uint32_t kr_bpe_byte_to_cpt(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int kr_bpe_cpt_to_byte(uint32_t c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c >= 0x100 && c <= 0x120) return (int)(c - 0x100);
    if (c >= 0x121 && c <= 0x142) return (int)(c - 0x121 + 0x7F);
    if (c == 0x143) return 0xAD;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Merge table                                                               */
/* ------------------------------------------------------------------------ */

static uint64_t pair_key(uint32_t left, uint32_t right) {
    return (((uint64_t)left << 32) | right) + 1; /* 0 marks an empty slot */
}

static uint32_t pair_slot(uint64_t key, uint32_t mask) {
    key *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(key >> 32) & mask;
}

/* Rank and result of merging symbols (left, right); false when no merge. */
static bool find_merge(const kr_vocab_impl *im, uint32_t left, uint32_t right, uint32_t *rank, uint32_t *result) {
    if (!im->merge_keys) return false;
    uint64_t key = pair_key(left, right);
    for (uint32_t i = pair_slot(key, im->merge_mask);; i = (i + 1) & im->merge_mask) {
        if (im->merge_keys[i] == key) {
            *rank = im->merge_rank[i];
            *result = im->merge_result[i];
            return true;
        }
        if (!im->merge_keys[i]) return false;
    }
}

static int32_t find_or_add(kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    int32_t id = kr_vocab_sym_find2(im, a, alen, b, blen);
    return id >= 0 ? id : kr_vocab_sym_add(im, a, alen, b, blen);
}

kara_status kr_bpe_build(kr_vocab *v, const kara_gguf_array *merges) {
    kr_vocab_impl *im = v->impl;
    if (merges->n > UINT32_MAX / 4)
        return kr_set_error(KARA_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges is too many",
                            (unsigned long long)merges->n);
    uint32_t n = (uint32_t)merges->n;
    uint64_t cap = 16;
    while (cap < 2ULL * n) cap <<= 1;
    im->merge_keys = calloc((size_t)cap, sizeof *im->merge_keys);
    im->merge_rank = malloc((size_t)cap * sizeof *im->merge_rank);
    im->merge_result = malloc((size_t)cap * sizeof *im->merge_result);
    if (!im->merge_keys || !im->merge_rank || !im->merge_result) goto nomem;
    im->merge_mask = (uint32_t)(cap - 1);

    for (uint32_t r = 0; r < n; r++) {
        kara_gguf_str m = merges->strs[r];
        /* "left right", split at the first space after the first byte */
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp) continue; /* llama.cpp keeps it as a pair of empty strings, which never matches */
        size_t llen = (size_t)(sp - m.ptr), rlen = m.len - llen - 1;
        int32_t left = find_or_add(im, m.ptr, llen, "", 0);
        int32_t right = left >= 0 ? find_or_add(im, sp + 1, rlen, "", 0) : -1;
        int32_t result = right >= 0 ? find_or_add(im, m.ptr, llen, sp + 1, rlen) : -1;
        if (result < 0) goto nomem;
        uint64_t key = pair_key((uint32_t)left, (uint32_t)right);
        uint32_t i = pair_slot(key, im->merge_mask);
        while (im->merge_keys[i] && im->merge_keys[i] != key) i = (i + 1) & im->merge_mask;
        if (im->merge_keys[i]) continue; /* a repeated pair keeps its first (lowest) rank */
        im->merge_keys[i] = key;
        im->merge_rank[i] = r;
        im->merge_result[i] = (uint32_t)result;
        im->n_merges++;
    }

    for (int b = 0; b < 256; b++) {
        uint8_t enc[4];
        size_t k = kr_utf8_encode(kr_bpe_byte_to_cpt((uint8_t)b), enc);
        int32_t id = kr_vocab_sym_find(im, (const char *)enc, k);
        im->byte_sym[b] = id;
        im->byte_token[b] = id < v->n_tokens ? id : -1;
    }
    return KARA_OK;

nomem:
    return kr_set_error(KARA_ERR_NOMEM, "out of memory for tokenizer.ggml.merges");
}

/* ------------------------------------------------------------------------ */
/* Merging one word                                                          */
/* ------------------------------------------------------------------------ */

typedef struct bpe_sym {
    int32_t prev, next;
    int32_t id;          /* symbol id, -1 when the byte has no symbol */
    uint32_t start, len; /* bytes of the word; len 0 = merged away */
} bpe_sym;

typedef struct bpe_pair {
    uint32_t rank;
    int32_t left, right;
    uint32_t left_len, right_len; /* lengths when queued, to spot stale pairs */
    uint32_t result;
} bpe_pair;

/* Queue order: lowest rank first, then the leftmost pair. */
static bool pair_before(const bpe_pair *a, const bpe_pair *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->left < b->left;
}

KR_DEFINE_PAIR_HEAP(heap, bpe_pair, pair_before)

static void try_pair(const kr_vocab_impl *im, bpe_sym *sym, bpe_pair *heap, size_t *n_heap, int32_t left,
                     int32_t right) {
    if (left < 0 || right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
    uint32_t rank, result;
    if (!find_merge(im, (uint32_t)sym[left].id, (uint32_t)sym[right].id, &rank, &result)) return;
    heap_push(heap, n_heap, (bpe_pair){rank, left, right, sym[left].len, sym[right].len, result});
}

/* Tokens of one word given as raw bytes. */
static kara_status bpe_word(const kr_vocab *v, kr_tok_work *w, const uint8_t *word, size_t n, kr_tok_out *out) {
    const kr_vocab_impl *im = v->impl;
    if (im->pre.ignore_merges) {
        /* a word that is itself a token is taken whole (Llama 3) */
        if (!kr_work_reserve((void **)&w->text2, &w->cap_text2, 2 * n, 1)) return KARA_ERR_NOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += kr_utf8_encode(kr_bpe_byte_to_cpt(word[i]), (uint8_t *)w->text2 + k);
        int32_t id = kr_vocab_sym_find(im, w->text2, k);
        if (id >= 0 && id < v->n_tokens) {
            kr_tok_emit(out, id);
            return KARA_OK;
        }
    }
    if (!kr_work_reserve(&w->syms, &w->cap_syms, n, sizeof(bpe_sym)) ||
        !kr_work_reserve(&w->heap, &w->cap_heap, 3 * n + 1, sizeof(bpe_pair)))
        return KARA_ERR_NOMEM;
    bpe_sym *sym = w->syms;
    bpe_pair *heap = w->heap;
    size_t n_heap = 0;
    for (size_t i = 0; i < n; i++)
        sym[i] = (bpe_sym){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, im->byte_sym[word[i]], (uint32_t)i, 1};
    for (size_t i = 1; i < n; i++) try_pair(im, sym, heap, &n_heap, (int32_t)i - 1, (int32_t)i);

    while (n_heap) {
        bpe_pair p = heap_pop(heap, &n_heap);
        bpe_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->len != p.left_len || r->len != p.right_len) continue; /* one side changed since */
        l->id = (int32_t)p.result;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        try_pair(im, sym, heap, &n_heap, l->prev, p.left);
        try_pair(im, sym, heap, &n_heap, p.left, l->next);
    }

    for (int32_t i = 0; i != -1; i = sym[i].next) {
        if (sym[i].id >= 0 && sym[i].id < v->n_tokens) {
            kr_tok_emit(out, sym[i].id);
            continue;
        }
        /* a string that is not a token: its bytes one by one */
        for (uint32_t j = 0; j < sym[i].len; j++) {
            int32_t t = im->byte_token[word[sym[i].start + j]];
            if (t >= 0) kr_tok_emit(out, t);
        }
    }
    return KARA_OK;
}

kara_status kr_bpe_tokenize(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out) {
    if (!len) return KARA_OK;
    if (len > (size_t)INT32_MAX / 4) return KARA_ERR_ARG;
    if (len > w->cap_cpts) {
        uint32_t *cpts = realloc(w->cpts, len * sizeof *cpts);
        if (cpts) w->cpts = cpts;
        uint32_t *ends = realloc(w->ends, len * sizeof *ends);
        if (ends) w->ends = ends;
        uint32_t *tmp = realloc(w->tmp, len * sizeof *tmp);
        if (tmp) w->tmp = tmp;
        uint8_t *cls = realloc(w->cls, len);
        if (cls) w->cls = cls;
        if (!cpts || !ends || !tmp || !cls) return KARA_ERR_NOMEM;
        w->cap_cpts = len;
    }

    const uint8_t *p = (const uint8_t *)text;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k;
        uint32_t c = kr_utf8_decode(p + i, len - i, &k);
        w->cpts[n] = c;
        w->cls[n] = kr_unicode_class(c);
        n++;
        i += k;
    }
    size_t n_words = kr_pretokenize(v->impl->pre.kind, w->cpts, w->cls, n, w->ends, w->tmp);

    size_t start = 0;
    for (size_t wi = 0; wi < n_words; wi++) {
        size_t end = w->ends[wi];
        /* the word's bytes, re-encoded from code points (malformed input
         * became U+FFFD, as in llama.cpp) */
        if (!kr_work_reserve((void **)&w->text, &w->cap_text, 4 * (end - start), 1)) return KARA_ERR_NOMEM;
        size_t nb = 0;
        for (size_t i = start; i < end; i++) nb += kr_utf8_encode(w->cpts[i], (uint8_t *)w->text + nb);
        kara_status st = bpe_word(v, w, (const uint8_t *)w->text, nb, out);
        if (st) return st;
        start = end;
    }
    return KARA_OK;
}
