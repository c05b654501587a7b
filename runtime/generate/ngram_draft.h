/*
 * ngram_draft.h - drafts for speculative decoding from the sequence's own
 * text. The index counts, for a handful of contexts of every position, the
 * token that followed: the last 1, 2, 3, 4, 6, 8 and 12 tokens (n-grams),
 * and three contexts aligned with the line above (the token in the same
 * column of the previous line, with the last one or two tokens). Each
 * context keeps its two most frequent next tokens and a total. A draft
 * extends the sequence one token at a time with the most probable next
 * token of any known context (count / (total + 1/2)) while the product of
 * those probabilities stays at least KR_DRAFT_MIN_PROB: a long draft only
 * where every step of it is likely.
 *
 * Reasoning traces repeat their structure (line templates such as a column
 * sum, an operand written again, a result copied into the next line), and
 * the aligned contexts catch what sits under the same column. The target
 * model checks every drafted token, so a wrong guess costs time, never text.
 * The rule and its constants were chosen by replaying greedy traces of the
 * shipped model and stories260K offline (docs/SPECULATIVE.md).
 *
 * One direct-mapped table per context, keyed by the context's hash (a
 * collision overwrites: a lost guess at most). Indexing is incremental as
 * the history grows. Everything is allocated at init; nothing per token.
 */
#ifndef KR_NGRAM_DRAFT_H
#define KR_NGRAM_DRAFT_H

#include <stdint.h>

#include "kara.h"

#define KR_DRAFT_N_ORDERS 7  /* n-gram contexts: the last 1, 2, 3, 4, 6, 8, 12 tokens */
#define KR_DRAFT_N_ALIGNED 3 /* contexts with the token in the same column of the line above */
#define KR_DRAFT_N_CTX (KR_DRAFT_N_ORDERS + KR_DRAFT_N_ALIGNED)
#define KR_DRAFT_MAX_ORDER 12
#ifndef KR_DRAFT_MIN_PROB
#define KR_DRAFT_MIN_PROB 0.45f
#endif

typedef struct kr_ngram_entry {
    uint32_t tag;   /* the context's hash; 0 = empty */
    int32_t tok[2]; /* the most frequent next token, and the latest other */
    uint8_t cnt[2]; /* how often each followed (halved with total at 255) */
    uint8_t total;  /* how often the context was seen */
    uint8_t unused;
} kr_ngram_entry;

typedef struct kr_ngram_index {
    kr_ngram_entry *table; /* [KR_DRAFT_N_CTX][mask + 1] */
    uint32_t mask;
    int32_t n_indexed;        /* history length indexed so far */
    int32_t nl_last, nl_prev; /* positions of its last two line ends (-1: none) */
    const uint8_t *line_end;  /* [n_vocab]: the token's text holds a newline; NULL: no aligned contexts */
    int32_t n_vocab;
} kr_ngram_index;

/* Tables for histories of up to n_ctx tokens. line_end (n_vocab entries,
 * borrowed: it must outlive the index) marks the tokens that end a line;
 * NULL leaves the aligned contexts out. KARA_ERR_NOMEM. */
kara_status kr_ngram_init(kr_ngram_index *ix, int32_t n_ctx, const uint8_t *line_end, int32_t n_vocab);
void kr_ngram_free(kr_ngram_index *ix);

/* The history keeps only its first n_keep tokens (what follows may be
 * replaced): the index is rebuilt from it at the next draft. */
void kr_ngram_cut(kr_ngram_index *ix, int32_t n_keep);

/* Up to max (<= KARA_MAX_DRAFT) drafted tokens to follow hist[0, n) into
 * out, while the chance that all of them are right stays at least
 * min_prob; returns how many (0: no confident guess). Indexes what
 * hist[0, n) added since the last call first (kr_ngram_cut when earlier
 * tokens changed). */
int32_t kr_ngram_draft(kr_ngram_index *ix, const int32_t *hist, int32_t n, int32_t max, float min_prob, int32_t *out);

/* The min_prob for a step that decodes n_seqs sequences together: a
 * drafted entry costs about the same compute whatever the batch, but the
 * step it could save is shared by n_seqs tokens, so a draft must be likelier
 * to pay. With a = p / (1 - p), p = KR_DRAFT_MIN_PROB: n a / (1 + n a), which
 * is p for one sequence, 0.62 for 2, 0.77 for 4, 0.87 for 8. */
float kr_ngram_min_prob(int32_t n_seqs);

#endif /* KR_NGRAM_DRAFT_H */
