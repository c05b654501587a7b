/* kv_observe.c - what snapkv and rkv share: an observation window of the
 * newest queries scores the cache, and the selection keeps the protected
 * front, the window and the best of the middle (kv_observe.h). */
#include "kv_observe.h"

#include "kv_select_impl.h"
#include "status.h"

void kr_kv_observe_reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t obs_window, int32_t n_layer,
                           int32_t max_slots) {
    int32_t stride = kr_kv_layer_stride(kr_kv_tune(p));
    s->needs_scores = true;
    s->ring_cap = obs_window;
    s->score_n = max_slots;
    s->score_q = obs_window;
    s->score_buf = obs_window;
    s->n_scored = (n_layer + stride - 1) / stride;
}

int32_t kr_kv_observe_protects(bool protect_prompt, int32_t obs_window, int32_t front) {
    return (protect_prompt ? front : 0) + obs_window;
}

kara_status kr_kv_select_observed(const char *who, const float *s, const float *red, float lambda, int32_t n,
                                  int32_t n_front, int32_t obs_window, int32_t kernel, kr_reduce pool, int32_t budget,
                                  int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes) {
    if (n < 0 || n_front < 0 || obs_window < 0 || budget < 1 || !keep || !n_keep || (!s && n > 0))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, obs_window %d, budget %d", who, n, n_front, obs_window,
                            budget);
    if (kernel < 1 || kernel % 2 == 0 || (pool != KR_REDUCE_MAX && pool != KR_REDUCE_MEAN))
        return kr_set_error(KARA_ERR_ARG, "%s: kernel %d must be odd and >= 1, pool max or mean", who, kernel);
    if (n <= budget) {
        *n_keep = kr_kvs_keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front + obs_window)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots cannot hold %d protected + %d observed", who,
                            budget, n_front, obs_window);
    kr_select_scratch w;
    kara_status st = kr_kvs_scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t lo = n_front, hi = n - obs_window, n_mid = hi - lo; /* n_mid > 0 since n > budget */
    kr_kvs_pool_scores(s + lo, n_mid, kernel, pool, w.pooled);
    if (red)
        for (int32_t j = 0; j < n_mid; j++)
            w.pooled[j] = lambda * w.pooled[j] - (1.0f - lambda) * kr_kvs_score_key(red[lo + j]);
    *n_keep = kr_kvs_keep_front_best_tail(w.pooled, lo, n_mid, budget - n_front - obs_window, hi, n, &w, keep);
    return KARA_OK;
}
