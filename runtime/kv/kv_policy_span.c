/* kv_policy_span.c - scoring a span of a sequence's cache for the KV
 * policy (kv_policy_impl.h): per scored layer, the window scorer
 * (kv_score.c) over the query ring and the paged pool on the context's
 * threads, or the device's scorer when a device holds the pool and the
 * ring (kr_kv_policy.dev_score, kernels_cuda). */
#include "kv_policy_impl.h"

#include "kv_score.h"
#include "status.h"

typedef struct score_task {
    const kr_kv_score_job *job;
} score_task;

/* At most KR_KV_SCORE_WORKERS of the context's threads score. */
static void score_compute(void *arg, int ith, int nth) {
    const score_task *t = arg;
    int workers = nth < KR_KV_SCORE_WORKERS ? nth : KR_KV_SCORE_WORKERS;
    if (ith < workers) kr_kv_score_compute(t->job, ith, workers);
}

kara_status kr_kvp_score_span(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_w, int32_t n_buf, int32_t n_q,
                              int32_t q_first_pos, kr_score_mode mode, bool exclude_self, int32_t l_begin,
                              int32_t l_end) {
    if (pol->dev_score) {
        const kr_kv_span sp = {seq, first, n_w, n_buf, n_q, q_first_pos, mode, exclude_self, l_begin, l_end};
        return pol->dev_score(pol->dev_user, &sp, pol->scores);
    }
    kr_kv_cache *kv = pol->kv;
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t n_c = n_w - n_buf, stride = kr_kv_layer_stride(t);
    kr_kv_score_shape sh = {n_w, n_buf, pol->n_head, pol->n_head_kv, pol->head_dim, t->n_sink};
    kr_kv_score_opts opts;
    kr_kv_score_opts_from_params(&opts, &pol->p);
    opts.mode = mode;
    opts.exclude_self = exclude_self;
    kr_kv_score_acc acc;
    kara_status st = kr_kv_score_acc_init(&acc, pol->scores, n_c, t->layer_reduce);
    for (int32_t l = l_begin; !st && l < l_end; l += stride) {
        kr_kv_rows qr = {t->query_cache_dtype,
                         pol->ring +
                             ((size_t)seq * pol->n_scored_layers + (size_t)(l / stride)) * (size_t)pol->ring_cap *
                                 pol->q_row_bytes,
                         pol->q_row_bytes,
                         0,
                         q_first_pos,
                         pol->ring_cap,
                         NULL,
                         0,
                         0};
        const uint8_t *k_base = kv->pool + (size_t)l * 2 * (size_t)kv->block_size * kv->slot_bytes;
        kr_kv_rows kr = {kv->dtype,           k_base,         kv->slot_bytes,     0, first, 0,
                         kv->seqs[seq].table, kv->block_size, kv->bytes_per_block};
        kr_kv_rows sink = kr;
        sink.first = 0;
        kr_kv_score_job job;
        st = kr_kv_score_prepare_q(&job, &sh, n_q, &opts, &qr, &kr, &sink, pol->score_scratch, pol->score_scratch_bytes,
                                   pol->exec.n_threads < KR_KV_SCORE_WORKERS ? pol->exec.n_threads
                                                                             : KR_KV_SCORE_WORKERS);
        if (st) break;
        if (opts.value_aware) { /* V rows follow the K rows of the layer in each block */
            job.v = kr;
            job.v.base = k_base + (size_t)kv->block_size * kv->slot_bytes;
        }
        score_task t = {&job};
        pol->exec.run(pol->exec.user, score_compute, &t);
        kr_kv_score_finish(&job, pol->layer_scores, &acc);
    }
    if (!st) kr_kv_score_acc_finalize(&acc, pol->scores);
    return st;
}
