/*
 * cuda_graph.c - a decode pass's kernel launches as a CUDA graph
 * (KARA_CUDA_GRAPHS=1; off by default until it has run on a GPU).
 *
 * A decode step is some 20 small launches a layer, each costing the host
 * a few microseconds while the GPU has a few microseconds of work: the
 * launches, not the weights' bytes, would bound a small model's speed. So
 * in a pass of at most KR_CUDA_GEMV_MAX entries the backend's operations
 * do not launch: each is recorded as a cu_op holding every host-side
 * argument of its launcher (pointers, sizes, layer, split count). At the
 * end of the pass (kr_cu_flush) the record is compared with the one the
 * graph was captured from:
 *   - the same, byte for byte: the graph is replayed, one launch;
 *   - different (the first pass, another batch size, another split count,
 *     an output row more): the record is captured into a graph by running
 *     its launchers under stream capture, the graph is updated or
 *     re-instantiated, and launched.
 * What changes from token to token (tokens, positions, KV offsets, visible
 * slots, block tables, output rows, query ring offsets) reaches the
 * kernels through device arrays uploaded before the launch, never as
 * launch arguments, so an equal record means an equal pass. Anything that
 * is not a recorded launch and touches the stream in the middle of a pass
 * (the KV policy's scoring and moves, the mirror's copies) first flushes
 * the record without a graph (kr_cu_flush(s, false)), and the rest of the
 * pass launches directly, so the stream order is the order of the calls.
 *
 * A capture or instantiation the runtime refuses turns graphs off for the
 * context and runs the record directly: the same launches as without.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_backend_state.h"
#include "cuda_ops.h"

void kr_cu_graph_init(cuda_state *s, int32_t n_layer) {
    const char *env = getenv("KARA_CUDA_GRAPHS");
    s->graphs = env && env[0] == '1' && !env[1] && !s->sync_debug;
    if (!s->graphs) return;
    s->log_cap = 24 * n_layer + 16; /* a layer issues at most 20 operations, the pass's ends 4 */
    s->log = calloc((size_t)s->log_cap, sizeof *s->log);
    s->glog = calloc((size_t)s->log_cap, sizeof *s->glog);
    if (!s->log || !s->glog) s->graphs = false; /* runs without: the same launches */
}

void kr_cu_graph_free(cuda_state *s) {
    if (s->exec) cudaGraphExecDestroy((cudaGraphExec_t)s->exec);
    s->exec = NULL;
    free(s->log);
    free(s->glog);
    s->log = s->glog = NULL;
}

void kr_cu_pass_start(cuda_state *s, int32_t n) {
    s->n_log = 0;
    s->recording = s->graphs && n <= KR_CUDA_GEMV_MAX && !s->err;
}

/* The launcher of one record, on the stream. */
static int run_op(cuda_state *s, const cu_op *o) {
    const cudaStream_t st = s->stream;
    switch (o->kind) {
    case CU_OP_EMBED:
        return kr_cuda_embed(st, o->u.mm.wtype, o->u.mm.w, o->u.mm.row_bytes, o->u.mm.x, o->u.mm.n, o->u.mm.n_cols,
                             o->u.mm.y);
    case CU_OP_MATMUL:
        return kr_cuda_matmul(st, s->blas, o->u.mm.wtype, o->u.mm.w, o->u.mm.row_bytes, o->u.mm.n_rows, o->u.mm.n_cols,
                              o->u.mm.x, o->u.mm.n, o->u.mm.y, o->u.mm.ld, s->scratch, s->scratch_bytes);
    case CU_OP_RMSNORM:
        return kr_cuda_rmsnorm(st, o->u.vec.y, o->u.vec.x, o->u.vec.w, o->u.vec.n_rows, o->u.vec.dim, o->u.vec.eps);
    case CU_OP_ADD_BIAS: return kr_cuda_add_bias(st, o->u.vec.y, o->u.vec.w, o->u.vec.n_rows, o->u.vec.dim);
    case CU_OP_ADD: return kr_cuda_add(st, o->u.vec.y, o->u.vec.x, o->u.vec.n_rows);
    case CU_OP_SILU_MUL: return kr_cuda_silu_mul(st, o->u.vec.y, o->u.vec.x, o->u.vec.n_rows);
    case CU_OP_ROPE:
        return kr_cuda_rope(st, o->u.rope.v, o->u.rope.pos, o->u.rope.n, o->u.rope.n_heads, o->u.rope.head_dim,
                            o->u.rope.rope_dim, o->u.rope.base, o->u.rope.neox);
    case CU_OP_KV_STORE:
        return kr_cuda_kv_store(st, o->u.store.dtype, o->u.store.pool, o->u.store.offs, o->u.store.src, o->u.store.n,
                                o->u.store.row_len);
    case CU_OP_GATHER:
        return kr_cuda_gather_rows(st, o->u.gather.dst, o->u.gather.src, o->u.gather.rows, o->u.gather.n,
                                   o->u.gather.dim);
    case CU_OP_ATTENTION: return kr_cuda_attention(st, &o->u.attn);
    default: return KR_CUDA_ERR_ARG;
    }
}

cu_op *kr_cu_op(cuda_state *s, cu_op_kind kind, const char *what) {
    cu_op *o = s->recording && s->n_log < s->log_cap ? &s->log[s->n_log] : &s->direct;
    /* zeroed whole, padding too: records are compared with memcmp */
    memset(o, 0, sizeof *o);
    o->kind = (int32_t)kind;
    o->what = what;
    return o;
}

void kr_cu_issue(cuda_state *s, cu_op *o) {
    if (o != &s->direct) {
        s->n_log++;
        return;
    }
    if (s->recording) kr_cu_flush(s, false); /* the record is full: what it holds runs first */
    note(s, run_op(s, o), o->what);
}

static void run_direct(cuda_state *s, int32_t n) {
    for (int32_t i = 0; i < n; i++) note(s, run_op(s, &s->log[i]), s->log[i].what);
}

/* Capture the record into a graph and make s->exec run it; false (graphs
 * turned off, the first error as it was) when the runtime refuses. */
static bool capture(cuda_state *s, int32_t n) {
    const int err = s->err;
    char err_what[sizeof s->err_what];
    memcpy(err_what, s->err_what, sizeof err_what);
    cudaGraph_t g = NULL;
    bool ok = cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        run_direct(s, n);
        ok = cudaStreamEndCapture(s->stream, &g) == cudaSuccess && g;
    }
    if (ok && s->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate((cudaGraphExec_t)s->exec, g, &info) != cudaSuccess) {
            (void)cudaGetLastError();
            cudaGraphExecDestroy((cudaGraphExec_t)s->exec);
            s->exec = NULL;
        }
    }
    if (ok && !s->exec) {
        cudaGraphExec_t e = NULL;
        ok = cudaGraphInstantiate(&e, g, 0) == cudaSuccess;
        s->exec = ok ? (void *)e : NULL;
    }
    if (g) cudaGraphDestroy(g);
    if (ok && s->err == err) return true;
    /* refused, or a launcher failed under capture: forget the errors the
     * capture noted and run the record directly, where they are real */
    (void)cudaGetLastError();
    s->err = err;
    memcpy(s->err_what, err_what, sizeof err_what);
    if (!ok) {
        if (s->exec) cudaGraphExecDestroy((cudaGraphExec_t)s->exec);
        s->exec = NULL;
        s->graphs = false;
    }
    s->n_glog = 0;
    return false;
}

void kr_cu_flush(cuda_state *s, bool use_graph) {
    const int32_t n = s->n_log;
    const bool was = s->recording;
    s->recording = false;
    s->n_log = 0;
    if (!was || n == 0) return;
    if (!use_graph || s->err) {
        run_direct(s, n);
        return;
    }
    if (s->exec && n == s->n_glog && !memcmp(s->log, s->glog, (size_t)n * sizeof *s->log)) {
        s->n_replays++;
    } else if (capture(s, n)) {
        memcpy(s->glog, s->log, (size_t)n * sizeof *s->log);
        s->n_glog = n;
        s->n_captures++;
    } else {
        run_direct(s, n);
        return;
    }
    note(s, (int)cudaGraphLaunch((cudaGraphExec_t)s->exec, s->stream), "launching the decode graph");
}
