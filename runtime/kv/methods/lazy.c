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

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t k = 0;
    kara_status st = kr_kv_select_lazy(q->lazy_last, q->lazy_mri, q->lazy_step, pol->kv->seqs[seq].n,
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
                                  .slack_key = "baselines.lazy.window",
                                  .tail_key = "baselines.lazy.window"};
