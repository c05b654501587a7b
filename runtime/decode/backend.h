/*
 * backend.h - the seam between the forward pass and the hardware that runs
 * it (issue 21).
 *
 * forward.c issues whole operations on the context's activation buffers,
 * named by kr_buf, and never touches their values: the CPU backend
 * (backend_cpu.c, backend_cpu_attn.c) keeps them in the context's host
 * arrays and runs the kernel table on the context's threads; the CUDA
 * backend (kernels_cuda/cuda_backend.c) keeps them in GPU memory and
 * copies only the logits back. Bookkeeping stays on the host in both:
 * slots and block tables (kv_cache.h), batch validation, the policy's
 * per-slot state, the abort rollback.
 *
 * Operations cannot fail on the CPU. A device records its first error and
 * reports it from finish(), which every forward pass calls last.
 */
#ifndef KR_BACKEND_H
#define KR_BACKEND_H

#include <stdint.h>

#include "kara.h"
#include "model.h"

/* The forward pass's activation buffers, n_batch rows each: the residual
 * stream, its normed copy, Q, K, V, the attention output, the gate and up
 * products, and the output of wo / w_down. */
typedef enum kr_buf {
    KR_BUF_X,
    KR_BUF_XN,
    KR_BUF_Q,
    KR_BUF_K,
    KR_BUF_V,
    KR_BUF_ATTN,
    KR_BUF_GATE,
    KR_BUF_UP,
    KR_BUF_PROJ,
    KR_BUF_COUNT
} kr_buf;

typedef struct kr_backend {
    const char *name; /* "cpu", "cuda" */
    /* X = the embeddings of the batch's n tokens; each entry's RoPE angles
     * from the context's entry_pos */
    void (*begin)(kara_context *c, const int32_t *tokens, int32_t n);
    /* dst row r = RMSNorm(src row r) * w, for n_rows rows of dim values
     * (dst may be src; Qwen3's per-head norms are rows of head_dim) */
    void (*rmsnorm)(kara_context *c, kr_buf dst, kr_buf src, const float *w, int64_t n_rows, int32_t dim);
    /* y[t] = x . w[t]^T for n_w weights (at most 3) sharing x's n rows */
    void (*matmul)(kara_context *c, int n_w, const kr_weight *const *w, kr_buf x, int32_t n, const kr_buf *y);
    /* y[i][:dim] += b for n rows */
    void (*add_bias)(kara_context *c, kr_buf y, const float *b, int32_t n, int32_t dim);
    /* RoPE of the n entries' n_heads heads in v, at their positions */
    void (*rope)(kara_context *c, kr_buf v, int32_t n, int32_t n_heads);
    /* K and V rows of the n entries into their cache slots of layer il, and
     * Q into the KV policy's query ring where it keeps one */
    void (*kv_store)(kara_context *c, int32_t il, int32_t n);
    /* ATTN = attention of Q over each entry's sequence in layer il */
    void (*attention)(kara_context *c, int32_t il, int32_t n);
    /* x += y over n_vals values */
    void (*add)(kara_context *c, kr_buf x, kr_buf y, int64_t n_vals);
    /* g = silu(g) * u, n rows of dim values */
    void (*silu_mul)(kara_context *c, kr_buf g, kr_buf u, int32_t n, int32_t dim);
    /* the context's logits (host) for the entries rows[0, n_out): the
     * output norm of their X rows, then the vocabulary projection */
    void (*logits)(kara_context *c, const int32_t *rows, int32_t n_out);
    /* wait for the pass; KARA_OK, or the first error of its operations */
    kara_status (*finish)(kara_context *c);
    /* release what create reserved (NULL when nothing) */
    void (*destroy)(kara_context *c);
} kr_backend;

/* The CPU backend: always present. */
extern const kr_backend kr_backend_cpu;

/* Move a fully created context onto the first CUDA device: upload the
 * weights, reserve the device's buffers and KV pool (kernels_cuda/
 * cuda_plan.h), and switch c->backend. Defined by kernels_cuda/
 * cuda_backend.c, in builds with the CUDA backend (KARA_HAVE_CUDA) only.
 * KARA_ERR_UNSUPPORTED for settings the device does not run yet and when
 * there is no device; KARA_ERR_NOMEM when the GPU's memory is short. */
kara_status kr_cuda_backend_attach(kara_context *c);
/* CUDA devices that answer (0 where none does or the driver is missing);
 * kernels_cuda/cuda_probe.cu, in builds with the CUDA backend only. */
int kr_cuda_n_devices(void);
/* Device 0's name, peak memory bandwidth, memory and SM count; false when
 * no device answers. kernels_cuda/cuda_probe.cu, CUDA builds only. */
bool kr_cuda_device_props(kara_device_props *out);

#endif /* KR_BACKEND_H */
