/*
 * cuda_backend_kv.c - the KV policy's work on the device (issue 21): the
 * query ring, Kara's window scoring and the compaction's row moves.
 *
 * The policy itself (runtime/kv) stays on the host: when windows are due,
 * which slots survive (Top-K, Token2Chunk), its per-slot state. What reads
 * or moves the cache's values runs where the values are:
 *   - each pass stores the queries the policy keeps into a device ring
 *     with the host ring's layout (kr_kv_policy_query_row's offsets);
 *   - kr_kvp_score_span calls cu_score (kr_kv_policy.dev_score): the
 *     span's key offsets go up, kr_cuda_score_layer runs per scored layer,
 *     and the n_c scores come back, the selection's input;
 *   - a compaction's moves run on the device pool (kr_kv_mirror.move_rows);
 *   - the host reads or writes rows only through pull_rows / push_rows
 *     (the retention prior's layer, sequence state save and load).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_admit.h"
#include "cuda_backend_state.h"
#include "cuda_ops.h"
#include "cuda_score.h"
#include "kv_method.h"
#include "kv_policy.h"
#include "kv_tuning.h"
#include "status.h"

kara_status kr_cu_kv_check(const kara_context *c) {
    const kr_kv_policy *pol = &c->policy;
    const char *what = kr_kv_policy_host_only(pol);
    if (!what) return KARA_OK;
    char ok[160];
    kr_kv_methods_on_device(ok, sizeof ok);
    return kr_set_error(KARA_ERR_UNSUPPORTED,
                        "runtime.device cuda does not run kv_cache.method %s with a budget that can run out yet: %s; "
                        "use %s, or runtime.device cpu",
                        kara_kv_method_name(c->params.kv.method), what, ok);
}

bool kr_cu_kv_alloc(cuda_state *s, const kara_context *c) {
    const size_t nb = (size_t)c->n_batch, slots = (size_t)c->kv.max_slots;
    const size_t keys = slots + (size_t)(kr_kv_tune(&c->policy.p)->n_sink > 0 ? kr_kv_tune(&c->policy.p)->n_sink : 0);
    s->h_q_offs = malloc(nb * sizeof(int64_t));
    s->h_key_offs = malloc(keys * sizeof(int64_t));
    s->h_move_src = malloc(slots * sizeof(int64_t));
    s->h_move_dst = malloc(slots * sizeof(int64_t));
    return s->h_q_offs && s->h_key_offs && s->h_move_src && s->h_move_dst;
}

/* Byte offset of seq's slot in the pool's layer 0 (K row). */
static int64_t k_off(const kr_kv_cache *kv, int32_t seq, int32_t slot) {
    return (int64_t)((const uint8_t *)kr_kv_k(kv, 0, seq, slot) - kv->pool);
}

/* One layer's K rows of a block, and the step to the next layer. */
static size_t run_bytes(const kr_kv_cache *kv) { return (size_t)kv->block_size * kv->slot_bytes; }

/* kr_kv_policy.dev_score: kr_kvp_score_span on the device. */
static kara_status cu_score(void *user, const kr_kv_span *sp, float *out) {
    kara_context *c = user;
    cuda_state *s = state(c);
    kr_cu_flush(s, false); /* a pass's recorded launches go first (cuda_graph.c) */
    const kr_kv_policy *pol = &c->policy;
    const kr_kv_cache *kv = &c->kv;
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    const int32_t n_c = sp->n_w - sp->n_buf, stride = kr_kv_layer_stride(t);
    const int32_t ns = t->softmax_over == KR_SOFTMAX_WINDOW_PLUS_SINKS && t->n_sink > 0 ? t->n_sink : 0;
    const int32_t q_lo = kr_cu_score_q_lo((int)sp->mode, sp->n_w, n_c, sp->n_q);
    const int64_t tiles = (sp->n_w - q_lo + 31) / 32;
    if (sp->n_w < 1 || n_c < 1 || sp->n_w > kv->max_slots || tiles > s->plan.score_tiles ||
        sp->first + sp->n_w > kv->seqs[sp->seq].n)
        return kr_set_error(KARA_ERR_INTERNAL,
                            "runtime.device cuda: a span of %d slots (%d with queries) at %d does not fit the device "
                            "scorer's buffers (%lld tiles of queries)",
                            sp->n_w, sp->n_q, sp->first, (long long)s->plan.score_tiles);
    for (int32_t r = 0; r < ns; r++) s->h_key_offs[r] = k_off(kv, sp->seq, r);
    for (int32_t i = 0; i < sp->n_w; i++) s->h_key_offs[ns + i] = k_off(kv, sp->seq, sp->first + i);
    note(s,
         (int)cudaMemcpyAsync(s->kvscore[KR_CUDA_S_KEY_OFFS], s->h_key_offs, (size_t)(ns + sp->n_w) * sizeof(int64_t),
                              cudaMemcpyHostToDevice, s->stream),
         "uploading the scored span's key offsets");
    note(s, (int)cudaMemsetAsync(s->kvscore[KR_CUDA_S_ACC], 0, (size_t)n_c * sizeof(float), s->stream),
         "clearing the window scores");
    int32_t n_layers = 0;
    for (int32_t l = sp->l_begin; l < sp->l_end; l += stride, n_layers++) {
        const size_t ring_rows = ((size_t)sp->seq * pol->n_scored_layers + (size_t)(l / stride)) * pol->ring_cap;
        kr_cuda_score_args a = {.n_w = sp->n_w,
                                .n_buf = sp->n_buf,
                                .n_q = sp->n_q,
                                .n_head = pol->n_head,
                                .n_head_kv = pol->n_head_kv,
                                .head_dim = pol->head_dim,
                                .n_sink = ns,
                                .mode = (int32_t)sp->mode,
                                .softmax_over = (int32_t)t->softmax_over,
                                .exclude_self = sp->exclude_self,
                                .gqa_max = t->gqa_reduce == KR_REDUCE_MAX,
                                .value_aware = t->value_aware,
                                .normalized = t->layer_reduce == KR_REDUCE_NORMALIZED_MEAN,
                                .q_ring = s->ring + ring_rows * pol->q_row_bytes,
                                .q_first = sp->q_first_pos,
                                .ring_cap = pol->ring_cap,
                                .q_type = (int32_t)t->query_cache_dtype,
                                .q_row_bytes = pol->q_row_bytes,
                                .pool = s->pool + (size_t)l * 2 * run_bytes(kv),
                                .key_offs = s->kvscore[KR_CUDA_S_KEY_OFFS],
                                .v_delta = (int64_t)run_bytes(kv),
                                .kv_type = (int32_t)kv->dtype,
                                .partial = s->kvscore[KR_CUDA_S_PARTIAL],
                                .zbuf = s->kvscore[KR_CUDA_S_ZBUF],
                                .layer = s->kvscore[KR_CUDA_S_LAYER],
                                .acc = s->kvscore[KR_CUDA_S_ACC]};
        note(s, kr_cuda_score_layer(s->stream, &a), "Kara's window scoring");
    }
    note(s,
         (int)cudaMemcpyAsync(out, s->kvscore[KR_CUDA_S_ACC], (size_t)n_c * sizeof(float), cudaMemcpyDeviceToHost,
                              s->stream),
         "copying the window scores back");
    kara_status st = kr_cu_finish(c);
    if (st) return st;
    const float inv = n_layers > 0 ? 1.0f / (float)n_layers : 0.0f; /* kr_kv_score_acc_finalize */
    for (int32_t j = 0; j < n_c; j++) out[j] *= inv;
    return KARA_OK;
}

/* kr_kv_mirror.move_rows: a compaction's moves, in layers [l0, l1). */
static kara_status cu_move_rows(void *user, int32_t seq, int32_t l0, int32_t l1, const kr_kv_move *mv,
                                int32_t n_moves) {
    kara_context *c = user;
    cuda_state *s = state(c);
    kr_cu_flush(s, false); /* a pass's recorded launches go first (cuda_graph.c) */
    const kr_kv_cache *kv = &c->kv;
    if (n_moves > kv->max_slots || n_moves > s->plan.move_slots)
        return kr_set_error(KARA_ERR_INTERNAL, "runtime.device cuda: %d moves, room for %lld", n_moves,
                            (long long)s->plan.move_slots);
    for (int32_t m = 0; m < n_moves; m++) {
        s->h_move_src[m] = k_off(kv, seq, mv[m].src);
        s->h_move_dst[m] = k_off(kv, seq, mv[m].dst);
    }
    const size_t bytes = (size_t)n_moves * sizeof(int64_t);
    note(s,
         (int)cudaMemcpyAsync(s->kvscore[KR_CUDA_S_MOVE_SRC], s->h_move_src, bytes, cudaMemcpyHostToDevice, s->stream),
         "uploading a compaction's moves");
    note(s,
         (int)cudaMemcpyAsync(s->kvscore[KR_CUDA_S_MOVE_DST], s->h_move_dst, bytes, cudaMemcpyHostToDevice, s->stream),
         "uploading a compaction's moves");
    const int64_t layer_bytes = 2 * (int64_t)run_bytes(kv);
    note(s,
         kr_cuda_kv_move(s->stream, s->pool + (size_t)l0 * (size_t)layer_bytes, s->kvscore[KR_CUDA_S_MOVE_SRC],
                         s->kvscore[KR_CUDA_S_MOVE_DST], n_moves, l1 - l0, layer_bytes, (int64_t)run_bytes(kv),
                         (int64_t)kv->slot_bytes),
         "a compaction's row moves");
    /* the host staging is reused by the next event: wait for the copies */
    return kr_cu_finish(c);
}

/* Rows [first, first + n) of seq in layers [l0, l1) between the pools, a
 * block's run of K rows and of V rows at a time, after the stream's work. */
static kara_status copy_rows(kara_context *c, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n,
                             bool to_host) {
    cuda_state *s = state(c);
    kr_cu_flush(s, false); /* a pass's recorded launches go first (cuda_graph.c) */
    kr_kv_cache *kv = &c->kv;
    for (int32_t l = l0; l < l1; l++)
        for (int32_t i = first, len; i < first + n; i += len) {
            len = kv->block_size - i % kv->block_size;
            if (len > first + n - i) len = first + n - i;
            for (int v = 0; v < 2; v++) {
                uint8_t *h = v ? kr_kv_v(kv, l, seq, i) : kr_kv_k(kv, l, seq, i);
                uint8_t *d = s->pool + (h - kv->pool);
                const size_t bytes = (size_t)len * kv->slot_bytes;
                note(s,
                     (int)cudaMemcpyAsync(to_host ? h : d, to_host ? d : h, bytes,
                                          to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s->stream),
                     to_host ? "copying KV rows to the host" : "copying KV rows to the device");
            }
        }
    return kr_cu_finish(c);
}

static kara_status cu_pull_rows(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    return copy_rows(user, seq, l0, l1, first, n, true);
}

static kara_status cu_push_rows(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    return copy_rows(user, seq, l0, l1, first, n, false);
}

/* kr_kv_mirror.block_copy: a block copy of the host cache (a shared block
 * about to be written) made on the device too. */
static void cu_block_copy(void *user, int32_t dst, int32_t src) {
    kara_context *c = user;
    cuda_state *s = state(c);
    kr_cu_flush(s, false); /* a pass's recorded launches go first (cuda_graph.c) */
    const size_t b = c->kv.bytes_per_block;
    note(s,
         (int)cudaMemcpyAsync(s->pool + (size_t)dst * b, s->pool + (size_t)src * b, b, cudaMemcpyDeviceToDevice,
                              s->stream),
         "a KV block copy");
}

void kr_cu_kv_attach(kara_context *c) {
    cuda_state *s = state(c);
    if (s->plan.size[KR_CUDA_R_RING]) s->ring = s->base + s->plan.off[KR_CUDA_R_RING];
    for (int i = 0; i < KR_CUDA_S_COUNT; i++)
        s->kvscore[i] = s->base + s->plan.off[KR_CUDA_R_KVSCORE] + s->plan.score_off[i];
    c->kv.mirror = (kr_kv_mirror){c, cu_block_copy, cu_move_rows, cu_pull_rows, cu_push_rows};
    if (kr_cuda_scores_on_device(&c->policy)) {
        c->policy.dev_score = cu_score;
        c->policy.dev_user = c;
    }
}

void kr_cu_kv_begin(kara_context *c, int32_t n) {
    cuda_state *s = state(c);
    if (!s->ring) return;
    kr_kv_policy *pol = &c->policy;
    for (int32_t i = 0; i < n; i++) {
        /* the ring row of the first scored layer (0); layer l's is
         * (l / stride) rings of ring_cap rows further */
        const uint8_t *row = kr_kv_policy_query_row(pol, c->entry_seq[i], 0, c->slot[i], c->entry_pos[i]);
        s->h_q_offs[i] = row ? (int64_t)(row - pol->ring) : -1;
    }
    note(s,
         (int)cudaMemcpyAsync(s->index[KR_CUDA_I_Q_OFFS], s->h_q_offs, (size_t)n * sizeof(int64_t),
                              cudaMemcpyHostToDevice, s->stream),
         "uploading the queries' ring offsets");
}

void kr_cu_kv_store_queries(kara_context *c, int32_t il, int32_t n) {
    cuda_state *s = state(c);
    const kr_kv_policy *pol = &c->policy;
    const int32_t stride = kr_kv_layer_stride(kr_kv_tune(&pol->p));
    if (!s->ring || il % stride) return;
    uint8_t *ring = s->ring + (size_t)(il / stride) * (size_t)pol->ring_cap * pol->q_row_bytes;
    cu_op *o = kr_cu_op(s, CU_OP_KV_STORE, "the query ring store");
    o->u.store.dtype = (int32_t)kr_kv_tune(&pol->p)->query_cache_dtype;
    o->u.store.pool = ring;
    o->u.store.offs = s->index[KR_CUDA_I_Q_OFFS];
    o->u.store.src = s->acts[KR_BUF_Q];
    o->u.store.n = n;
    o->u.store.row_len = (int64_t)pol->n_head * pol->head_dim;
    kr_cu_issue(s, o);
}

void kr_cu_kv_free(kara_context *c, cuda_state *s) {
    free(s->h_q_offs);
    free(s->h_key_offs);
    free(s->h_move_src);
    free(s->h_move_dst);
    if (c->kv.mirror.user == c) memset(&c->kv.mirror, 0, sizeof c->kv.mirror);
    if (c->policy.dev_user == c) {
        c->policy.dev_score = NULL;
        c->policy.dev_user = NULL;
    }
}
