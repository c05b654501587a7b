/* test_cuda_math_splitk.c - split-K decode attention's arithmetic
 * (kernels_cuda/cuda_splitk.h), run on the CPU in every build:
 *   - the splits' ranges cover [0, n_vis) in order without overlap, equal
 *     but for the last, with empty splits past the end when n_vis < n_split;
 *   - the kernel's work emulated serially with the same functions (per
 *     split, 8 warps taking every 8th slot of the split's range, their
 *     states merged in warp order by kr_cu_softmax_merge_n, the record written by
 *     kr_cu_splitk_put, the records merged by kr_cu_splitk_combine) equals
 *     a plain two-pass softmax attention in double within 2e-6 of the
 *     largest |V|, for 1 to 32 splits and 1 to 5000 slots (lengths 1,
 *     non-multiples of the split count, fewer slots than splits);
 *   - an empty split's record is m = -inf, l = 0, acc 0 whatever its
 *     accumulator held, and the combine ignores it;
 *   - kr_cu_splitk_choose: one pass for short sequences, many entries or
 *     an unknown SM count; otherwise a power of two, at most
 *     KR_CU_SPLITK_MAX, each split at least KR_CU_SPLITK_MIN_SLOTS slots,
 *     and enough blocks for two waves over the SMs where the length allows.
 * Any mismatch prints the case; the test then exits 1. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_splitk.h"
#include "test_util.h"

static uint64_t rng = 0x13198a2e03707344ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

#define HD 40 /* not a multiple of 32: the records' stride is HD + 2 */
#define WARPS 8

static void test_ranges(void) {
    static const int32_t lens[] = {1, 2, 3, 7, 8, 31, 256, 1000, 4097};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int32_t ns = 1; ns <= KR_CU_SPLITK_MAX; ns++) {
            const int32_t n = lens[li], chunk = (n + ns - 1) / ns;
            int32_t next = 0, empty = 0;
            for (int32_t sp = 0; sp < ns; sp++) {
                int32_t lo, hi;
                kr_cu_splitk_range(n, ns, sp, &lo, &hi);
                CHECK_MSG(lo == next || lo == hi, "n %d split %d/%d: starts at %d, not %d", n, sp, ns, lo, next);
                CHECK_MSG(hi >= lo && hi - lo <= chunk, "n %d split %d/%d: [%d, %d) longer than %d", n, sp, ns, lo, hi,
                          chunk);
                CHECK_MSG(hi - lo == chunk || hi == n, "n %d split %d/%d: short split [%d, %d) before the end", n, sp,
                          ns, lo, hi);
                if (lo == hi) empty++;
                next = hi;
            }
            CHECK_MSG(next == n, "n %d in %d splits: covered up to %d", n, ns, next);
            if (ns > n)
                CHECK_MSG(empty >= ns - n, "n %d in %d splits: %d empty, expected at least %d", n, ns, empty, ns - n);
        }
}

/* The device's work for one query head, serially: for each split, 8 warps
 * fold every 8th slot of its range into their own state and accumulator,
 * the warps are merged in order into the split's record; then the combine. */
static void emulate(const float *sc, const float *v, int32_t n, int32_t ns, float *recs, float *out) {
    const int32_t rf = KR_CU_SPLITK_REC(HD);
    for (int32_t sp = 0; sp < ns; sp++) {
        int32_t lo, hi;
        kr_cu_splitk_range(n, ns, sp, &lo, &hi);
        kr_cu_softmax_state st[WARPS];
        float acc[WARPS][HD];
        for (int w = 0; w < WARPS; w++) {
            st[w] = kr_cu_softmax_init();
            for (int d = 0; d < HD; d++) acc[w][d] = 0.0f;
            for (int32_t s = lo + w; s < hi; s += WARPS) {
                float wt;
                const float f = kr_cu_softmax_push(&st[w], sc[s], &wt);
                for (int d = 0; d < HD; d++) acc[w][d] = acc[w][d] * f + wt * v[(size_t)s * HD + d];
            }
        }
        for (int d = 0; d < HD; d++) {
            kr_cu_softmax_state m;
            const float o = kr_cu_softmax_merge_n(st, &acc[0][d], WARPS, HD, &m);
            /* an empty split's accumulator is poisoned here: put must not pass it on */
            kr_cu_splitk_put(recs + (size_t)sp * rf, m, d, lo == hi ? NAN : o);
        }
        if (lo == hi) {
            const float *r = recs + (size_t)sp * rf;
            CHECK_MSG(r[0] == -INFINITY && r[1] == 0.0f && r[2] == 0.0f && r[2 + HD - 1] == 0.0f,
                      "n %d split %d/%d is empty but its record is m %g l %g acc %g", n, sp, ns, r[0], r[1], r[2]);
        }
    }
    for (int d = 0; d < HD; d++) out[d] = kr_cu_splitk_combine(recs, ns, rf, d);
}

static void test_combine(void) {
    static const int32_t lens[] = {1, 2, 5, 31, 100, 257, 1000, 4097, 5000};
    static const int32_t splits[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
    const int32_t max_n = 5000;
    float *sc = malloc((size_t)max_n * sizeof *sc), *v = malloc((size_t)max_n * HD * sizeof *v);
    float *recs = malloc((size_t)KR_CU_SPLITK_MAX * KR_CU_SPLITK_REC(HD) * sizeof *recs);
    double worst = 0.0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int32_t n = lens[li];
        /* scores as attention makes them (a spread of a few units) with a
         * few spikes, so the running maximum moves inside splits too */
        double vmax = 0.0;
        for (int32_t s = 0; s < n; s++) {
            sc[s] = (float)((urand() - 0.5) * 8.0 + (urand() < 0.01 ? 12.0 : 0.0));
            for (int d = 0; d < HD; d++) {
                v[(size_t)s * HD + d] = (float)((urand() - 0.5) * 4.0);
                vmax = fmax(vmax, fabs(v[(size_t)s * HD + d]));
            }
        }
        double m = -INFINITY, l = 0.0, ref[HD] = {0};
        for (int32_t s = 0; s < n; s++) m = sc[s] > m ? sc[s] : m;
        for (int32_t s = 0; s < n; s++) {
            const double p = exp(sc[s] - m);
            l += p;
            for (int d = 0; d < HD; d++) ref[d] += p * v[(size_t)s * HD + d];
        }
        for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
            float out[HD];
            emulate(sc, v, n, splits[si], recs, out);
            double err = 0.0;
            for (int d = 0; d < HD; d++) {
                const double e = fabs(out[d] - ref[d] / l) / vmax;
                if (!(e <= err)) err = e;
            }
            CHECK_MSG(err <= 2e-6, "%d slots in %d splits: error %.3g of max |V|", n, splits[si], err);
            if (err > worst) worst = err;
        }
    }
    printf("  split/combine against two-pass softmax attention: worst error %.3g of max |V|\n", worst);
    free(sc), free(v), free(recs);
}

static void test_choose(void) {
    /* Qwen3-0.6B's heads (16 query, 8 KV) on 132 SMs, one entry: 16
     * blocks a split (one query head each), so 16 splits fill two waves */
    CHECK_MSG(kr_cu_splitk_choose(100, 1, 16, 8, 132) == 1, "100 slots: one pass");
    CHECK_MSG(kr_cu_splitk_choose(511, 1, 16, 8, 132) == 1, "511 slots: one pass");
    CHECK_MSG(kr_cu_splitk_choose(512, 1, 16, 8, 132) == 2, "512 slots: 2 splits");
    CHECK_MSG(kr_cu_splitk_choose(4096, 1, 16, 8, 132) == 16, "4096 slots: 16 splits, got %d",
              kr_cu_splitk_choose(4096, 1, 16, 8, 132));
    CHECK_MSG(kr_cu_splitk_choose(40960, 1, 16, 8, 132) == 16, "40960 slots: 16 splits (two waves), got %d",
              kr_cu_splitk_choose(40960, 1, 16, 8, 132));
    CHECK_MSG(kr_cu_splitk_choose(40960, 1, 2, 1, 132) == KR_CU_SPLITK_MAX, "one KV head: capped at %d, got %d",
              KR_CU_SPLITK_MAX, kr_cu_splitk_choose(40960, 1, 2, 1, 132));
    CHECK_MSG(kr_cu_splitk_choose(40960, 1, 16, 8, 0) == 1, "unknown SM count: one pass");
    CHECK_MSG(kr_cu_splitk_choose(40960, KR_CU_SPLITK_MAX_ENTRIES + 1, 16, 8, 132) == 1, "a prefill: one pass");
    /* invariants over a sweep of shapes */
    static const int32_t heads[][2] = {{16, 8}, {32, 8}, {14, 2}, {4, 4}, {64, 8}, {2, 1}};
    static const int32_t sms[] = {8, 16, 108, 132};
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++)
        for (size_t mi = 0; mi < sizeof sms / sizeof sms[0]; mi++)
            for (int64_t ne = 1; ne <= KR_CU_SPLITK_MAX_ENTRIES; ne++)
                for (int64_t vis = 1; vis <= 70000; vis = vis * 3 + 1) {
                    const int32_t n = kr_cu_splitk_choose(vis, ne, heads[hi][0], heads[hi][1], sms[mi]);
                    const int64_t base = kr_cu_attn_blocks(ne, heads[hi][0], heads[hi][1]);
                    CHECK_MSG(n >= 1 && n <= KR_CU_SPLITK_MAX && (n & (n - 1)) == 0, "splits %d not a power of two", n);
                    CHECK_MSG(n == 1 || vis / n >= KR_CU_SPLITK_MIN_SLOTS, "%lld slots in %d splits: too short",
                              (long long)vis, n);
                    /* doubling would not be allowed: the choice is the largest that fits */
                    const int64_t want = (2 * (int64_t)sms[mi] + base - 1) / base;
                    CHECK_MSG(2 * n > KR_CU_SPLITK_MAX || 2 * n > want || vis / (2 * n) < KR_CU_SPLITK_MIN_SLOTS,
                              "%lld slots, %lld entries, %d SMs: %d splits, and %d would fit", (long long)vis,
                              (long long)ne, sms[mi], n, 2 * n);
                }
    CHECK_MSG(kr_cu_splitk_part_floats(1, 16, 128) == 16LL * KR_CU_SPLITK_MAX * 130, "scratch for one entry");
    CHECK_MSG(kr_cu_splitk_part_floats(64, 16, 128) == KR_CU_SPLITK_MAX_ENTRIES * 16LL * KR_CU_SPLITK_MAX * 130,
              "scratch capped at KR_CU_SPLITK_MAX_ENTRIES entries");
}

int main(void) {
    test_ranges();
    test_combine();
    test_choose();
    return kr_test_finish();
}
