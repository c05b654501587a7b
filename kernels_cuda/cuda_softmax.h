/*
 * cuda_softmax.h - the online softmax of attention, callable from the host
 * and the device (KR_CU_HD).
 *
 * Attention needs softmax(scores) . V over up to tens of thousands of
 * slots without storing the scores. The state keeps the running maximum m
 * of the scores seen and the running sum l of exp(score - m); the caller
 * keeps an output accumulator acc = sum exp(score - m) * v. Each new score
 * may raise m, and then everything accumulated so far must be scaled by
 * exp(m_old - m_new): kr_cu_softmax_push returns that factor and the
 * weight exp(score - m_new) of the new value, so the caller does
 * acc = acc * factor + weight * v. At the end out = acc / l.
 *
 * Partial states over disjoint sets of scores (a warp's slots, a split of
 * the sequence) combine with kr_cu_softmax_merge, which returns the factor
 * for each side's accumulator. The result equals a two-pass softmax up to
 * float rounding (the test bounds it at 1e-6 relative over 5000 scores).
 *
 * A state that has seen nothing has m = -INFINITY, l = 0; its factors are
 * 0, never exp(-inf - -inf) = NaN.
 */
#ifndef KR_CUDA_SOFTMAX_H
#define KR_CUDA_SOFTMAX_H

#include <math.h>

#include "cuda_common.h"

typedef struct kr_cu_softmax_state {
    float m; /* largest score seen, -INFINITY before the first */
    float l; /* sum of exp(score - m) over the scores seen */
} kr_cu_softmax_state;

KR_CU_HD kr_cu_softmax_state kr_cu_softmax_init(void) {
    kr_cu_softmax_state st;
    st.m = -INFINITY;
    st.l = 0.0f;
    return st;
}

/* Add one score. Returns the factor the accumulator of the values seen so
 * far must be multiplied by (1 unless the maximum rose) and sets *weight
 * to the new value's weight exp(score - m). A new maximum gets weight 1
 * exactly, so the largest score's value is added unrounded. A score of
 * -INFINITY (a masked slot) gets weight 0 and leaves the state as it was. */
KR_CU_HD float kr_cu_softmax_push(kr_cu_softmax_state *st, float score, float *weight) {
    if (score > st->m) {
        const float factor = st->m == -INFINITY ? 0.0f : expf(st->m - score);
        st->m = score;
        st->l = st->l * factor + 1.0f;
        *weight = 1.0f;
        return factor;
    }
    const float w = score == -INFINITY ? 0.0f : expf(score - st->m);
    st->l += w;
    *weight = w;
    return 1.0f;
}

/* The state of the union of two disjoint sets of scores; *fa and *fb are
 * the factors for a's and b's accumulators (acc = acc_a * fa + acc_b * fb).
 * An empty side gets factor 0. */
KR_CU_HD kr_cu_softmax_state kr_cu_softmax_merge(kr_cu_softmax_state a, kr_cu_softmax_state b, float *fa, float *fb) {
    kr_cu_softmax_state r;
    r.m = a.m > b.m ? a.m : b.m;
    if (r.m == -INFINITY) { /* both empty */
        *fa = 0.0f;
        *fb = 0.0f;
        r.l = 0.0f;
        return r;
    }
    *fa = a.m == -INFINITY ? 0.0f : expf(a.m - r.m);
    *fb = b.m == -INFINITY ? 0.0f : expf(b.m - r.m);
    r.l = a.l * *fa + b.l * *fb;
    return r;
}

/* The n partial states st[0..n) (a block's warps) merged in order into *m,
 * and their accumulators acc[i * stride] scaled to match: the merged
 * (unnormalised) accumulator. */
KR_CU_HD float kr_cu_softmax_merge_n(const kr_cu_softmax_state *st, const float *acc, int n, int stride,
                                     kr_cu_softmax_state *m) {
    kr_cu_softmax_state r = st[0];
    float o = acc[0];
    for (int i = 1; i < n; i++) {
        float fa, fb;
        r = kr_cu_softmax_merge(r, st[i], &fa, &fb);
        o = o * fa + acc[(long)i * stride] * fb;
    }
    *m = r;
    return o;
}

/* 1 / l, the normaliser of the final accumulator; 0 for an empty state
 * (its accumulator is 0 too, so the output is 0 rather than NaN). */
KR_CU_HD float kr_cu_softmax_inv_sum(kr_cu_softmax_state st) { return st.l > 0.0f ? 1.0f / st.l : 0.0f; }

#endif /* KR_CUDA_SOFTMAX_H */
