/* forward.c - the transformer forward pass, one function for Llama, Qwen2
 * and Qwen3, parameterised by the architecture's flags (model.h).
 *
 * A batch holds entries of one or more sequences. Per layer: RMSNorm, Q/K/V
 * projections (+bias on Qwen2), per-head RMSNorm of Q and K (Qwen3), RoPE,
 * K and V written to the entries' cache slots, attention of each entry over
 * its sequence's slots up to its own, the output projection and residual,
 * then RMSNorm and the SwiGLU feed-forward with its residual. Finally the
 * entries that asked for logits get the output norm and the vocabulary
 * projection. Matrix products go through the kernel table on all threads. */
#include <math.h>
#include <string.h>

#include "context.h"
#include "status.h"
#include "kv_tuning.h"

/* ---- matrix products ---- */

/* Up to three products of the same input rows (Q, K and V; gate and up) run
 * in one parallel region: the threads first convert their share of the
 * input rows to each activation format the weights need (once per format),
 * wait for each other once, then each computes its slice of rows of every
 * product. One region instead of one
 * per product: on two cores each fork/join costs as much as a small product,
 * and far more when the machine is shared. */
#define MAX_PRODUCTS 3

typedef struct matmul_job {
    kara_context *c;
    int n_w;
    const kr_weight *w[MAX_PRODUCTS];
    float *y[MAX_PRODUCTS];
    const float *x; /* input rows, n_cols floats each */
    int64_t n_cols;
    int32_t n;                      /* rows */
    kr_act_buf *conv[MAX_PRODUCTS]; /* activation buffers to fill (NULL: none) */
} matmul_job;

static void matmul_task(void *arg, int ith, int nth) {
    const matmul_job *j = arg;
    const kr_kernels *k = j->c->kernels;
    bool converted = false;
    for (int t = 0; t < j->n_w; t++) {
        kr_act_buf *a = j->conv[t];
        if (!a) continue;
        kr_type vt = kr_type_get(j->w[t]->type)->vec_dot_type;
        for (int32_t r = ith; r < j->n; r += nth)
            k->from_float[vt](j->x + (size_t)r * j->n_cols, (uint8_t *)a->data + (size_t)r * a->row_bytes, j->n_cols);
        converted = true;
    }
    if (converted) kr_parallel_barrier(j->c);
    for (int t = 0; t < j->n_w; t++) {
        const kr_weight *w = j->w[t];
        kr_type vt = kr_type_get(w->type)->vec_dot_type;
        const void *x = j->x;
        size_t xrb = (size_t)j->n_cols * sizeof(float);
        if (vt != KR_TYPE_F32) {
            x = j->c->act[vt].data;
            xrb = j->c->act[vt].row_bytes;
        }
        k->matmul(k, w->type, w->data, w->row_bytes, w->n_rows, w->n_cols, x, xrb, j->n, j->y[t], w->n_rows, ith, nth);
    }
}

/* y_t[n][w_t->n_rows] = x[n][n_cols] . W_t^T for each of the n_w weights
 * (all with n_cols columns). The rows of x are converted to each activation
 * format the weights need exactly once (F32 weights read x itself). */
static void matmul_multi(kara_context *c, int n_w, const kr_weight *const *ws, const float *x, int32_t n,
                         float *const *ys) {
    matmul_job job = {.c = c, .n_w = n_w, .x = x, .n_cols = ws[0]->n_cols, .n = n};
    for (int t = 0; t < n_w; t++) {
        job.w[t] = ws[t];
        job.y[t] = ys[t];
        job.conv[t] = NULL;
        kr_type vt = kr_type_get(ws[t]->type)->vec_dot_type;
        bool first = vt != KR_TYPE_F32;
        for (int u = 0; u < t && first; u++) first = kr_type_get(ws[u]->type)->vec_dot_type != vt;
        if (first) job.conv[t] = &c->act[vt];
    }
    kr_parallel_run(c, matmul_task, &job);
}

static void matmul(kara_context *c, const kr_weight *w, const float *x, int32_t n, float *y) {
    matmul_multi(c, 1, &w, x, n, &y);
}

/* ---- RoPE ---- */

/* cos/sin of each rotated pair for every entry, computed like GGML (theta
 * multiplied by base^(-2/n_dims) per pair, in float) so logits match. */
static void rope_tables(kara_context *c, int32_t n) {
    const kr_hparams *hp = &c->model->hp;
    float theta_scale = powf(hp->rope_freq_base, -2.0f / (float)hp->rope_dim);
    for (int32_t i = 0; i < n; i++) {
        float *cs = c->rope_cs + (size_t)i * hp->rope_dim;
        float theta = (float)c->entry_pos[i];
        for (int32_t j = 0; j < hp->rope_dim / 2; j++) {
            cs[2 * j] = cosf(theta);
            cs[2 * j + 1] = sinf(theta);
            theta *= theta_scale;
        }
    }
}

static void rope_apply(const kr_hparams *hp, float *v, const float *cs) {
    int32_t half = hp->rope_dim / 2;
    for (int32_t j = 0; j < half; j++) {
        float co = cs[2 * j], si = cs[2 * j + 1];
        int32_t a = hp->rope_neox ? j : 2 * j, b = hp->rope_neox ? j + half : 2 * j + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * co - x1 * si;
        v[b] = x0 * si + x1 * co;
    }
}

/* ---- attention ---- */

typedef struct attn_job {
    kara_context *c;
    int32_t layer;
    int32_t n;
} attn_job;

/* The entries [*i0, *i1) of the next attention chunk from entry `from`:
 * consecutive entries of one sequence, at most `max_entries`. */
static int32_t next_chunk(const kara_context *c, int32_t from, int32_t n, int32_t max_entries) {
    int32_t i = from + 1;
    while (i < n && i - from < max_entries && c->entry_seq[i] == c->entry_seq[from] && c->slot[i] > c->slot[i - 1]) i++;
    return i;
}

/* Ask for the rows of KV heads [h0, h1) of a block (n_rows slots,
 * slot_bytes apart) to be brought into L2. Why: during decode the weights
 * streamed since the last token have pushed the cache out of L2/L3, and a
 * sequence's blocks lie anywhere in the pool, so each block would start
 * with a wait on DRAM. Attention asks for the next block one head at a
 * time, between the current block's heads: a whole block at once (32 KiB
 * for Qwen3-0.6B) fills the miss queues and stalls the loop, and into L1
 * it evicts the block being read (docs/PERFORMANCE.md, session 5, "Decode
 * at depth, step by step"). */
static inline void prefetch_rows(const void *block_base, int32_t h0, int32_t h1, size_t head_bytes, size_t slot_bytes,
                                 int32_t n_rows) {
    const uint8_t *p = (const uint8_t *)block_base + (size_t)h0 * head_bytes;
    const size_t span = (size_t)(h1 - h0) * head_bytes;
    for (int32_t r = 0; r < n_rows; r++, p += slot_bytes)
        for (size_t off = 0; off < span; off += 64) __builtin_prefetch(p + off, 0, 2);
}

/* Head h's rows [0, n) of a block of K or V rows (base: slot 0 of the
 * block) as the b operand of the attention products: read in place for f16
 * and f32; for a q8_0/q4_0 cache (kv_quant.h, buf set) dequantised to f32
 * rows of hd floats at buf first. */
static const void *head_rows(const kr_kv_cache *kv, const void *base, int32_t h, int32_t hd, int32_t n, float *buf,
                             size_t *ldb, bool *b_f16) {
    if (buf) {
        kr_kv_rows_load(kv->dtype, base, kv->slot_bytes, n, (int64_t)h * hd, hd, buf);
        *ldb = (size_t)hd * sizeof(float);
        *b_f16 = false;
        return buf;
    }
    *ldb = kv->slot_bytes;
    *b_f16 = kv->dtype == KARA_KV_F16;
    return (const uint8_t *)base + (size_t)h * (size_t)hd * kv->elem_size;
}

/* Attention of a chunk of entries for the query heads of KV heads [h0, h1):
 * the queries (scaled by 1/sqrt(head_dim)) are scored against the
 * sequence's keys block by block (gemm_nt, each key row read once for all
 * rows of its head), each row's softmax runs over the slots up to its
 * entry's own, and the probabilities times the value rows (gemm_nn_acc)
 * give the outputs. Blocks are the outer loop and heads the inner one: a
 * block's rows of all the heads lie together (slot after slot, each slot
 * all heads), so the cache is read as one stream instead of once per head
 * with a stride of a slot; each head's products are the same calls in the
 * same order as head by head, so the bits do not change. */
static void attn_chunk(kara_context *c, int32_t layer, int32_t i0, int32_t i1, int32_t h0, int32_t h1, int ith) {
    const kr_hparams *hp = &c->model->hp;
    const kr_kernels *k = c->kernels;
    const kr_kv_cache *kv = &c->kv;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t seq = c->entry_seq[i0], nq = (i1 - i0) * group, nh = h1 - h0;
    const size_t ld = (size_t)c->att_ld, head_bytes = (size_t)hd * kv->elem_size;
    float *sc = c->att_scores + (size_t)ith * (size_t)c->att_rows * ld;
    float *qo = c->att_q + (size_t)ith * (size_t)c->att_rows * (size_t)hd;
    int32_t n_vis = 0;
    for (int32_t i = i0; i < i1; i++) n_vis = c->slot[i] + 1 > n_vis ? c->slot[i] + 1 : n_vis;

    /* row hh * nq + r: head h0 + hh, query r of the chunk */
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t h = (h0 + hh) * group + r % group;
            const float *q = c->q + ((size_t)(i0 + r / group) * hp->n_head + (size_t)h) * hd;
            float *o = qo + ((size_t)hh * nq + r) * hd;
            for (int32_t d = 0; d < hd; d++) o[d] = q[d] * scale;
        }
    }
    /* whole blocks of keys, also the slots not written yet (their scores are
     * dropped): a slot's score is then computed the same way whatever the
     * batch, so a prompt fed at once or token by token gives equal bits */
    float *kvb = c->att_kv ? c->att_kv + (size_t)ith * (size_t)bs * (size_t)hd : NULL; /* q8_0/q4_0 */
    size_t ldb;
    bool b_f16;
    if (!kvb) prefetch_rows(kr_kv_k(kv, layer, seq, 0), h0, h1, head_bytes, kv->slot_bytes, bs);
    for (int32_t s0 = 0; s0 < n_vis; s0 += bs) {
        const void *kb = kr_kv_k(kv, layer, seq, s0);
        const void *next = s0 + bs < n_vis ? kr_kv_k(kv, layer, seq, s0 + bs) : kr_kv_v(kv, layer, seq, 0);
        for (int32_t hh = 0; hh < nh; hh++) {
            if (!kvb) prefetch_rows(next, h0 + hh, h0 + hh + 1, head_bytes, kv->slot_bytes, bs);
            const void *b = head_rows(kv, kb, h0 + hh, hd, bs, kvb, &ldb, &b_f16);
            k->gemm_nt(sc + (size_t)hh * nq * ld + s0, (int64_t)ld, qo + (size_t)hh * nq * hd, hd, b, ldb, b_f16, nq,
                       bs, hd);
        }
    }
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t i = i0 + r / group, h = (h0 + hh) * group + r % group, nv = c->slot[i] + 1;
            float *row = sc + ((size_t)hh * nq + r) * ld;
            k->softmax(row, nv);
            for (int32_t s = nv; s < n_vis; s++) row[s] = 0.0f; /* slots after the entry's own */
            /* H2O accumulates the attention of each sequence's newest query */
            float *h2o = c->entry_last[i] ? kr_kv_policy_h2o_row(&c->policy, seq, h) : NULL;
            for (int32_t s = 0; h2o && s < nv; s++) h2o[s] += row[s];
        }
    }
    memset(qo, 0, (size_t)nh * nq * hd * sizeof(float));
    for (int32_t s0 = 0; s0 < n_vis; s0 += bs) {
        const int32_t ns = n_vis - s0 < bs ? n_vis - s0 : bs;
        const void *vb = kr_kv_v(kv, layer, seq, s0);
        const void *next = s0 + bs < n_vis ? kr_kv_v(kv, layer, seq, s0 + bs) : NULL;
        for (int32_t hh = 0; hh < nh; hh++) {
            if (next && !kvb) prefetch_rows(next, h0 + hh, h0 + hh + 1, head_bytes, kv->slot_bytes, bs);
            const void *b = head_rows(kv, vb, h0 + hh, hd, ns, kvb, &ldb, &b_f16);
            k->gemm_nn_acc(qo + (size_t)hh * nq * hd, hd, sc + (size_t)hh * nq * ld + s0, (int64_t)ld, b, ldb, b_f16,
                           nq, ns, hd);
        }
    }
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t h = (h0 + hh) * group + r % group;
            float *out = c->attn + ((size_t)(i0 + r / group) * hp->n_head + (size_t)h) * hd;
            memcpy(out, qo + ((size_t)hh * nq + r) * hd, (size_t)hd * sizeof(float));
        }
    }
}

/* Units of work are (chunk of entries, range of KV heads), dealt
 * round-robin so that the longer chunks at the end of a prompt are spread
 * over the threads. A range holds as many heads as the scratch rows allow
 * (all of them for a decode entry), split further only when there are fewer
 * chunks than threads. */
static void attn_task(void *arg, int ith, int nth) {
    const attn_job *j = arg;
    kara_context *c = j->c;
    const kr_hparams *hp = &c->model->hp;
    const int32_t group = hp->n_head / hp->n_head_kv, max_entries = c->att_rows / group;
    int32_t n_chunks = 0;
    for (int32_t i0 = 0; i0 < j->n; n_chunks++) i0 = next_chunk(c, i0, j->n, max_entries);
    const int32_t min_parts = n_chunks >= nth ? 1 : (nth + n_chunks - 1) / n_chunks;
    int64_t u = 0;
    for (int32_t i0 = 0; i0 < j->n;) {
        const int32_t i1 = next_chunk(c, i0, j->n, max_entries);
        const int32_t per_unit = c->att_rows / ((i1 - i0) * group); /* heads the scratch holds */
        int32_t parts = (hp->n_head_kv + per_unit - 1) / per_unit;
        if (parts < min_parts) parts = min_parts < hp->n_head_kv ? min_parts : hp->n_head_kv;
        for (int32_t p = 0; p < parts; p++, u++) {
            const int32_t h0 = (int32_t)((int64_t)hp->n_head_kv * p / parts);
            const int32_t h1 = (int32_t)((int64_t)hp->n_head_kv * (p + 1) / parts);
            if (u % nth == ith) attn_chunk(c, j->layer, i0, i1, h0, h1, ith);
        }
        i0 = i1;
    }
}

/* n f32 values into a row of type t: a K or V row of the cache or a query
 * row of the KV policy's ring (f16 through the kernel table; q8_0/q4_0 in
 * blocks of 32 by the reference quantizer, kv_quant.h). */
static void store_row(const kr_kernels *k, kara_kv_dtype t, const float *x, void *row, int64_t n) {
    if (t == KARA_KV_F16)
        k->f32_to_f16(row, x, n);
    else if (kr_kv_dtype_blocked(t))
        kr_kv_row_store(t, x, row, n);
    else
        memcpy(row, x, (size_t)n * sizeof(float));
}

/* Per-head RMSNorm (Qwen3), RoPE, and the K/V write into each entry's slot. */
static void qk_prepare_and_store(kara_context *c, int32_t il, int32_t n) {
    const kr_hparams *hp = &c->model->hp;
    const kr_layer *L = &c->model->layers[il];
    const kr_kernels *k = c->kernels;
    const int32_t hd = hp->head_dim;
    for (int32_t i = 0; i < n; i++) {
        float *q = c->q + (size_t)i * hp->n_head * hd, *kk = c->k + (size_t)i * hp->n_head_kv * hd;
        const float *cs = c->rope_cs + (size_t)i * hp->rope_dim;
        for (int32_t h = 0; h < hp->n_head; h++) {
            if (L->q_norm) k->rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
            rope_apply(hp, q + h * hd, cs);
        }
        /* the KV policy scores the window with these queries later */
        void *ring = kr_kv_policy_query_row(&c->policy, c->entry_seq[i], il, c->slot[i], c->entry_pos[i]);
        if (ring) store_row(k, c->policy.t.query_cache_dtype, q, ring, (int64_t)hp->n_head * hd);
        for (int32_t h = 0; h < hp->n_head_kv; h++) {
            if (L->k_norm) k->rmsnorm(kk + h * hd, kk + h * hd, L->k_norm, hd, hp->rms_eps);
            rope_apply(hp, kk + h * hd, cs);
        }
        const float *vv = c->v + (size_t)i * hp->n_head_kv * hd;
        int32_t kvd = hp->n_head_kv * hd;
        store_row(k, c->kv.dtype, kk, kr_kv_k(&c->kv, il, c->entry_seq[i], c->slot[i]), kvd);
        store_row(k, c->kv.dtype, vv, kr_kv_v(&c->kv, il, c->entry_seq[i], c->slot[i]), kvd);
    }
}

static void add_bias(float *y, const float *b, int32_t n, int32_t dim) {
    if (!b) return;
    for (int32_t i = 0; i < n; i++)
        for (int32_t d = 0; d < dim; d++) y[(size_t)i * dim + d] += b[d];
}

static void add_residual(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* Before the batch's slots are appended (with an abort callback set):
 * copy the cache's and the policy's state of each sequence it touches. */
static void save_seqs(kara_context *c) {
    for (int32_t s = 0; s < c->kv.n_seq_max; s++)
        if (c->seq_counts[s]) {
            c->saved_kv[s] = c->kv.seqs[s];
            c->saved_pol[s] = c->policy.seqs[s];
        }
}

/* The abort callback stopped the batch before layer il: take its slots
 * back out (their blocks return to the pool) and restore each touched
 * sequence's policy state, so the cache holds what it held before the
 * call. The appends wrote only the new slots' per-slot entries, which the
 * truncation drops; what validation did first to make room (evictions)
 * stays, as after any failing call. */
static kara_status roll_back(kara_context *c, int32_t il, int32_t n_layer) {
    for (int32_t s = 0; s < c->kv.n_seq_max; s++) {
        if (!c->seq_counts[s]) continue;
        kr_kv_truncate(&c->kv, s, c->saved_kv[s].n);
        c->kv.seqs[s].next_pos = c->saved_kv[s].next_pos;
        c->kv.seqs[s].active = c->saved_kv[s].active;
        c->policy.seqs[s] = c->saved_pol[s];
        /* the attention of the sequence's newest query, summed layer by
         * layer for H2O, lazy and read tracking: only kr_kv_policy_h2o_commit
         * adds it to the scores (and zeroes it), which a stopped pass never
         * reaches, so drop the partial sums (found by test_decode_atomic) */
        if (c->policy.h2o_probs)
            memset(c->policy.h2o_probs + (size_t)s * c->policy.n_head * c->policy.max_slots, 0,
                   (size_t)c->policy.n_head * c->policy.max_slots * sizeof(float));
    }
    c->n_logits = 0;
    return kr_set_error(KARA_ERR_ABORTED,
                        "kara_decode: stopped by the abort callback at layer %d of %d; the batch "
                        "was rolled back (nothing of it is in the cache)",
                        il, n_layer);
}

kara_status kr_forward(kara_context *c, const kara_batch *b) {
    const kara_model *m = c->model;
    const kr_hparams *hp = &m->hp;
    const kr_kernels *k = c->kernels;
    const int32_t n = b->n_tokens, e = hp->n_embd;
    const int32_t qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;

    if (c->abort) save_seqs(c);
    /* slots, embeddings, RoPE angles */
    for (int32_t i = 0; i < n; i++) {
        int32_t seq = c->entry_seq[i];
        c->slot[i] = kr_kv_append(&c->kv, seq, c->entry_pos[i]);
        kr_kv_policy_on_append(&c->policy, seq, c->slot[i], b->tokens[i], c->seq_counts[seq]);
        kr_dequantize_matrix_row(m->tok_embd.type, m->tok_embd.data, m->tok_embd.row_bytes, b->tokens[i], e,
                                 c->x + (size_t)i * e);
    }
    rope_tables(c, n);

    for (int32_t il = 0; il < hp->n_layer; il++) {
        if (c->abort && c->abort(c->abort_user)) return roll_back(c, il, hp->n_layer);
        const kr_layer *L = &m->layers[il];
        /* attention block */
        for (int32_t i = 0; i < n; i++)
            k->rmsnorm(c->xn + (size_t)i * e, c->x + (size_t)i * e, L->attn_norm, e, hp->rms_eps);
        const kr_weight *qkv[] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[] = {c->q, c->k, c->v};
        matmul_multi(c, 3, qkv, c->xn, n, qkv_out);
        add_bias(c->q, L->bq, n, qd);
        add_bias(c->k, L->bk, n, kvd);
        add_bias(c->v, L->bv, n, kvd);
        qk_prepare_and_store(c, il, n);
        attn_job aj = {c, il, n};
        kr_parallel_run(c, attn_task, &aj);
        matmul(c, &L->wo, c->attn, n, c->proj);
        add_residual(c->x, c->proj, (size_t)n * e);

        /* feed-forward block */
        for (int32_t i = 0; i < n; i++)
            k->rmsnorm(c->xn + (size_t)i * e, c->x + (size_t)i * e, L->ffn_norm, e, hp->rms_eps);
        const kr_weight *gate_up[] = {&L->w_gate, &L->w_up};
        float *gate_up_out[] = {c->gate, c->up};
        matmul_multi(c, 2, gate_up, c->xn, n, gate_up_out);
        /* row by row: the kernels take their SIMD body and their scalar
         * tail at fixed offsets of a row, so an entry's bits do not depend on
         * the entries before it (one call over n x n_ff put a different part
         * of each row in the tail when n_ff is not a multiple of the vector
         * width: stories260K's 172) */
        for (int32_t i = 0; i < n; i++) {
            float *g = c->gate + (size_t)i * hp->n_ff;
            k->silu_mul(g, g, c->up + (size_t)i * hp->n_ff, hp->n_ff);
        }
        matmul(c, &L->w_down, c->gate, n, c->proj);
        add_residual(c->x, c->proj, (size_t)n * e);
    }

    if (c->abort && c->abort(c->abort_user)) return roll_back(c, hp->n_layer, hp->n_layer);
    /* logits for the entries that asked for them */
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        bool want = b->logits ? b->logits[i] != 0 : i == n - 1;
        if (want) {
            k->rmsnorm(c->xn + (size_t)n_out * e, c->x + (size_t)i * e, m->output_norm, e, hp->rms_eps);
            c->out_rows[n_out++] = i;
        }
    }
    c->n_logits = n_out;
    for (int32_t i = 0; i < n; i++)
        if (c->entry_last[i]) kr_kv_policy_h2o_commit(&c->policy, c->entry_seq[i], c->kv.seqs[c->entry_seq[i]].n);
    if (n_out) matmul(c, &m->output, c->xn, n_out, c->logits);
    return KARA_OK;
}
