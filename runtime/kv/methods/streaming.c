/* streaming.c - the StreamingLLM baseline (docs/KARA_METHOD.md section 11):
 * once the cache passes its token budget, keep the attention sinks and the
 * newest slots. */
#include <math.h>
#include <string.h>

#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "kv_baselines.h"
#include "kv_select_impl.h"
#include "status.h"

kara_status kr_kv_select_streaming(int32_t n, int32_t n_sink, int32_t budget, int32_t *keep, int32_t *n_keep) {
    if (n < 0 || n_sink < 0 || budget < 1 || !keep || !n_keep)
        return kr_set_error(KARA_ERR_ARG, "streaming: n %d, n_sink %d, budget %d", n, n_sink, budget);
    if (n <= budget) {
        *n_keep = kr_kvs_keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_sink)
        return kr_set_error(KARA_ERR_KV_BUDGET, "streaming: budget of %d slots is below its %d sink slots", budget,
                            n_sink);
    int32_t c = 0;
    for (int32_t j = 0; j < n_sink; j++) keep[c++] = j;
    for (int32_t j = n - (budget - n_sink); j < n; j++) keep[c++] = j;
    *n_keep = c;
    return KARA_OK;
}

/* Its selection reads no scores: only the selection scratch. */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)p;
    (void)n_layer;
    s->score_n = max_slots;
}

static int32_t protects(const kara_kv_params *p, int32_t front) {
    (void)front;
    return kr_kv_tune(p)->streaming.n_sink;
}

/* With kara.score.prior_weight above 0 (issue 47's attribution): the sinks,
 * the prior_frac share of the rest ranked by the retention prior among the
 * older slots, and the newest for what is left: the prior with a recent
 * window, the streaming counterpart of prior_recent. */
static kara_status prior_event(kr_kv_policy *pol, int32_t seq, int32_t *k) {
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t n = pol->kv->seqs[seq].n, n_sink = t->streaming.n_sink, budget = pol->budget_tokens;
    if (n <= budget || budget < n_sink) return kr_kv_select_streaming(n, n_sink, budget, pol->keep, k);
    const int32_t rest = budget - n_sink, n_prior = (int32_t)lround((double)t->streaming.prior_frac * rest);
    const int32_t hi = n - (rest - n_prior), n_mid = hi - n_sink; /* n_mid > n_prior since n > budget */
    memset(pol->layer_scores, 0, (size_t)n_mid * sizeof(float));
    kara_status st = kr_kvp_prior_add(pol, seq, pol->layer_scores, n_sink, n_mid);
    kr_select_scratch w;
    if (!st) st = kr_kvs_scratch_split("streaming", n, pol->select_scratch, pol->select_scratch_bytes, &w);
    if (!st) *k = kr_kvs_keep_front_best_tail(pol->layer_scores, n_sink, n_mid, n_prior, hi, n, &w, pol->keep);
    return st;
}

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    int32_t k = 0;
    kara_status st = pol->use_prior
        ? prior_event(pol, seq, &k)
        : kr_kv_select_streaming(pol->kv->seqs[seq].n, kr_kv_tune(&pol->p)->streaming.n_sink, pol->budget_tokens,
                                 pol->keep, &k);
    return kr_kvp_cache_keep(pol, seq, st, k);
}

/* Its settings, under baselines.streaming (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.streaming.n_sink", K_INT, KR_TUNE(streaming.n_sink), 0, 65536, NULL, 0, "sink slots always kept"},
    {"baselines.streaming.prior_frac", K_FLOAT, KR_TUNE(streaming.prior_frac), 0, 1, NULL, 0,
     "with kara.score.prior_weight above 0: share of the budget past the sinks ranked by the retention prior"},
};

static void defaults(kr_kv_tuning *t) {
    t->streaming.n_sink = 4;
    t->streaming.prior_frac = 0.5f;
}

const kr_kv_method kr_kvm_streaming = {.name = "streaming",
                                       .kind = kr_kv_kind_at_budget,
                                       .reserve = reserve,
                                       .protects = protects,
                                       .cache_event = cache_event,
                                       .uses_prior = true,
                                       .keys = keys,
                                       .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                       .defaults = defaults};
