/*
 * tokenizer_spm.c - SentencePiece-style BPE over token scores (the `llama`
 * tokenizer model): start from UTF-8 characters, repeatedly merge the
 * adjacent pair whose concatenation is the highest-scoring token, and spell
 * whatever is left that is not a token as byte tokens (<0xXX>).
 *
 * The text arrives with spaces already escaped to U+2581 (vocab.c).
 */
#include "pair_heap.h"
#include "vocab_impl.h"

#include <string.h>

#include "unicode.h"

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t start, len; /* bytes of the text; len 0 = merged away */
} spm_sym;

typedef struct spm_pair {
    float score;
    int32_t left, right;
    uint32_t size; /* left.len + right.len when queued */
} spm_pair;

/* Queue order: higher score first, then the leftmost pair. */
static bool pair_before(const spm_pair *a, const spm_pair *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

KR_DEFINE_PAIR_HEAP(heap, spm_pair, pair_before)

typedef struct spm_state {
    const kr_vocab *v;
    const char *text;
    spm_sym *sym;
    spm_pair *heap;
    size_t n_heap;
} spm_state;

/* Queue the pair (left, right) when their concatenation is a token. */
static void try_pair(spm_state *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const spm_sym *l = &s->sym[left], *r = &s->sym[right];
    uint32_t size = l->len + r->len;
    int32_t id = kr_vocab_sym_find(s->v->impl, s->text + l->start, size);
    if (id < 0 || id >= s->v->n_tokens) return;
    float score = s->v->impl->scores ? s->v->impl->scores[id] : 0.0f;
    heap_push(s->heap, &s->n_heap, (spm_pair){score, left, right, size});
}

#define ESC_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

static bool esc_space_at(const char *s, size_t len, size_t i) {
    return i + 3 <= len && memcmp(s + i, ESC_SPACE, 3) == 0;
}

/* Merging never crosses a point where no token could span it. When no token
 * holds U+2581 right after another character, the place before a U+2581
 * that follows another character is such a point, and each word can be
 * merged on its own with the same result: a much smaller queue, which keeps
 * long texts fast. */
void kr_spm_prepare(kr_vocab *v) {
    kr_vocab_impl *im = v->impl;
    im->spm_word_split = true;
    for (int32_t id = 0; id < v->n_tokens && im->spm_word_split; id++) {
        const kr_strref *s = &im->strs[id];
        for (size_t i = 1; i + 3 <= s->len; i++) {
            if (esc_space_at(s->ptr, s->len, i) && !(i >= 3 && esc_space_at(s->ptr, s->len, i - 3))) {
                im->spm_word_split = false;
                break;
            }
        }
    }
}

static kara_status spm_merge(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out);

kara_status kr_spm_tokenize(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out) {
    if (!len) return KARA_OK;
    if (len > (size_t)INT32_MAX / 4) return KARA_ERR_ARG;
    if (!v->impl->spm_word_split) return spm_merge(v, w, text, len, out);
    size_t start = 0;
    for (size_t i = 3; i + 3 <= len; i++) {
        if (esc_space_at(text, len, i) && !esc_space_at(text, len, i - 3)) {
            kara_status st = spm_merge(v, w, text + start, i - start, out);
            if (st) return st;
            start = i;
        }
    }
    return spm_merge(v, w, text + start, len - start, out);
}

/* The merge loop over one piece of text. */
static kara_status spm_merge(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out) {
    const kr_vocab_impl *im = v->impl;

    size_t n = 0;
    for (size_t i = 0; i < len; i += kr_utf8_seq_len((uint8_t)text[i])) n++;
    if (!kr_work_reserve(&w->syms, &w->cap_syms, n, sizeof(spm_sym)) ||
        !kr_work_reserve(&w->heap, &w->cap_heap, 3 * n + 1, sizeof(spm_pair)))
        return KARA_ERR_NOMEM;

    spm_state s = {v, text, w->syms, w->heap, 0};
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = kr_utf8_seq_len((uint8_t)text[off]);
        if (k > len - off) k = len - off;
        s.sym[i] = (spm_sym){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)off, (uint32_t)k};
        off += k;
    }
    for (size_t i = 1; i < n; i++) try_pair(&s, (int32_t)i - 1, (int32_t)i);

    while (s.n_heap) {
        spm_pair p = heap_pop(s.heap, &s.n_heap);
        spm_sym *l = &s.sym[p.left], *r = &s.sym[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.size) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = p.left;
        try_pair(&s, l->prev, p.left);
        try_pair(&s, p.left, l->next);
    }

    for (int32_t i = 0; i != -1; i = s.sym[i].next) {
        const spm_sym *sy = &s.sym[i];
        int32_t id = kr_vocab_sym_find(im, text + sy->start, sy->len);
        if (id >= 0 && id < v->n_tokens) {
            kr_tok_emit(out, id);
            continue;
        }
        /* not a token: byte fallback, unk where the vocabulary lacks a byte */
        for (uint32_t j = 0; j < sy->len; j++) {
            int32_t b = im->byte_token[(uint8_t)text[sy->start + j]];
            if (b < 0) b = v->unk;
            if (b >= 0) kr_tok_emit(out, b);
        }
    }
    return KARA_OK;
}
