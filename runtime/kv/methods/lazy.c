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
    if (t->lazy_window < 1 || !(t->lazy_alpha >= 0))
        return kr_set_error(KARA_ERR_CONFIG,
                            "baselines.lazy: window must be at least 1 (got %d), alpha at least 0 (got %g)",
                            t->lazy_window, (double)t->lazy_alpha);
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

static int32_t trigger_slack(const kara_kv_params *p) { return kr_kv_tune(p)->lazy_window; }

static int32_t protects(const kara_kv_params *p, int32_t front) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    return (t->lazy_protect_prompt ? front : 0) + t->lazy_window;
}

static bool keeps_prompt(const kara_kv_params *p) { return kr_kv_tune(p)->lazy_protect_prompt; }

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t k = 0;
    kara_status st = kr_kv_select_lazy(q->lazy_last, q->lazy_mri, q->lazy_step, pol->kv->seqs[seq].n,
                                       t->lazy_protect_prompt ? q->n_prompt : 0, t->lazy_window, pol->budget_tokens,
                                       pol->keep, &k, pol->select_scratch, pol->select_scratch_bytes);
    return kr_kvp_cache_keep(pol, seq, st, k);
}

const kr_kv_method kr_kvm_lazy = {.name = "lazy",
                                  .kind = kr_kv_kind_at_budget,
                                  .check = check,
                                  .reserve = reserve,
                                  .trigger_slack = trigger_slack,
                                  .protects = protects,
                                  .keeps_prompt = keeps_prompt,
                                  .cache_event = cache_event};
