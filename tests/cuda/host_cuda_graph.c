/* host_cuda_graph.c - the decisions of kernels_cuda/cuda_graph.c on the
 * host: the CUDA runtime's stream-capture and graph calls and the kernel
 * launchers are stubs here that log what they are asked, so what the
 * backend would put on the stream is checked without a GPU (built in CUDA
 * builds, for the runtime's header; runs on any machine):
 *   - graphs off (KARA_CUDA_GRAPHS unset or 0, or KARA_CUDA_SYNC_DEBUG):
 *     every operation launches at once, nothing is captured;
 *   - graphs on: a decode pass's launches wait for the flush, are captured
 *     in order and the graph launched; the same pass again replays the
 *     graph without a launcher call; one argument changed (a split count,
 *     a batch size) captures again and updates the graph, and a refused
 *     update re-instantiates it;
 *   - a pass of more than KR_CUDA_GEMV_MAX entries launches directly;
 *   - a flush in the middle of a pass (the KV policy's device work) runs
 *     what was recorded, in order, before it, and the rest of the pass
 *     launches directly with no graph;
 *   - a capture the runtime refuses runs the pass directly and turns
 *     graphs off for the context; a launcher failing under capture is
 *     reported from the direct run, once, under its own name;
 *   - a full record launches what it holds and goes on directly.
 * A mismatch prints the case and the test exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend_state.h"
#include "cuda_ops.h"

static int failed, passed;

static void expect(bool ok, const char *what, const char *got) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "FAIL: %s (got \"%s\")\n", what, got ? got : "");
}

/* ---- stubs: each call appends a letter to the trace ---- */

static char trace[4096];
static bool capturing, refuse_capture, refuse_update;
static int fail_kind = -1; /* a launcher that fails (KR_CUDA_ERR_ARG), -1 none */
static int n_instantiate, n_update, n_launch_graph;
static int dummy_graph, dummy_exec;

static void put(char ch) {
    size_t n = strlen(trace);
    if (n + 1 < sizeof trace) trace[n] = ch, trace[n + 1] = '\0';
}

/* A launcher: its kind's letter (lower case under capture, where nothing runs). */
static int launch(cu_op_kind k) {
    put((char)((capturing ? 'a' : 'A') + (int)k));
    return (int)k == fail_kind ? KR_CUDA_ERR_ARG : 0;
}

int kr_cuda_embed(void *st, int wt, const void *t, size_t rb, const int32_t *tok, int64_t n, int64_t ne, float *x) {
    (void)st, (void)wt, (void)t, (void)rb, (void)tok, (void)n, (void)ne, (void)x;
    return launch(CU_OP_EMBED);
}
int kr_cuda_matmul(void *st, void *blas, int wt, const void *w, size_t rb, int64_t nr, int64_t nc, const float *x,
                   int64_t n, float *y, int64_t ldy, void *scr, size_t sb) {
    (void)st, (void)blas, (void)wt, (void)w, (void)rb, (void)nr, (void)nc, (void)x, (void)n, (void)y, (void)ldy;
    (void)scr, (void)sb;
    return launch(CU_OP_MATMUL);
}
int kr_cuda_rmsnorm(void *st, float *y, const float *x, const float *w, int64_t nr, int64_t dim, float eps) {
    (void)st, (void)y, (void)x, (void)w, (void)nr, (void)dim, (void)eps;
    return launch(CU_OP_RMSNORM);
}
int kr_cuda_add_bias(void *st, float *y, const float *b, int64_t nr, int64_t dim) {
    (void)st, (void)y, (void)b, (void)nr, (void)dim;
    return launch(CU_OP_ADD_BIAS);
}
int kr_cuda_add(void *st, float *x, const float *y, int64_t n) {
    (void)st, (void)x, (void)y, (void)n;
    return launch(CU_OP_ADD);
}
int kr_cuda_silu_mul(void *st, float *g, const float *u, int64_t n) {
    (void)st, (void)g, (void)u, (void)n;
    return launch(CU_OP_SILU_MUL);
}
int kr_cuda_rope(void *st, float *v, const int32_t *pos, int64_t n, int32_t nh, int32_t hd, int32_t rd, float base,
                 bool neox) {
    (void)st, (void)v, (void)pos, (void)n, (void)nh, (void)hd, (void)rd, (void)base, (void)neox;
    return launch(CU_OP_ROPE);
}
int kr_cuda_kv_store(void *st, int dt, uint8_t *pool, const int64_t *offs, const float *src, int64_t n, int64_t rl) {
    (void)st, (void)dt, (void)pool, (void)offs, (void)src, (void)n, (void)rl;
    return launch(CU_OP_KV_STORE);
}
int kr_cuda_gather_rows(void *st, float *dst, const float *src, const int32_t *rows, int64_t n, int64_t dim) {
    (void)st, (void)dst, (void)src, (void)rows, (void)n, (void)dim;
    return launch(CU_OP_GATHER);
}
int kr_cuda_attention(void *st, const kr_cuda_attn_args *a) {
    (void)st, (void)a;
    return launch(CU_OP_ATTENTION);
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    put('|');
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m) {
    (void)s, (void)m;
    if (refuse_capture) return cudaErrorStreamCaptureUnsupported;
    capturing = true;
    put('[');
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    (void)s;
    capturing = false;
    put(']');
    *g = (cudaGraph_t)&dummy_graph;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags) {
    (void)g, (void)flags;
    n_instantiate++;
    *e = (cudaGraphExec_t)&dummy_exec;
    return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t e, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info) {
    (void)e, (void)g, (void)info;
    n_update++;
    return refuse_update ? cudaErrorGraphExecUpdateFailure : cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    (void)e, (void)s;
    n_launch_graph++;
    put('*');
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    (void)g;
    return cudaSuccess;
}

/* ---- a pass as cuda_backend.c issues it, in miniature ---- */

static float buf[64];

/* embed, then per layer rmsnorm, matmul, attention (n_split), add; then
 * the logits' gather and the flush as cu_logits does */
static void pass(cuda_state *s, int32_t n, int32_t n_layer, int32_t n_split) {
    kr_cu_pass_start(s, n);
    cu_op *o = kr_cu_op(s, CU_OP_EMBED, "the embedding lookup");
    o->u.mm.n = n;
    o->u.mm.y = buf;
    kr_cu_issue(s, o);
    for (int32_t l = 0; l < n_layer; l++) {
        o = kr_cu_op(s, CU_OP_RMSNORM, "rmsnorm");
        o->u.vec.y = buf, o->u.vec.n_rows = n, o->u.vec.dim = 8, o->u.vec.eps = 1e-6f;
        kr_cu_issue(s, o);
        o = kr_cu_op(s, CU_OP_MATMUL, "a matrix product");
        o->u.mm.n = n, o->u.mm.n_rows = 8, o->u.mm.n_cols = 8;
        kr_cu_issue(s, o);
        o = kr_cu_op(s, CU_OP_ATTENTION, "attention");
        o->u.attn.n_entries = n, o->u.attn.layer = l, o->u.attn.n_split = n_split, o->u.attn.scale = 0.125f;
        kr_cu_issue(s, o);
        o = kr_cu_op(s, CU_OP_ADD, "a residual add");
        o->u.vec.n_rows = 8 * n;
        kr_cu_issue(s, o);
    }
    o = kr_cu_op(s, CU_OP_GATHER, "gathering the output rows");
    o->u.gather.n = n;
    kr_cu_issue(s, o);
    kr_cu_flush(s, true);
}

static cuda_state *fresh(const char *graphs, bool sync_debug) {
    if (graphs)
        setenv("KARA_CUDA_GRAPHS", graphs, 1);
    else
        unsetenv("KARA_CUDA_GRAPHS");
    cuda_state *s = calloc(1, sizeof *s);
    s->stream = (cudaStream_t)&dummy_exec;
    s->sync_debug = sync_debug;
    kr_cu_graph_init(s, 2);
    trace[0] = '\0';
    n_instantiate = n_update = n_launch_graph = 0;
    return s;
}

static void done(cuda_state *s) {
    kr_cu_graph_free(s);
    free(s);
}

/* The letters of a direct pass of two layers: the embedding (A), per layer rmsnorm (C), matmul (B),
 * attention (J) and add (E), the gather (I); under capture in lower case; * launches the graph. */
#define DIRECT2 "ACBJECBJEI"
#define CAPTURED2 "[acbjecbjei]*"

int main(void) {
    char what[160];
    /* off: at once, every time */
    static const char *const off[] = {NULL, "0", "yes"};
    for (int i = 0; i < 3; i++) {
        cuda_state *s = fresh(off[i], false);
        pass(s, 1, 2, 1);
        pass(s, 1, 2, 1);
        snprintf(what, sizeof what, "KARA_CUDA_GRAPHS=%s: launched directly", off[i] ? off[i] : "(unset)");
        expect(!strcmp(trace, DIRECT2 DIRECT2) && !s->graphs, what, trace);
        done(s);
    }
    cuda_state *s = fresh("1", true);
    pass(s, 1, 2, 1);
    expect(!strcmp(trace, "A|C|B|J|E|C|B|J|E|I|") && !s->graphs, "sync debug: graphs off, a wait after each", trace);
    done(s);

    /* on: capture, replay, re-capture */
    s = fresh("1", false);
    pass(s, 1, 2, 1);
    expect(!strcmp(trace, CAPTURED2) && n_instantiate == 1 && s->n_captures == 1, "first pass captured and launched",
           trace);
    trace[0] = '\0';
    pass(s, 1, 2, 1);
    pass(s, 1, 2, 1);
    expect(!strcmp(trace, "**") && s->n_replays == 2, "the same pass twice: replayed, no launcher called", trace);
    trace[0] = '\0';
    pass(s, 1, 2, 2);
    expect(!strcmp(trace, CAPTURED2) && n_update == 1 && n_instantiate == 1 && s->n_captures == 2,
           "another split count: captured again, the graph updated", trace);
    trace[0] = '\0';
    pass(s, 1, 2, 2);
    expect(!strcmp(trace, "*"), "and then replayed", trace);
    trace[0] = '\0';
    refuse_update = true;
    pass(s, 2, 2, 2);
    refuse_update = false;
    expect(!strcmp(trace, CAPTURED2) && n_instantiate == 2, "two entries, update refused: re-instantiated", trace);
    trace[0] = '\0';
    pass(s, KR_CUDA_GEMV_MAX + 1, 2, 1);
    expect(!strcmp(trace, DIRECT2), "a prefill-sized pass: launched directly", trace);

    /* a flush in the middle: the record first, then directly, no graph */
    trace[0] = '\0';
    kr_cu_pass_start(s, 1);
    cu_op *o = kr_cu_op(s, CU_OP_EMBED, "the embedding lookup");
    kr_cu_issue(s, o);
    o = kr_cu_op(s, CU_OP_MATMUL, "a matrix product");
    kr_cu_issue(s, o);
    expect(trace[0] == '\0', "recorded launches wait", trace);
    kr_cu_flush(s, false);
    put('S'); /* the policy's own work on the stream */
    o = kr_cu_op(s, CU_OP_GATHER, "gathering the output rows");
    kr_cu_issue(s, o);
    kr_cu_flush(s, true);
    expect(!strcmp(trace, "ABSI"), "a mid-pass flush: the record, the policy's work, the rest directly", trace);

    /* a launcher failing under capture: reported once, from the direct run */
    trace[0] = '\0';
    fail_kind = CU_OP_ATTENTION;
    pass(s, 3, 2, 1);
    fail_kind = -1;
    expect(!strcmp(trace, "[acbjecbjei]" DIRECT2) && s->err == KR_CUDA_ERR_ARG && !strcmp(s->err_what, "attention"),
           "a launcher failing under capture: no graph launched, the error from the direct run", trace);
    s->err = 0;
    trace[0] = '\0';
    pass(s, 3, 2, 1);
    expect(!strcmp(trace, CAPTURED2) && s->graphs, "graphs still on after a launcher's error", trace);

    /* a capture refused: directly, and graphs off from then on */
    trace[0] = '\0';
    refuse_capture = true;
    pass(s, 4, 2, 1);
    refuse_capture = false;
    expect(!strcmp(trace, DIRECT2) && !s->graphs && !s->err, "a refused capture: run directly, graphs off", trace);
    trace[0] = '\0';
    pass(s, 4, 2, 1);
    expect(!strcmp(trace, DIRECT2), "and stay off", trace);
    done(s);

    /* a full record (2 layers' worth: 24 * 2 + 16) launches what it holds and goes on directly */
    s = fresh("1", false);
    pass(s, 1, 20, 1);
    expect(trace[0] == 'A' && !strchr(trace, '[') && !strchr(trace, '*') && strlen(trace) == 1 + 4 * 20 + 1,
           "a record too small for the pass: every launch direct, in order", trace);
    done(s);

    printf("host_cuda_graph: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
