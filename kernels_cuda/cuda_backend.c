/*
 * cuda_backend.c - the CUDA backend (runtime/decode/backend.h): a context's
 * forward pass on the first NVIDIA GPU.
 *
 * kr_cuda_backend_attach takes a context the CPU path has fully created and
 * moves its work to the device: one allocation sized by cuda_plan.h holds
 * the weights (uploaded once, in their file layouts: rows the CPU repacked
 * at load are unpacked back), the norm and bias vectors, a KV pool with
 * the host cache's exact layout, the activation buffers, the logits and
 * the kernels' scratch. The host keeps every piece of bookkeeping (block
 * tables, slots, validation, rollback); each pass uploads the little it
 * needs (tokens, positions, pool offsets, block tables) and copies only the
 * requested logits back. Sampling stays on the host.
 *
 * The KV policy's work on the values (the query ring, Kara's window
 * scoring, the compaction's moves) runs on the device too:
 * cuda_backend_kv.c. What does not run there yet is refused at attach with
 * the setting's name (kr_cu_kv_check).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "context.h"
#include "cuda_admit.h"
#include "cuda_backend_state.h"
#include "cuda_ops.h"
#include "cuda_plan.h"
#include "cuda_splitk.h"
#include "status.h"

/* Why a launcher's code failed, in words. */
static const char *err_text(int rc) {
    if (rc == KR_CUDA_ERR_ARG) return "arguments the kernels do not take";
    if (rc == KR_CUDA_ERR_NO_BLAS)
        return "libcublas could not be opened (is the CUDA toolkit's lib folder known to ld.so?)";
    if (rc < 0) return "a cuBLAS call failed";
    return cudaGetErrorString((cudaError_t)rc);
}

static int cmp_host(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)((const dev_ptr *)a)->host, y = (uintptr_t)((const dev_ptr *)b)->host;
    return x < y ? -1 : x > y;
}

static const dev_ptr *lookup(const cuda_state *s, const void *host) {
    dev_ptr key = {.host = host};
    return bsearch(&key, s->map, (size_t)s->n_map, sizeof key, cmp_host);
}

static float *dev_vec(cuda_state *s, const float *host) {
    const dev_ptr *d = lookup(s, host);
    if (!d) note(s, KR_CUDA_ERR_ARG, "a vector that was not uploaded");
    return d ? (float *)d->dev : NULL;
}

static float *act(cuda_state *s, kr_buf b) { return s->acts[b]; }

/* ---- the model's tensors ---- */

typedef struct tensor_list {
    dev_ptr *items;
    int32_t n, cap;
    const kr_weight **weights; /* parallel to items: the weight, or NULL for a vector */
    int64_t *vec_len;          /* parallel: floats of a vector */
} tensor_list;

static bool list_add(tensor_list *l, const void *host, const kr_weight *w, int64_t len) {
    if (!host) return true;
    for (int32_t i = 0; i < l->n; i++)
        if (l->items[i].host == host) return true; /* tied output and embeddings */
    if (l->n == l->cap) return false;
    l->items[l->n] = (dev_ptr){.host = host};
    l->weights[l->n] = w;
    l->vec_len[l->n] = len;
    l->n++;
    return true;
}

/* Every matrix and vector the forward pass hands the backend. */
static bool list_model(tensor_list *l, const kara_model *m) {
    const kr_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, hd = hp->head_dim, qd = (int64_t)hp->n_head * hd, kvd = (int64_t)hp->n_head_kv * hd;
    bool ok = list_add(l, m->tok_embd.data, &m->tok_embd, 0) && list_add(l, m->output.data, &m->output, 0) &&
        list_add(l, m->output_norm, NULL, e);
    for (int32_t il = 0; ok && il < hp->n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        const kr_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; ok && i < sizeof ws / sizeof ws[0]; i++) ok = list_add(l, ws[i]->data, ws[i], 0);
        ok = ok && list_add(l, L->attn_norm, NULL, e) && list_add(l, L->ffn_norm, NULL, e) &&
            list_add(l, L->bq, NULL, qd) && list_add(l, L->bk, NULL, kvd) && list_add(l, L->bv, NULL, kvd) &&
            list_add(l, L->q_norm, NULL, hd) && list_add(l, L->k_norm, NULL, hd);
    }
    return ok;
}

static size_t file_row_bytes(const kr_weight *w) {
    const kr_type_info *ti = kr_type_get(kr_layout_source(w->type));
    return (size_t)(w->n_cols / ti->block_size) * ti->type_size;
}

static uint64_t round_up(uint64_t v) { return (v + KR_CUDA_ALIGN - 1) / KR_CUDA_ALIGN * KR_CUDA_ALIGN; }

/* Copy a matrix to dst in its file layout: as it is, or row by row out of
 * the CPU's 16-row interleaving (kr_repacked_blocks; rows past the last
 * whole group are still file rows). The copies are on the legacy stream
 * from pageable memory, which may return before the bytes land: attach
 * waits for the device once after every upload, before any kernel runs on
 * the backend's (non-blocking) stream. */
static int upload_matrix(cuda_state *s, const kr_weight *w, uint8_t *dst) {
    const size_t frb = file_row_bytes(w);
    if (kr_layout_source(w->type) == w->type)
        return (int)cudaMemcpy(dst, w->data, frb * (size_t)w->n_rows, cudaMemcpyHostToDevice);
    const kr_type_info *ti = kr_type_get(kr_layout_source(w->type));
    const int64_t nblk = w->n_cols / ti->block_size, chunk_rows = 256,
                  grouped = kr_layout_group_rows(w->type, w->n_rows);
    uint8_t *buf = malloc(frb * (size_t)chunk_rows);
    if (!buf) return (int)cudaErrorMemoryAllocation;
    int rc = 0;
    for (int64_t r0 = 0; r0 < w->n_rows && !rc; r0 += chunk_rows) {
        const int64_t nr = w->n_rows - r0 < chunk_rows ? w->n_rows - r0 : chunk_rows;
        for (int64_t r = 0; r < nr; r++) {
            if (r0 + r < grouped)
                kr_repacked_blocks(w->type, w->data, w->row_bytes, r0 + r, 0, nblk, buf + frb * r);
            else
                memcpy(buf + frb * r, (const uint8_t *)w->data + w->row_bytes * (size_t)(r0 + r), frb);
        }
        rc = (int)cudaMemcpy(dst + frb * (size_t)r0, buf, frb * (size_t)nr, cudaMemcpyHostToDevice);
    }
    (void)s;
    free(buf);
    return rc;
}

/* ---- operations ---- */

/* The pass's index arrays, the same for every layer, uploaded once: each
 * entry's K row offset in layer 0 of the pool (layer l's rows lie
 * l * 2 * block_size slots further, its V rows block_size slots after its
 * K rows: kv_cache.h), its visible slots, and its sequence's block table
 * (one copy per sequence of the batch). The staging arrays are pinned, so
 * the copies are truly asynchronous: they are rewritten only at the next
 * pass's begin, after finish has waited for this one. */
static void upload_pass_index(kara_context *c, cuda_state *s, int32_t n) {
    const kr_kv_cache *kv = &c->kv;
    int32_t used = 0;
    s->max_vis = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t seq = c->entry_seq[i];
        s->h_k_offs[i] = (int64_t)((uint8_t *)kr_kv_k(kv, 0, seq, c->slot[i]) - kv->pool);
        s->h_n_vis[i] = c->slot[i] + 1;
        if (s->h_n_vis[i] > s->max_vis) s->max_vis = s->h_n_vis[i];
        int32_t j = 0;
        while (j < i && c->entry_seq[j] != seq) j++;
        if (j < i) {
            s->h_table_off[i] = s->h_table_off[j];
            continue;
        }
        s->h_table_off[i] = used;
        memcpy(s->h_tables + used, kv->seqs[seq].table, (size_t)kv->seqs[seq].n_blocks * sizeof(int32_t));
        used += kv->seqs[seq].n_blocks;
    }
    const struct {
        int index;
        const void *host;
        size_t bytes;
    } up[] = {{KR_CUDA_I_POS, c->entry_pos, (size_t)n * 4},
              {KR_CUDA_I_K_OFFS, s->h_k_offs, (size_t)n * 8},
              {KR_CUDA_I_N_VIS, s->h_n_vis, (size_t)n * 4},
              {KR_CUDA_I_TABLE_OFF, s->h_table_off, (size_t)n * 4},
              {KR_CUDA_I_TABLES, s->h_tables, (size_t)used * 4}};
    for (size_t u = 0; u < sizeof up / sizeof up[0]; u++)
        note(s, (int)cudaMemcpyAsync(s->index[up[u].index], up[u].host, up[u].bytes, cudaMemcpyHostToDevice, s->stream),
             "uploading the pass's positions, KV offsets and block tables");
}

static void cu_begin(kara_context *c, const int32_t *tokens, int32_t n) {
    cuda_state *s = state(c);
    const kara_model *m = c->model;
    note(s,
         (int)cudaMemcpyAsync(s->index[KR_CUDA_I_TOKENS], tokens, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                              s->stream),
         "uploading the tokens");
    upload_pass_index(c, s, n);
    kr_cu_kv_begin(c, n);
    kr_cu_pass_start(s, n);
    const dev_ptr *emb = lookup(s, m->tok_embd.data);
    cu_op *o = kr_cu_op(s, CU_OP_EMBED, "the embedding lookup");
    o->u.mm.wtype = emb->type;
    o->u.mm.w = emb->dev;
    o->u.mm.row_bytes = emb->row_bytes;
    o->u.mm.x = s->index[KR_CUDA_I_TOKENS];
    o->u.mm.n = n;
    o->u.mm.n_cols = m->hp.n_embd;
    o->u.mm.y = act(s, KR_BUF_X);
    kr_cu_issue(s, o);
}

/* The record of an operation on float rows (cu_op's vec). */
static void vec_op(cuda_state *s, cu_op_kind kind, const char *what, float *y, const float *x, const float *w,
                   int64_t n_rows, int64_t dim, float eps) {
    cu_op *o = kr_cu_op(s, kind, what);
    o->u.vec.y = y;
    o->u.vec.x = x;
    o->u.vec.w = w;
    o->u.vec.n_rows = n_rows;
    o->u.vec.dim = dim;
    o->u.vec.eps = eps;
    kr_cu_issue(s, o);
}

static void matmul_op(cuda_state *s, const char *what, const dev_ptr *d, const kr_weight *w, const float *x, int32_t n,
                      float *y, int64_t ld) {
    cu_op *o = kr_cu_op(s, CU_OP_MATMUL, what);
    o->u.mm.wtype = d->type;
    o->u.mm.w = d->dev;
    o->u.mm.row_bytes = d->row_bytes;
    o->u.mm.n_rows = w->n_rows;
    o->u.mm.n_cols = w->n_cols;
    o->u.mm.x = x;
    o->u.mm.n = n;
    o->u.mm.y = y;
    o->u.mm.ld = ld;
    kr_cu_issue(s, o);
}

static void cu_rmsnorm(kara_context *c, kr_buf dst, kr_buf src, const float *w, int64_t n_rows, int32_t dim) {
    cuda_state *s = state(c);
    vec_op(s, CU_OP_RMSNORM, "rmsnorm", act(s, dst), act(s, src), dev_vec(s, w), n_rows, dim, c->model->hp.rms_eps);
}

static void cu_matmul(kara_context *c, int n_w, const kr_weight *const *w, kr_buf x, int32_t n, const kr_buf *y) {
    cuda_state *s = state(c);
    for (int t = 0; t < n_w; t++) {
        matmul_op(s, "a matrix product", lookup(s, w[t]->data), w[t], act(s, x), n, act(s, y[t]), w[t]->n_rows);
    }
}

static void cu_add_bias(kara_context *c, kr_buf y, const float *b, int32_t n, int32_t dim) {
    cuda_state *s = state(c);
    vec_op(s, CU_OP_ADD_BIAS, "a bias", act(s, y), NULL, dev_vec(s, b), n, dim, 0.0f);
}

static void cu_rope(kara_context *c, kr_buf v, int32_t n, int32_t n_heads) {
    cuda_state *s = state(c);
    const kr_hparams *hp = &c->model->hp;
    cu_op *o = kr_cu_op(s, CU_OP_ROPE, "RoPE");
    o->u.rope.v = act(s, v);
    o->u.rope.pos = s->index[KR_CUDA_I_POS];
    o->u.rope.n = n;
    o->u.rope.n_heads = n_heads;
    o->u.rope.head_dim = hp->head_dim;
    o->u.rope.rope_dim = hp->rope_dim;
    o->u.rope.base = hp->rope_freq_base;
    o->u.rope.neox = hp->rope_neox;
    kr_cu_issue(s, o);
}

/* The entries' K and V rows go to the same byte offsets of the device pool
 * as kr_kv_k / kr_kv_v give in the host's: the pass's layer-0 K offsets
 * from a pool base moved to layer il (and on to its V rows). */
static void cu_kv_store(kara_context *c, int32_t il, int32_t n) {
    cuda_state *s = state(c);
    const kr_kv_cache *kv = &c->kv;
    const size_t run = (size_t)kv->block_size * kv->slot_bytes; /* one layer's K (or V) rows of a block */
    uint8_t *k_base = s->pool + (size_t)il * 2 * run;
    const int64_t kvd = (int64_t)kv->n_head_kv * kv->head_dim;
    for (int v = 0; v < 2; v++) {
        cu_op *o = kr_cu_op(s, CU_OP_KV_STORE, v ? "the V store" : "the K store");
        o->u.store.dtype = (int32_t)kv->dtype;
        o->u.store.pool = k_base + (v ? run : 0);
        o->u.store.offs = s->index[KR_CUDA_I_K_OFFS];
        o->u.store.src = act(s, v ? KR_BUF_V : KR_BUF_K);
        o->u.store.n = n;
        o->u.store.row_len = kvd;
        kr_cu_issue(s, o);
    }
    kr_cu_kv_store_queries(c, il, n);
}

static void cu_attention(kara_context *c, int32_t il, int32_t n) {
    cuda_state *s = state(c);
    const kr_kv_cache *kv = &c->kv;
    const kr_hparams *hp = &c->model->hp;
    cu_op *o = kr_cu_op(s, CU_OP_ATTENTION, "attention");
    o->u.attn = (kr_cuda_attn_args){.q = act(s, KR_BUF_Q),
                                    .out = act(s, KR_BUF_ATTN),
                                    .n_entries = n,
                                    .n_head = hp->n_head,
                                    .n_head_kv = hp->n_head_kv,
                                    .head_dim = hp->head_dim,
                                    .pool = s->pool,
                                    .bytes_per_block = kv->bytes_per_block,
                                    .slot_bytes = kv->slot_bytes,
                                    .block_size = kv->block_size,
                                    .layer = il,
                                    .kv_dtype = (int32_t)kv->dtype,
                                    .n_vis = s->index[KR_CUDA_I_N_VIS],
                                    .tables = s->index[KR_CUDA_I_TABLES],
                                    .table_off = s->index[KR_CUDA_I_TABLE_OFF],
                                    .scale = 1.0f / sqrtf((float)hp->head_dim),
                                    .n_split = kr_cu_splitk_choose(s->max_vis, n, hp->n_head, hp->n_head_kv, s->n_sm),
                                    .part = s->attn_part};
    kr_cu_issue(s, o);
}

static void cu_add(kara_context *c, kr_buf x, kr_buf y, int64_t n_vals) {
    cuda_state *s = state(c);
    vec_op(s, CU_OP_ADD, "a residual add", act(s, x), act(s, y), NULL, n_vals, 0, 0.0f);
}

static void cu_silu_mul(kara_context *c, kr_buf g, kr_buf u, int32_t n, int32_t dim) {
    cuda_state *s = state(c);
    vec_op(s, CU_OP_SILU_MUL, "SwiGLU", act(s, g), act(s, u), NULL, (int64_t)n * dim, 0, 0.0f);
}

static void cu_logits(kara_context *c, const int32_t *rows, int32_t n_out) {
    cuda_state *s = state(c);
    const kara_model *m = c->model;
    if (!n_out) return;
    const int64_t e = m->hp.n_embd;
    note(s, (int)cudaMemcpyAsync(s->index[KR_CUDA_I_ROWS], rows, (size_t)n_out * 4, cudaMemcpyHostToDevice, s->stream),
         "uploading the output rows");
    cu_op *o = kr_cu_op(s, CU_OP_GATHER, "gathering the output rows");
    o->u.gather.dst = act(s, KR_BUF_XN);
    o->u.gather.src = act(s, KR_BUF_X);
    o->u.gather.rows = s->index[KR_CUDA_I_ROWS];
    o->u.gather.n = n_out;
    o->u.gather.dim = e;
    kr_cu_issue(s, o);
    vec_op(s, CU_OP_RMSNORM, "the output norm", act(s, KR_BUF_XN), act(s, KR_BUF_XN), dev_vec(s, m->output_norm), n_out,
           e, m->hp.rms_eps);
    matmul_op(s, "the output projection", lookup(s, m->output.data), &m->output, act(s, KR_BUF_XN), n_out, s->logits,
              m->hp.n_vocab);
    kr_cu_flush(s, true); /* the pass's launches, as a graph where they are recorded */
    note(s,
         (int)cudaMemcpyAsync(c->logits, s->logits, (size_t)n_out * (size_t)m->hp.n_vocab * sizeof(float),
                              cudaMemcpyDeviceToHost, s->stream),
         "copying the logits back");
}

kara_status kr_cu_finish(kara_context *c) {
    cuda_state *s = state(c);
    kr_cu_flush(s, true); /* a pass without logits, or stopped early */
    note(s, (int)cudaStreamSynchronize(s->stream), "the forward pass");
    if (!s->err) return KARA_OK;
    return kr_set_error(KARA_ERR_DEVICE, "CUDA: %s failed: %s (code %d); free this context", s->err_what,
                        err_text(s->err), s->err);
}

static void cu_destroy(kara_context *c) {
    cuda_state *s = state(c);
    if (!s) return;
    cudaSetDevice(s->device);
    if (s->blas) kr_cuda_blas_destroy(s->blas);
    kr_cu_graph_free(s);
    if (s->base) cudaFree(s->base);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->logits_pinned) cudaHostUnregister(c->logits);
    free(s->map);
    cudaFreeHost(s->h_k_offs);
    cudaFreeHost(s->h_n_vis);
    cudaFreeHost(s->h_table_off);
    cudaFreeHost(s->h_tables);
    kr_cu_kv_free(c, s);
    free(s);
    c->backend_state = NULL;
}

static const kr_backend backend_cuda = {
    .name = "cuda",
    .begin = cu_begin,
    .rmsnorm = cu_rmsnorm,
    .matmul = cu_matmul,
    .add_bias = cu_add_bias,
    .rope = cu_rope,
    .kv_store = cu_kv_store,
    .attention = cu_attention,
    .add = cu_add,
    .silu_mul = cu_silu_mul,
    .logits = cu_logits,
    .finish = kr_cu_finish,
    .destroy = cu_destroy,
};

/* ---- attach ---- */

static kara_status fail(kara_context *c, cuda_state *s, kara_status st) {
    c->backend_state = s;
    cu_destroy(c);
    return st;
}

static kara_status cuda_error(kara_context *c, cuda_state *s, int rc, const char *what) {
    kr_set_error(KARA_ERR_DEVICE, "CUDA: %s failed: %s (code %d)", what, err_text(rc), rc);
    return fail(c, s, KARA_ERR_DEVICE);
}

kara_status kr_cuda_backend_attach(kara_context *c) {
    kara_status st = kr_cu_kv_check(c);
    if (st || (st = kr_cuda_check_shapes(c))) return st;
    int n_dev = 0;
    cudaError_t ce = cudaGetDeviceCount(&n_dev);
    if (ce != cudaSuccess || n_dev == 0)
        return kr_set_error(KARA_ERR_UNSUPPORTED, "runtime.device is cuda but no CUDA device is usable: %s",
                            ce != cudaSuccess ? cudaGetErrorString(ce) : "no device found");
    cuda_state *s = calloc(1, sizeof *s);
    const kara_model *m = c->model;
    const kr_hparams *hp = &m->hp;
    const size_t nb = (size_t)c->n_batch;
    tensor_list l = {0};
    l.cap = 16 + 16 * hp->n_layer;
    l.items = calloc((size_t)l.cap, sizeof *l.items);
    l.weights = calloc((size_t)l.cap, sizeof *l.weights);
    l.vec_len = calloc((size_t)l.cap, sizeof *l.vec_len);
    if (s) {
        const char *dbg = getenv("KARA_CUDA_SYNC_DEBUG");
        s->sync_debug = dbg && dbg[0] == '1';
        kr_cu_graph_init(s, hp->n_layer);
        /* pinned: the pass's uploads are asynchronous copies from them */
        if (cudaMallocHost((void **)&s->h_k_offs, nb * sizeof(int64_t)) ||
            cudaMallocHost((void **)&s->h_n_vis, nb * sizeof(int32_t)) ||
            cudaMallocHost((void **)&s->h_table_off, nb * sizeof(int32_t)) ||
            cudaMallocHost((void **)&s->h_tables,
                           (size_t)c->kv.n_seq_max * (size_t)c->kv.max_blocks_per_seq * sizeof(int32_t)))
            (void)cudaGetLastError(); /* reported below as out of memory; not left for a launcher */
    }
    if (!s || !l.items || !l.weights || !l.vec_len || !s->h_k_offs || !s->h_n_vis || !s->h_table_off || !s->h_tables ||
        !kr_cu_kv_alloc(s, c) || !list_model(&l, m)) {
        free(l.items);
        free(l.weights);
        free(l.vec_len);
        if (!s) return kr_set_error(KARA_ERR_NOMEM, "out of memory attaching the CUDA backend");
        return fail(c, s, kr_set_error(KARA_ERR_NOMEM, "out of memory attaching the CUDA backend"));
    }
    /* the plan: matrices first, then vectors, each aligned */
    uint64_t wbytes = 0, vbytes = 0;
    for (int32_t i = 0; i < l.n; i++) {
        if (l.weights[i]) {
            wbytes += round_up(file_row_bytes(l.weights[i]) * (uint64_t)l.weights[i]->n_rows);
        } else {
            vbytes += round_up((uint64_t)l.vec_len[i] * sizeof(float));
        }
    }
    kr_cuda_plan_in in = {.weight_bytes = wbytes, .vector_bytes = vbytes};
    kr_cuda_plan_in_ctx(c, &in);
    if (!kr_cuda_plan_make(&s->plan, &in))
        st = kr_set_error(KARA_ERR_NOMEM, "runtime.device cuda: the device memory plan overflows");
    size_t free_b = 0, total_b = 0;
    if (!st && (ce = cudaSetDevice(0)) == cudaSuccess) ce = cudaMemGetInfo(&free_b, &total_b);
    if (!st && ce != cudaSuccess) st = kr_set_error(KARA_ERR_DEVICE, "CUDA: %s", cudaGetErrorString(ce));
    if (!st && s->plan.total > free_b)
        st = kr_set_error(KARA_ERR_NOMEM,
                          "runtime.device cuda needs %.1f MiB of GPU memory (weights %.1f, KV pool %.1f) but %.1f MiB "
                          "are free: lower kv_cache.budget or context.batch",
                          s->plan.total / 1048576.0, s->plan.size[KR_CUDA_R_WEIGHTS] / 1048576.0,
                          s->plan.size[KR_CUDA_R_POOL] / 1048576.0, free_b / 1048576.0);
    if (!st && (ce = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) == cudaSuccess)
        ce = cudaMalloc((void **)&s->base, s->plan.total);
    if (!st && ce != cudaSuccess)
        st = kr_set_error(KARA_ERR_DEVICE, "CUDA: reserving %.1f MiB: %s", s->plan.total / 1048576.0,
                          cudaGetErrorString(ce));
    if (st) {
        free(l.items);
        free(l.weights);
        free(l.vec_len);
        return fail(c, s, st);
    }
    /* upload, and cut the allocation into its regions */
    uint64_t woff = s->plan.off[KR_CUDA_R_WEIGHTS], voff = s->plan.off[KR_CUDA_R_VECTORS];
    int rc = 0;
    for (int32_t i = 0; i < l.n && !rc; i++) {
        dev_ptr *d = &l.items[i];
        if (l.weights[i]) {
            d->dev = s->base + woff;
            d->type = (int32_t)kr_layout_source(l.weights[i]->type);
            d->row_bytes = file_row_bytes(l.weights[i]);
            rc = upload_matrix(s, l.weights[i], d->dev);
            woff += round_up(d->row_bytes * (uint64_t)l.weights[i]->n_rows);
        } else {
            d->dev = s->base + voff;
            rc = (int)cudaMemcpy(d->dev, d->host, (size_t)l.vec_len[i] * sizeof(float), cudaMemcpyHostToDevice);
            voff += round_up((uint64_t)l.vec_len[i] * sizeof(float));
        }
    }
    s->map = l.items;
    s->n_map = l.n;
    free(l.weights);
    free(l.vec_len);
    qsort(s->map, (size_t)s->n_map, sizeof *s->map, cmp_host);
    /* every upload has landed before the first kernel (issued on another
     * stream) can read it */
    if (!rc) rc = (int)cudaDeviceSynchronize();
    if (rc) return cuda_error(c, s, rc, "uploading the weights");
    /* the logits come back into c->logits: page-locked, the copy is a DMA
     * straight into it (if the host refuses, a pageable copy still works) */
    if (cudaHostRegister(c->logits, (size_t)c->n_batch * (size_t)hp->n_vocab * sizeof(float),
                         cudaHostRegisterDefault) == cudaSuccess)
        s->logits_pinned = true;
    else
        (void)cudaGetLastError();
    for (int b = 0; b < KR_CUDA_N_ACTS; b++)
        s->acts[b] = (float *)(s->base + s->plan.off[KR_CUDA_R_ACTS] + s->plan.act_off[b]);
    for (int i = 0; i < KR_CUDA_I_COUNT; i++)
        s->index[i] = s->base + s->plan.off[KR_CUDA_R_INDEX] + s->plan.index_off[i];
    s->logits = (float *)(s->base + s->plan.off[KR_CUDA_R_LOGITS]);
    s->pool = s->base + s->plan.off[KR_CUDA_R_POOL];
    s->attn_part = (float *)(s->base + s->plan.off[KR_CUDA_R_ATTN_PART]);
    /* split-K's split count follows the SM count; 0 (unknown) keeps the one-pass kernel */
    if (cudaDeviceGetAttribute(&s->n_sm, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
        s->n_sm = 0;
        (void)cudaGetLastError();
    }
    s->scratch = s->base + s->plan.off[KR_CUDA_R_SCRATCH];
    s->scratch_bytes = s->plan.size[KR_CUDA_R_SCRATCH];
    if (kr_cuda_matmul_scratch_bytes((int64_t)s->plan.max_cols, c->n_batch) > s->scratch_bytes)
        return fail(c, s, kr_set_error(KARA_ERR_INTERNAL, "cuda_plan's matmul scratch is smaller than cuda_matmul's"));
    if ((rc = kr_cuda_blas_create(&s->blas, s->stream))) return cuda_error(c, s, rc, "creating the cuBLAS handle");
    c->backend_state = s;
    c->backend = &backend_cuda;
    kr_cu_kv_attach(c);
    return KARA_OK;
}
