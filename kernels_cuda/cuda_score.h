/*
 * cuda_score.h - the per-row rules and per-element arithmetic of Kara's
 * window scorer on the device (cuda_score.cu), callable from the host and
 * the device (KR_CU_HD), so tests/unit/test_cuda_math_score.c checks them
 * against runtime/kv/kv_score.c in every build.
 *
 * The scorer (kv_score.h has the definitions): per query head and query
 * row i of the window, a softmax of q_i . k_j / sqrt(d) over a key set,
 * whose probabilities are added to the column sums of the compressible
 * slots j < n_c. Which keys the softmax covers, which one it leaves out
 * and which columns it feeds depend on the mode and on i; that is
 * kr_cu_score_row_plan. Sink keys (window_plus_sinks) come first in every
 * softmax and are never added.
 */
#ifndef KR_CUDA_SCORE_H
#define KR_CUDA_SCORE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_kvquant.h"
#include "kara.h"
#include "kv_modes.h"

/* Query rows per work unit, as the CPU scorer's KR_KV_SCORE_TILE: the same
 * units, so the partial column sums have the same shape. */
#define KR_CU_SCORE_TILE 32

/* One query row's part of the scoring. Entries are window keys; the sinks
 * join every softmax in front of them. */
typedef struct kr_cu_score_row {
    int32_t n_keys;    /* the row needs the logits of keys [0, n_keys) */
    bool main_ok;      /* the main softmax has at least one entry */
    int32_t main_n;    /* main softmax over keys [0, main_n) ... */
    int32_t main_skip; /* ... leaving this key out (-1: none) */
    int32_t add_n;     /* columns [0, add_n) get the main probabilities ... */
    int32_t add_skip;  /* ... except this one (-1: none) */
    bool anti_ok;      /* two_sided: the anti-causal softmax of row i ... */
    int32_t anti_n;    /* ... over keys [0, anti_n), key anti_skip out; column i gets its mass on keys (i, anti_n) */
    int32_t anti_skip;
} kr_cu_score_row;

KR_CU_HD int32_t kr_cu_min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* The first query row the mode reads: the buffer's for buffer_only, and
 * never before the rows that hold queries (the last n_q of n_w). */
KR_CU_HD int32_t kr_cu_score_q_lo(int mode, int32_t n_w, int32_t n_c, int32_t n_q) {
    int32_t lo = mode == KR_SCORE_BUFFER_ONLY ? n_c : 0;
    return lo < n_w - n_q ? n_w - n_q : lo;
}

/* The last key (exclusive) a row's softmax may see: n_c when softmax_over
 * is compressible, else the window. */
KR_CU_HD int32_t kr_cu_score_key_hi(int softmax_over, int32_t n_w, int32_t n_c) {
    return softmax_over == KR_SOFTMAX_COMPRESSIBLE ? n_c : n_w;
}

/* Row i's plan for a mode (kr_score_mode), with n_sink sink keys in
 * front (0 unless window_plus_sinks). */
KR_CU_HD kr_cu_score_row kr_cu_score_row_plan(int mode, bool exclude_self, int32_t i, int32_t n_c, int32_t key_hi,
                                              int32_t n_sink) {
    kr_cu_score_row r;
    r.anti_ok = false;
    r.anti_n = 0;
    r.anti_skip = -1;
    if (mode == KR_SCORE_BIDIRECTIONAL) {
        const int32_t skip = exclude_self && i < key_hi ? i : -1;
        r.n_keys = key_hi;
        r.main_n = key_hi;
        r.main_skip = skip;
        r.add_n = n_c;
        r.add_skip = skip;
    } else {
        const int32_t jend = exclude_self ? kr_cu_min32(i, key_hi) : kr_cu_min32(i + 1, key_hi);
        r.main_n = jend;
        r.main_skip = -1;
        r.add_skip = -1;
        r.n_keys = jend;
        if (mode == KR_SCORE_TWO_SIDED) {
            /* strictly earlier keys in the causal half */
            r.add_n = kr_cu_min32(kr_cu_min32(i, n_c), jend);
            if (i < n_c) {
                r.anti_n = key_hi;
                r.anti_skip = exclude_self ? i : -1;
                r.anti_ok = n_sink + key_hi - (r.anti_skip >= 0) >= 1;
                if (key_hi > r.n_keys) r.n_keys = key_hi;
            }
        } else {
            r.add_n = kr_cu_min32(jend, n_c);
        }
    }
    r.main_ok = n_sink + r.main_n - (r.main_skip >= 0 && r.main_skip < r.main_n) >= 1;
    return r;
}

/* Value idx of a row of a KV or query-ring type (kara_kv_dtype). */
KR_CU_HD float kr_cu_kv_value(int type, const uint8_t *row, int64_t idx) {
    if (type == KARA_KV_F32) {
        float f;
        memcpy(&f, row + idx * 4, 4);
        return f;
    }
    if (type == KARA_KV_F16) return kr_cu_get_f16(row + idx * 2);
    const int64_t b = idx / KR_CU_QK;
    const int j = (int)(idx % KR_CU_QK);
    if (type == KARA_KV_Q8_0) return kr_cu_dequant_q8_0(row + b * KR_CU_Q8_0_BYTES, j);
    return kr_cu_dequant_q4_0(row + b * KR_CU_Q4_0_BYTES, j);
}

/* sum over t < d of q[t] * value(off + t): one logit of the scorer (q is
 * already times 1 / sqrt(d)). */
KR_CU_HD float kr_cu_kv_dot(int type, const uint8_t *row, int64_t off, const float *q, int32_t d) {
    float s = 0.0f;
    for (int32_t t = 0; t < d; t++) s = KR_CU_ADD(s, KR_CU_MUL(q[t], kr_cu_kv_value(type, row, off + t)));
    return s;
}

/* ||values [off, off + d)||_1: a value-aware score's weight (kv_score.c value_l1). */
KR_CU_HD float kr_cu_kv_l1(int type, const uint8_t *row, int64_t off, int32_t d) {
    float s = 0.0f;
    for (int32_t t = 0; t < d; t++) s = KR_CU_ADD(s, fabsf(kr_cu_kv_value(type, row, off + t)));
    return s;
}

/* Column j's layer score from the partial sums of every (query head,
 * tile) unit (partial[(a * n_tiles + t) * n_c + j]): per query head the sum
 * over tiles, per KV head the mean (or max) over its group times vn[h]
 * (1 unless value-aware), then the mean over KV heads. The order is
 * kv_score.c's kr_kv_score_finish. */
KR_CU_HD float kr_cu_score_column(const float *partial, int32_t j, int32_t n_c, int32_t n_tiles, int32_t n_head_kv,
                                  int32_t group, bool use_max, const float *vn) {
    float total = 0.0f;
    for (int32_t h = 0; h < n_head_kv; h++) {
        float red = use_max ? -INFINITY : 0.0f;
        for (int32_t e = 0; e < group; e++) {
            const float *p = partial + (int64_t)(h * group + e) * n_tiles * n_c + j;
            float sa = 0.0f;
            for (int32_t t = 0; t < n_tiles; t++) sa = KR_CU_ADD(sa, p[(int64_t)t * n_c]);
            red = use_max ? (sa > red ? sa : red) : KR_CU_ADD(red, sa);
        }
        total = KR_CU_ADD(total, KR_CU_MUL(use_max ? red : KR_CU_DIV(red, (float)group), vn ? vn[h] : 1.0f));
    }
    return KR_CU_DIV(total, (float)n_head_kv);
}

#endif /* KR_CUDA_SCORE_H */
