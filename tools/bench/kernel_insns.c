/*
 * kernel_insns.c - one matmul of the kernel table, for counting its
 * instructions under an emulator (tools/bench/neon_insns.sh): the speed
 * proxy of kernels that cannot be timed on this machine (NEON under
 * qemu-aarch64).
 *   kara_kernel_insns TYPE LAYOUT ROWS COLS BATCH RUN
 * TYPE F32, Q4_0, Q4_K or Q6_K; LAYOUT file or x16; RUN 1 runs the matmul, 0 does
 * everything else (the weights, their repacking and the activations), so
 * that the difference of two counts is the matmul's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: kara_kernel_insns F32|Q4_0|Q4_K|Q6_K file|x16 ROWS COLS BATCH RUN(0|1)\n");
        return 64;
    }
    kr_type t = !strcmp(argv[1], "Q4_0") ? KR_TYPE_Q4_0
        : !strcmp(argv[1], "Q4_K")       ? KR_TYPE_Q4_K
        : !strcmp(argv[1], "Q6_K")       ? KR_TYPE_Q6_K
        : !strcmp(argv[1], "F32")        ? KR_TYPE_F32
                                         : KR_TYPE_COUNT;
    const kr_type x16 = t == KR_TYPE_Q4_0 ? KR_TYPE_Q4_0_X16
        : t == KR_TYPE_Q4_K               ? KR_TYPE_Q4_K_X16
        : t == KR_TYPE_Q6_K               ? KR_TYPE_Q6_K_X16
                                          : KR_TYPE_F32_X16;
    const int64_t rows = atoll(argv[3]), cols = atoll(argv[4]), batch = atoll(argv[5]);
    const bool run = atoi(argv[6]) != 0, pack = !strcmp(argv[2], "x16");
    const int64_t min_cols = t == KR_TYPE_F32 ? 16 : 256;
    if (t == KR_TYPE_COUNT || rows < 16 || cols < min_cols || cols % min_cols || batch < 1 || batch > 64) {
        fprintf(stderr, "kara_kernel_insns: bad arguments\n");
        return 64;
    }
    const kr_kernels *k = kr_kernels_get();
    const kr_type_info *ti = kr_type_get(t);
    const kr_type vt = ti->vec_dot_type;
    const size_t wrow = (size_t)(cols / ti->block_size) * ti->type_size;
    const size_t xrow = (size_t)(cols / kr_type_get(vt)->block_size) * kr_type_get(vt)->type_size;
    uint8_t *w = malloc(wrow * (size_t)rows), *x = malloc(xrow * (size_t)batch);
    float *f = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)(rows * batch));
    if (!w || !x || !f || !y) return 70;
    /* random weight bytes with every block scale set to a small f16 (the
     * reference quantizer's search would cost more instructions to emulate
     * than the products; the kernels do not care what the values are) */
    uint32_t s = 12345;
    for (size_t i = 0; i < wrow * (size_t)rows; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = (uint8_t)(s >> 24);
    }
    for (int64_t r = 0; t == KR_TYPE_F32 && r < rows; r++) /* F32: values in [-1, 1), not random bits */
        for (int64_t c = 0; c < cols; c++) {
            s = s * 1664525u + 1013904223u;
            ((float *)w)[r * cols + c] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23);
        }
    for (int64_t r = 0; t != KR_TYPE_F32 && r < rows; r++)
        for (int64_t b = 0; b < cols / ti->block_size; b++) {
            uint8_t *blk = w + wrow * (size_t)r + (size_t)b * ti->type_size;
            const uint16_t h = 0x2000; /* 2^-7 */
            if (t == KR_TYPE_Q6_K) {   /* d last */
                memcpy(blk + ti->type_size - 2, &h, 2);
                continue;
            }
            memcpy(blk, &h, 2); /* Q4_0: d; Q4_K: d, then dmin */
            if (t == KR_TYPE_Q4_K) memcpy(blk + 2, &h, 2);
        }
    for (int64_t r = 0; r < batch; r++) {
        for (int64_t c = 0; c < cols; c++) {
            s = s * 1664525u + 1013904223u;
            f[c] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23);
        }
        kr_quantize_row(vt, f, x + xrow * (size_t)r, cols);
    }
    if (pack && !kr_repack_matrix(&t, x16, w, rows, cols)) {
        fprintf(stderr, "kara_kernel_insns: cannot repack\n");
        return 70;
    }
    double sum = 0;
    if (run) {
        k->matmul(k, t, w, wrow, rows, cols, x, xrow, batch, y, rows, 0, 1);
        for (int64_t i = 0; i < rows * batch; i++) sum += y[i];
    }
    printf("%s %s isa=%s %lldx%lld batch %lld: sum %.6g\n", argv[1], pack ? "x16" : "file", k->name, (long long)rows,
           (long long)cols, (long long)batch, sum);
    free(w);
    free(x);
    free(f);
    free(y);
    return 0;
}
