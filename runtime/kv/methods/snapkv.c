/* snapkv.c - the SnapKV baseline (docs/KARA_METHOD.md section 11): once
 * the cache passes its token budget plus trigger_slack, the newest
 * obs_window queries score every older slot after the protected prompt;
 * pooled scores pick what stays, the observation window always does. */
#include <string.h>

#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "kv_baselines.h"
#include "kv_observe.h"

kara_status kr_kv_select_snapkv(const float *s, int32_t n, int32_t n_front, int32_t obs_window, int32_t kernel,
                                kr_reduce pool, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                                size_t scratch_bytes) {
    return kr_kv_select_observed("snapkv", s, NULL, 0.0f, n, n_front, obs_window, kernel, pool, budget, keep, n_keep,
                                 scratch, scratch_bytes);
}

/* Keys over the whole cache, the observation window's queries (kv_observe.h). */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    kr_kv_observe_reserve(s, p, kr_kv_tune(p)->snapkv.obs_window, n_layer, max_slots);
}

static int32_t trigger_slack(const kara_kv_params *p) { return kr_kv_tune(p)->snapkv.trigger_slack; }

static int32_t protects(const kara_kv_params *p, int32_t front) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    return kr_kv_observe_protects(t->snapkv.protect_prompt, t->snapkv.obs_window, front);
}

static bool keeps_prompt(const kara_kv_params *p) { return kr_kv_tune(p)->snapkv.protect_prompt; }

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t n = pol->kv->seqs[seq].n, k = 0;
    int32_t front = t->snapkv.protect_prompt ? q->n_prompt : 0, obs = t->snapkv.obs_window;
    int32_t n_w = n - front;
    if (n_w <= obs) return KARA_OK;
    const int32_t *pos = pol->kv->seqs[seq].pos;
    /* the observation window's queries: the newest obs positions */
    kara_status st = kr_kvp_score_span(pol, seq, front, n_w, obs, obs, pos[n - 1] + 1 - n_w, KR_SCORE_BUFFER_ONLY,
                                       false, 0, pol->n_layer);
    if (!st) {
        memmove(pol->layer_scores + front, pol->scores, (size_t)(n_w - obs) * sizeof(float));
        /* with kara.score.prior_weight above 0: normalised attention plus the weighted prior (issue 47) */
        st = kr_kvp_prior_add(pol, seq, pol->layer_scores + front, front, n_w - obs);
    }
    if (!st) {
        st = kr_kv_select_snapkv(pol->layer_scores, n, front, obs, t->snapkv.kernel, t->snapkv.pool, pol->budget_tokens,
                                 pol->keep, &k, pol->select_scratch, pol->select_scratch_bytes);
    }
    return kr_kvp_cache_keep(pol, seq, st, k);
}

/* Its settings, under baselines.snapkv (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.snapkv.trigger_slack", K_INT, KR_TUNE(snapkv.trigger_slack), 0, KR_KEY_MAX_SLOTS, NULL, 0,
     "slots the cache grows past budget_tokens before an event"},
    {"baselines.snapkv.obs_window", K_INT, KR_TUNE(snapkv.obs_window), 1, 65536, NULL, 0,
     "newest queries whose attention scores the cache; always kept"},
    {"baselines.snapkv.pool", K_ENUM, KR_TUNE(snapkv.pool), 0, 0, kr_pool_reduce_names, 0,
     "pooling of scores over the kernel"},
    {"baselines.snapkv.kernel", K_INT, KR_TUNE(snapkv.kernel), 1, 255, NULL, 0, "pooling width"},
    {"baselines.snapkv.protect_prompt", K_BOOL, KR_TUNE(snapkv.protect_prompt), 0, 0, NULL, 0,
     "never evict the prompt"},
};

static void defaults(kr_kv_tuning *t) {
    t->snapkv.trigger_slack = 128;
    t->snapkv.obs_window = 8;
    t->snapkv.pool = KR_REDUCE_MAX;
    t->snapkv.kernel = 7;
    t->snapkv.protect_prompt = true;
}

const kr_kv_method kr_kvm_snapkv = {.name = "snapkv",
                                    .kind = kr_kv_kind_at_budget,
                                    .reserve = reserve,
                                    .trigger_slack = trigger_slack,
                                    .protects = protects,
                                    .keeps_prompt = keeps_prompt,
                                    .cache_event = cache_event,
                                    .keys = keys,
                                    .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                    .defaults = defaults,
                                    .uses_prior = true,
                                    .slack_key = "baselines.snapkv.trigger_slack",
                                    .tail_key = "baselines.snapkv.obs_window"};
