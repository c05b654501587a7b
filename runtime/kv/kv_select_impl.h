/* kv_select_impl.h - the primitives the selections share: kv_select.c's
 * (Top-K, Token2Chunk, lines) and each baseline's in its method's file
 * (methods/<name>.c, kv_observe.c). Internal to runtime/kv. */
#ifndef KR_KV_SELECT_IMPL_H
#define KR_KV_SELECT_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"
#include "kv_select.h"

/* A slot and its ranking key. */
typedef struct kr_rank_entry {
    float s;
    int32_t slot;
} kr_rank_entry;

/* A run of slots [lo, lo + len) with a score (Token2Chunk chunk or chunkkv chunk). */
typedef struct kr_chunk_entry {
    double score;
    int32_t len;
    int32_t lo;
} kr_chunk_entry;

/* The caller's scratch (kr_kv_select_scratch_bytes), cut into its parts. */
typedef struct kr_select_scratch {
    kr_rank_entry *rank;
    kr_chunk_entry *chunk;
    float *pooled;
    uint8_t *flag;
} kr_select_scratch;

/* A NaN score ranks as -infinity. */
static inline float kr_kvs_score_key(float x) { return isnan(x) ? -INFINITY : x; }

/* Cut scratch for n slots (flags zeroed); KARA_ERR_ARG naming `who` when it is too small. */
kara_status kr_kvs_scratch_split(const char *who, int32_t n, void *scratch, size_t bytes, kr_select_scratch *out);
/* r = slots 0..n-1 by descending score, ties to the lower slot. */
void kr_kvs_rank_by(const float *s, int32_t n, kr_rank_entry *r);
/* Flag the first `count` unflagged slots of the ranking; returns how many. */
int32_t kr_kvs_take_ranked(const kr_rank_entry *r, int32_t n, uint8_t *flag, int32_t count);
/* The kept slots of the threshold baselines in order: the protected front
 * [0, lo), the `take` best of the middle [lo, lo + n_mid) by s_mid (its
 * scores, from lo), and the tail [hi, n). Returns how many. */
int32_t kr_kvs_keep_front_best_tail(const float *s_mid, int32_t lo, int32_t n_mid, int32_t take, int32_t hi, int32_t n,
                                    const kr_select_scratch *w, int32_t *keep);
/* Flag the protected slots, at most k of them: by rank when a ranking is
 * given, else the most recent. Returns the count flagged. */
int32_t kr_kvs_flag_protected(const kr_kv_protect *pr, int32_t n, int32_t k, const kr_rank_entry *r, uint8_t *flag);
/* The start of a ranked window selection (chunks, lines): the arguments
 * checked (len_name's value len at least 1), the scratch cut, the window
 * ranked by score and the protected slots flagged; *left is what the
 * selection may still keep. With k 0 nothing is ranked and *left is 0. */
kara_status kr_kvs_start_ranked(const char *who, const float *s, int32_t n_c, int32_t k, int32_t *keep,
                                const char *len_name, int32_t len, const kr_kv_protect *protect, void *scratch,
                                size_t scratch_bytes, kr_select_scratch *w, int32_t *left);
/* A window selection's arguments: keep k of n_c, an output when k > 0. */
kara_status kr_kvs_check_window(const char *who, int32_t n_c, int32_t k, const int32_t *keep);
/* Write the flagged slots in ascending order and verify there are k. */
kara_status kr_kvs_finish_window(const char *who, const uint8_t *flag, int32_t n_c, int32_t k, int32_t *keep);
/* out[j] = max (or mean) of s over [j - kernel/2, j + kernel/2] clipped to [0, n). */
void kr_kvs_pool_scores(const float *s, int32_t n, int32_t kernel, kr_reduce how, float *out);
/* Sort the chunks by score (ties to the lower chunk), take each whole while
 * its unkept slots fit in `left`, then the best-ranked single slots. */
void kr_kvs_take_chunks(kr_select_scratch *w, int32_t n_chunk, int32_t n_c, int32_t left);
/* keep = 0..n-1; returns n. */
int32_t kr_kvs_keep_all(int32_t n, int32_t *keep);

#endif
