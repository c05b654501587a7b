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

/* ---- matrix products ---- */

typedef struct matmul_job {
    const kara_kernels *k;
    const kara_weight *w;
    const void *x;
    size_t x_row_bytes;
    int64_t n_batch;
    float *y;
} matmul_job;

static void matmul_task(void *arg, int ith, int nth) {
    const matmul_job *j = arg;
    j->k->matmul(j->k, j->w->type, j->w->data, j->w->row_bytes, j->w->n_rows, j->w->n_cols, j->x, j->x_row_bytes,
                 j->n_batch, j->y, j->w->n_rows, ith, nth);
}

/* y[n][w->n_rows] = x[n][w->n_cols] . W^T. The rows of x are converted to
 * the weight's activation format once and reused by later products on the
 * same rows (Q, K and V; gate and up) until `fresh` marks new input. */
static void matmul(kara_context *c, const kara_weight *w, const float *x, int32_t n, float *y, bool fresh) {
    kara_type vt = kara_type_get(w->type)->vec_dot_type;
    matmul_job job = {c->kernels, w, x, (size_t)w->n_cols * sizeof(float), n, y};
    if (vt != KARA_TYPE_F32) {
        kara_act_buf *a = &c->act[vt];
        if (fresh || a->src != x || a->n_cols != w->n_cols || a->n_rows != n) {
            for (int32_t r = 0; r < n; r++)
                c->kernels->from_float[vt](x + (size_t)r * w->n_cols, (uint8_t *)a->data + (size_t)r * a->row_bytes,
                                           w->n_cols);
            a->src = x;
            a->n_cols = w->n_cols;
            a->n_rows = n;
        }
        job.x = a->data;
        job.x_row_bytes = a->row_bytes;
    }
    kara_parallel_run(c, matmul_task, &job);
}

/* Mark every converted activation stale (its source rows were rewritten). */
static void acts_stale(kara_context *c) {
    for (int t = 0; t < KARA_TYPE_COUNT; t++) c->act[t].src = NULL;
}

/* ---- RoPE ---- */

/* cos/sin of each rotated pair for every entry, computed like GGML (theta
 * multiplied by base^(-2/n_dims) per pair, in float) so logits match. */
static void rope_tables(kara_context *c, int32_t n) {
    const kara_hparams *hp = &c->model->hp;
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

static void rope_apply(const kara_hparams *hp, float *v, const float *cs) {
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

/* One unit of work is one (entry, query head): scores over the sequence's
 * slots up to the entry's own, softmax, weighted sum of V. */
static void attn_task(void *arg, int ith, int nth) {
    const attn_job *j = arg;
    kara_context *c = j->c;
    const kara_hparams *hp = &c->model->hp;
    const kara_kernels *k = c->kernels;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const bool f16 = c->kv.dtype == KARA_KV_F16;
    float *scores = c->att_scores + (size_t)ith * (size_t)c->n_ctx;
    int64_t units = (int64_t)j->n * hp->n_head;
    int64_t per = (units + nth - 1) / nth, u0 = per * ith, u1 = u0 + per < units ? u0 + per : units;
    for (int64_t u = u0; u < u1; u++) {
        int32_t i = (int32_t)(u / hp->n_head), h = (int32_t)(u % hp->n_head), kvh = h / group;
        int32_t seq = c->entry_seq[i], n_vis = c->slot[i] + 1;
        const float *q = c->q + ((size_t)i * hp->n_head + h) * hd;
        for (int32_t s = 0; s < n_vis; s++) {
            const void *kp = (const uint8_t *)kara_kv_k(&c->kv, j->layer, seq, s) + (size_t)kvh * hd * c->kv.elem_size;
            scores[s] = scale * (f16 ? k->dot_f16_f32(kp, q, hd) : k->dot_f32(kp, q, hd));
        }
        k->softmax(scores, n_vis);
        /* H2O accumulates the attention of each sequence's newest query */
        float *h2o = c->entry_last[i] ? kara_kv_policy_h2o_row(&c->policy, seq, h) : NULL;
        for (int32_t s = 0; h2o && s < n_vis; s++) h2o[s] += scores[s];
        float *out = c->attn + ((size_t)i * hp->n_head + h) * hd;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (int32_t s = 0; s < n_vis; s++) {
            const void *vp = (const uint8_t *)kara_kv_v(&c->kv, j->layer, seq, s) + (size_t)kvh * hd * c->kv.elem_size;
            if (f16)
                k->axpy_f16(out, scores[s], vp, hd);
            else
                k->axpy_f32(out, scores[s], vp, hd);
        }
    }
}

/* Per-head RMSNorm (Qwen3), RoPE, and the K/V write into each entry's slot. */
static void qk_prepare_and_store(kara_context *c, int32_t il, int32_t n) {
    const kara_hparams *hp = &c->model->hp;
    const kara_layer *L = &c->model->layers[il];
    const kara_kernels *k = c->kernels;
    const int32_t hd = hp->head_dim;
    for (int32_t i = 0; i < n; i++) {
        float *q = c->q + (size_t)i * hp->n_head * hd, *kk = c->k + (size_t)i * hp->n_head_kv * hd;
        const float *cs = c->rope_cs + (size_t)i * hp->rope_dim;
        for (int32_t h = 0; h < hp->n_head; h++) {
            if (L->q_norm) k->rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
            rope_apply(hp, q + h * hd, cs);
        }
        /* the KV policy scores the window with these queries later */
        void *ring = kara_kv_policy_query_row(&c->policy, c->entry_seq[i], il, c->slot[i], c->entry_pos[i]);
        if (ring && c->policy.p.query_cache_dtype == KARA_KV_F16)
            k->f32_to_f16(ring, q, (int64_t)hp->n_head * hd);
        else if (ring)
            memcpy(ring, q, (size_t)hp->n_head * hd * sizeof(float));
        for (int32_t h = 0; h < hp->n_head_kv; h++) {
            if (L->k_norm) k->rmsnorm(kk + h * hd, kk + h * hd, L->k_norm, hd, hp->rms_eps);
            rope_apply(hp, kk + h * hd, cs);
        }
        const float *vv = c->v + (size_t)i * hp->n_head_kv * hd;
        int32_t kvd = hp->n_head_kv * hd;
        void *kd = kara_kv_k(&c->kv, il, c->entry_seq[i], c->slot[i]);
        void *vd = kara_kv_v(&c->kv, il, c->entry_seq[i], c->slot[i]);
        if (c->kv.dtype == KARA_KV_F16) {
            k->f32_to_f16(kd, kk, kvd);
            k->f32_to_f16(vd, vv, kvd);
        } else {
            memcpy(kd, kk, (size_t)kvd * sizeof(float));
            memcpy(vd, vv, (size_t)kvd * sizeof(float));
        }
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

kara_status kara_forward(kara_context *c, const kara_batch *b) {
    const kara_model *m = c->model;
    const kara_hparams *hp = &m->hp;
    const kara_kernels *k = c->kernels;
    const int32_t n = b->n_tokens, e = hp->n_embd;
    const int32_t qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;

    /* slots, embeddings, RoPE angles */
    for (int32_t i = 0; i < n; i++) {
        int32_t seq = c->entry_seq[i];
        c->slot[i] = kara_kv_append(&c->kv, seq, c->entry_pos[i]);
        kara_kv_policy_on_append(&c->policy, &c->kv, seq, c->slot[i], b->tokens[i], c->seq_counts[seq]);
        kara_dequantize_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)b->tokens[i] * m->tok_embd.row_bytes,
                            c->x + (size_t)i * e, e);
    }
    rope_tables(c, n);

    for (int32_t il = 0; il < hp->n_layer; il++) {
        const kara_layer *L = &m->layers[il];
        /* attention block */
        for (int32_t i = 0; i < n; i++)
            k->rmsnorm(c->xn + (size_t)i * e, c->x + (size_t)i * e, L->attn_norm, e, hp->rms_eps);
        acts_stale(c);
        matmul(c, &L->wq, c->xn, n, c->q, true);
        matmul(c, &L->wk, c->xn, n, c->k, false);
        matmul(c, &L->wv, c->xn, n, c->v, false);
        add_bias(c->q, L->bq, n, qd);
        add_bias(c->k, L->bk, n, kvd);
        add_bias(c->v, L->bv, n, kvd);
        qk_prepare_and_store(c, il, n);
        attn_job aj = {c, il, n};
        kara_parallel_run(c, attn_task, &aj);
        matmul(c, &L->wo, c->attn, n, c->proj, true);
        add_residual(c->x, c->proj, (size_t)n * e);

        /* feed-forward block */
        for (int32_t i = 0; i < n; i++)
            k->rmsnorm(c->xn + (size_t)i * e, c->x + (size_t)i * e, L->ffn_norm, e, hp->rms_eps);
        matmul(c, &L->w_gate, c->xn, n, c->gate, true);
        matmul(c, &L->w_up, c->xn, n, c->up, false);
        k->silu_mul(c->gate, c->gate, c->up, (int64_t)n * hp->n_ff);
        matmul(c, &L->w_down, c->gate, n, c->proj, true);
        add_residual(c->x, c->proj, (size_t)n * e);
    }

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
        if (c->entry_last[i]) kara_kv_policy_h2o_commit(&c->policy, c->entry_seq[i], c->kv.seqs[c->entry_seq[i]].n);
    if (n_out) matmul(c, &m->output, c->xn, n_out, c->logits, true);
    acts_stale(c);
    return KARA_OK;
}
