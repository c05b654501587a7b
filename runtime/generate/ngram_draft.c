/* ngram_draft.c - n-gram drafts from the sequence's own text (ngram_draft.h). */
#include "ngram_draft.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

#define N_SIZES (KR_NGRAM_MAX - KR_NGRAM_MIN + 1)

kara_status kr_ngram_init(kr_ngram_index *ix, int32_t n_ctx) {
    memset(ix, 0, sizeof *ix);
    uint32_t cap = 1024;
    while (cap < 2u * (uint32_t)(n_ctx > 0 ? n_ctx : 1) && cap < (1u << 24)) cap <<= 1;
    ix->table = calloc((size_t)N_SIZES * cap, sizeof *ix->table);
    if (!ix->table) return kr_set_error(KARA_ERR_NOMEM, "out of memory for the n-gram draft index");
    ix->mask = cap - 1;
    return KARA_OK;
}

void kr_ngram_free(kr_ngram_index *ix) {
    free(ix->table);
    memset(ix, 0, sizeof *ix);
}

/* Never 0, so a zeroed entry matches no n-gram. */
static uint32_t hash(const int32_t *t, int32_t n) {
    uint32_t h = 2166136261u ^ (uint32_t)n;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 16777619u;
    h ^= h >> 15;
    return h ? h : 1;
}

static kr_ngram_entry *entry(const kr_ngram_index *ix, int32_t n, uint32_t h) {
    return ix->table + (size_t)(n - KR_NGRAM_MIN) * (ix->mask + 1) + (h & ix->mask);
}

void kr_ngram_cut(kr_ngram_index *ix, int32_t n_keep) {
    if (n_keep >= ix->n_indexed) return;
    /* the counts cannot be taken back: index the kept history again */
    memset(ix->table, 0, (size_t)N_SIZES * (ix->mask + 1) * sizeof *ix->table);
    ix->n_indexed = 0;
}

/* Count every n-gram of hist[0, n) whose next token is known. */
static void index_upto(kr_ngram_index *ix, const int32_t *hist, int32_t n) {
    if (n < ix->n_indexed) kr_ngram_cut(ix, n);
    for (int32_t next = ix->n_indexed; next < n; next++)
        for (int32_t g = KR_NGRAM_MIN; g <= KR_NGRAM_MAX && g <= next; g++) {
            uint32_t h = hash(hist + next - g, g);
            kr_ngram_entry *e = entry(ix, g, h);
            if (e->tag == h && e->token == hist[next]) {
                if (e->streak < INT32_MAX) e->streak++;
            } else {
                *e = (kr_ngram_entry){h, hist[next], 1};
            }
        }
    ix->n_indexed = n;
}

/* The next token after tail[0, n) when its longest known n-gram context has
 * been followed by the same token at least KR_NGRAM_STREAK times running;
 * -1 otherwise. */
static int32_t predict(const kr_ngram_index *ix, const int32_t *tail, int32_t n) {
    for (int32_t g = KR_NGRAM_MAX; g >= KR_NGRAM_MIN; g--) {
        if (g > n) continue;
        uint32_t h = hash(tail + n - g, g);
        const kr_ngram_entry *e = entry(ix, g, h);
        if (e->tag != h) continue;
        return e->streak >= KR_NGRAM_STREAK ? e->token : -1;
    }
    return -1;
}

int32_t kr_ngram_draft(kr_ngram_index *ix, const int32_t *hist, int32_t n, int32_t max, int32_t *out) {
    /* the suffix's own n-grams have no next token yet, so they are not
     * counted and it never predicts itself */
    index_upto(ix, hist, n);
    int32_t tail[KR_NGRAM_MAX + KARA_MAX_DRAFT];
    int32_t t = n < KR_NGRAM_MAX ? n : KR_NGRAM_MAX;
    memcpy(tail, hist + n - t, (size_t)t * sizeof *tail);
    int32_t k = 0;
    if (max > KARA_MAX_DRAFT) max = KARA_MAX_DRAFT;
    while (k < max) {
        int32_t tok = predict(ix, tail, t + k);
        if (tok < 0) break;
        tail[t + k] = out[k] = tok;
        k++;
    }
    return k;
}
