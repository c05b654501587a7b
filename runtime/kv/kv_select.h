/*
 * kv_select.h - which slots survive a compression event, for every method
 * (docs/KARA_METHOD.md sections 6 and 11), over plain score arrays.
 *
 * Window methods (kara, A3, A4, chunkkv, recent, random) choose exactly k
 * slots of the compressible region C = [0, n_c) (indices relative to the
 * frontier) and return them sorted ascending. Decode-time baselines
 * (streaming, snapkv, h2o) choose slots over a whole cache [0, n).
 *
 * Shared rules:
 * - Ranking by score is descending with ties to the lower slot; a NaN score
 *   ranks as -infinity.
 * - Protected slots (token id in a protect list) are always kept by the
 *   window methods and count toward k; for Token2Chunk they are candidates
 *   and count toward m. When more than k slots are protected, the k with the
 *   highest score win (the most recent ones for recent/random).
 * - Scratch memory is the caller's: kr_kv_select_scratch_bytes(n) for a
 *   region of n slots; nothing is allocated.
 */
#ifndef KR_KV_SELECT_H
#define KR_KV_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"

/* k = clamp(round(retention * n_c), min_keep, n_c), round half away from
 * zero (docs/KARA_METHOD.md section 6). 0 when n_c <= 0. */
int32_t kr_kv_keep_count(int32_t n_c, float retention, int32_t min_keep);

/* Token2Chunk candidates: m = max(2, round(kappa * k)), at most k. */
int32_t kr_kv_candidate_count(int32_t k, float candidate_frac);

/* Token ids of the slots of C and the ids that force a slot to be kept. */
typedef struct kr_kv_protect {
    const int32_t *tokens; /* token id of each slot of C; NULL = nothing protected */
    const int32_t *ids;    /* protect_token_ids */
    int32_t n_ids;
} kr_kv_protect;

/* Bytes of scratch any selection over n slots needs (64-byte aligned inside). */
size_t kr_kv_select_scratch_bytes(int32_t n);

typedef struct kr_kv_t2c_params {
    int32_t k;                /* slots to keep, 0 <= k <= n_c */
    float candidate_frac;     /* kappa in (0, 1]; 1 = pure Top-K (A3) */
    int32_t max_gap;          /* longest chunk interior, >= 1 */
    float len_penalty;        /* beta >= 0 */
    const uint8_t *line_ends; /* t2c.mode line_tails: per slot, its token ends a line; NULL = plain Token2Chunk */
} kr_kv_t2c_params;

/* Longest line tail a candidate brings (t2c.mode line_tails), in slots. */
#define KR_T2C_LINE_TAIL 4

/* Kara's selection (docs/KARA_METHOD.md section 6): the m highest-score
 * candidates (protected slots first), chunks between consecutive candidates
 * with 1 <= gap <= max_gap scored
 * phi = ((u(c_t) + u(c_t+1)) / 2) * (1 + gap)^-beta with u = s / max s
 * (u = 0 when max s <= 0), taken greedily by phi (ties: smaller gap, then
 * lower slot) while the gap fits the remaining budget, then the highest-score
 * remaining slots. With line_ends, before the chunks each candidate in rank
 * order whose line ends within KR_T2C_LINE_TAIL slots after it brings the
 * rest of its line, newline included, while it fits. keep gets exactly k
 * sorted slots. */
kara_status kr_kv_select_t2c(const float *s, int32_t n_c, const kr_kv_t2c_params *p, const kr_kv_protect *protect,
                             int32_t *keep, void *scratch, size_t scratch_bytes);

/* A4: Top-k of the scores max-pooled over `kernel` neighbours (odd, >= 1;
 * the window is clipped at the ends of C). */
kara_status kr_kv_select_pooled_topk(const float *s, int32_t n_c, int32_t k, int32_t kernel,
                                     const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes);

/* Line-aware Token2Chunk (t2c.mode lines): C is cut into lines, each ending
 * at a slot flagged in line_ends (NULL: no line breaks known), and lines
 * longer than max_len into pieces of max_len from their start. Lines are
 * ranked by their best slot's score (ties to the earlier line) and taken
 * whole while their unkept slots fit, so a kept digit brings the rest of its
 * line; the highest-score remaining slots fill to exactly k. Protected slots
 * first, as everywhere. */
kara_status kr_kv_select_lines(const float *s, int32_t n_c, int32_t k, int32_t max_len, const uint8_t *line_ends,
                               const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes);

/* The window selection of method p->method (kara, chunkkv, recent, random)
 * with p's retention, min_keep, t2c and chunk settings; tokens (may be NULL)
 * give the protect_token_ids check, line_ends (may be NULL) the slots that
 * end a line for t2c.mode lines. *n_keep = k. */
kara_status kr_kv_select_window(const kara_kv_params *p, const float *s, const int32_t *tokens,
                                const uint8_t *line_ends, int32_t n_c, uint64_t seed, int32_t *keep, int32_t *n_keep,
                                void *scratch, size_t scratch_bytes);

/* The same selection with k given (0 <= k <= n_c) instead of derived from
 * retention: Kara's threshold trigger (ablation A8) keeps what its token
 * budget leaves room for. */
kara_status kr_kv_select_window_k(const kara_kv_params *p, const float *s, const int32_t *tokens,
                                  const uint8_t *line_ends, int32_t n_c, int32_t k, uint64_t seed, int32_t *keep,
                                  void *scratch, size_t scratch_bytes);

/* ---- the attention sums h2o and read tracking share (the baselines'
 * selections: kv_baselines.h) ---- */

/* H2O's accumulator: acc[j] += probs[j] for j < n (one decode query's
 * attention, already summed over heads and layers by the caller). */
void kr_kv_h2o_accumulate(float *acc, const float *probs, int32_t n);
/* acc[j] = max(acc[j], probs[j]): kara.score.mode online_max's fold. */
void kr_kv_h2o_maximum(float *acc, const float *probs, int32_t n);

#endif /* KR_KV_SELECT_H */
