/*
 * repack.c - load-time weight layouts (kernels.h): Q4_K, Q6_K, Q4_0 and F32
 * rows interleaved 16 at a time (KARA_TYPE_*_X16), and the way back to file
 * blocks for the kernels that read rows one at a time.
 *
 * Why: a one-row product in the GGUF layout spends, per block of each row,
 * scalar work on its scales, byte shuffles to spread them and a
 * multiply-add per 16-32 columns; with 16 rows side by side the scales of
 * 16 rows are handled with a few vector instructions and every VPDPBUSD
 * works on 4 columns of 16 rows at once. The AVX-512 products
 * (avx512_gemv_x16_*.c) are then no longer bound by their own
 * instructions: they stream the weights from memory near the read
 * bandwidth (docs/history/PERFORMANCE-2026-12.md, "Figures behind the kernels' design
 * choices"). For F32 the gain is the
 * end of the horizontal sums: a row-major dot product of 128-384 columns
 * spends as much on reducing its 16 lanes as on multiplying, while an FMA
 * of a column of 16 rows against a broadcast activation needs none.
 *
 * A layout is a pair of functions: pack up to `unit` consecutive file
 * blocks of each of 16 rows into the group's interleaved blocks of the same
 * total size, and copy one row's block back out. Each layout stores a group's
 * bytes in the order its kernel reads them, so that streaming a matrix
 * stays one sequential stream for the hardware prefetcher.
 */
#include <stdlib.h>

#include "kernels_impl.h"

typedef struct x16_layout {
    kr_type type, source;
    int unit;     /* file blocks per row that one pack call takes at most */
    int multiple; /* n_cols must be a multiple of this many file blocks */
    void (*pack)(const uint8_t *const src[KR_X16_ROWS], int n, uint8_t *dst); /* n <= unit blocks */
    void (*unpack)(const uint8_t *src, int lane, uint8_t *dst);
} x16_layout;

/* ---- Q4_K: d[16], dmin[16] | u0[16] u1[16] u2[16] | qs chunks ---- */

static void pack_q4_K(const uint8_t *const src[KR_X16_ROWS], int n, uint8_t *o) {
    (void)n; /* always 1 */
    for (int r = 0; r < KR_X16_ROWS; r++) {
        const kr_block_q4_K *blk = (const kr_block_q4_K *)src[r];
        memcpy(o + KR_X16_Q4K_D + 2 * r, &blk->d, 2);
        memcpy(o + KR_X16_Q4K_DMIN + 2 * r, &blk->dmin, 2);
        for (int u = 0; u < 3; u++) memcpy(o + KR_X16_Q4K_U0 + 64 * u + 4 * r, blk->scales + 4 * u, 4);
        for (int c = 0; c < 32; c++) memcpy(o + KR_X16_Q4K_QS + 64 * c + 4 * r, blk->qs + 4 * c, 4);
    }
}

static void unpack_q4_K(const uint8_t *o, int r, uint8_t *dst) {
    kr_block_q4_K *blk = (kr_block_q4_K *)dst;
    memcpy(&blk->d, o + KR_X16_Q4K_D + 2 * r, 2);
    memcpy(&blk->dmin, o + KR_X16_Q4K_DMIN + 2 * r, 2);
    for (int u = 0; u < 3; u++) memcpy(blk->scales + 4 * u, o + KR_X16_Q4K_U0 + 64 * u + 4 * r, 4);
    for (int c = 0; c < 32; c++) memcpy(blk->qs + 4 * c, o + KR_X16_Q4K_QS + 64 * c + 4 * r, 4);
}

/* ---- Q6_K: d[16] | scale pairs [8][16][2] | 16 chunk triples ---- */
/* Triple 8h + c (h < 2, c < 8) holds, for the 16 rows, ql bytes 64h + 4c,
 * ql bytes 64h + 32 + 4c and qh bytes 32h + 4c (4 each): the three loads
 * of one kernel step, in the order the kernel reads them. Reading a
 * group's bytes in storage order keeps the hardware prefetcher on one
 * stream; with ql and qh in separate areas a group is read as two streams
 * at once, and a matrix streams from memory far below the read bandwidth. */

static size_t q6_ql_at(int i) /* ql bytes 4i..4i+3 */
{
    const int h = i / 16, c = i % 16;
    return KR_X16_Q6K_Q + 192 * (size_t)(8 * h + c % 8) + 64 * (size_t)(c / 8);
}

static size_t q6_qh_at(int i) /* qh bytes 4i..4i+3 */
{
    return KR_X16_Q6K_Q + 192 * (size_t)i + 128;
}

static void pack_q6_K(const uint8_t *const src[KR_X16_ROWS], int n, uint8_t *o) {
    (void)n; /* always 1 */
    for (int r = 0; r < KR_X16_ROWS; r++) {
        const kr_block_q6_K *blk = (const kr_block_q6_K *)src[r];
        memcpy(o + KR_X16_Q6K_D + 2 * r, &blk->d, 2);
        for (int t = 0; t < 8; t++) memcpy(o + KR_X16_Q6K_SC + 32 * t + 2 * r, blk->scales + 2 * t, 2);
        for (int c = 0; c < 32; c++) memcpy(o + q6_ql_at(c) + 4 * r, blk->ql + 4 * c, 4);
        for (int c = 0; c < 16; c++) memcpy(o + q6_qh_at(c) + 4 * r, blk->qh + 4 * c, 4);
    }
}

static void unpack_q6_K(const uint8_t *o, int r, uint8_t *dst) {
    kr_block_q6_K *blk = (kr_block_q6_K *)dst;
    memcpy(&blk->d, o + KR_X16_Q6K_D + 2 * r, 2);
    for (int t = 0; t < 8; t++) memcpy(blk->scales + 2 * t, o + KR_X16_Q6K_SC + 32 * t + 2 * r, 2);
    for (int c = 0; c < 32; c++) memcpy(blk->ql + 4 * c, o + q6_ql_at(c) + 4 * r, 4);
    for (int c = 0; c < 16; c++) memcpy(blk->qh + 4 * c, o + q6_qh_at(c) + 4 * r, 4);
}

/* ---- Q4_0: d[16] | 4 qs chunks ---- */
static void pack_q4_0(const uint8_t *const src[KR_X16_ROWS], int n, uint8_t *o) {
    (void)n; /* always 1 */
    for (int r = 0; r < KR_X16_ROWS; r++) {
        const kr_block_q4_0 *blk = (const kr_block_q4_0 *)src[r];
        memcpy(o + KR_X16_Q40_D + 2 * r, &blk->d, 2);
        for (int c = 0; c < 4; c++) memcpy(o + KR_X16_Q40_QS + 64 * c + 4 * r, blk->qs + 4 * c, 4);
    }
}

static void unpack_q4_0(const uint8_t *o, int r, uint8_t *dst) {
    kr_block_q4_0 *blk = (kr_block_q4_0 *)dst;
    memcpy(&blk->d, o + KR_X16_Q40_D + 2 * r, 2);
    for (int c = 0; c < 4; c++) memcpy(blk->qs + 4 * c, o + KR_X16_Q40_QS + 64 * c + 4 * r, 4);
}

/* ---- F32: per column, the 16 rows' values ---- */
/* 16 columns per call (a per-value call would cost a second for a large
 * F32 matrix). */
enum { F32_UNIT = 16 };

static void pack_f32(const uint8_t *const src[KR_X16_ROWS], int n, uint8_t *o) {
    for (int r = 0; r < KR_X16_ROWS; r++) {
        for (int c = 0; c < n; c++) memcpy(o + 64 * c + 4 * r, src[r] + 4 * c, 4);
    }
}

static void unpack_f32(const uint8_t *o, int r, uint8_t *dst) { memcpy(dst, o + 4 * r, 4); }

static const x16_layout layouts[] = {
    {KR_TYPE_Q4_K_X16, KR_TYPE_Q4_K, 1, 1, pack_q4_K, unpack_q4_K},
    {KR_TYPE_Q6_K_X16, KR_TYPE_Q6_K, 1, 1, pack_q6_K, unpack_q6_K},
    {KR_TYPE_Q4_0_X16, KR_TYPE_Q4_0, 1, 1, pack_q4_0, unpack_q4_0},
    {KR_TYPE_F32_X16, KR_TYPE_F32, F32_UNIT, 2, pack_f32, unpack_f32}, /* the kernels take columns in pairs */
};

static const x16_layout *layout_of(kr_type t) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        if (layouts[i].type == t) {
            return &layouts[i];
        }
    }
    return NULL;
}

kr_type kr_layout_source(kr_type t) {
    const x16_layout *l = layout_of(t);
    return l ? l->source : t;
}

void kr_repacked_blocks(kr_type t, const void *w, size_t row_bytes, int64_t r, int64_t b0, int64_t nblk, void *out) {
    const x16_layout *l = layout_of(t);
    if (l == NULL) {
        return;
    }
    const size_t bs = (size_t)kr_type_get(l->source)->type_size;
    const uint8_t *g = (const uint8_t *)w + row_bytes * (size_t)(r - r % KR_X16_ROWS);
    for (int64_t i = 0; i < nblk; i++) {
        l->unpack(g + bs * KR_X16_ROWS * (size_t)(b0 + i), (int)(r % KR_X16_ROWS), (uint8_t *)out + bs * (size_t)i);
    }
}

int64_t kr_layout_group_rows(kr_type t, int64_t n_rows) { return layout_of(t) ? n_rows - n_rows % KR_X16_ROWS : 0; }

void kr_dequantize_matrix_row(kr_type t, const void *w, size_t row_bytes, int64_t n_rows, int64_t r, int64_t n_cols,
                              float *out) {
    const kr_type st = kr_layout_source(t);
    if (st == t || r >= kr_layout_group_rows(t, n_rows)) {
        /* a file type, or a row past the last whole group: the file's bytes */
        kr_dequantize_row(st, (const uint8_t *)w + row_bytes * (size_t)r, out, n_cols);
        return;
    }
    _Alignas(64) uint8_t blk[8 * sizeof(kr_block_q6_K)]; /* blocks copied back at a time */
    const kr_type_info *ti = kr_type_get(st);
    const int64_t nb = n_cols / ti->block_size, chunk = (int64_t)(sizeof blk / ti->type_size);
    for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
        const int64_t n = nb - b0 < chunk ? nb - b0 : chunk;
        kr_repacked_blocks(t, w, row_bytes, r, b0, n, blk);
        kr_dequantize_row(st, blk, out + b0 * ti->block_size, n * ti->block_size);
    }
}

bool kr_repack_matrix(kr_type *type, kr_type to, void *data, int64_t n_rows, int64_t n_cols) {
    const x16_layout *l = layout_of(to);
    if (l == NULL || *type != l->source || n_rows < KR_X16_ROWS) {
        return false;
    }
    const kr_type_info *ti = kr_type_get(l->source);
    if (n_cols % ((int64_t)ti->block_size * l->multiple) != 0) {
        return false;
    }
    const size_t row_bytes = kr_type_row_size(l->source, n_cols), bs = (size_t)ti->type_size;
    const size_t group = row_bytes * KR_X16_ROWS;
    uint8_t *tmp = malloc(group);
    if (tmp == NULL) {
        return false;
    }
    for (int64_t r = 0; r + KR_X16_ROWS <= n_rows; r += KR_X16_ROWS) { /* the tail rows stay as they are */
        uint8_t *g = (uint8_t *)data + row_bytes * (size_t)r;
        memcpy(tmp, g, group);
        const int64_t nb = n_cols / ti->block_size;
        for (int64_t b = 0; b < nb; b += l->unit) {
            const uint8_t *src[KR_X16_ROWS];
            for (int i = 0; i < KR_X16_ROWS; i++) src[i] = tmp + row_bytes * (size_t)i + bs * (size_t)b;
            l->pack(src, nb - b < l->unit ? (int)(nb - b) : l->unit, g + bs * KR_X16_ROWS * (size_t)b);
        }
    }
    free(tmp);
    *type = to;
    return true;
}

/* Why a helper: every table's matmul hands the rows past a layout's last
 * whole group (kernels.h) to the file layout's path of the same table, and
 * keeps the groups for its interleaved kernels. One activation row at a
 * time: the file layout's paths change their order of sums with the batch
 * (AVX-512's panel GEMM), and a layout promises each row the bits of its
 * product alone; at most 15 rows, which stay in cache across the calls. */
int64_t kr_matmul_layout_tail(const kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                              int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy,
                              int ith, int nth) {
    const int64_t nf = kr_layout_group_rows(wtype, n_rows);
    if (nf > 0 && nf < n_rows) {
        const uint8_t *tail = (const uint8_t *)w + w_row_bytes * (size_t)nf;
        for (int64_t b = 0; b < n_batch; b++) {
            k->matmul(k, kr_layout_source(wtype), tail, w_row_bytes, n_rows - nf, n_cols,
                      (const uint8_t *)x + x_row_bytes * (size_t)b, x_row_bytes, 1, y + b * ldy + nf, ldy, ith, nth);
        }
        return nf;
    }
    return n_rows;
}
