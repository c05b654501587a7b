/* kv_baselines.h - each baseline's selection over plain arrays, defined in
 * its method's file (methods/<name>.c) and declared here for the method
 * and its unit tests; kv_select.h's rules (ranking, protection, scratch)
 * hold for them. The rest of the runtime reaches them through the
 * method's table only (kv_method.h). */
#ifndef KR_KV_BASELINES_H
#define KR_KV_BASELINES_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"
#include "kv_select.h"

/* ---- window methods over C = [0, n_c): exactly k sorted slots ---- */

/* chunkkv: C cut into chunks of chunk_len from slot 0 (the last may be
 * shorter), ranked by mean score (ties to the lower chunk); whole chunks are
 * taken while their unkept slots fit, then the highest-score remaining slots
 * fill to exactly k. */
kara_status kr_kv_select_chunks(const float *s, int32_t n_c, int32_t k, int32_t chunk_len, const kr_kv_protect *protect,
                                int32_t *keep, void *scratch, size_t scratch_bytes);

/* recent: the last k slots of C (after the protected ones). s may be NULL. */
kara_status kr_kv_select_recent(int32_t n_c, int32_t k, const kr_kv_protect *protect, int32_t *keep, void *scratch,
                                size_t scratch_bytes);

/* random: k slots drawn uniformly without replacement, reproducible from
 * seed (splitmix64). */
kara_status kr_kv_select_random(int32_t n_c, int32_t k, uint64_t seed, const kr_kv_protect *protect, int32_t *keep,
                                void *scratch, size_t scratch_bytes);

/* ---- decode-time baselines over a whole cache [0, n) ---- */
/* In all of them, budget counts every kept slot; when n <= budget every slot
 * is kept. keep has room for n; *n_keep = min(n, budget). */

/* streaming: slots [0, n_sink) and the most recent budget - n_sink. */
kara_status kr_kv_select_streaming(int32_t n, int32_t n_sink, int32_t budget, int32_t *keep, int32_t *n_keep);

/* snapkv: slots [0, n_front) (the prompt when protect_prompt, else 0) and the
 * observation window [n - obs_window, n) are kept; of the slots between, the
 * budget - n_front - obs_window highest after pooling s over `kernel`
 * neighbours (pool KR_REDUCE_MAX or KR_REDUCE_MEAN, clipped to the
 * middle region). s has n entries (only the middle ones are read).
 * KARA_ERR_KV_BUDGET when budget < n_front + obs_window. */
kara_status kr_kv_select_snapkv(const float *s, int32_t n, int32_t n_front, int32_t obs_window, int32_t kernel,
                                kr_reduce pool, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                                size_t scratch_bytes);

/* h2o: slots [0, n_front) kept; of the rest, n_heavy = round(heavy_frac *
 * (budget - n_front)) by accumulated score acc and the most recent
 * budget - n_front - n_heavy. KARA_ERR_KV_BUDGET when budget < n_front. */
kara_status kr_kv_select_h2o(const float *acc, int32_t n, int32_t n_front, int32_t budget, float heavy_frac,
                             int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes);

/* rkv (R-KV): slots [0, n_front) (the prompt when protect_prompt, else 0)
 * and the observation window [n - obs_window, n) are kept; of the slots
 * between, the budget - n_front - obs_window highest by
 *   lambda * maxpool_kernel(imp)[j] - (1 - lambda) * red[j],
 * the pooling clipped to the middle region. imp (mean attention of the
 * observation queries) and red (kv_redund.h) have n entries; only the middle
 * ones are read. KARA_ERR_KV_BUDGET when budget < n_front + obs_window. */
kara_status kr_kv_select_rkv(const float *imp, const float *red, int32_t n, int32_t n_front, int32_t obs_window,
                             int32_t kernel, float lambda, int32_t budget, int32_t *keep, int32_t *n_keep,
                             void *scratch, size_t scratch_bytes);

/* LazyEviction's recurrence tracking at step t: every slot j < n with
 * attn[j] >= alpha was attended at t: mri[j] = max(mri[j], t - last[j]),
 * then last[j] = t. A slot starts with last = the step before its own and
 * mri = 0 (never seen attended). */
void kr_kv_lazy_observe(int32_t *last, int32_t *mri, const float *attn, int32_t n, int32_t t, float alpha);
/* Its score at step t (the reference code's MRI-centric importance):
 *   2 / (1 + e^(1 + (t - last) / (mri + 1e-5)))  +  (mri > 0 ? 2 / (1 + e^(mri - 1)) : 0):
 * the first term falls below 2 / (1 + e^2) once the slot has gone unattended
 * for longer than its longest interval, the second favours short intervals. */
float kr_kv_lazy_score(int32_t last, int32_t mri, int32_t t);
/* lazy: slots [0, n_front) and the newest window [n - window, n) are kept; of
 * the slots between, the budget - n_front - window with the highest
 * kr_kv_lazy_score at step t. KARA_ERR_KV_BUDGET when budget < n_front +
 * window. */
kara_status kr_kv_select_lazy(const int32_t *last, const int32_t *mri, int32_t t, int32_t n, int32_t n_front,
                              int32_t window, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                              size_t scratch_bytes);

#endif /* KR_KV_BASELINES_H */
