/* h2o.c - the H2O baseline (docs/KARA_METHOD.md section 11): every slot
 * sums the attention the newest query gives it (the policy folds the rows
 * in, kv_policy_attn.c); once the cache passes its token budget the
 * heaviest slots and the most recent ones stay. */
#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include <math.h>
#include <string.h>
#include "kv_baselines.h"
#include "kv_select_impl.h"
#include "status.h"

kara_status kr_kv_select_h2o(const float *acc, int32_t n, int32_t n_front, int32_t budget, float heavy_frac,
                             int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes) {
    const char *who = "h2o";
    if (n < 0 || n_front < 0 || budget < 1 || !keep || !n_keep || (!acc && n > 0) ||
        !(heavy_frac >= 0.0f && heavy_frac <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, budget %d, heavy_frac %g", who, n, n_front, budget,
                            (double)heavy_frac);
    if (n <= budget) {
        *n_keep = kr_kvs_keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots is below its %d protected slots", who, budget,
                            n_front);
    kr_select_scratch w;
    kara_status st = kr_kvs_scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t rest = budget - n_front;
    const int32_t n_heavy = (int32_t)round((double)heavy_frac * rest), n_recent = rest - n_heavy;
    const int32_t lo = n_front, hi = n - n_recent, n_mid = hi - lo; /* n_mid > n_heavy since n > budget */
    *n_keep = kr_kvs_keep_front_best_tail(acc + lo, lo, n_mid, n_heavy, hi, n, &w, keep);
    return KARA_OK;
}

/* The newest query's attention rows, per sequence and head. */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)p;
    (void)n_layer;
    s->needs_h2o = true;
    s->score_n = max_slots;
}

/* With kara.score.prior_weight above 0 the heavy hitters are ranked by
 * the accumulated attention (normalised) plus the weighted prior, in a
 * copy: the accumulator itself keeps summing. */
static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t k = 0, n = pol->kv->seqs[seq].n, front = q->n_prompt;
    const float *rank = q->h2o_acc;
    kara_status st = KARA_OK;
    if (pol->use_prior && n > front) {
        memcpy(pol->layer_scores, q->h2o_acc, (size_t)n * sizeof(float));
        st = kr_kvp_prior_add(pol, seq, pol->layer_scores + front, front, n - front);
        rank = pol->layer_scores;
    }
    if (!st)
        st = kr_kv_select_h2o(rank, n, front, pol->budget_tokens, kr_kv_tune(&pol->p)->h2o.heavy_frac, pol->keep, &k,
                              pol->select_scratch, pol->select_scratch_bytes);
    return kr_kvp_cache_keep(pol, seq, st, k);
}

/* Its settings, under baselines.h2o (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.h2o.heavy_frac", K_FLOAT, KR_TUNE(h2o.heavy_frac), 0, 1, NULL, 0,
     "share of the budget kept for heavy hitters (the rest: the newest slots)"},
};

static void defaults(kr_kv_tuning *t) { t->h2o.heavy_frac = 0.5f; }

const kr_kv_method kr_kvm_h2o = {.name = "h2o",
                                 .kind = kr_kv_kind_at_budget,
                                 .reserve = reserve,
                                 .cache_event = cache_event,
                                 .uses_prior = true,
                                 .keys = keys,
                                 .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                 .defaults = defaults};
