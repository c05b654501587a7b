/*
 * cuda_backend_state.h - what the CUDA backend's two host files share
 * (internal to kernels_cuda/): the per-context device state, and the KV
 * policy's side of the backend (cuda_backend_kv.c: the query ring, Kara's
 * window scoring and the compaction's moves on the device), which
 * cuda_backend.c calls at attach, in each pass and at destroy.
 */
#ifndef KR_CUDA_BACKEND_STATE_H
#define KR_CUDA_BACKEND_STATE_H

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "context.h"
#include "cuda_ops.h"
#include "cuda_plan.h"

/* A host weight or vector and where its copy lives on the device. */
typedef struct dev_ptr {
    const void *host;
    void *dev;
    int32_t type;     /* matrices: the file layout's kr_type on the device */
    size_t row_bytes; /* matrices: bytes per row in that layout */
} dev_ptr;

/* One launch of a forward pass with every host-side argument of its
 * launcher (cuda_graph.c records a decode pass's launches and compares
 * them byte for byte with the captured graph's). */
typedef enum cu_op_kind {
    CU_OP_EMBED,     /* mm: wtype, w (table), row_bytes, x (tokens), n, n_cols (n_embd), y */
    CU_OP_MATMUL,    /* mm */
    CU_OP_RMSNORM,   /* vec: y, x, w, n_rows, dim, eps */
    CU_OP_ADD_BIAS,  /* vec: y, w (bias), n_rows, dim */
    CU_OP_ADD,       /* vec: y += x over n_rows values */
    CU_OP_SILU_MUL,  /* vec: y = silu(y) * x over n_rows values */
    CU_OP_ROPE,      /* rope */
    CU_OP_KV_STORE,  /* store */
    CU_OP_GATHER,    /* gather */
    CU_OP_ATTENTION, /* attn */
} cu_op_kind;

typedef struct cu_op {
    int32_t kind;
    const char *what; /* the operation, in an error message */
    union {
        struct {
            int32_t wtype;
            const void *w, *x;
            size_t row_bytes;
            int64_t n_rows, n_cols, n, ld;
            float *y;
        } mm;
        struct {
            float *y;
            const float *x, *w;
            int64_t n_rows, dim;
            float eps;
        } vec;
        struct {
            float *v;
            const int32_t *pos;
            int64_t n;
            int32_t n_heads, head_dim, rope_dim;
            float base;
            bool neox;
        } rope;
        struct {
            int32_t dtype;
            uint8_t *pool;
            const int64_t *offs;
            const float *src;
            int64_t n, row_len;
        } store;
        struct {
            float *dst;
            const float *src;
            const int32_t *rows;
            int64_t n, dim;
        } gather;
        kr_cuda_attn_args attn;
    } u;
} cu_op;

typedef struct cuda_state {
    int device;
    cudaStream_t stream;
    void *blas;
    uint8_t *base; /* the one device allocation */
    kr_cuda_plan plan;
    dev_ptr *map; /* sorted by host pointer */
    int32_t n_map;
    float *acts[KR_CUDA_N_ACTS];
    float *logits;
    uint8_t *pool;
    void *scratch;
    size_t scratch_bytes;
    void *index[KR_CUDA_I_COUNT];
    /* host staging of the per-pass index arrays */
    int64_t *h_k_offs;
    int32_t *h_n_vis, *h_table_off, *h_tables;
    /* the KV policy on the device (cuda_backend_kv.c): its query ring (NULL
     * without one), the scorer's buffers, and host staging for the span's
     * key offsets, the queries' ring offsets and a compaction's moves */
    uint8_t *ring;
    void *kvscore[KR_CUDA_S_COUNT];
    int64_t *h_q_offs, *h_key_offs, *h_move_src, *h_move_dst;
    float *attn_part; /* split-K attention's partial records */
    int32_t n_sm;     /* the GPU's multiprocessors, for split-K's split count */
    int32_t max_vis;  /* the pass's longest entry: slots it sees */
    /* CUDA graphs (cuda_graph.c): the pass's record, the captured graph's
     * record and executable, the slot of a launch that runs at once */
    bool graphs, recording;
    cu_op *log, *glog, direct;
    int32_t log_cap, n_log, n_glog;
    void *exec; /* cudaGraphExec_t */
    int64_t n_captures, n_replays;
    bool logits_pinned; /* c->logits page-locked (cudaHostRegister) for the copy back */
    bool sync_debug;    /* KARA_CUDA_SYNC_DEBUG=1: wait after each operation so a fault names it */
    int err;            /* the first failed call's code (sticky: a CUDA error can poison the context) */
    char err_what[96];
} cuda_state;

static inline cuda_state *state(kara_context *c) { return (cuda_state *)c->backend_state; }

/* Remember the first failure; later operations still run (their results
 * are discarded) and finish() reports it. A failed runtime call also sets
 * CUDA's last error, which the next launcher's own check would read and
 * report under its name: it is cleared here (a sticky fault stays, and
 * the first one noted is the one reported). In the debug mode the stream
 * is waited for after each operation, so an asynchronous fault is noted
 * with the operation that caused it rather than a later one. */
static inline void note(cuda_state *s, int rc, const char *what) {
    if (!rc && s->sync_debug && !s->err) rc = (int)cudaStreamSynchronize(s->stream);
    if (rc > 0) (void)cudaGetLastError();
    if (rc && !s->err) {
        s->err = rc;
        snprintf(s->err_what, sizeof s->err_what, "%s", what);
    }
}

/* cuda_backend.c: wait for the stream and report the first error (the
 * backend's finish). */
kara_status kr_cu_finish(kara_context *c);

/* ---- cuda_graph.c ---- */

/* KARA_CUDA_GRAPHS=1 (and no KARA_CUDA_SYNC_DEBUG): graphs on, with the
 * records sized for n_layer layers. */
void kr_cu_graph_init(cuda_state *s, int32_t n_layer);
void kr_cu_graph_free(cuda_state *s);
/* At a pass's start, after its uploads: record its launches when graphs
 * are on and it has at most KR_CUDA_GEMV_MAX entries. */
void kr_cu_pass_start(cuda_state *s, int32_t n);
/* A zeroed record of a launch to fill in, then kr_cu_issue: recorded, or
 * launched at once when the pass is not recorded. */
cu_op *kr_cu_op(cuda_state *s, cu_op_kind kind, const char *what);
void kr_cu_issue(cuda_state *s, cu_op *o);
/* Put the recorded launches on the stream: the graph replayed or
 * re-captured (use_graph), or each launched (before other work on the
 * stream in the middle of a pass). The rest of the pass launches directly. */
void kr_cu_flush(cuda_state *s, bool use_graph);

/* ---- cuda_backend_kv.c ---- */

/* Settings the device cannot run yet: KARA_ERR_UNSUPPORTED naming them. */
kara_status kr_cu_kv_check(const kara_context *c);
/* Host staging for the policy's work; false when out of memory. */
bool kr_cu_kv_alloc(cuda_state *s, const kara_context *c);
/* Once the allocation is cut: the ring's and buffers' addresses, and the
 * hooks through which the policy and the cache reach the device. */
void kr_cu_kv_attach(kara_context *c);
/* In a pass: the entries' query ring offsets (begin), and the queries of
 * layer il into the ring (after the K and V stores). */
void kr_cu_kv_begin(kara_context *c, int32_t n);
void kr_cu_kv_store_queries(kara_context *c, int32_t il, int32_t n);
/* Release the staging and unhook the policy and the cache. */
void kr_cu_kv_free(kara_context *c, cuda_state *s);

#endif /* KR_CUDA_BACKEND_STATE_H */
