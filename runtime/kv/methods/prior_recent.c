/* prior_recent.c - the prior_recent baseline (docs/KARA_METHOD.md section
 * 11; issue 47's attribution row): Kara's windows, not scored by attention,
 * keeping in each window the slots the model's retention prior ranks
 * highest (kara.score.prior_weight), beside the newest `buffer` slots every
 * window method keeps. It reserves no query rings. If it matches Kara with
 * the prior, the prior is the contribution, not Kara's scoring. */
#include "kv_method.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "status.h"

static kara_status check(const kara_kv_params *p) {
    if (!(kr_kv_tune(p)->prior_weight != 0.0f))
        return kr_set_error(KARA_ERR_CONFIG,
                            "method prior_recent ranks slots by the retention prior alone; kara.score.prior_weight 0 "
                            "turns it off (use auto or a weight above 0, or method recent)");
    return KARA_OK;
}

/* Top-K by the window's scores (the prior alone, kv_policy.c), protected
 * slots first: the pooled Top-K of ablation A4 with a kernel of 1. */
static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    (void)p;
    return kr_kv_select_pooled_topk(in->scores, in->n_c, k, 1, in->protect, keep, scratch, scratch_bytes);
}

const kr_kv_method kr_kvm_prior_recent = {.name = "prior_recent",
                                          .kind = kr_kv_kind_windows,
                                          .check = check,
                                          .reserve = kr_kv_reserve_unscored_window,
                                          .keeps_prompt = kr_kv_keeps_prompt_always,
                                          .select_window = select_window,
                                          .uses_prior = true,
                                          .prior_by_default = true,
                                          .needs_prior = true};
