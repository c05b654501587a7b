/* backend_cpu.c - the CPU backend (backend.h): the activation buffers are
 * the context's host arrays, matrix products and attention run the kernel
 * table on the context's threads, the rest runs on the calling thread.
 * Every operation does what forward.c did inline before the seam, in the
 * same order per value, so the bits are unchanged. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "backend_cpu.h"
#include "context.h"

static float *buf(kara_context *c, kr_buf b) {
    switch (b) {
    case KR_BUF_X: return c->x;
    case KR_BUF_XN: return c->xn;
    case KR_BUF_Q: return c->q;
    case KR_BUF_K: return c->k;
    case KR_BUF_V: return c->v;
    case KR_BUF_ATTN: return c->attn;
    case KR_BUF_GATE: return c->gate;
    case KR_BUF_UP: return c->up;
    case KR_BUF_PROJ: return c->proj;
    default: return NULL;
    }
}

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

static void cpu_matmul(kara_context *c, int n_w, const kr_weight *const *w, kr_buf x, int32_t n, const kr_buf *y) {
    float *ys[MAX_PRODUCTS];
    for (int t = 0; t < n_w; t++) ys[t] = buf(c, y[t]);
    matmul_multi(c, n_w, w, buf(c, x), n, ys);
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

/* Why the angles are computed in begin: every layer's Q and K rotate by the same ones. */
static void cpu_begin(kara_context *c, const int32_t *tokens, int32_t n) {
    const kara_model *m = c->model;
    const int32_t e = m->hp.n_embd;
    for (int32_t i = 0; i < n; i++)
        kr_dequantize_matrix_row(m->tok_embd.type, m->tok_embd.data, m->tok_embd.row_bytes, m->tok_embd.n_rows,
                                 tokens[i], e, c->x + (size_t)i * e);
    rope_tables(c, n);
}

static void cpu_rope(kara_context *c, kr_buf v, int32_t n, int32_t n_heads) {
    const kr_hparams *hp = &c->model->hp;
    float *x = buf(c, v);
    for (int32_t i = 0; i < n; i++) {
        const float *cs = c->rope_cs + (size_t)i * hp->rope_dim;
        for (int32_t h = 0; h < n_heads; h++) rope_apply(hp, x + ((size_t)i * n_heads + h) * hp->head_dim, cs);
    }
}

/* ---- the KV cache ---- */

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

static void cpu_kv_store(kara_context *c, int32_t il, int32_t n) {
    const kr_hparams *hp = &c->model->hp;
    const kr_kernels *k = c->kernels;
    const int32_t qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
    for (int32_t i = 0; i < n; i++) {
        /* the KV policy scores the window with these queries later */
        void *ring = kr_kv_policy_query_row(&c->policy, c->entry_seq[i], il, c->slot[i], c->entry_pos[i]);
        if (ring) store_row(k, kr_kv_tune(&c->policy.p)->query_cache_dtype, c->q + (size_t)i * qd, ring, qd);
        store_row(k, c->kv.dtype, c->k + (size_t)i * kvd, kr_kv_k(&c->kv, il, c->entry_seq[i], c->slot[i]), kvd);
        store_row(k, c->kv.dtype, c->v + (size_t)i * kvd, kr_kv_v(&c->kv, il, c->entry_seq[i], c->slot[i]), kvd);
    }
}

/* ---- row operations ---- */

static void cpu_rmsnorm(kara_context *c, kr_buf dst, kr_buf src, const float *w, int64_t n_rows, int32_t dim) {
    float *y = buf(c, dst);
    const float *x = buf(c, src);
    const float eps = c->model->hp.rms_eps;
    for (int64_t r = 0; r < n_rows; r++) c->kernels->rmsnorm(y + r * dim, x + r * dim, w, dim, eps);
}

static void cpu_add_bias(kara_context *c, kr_buf y, const float *b, int32_t n, int32_t dim) {
    float *v = buf(c, y);
    for (int32_t i = 0; i < n; i++)
        for (int32_t d = 0; d < dim; d++) v[(size_t)i * dim + d] += b[d];
}

static void cpu_add(kara_context *c, kr_buf x, kr_buf y, int64_t n_vals) {
    float *a = buf(c, x);
    const float *b = buf(c, y);
    for (int64_t i = 0; i < n_vals; i++) a[i] += b[i];
}

/* Row by row: the kernels take their SIMD body and their scalar tail at
 * fixed offsets of a row, so an entry's bits do not depend on the entries
 * before it (one call over n x n_ff put a different part of each row in
 * the tail when n_ff is not a multiple of the vector width: stories260K's
 * 172). */
static void cpu_silu_mul(kara_context *c, kr_buf g, kr_buf u, int32_t n, int32_t dim) {
    float *a = buf(c, g);
    const float *b = buf(c, u);
    for (int32_t i = 0; i < n; i++)
        c->kernels->silu_mul(a + (size_t)i * dim, a + (size_t)i * dim, b + (size_t)i * dim, dim);
}

static void cpu_logits(kara_context *c, const int32_t *rows, int32_t n_out) {
    const kara_model *m = c->model;
    const int32_t e = m->hp.n_embd;
    for (int32_t j = 0; j < n_out; j++)
        c->kernels->rmsnorm(c->xn + (size_t)j * e, c->x + (size_t)rows[j] * e, m->output_norm, e, m->hp.rms_eps);
    if (n_out) {
        const kr_weight *w = &m->output;
        float *y = c->logits;
        matmul_multi(c, 1, &w, c->xn, n_out, &y);
    }
}

static kara_status cpu_finish(kara_context *c) {
    (void)c;
    return KARA_OK;
}

const kr_backend kr_backend_cpu = {
    .name = "cpu",
    .begin = cpu_begin,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .add_bias = cpu_add_bias,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = kr_cpu_attention,
    .add = cpu_add,
    .silu_mul = cpu_silu_mul,
    .logits = cpu_logits,
    .finish = cpu_finish,
    .destroy = NULL,
};
