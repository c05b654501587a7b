/* bench_kernels.c - `kara bench --kernels` and `kara bench --membw`: the
 * bandwidth side of the roofline. --membw times a plain streaming read of a
 * buffer much larger than the caches; --kernels times the matrix-vector
 * product (decode) and the matrix-matrix product (prefill, 64 rows) of the
 * kernel table on the weight shapes of a Qwen3 model, per weight type, and
 * prints the weight bytes streamed per second next to it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_kernels.h"
#include "kernels.h"
#include "monotonic_clock.h"

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* This thread's index and the region's size (0 and 1 without OpenMP). */
static void thread_ids(int *ith, int *nth) {
#ifdef _OPENMP
    *ith = omp_get_thread_num();
    *nth = omp_get_num_threads();
#else
    *ith = 0;
    *nth = 1;
#endif
}

int kr_bench_membw(int threads) {
    const size_t bytes = (size_t)1 << 30;
    const size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(bytes);
    if (!buf) {
        fprintf(stderr, "kara bench --membw: cannot allocate 1 GiB\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 1e30;
    uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = kr_monotonic_seconds();
        uint64_t total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (size_t i = 0; i < n; i++) total += buf[i];
        double dt = kr_monotonic_seconds() - t0;
        sink += total;
        if (dt < best) best = dt;
    }
    printf("{\"test\":\"membw\",\"threads\":%d,\"bytes\":%zu,\"gb_s_best\":%.2f,\"check\":%llu}\n", threads, bytes,
           (double)bytes / best * 1e-9, (unsigned long long)(sink & 1));
    free(buf);
    return 0;
}

typedef struct shape {
    const char *name;
    int64_t rows, cols;
} shape;

/* One weight type on one shape: quantize random rows once, then time the
 * product with 1 activation row (decode) and with n_batch rows (prefill). */
static void bench_one(const kr_kernels *k, kr_type t, const shape *s, int threads, int n_batch, bool file_layout) {
    const kr_type_info *ti = kr_type_get(t);
    if (s->cols % ti->block_size != 0) return; /* e.g. K-quant blocks of 256 on the 128-column shapes */
    const kr_type vt = ti->vec_dot_type;
    const size_t wrb = kr_type_row_size(t, s->cols), xrb = kr_type_row_size(vt, s->cols);
    uint8_t *w = malloc(wrb * (size_t)s->rows);
    uint8_t *x = malloc(xrb * (size_t)n_batch);
    float *row = malloc(sizeof(float) * (size_t)s->cols);
    float *y = malloc(sizeof(float) * (size_t)s->rows * (size_t)n_batch);
    if (!w || !x || !row || !y) goto done;
    uint32_t seed = 7;
    for (int64_t r = 0; r < s->rows; r++) {
        for (int64_t c = 0; c < s->cols; c++) row[c] = frand(&seed);
        kr_quantize_row(t, row, w + (size_t)r * wrb, s->cols);
    }
    for (int b = 0; b < n_batch; b++) {
        for (int64_t c = 0; c < s->cols; c++) row[c] = frand(&seed);
        k->from_float[vt](row, x + (size_t)b * xrb, s->cols);
    }
    /* the layout the loader would give these weights (kr_kernels.repack) */
    kr_type lt = t;
    if (k->repack[t] && !file_layout) (void)kr_repack_matrix(&lt, k->repack[t], w, s->rows, s->cols);
    const size_t wbytes = wrb * (size_t)s->rows;
    for (int pass = 0; pass < 2; pass++) {
        const int nb = pass == 0 ? 1 : n_batch;
        /* enough repetitions for ~0.3 s of decode work */
        int reps = (int)(3e9 / (double)wbytes / (pass == 0 ? 1.0 : 4.0));
        if (reps < 3) reps = 3;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = kr_monotonic_seconds();
#pragma omp parallel num_threads(threads)
            {
                int ith, nt;
                thread_ids(&ith, &nt);
                k->matmul(k, lt, w, wrb, s->rows, s->cols, x, xrb, nb, y, s->rows, ith, nt);
            }
            double dt = kr_monotonic_seconds() - t0;
            if (dt < best) best = dt;
        }
        const double gops = 2.0 * (double)s->rows * (double)s->cols * nb / best * 1e-9;
        printf("{\"test\":\"kernel\",\"isa\":\"%s\",\"type\":\"%s\",\"layout\":\"%s\",\"shape\":\"%s\",\"rows\":%lld,"
               "\"cols\":%lld,\"batch\":%d,\"threads\":%d,\"us\":%.1f,\"weight_gb_s\":%.2f,\"gop_s\":%.1f}\n",
               k->name, ti->name, kr_type_get(lt)->name, s->name, (long long)s->rows, (long long)s->cols, nb, threads,
               best * 1e6, (double)wbytes / best * 1e-9, gops);
        fflush(stdout);
    }
done:
    free(w);
    free(x);
    free(row);
    free(y);
}

int kr_bench_kernels(int threads, const char *types, int n_batch, bool file_layout) {
    const kr_kernels *k = kr_kernels_get();
    static const shape shapes[] = {
        {"ffn_up_0.6b", 3072, 1024},
        {"ffn_down_0.6b", 1024, 3072},
        {"ffn_up_1.7b", 6144, 2048},
        {"ffn_down_1.7b", 2048, 6144},
        {"output_0.6b", 151936, 1024},
        /* the project's reasoning model (tools/train/model), whose weights stay in cache */
        {"ffn_up_kr1m", 384, 128},
        {"ffn_down_kr1m", 128, 384},
    };
    static const kr_type all[] = {KR_TYPE_Q4_0, KR_TYPE_Q8_0, KR_TYPE_Q4_K, KR_TYPE_Q6_K, KR_TYPE_F16, KR_TYPE_F32};
    for (size_t ti = 0; ti < sizeof all / sizeof all[0]; ti++) {
        const char *name = kr_type_get(all[ti])->name;
        if (types && !strstr(types, name)) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            bench_one(k, all[ti], &shapes[si], threads, n_batch, file_layout);
    }
    return 0;
}
