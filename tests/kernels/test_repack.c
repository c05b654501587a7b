/*
 * test_repack.c - the load-time weight layouts (kernels.h: rows interleaved
 * 16 at a time) and every ISA's matmul on them.
 *
 *   - repacking then copying each row back gives the file's blocks byte for
 *     byte, and rows past the last whole group of 16 keep the file's bytes;
 *     shapes a layout cannot take are refused and left untouched;
 *   - each ISA's matmul on the repacked matrix equals the scalar vec_dot of
 *     the original rows within 1e-5 of sum |w x| (the order of the sums
 *     differs), for batches from 1 to 64 and 1, 2, 3 and 5 threads, with
 *     and without rows past the last whole group, and writes nothing beyond
 *     n_rows or n_batch;
 *   - a row's products have the same bits whatever the batch and thread
 *     split (batched decode and prefill agree with decoding alone).
 */
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rng_gauss(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    const float u1 = ((uint32_t)(rng_state >> 16) + 0.5f) / 4294967296.0f;
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    const float u2 = ((uint32_t)(rng_state >> 16) + 0.5f) / 4294967296.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* Every layout and the file type it holds. */
static const kr_type layouts[][2] = {
    {KR_TYPE_Q4_K_X16, KR_TYPE_Q4_K},
    {KR_TYPE_Q6_K_X16, KR_TYPE_Q6_K},
    {KR_TYPE_Q4_0_X16, KR_TYPE_Q4_0},
    {KR_TYPE_F32_X16, KR_TYPE_F32},
};
#define N_LAYOUTS (sizeof layouts / sizeof layouts[0])

enum { MAX_ROWS = 48, MAXB = 64, LDY = MAX_ROWS + 3 };

typedef struct matrix {
    kr_type src, lt;
    int rows; /* 48: three whole groups; 44: two and 12 rows past them */
    int64_t cols;
    size_t wrow, xrow;
    uint8_t *orig, *packed, *x;
    uint8_t *packed_mem; /* packed sits 32 bytes past a 64-byte boundary, as GGUF data may */
    float *want, *tol;
} matrix;

static bool make_matrix(matrix *m, kr_type lt, kr_type src, int rows, int64_t cols) {
    const kr_kernels *ref = kr_kernels_for_isa(KR_ISA_SCALAR);
    const kr_type vt = kr_type_get(src)->vec_dot_type;
    m->src = src;
    m->lt = lt;
    m->rows = rows;
    m->cols = cols;
    m->wrow = kr_type_row_size(src, cols);
    m->xrow = kr_type_row_size(vt, cols);
    m->orig = malloc(m->wrow * MAX_ROWS);
    m->packed_mem = aligned_alloc(64, (m->wrow * MAX_ROWS + 127) / 64 * 64);
    m->packed = m->packed_mem + 32;
    m->x = malloc(m->xrow * MAXB);
    m->want = malloc(sizeof(float) * MAXB * MAX_ROWS);
    m->tol = malloc(sizeof(float) * MAXB * MAX_ROWS);
    float *f = malloc(sizeof(float) * (size_t)cols), *wd = malloc(sizeof(float) * (size_t)cols * MAX_ROWS);
    float *xd = malloc(sizeof(float) * (size_t)cols);
    for (int r = 0; r < m->rows; r++) {
        for (int64_t c = 0; c < cols; c++) f[c] = 0.05f * rng_gauss();
        kr_quantize_row(src, f, m->orig + m->wrow * r, cols);
        kr_dequantize_row(src, m->orig + m->wrow * r, wd + cols * r, cols);
    }
    for (int b = 0; b < MAXB; b++) {
        for (int64_t c = 0; c < cols; c++) f[c] = rng_gauss();
        ref->from_float[vt](f, m->x + m->xrow * b, cols);
        kr_dequantize_row(vt, m->x + m->xrow * b, xd, cols);
        for (int r = 0; r < m->rows; r++) {
            ref->vec_dot[src](cols, &m->want[b * m->rows + r], m->orig + m->wrow * r, m->x + m->xrow * b);
            double s = 0;
            for (int64_t c = 0; c < cols; c++) s += fabs((double)wd[cols * r + c] * xd[c]);
            m->tol[b * m->rows + r] = (float)(1e-5 * s);
        }
    }
    free(f);
    free(wd);
    free(xd);
    memcpy(m->packed, m->orig, m->wrow * m->rows);
    kr_type t = src;
    return kr_repack_matrix(&t, lt, m->packed, m->rows, cols) && t == lt;
}

static void free_matrix(matrix *m) {
    free(m->orig);
    free(m->packed_mem);
    free(m->x);
    free(m->want);
    free(m->tol);
}

/* Rows copied back equal the file's blocks; bad shapes are refused. */
static void test_round_trip(const matrix *m) {
    const char *name = kr_type_get(m->lt)->name;
    CHECK(kr_layout_source(m->lt) == m->src);
    CHECK(kr_layout_source(m->src) == m->src);
    CHECK_MSG(memcmp(m->packed, m->orig, m->wrow * m->rows) != 0, "%s: repacking changed nothing", name);
    const int64_t nblk = m->cols / kr_type_get(m->src)->block_size;
    uint8_t *row = malloc(m->wrow);
    int bad = 0;
    const int64_t grouped = kr_layout_group_rows(m->lt, m->rows);
    CHECK(grouped == m->rows / 16 * 16 && kr_layout_group_rows(m->src, m->rows) == 0);
    for (int r = 0; r < grouped; r++) {
        kr_repacked_blocks(m->lt, m->packed, m->wrow, r, 0, nblk, row);
        bad += memcmp(row, m->orig + m->wrow * r, m->wrow) != 0;
        /* a sub-range of blocks too */
        kr_repacked_blocks(m->lt, m->packed, m->wrow, r, 1, nblk - 1, row);
        const size_t bs = (size_t)kr_type_get(m->src)->type_size;
        bad += memcmp(row, m->orig + m->wrow * r + bs, m->wrow - bs) != 0;
    }
    CHECK_MSG(bad == 0, "%s cols=%lld: %d rows differ after the way back", name, (long long)m->cols, bad);
    CHECK_MSG(memcmp(m->packed + m->wrow * grouped, m->orig + m->wrow * grouped, m->wrow * (m->rows - grouped)) == 0,
              "%s: rows past the last whole group must keep the file's bytes", name);
    /* a row lookup reads every row, in a group or past them, as the file's */
    float *want = malloc(sizeof(float) * m->cols), *got = malloc(sizeof(float) * m->cols);
    int bad_rows = 0;
    for (int r = 0; r < m->rows; r++) {
        kr_dequantize_row(m->src, m->orig + m->wrow * r, want, m->cols);
        kr_dequantize_matrix_row(m->lt, m->packed, m->wrow, m->rows, r, m->cols, got);
        bad_rows += memcmp(want, got, sizeof(float) * m->cols) != 0;
    }
    CHECK_MSG(bad_rows == 0, "%s rows=%d: %d rows read back differently", name, m->rows, bad_rows);
    free(want);
    free(got);
    free(row);

    uint8_t *copy = malloc(m->wrow * m->rows);
    memcpy(copy, m->orig, m->wrow * m->rows);
    kr_type t = m->src;
    CHECK_MSG(!kr_repack_matrix(&t, m->lt, copy, 15, m->cols) && t == m->src &&
                  memcmp(copy, m->orig, m->wrow * m->rows) == 0,
              "%s: 15 rows (not one whole group) must be refused untouched", name);
    t = KR_TYPE_Q8_0;
    CHECK_MSG(!kr_repack_matrix(&t, m->lt, copy, m->rows, m->cols) && t == KR_TYPE_Q8_0,
              "%s: a matrix of another type must be refused", name);
    t = m->src;
    CHECK_MSG(!kr_repack_matrix(&t, m->src, copy, m->rows, m->cols) && t == m->src, "%s: a file type is not a layout",
              name);
    if (m->src == KR_TYPE_F32) { /* F32's kernels take columns in pairs */
        CHECK_MSG(!kr_repack_matrix(&t, m->lt, copy, m->rows, 999) && t == m->src &&
                      memcmp(copy, m->orig, m->wrow * m->rows) == 0,
                  "%s: 999 columns (an odd number) must be refused untouched", name);
    }
    free(copy);
}

/* One ISA's matmul on the repacked matrix: values, padding, and bits
 * independent of batch size and thread split. */
static void test_matmul(const kr_kernels *k, const matrix *m) {
    static const int nths[] = {1, 2, 3, 5};
    float *got = malloc(sizeof(float) * MAXB * LDY), *one = malloc(sizeof(float) * MAXB * LDY);
    for (int b = 0; b < MAXB; b++) {
        k->matmul(k, m->lt, m->packed, m->wrow, m->rows, m->cols, m->x + m->xrow * b, m->xrow, 1, one + b * LDY, LDY, 0,
                  1);
    }
    int bad = 0, bad_pad = 0, bad_bits = 0;
    for (int nb = 1; nb <= MAXB; nb += nb < 9 ? 1 : (nb < 33 ? 8 : 31)) {
        for (size_t ni = 0; ni < sizeof nths / sizeof nths[0]; ni++) {
            for (int i = 0; i < MAXB * LDY; i++) got[i] = NAN;
            for (int ith = 0; ith < nths[ni]; ith++) {
                k->matmul(k, m->lt, m->packed, m->wrow, m->rows, m->cols, m->x, m->xrow, nb, got, LDY, ith, nths[ni]);
            }
            for (int b = 0; b < MAXB; b++) {
                for (int r = 0; r < LDY; r++) {
                    const float g = got[b * LDY + r];
                    if (b >= nb || r >= m->rows) {
                        bad_pad += !isnan(g);
                        continue;
                    }
                    if (!(fabsf(g - m->want[b * m->rows + r]) <= m->tol[b * m->rows + r] + 1e-30f)) {
                        if (bad++ < 3)
                            fprintf(stderr, "  %s %s b=%d r=%d nb=%d nth=%d: %.9g vs %.9g\n", k->name,
                                    kr_type_get(m->lt)->name, b, r, nb, nths[ni], g, m->want[b * m->rows + r]);
                    }
                    bad_bits += memcmp(&g, &one[b * LDY + r], sizeof g) != 0;
                }
            }
        }
    }
    const char *name = kr_type_get(m->lt)->name;
    CHECK_MSG(bad == 0, "%s matmul %s cols=%lld: %d cells differ from the scalar dot of the file rows", k->name, name,
              (long long)m->cols, bad);
    CHECK_MSG(bad_pad == 0, "%s matmul %s: %d cells written beyond n_rows or n_batch", k->name, name, bad_pad);
    CHECK_MSG(bad_bits == 0, "%s matmul %s cols=%lld: %d cells differ in bits from the row's product alone", k->name,
              name, (long long)m->cols, bad_bits);
    free(got);
    free(one);
}

int main(void) {
    const kr_kernels *best = kr_kernels_get();
    printf("  best table %s: Q4_K -> %s\n", best->name,
           best->repack[KR_TYPE_Q4_K] ? kr_type_get(best->repack[KR_TYPE_Q4_K])->name : "(file layout)");
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        const kr_kernels *k = kr_kernels_for_isa((kr_isa)i);
        for (int t = 0; k && t < KR_TYPE_COUNT; t++) {
            if (k->repack[t]) {
                CHECK_MSG(kr_layout_source(k->repack[t]) == (kr_type)t, "%s: repack[%s] holds another type", k->name,
                          kr_type_get((uint32_t)t)->name);
            }
        }
    }
    for (size_t l = 0; l < N_LAYOUTS; l++) {
        /* 4 blocks, and 9 (one past a multiple of 8); F32 also 172 columns
         * (stories260K's FFN: pairs past the last 4 and 16); 48 rows, and 44 */
        const int64_t bs = kr_type_get(layouts[l][1])->block_size;
        const int64_t widths[3] = {4 * bs < 1024 ? 1024 : 4 * bs, 9 * (bs < 256 ? 256 : bs), 172};
        const int n_widths = layouts[l][1] == KR_TYPE_F32 ? 3 : 2;
        for (int wi = 0; wi < 2 * n_widths; wi++) {
            matrix m;
            if (!CHECK_MSG(
                    make_matrix(&m, layouts[l][0], layouts[l][1], wi < n_widths ? MAX_ROWS : 44, widths[wi % n_widths]),
                    "repack %s failed", kr_type_get(layouts[l][0])->name)) {
                free_matrix(&m);
                continue;
            }
            test_round_trip(&m);
            for (int i = 0; i < KR_ISA_COUNT; i++) {
                const kr_kernels *k = kr_kernels_for_isa((kr_isa)i);
                if (k) test_matmul(k, &m);
            }
            free_matrix(&m);
        }
    }
    return kr_test_finish();
}
