/*
 * kernels.h - Kara's internal CPU kernel table.
 *
 * Tensor types use GGML's numeric ids so GGUF type fields map directly.
 * Every kernel has a scalar reference in generic/; SIMD versions (x86/avx2_*,
 * x86/avx512_*, arm/neon_*) fill the same table and are tested against it.
 * dispatch.c picks the table once from CPU features, capped by the
 * environment variable KARA_CPU_ISA=scalar|avx2|avx512|neon.
 *
 * Kernels never start threads: work-splitting kernels receive (ith, nth) and
 * process their slice only; the caller runs them inside its thread region.
 */
#ifndef KR_KERNELS_H
#define KR_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- tensor types (GGML ids) ---- */
typedef enum kr_type {
    KR_TYPE_F32 = 0,
    KR_TYPE_F16 = 1,
    KR_TYPE_Q4_0 = 2,
    KR_TYPE_Q4_1 = 3,
    KR_TYPE_Q5_0 = 6,
    KR_TYPE_Q5_1 = 7,
    KR_TYPE_Q8_0 = 8,
    KR_TYPE_Q8_1 = 9,
    KR_TYPE_Q2_K = 10,
    KR_TYPE_Q3_K = 11,
    KR_TYPE_Q4_K = 12,
    KR_TYPE_Q5_K = 13,
    KR_TYPE_Q6_K = 14,
    KR_TYPE_Q8_K = 15,
    KR_TYPE_BF16 = 30,
    /* Internal layouts, never read from a file (ids past GGML's): */
    KR_TYPE_Q4_K_X16 = 40, /* Q4_K, 16 rows interleaved (kernels_cpu/generic/repack.c) */
    KR_TYPE_Q6_K_X16 = 41, /* Q6_K, the same */
    KR_TYPE_Q4_0_X16 = 42, /* Q4_0, the same */
    KR_TYPE_F32_X16 = 43,  /* F32, the same */
    KR_TYPE_COUNT = 44
} kr_type;

#define KR_QK4_0 32
#define KR_QK4_1 32
#define KR_QK5_0 32
#define KR_QK5_1 32
#define KR_QK8_0 32
#define KR_QK8_1 32
#define KR_QK_K 256
#define KR_K_SCALE_SIZE 12

typedef uint16_t kr_fp16;
typedef uint16_t kr_bf16;

/* Block layouts, byte-identical to GGUF/GGML. */
typedef struct {
    kr_fp16 d;
    uint8_t qs[KR_QK4_0 / 2];
} kr_block_q4_0;
typedef struct {
    kr_fp16 d, m;
    uint8_t qs[KR_QK4_1 / 2];
} kr_block_q4_1;
typedef struct {
    kr_fp16 d;
    uint8_t qh[4];
    uint8_t qs[KR_QK5_0 / 2];
} kr_block_q5_0;
typedef struct {
    kr_fp16 d, m;
    uint8_t qh[4];
    uint8_t qs[KR_QK5_1 / 2];
} kr_block_q5_1;
typedef struct {
    kr_fp16 d;
    int8_t qs[KR_QK8_0];
} kr_block_q8_0;
typedef struct {
    kr_fp16 d, s;
    int8_t qs[KR_QK8_1];
} kr_block_q8_1; /* s = d * sum(qs) */
typedef struct {
    kr_fp16 d, dmin;
    uint8_t scales[KR_K_SCALE_SIZE];
    uint8_t qs[KR_QK_K / 2];
} kr_block_q4_K;
typedef struct {
    kr_fp16 d, dmin;
    uint8_t scales[KR_K_SCALE_SIZE];
    uint8_t qh[KR_QK_K / 8];
    uint8_t qs[KR_QK_K / 2];
} kr_block_q5_K;
typedef struct {
    uint8_t ql[KR_QK_K / 2];
    uint8_t qh[KR_QK_K / 4];
    int8_t scales[KR_QK_K / 16];
    kr_fp16 d;
} kr_block_q6_K;
typedef struct {
    float d;
    int8_t qs[KR_QK_K];
    int16_t bsums[KR_QK_K / 16];
} kr_block_q8_K;

/* ---- type traits ---- */
typedef struct kr_type_info {
    const char *name;     /* "F32", "Q4_K", ... */
    int32_t block_size;   /* elements per block (1 for F32/F16/BF16) */
    int32_t type_size;    /* bytes per block */
    bool supported;       /* weights of this type can be used */
    kr_type vec_dot_type; /* format activations are converted to for vec_dot */
    bool internal;        /* a load-time layout of Kara's own, not a GGUF type */
} kr_type_info;

/* Traits of a type id, or NULL for an id GGML does not define or that Kara
 * does not know. */
const kr_type_info *kr_type_get(uint32_t type);
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t kr_type_row_size(kr_type type, int64_t n);

/* ---- scalar conversions (generic/, always available) ---- */
float kr_fp16_to_fp32(kr_fp16 h);
kr_fp16 kr_fp32_to_fp16(float f); /* round to nearest even */
float kr_bf16_to_fp32(kr_bf16 h);
kr_bf16 kr_fp32_to_bf16(float f); /* round to nearest even */

/* Dequantize n elements (a multiple of the block size) of a row. Supported
 * for every type with info->supported and for Q8_0/Q8_1/Q8_K. */
void kr_dequantize_row(kr_type type, const void *x, float *y, int64_t n);
/* Reference quantizer (round-to-nearest as GGML's *_ref functions). Returns
 * false for a type without a quantizer. Supported: F32, F16, BF16, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K. */
bool kr_quantize_row(kr_type type, const float *x, void *y, int64_t n);

/* ---- load-time weight layouts ---- */

/* KR_TYPE_Q4_K_X16: a Q4_K matrix whose rows are taken 16 at a time and,
 * per 256-column block, interleaved so that one 64-byte load holds 4 bytes
 * of each of the 16 rows (the operand of one VPDPBUSD against 4 broadcast
 * activation bytes). Per group of 16 rows and block, 2304 bytes, the same
 * as the 16 GGUF blocks:
 *   d[16], dmin[16] (f16) | the 12 scale bytes as three u32 words, u0[16],
 *   u1[16], u2[16] | qs: 32 chunks of 16 rows x 4 bytes (chunk c holds
 *   bytes 4c..4c+3 of each row's block qs).
 * KR_TYPE_Q6_K_X16 likewise, 3360 bytes per group and block:
 *   d[16] (f16) | scales as pairs: for t < 8, (sc[2t], sc[2t+1]) of each
 *   row | 16 triples of chunks of 16 rows x 4 bytes: for h < 2, c < 8, ql
 *   bytes 64h + 4c, ql bytes 64h + 32 + 4c, qh bytes 32h + 4c.
 * KR_TYPE_Q4_0_X16, 288 bytes per group and 32-column block:
 *   d[16] (f16) | qs: 4 chunks of 16 rows x 4 bytes.
 * KR_TYPE_F32_X16, 64 bytes per group and column: the 16 rows' values of
 *   that column (n_cols must be even: the kernels take columns in pairs).
 * A matrix keeps its row_bytes (144 or 210 per block); rows of a group are
 * no longer contiguous. Only whole groups are interleaved: when n_rows is
 * not a multiple of KR_X16_ROWS, the last n_rows % KR_X16_ROWS rows stay
 * in the file layout after the groups (a table's matmul takes them through
 * the source type's path, kr_matmul_layout_tail). */
#define KR_X16_ROWS 16

/* The rows of an n_rows-row matrix of type t that sit in interleaved
 * groups: 16 * floor(n_rows / 16) for a layout, 0 for a file type. */
int64_t kr_layout_group_rows(kr_type t, int64_t n_rows);

/* The file type a layout holds (KR_TYPE_Q4_K for KR_TYPE_Q4_K_X16); t
 * itself for a file type. */
kr_type kr_layout_source(kr_type t);
/* Copy blocks [b0, b0 + nblk) of row r of a matrix in layout t back to
 * file blocks of its source type at out; r must lie in a whole group
 * (r < kr_layout_group_rows). */
void kr_repacked_blocks(kr_type t, const void *w, size_t row_bytes, int64_t r, int64_t b0, int64_t nblk, void *out);
/* Row r of an n_rows-row matrix of type t (a file type or a layout),
 * n_cols values, dequantized to f32: what a row lookup (token embeddings)
 * reads. */
void kr_dequantize_matrix_row(kr_type t, const void *w, size_t row_bytes, int64_t n_rows, int64_t r, int64_t n_cols,
                              float *out);
/* Rewrite a matrix of *type in place into the layout `to` (the kernel
 * table's repack[*type]) and set *type; returns false, changing nothing, if
 * `to` is not a layout of *type, the shape does not allow it, or memory for
 * 16 rows cannot be had. */
bool kr_repack_matrix(kr_type *type, kr_type to, void *data, int64_t n_rows, int64_t n_cols);

/* ---- the kernel table ---- */
typedef enum kr_isa { KR_ISA_SCALAR = 0, KR_ISA_AVX2 = 1, KR_ISA_AVX512 = 2, KR_ISA_NEON = 3, KR_ISA_COUNT = 4 } kr_isa;

/* out = dot(w_row, x) over n elements; w_row in the weight type, x already
 * converted to that type's vec_dot_type. */
typedef void (*kr_vec_dot_fn)(int64_t n, float *out, const void *w_row, const void *x);
/* Convert n f32 activations into an activation format (F32 copy, F16, BF16,
 * Q8_0, Q8_1, Q8_K). */
typedef void (*kr_from_float_fn)(const float *x, void *y, int64_t n);

typedef struct kr_kernels {
    kr_isa isa;
    const char *name;                           /* "scalar", "avx2", ... */
    kr_vec_dot_fn vec_dot[KR_TYPE_COUNT];       /* indexed by weight type */
    kr_from_float_fn from_float[KR_TYPE_COUNT]; /* indexed by activation type */

    /* Y[b][r] = dot(W row r, X[b]) for b < n_batch and the rows of this
     * thread's slice (rows split evenly into nth parts; whole 16-row groups
     * for the interleaved layouts). W has n_rows rows of
     * w_row_bytes; X holds n_batch activation rows already converted to the
     * weight type's vec_dot_type, x_row_bytes apart; Y rows are ldy floats
     * apart. */
    void (*matmul)(const struct kr_kernels *k, kr_type wtype, const void *w, size_t w_row_bytes, int64_t n_rows,
                   int64_t n_cols, const void *x, size_t x_row_bytes, int64_t n_batch, float *y, int64_t ldy, int ith,
                   int nth);

    /* y = x / sqrt(mean(x^2) + eps) * w  (y may alias x) */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* x = softmax(x), max-subtracted, in place */
    void (*softmax)(float *x, int64_t n);
    /* out = silu(gate) * up  (out may alias gate) */
    void (*silu_mul)(float *out, const float *gate, const float *up, int64_t n);
    /* dot products and y += a*x over f32, and over f16 rows (KV cache) */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    float (*dot_f16_f32)(const kr_fp16 *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n);
    void (*axpy_f16)(float *y, float a, const kr_fp16 *x, int64_t n);
    /* f32 -> f16 row conversion (KV cache writes) */
    void (*f32_to_f16)(kr_fp16 *y, const float *x, int64_t n);
    /* C[i][j] = dot(A row i, B row j) over k elements, for i < m and j < n:
     * A f32 rows lda floats apart; B rows of f16 (b_f16) or f32, ldb bytes
     * apart (e.g. keys in place in the KV cache); C rows ldc floats apart.
     * A small dense product, register-blocked per ISA (the KV scorer's q.k
     * logits); an entry's arithmetic depends only on the data, k, m and n,
     * so equal calls give equal bits. */
    void (*gemm_nt)(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                    int64_t m, int64_t n, int64_t k);
    /* C[i][:k] += sum over j < n of A[i][j] * (B row j)[:k], for i < m: A f32
     * rows lda floats apart, B rows of f16 (b_f16) or f32 ldb bytes apart,
     * C rows ldc floats apart; j runs in order for every element. Attention
     * uses it for probabilities times values over a block of cache slots. */
    void (*gemm_nn_acc)(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, bool b_f16,
                        int64_t m, int64_t n, int64_t k);
    /* Rows of Q8_0 or Q4_0 blocks (a q8_0/q4_0 KV cache) to f32, attention's
     * operand: blocks [b0, b0 + nb) of the n_rows rows at base + r * stride,
     * into out + r * nb * 32. Each value is level * d, one rounding, so every
     * ISA gives kr_dequantize_row's bits. */
    void (*dequant_kv)(kr_type t, const void *base, size_t stride, int64_t n_rows, int64_t b0, int64_t nb, float *out);
    /* Attention over a q8_0 KV cache read in place (no dequantised copy).
     * gemm_nt_q8: C[i][j] = sum over blocks t < nb of d(A_it) d(B_jt)
     * isum(A_it, B_jt), the queries as Q8_0 rows (from_float[KR_TYPE_Q8_0])
     * lda bytes apart, the keys as rows of nb Q8_0 blocks ldb bytes apart:
     * the integer block sums are exact, the float scaling and summing order
     * is the ISA's; an entry depends only on its two rows, so equal calls
     * give equal bits whatever m and n. gemm_nn_acc_q8: gemm_nn_acc with B
     * rows of k / 32 Q8_0 blocks, each value level * d rounded once, so the
     * bits are dequant_kv's followed by this table's gemm_nn_acc. */
    void (*gemm_nt_q8)(float *c, int64_t ldc, const void *a, size_t lda, const void *b, size_t ldb, int64_t m,
                       int64_t n, int64_t nb);
    void (*gemm_nn_acc_q8)(float *c, int64_t ldc, const float *a, int64_t lda, const void *b, size_t ldb, int64_t m,
                           int64_t n, int64_t k);
    /* The load-time layout this table's matmul is fastest on for each weight
     * type (KR_TYPE_Q4_K -> KR_TYPE_Q4_K_X16 on AVX-512), or 0 (F32):
     * keep the file's layout. Every table's matmul accepts every layout. */
    kr_type repack[KR_TYPE_COUNT];
} kr_kernels;

/* The table for this CPU (best ISA, capped by KARA_CPU_ISA), chosen once;
 * thread-safe. Never NULL. */
const kr_kernels *kr_kernels_get(void);
/* The table of one ISA if this machine can run it (and the build has it),
 * else NULL. Tests loop over every ISA with this. */
const kr_kernels *kr_kernels_for_isa(kr_isa isa);
const char *kr_isa_name(kr_isa isa);

/* Per-ISA table builders (dispatch.c calls them; each lives with its ISA). */
void kr_kernels_init_scalar(kr_kernels *k);
void kr_kernels_init_avx2(kr_kernels *k);   /* x86 builds only */
void kr_kernels_init_avx512(kr_kernels *k); /* x86 builds only */
void kr_kernels_init_neon(kr_kernels *k);   /* arm builds only */

#endif /* KR_KERNELS_H */
