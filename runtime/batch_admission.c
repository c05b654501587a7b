/* batch_admission.c - the KV arithmetic of the batch engine: the most
 * blocks a request can hold under each method (admission control, spec
 * section 4.6), and how many sequences a budget can run at once. */
#include <math.h>

#include "batch_engine.h"
#include "cpu_features.h"
#include "model.h"

bool kara_batch_is_window_method(kara_kv_method m) {
    return m == KARA_KV_METHOD_KARA || m == KARA_KV_METHOD_CHUNKKV || m == KARA_KV_METHOD_RECENT ||
           m == KARA_KV_METHOD_RANDOM;
}

/* The most slots a request of P prompt tokens and G generated ones holds at
 * any moment under the method: everything for `full`; for window methods
 * the prompt, the history kept by every event so far (about retention x
 * interval per interval generated tokens) and the largest window; for the
 * decode-time baselines their per-sequence budget plus the slack their
 * trigger allows. */
static int64_t peak_slots(const kara_kv_params *kv, int32_t budget_tokens, int32_t P, int32_t G, int32_t n_ctx) {
    int64_t total = (int64_t)P + G;
    if (total > n_ctx) total = n_ctx;
    int64_t peak = total;
    if (kara_kv_params_periodic(kv)) {
        int64_t front = P > kv->n_sink ? P : kv->n_sink;
        int64_t window = (int64_t)kv->interval + kv->buffer + kv->max_defer + 1;
        int64_t events = G > kv->buffer ? (G - kv->buffer) / kv->interval : 0;
        int64_t keep = lround(kv->retention * kv->interval);
        if (keep < kv->min_keep) keep = kv->min_keep;
        if (keep > kv->interval) keep = kv->interval;
        peak = front + events * keep + (G < window ? G : window);
    } else if (kv->method != KARA_KV_METHOD_FULL) {
        int64_t b = (int64_t)budget_tokens + kara_kv_trigger_slack(kv);
        peak = P + 1 > b ? P + 1 : b;
    }
    return peak < total ? peak : total;
}

static int64_t blocks_of(int64_t slots, int32_t block_size) { return (slots + block_size - 1) / block_size; }

/* Blocks a request needs at its peak under the context's policy: the larger
 * of the spec's admission figure (section 4.6, kara_seq_admit) and the
 * estimate above, which also counts the history a long generation keeps. */
int64_t kara_batch_request_blocks(const kara_engine *e, int32_t P, int32_t G) {
    const kara_context *c = e->ctx;
    int64_t spec = kara_kv_policy_blocks_needed(&c->policy, &c->kv, P, G);
    if (c->policy.window_method) spec -= c->policy.p.reserve_blocks;
    int64_t est = blocks_of(peak_slots(&c->policy.p, c->policy.budget_tokens, P, G, e->n_ctx), c->kv.block_size);
    return spec > est ? spec : est;
}

/* The decode-time baselines' events keep the prompt (snapkv with
 * protect_prompt, h2o) or the sinks (streaming): once a sequence outgrows
 * the per-sequence token budget, those must fit in it. */
static bool baseline_holds(const kara_kv_params *p, int32_t budget, int32_t P, int32_t G) {
    int32_t front = P > p->n_sink ? P : p->n_sink;
    int64_t total = (int64_t)P + G;
    switch (p->method) {
    case KARA_KV_METHOD_SNAPKV:
        return total < (int64_t)budget + p->snapkv_trigger_slack ||
               budget >= (p->snapkv_protect_prompt ? front : 0) + p->snapkv_obs_window;
    case KARA_KV_METHOD_H2O: return total <= budget || budget >= front;
    case KARA_KV_METHOD_STREAMING: return total <= budget || budget >= p->streaming_n_sink;
    case KARA_KV_METHOD_KARA: /* trigger threshold keeps the prompt and the buffer */
        return kara_kv_params_periodic(p) || total < (int64_t)budget + kara_kv_trigger_slack(p) ||
               budget >= front + p->buffer;
    default: return true;
    }
}

int32_t kara_engine_fit_concurrency(const kara_model *m, const kara_context_params *cp, int32_t n_prompt,
                                    int32_t n_predict) {
    if (!m || !cp || cp->n_seq_max < 1) return 0;
    const kara_hparams *hp = &m->hp;
    const kara_kv_params *kv = &cp->kv;
    int32_t n_ctx = cp->n_ctx ? cp->n_ctx : hp->n_ctx_train;
    if (!kv->budget) return cp->n_seq_max; /* the pool is sized for every sequence */
    int32_t threads = cp->n_threads > 0 ? cp->n_threads : kara_cpu_count();
    int32_t B = kv->block_size > 0 ? kv->block_size : 1;
    uint64_t block_bytes = (uint64_t)hp->n_layer * 2 * (uint64_t)B * (uint64_t)hp->n_head_kv *
                           (uint64_t)hp->head_dim * (kv->dtype == KARA_KV_F32 ? 4 : 2);
    int32_t G = n_predict < 0 ? n_ctx - n_prompt : n_predict;
    if (G < 0) G = 0;
    int32_t max_blocks_seq = (n_ctx + B - 1) / B;
    for (int32_t n = cp->n_seq_max; n >= 1; n--) {
        uint64_t reserved = kara_kv_policy_bytes(kv, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, n, n_ctx,
                                                 threads);
        if (kv->budget < reserved + block_bytes) continue;
        int64_t pool = (int64_t)((kv->budget - reserved) / block_bytes);
        if (pool > (int64_t)n * max_blocks_seq) pool = (int64_t)n * max_blocks_seq;
        int32_t share = (int32_t)(pool * B / n);
        int32_t slack = kara_kv_trigger_slack(kv);
        int32_t budget_tokens = kv->budget_tokens > 0 ? kv->budget_tokens : (share - slack > 8 ? share - slack : 8);
        int64_t need = blocks_of(peak_slots(kv, budget_tokens, n_prompt, G, n_ctx), B);
        if ((int64_t)n * need + kv->reserve_blocks <= pool && baseline_holds(kv, budget_tokens, n_prompt, G)) return n;
    }
    return 0;
}


bool kara_batch_method_holds(const kara_engine *e, int32_t P, int32_t G) {
    return baseline_holds(&e->ctx->policy.p, e->ctx->policy.budget_tokens, P, G);
}
