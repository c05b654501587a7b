/* lazy.c - the LazyEviction baseline (docs/KARA_METHOD.md section 11):
 * every slot remembers the step it was last attended at and its longest
 * recurrence interval (folded in by kv_policy_attn.c from the newest
 * query's attention); the cache grows `window` slots past its budget, then
 * one event drops the slots least likely to recur. */
#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "status.h"
#include <math.h>
#include "kv_baselines.h"
#include "kv_select_impl.h"

void kr_kv_lazy_observe(int32_t *last, int32_t *mri, const float *attn, int32_t n, int32_t t, float alpha) {
    for (int32_t j = 0; j < n; j++)
        if (attn[j] >= alpha) {
            int32_t interval = t - last[j];
            if (interval > mri[j]) mri[j] = interval;
            last[j] = t;
        }
}

float kr_kv_lazy_score(int32_t last, int32_t mri, int32_t t) {
    double since = (double)t - (double)last, m = (double)mri;
    double s = 2.0 / (1.0 + exp(1.0 + since / (m + 1e-5)));
    if (mri > 0) s += 2.0 / (1.0 + exp(m - 1.0));
    return (float)s;
}

kara_status kr_kv_select_lazy(const int32_t *last, const int32_t *mri, int32_t t, int32_t n, int32_t n_front,
                              int32_t window, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                              size_t scratch_bytes) {
    const char *who = "lazy";
    if (n < 0 || n_front < 0 || window < 0 || budget < 1 || !keep || !n_keep || (n > 0 && (!last || !mri)))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, window %d, budget %d", who, n, n_front, window,
                            budget);
    if (n <= budget) {
        *n_keep = kr_kvs_keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front + window)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots cannot hold %d protected + a window of %d", who,
                            budget, n_front, window);
    kr_select_scratch w;
    kara_status st = kr_kvs_scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t lo = n_front, hi = n - window, n_mid = hi - lo; /* n_mid > 0 since n > budget */
    for (int32_t j = 0; j < n_mid; j++) w.pooled[j] = kr_kv_lazy_score(last[lo + j], mri[lo + j], t);
    *n_keep = kr_kvs_keep_front_best_tail(w.pooled, lo, n_mid, budget - n_front - window, hi, n, &w, keep);
    return KARA_OK;
}

static kara_status check(const kara_kv_params *p) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (t->lazy.window < 1 || !(t->lazy.alpha >= 0))
        return kr_set_error(KARA_ERR_CONFIG,
                            "baselines.lazy: window must be at least 1 (got %d), alpha at least 0 (got %g)",
                            t->lazy.window, (double)t->lazy.alpha);
    return KARA_OK;
}

/* The same newest-query attention as h2o, and per slot its last attended
 * step and longest interval. */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)p;
    (void)n_layer;
    s->needs_h2o = true;
    s->score_n = max_slots;
    s->slot_state = 2 * sizeof(int32_t);
}

static int32_t trigger_slack(const kara_kv_params *p) { return kr_kv_tune(p)->lazy.window; }

static int32_t protects(const kara_kv_params *p, int32_t front) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    return (t->lazy.protect_prompt ? front : 0) + t->lazy.window;
}

static bool keeps_prompt(const kara_kv_params *p) { return kr_kv_tune(p)->lazy.protect_prompt; }

/* Its state of each slot (the reservation's slot_state): two arrays of
 * max_slots, the step it was last attended at and its longest recurrence
 * interval (kr_kv_lazy_observe). */
static void slot_init(int32_t *state, int32_t max_slots, int32_t slot, int32_t step) {
    state[slot] = step; /* never seen attended */
    state[max_slots + slot] = 0;
}

static void observe(const kara_kv_params *p, int32_t *state, int32_t max_slots, const float *attn, int32_t n_slots,
                    int32_t step) {
    kr_kv_lazy_observe(state, state + max_slots, attn, n_slots, step, kr_kv_tune(p)->lazy.alpha);
}

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t k = 0;
    const int32_t *last = q->slot_state, *mri = q->slot_state + pol->max_slots;
    kara_status st = kr_kv_select_lazy(last, mri, q->steps, pol->kv->seqs[seq].n,
                                       t->lazy.protect_prompt ? q->n_prompt : 0, t->lazy.window, pol->budget_tokens,
                                       pol->keep, &k, pol->select_scratch, pol->select_scratch_bytes);
    return kr_kvp_cache_keep(pol, seq, st, k);
}

/* Its settings, under baselines.lazy (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.lazy.window", K_INT, KR_TUNE(lazy.window), 1, KR_KEY_MAX_SLOTS, NULL, 0,
     "W: the cache grows W slots past budget_tokens, then drops W; the newest W always stay"},
    {"baselines.lazy.alpha", K_FLOAT, KR_TUNE(lazy.alpha), 0, 1, NULL, 0,
     "mean attention at which a slot counts as attended"},
    {"baselines.lazy.protect_prompt", K_BOOL, KR_TUNE(lazy.protect_prompt), 0, 0, NULL, 0, "never evict the prompt"},
};

static void defaults(kr_kv_tuning *t) {
    /* LazyEviction (Zhang et al. 2025): W 128 (its code's default; the
     * paper's runs use 101-363 by task), alpha 1e-4 */
    t->lazy.window = 128;
    t->lazy.alpha = 1e-4f;
    t->lazy.protect_prompt = true;
}

const kr_kv_method kr_kvm_lazy = {.name = "lazy",
                                  .kind = kr_kv_kind_at_budget,
                                  .check = check,
                                  .reserve = reserve,
                                  .trigger_slack = trigger_slack,
                                  .protects = protects,
                                  .keeps_prompt = keeps_prompt,
                                  .cache_event = cache_event,
                                  .keys = keys,
                                  .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                  .defaults = defaults,
                                  .slot_init = slot_init,
                                  .observe = observe,
                                  .slack_key = "baselines.lazy.window",
                                  .tail_key = "baselines.lazy.window"};
