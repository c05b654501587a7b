/*
 * cuda_splitk.h - split-K (flash-decoding) attention's host/device math:
 * how many splits a pass uses, which slots each split reads, and how the
 * splits' partial softmax states are combined. Shared by
 * cuda_attention.cu and its host test (tests/unit/test_cuda_math_splitk.c),
 * so the arithmetic the device runs is checked on the CPU in every build.
 *
 * In decode there are few (entry, KV head) pairs, so one block per pair
 * (or per query head) leaves most SMs idle while it walks thousands of
 * slots. Split-K cuts each entry's slots [0, n_vis) into n_split ranges;
 * a block per (pair, query chunk, split) folds its range into an online
 * softmax (cuda_softmax.h) and writes a partial record per query head:
 * m, l, then the unnormalised accumulator acc[head_dim]. A second kernel
 * merges a head's n_split records (kr_cu_splitk_combine).
 *
 * The ranges are computed on the device from the entry's n_vis, so only
 * n_split is a host argument: a captured CUDA graph stays valid while
 * n_split repeats. kr_cu_splitk_choose keeps it a power of two for that
 * reason (it changes a handful of times over a long generation).
 */
#ifndef KR_CUDA_SPLITK_H
#define KR_CUDA_SPLITK_H

#include <stdint.h>

#include "cuda_common.h"
#include "cuda_softmax.h"

/* The most splits of one (entry, query head), and the fewest slots a
 * split should walk (below it the combine costs more than it saves). */
#define KR_CU_SPLITK_MAX 32
#define KR_CU_SPLITK_MIN_SLOTS 256
/* Split-K runs for passes of at most this many entries (decode); the
 * partial records' scratch is sized for it (cuda_plan.c). */
#define KR_CU_SPLITK_MAX_ENTRIES 8
/* Floats of one partial record: m, l, acc[head_dim]. */
#define KR_CU_SPLITK_REC(head_dim) ((head_dim) + 2)
/* Floats of partial records a context of n_batch entries needs: split-K
 * runs for at most KR_CU_SPLITK_MAX_ENTRIES of them. */
KR_CU_HD int64_t kr_cu_splitk_part_floats(int64_t n_batch, int64_t n_head, int64_t head_dim) {
    const int64_t ne = n_batch < KR_CU_SPLITK_MAX_ENTRIES ? n_batch : KR_CU_SPLITK_MAX_ENTRIES;
    return ne * n_head * KR_CU_SPLITK_MAX * KR_CU_SPLITK_REC(head_dim);
}

/* Query heads per block at most (one block reads the group's K/V rows
 * once for all of them). */
#define KR_CU_ATTN_MAX_GROUP 4

/* Query heads one block takes: up to 4 of a KV head's group, or 1 when
 * there are few (entry, KV head) pairs, so more blocks share the work
 * (the group's rows are then read once per query head, mostly from L2). */
KR_CU_HD int32_t kr_cu_attn_gsize(int64_t n_entries, int32_t n_head, int32_t n_head_kv) {
    const int32_t group = n_head / n_head_kv;
    const int32_t g = group < KR_CU_ATTN_MAX_GROUP ? group : KR_CU_ATTN_MAX_GROUP;
    const int64_t pairs = n_entries * n_head_kv;
    return pairs * ((group + g - 1) / g) < 128 ? 1 : g;
}

/* Blocks of one split: (entry, KV head, chunk of gsize query heads). */
KR_CU_HD int64_t kr_cu_attn_blocks(int64_t n_entries, int32_t n_head, int32_t n_head_kv) {
    const int32_t group = n_head / n_head_kv, g = kr_cu_attn_gsize(n_entries, n_head, n_head_kv);
    return n_entries * n_head_kv * ((group + g - 1) / g);
}

/* Splits for a pass whose longest entry sees max_vis slots on a GPU of
 * n_sm multiprocessors: enough blocks for two waves over the SMs, each
 * split at least KR_CU_SPLITK_MIN_SLOTS slots, at most KR_CU_SPLITK_MAX,
 * rounded down to a power of two. 1 means the one-pass kernel (short
 * sequences, many entries, or an unknown SM count). */
KR_CU_HD int32_t kr_cu_splitk_choose(int64_t max_vis, int64_t n_entries, int32_t n_head, int32_t n_head_kv,
                                     int32_t n_sm) {
    if (n_sm <= 0 || n_entries <= 0 || n_entries > KR_CU_SPLITK_MAX_ENTRIES || n_head_kv <= 0) return 1;
    const int64_t base = kr_cu_attn_blocks(n_entries, n_head, n_head_kv);
    int64_t want = (2 * (int64_t)n_sm + base - 1) / base;
    const int64_t by_len = max_vis / KR_CU_SPLITK_MIN_SLOTS;
    if (by_len < want) want = by_len;
    if (want > KR_CU_SPLITK_MAX) want = KR_CU_SPLITK_MAX;
    int32_t n = 1;
    while (2 * (int64_t)n <= want) n *= 2;
    return n;
}

/* The slots [*lo, *hi) of split sp of n_split over [0, n_vis): equal
 * ranges of ceil(n_vis / n_split) slots, the last shorter; splits past the
 * end are empty (*lo == *hi), which happens when n_vis < n_split. */
KR_CU_HD void kr_cu_splitk_range(int32_t n_vis, int32_t n_split, int32_t sp, int32_t *lo, int32_t *hi) {
    const int64_t chunk = ((int64_t)n_vis + n_split - 1) / n_split;
    int64_t a = chunk * sp, b = a + chunk;
    if (a > n_vis) a = n_vis;
    if (b > n_vis) b = n_vis;
    *lo = (int32_t)a;
    *hi = (int32_t)b;
}

/* Write a split's record: its state and unnormalised accumulator value d.
 * An empty split writes m = -INFINITY, l = 0 and acc 0, so the combine
 * gives it factor 0 and never multiplies garbage. */
KR_CU_HD void kr_cu_splitk_put(float *rec, kr_cu_softmax_state st, int32_t d, float acc) {
    if (d == 0) {
        rec[0] = st.m;
        rec[1] = st.l;
    }
    rec[2 + d] = st.m == -INFINITY ? 0.0f : acc;
}

/* Value d of a query head's output from its n_split records (rec_floats
 * apart, split 0 first): the states merged in split order, each
 * accumulator scaled by its factor, divided by the merged sum. */
KR_CU_HD float kr_cu_splitk_combine(const float *recs, int32_t n_split, int32_t rec_floats, int32_t d) {
    kr_cu_softmax_state st = kr_cu_softmax_init();
    float o = 0.0f;
    for (int32_t sp = 0; sp < n_split; sp++) {
        const float *r = recs + (int64_t)sp * rec_floats;
        kr_cu_softmax_state b;
        b.m = r[0];
        b.l = r[1];
        float fa, fb;
        st = kr_cu_softmax_merge(st, b, &fa, &fb);
        o = o * fa + r[2 + d] * fb;
    }
    return o * kr_cu_softmax_inv_sum(st);
}

#endif /* KR_CUDA_SPLITK_H */
