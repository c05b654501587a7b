/* bench_onednn.c - `kara bench --onednn`: the prefill products of a Qwen3
 * model (batch 512) through oneDNN's matmul, next to Kara's own kernels on
 * the same shapes, so the faster one can be chosen per shape and type (see
 * docs/history/PERFORMANCE-2026-12.md). oneDNN has no grouped (per-32-element) weight
 * scales in this version, so it is timed on what it can do: f32 and bf16
 * weights (the Q* blocks dequantized once) and s8 weights with one scale
 * per output column (an upper bound of its int8 speed: the block scales of
 * Q8_0/Q4_0/Q4_K would still have to be applied). Weights use the layout
 * oneDNN prefers (format_tag_any), its best case. Built only when CMake finds
 * libdnnl (KARA_HAVE_ONEDNN). */
#include "bench_kernels.h"
#include "monotonic_clock.h"

#include <stdio.h>

#ifdef KARA_HAVE_ONEDNN
#include <dnnl.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define DNNL_OK(call)                                                                                                  \
    do {                                                                                                               \
        dnnl_status_t s_ = (call);                                                                                     \
        if (s_ != dnnl_success) {                                                                                      \
            fprintf(stderr, "kara bench --onednn: %s failed (%d)\n", #call, (int)s_);                                  \
            return -1.0;                                                                                               \
        }                                                                                                              \
    } while (0)

/* Seconds (best of reps) for C[m][n] = A[m][k] . B[k][n] with the given
 * source and weight types, f32 output. */
static double time_matmul(dnnl_engine_t eng, dnnl_stream_t st, dnnl_data_type_t at, dnnl_data_type_t bt, int64_t m,
                          int64_t n, int64_t k, int reps) {
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
    DNNL_OK(dnnl_memory_desc_init_by_tag(&a_md, 2, ad, at, dnnl_ab));
    DNNL_OK(dnnl_memory_desc_init_by_tag(&b_md, 2, bd, bt, dnnl_format_tag_any));
    DNNL_OK(dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t desc;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, NULL, &c_md));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    float *scales = NULL;
    if (bt == dnnl_s8) { /* one scale per output column, fixed at creation */
        scales = malloc(sizeof(float) * (size_t)n);
        if (!scales) return -1.0;
        for (int64_t i = 0; i < n; i++) scales[i] = 0.01f;
        DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, n, 1 << 1, scales));
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, attr, eng, NULL));
    dnnl_primitive_t prim;
    DNNL_OK(dnnl_primitive_create(&prim, pd));
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t A, B, C;
    DNNL_OK(dnnl_memory_create(&A, &a_md, eng, DNNL_MEMORY_ALLOCATE));
    DNNL_OK(dnnl_memory_create(&B, wmd, eng, DNNL_MEMORY_ALLOCATE));
    DNNL_OK(dnnl_memory_create(&C, &c_md, eng, DNNL_MEMORY_ALLOCATE));
    void *p;
    dnnl_memory_get_data_handle(A, &p);
    memset(p, 1, dnnl_memory_desc_get_size(&a_md));
    dnnl_memory_get_data_handle(B, &p);
    memset(p, 1, dnnl_memory_desc_get_size(wmd));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}};
    const int nargs = 3;
    double best = 1e30;
    for (int r = -1; r < reps; r++) {
        double t0 = kr_monotonic_seconds();
        DNNL_OK(dnnl_primitive_execute(prim, st, nargs, args));
        DNNL_OK(dnnl_stream_wait(st));
        double dt = kr_monotonic_seconds() - t0;
        if (r >= 0 && dt < best) best = dt;
    }
    dnnl_memory_destroy(A);
    dnnl_memory_destroy(B);
    dnnl_memory_destroy(C);
    free(scales);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return best;
}

int kr_bench_onednn(int threads, int m) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&st, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "kara bench --onednn: no oneDNN CPU engine\n");
        return 1;
    }
    static const struct {
        const char *name;
        int64_t n, k;
    } shapes[] = {{"ffn_up_0.6b", 3072, 1024},
                  {"ffn_down_0.6b", 1024, 3072},
                  {"ffn_up_1.7b", 6144, 2048},
                  {"ffn_down_1.7b", 2048, 6144}};
    static const struct {
        const char *name;
        dnnl_data_type_t a, b;
    } types[] = {{"f32", dnnl_f32, dnnl_f32}, {"bf16", dnnl_bf16, dnnl_bf16}, {"u8s8", dnnl_u8, dnnl_s8}};
    const dnnl_version_t *v = dnnl_version();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            double sec = time_matmul(eng, st, types[t].a, types[t].b, m, shapes[s].n, shapes[s].k, 5);
            if (sec <= 0) continue;
            printf("{\"test\":\"onednn\",\"version\":\"%d.%d.%d\",\"type\":\"%s\",\"shape\":\"%s\",\"rows\":%lld,"
                   "\"cols\":%lld,\"batch\":%d,\"threads\":%d,\"us\":%.1f,\"gop_s\":%.1f}\n",
                   v->major, v->minor, v->patch, types[t].name, shapes[s].name, (long long)shapes[s].n,
                   (long long)shapes[s].k, m, threads, sec * 1e6,
                   2.0 * (double)m * shapes[s].n * shapes[s].k / sec * 1e-9);
            fflush(stdout);
        }
    }
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return 0;
}
#else
int kr_bench_onednn(int threads, int m) {
    (void)threads;
    (void)m;
    fprintf(stderr, "kara bench --onednn: this build has no oneDNN (install libdnnl-dev and reconfigure)\n");
    return 1;
}
#endif
