/* rkv.c - the R-KV baseline (Cai et al. 2025; docs/KARA_METHOD.md section
 * 11): once the cache passes its token budget plus trigger_slack, the
 * observation queries' attention and the keys' redundancy over the same
 * span (kv_redund.h) decide what stays. */
#include <string.h>

#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_redund.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "status.h"
#include "kv_baselines.h"
#include "kv_observe.h"

kara_status kr_kv_select_rkv(const float *imp, const float *red, int32_t n, int32_t n_front, int32_t obs_window,
                             int32_t kernel, float lambda, int32_t budget, int32_t *keep, int32_t *n_keep,
                             void *scratch, size_t scratch_bytes) {
    if (n > 0 && !red) return kr_set_error(KARA_ERR_ARG, "rkv: no redundancy scores for %d slots", n);
    if (!(lambda >= 0.0f && lambda <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "rkv: lambda %g must be in [0, 1]", (double)lambda);
    return kr_kv_select_observed("rkv", imp, red, lambda, n, n_front, obs_window, kernel, KR_REDUCE_MAX, budget, keep,
                                 n_keep, scratch, scratch_bytes);
}

static kara_status check(const kara_kv_params *p) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (t->rkv.kernel < 1 || t->rkv.kernel % 2 == 0 || t->rkv.obs_window < 1 || t->rkv.trigger_slack < 0 ||
        !(t->rkv.lambda >= 0 && t->rkv.lambda <= 1) || !(t->rkv.sim_threshold >= -1 && t->rkv.sim_threshold <= 1))
        return kr_set_error(KARA_ERR_CONFIG,
                            "baselines.rkv: kernel must be odd (got %d), obs_window at least 1 (got %d), "
                            "trigger_slack at least 0 (got %d), lambda in [0, 1] (got %g), sim_threshold in [-1, 1] "
                            "(got %g)",
                            t->rkv.kernel, t->rkv.obs_window, t->rkv.trigger_slack, (double)t->rkv.lambda,
                            (double)t->rkv.sim_threshold);
    return KARA_OK;
}

/* snapkv's observation scoring (kv_observe.h), plus the keys' redundancy
 * over the whole cache (kv_redund.h). */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    kr_kv_observe_reserve(s, p, kr_kv_tune(p)->rkv.obs_window, n_layer, max_slots);
    s->needs_redund = true;
}

static int32_t trigger_slack(const kara_kv_params *p) { return kr_kv_tune(p)->rkv.trigger_slack; }

/* the prompt (protect_prompt) and the observation window */
static int32_t protects(const kara_kv_params *p, int32_t front) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    return kr_kv_observe_protects(t->rkv.protect_prompt, t->rkv.obs_window, front);
}

static bool keeps_prompt(const kara_kv_params *p) { return kr_kv_tune(p)->rkv.protect_prompt; }

typedef struct redund_task {
    const kr_kv_redund_job *job;
} redund_task;

/* At most KR_KV_SCORE_WORKERS of the context's threads work, as for the
 * window scorer: the scratch is reserved for that many. */
static void redund_compute(void *arg, int ith, int nth) {
    const redund_task *t = arg;
    int workers = nth < KR_KV_SCORE_WORKERS ? nth : KR_KV_SCORE_WORKERS;
    if (ith < workers) kr_kv_redund_compute(t->job, ith, workers);
}

/* red[0, m) = the mean over the scored layers of the redundancy of the
 * keys of slots [first, first + m). */
static kara_status redundancy(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t m, float *red) {
    kr_kv_cache *kv = pol->kv;
    const int32_t stride = kr_kv_layer_stride(kr_kv_tune(&pol->p));
    const int32_t workers = pol->exec.n_threads < KR_KV_SCORE_WORKERS ? pol->exec.n_threads : KR_KV_SCORE_WORKERS;
    memset(red, 0, (size_t)m * sizeof(float));
    int32_t layers = 0;
    for (int32_t l = 0; l < pol->n_layer; l += stride) {
        const uint8_t *k_base = kv->pool + (size_t)l * 2 * (size_t)kv->block_size * kv->slot_bytes;
        kr_kv_rows keys = {kv->dtype,           k_base,         kv->slot_bytes,     0, first, 0,
                           kv->seqs[seq].table, kv->block_size, kv->bytes_per_block};
        kr_kv_redund_job job;
        kara_status st =
            kr_kv_redund_prepare(&job, &keys, m, pol->n_head_kv, pol->head_dim, kr_kv_tune(&pol->p)->rkv.sim_threshold,
                                 pol->redund_scratch, pol->redund_scratch_bytes, workers > 0 ? workers : 1);
        if (st) return st;
        redund_task t = {&job};
        pol->exec.run(pol->exec.user, redund_compute, &t);
        kr_kv_redund_finish(&job, red);
        layers++;
    }
    for (int32_t j = 0; j < m; j++) red[j] /= (float)layers;
    return KARA_OK;
}

/* Score seq's cache after its protected prompt and select the slots to
 * keep into pol->keep (*k of them; *k = n when nothing needs to go).
 * KARA_ERR_KV_BUDGET when the token budget cannot hold the protected
 * prompt and the observation window. */
static kara_status rkv_select(kr_kv_policy *pol, int32_t seq, int32_t *k) {
    kr_kv_cache *kv = pol->kv;
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    const int32_t n = kv->seqs[seq].n, budget = pol->budget_tokens, obs = t->rkv.obs_window;
    const int32_t front = t->rkv.protect_prompt ? q->n_prompt : 0, m = n - front;
    *k = n;
    if (n <= budget || m <= obs) return KARA_OK;
    if (budget < front + obs) /* checked before the scoring: kr_kv_select_rkv would say the same */
        return kr_set_error(KARA_ERR_KV_BUDGET, "rkv: budget of %d slots cannot hold %d protected + %d observed",
                            budget, front, obs);
    const int32_t *pos = kv->seqs[seq].pos;
    /* importance: snapkv's scorer, the newest obs slots asking, summed over
     * them; divided by obs, each query's attention is a distribution */
    kara_status st = kr_kvp_score_span(pol, seq, front, m, obs, obs, pos[n - 1] + 1 - m, KR_SCORE_BUFFER_ONLY, false, 0,
                                       pol->n_layer);
    if (st) return st;
    for (int32_t j = 0; j < m - obs; j++) pol->layer_scores[front + j] = pol->scores[j] / (float)obs;
    /* redundancy over the whole span, the observation window included (its
     * keys are neighbours too); the window itself is kept regardless */
    if ((st = redundancy(pol, seq, front, m, pol->gather + front))) return st;
    return kr_kv_select_rkv(pol->layer_scores, pol->gather, n, front, obs, t->rkv.kernel, t->rkv.lambda, budget,
                            pol->keep, k, pol->select_scratch, pol->select_scratch_bytes);
}

static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    int32_t k = 0;
    kara_status st = rkv_select(pol, seq, &k);
    return kr_kvp_cache_keep(pol, seq, st, k);
}

/* Its settings, under baselines.rkv (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.rkv.trigger_slack", K_INT, KR_TUNE(rkv.trigger_slack), 0, KR_KEY_MAX_SLOTS, NULL, 0,
     "slots the cache grows past budget_tokens before an event"},
    {"baselines.rkv.obs_window", K_INT, KR_TUNE(rkv.obs_window), 1, 65536, NULL, 0,
     "newest queries whose attention scores the cache; always kept"},
    {"baselines.rkv.kernel", K_INT, KR_TUNE(rkv.kernel), 1, 255, NULL, 0, "max-pooling width of the attention (odd)"},
    {"baselines.rkv.lambda", K_FLOAT, KR_TUNE(rkv.lambda), 0, 1, NULL, 0,
     "weight of attention against key redundancy in a slot's score"},
    {"baselines.rkv.sim_threshold", K_FLOAT, KR_TUNE(rkv.sim_threshold), -1, 1, NULL, 0,
     "cosine similarity above which two keys are near-duplicates"},
    {"baselines.rkv.protect_prompt", K_BOOL, KR_TUNE(rkv.protect_prompt), 0, 0, NULL, 0, "never evict the prompt"},
};

static void defaults(kr_kv_tuning *t) {
    /* R-KV (Cai et al. 2025): buffer 128, 8 observation queries, lambda 0.1
     * (the paper; its code defaults to 0.07), similarity threshold 0.5 */
    t->rkv.trigger_slack = 128;
    t->rkv.obs_window = 8;
    t->rkv.kernel = 7;
    t->rkv.lambda = 0.1f;
    t->rkv.sim_threshold = 0.5f;
    t->rkv.protect_prompt = true;
}

const kr_kv_method kr_kvm_rkv = {.name = "rkv",
                                 .kind = kr_kv_kind_at_budget,
                                 .check = check,
                                 .reserve = reserve,
                                 .trigger_slack = trigger_slack,
                                 .protects = protects,
                                 .keeps_prompt = keeps_prompt,
                                 .cache_event = cache_event,
                                 .host_only = "its key-redundancy scorer reads the pool on the host",
                                 .keys = keys,
                                 .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                 .defaults = defaults,
                                 .slack_key = "baselines.rkv.trigger_slack",
                                 .tail_key = "baselines.rkv.obs_window"};
