/*
 * test_kv_select.c - slot selection (docs/KARA_METHOD.md sections 6 and
 * 11). Token2Chunk against a straightforward reference written here from
 * section 6 (repeated argmax instead of sorting) on thousands of random
 * cases, ties included; exact k, sortedness and protect_token_ids for
 * every window method; A4, chunkkv, recent, random; streaming, snapkv and
 * h2o against their definitions; the planted span; errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_baselines.h"
#include "kv_select.h"
#include "test_util.h"
#include "kv_tuning.h"

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
static int irand(int n) { return (int)(urand() * n); }

static void *scratch_for(int n, size_t *bytes) {
    *bytes = kr_kv_select_scratch_bytes(n);
    return malloc(*bytes);
}

/* ---- reference Token2Chunk ---- */

/* Index of the highest s among slots with !taken[j] (and, if only_prot,
 * prot[j]); ties to the lower slot; -1 when none. */
static int argmax_free(const float *s, int n, const bool *taken, const bool *prot, bool only_prot) {
    int best = -1;
    for (int j = 0; j < n; j++) {
        if (taken[j] || (only_prot && !prot[j])) continue;
        if (best < 0 || s[j] > s[best]) best = j;
    }
    return best;
}

static int ref_round(double x) { return (int)floor(x + 0.5); } /* x >= 0 here */

static int ref_keep_count(int n_c, double r, int min_keep) {
    if (n_c <= 0) return 0;
    int k = ref_round(r * n_c);
    if (k < min_keep) k = min_keep;
    if (k > n_c) k = n_c;
    return k;
}

static int ref_t2c(const float *s, int n, int K, double kappa, int max_gap, double beta, const bool *prot, int *keep) {
    bool *sel = calloc((size_t)n, 1);
    int taken = 0;
    /* protected first (the best-scoring ones when more than K) */
    for (;;) {
        if (taken == K) break;
        int j = argmax_free(s, n, sel, prot, true);
        if (j < 0) break;
        sel[j] = true;
        taken++;
    }
    int m = ref_round(kappa * K);
    if (m < 2) m = 2;
    if (m > K) m = K;
    if (m < taken) m = taken;
    while (taken < m) {
        sel[argmax_free(s, n, sel, prot, false)] = true;
        taken++;
    }
    double mx = s[0];
    for (int j = 1; j < n; j++) mx = fmax(mx, s[j]);
    /* chunks */
    int nch = 0, prev = -1;
    int *lo = malloc(sizeof(int) * n), *g = malloc(sizeof(int) * n);
    double *phi = malloc(sizeof(double) * n);
    bool *used = calloc((size_t)n, 1);
    for (int j = 0; j < n; j++) {
        if (!sel[j]) continue;
        if (prev >= 0 && j - prev - 1 >= 1 && j - prev - 1 <= max_gap) {
            double u0 = mx > 0 ? s[prev] / mx : 0, u1 = mx > 0 ? s[j] / mx : 0;
            lo[nch] = prev;
            g[nch] = j - prev - 1;
            phi[nch] = ((u0 + u1) / 2) * pow(1.0 + g[nch], -beta);
            nch++;
        }
        prev = j;
    }
    int R = K - m;
    while (R > 0) {
        int best = -1;
        for (int t = 0; t < nch; t++) {
            if (used[t]) continue;
            if (best < 0 || phi[t] > phi[best] || (phi[t] == phi[best] && g[t] < g[best]) ||
                (phi[t] == phi[best] && g[t] == g[best] && lo[t] < lo[best]))
                best = t;
        }
        if (best < 0) break;
        used[best] = true;
        if (g[best] <= R) {
            for (int j = lo[best] + 1; j <= lo[best] + g[best]; j++) sel[j] = true;
            R -= g[best];
        }
    }
    while (R > 0) {
        sel[argmax_free(s, n, sel, prot, false)] = true;
        R--;
    }
    int c = 0;
    for (int j = 0; j < n; j++)
        if (sel[j]) keep[c++] = j;
    free(sel);
    free(lo);
    free(g);
    free(phi);
    free(used);
    return c;
}

static bool sorted_unique(const int32_t *keep, int k, int n) {
    for (int t = 0; t < k; t++)
        if (keep[t] < 0 || keep[t] >= n || (t > 0 && keep[t] <= keep[t - 1])) return false;
    return true;
}

static void random_scores(float *s, int n, int style) {
    for (int j = 0; j < n; j++) {
        double u = urand();
        switch (style) {
        case 0: s[j] = (float)u; break;                             /* distinct */
        case 1: s[j] = (float)(floor(u * 4) / 4); break;            /* many ties */
        case 2: s[j] = (float)(u * u * u * 3); break;               /* skewed */
        default: s[j] = (float)(j % 5 == 0 ? 1.0 : 0.1 * u); break; /* periodic peaks */
        }
    }
}

static void test_t2c_vs_reference(void) {
    const int32_t ids[3] = {7, 11, 13};
    int mismatches = 0, cases = 0, chunks_taken = 0;
    rng_state = 42;
    for (int it = 0; it < 4000; it++) {
        int n = 1 + irand(it < 3000 ? 200 : 700);
        float *s = malloc(sizeof(float) * n);
        int32_t *tok = malloc(sizeof(int32_t) * n), *keep = malloc(sizeof(int32_t) * n);
        int *rkeep = malloc(sizeof(int) * n);
        bool *prot = calloc((size_t)n, 1);
        random_scores(s, n, it % 4);
        bool use_prot = it % 3 == 0;
        for (int j = 0; j < n; j++) {
            tok[j] = 20 + irand(100);
            if (use_prot && urand() < 0.03) tok[j] = ids[irand(3)];
            prot[j] = use_prot && (tok[j] == 7 || tok[j] == 11 || tok[j] == 13);
        }
        double r = (double)(float)(0.05 + 0.5 * urand());
        int min_keep = irand(8);
        int K = ref_keep_count(n, r, min_keep);
        CHECK_EQ_INT(kr_kv_keep_count(n, (float)r, min_keep), K);
        float kappa = it % 7 == 0 ? 1.0f : (float)(0.1 + 0.9 * urand());
        int max_gap = 1 + irand(20);
        float beta = it % 5 == 0 ? 0.0f : (float)(urand() * 2.5); /* beta 0: phi ties across gaps */
        kr_kv_t2c_params p = {K, kappa, max_gap, beta, NULL};
        kr_kv_protect pr = {tok, ids, use_prot ? 3 : 0};
        size_t bytes;
        void *scr = scratch_for(n, &bytes);
        kara_status st = kr_kv_select_t2c(s, n, &p, &pr, keep, scr, bytes);
        CHECK_EQ_INT(st, KARA_OK);
        int rk = ref_t2c(s, n, K, kappa, max_gap, beta, prot, rkeep);
        CHECK_EQ_INT(rk, K);
        bool same = st == KARA_OK;
        for (int t = 0; t < K && same; t++) same = keep[t] == rkeep[t];
        if (!same && mismatches++ < 5)
            CHECK_MSG(false, "case %d (n %d K %d kappa %g gap %d beta %g): differs from the reference", it, n, K,
                      (double)kappa, max_gap, (double)beta);
        CHECK(sorted_unique(keep, K, n));
        /* protected slots are kept (when they fit in K) */
        int n_prot = 0, kept_prot = 0;
        for (int j = 0; j < n; j++) n_prot += prot[j];
        for (int t = 0; t < K; t++) kept_prot += prot[keep[t]];
        CHECK_EQ_INT(kept_prot, n_prot < K ? n_prot : K);
        /* count the cases where chunks changed the result vs pure Top-K */
        int rk1 = ref_t2c(s, n, K, 1.0, max_gap, beta, prot, rkeep);
        bool differs = false;
        for (int t = 0; t < rk1; t++) differs |= keep[t] != rkeep[t];
        chunks_taken += differs;
        cases++;
        free(s);
        free(tok);
        free(keep);
        free(rkeep);
        free(prot);
        free(scr);
    }
    CHECK_EQ_INT(mismatches, 0);
    printf("token2chunk: %d random cases vs reference, %d mismatches (%d differ from pure Top-K)\n", cases, mismatches,
           chunks_taken);
}

static void test_counts(void) {
    CHECK_EQ_INT(kr_kv_keep_count(128, 0.2f, 4), 26); /* round(25.6) */
    CHECK_EQ_INT(kr_kv_keep_count(10, 0.2f, 4), 4);   /* min_keep */
    CHECK_EQ_INT(kr_kv_keep_count(3, 0.2f, 4), 3);    /* never above n_c */
    CHECK_EQ_INT(kr_kv_keep_count(5, 0.5f, 1), 3);    /* 2.5 rounds away from zero */
    CHECK_EQ_INT(kr_kv_keep_count(0, 0.2f, 4), 0);
    CHECK_EQ_INT(kr_kv_keep_count(128, 1.0f, 4), 128);
    CHECK_EQ_INT(kr_kv_candidate_count(26, 0.5f), 13);
    CHECK_EQ_INT(kr_kv_candidate_count(26, 1.0f), 26);
    CHECK_EQ_INT(kr_kv_candidate_count(4, 0.25f), 2); /* at least 2 */
    CHECK_EQ_INT(kr_kv_candidate_count(1, 0.5f), 1);  /* at most K */
}

/* kappa = 1 is pure Top-K: the K highest scores, ties to the lower slot. */
static void test_pure_topk(void) {
    float s[12] = {0.5f, 0.9f, 0.1f, 0.9f, 0.3f, 0.7f, 0.7f, 0.2f, 0.0f, 0.7f, 0.6f, 0.4f};
    int32_t keep[12];
    size_t bytes;
    void *scr = scratch_for(12, &bytes);
    kr_kv_t2c_params p = {5, 1.0f, 16, 1.0f, NULL};
    CHECK_EQ_INT(kr_kv_select_t2c(s, 12, &p, NULL, keep, scr, bytes), KARA_OK);
    int32_t expect[5] = {1, 3, 5, 6, 9}; /* 0.9 0.9 0.7 0.7 0.7 */
    CHECK(!memcmp(keep, expect, sizeof expect));
    p.k = 4; /* the third 0.7 (slot 9) loses the tie to the lower slots */
    CHECK_EQ_INT(kr_kv_select_t2c(s, 12, &p, NULL, keep, scr, bytes), KARA_OK);
    CHECK(keep[0] == 1 && keep[1] == 3 && keep[2] == 5 && keep[3] == 6);
    free(scr);
}

/* A worked example of docs/KARA_METHOD.md section 6 by hand: n_c 20, K 6,
 * kappa 0.5 -> m 3.
 * Candidates (top 3): 2 (1.0), 5 (0.8), 15 (0.9). Chunks: (2,5) gap 2,
 * phi = 0.9/3 = 0.3; (5,15) gap 9, phi = 0.85/10. R = 3: (2,5) fits (R 1),
 * (5,15) does not; the last slot is the best remaining score: 10 (0.5). */
static void test_worked_example(void) {
    float s[20];
    for (int j = 0; j < 20; j++) s[j] = 0.1f;
    s[2] = 1.0f, s[5] = 0.8f, s[15] = 0.9f, s[10] = 0.5f, s[3] = 0.05f, s[4] = 0.05f;
    int32_t keep[20];
    size_t bytes;
    void *scr = scratch_for(20, &bytes);
    kr_kv_t2c_params p = {6, 0.5f, 16, 1.0f, NULL};
    CHECK_EQ_INT(kr_kv_select_t2c(s, 20, &p, NULL, keep, scr, bytes), KARA_OK);
    int32_t expect[6] = {2, 3, 4, 5, 10, 15};
    CHECK_MSG(!memcmp(keep, expect, sizeof expect), "got %d %d %d %d %d %d", keep[0], keep[1], keep[2], keep[3],
              keep[4], keep[5]);
    /* max_gap 1 forbids the 2-gap chunk: Top-K fills instead */
    p.max_gap = 1;
    CHECK_EQ_INT(kr_kv_select_t2c(s, 20, &p, NULL, keep, scr, bytes), KARA_OK);
    /* R 3 -> 10 (0.5), then the 0.1 ties go to the lowest slots 0 and 1 */
    int32_t e2[6] = {0, 1, 2, 5, 10, 15};
    CHECK_MSG(!memcmp(keep, e2, sizeof e2), "max_gap 1: got %d %d %d %d %d %d", keep[0], keep[1], keep[2], keep[3],
              keep[4], keep[5]);
    free(scr);
}

/* The planted span on a score vector (what Token2Chunk keeps whole,
 * docs/KARA_METHOD.md section 6): strong endpoints, weak interior,
 * everything else moderate noise. */
static void test_planted_span_scores(void) {
    rng_state = 9;
    for (int trial = 0; trial < 20; trial++) {
        float s[128];
        for (int j = 0; j < 128; j++) s[j] = (float)(0.1 + 0.3 * urand());
        int a = 5 + irand(115);
        s[a] = 1.0f, s[a + 3] = 0.95f, s[a + 1] = 0.02f, s[a + 2] = 0.03f;
        int32_t keep[128];
        size_t bytes;
        void *scr = scratch_for(128, &bytes);
        kr_kv_t2c_params p = {kr_kv_keep_count(128, 0.2f, 4), 0.5f, 16, 1.0f, NULL};
        CHECK_EQ_INT(kr_kv_select_t2c(s, 128, &p, NULL, keep, scr, bytes), KARA_OK);
        int whole = 0;
        for (int t = 0; t < p.k; t++) whole += keep[t] >= a && keep[t] <= a + 3;
        CHECK_MSG(whole == 4, "trial %d: span at %d kept %d of 4 with Token2Chunk", trial, a, whole);
        p.candidate_frac = 1.0f;
        CHECK_EQ_INT(kr_kv_select_t2c(s, 128, &p, NULL, keep, scr, bytes), KARA_OK);
        int ends = 0, inner = 0;
        for (int t = 0; t < p.k; t++) {
            ends += keep[t] == a || keep[t] == a + 3;
            inner += keep[t] == a + 1 || keep[t] == a + 2;
        }
        CHECK_MSG(ends == 2 && inner == 0, "trial %d: Top-K kept ends %d inner %d", trial, ends, inner);
        free(scr);
    }
}

static void test_protect(void) {
    float s[30];
    int32_t tok[30], keep[30];
    for (int j = 0; j < 30; j++) s[j] = (float)(30 - j), tok[j] = 1;
    tok[25] = 99, tok[28] = 99, tok[29] = 77; /* low scores */
    int32_t ids[2] = {99, 77};
    kr_kv_protect pr = {tok, ids, 2};
    size_t bytes;
    void *scr = scratch_for(30, &bytes);
    /* Token2Chunk, kappa 0.5: K 6 -> m 3 = the three protected slots, R 3 */
    kr_kv_t2c_params p = {6, 0.5f, 2, 1.0f, NULL};
    CHECK_EQ_INT(kr_kv_select_t2c(s, 30, &p, &pr, keep, scr, bytes), KARA_OK);
    /* chunks: (25,28) gap 2 and (28,29) gap 0 -> only (25,28) counts; takes 26, 27; then the best: 0 */
    int32_t e1[6] = {0, 25, 26, 27, 28, 29};
    CHECK_MSG(!memcmp(keep, e1, sizeof e1), "protected t2c: %d %d %d %d %d %d", keep[0], keep[1], keep[2], keep[3],
              keep[4], keep[5]);
    /* more protected than K: the best-scoring protected win */
    p.k = 2;
    CHECK_EQ_INT(kr_kv_select_t2c(s, 30, &p, &pr, keep, scr, bytes), KARA_OK);
    CHECK(keep[0] == 25 && keep[1] == 28);
    /* every window method keeps them and stays at exactly K */
    CHECK_EQ_INT(kr_kv_select_recent(30, 5, &pr, keep, scr, bytes), KARA_OK);
    int32_t e2[5] = {25, 26, 27, 28, 29};
    CHECK(!memcmp(keep, e2, sizeof e2));
    CHECK_EQ_INT(kr_kv_select_chunks(s, 30, 5, 10, &pr, keep, scr, bytes), KARA_OK);
    CHECK(keep[2] == 25 && keep[3] == 28 && keep[4] == 29 && keep[0] == 0 && keep[1] == 1);
    CHECK_EQ_INT(kr_kv_select_pooled_topk(s, 30, 5, 7, &pr, keep, scr, bytes), KARA_OK);
    CHECK(keep[2] == 25 && keep[3] == 28 && keep[4] == 29);
    CHECK_EQ_INT(kr_kv_select_random(30, 5, 1234, &pr, keep, scr, bytes), KARA_OK);
    CHECK(sorted_unique(keep, 5, 30));
    int prot_kept = 0;
    for (int t = 0; t < 5; t++) prot_kept += tok[keep[t]] != 1;
    CHECK_EQ_INT(prot_kept, 3);
    free(scr);
}

/* A4: Top-K of max-pooled scores (window clipped), vs a direct computation. */
static void test_pooled_topk(void) {
    rng_state = 77;
    for (int it = 0; it < 300; it++) {
        int n = 1 + irand(150), k = irand(n + 1);
        float s[150], pooled[150];
        int32_t keep[150];
        random_scores(s, n, it % 4);
        for (int j = 0; j < n; j++) {
            pooled[j] = -INFINITY;
            for (int t = j - 3; t <= j + 3; t++)
                if (t >= 0 && t < n) pooled[j] = fmaxf(pooled[j], s[t]);
        }
        size_t bytes;
        void *scr = scratch_for(n, &bytes);
        CHECK_EQ_INT(kr_kv_select_pooled_topk(s, n, k, 7, NULL, keep, scr, bytes), KARA_OK);
        bool taken[150] = {false}, ok = sorted_unique(keep, k, n);
        for (int t = 0; t < k; t++) taken[keep[t]] = true;
        /* every kept slot beats (or ties from a lower slot) every dropped one */
        for (int a = 0; a < n && ok; a++)
            for (int b = 0; b < n && ok; b++)
                if (taken[a] && !taken[b]) ok = pooled[a] > pooled[b] || (pooled[a] == pooled[b] && a < b);
        CHECK_MSG(ok, "pooled top-k case %d", it);
        free(scr);
    }
}

/* chunkkv against its definition on a hand example and random exactness. */
static void test_chunks(void) {
    float s[25];
    for (int j = 0; j < 25; j++) s[j] = 0.1f;
    for (int j = 10; j < 20; j++) s[j] = 0.5f; /* chunk 1 has the best mean */
    s[3] = 0.9f;                               /* chunk 0 mean 0.18 > chunk 2 (0.1) */
    s[22] = 0.3f;                              /* chunk 2 (5 slots) mean 0.14 */
    int32_t keep[25];
    size_t bytes;
    void *scr = scratch_for(25, &bytes);
    CHECK_EQ_INT(kr_kv_select_chunks(s, 25, 17, 10, NULL, keep, scr, bytes), KARA_OK);
    /* chunk 1 (10) fits, chunk 0 (10) does not fit in 7, chunk 2 (5) fits, then 2 best left: 3, then 0 */
    int32_t e[17] = {0, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    CHECK_MSG(!memcmp(keep, e, sizeof e), "chunkkv example");
    free(scr);
    rng_state = 5;
    for (int it = 0; it < 300; it++) {
        int n = 1 + irand(300), k = irand(n + 1);
        float *r = malloc(sizeof(float) * n);
        int32_t *kp = malloc(sizeof(int32_t) * n);
        random_scores(r, n, it % 4);
        void *sc = scratch_for(n, &bytes);
        CHECK_EQ_INT(kr_kv_select_chunks(r, n, k, 1 + irand(12), NULL, kp, sc, bytes), KARA_OK);
        CHECK(sorted_unique(kp, k, n));
        free(r);
        free(kp);
        free(sc);
    }
}

static void test_recent_random(void) {
    int32_t keep[100], keep2[100];
    size_t bytes;
    void *scr = scratch_for(100, &bytes);
    CHECK_EQ_INT(kr_kv_select_recent(100, 20, NULL, keep, scr, bytes), KARA_OK);
    CHECK(keep[0] == 80 && keep[19] == 99 && sorted_unique(keep, 20, 100));
    CHECK_EQ_INT(kr_kv_select_random(100, 20, 99, NULL, keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(kr_kv_select_random(100, 20, 99, NULL, keep2, scr, bytes), KARA_OK);
    CHECK(sorted_unique(keep, 20, 100) && !memcmp(keep, keep2, sizeof(int32_t) * 20));
    CHECK_EQ_INT(kr_kv_select_random(100, 20, 100, NULL, keep2, scr, bytes), KARA_OK);
    CHECK(memcmp(keep, keep2, sizeof(int32_t) * 20) != 0);
    /* uniform: 4000 draws of 20 of 100 -> each slot expected 800 times;
     * binomial sd ~25, so all within 800 +- 150 */
    int count[100] = {0};
    for (int it = 0; it < 4000; it++) {
        kr_kv_select_random(100, 20, (uint64_t)it * 7919u, NULL, keep, scr, bytes);
        for (int t = 0; t < 20; t++) count[keep[t]]++;
    }
    int lo = 1 << 30, hi = 0;
    for (int j = 0; j < 100; j++) lo = count[j] < lo ? count[j] : lo, hi = count[j] > hi ? count[j] : hi;
    CHECK_MSG(lo > 650 && hi < 950, "random selection counts range %d..%d, expected 800 +- 150", lo, hi);
    free(scr);
}

/* kr_kv_select_window dispatches on the method with the params' defaults. */
static void test_window_dispatch(void) {
    kara_kv_params p;
    kara_kv_params_init(&p);
    float s[128];
    rng_state = 3;
    random_scores(s, 128, 0);
    int32_t keep[128], rkeep[128], n_keep;
    size_t bytes;
    void *scr = scratch_for(128, &bytes);
    p.method = KARA_KV_METHOD_KARA;
    CHECK_EQ_INT(kr_kv_select_window(&p, s, NULL, NULL, 128, 0, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(n_keep, 26);
    bool none[128] = {false};
    ref_t2c(s, 128, 26, kr_kv_tune(&p)->candidate_frac, kr_kv_tune(&p)->max_gap, kr_kv_tune(&p)->len_penalty, none,
            (int *)rkeep);
    CHECK(!memcmp(keep, rkeep, sizeof(int32_t) * 26));
    p.method = KARA_KV_METHOD_RECENT;
    CHECK_EQ_INT(kr_kv_select_window(&p, s, NULL, NULL, 128, 0, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK(n_keep == 26 && keep[0] == 102);
    p.method = KARA_KV_METHOD_CHUNKKV;
    CHECK_EQ_INT(kr_kv_select_window(&p, s, NULL, NULL, 128, 0, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK(n_keep == 26 && sorted_unique(keep, 26, 128));
    p.method = KARA_KV_METHOD_RANDOM;
    CHECK_EQ_INT(kr_kv_select_window(&p, s, NULL, NULL, 128, 1, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK(n_keep == 26 && sorted_unique(keep, 26, 128));
    p.method = KARA_KV_METHOD_SNAPKV;
    CHECK_EQ_INT(kr_kv_select_window(&p, s, NULL, NULL, 128, 0, keep, &n_keep, scr, bytes), KARA_ERR_ARG);
    free(scr);
}

static void test_streaming(void) {
    int32_t keep[20], n_keep;
    CHECK_EQ_INT(kr_kv_select_streaming(20, 4, 10, keep, &n_keep), KARA_OK);
    int32_t e[10] = {0, 1, 2, 3, 14, 15, 16, 17, 18, 19};
    CHECK(n_keep == 10 && !memcmp(keep, e, sizeof e));
    CHECK_EQ_INT(kr_kv_select_streaming(8, 4, 10, keep, &n_keep), KARA_OK);
    CHECK(n_keep == 8 && keep[7] == 7);
    CHECK_EQ_INT(kr_kv_select_streaming(20, 12, 10, keep, &n_keep), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "sink") != NULL, "message: %s", kara_last_error());
}

static void test_snapkv(void) {
    /* n 40, prompt 5, obs 8, budget 20 -> 7 middle slots chosen from [5, 32)
     * by max-pooled (kernel 3) score */
    float s[40];
    for (int j = 0; j < 40; j++) s[j] = 0.01f * (float)(j % 3);
    s[12] = 1.0f; /* pooled 1.0 on 11, 12, 13 */
    s[20] = 0.8f; /* 19, 20, 21 */
    s[33] = 5.0f; /* inside the observation window: ignored */
    s[2] = 9.0f;  /* inside the prompt: ignored */
    int32_t keep[40], n_keep;
    size_t bytes;
    void *scr = scratch_for(40, &bytes);
    CHECK_EQ_INT(kr_kv_select_snapkv(s, 40, 5, 8, 3, KR_REDUCE_MAX, 20, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(n_keep, 20);
    /* middle: 11 12 13 19 20 21 + best of the rest: pooled 0.02 at slots
     * whose window holds a j%3==2 slot -> lowest such slot in [5,32) is 5 */
    int32_t e[20] = {0, 1, 2, 3, 4, 5, 11, 12, 13, 19, 20, 21, 32, 33, 34, 35, 36, 37, 38, 39};
    CHECK_MSG(!memcmp(keep, e, sizeof e), "snapkv example");
    CHECK(sorted_unique(keep, n_keep, 40));
    /* mean pooling spreads the 1.0 peak as about 0.343 over 11..13, above
     * the 0.8 peak's 0.27: the 2 middle slots come from 11..13 */
    CHECK_EQ_INT(kr_kv_select_snapkv(s, 40, 5, 8, 3, KR_REDUCE_MEAN, 15, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK(n_keep == 15 && keep[5] >= 11 && keep[6] <= 13 && keep[4] == 4 && keep[7] == 32);
    CHECK_EQ_INT(kr_kv_select_snapkv(s, 40, 5, 8, 3, KR_REDUCE_MAX, 12, keep, &n_keep, scr, bytes), KARA_ERR_KV_BUDGET);
    CHECK_EQ_INT(kr_kv_select_snapkv(s, 40, 5, 8, 4, KR_REDUCE_MAX, 20, keep, &n_keep, scr, bytes), KARA_ERR_ARG);
    CHECK_EQ_INT(kr_kv_select_snapkv(s, 30, 5, 8, 3, KR_REDUCE_MAX, 30, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(n_keep, 30);
    free(scr);
}

static void test_h2o(void) {
    float acc[30] = {0};
    float probs[30];
    for (int j = 0; j < 30; j++) probs[j] = (j == 4 || j == 9) ? 0.5f : 0.01f * (float)(30 - j);
    kr_kv_h2o_accumulate(acc, probs, 30);
    kr_kv_h2o_accumulate(acc, probs, 30);
    CHECK_NEAR(acc[4], 1.0, 1e-6);
    int32_t keep[30], n_keep;
    size_t bytes;
    void *scr = scratch_for(30, &bytes);
    /* budget 10, front 0, heavy 0.5 -> 5 heavy from [0, 25), 5 recent */
    CHECK_EQ_INT(kr_kv_select_h2o(acc, 30, 0, 10, 0.5f, keep, &n_keep, scr, bytes), KARA_OK);
    int32_t e[10] = {0, 1, 2, 4, 9, 25, 26, 27, 28, 29};
    CHECK_MSG(n_keep == 10 && !memcmp(keep, e, sizeof e), "h2o example");
    /* with 2 front slots: 8 left -> 4 heavy from [2, 26), 4 recent */
    CHECK_EQ_INT(kr_kv_select_h2o(acc, 30, 2, 10, 0.5f, keep, &n_keep, scr, bytes), KARA_OK);
    int32_t e2[10] = {0, 1, 2, 3, 4, 9, 26, 27, 28, 29};
    CHECK_MSG(n_keep == 10 && !memcmp(keep, e2, sizeof e2), "h2o front example");
    CHECK_EQ_INT(kr_kv_select_h2o(acc, 30, 12, 10, 0.5f, keep, &n_keep, scr, bytes), KARA_ERR_KV_BUDGET);
    free(scr);
}

static void test_errors(void) {
    float s[10] = {0};
    int32_t keep[10];
    size_t bytes;
    void *scr = scratch_for(10, &bytes);
    kr_kv_t2c_params p = {11, 0.5f, 16, 1.0f, NULL};
    CHECK_EQ_INT(kr_kv_select_t2c(s, 10, &p, NULL, keep, scr, bytes), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "keep 11 of 10") != NULL, "message: %s", kara_last_error());
    p.k = 5;
    p.candidate_frac = 0.0f;
    CHECK_EQ_INT(kr_kv_select_t2c(s, 10, &p, NULL, keep, scr, bytes), KARA_ERR_ARG);
    p.candidate_frac = 0.5f;
    CHECK_EQ_INT(kr_kv_select_t2c(s, 10, &p, NULL, keep, scr, bytes - 100), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "scratch") != NULL, "message: %s", kara_last_error());
    CHECK_EQ_INT(kr_kv_select_pooled_topk(s, 10, 3, 6, NULL, keep, scr, bytes), KARA_ERR_ARG);
    CHECK_EQ_INT(kr_kv_select_chunks(s, 10, 3, 0, NULL, keep, scr, bytes), KARA_ERR_ARG);
    /* all-equal and NaN scores still give exactly K sorted slots */
    s[3] = NAN;
    CHECK_EQ_INT(kr_kv_select_t2c(s, 10, &p, NULL, keep, scr, bytes), KARA_OK);
    CHECK(sorted_unique(keep, 5, 10));
    bool has3 = false;
    for (int t = 0; t < 5; t++) has3 |= keep[t] == 3;
    CHECK_MSG(!has3, "a NaN score ranks last");
    free(scr);
}

/* Ablation A4 (kara.t2c.mode: pooled_topk): the window dispatcher gives
 * exactly the pooled Top-K selection, and it differs from Token2Chunk on
 * scores with a strong-ended span. */
static void test_ablation_a4(void) {
    float s[64];
    for (int i = 0; i < 64; i++) s[i] = (float)((i * 37) % 64) / 64.0f;
    s[20] = s[24] = 5.0f; /* strong endpoints, weak interior */
    kara_kv_params p;
    kara_kv_params_init(&p);
    p.method = KARA_KV_METHOD_KARA;
    p.retention = 0.25f;
    static uint8_t scratch[1 << 16];
    int32_t a[64], b[64], c[64], na = 0, nc = 0;
    kr_kv_tune(&p)->t2c_mode = KR_T2C_POOLED_TOPK;
    CHECK(kr_kv_select_window(&p, s, NULL, NULL, 64, 0, a, &na, scratch, sizeof scratch) == KARA_OK);
    CHECK(kr_kv_select_pooled_topk(s, 64, na, 7, NULL, b, scratch, sizeof scratch) == KARA_OK);
    CHECK(memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
    kr_kv_tune(&p)->t2c_mode = KR_T2C_CHUNKS;
    CHECK(kr_kv_select_window(&p, s, NULL, NULL, 64, 0, c, &nc, scratch, sizeof scratch) == KARA_OK);
    CHECK_EQ_INT(na, nc);
    CHECK(memcmp(a, c, (size_t)na * sizeof(int32_t)) != 0);
}

/* Line-aware Token2Chunk (kara.t2c.mode: lines): the line holding the best
 * slot is kept whole, the next-best line whole while it fits, the rest by
 * score; a line longer than max_len is cut into pieces; with no line ends
 * the pieces are fixed; and the dispatcher passes the line ends through. */
/* kr_kv_select_window for method kara with t2c.mode `mode` keeps `want`
 * (k of them: retention x n with min_keep 1). */
static void check_dispatch(kr_t2c_mode mode, float retention, const float *s, const uint8_t *ends, int32_t n,
                           const int32_t *want, int32_t k) {
    static uint8_t scratch[1 << 16];
    kara_kv_params p;
    kara_kv_params_init(&p);
    kr_kv_tune(&p)->t2c_mode = mode;
    p.retention = retention;
    kr_kv_tune(&p)->min_keep = 1;
    int32_t keep[64], n_keep = 0;
    CHECK(kr_kv_select_window(&p, s, NULL, ends, n, 0, keep, &n_keep, scratch, sizeof scratch) == KARA_OK);
    CHECK_EQ_INT(n_keep, k);
    for (int i = 0; i < k && i < n_keep; i++) CHECK_EQ_INT(keep[i], want[i]);
}

static void test_lines(void) {
    static uint8_t scratch[1 << 16];
    /* lines [0,4] [5,9] [10,14] [15,19]; one strong digit in line 2 */
    float s[20];
    uint8_t ends[20] = {0};
    for (int i = 0; i < 20; i++) s[i] = 0.01f * (float)(i % 7);
    ends[4] = ends[9] = ends[14] = ends[19] = 1;
    s[7] = 3.0f;  /* line [5,9] */
    s[16] = 2.0f; /* line [15,19] */
    int32_t keep[20];
    CHECK(kr_kv_select_lines(s, 20, 5, 16, ends, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(keep[i], 5 + i);
    /* k = 8: the second line does not fit whole (5 > 3 left): the best three single slots fill */
    CHECK(kr_kv_select_lines(s, 20, 8, 16, ends, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    /* the fill: 16 (2.0), 13 (0.06), then 12 and 19 tie at 0.05 and the lower slot wins */
    int32_t want8[8] = {5, 6, 7, 8, 9, 12, 13, 16};
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(keep[i], want8[i]);
    /* k = 10: both strong lines whole */
    CHECK(kr_kv_select_lines(s, 20, 10, 16, ends, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(keep[i], 5 + i);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(keep[5 + i], 15 + i);
    /* max_len 3 cuts [5,9] into [5,7] and [8,9]: k = 3 keeps [5,7] */
    CHECK(kr_kv_select_lines(s, 20, 3, 3, ends, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(keep[i], 5 + i);
    /* no line ends: pieces of max_len from 0: [6,11] holds slot 7 with max_len 6 */
    CHECK(kr_kv_select_lines(s, 20, 6, 6, NULL, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(keep[i], 6 + i);
    /* the dispatcher: method kara with t2c.mode lines is this selection */
    const int32_t want5[5] = {5, 6, 7, 8, 9};
    check_dispatch(KR_T2C_LINES, 0.25f, s, ends, 20, want5, 5);
    CHECK(kr_kv_select_lines(s, 20, 5, 0, ends, NULL, keep, scratch, sizeof scratch) == KARA_ERR_ARG);
}

/* line_tails: a candidate whose line ends within KR_T2C_LINE_TAIL slots
 * brings the rest of it before the chunks are taken, while it fits. */
static void test_line_tails(void) {
    static uint8_t scratch[1 << 16];
    /* lines [0,4] [5,9] [10,14] [15,19] */
    float s[20];
    uint8_t ends[20] = {0};
    for (int i = 0; i < 20; i++) s[i] = 0.01f * (float)(i % 7);
    ends[4] = ends[9] = ends[14] = ends[19] = 1;
    s[7] = 3.0f;  /* tail 8, 9 */
    s[11] = 2.0f; /* tail 12, 13, 14 */
    s[0] = 1.5f;  /* tail 1..4: KR_T2C_LINE_TAIL slots exactly */
    int32_t keep[20];
    /* k 4: candidates 7 and 11; 7's tail fits the 2 left, 11's does not */
    kr_kv_t2c_params p = {4, 0.5f, 16, 1.0f, ends};
    CHECK(kr_kv_select_t2c(s, 20, &p, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    int32_t want4[4] = {7, 8, 9, 11};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(keep[i], want4[i]);
    /* plain Token2Chunk: the gap 8..10 does not fit; the best singles 0 and 6 fill */
    p.line_ends = NULL;
    CHECK(kr_kv_select_t2c(s, 20, &p, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    int32_t plain4[4] = {0, 6, 7, 11};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(keep[i], plain4[i]);
    /* k 6: candidates 7, 11, 0; 7's tail (2) fits, then neither 11's (3) nor 0's (4); the chunk 10 fills */
    p.k = 6;
    p.line_ends = ends;
    CHECK(kr_kv_select_t2c(s, 20, &p, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    int32_t want6[6] = {0, 7, 8, 9, 10, 11};
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(keep[i], want6[i]);
    /* a line end beyond KR_T2C_LINE_TAIL: no tail */
    uint8_t far[20] = {0};
    far[19] = 1;
    p.k = 4;
    p.line_ends = far;
    CHECK(kr_kv_select_t2c(s, 20, &p, NULL, keep, scratch, sizeof scratch) == KARA_OK);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(keep[i], plain4[i]);
    /* without any line end it is Token2Chunk, on random windows too */
    uint8_t none[150] = {0};
    rng_state = 91;
    for (int it = 0; it < 200; it++) {
        int n = 1 + irand(150), k = irand(n + 1);
        float r[150];
        int32_t a[150], b[150];
        random_scores(r, n, it % 4);
        kr_kv_t2c_params q = {k, 0.5f, 16, 1.0f, NULL};
        CHECK(kr_kv_select_t2c(r, n, &q, NULL, a, scratch, sizeof scratch) == KARA_OK);
        q.line_ends = none;
        CHECK(kr_kv_select_t2c(r, n, &q, NULL, b, scratch, sizeof scratch) == KARA_OK);
        CHECK_MSG(!memcmp(a, b, (size_t)k * sizeof *a), "line_tails without line ends differs (n %d, k %d)", n, k);
        CHECK(sorted_unique(b, k, n));
    }
    /* the dispatcher: t2c.mode line_tails */
    check_dispatch(KR_T2C_LINE_TAILS, 0.2f, s, ends, 20, want4, 4);
}

int main(void) {
    test_counts();
    test_pure_topk();
    test_worked_example();
    test_t2c_vs_reference();
    test_planted_span_scores();
    test_protect();
    test_pooled_topk();
    test_chunks();
    test_recent_random();
    test_window_dispatch();
    test_streaming();
    test_snapkv();
    test_h2o();
    test_errors();
    test_ablation_a4();
    test_lines();
    test_line_tails();
    return kr_test_finish();
}
