/*
 * ngram_draft.h - drafts for speculative decoding from the sequence's own
 * text. For every n-gram (n = KR_NGRAM_MIN..KR_NGRAM_MAX) the index keeps
 * the token that followed its latest occurrence and how many occurrences
 * running it has been the same. A draft extends the sequence one token at
 * a time with the prediction of the longest n-gram context it knows, while
 * that prediction has held at least KR_NGRAM_STREAK times running.
 * Reasoning traces repeat their structure (the same line shapes, a partial
 * product written twice), so such a guess is often right. The target model
 * checks every drafted token, so a wrong guess costs time, never text.
 *
 * One direct-mapped table per n, keyed by the n-gram's hash (a collision
 * overwrites: a lost guess at most). Indexing is incremental as the history
 * grows. Everything is allocated at init; nothing per token.
 */
#ifndef KR_NGRAM_DRAFT_H
#define KR_NGRAM_DRAFT_H

#include <stdint.h>

#include "kara.h"

#define KR_NGRAM_MIN 2
#define KR_NGRAM_MAX 4
#ifndef KR_NGRAM_STREAK
#define KR_NGRAM_STREAK 3
#endif

typedef struct kr_ngram_entry {
    uint32_t tag;   /* the n-gram's hash; 0 = empty */
    int32_t token;  /* what followed its latest occurrence */
    int32_t streak; /* occurrences running followed by token */
} kr_ngram_entry;

typedef struct kr_ngram_index {
    kr_ngram_entry *table; /* [KR_NGRAM_MAX - KR_NGRAM_MIN + 1][mask + 1] */
    uint32_t mask;
    int32_t n_indexed; /* history length indexed so far */
} kr_ngram_index;

/* Tables for histories of up to n_ctx tokens. KARA_ERR_NOMEM. */
kara_status kr_ngram_init(kr_ngram_index *ix, int32_t n_ctx);
void kr_ngram_free(kr_ngram_index *ix);

/* The history keeps only its first n_keep tokens (what follows may be
 * replaced): the index is rebuilt from it at the next draft. */
void kr_ngram_cut(kr_ngram_index *ix, int32_t n_keep);

/* Up to max (<= KARA_MAX_DRAFT) drafted tokens to follow hist[0, n) into
 * out; returns how many (0: no confident guess). Indexes what hist[0, n)
 * added since the last call first (kr_ngram_cut when earlier tokens
 * changed). */
int32_t kr_ngram_draft(kr_ngram_index *ix, const int32_t *hist, int32_t n, int32_t max, int32_t *out);

#endif /* KR_NGRAM_DRAFT_H */
