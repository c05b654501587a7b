/* ngram_draft.c - drafts from the sequence's own text (ngram_draft.h). */
#include "ngram_draft.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

#define MAX_TABLE (1u << 13) /* entries per context (1.3 MB in all): older contexts fade past it */
#define MARK_LINE_END (-2)   /* the line above ended at this column */
#define MARK_NONE (-3)       /* no token of the line above at this column */

static const int32_t k_orders[KR_DRAFT_N_ORDERS] = {1, 2, 3, 4, 6, 8, 12};

kara_status kr_ngram_init(kr_ngram_index *ix, int32_t n_ctx, const uint8_t *line_end, int32_t n_vocab) {
    memset(ix, 0, sizeof *ix);
    uint32_t cap = 1024;
    while (cap < 2u * (uint32_t)(n_ctx > 0 ? n_ctx : 1) && cap < MAX_TABLE) cap <<= 1;
    ix->table = malloc((size_t)KR_DRAFT_N_CTX * cap * sizeof *ix->table);
    if (!ix->table) return kr_set_error(KARA_ERR_NOMEM, "out of memory for the n-gram draft index");
    /* written now, not calloc'd (through a pointer the compiler cannot see
     * through, or it folds malloc + memset into calloc): its pages are
     * mapped here rather than faulted in one by one by the first steps */
    static void *(*volatile const clear)(void *, int, size_t) = memset;
    clear(ix->table, 0, (size_t)KR_DRAFT_N_CTX * cap * sizeof *ix->table);
    ix->mask = cap - 1;
    ix->nl_last = ix->nl_prev = -1;
    ix->line_end = line_end;
    ix->n_vocab = n_vocab;
    return KARA_OK;
}

void kr_ngram_free(kr_ngram_index *ix) {
    free(ix->table);
    memset(ix, 0, sizeof *ix);
}

void kr_ngram_cut(kr_ngram_index *ix, int32_t n_keep) {
    if (n_keep >= ix->n_indexed) return;
    /* the counts cannot be taken back: index the kept history again */
    memset(ix->table, 0, (size_t)KR_DRAFT_N_CTX * (ix->mask + 1) * sizeof *ix->table);
    ix->n_indexed = 0;
    ix->nl_last = ix->nl_prev = -1;
}

/* The indexed history followed by the tokens drafted so far. */
typedef struct text_view {
    const int32_t *hist, *more;
    int32_t n_hist;           /* tokens in hist; the rest are in more */
    int32_t n;                /* the view's length: its next token is predicted */
    int32_t nl_last, nl_prev; /* its last two line ends (-1: none) */
} text_view;

static inline int32_t tok_at(const text_view *v, int32_t i) {
    return i < v->n_hist ? v->hist[i] : v->more[i - v->n_hist];
}

static inline bool ends_line(const kr_ngram_index *ix, int32_t tok) {
    return ix->line_end && tok >= 0 && tok < ix->n_vocab && ix->line_end[tok];
}

static inline uint32_t mix(uint32_t h, int32_t x) { return (h ^ (uint32_t)x) * 16777619u; }

/* Never 0, so a zeroed entry matches no context. */
static inline uint32_t finish(uint32_t h) {
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h ? h : 1;
}

/* The hash of every context that predicts the token after the view (0 where
 * the context does not exist yet: too short a history, no line above). */
static void context_hashes(const kr_ngram_index *ix, const text_view *v, uint32_t hs[KR_DRAFT_N_CTX]) {
    memset(hs, 0, KR_DRAFT_N_CTX * sizeof *hs);
    uint32_t h = 2166136261u;
    for (int32_t g = 1, o = 0; g <= v->n && o < KR_DRAFT_N_ORDERS; g++) {
        h = mix(h, tok_at(v, v->n - g));
        if (g == k_orders[o]) {
            hs[o] = finish(mix(h, o));
            o++;
        }
    }
    if (!ix->line_end || v->nl_last < 0) return;
    int32_t col = v->n - v->nl_last - 1, above = v->nl_prev + 1, len = v->nl_last - above;
    int32_t a = col < len ? tok_at(v, above + col) : col == len ? MARK_LINE_END : MARK_NONE;
    int32_t b = col > 0 && col <= len ? tok_at(v, above + col - 1) : MARK_NONE;
    int32_t last = tok_at(v, v->n - 1), before = v->n >= 2 ? tok_at(v, v->n - 2) : MARK_NONE;
    hs[KR_DRAFT_N_ORDERS] = finish(mix(mix(mix(2166136261u, KR_DRAFT_N_ORDERS), a), last));
    hs[KR_DRAFT_N_ORDERS + 1] = finish(mix(mix(mix(mix(2166136261u, KR_DRAFT_N_ORDERS + 1), a), b), last));
    hs[KR_DRAFT_N_ORDERS + 2] = finish(mix(mix(mix(mix(2166136261u, KR_DRAFT_N_ORDERS + 2), a), before), last));
}

static kr_ngram_entry *entry(const kr_ngram_index *ix, int c, uint32_t h) {
    return ix->table + (size_t)c * (ix->mask + 1) + (h & ix->mask);
}

/* Count tok as the token that followed the context h. */
static void observe(kr_ngram_entry *e, uint32_t h, int32_t tok) {
    if (e->tag != h) {
        *e = (kr_ngram_entry){h, {tok, -1}, {1, 0}, 1, 0};
        return;
    }
    if (e->total == UINT8_MAX) { /* keep the proportions */
        e->cnt[0] >>= 1;
        e->cnt[1] >>= 1;
        e->total >>= 1;
    }
    e->total++;
    if (e->tok[0] == tok) {
        e->cnt[0]++;
    } else if (e->tok[1] == tok) {
        if (++e->cnt[1] > e->cnt[0]) {
            int32_t t = e->tok[0];
            uint8_t c = e->cnt[0];
            e->tok[0] = tok, e->cnt[0] = e->cnt[1];
            e->tok[1] = t, e->cnt[1] = c;
        }
    } else {
        e->tok[1] = tok, e->cnt[1] = 1;
    }
}

/* Count every position of hist[0, n) after the last one counted. */
static void index_upto(kr_ngram_index *ix, const int32_t *hist, int32_t n) {
    if (n < ix->n_indexed) kr_ngram_cut(ix, n);
    text_view v = {hist, NULL, n, 0, ix->nl_last, ix->nl_prev};
    uint32_t hs[KR_DRAFT_N_CTX];
    for (int32_t at = ix->n_indexed; at < n; at++) {
        v.n = at;
        context_hashes(ix, &v, hs);
        for (int c = 0; c < KR_DRAFT_N_CTX; c++)
            if (hs[c]) observe(entry(ix, c, hs[c]), hs[c], hist[at]);
        if (ends_line(ix, hist[at])) v.nl_prev = v.nl_last, v.nl_last = at;
    }
    ix->n_indexed = n;
    ix->nl_last = v.nl_last;
    ix->nl_prev = v.nl_prev;
}

/* The most probable next token of any known context, -1 if none. */
static int32_t predict(const kr_ngram_index *ix, const text_view *v, float *prob) {
    uint32_t hs[KR_DRAFT_N_CTX];
    context_hashes(ix, v, hs);
    int32_t best = -1;
    *prob = 0.0f;
    for (int c = 0; c < KR_DRAFT_N_CTX; c++) {
        const kr_ngram_entry *e = entry(ix, c, hs[c]);
        if (!hs[c] || e->tag != hs[c] || !e->cnt[0]) continue;
        float p = (float)e->cnt[0] / ((float)e->total + 0.5f);
        if (p > *prob) *prob = p, best = e->tok[0];
    }
    return best;
}

float kr_ngram_min_prob(int32_t n_seqs) {
    const float a = KR_DRAFT_MIN_PROB / (1.0f - KR_DRAFT_MIN_PROB) * (float)(n_seqs > 1 ? n_seqs : 1);
    return a / (1.0f + a);
}

int32_t kr_ngram_draft(kr_ngram_index *ix, const int32_t *hist, int32_t n, int32_t max, float min_prob, int32_t *out) {
    /* the last token has no next one yet, so it is not counted and a
     * context never predicts itself */
    index_upto(ix, hist, n);
    if (max > KARA_MAX_DRAFT) max = KARA_MAX_DRAFT;
    text_view v = {hist, out, n, n, ix->nl_last, ix->nl_prev};
    float all = 1.0f; /* the chance that every token drafted so far is right */
    int32_t k = 0;
    while (k < max) {
        float p;
        int32_t tok = predict(ix, &v, &p);
        all *= p;
        if (tok < 0 || all < min_prob) break;
        out[k++] = tok;
        if (ends_line(ix, tok)) v.nl_prev = v.nl_last, v.nl_last = v.n;
        v.n++;
    }
    return k;
}
