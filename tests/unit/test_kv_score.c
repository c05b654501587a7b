/*
 * test_kv_score.c - the Kara window scorer against a naive double-precision
 * reference written here from the formulas of docs/KARA_METHOD.md section 5,
 * for every mode and option and three storage layouts; thread-count
 * invariance (bitwise); layer aggregation; scratch bounds; errors; and
 * planted signals: a heavily matched key is kept, a span with strong
 * endpoints survives whole (section 6), causal's older-slot bias (section
 * 5).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kv_score.h"
#include "kv_select.h"
#include "test_util.h"
#include "kv_tuning.h"

/* ---- random numbers (own generator: reproducible everywhere) ---- */
static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
static double nrand(void) {
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* ---- a test case: dense f32 tensors (values already representable in the
 * storage dtype, so the reference and the scorer see the same numbers) ---- */
typedef struct tcase {
    kr_kv_score_shape sh;
    float *q;    /* n_w x Hq x d */
    float *k;    /* n_w x Hkv x d */
    float *sink; /* n_sink x Hkv x d */
} tcase;

static float round_f16(float x) { return kr_fp16_to_fp32(kr_fp32_to_fp16(x)); }

static void tcase_random(tcase *c, kr_kv_score_shape sh, double amp, bool f16_q, bool f16_k) {
    c->sh = sh;
    size_t nq = (size_t)sh.n_w * sh.n_head * sh.head_dim, nk = (size_t)sh.n_w * sh.n_head_kv * sh.head_dim;
    size_t ns = (size_t)sh.n_sink * sh.n_head_kv * sh.head_dim;
    c->q = malloc(nq * sizeof(float));
    c->k = malloc(nk * sizeof(float));
    c->sink = calloc(ns + (size_t)sh.n_head_kv * sh.head_dim, sizeof(float)); /* >= 1 row even without sinks */
    for (size_t i = 0; i < nq; i++) c->q[i] = (float)(amp * nrand());
    for (size_t i = 0; i < nk; i++) c->k[i] = (float)(amp * nrand());
    for (size_t i = 0; i < ns; i++) c->sink[i] = (float)(amp * nrand());
    if (f16_q)
        for (size_t i = 0; i < nq; i++) c->q[i] = round_f16(c->q[i]);
    if (f16_k) {
        for (size_t i = 0; i < nk; i++) c->k[i] = round_f16(c->k[i]);
        for (size_t i = 0; i < ns; i++) c->sink[i] = round_f16(c->sink[i]);
    }
}

static void tcase_free(tcase *c) {
    free(c->q);
    free(c->k);
    free(c->sink);
}

/* ---- the reference: the formulas of docs/KARA_METHOD.md section 5, in
 * double, no tricks ---- */
static double ref_dot(const float *a, const float *b, int d) {
    double s = 0;
    for (int t = 0; t < d; t++) s += (double)a[t] * (double)b[t];
    return s;
}

/* Is window key j in the softmax set of query row i? */
static bool ref_in_set(const kr_kv_score_opts *o, int n_w, int n_c, int i, int j, bool causal) {
    int key_hi = o->softmax_over == KR_SOFTMAX_COMPRESSIBLE ? n_c : n_w;
    if (j >= key_hi) return false;
    if (o->exclude_self && j == i) return false;
    if (causal && j > i) return false;
    return true;
}

/* p[j] for window keys (0 outside the set) of row i over the set; sinks
 * join the denominator. Returns false when the set is empty. */
static bool ref_softmax(const tcase *c, const kr_kv_score_opts *o, int a, int i, bool causal, double *p) {
    const kr_kv_score_shape *s = &c->sh;
    int d = s->head_dim, n_c = s->n_w - s->n_buf, h = a / (s->n_head / s->n_head_kv);
    const float *qi = c->q + ((size_t)i * s->n_head + a) * d;
    double scale = 1.0 / sqrt((double)d), zmax = -INFINITY;
    int ns = o->softmax_over == KR_SOFTMAX_WINDOW_PLUS_SINKS ? s->n_sink : 0;
    double *z = malloc(sizeof(double) * (size_t)(s->n_w + ns + 1));
    bool any = false;
    for (int j = 0; j < s->n_w; j++) {
        if (!ref_in_set(o, s->n_w, n_c, i, j, causal)) continue;
        z[j] = ref_dot(qi, c->k + ((size_t)j * s->n_head_kv + h) * d, d) * scale;
        zmax = fmax(zmax, z[j]);
        any = true;
    }
    for (int t = 0; t < ns; t++) {
        z[s->n_w + t] = ref_dot(qi, c->sink + ((size_t)t * s->n_head_kv + h) * d, d) * scale;
        zmax = fmax(zmax, z[s->n_w + t]);
        any = true;
    }
    if (!any) {
        free(z);
        return false;
    }
    double den = 0;
    for (int j = 0; j < s->n_w; j++)
        if (ref_in_set(o, s->n_w, n_c, i, j, causal)) den += exp(z[j] - zmax);
    for (int t = 0; t < ns; t++) den += exp(z[s->n_w + t] - zmax);
    for (int j = 0; j < s->n_w; j++) p[j] = ref_in_set(o, s->n_w, n_c, i, j, causal) ? exp(z[j] - zmax) / den : 0.0;
    free(z);
    return true;
}

/* Scores with queries for rows [q_lo, n_w) only (0: every row). */
static void ref_score_q(const tcase *c, const kr_kv_score_opts *o, int q_lo, double *out) {
    const kr_kv_score_shape *s = &c->sh;
    int n_w = s->n_w, n_c = n_w - s->n_buf, G = s->n_head / s->n_head_kv;
    double *p = malloc(sizeof(double) * n_w), *sa = malloc(sizeof(double) * n_c * s->n_head);
    for (int a = 0; a < s->n_head; a++) {
        double *acc = sa + (size_t)a * n_c;
        for (int j = 0; j < n_c; j++) acc[j] = 0;
        for (int i = q_lo; i < n_w; i++) {
            switch (o->mode) {
            case KR_SCORE_BIDIRECTIONAL:
                if (ref_softmax(c, o, a, i, false, p))
                    for (int j = 0; j < n_c; j++) acc[j] += p[j];
                break;
            case KR_SCORE_BUFFER_ONLY:
            case KR_SCORE_CAUSAL:
                if (o->mode == KR_SCORE_BUFFER_ONLY && i < n_c) break;
                if (ref_softmax(c, o, a, i, true, p))
                    for (int j = 0; j < n_c; j++) acc[j] += p[j];
                break;
            case KR_SCORE_TWO_SIDED:
                /* sum_{i>j} pc_ij */
                if (ref_softmax(c, o, a, i, true, p))
                    for (int j = 0; j < n_c && j < i; j++) acc[j] += p[j];
                /* sum_{k>j} pa_jk with j = i */
                if (i < n_c && ref_softmax(c, o, a, i, false, p))
                    for (int kk = i + 1; kk < n_w; kk++) acc[i] += p[kk];
                break;
            case KR_SCORE_ONLINE: /* no scorer (the forward pass's attention): the scorer refuses both */
            case KR_SCORE_ONLINE_MAX: break;
            }
        }
    }
    for (int j = 0; j < n_c; j++) {
        double tot = 0;
        for (int h = 0; h < s->n_head_kv; h++) {
            double r = o->gqa_reduce == KR_REDUCE_MAX ? -INFINITY : 0;
            for (int g = 0; g < G; g++) {
                double v = sa[(size_t)(h * G + g) * n_c + j];
                r = o->gqa_reduce == KR_REDUCE_MAX ? fmax(r, v) : r + v / G;
            }
            tot += r;
        }
        out[j] = tot / s->n_head_kv;
    }
    free(p);
    free(sa);
}

static void ref_score(const tcase *c, const kr_kv_score_opts *o, double *out) { ref_score_q(c, o, 0, out); }

/* ---- storage layouts the scorer reads ---- */
typedef struct stored {
    kr_kv_rows q, k, sink;
    void *qbuf, *kbuf, *sbuf;
    int32_t *table;
} stored;

/* Copy rows of `heads` x d floats into the layout:
 * layout 0: plain f32; 1: plain f16; 2: q f32 ring wrapping with a negative
 * `first`, k f16 paged through a shuffled block table with padded heads. */
static void store_rows(const float *src, int n_rows, int heads, int d, bool f16, int layout, bool is_q, kr_kv_rows *r,
                       void **buf, int32_t **table) {
    size_t esz = f16 ? 2 : 4, hs = (size_t)d * esz, stride;
    memset(r, 0, sizeof *r);
    r->type = f16 ? KARA_KV_F16 : KARA_KV_F32;
    if (layout == 2 && !is_q) hs += 6 * esz;      /* padded heads */
    stride = hs * heads + (layout == 2 ? 12 : 0); /* padded rows, still 4-byte aligned */
    r->stride = stride;
    r->head_stride = layout == 2 ? hs : 0;
    int n_alloc = n_rows;
    int block_rows = 16, n_blocks = (n_rows + block_rows - 1) / block_rows + 1;
    size_t block_bytes = stride * block_rows + 32;
    size_t total;
    if (layout == 2 && is_q) {
        n_alloc = n_rows + 7; /* ring capacity */
        total = stride * n_alloc;
        r->ring_cap = n_alloc;
        r->first = -5 - (int64_t)n_alloc * 3; /* wraps and starts negative */
    } else if (layout == 2) {
        total = block_bytes * n_blocks;
        *table = malloc(sizeof(int32_t) * n_blocks);
        for (int b = 0; b < n_blocks; b++) (*table)[b] = n_blocks - 1 - b; /* reversed: blocks out of order */
        r->table = *table;
        r->block_rows = block_rows;
        r->block_bytes = block_bytes;
        r->first = 3; /* window starts mid-block */
    } else {
        total = stride * n_rows;
    }
    *buf = calloc(1, total + 16);
    r->base = *buf;
    for (int i = 0; i < n_rows; i++) {
        int64_t idx = r->first + i;
        uint8_t *row;
        if (r->table)
            row = (uint8_t *)*buf + (size_t)r->table[idx / block_rows] * block_bytes +
                (size_t)(idx % block_rows) * stride;
        else if (r->ring_cap)
            row = (uint8_t *)*buf + (size_t)(((idx % r->ring_cap) + r->ring_cap) % r->ring_cap) * stride;
        else
            row = (uint8_t *)*buf + (size_t)idx * stride;
        for (int e = 0; e < heads; e++) {
            const float *x = src + ((size_t)i * heads + e) * d;
            uint8_t *dst = row + (size_t)e * (r->head_stride ? r->head_stride : hs);
            for (int t = 0; t < d; t++) {
                if (f16) {
                    kr_fp16 hv = kr_fp32_to_fp16(x[t]);
                    memcpy(dst + t * 2, &hv, 2);
                } else {
                    memcpy(dst + t * 4, &x[t], 4);
                }
            }
        }
    }
}

static void stored_make(stored *st, const tcase *c, int layout) {
    memset(st, 0, sizeof *st);
    const kr_kv_score_shape *s = &c->sh;
    bool qf16 = layout == 1, kf16 = layout >= 1;
    int32_t *unused = NULL;
    store_rows(c->q, s->n_w, s->n_head, s->head_dim, qf16, layout, true, &st->q, &st->qbuf, &unused);
    store_rows(c->k, s->n_w, s->n_head_kv, s->head_dim, kf16, layout, false, &st->k, &st->kbuf, &st->table);
    int32_t *t2 = NULL;
    store_rows(c->sink, s->n_sink > 0 ? s->n_sink : 1, s->n_head_kv, s->head_dim, kf16, 0, false, &st->sink, &st->sbuf,
               &t2);
}

static void stored_free(stored *st) {
    free(st->qbuf);
    free(st->kbuf);
    free(st->sbuf);
    free(st->table);
}

/* Run the scorer with the units split over nth slices run one after the
 * other (ith = nth-1 down to 0, so slices do not run in index order). */
static kara_status run_scorer_q(const tcase *c, const kr_kv_score_opts *o, int layout, int nth, int n_q, float *out) {
    stored st;
    stored_make(&st, c, layout);
    size_t bytes =
        n_q == c->sh.n_w ? kr_kv_score_scratch_bytes(&c->sh, nth) : kr_kv_score_scratch_bytes_q(&c->sh, n_q, nth);
    uint8_t *scratch = malloc(bytes + 64);
    memset(scratch, 0xA5, bytes + 64);
    kr_kv_score_job job;
    kara_status rc = n_q == c->sh.n_w
        ? kr_kv_score_prepare(&job, &c->sh, o, &st.q, &st.k, &st.sink, scratch + 1, bytes, nth)
        : kr_kv_score_prepare_q(&job, &c->sh, n_q, o, &st.q, &st.k, &st.sink, scratch + 1, bytes, nth);
    if (rc == KARA_OK) {
        for (int ith = nth - 1; ith >= 0; ith--) CHECK_EQ_INT(kr_kv_score_compute(&job, ith, nth), KARA_OK);
        kr_kv_score_finish(&job, out, NULL);
        /* nothing written past the declared scratch */
        bool guard_ok = true;
        for (size_t b = bytes + 1; b < bytes + 64; b++) guard_ok &= scratch[b] == 0xA5;
        CHECK_MSG(guard_ok && scratch[0] == 0xA5, "scorer wrote outside its %zu-byte scratch", bytes);
    }
    free(scratch);
    stored_free(&st);
    return rc;
}

static kara_status run_scorer(const tcase *c, const kr_kv_score_opts *o, int layout, int nth, float *out) {
    return run_scorer_q(c, o, layout, nth, c->sh.n_w, out);
}

static const char *mode_name(kr_score_mode m) {
    static const char *n[] = {"bidirectional", "two_sided", "causal", "buffer_only"};
    return n[m];
}

/* Every mode x softmax_over x exclude_self x gqa_reduce x layout against the
 * reference. Tolerance: |got - ref| <= 2e-5 * (1 + |ref|) for f32 math on
 * scores that are sums of up to n_w probabilities. */
static void test_reference_all_options(void) {
    kr_kv_score_shape sh = {45, 9, 4, 2, 20, 3}; /* 2 tiles, d not a multiple of 8 */
    double worst = 0;
    int cases = 0;
    for (int layout = 0; layout < 3; layout++) {
        tcase c;
        rng_state = 100 + layout;
        tcase_random(&c, sh, 1.5, layout == 1, layout >= 1);
        for (int mode = 0; mode < 4; mode++)
            for (int so = 0; so < 3; so++)
                for (int ex = 0; ex < 2; ex++)
                    for (int gq = 0; gq < 2; gq++) {
                        kr_kv_score_opts o = {(kr_score_mode)mode, (kr_softmax_over)so, ex == 1,
                                              gq ? KR_REDUCE_MAX : KR_REDUCE_MEAN, false};
                        int n_c = sh.n_w - sh.n_buf;
                        float got[64];
                        double ref[64];
                        if (!CHECK_EQ_INT(run_scorer(&c, &o, layout, 1, got), KARA_OK)) continue;
                        ref_score(&c, &o, ref);
                        double err = 0;
                        for (int j = 0; j < n_c; j++) err = fmax(err, fabs(got[j] - ref[j]) / (1 + fabs(ref[j])));
                        worst = fmax(worst, err);
                        cases++;
                        CHECK_MSG(err <= 2e-5, "layout %d mode %s softmax_over %d exclude_self %d gqa %s: rel err %g",
                                  layout, mode_name(o.mode), so, ex, gq ? "max" : "mean", err);
                    }
        tcase_free(&c);
    }
    printf("reference: %d option/layout cases, worst relative error %.3g (tolerance 2e-5)\n", cases, worst);
}

/* Queries for only the newest n_q rows (Kara's threshold trigger, ablation
 * A8, scores the whole generated cache with the queries its ring holds):
 * every mode and layout against the reference restricted to those rows,
 * for a suffix longer than the buffer (two tiles, a partial one), one
 * shorter than the buffer, a single row and the whole window; bitwise equal
 * over thread counts; a smaller scratch than the full window's; bad n_q. */
static void test_reference_query_suffix(void) {
    kr_kv_score_shape sh = {45, 9, 4, 2, 20, 3};
    const int n_qs[] = {37, 5, 1, 45};
    int cases = 0;
    for (int layout = 0; layout < 3; layout++) {
        tcase c;
        rng_state = 300 + layout;
        tcase_random(&c, sh, 1.5, layout == 1, layout >= 1);
        for (int qi = 0; qi < 4; qi++)
            for (int mode = 0; mode < 4; mode++) {
                int n_q = n_qs[qi], n_c = sh.n_w - sh.n_buf;
                kr_kv_score_opts o = {(kr_score_mode)mode, KR_SOFTMAX_WINDOW_PLUS_SINKS, true, KR_REDUCE_MEAN, false};
                float got[64], got3[64];
                double ref[64];
                if (!CHECK_EQ_INT(run_scorer_q(&c, &o, layout, 1, n_q, got), KARA_OK)) continue;
                ref_score_q(&c, &o, sh.n_w - n_q, ref);
                double err = 0, tot = 0;
                for (int j = 0; j < n_c; j++) {
                    err = fmax(err, fabs(got[j] - ref[j]) / (1 + fabs(ref[j])));
                    tot += ref[j];
                }
                CHECK_MSG(err <= 2e-5, "layout %d mode %s n_q %d: rel err %g", layout, mode_name(o.mode), n_q, err);
                /* the suffix really limits the queries: bidirectional rows each
                 * give C a share of probability 1, so the total is below n_q */
                if (mode == KR_SCORE_BIDIRECTIONAL) CHECK_MSG(tot > 0 && tot < n_q, "n_q %d: total %g", n_q, tot);
                CHECK_EQ_INT(run_scorer_q(&c, &o, layout, 3, n_q, got3), KARA_OK);
                CHECK_MSG(!memcmp(got, got3, (size_t)n_c * sizeof(float)), "n_q %d: 1 vs 3 threads differ", n_q);
                cases++;
            }
        tcase_free(&c);
    }
    CHECK_EQ_INT(cases, 48);
    CHECK(kr_kv_score_scratch_bytes_q(&sh, 5, 2) < kr_kv_score_scratch_bytes(&sh, 2));
    CHECK(kr_kv_score_scratch_bytes_q(&sh, 45, 2) == kr_kv_score_scratch_bytes(&sh, 2));
    CHECK(kr_kv_score_scratch_bytes_q(&sh, 0, 2) == 0 && kr_kv_score_scratch_bytes_q(&sh, 46, 2) == 0);
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    kr_kv_score_job job;
    float buf[4] = {0};
    kr_kv_rows r = kr_kv_rows_plain(KARA_KV_F32, buf, 16);
    CHECK_EQ_INT(kr_kv_score_prepare_q(&job, &sh, 0, &o, &r, &r, &r, buf, sizeof buf, 1), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "0 query rows for a window of 45") != NULL, "message: %s", kara_last_error());
}

/* The default configuration at a realistic window (interval 128 + buffer 32). */
static void test_reference_default_large(void) {
    kr_kv_score_shape sh = {160, 32, 8, 2, 64, 4};
    tcase c;
    rng_state = 7;
    tcase_random(&c, sh, 1.0, true, true);
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    float got[128];
    double ref[128];
    CHECK_EQ_INT(run_scorer(&c, &o, 1, 1, got), KARA_OK);
    ref_score(&c, &o, ref);
    double err = 0, sum = 0;
    for (int j = 0; j < 128; j++) {
        err = fmax(err, fabs(got[j] - ref[j]) / (1 + fabs(ref[j])));
        sum += ref[j];
    }
    CHECK_MSG(err <= 2e-5, "default 160-slot window: rel err %g", err);
    /* each of the 160 query rows spreads probability 1 over 159 keys, 128
     * of them in C: the total is below 160 and well above 0 */
    CHECK(sum > 100 && sum < 160);
    tcase_free(&c);
}

/* SnapKV's scorer (docs/KARA_METHOD.md section 11): the whole cache as the
 * window, the last 8 queries, causal, self included, mean over the group;
 * keys paged. */
static void test_reference_snapkv_shape(void) {
    kr_kv_score_shape sh = {300, 8, 4, 2, 32, 0};
    tcase c;
    rng_state = 8;
    tcase_random(&c, sh, 1.0, false, true);
    kr_kv_score_opts o = {KR_SCORE_BUFFER_ONLY, KR_SOFTMAX_WINDOW, false, KR_REDUCE_MEAN, false};
    float got[292];
    double ref[292], err = 0, sum = 0;
    CHECK_EQ_INT(run_scorer(&c, &o, 2, 2, got), KARA_OK);
    ref_score(&c, &o, ref);
    for (int j = 0; j < 292; j++) {
        err = fmax(err, fabs(got[j] - ref[j]) / (1 + fabs(ref[j])));
        sum += got[j];
    }
    CHECK_MSG(err <= 2e-5, "snapkv-shaped window: rel err %g", err);
    /* 8 query rows, each spreads 1 over <= 300 keys, most of it on C */
    CHECK(sum > 7.0 && sum <= 8.0);
    tcase_free(&c);
}

/* Same bits for 1, 2, 3 and 5 slices, and for two real threads. */
typedef struct thr_arg {
    const kr_kv_score_job *job;
    int ith, nth;
} thr_arg;
static void *thr_main(void *p) {
    thr_arg *a = p;
    kr_kv_score_compute(a->job, a->ith, a->nth);
    return NULL;
}

static void test_thread_invariance(void) {
    kr_kv_score_shape sh = {100, 20, 6, 3, 24, 2};
    tcase c;
    rng_state = 11;
    tcase_random(&c, sh, 1.2, false, true);
    for (int mode = 0; mode < 4; mode++) {
        kr_kv_score_opts o = {(kr_score_mode)mode, KR_SOFTMAX_WINDOW_PLUS_SINKS, true, KR_REDUCE_MEAN, false};
        float r1[80], r2[80], r3[80], r5[80];
        run_scorer(&c, &o, 2, 1, r1);
        run_scorer(&c, &o, 2, 2, r2);
        run_scorer(&c, &o, 2, 3, r3);
        run_scorer(&c, &o, 2, 5, r5);
        CHECK_MSG(!memcmp(r1, r2, sizeof r1) && !memcmp(r1, r3, sizeof r1) && !memcmp(r1, r5, sizeof r1),
                  "mode %s: results differ between slice counts", mode_name(o.mode));
    }
    /* two concurrent threads */
    stored st;
    stored_make(&st, &c, 0);
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    size_t bytes = kr_kv_score_scratch_bytes(&sh, 2);
    void *scratch = malloc(bytes);
    kr_kv_score_job job;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &st.q, &st.k, &st.sink, scratch, bytes, 2), KARA_OK);
    pthread_t t[2];
    thr_arg args[2] = {{&job, 0, 2}, {&job, 1, 2}};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thr_main, &args[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    /* finish() feeding an accumulator: one layer's mean is the layer itself */
    float par[80], ser[80], accbuf[80];
    kr_kv_score_acc acc;
    kr_kv_score_acc_init(&acc, accbuf, 80, KR_REDUCE_MEAN);
    kr_kv_score_finish(&job, NULL, &acc);
    kr_kv_score_acc_finalize(&acc, par);
    run_scorer(&c, &o, 0, 1, ser);
    CHECK_MSG(!memcmp(par, ser, sizeof par), "two pthreads differ from one thread");
    free(scratch);
    stored_free(&st);
    tcase_free(&c);
}

/* Layer aggregation: mean and normalized_mean over three layers vs double. */
static void test_layer_reduce(void) {
    kr_kv_score_shape sh = {40, 8, 4, 2, 16, 0};
    const int n_c = 32, L = 3;
    float layer[3][32];
    for (int l = 0; l < L; l++) {
        tcase c;
        rng_state = 200 + l;
        tcase_random(&c, sh, 1.0 + l, false, false);
        kr_kv_score_opts o;
        kr_kv_score_opts_init(&o);
        run_scorer(&c, &o, 0, 1, layer[l]);
        tcase_free(&c);
    }
    for (int norm = 0; norm < 2; norm++) {
        float buf[32], out[32];
        kr_kv_score_acc acc;
        CHECK_EQ_INT(kr_kv_score_acc_init(&acc, buf, n_c, norm ? KR_REDUCE_NORMALIZED_MEAN : KR_REDUCE_MEAN), KARA_OK);
        for (int l = 0; l < L; l++) kr_kv_score_acc_add(&acc, layer[l]);
        kr_kv_score_acc_finalize(&acc, out);
        double tot = 0;
        for (int j = 0; j < n_c; j++) {
            double ref = 0;
            for (int l = 0; l < L; l++) {
                double w = 1;
                if (norm) {
                    double s = 0;
                    for (int t = 0; t < n_c; t++) s += layer[l][t];
                    w = 1 / s;
                }
                ref += layer[l][j] * w / L;
            }
            CHECK_NEAR(out[j], ref, 1e-6 * (1 + fabs(ref)));
            tot += out[j];
        }
        if (norm) CHECK_NEAR(tot, 1.0, 1e-5); /* each normalised layer sums to 1 */
    }
    float buf[32];
    kr_kv_score_acc acc;
    CHECK_EQ_INT(kr_kv_score_acc_init(&acc, buf, n_c, KR_REDUCE_MAX), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "layer_reduce") != NULL, "message: %s", kara_last_error());
}

static void test_errors(void) {
    kr_kv_score_shape sh = {40, 8, 4, 2, 16, 0};
    tcase c;
    rng_state = 3;
    tcase_random(&c, sh, 1.0, false, false);
    stored st;
    stored_make(&st, &c, 0);
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    size_t bytes = kr_kv_score_scratch_bytes(&sh, 1);
    void *scratch = malloc(bytes);
    kr_kv_score_job job;
    CHECK(bytes > 0);
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &st.q, &st.k, NULL, scratch, bytes - 65, 1), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "scratch") != NULL, "message: %s", kara_last_error());
    kr_kv_score_shape bad = sh;
    bad.n_head_kv = 3;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &bad, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "n_head_kv 3") != NULL, "message: %s", kara_last_error());
    CHECK_EQ_INT(kr_kv_score_scratch_bytes(&bad, 1), 0);
    bad = sh;
    bad.n_buf = 40;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &bad, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_ERR_ARG);
    bad = sh;
    bad.n_buf = 0;
    o.mode = KR_SCORE_BUFFER_ONLY;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &bad, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "buffer_only") != NULL, "message: %s", kara_last_error());
    kr_kv_score_opts_init(&o);
    o.gqa_reduce = KR_REDUCE_NORMALIZED_MEAN;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_ERR_ARG);
    kr_kv_score_opts_init(&o);
    o.softmax_over = KR_SOFTMAX_WINDOW_PLUS_SINKS;
    sh.n_sink = 2;
    bytes = kr_kv_score_scratch_bytes(&sh, 1);
    free(scratch);
    scratch = malloc(bytes);
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_ERR_ARG);
    kr_kv_score_opts_init(&o);
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &st.q, &st.k, NULL, scratch, bytes, 1), KARA_OK);
    CHECK_EQ_INT(kr_kv_score_compute(&job, 0, 2), KARA_ERR_ARG); /* scratch for one thread only */
    free(scratch);
    stored_free(&st);
    tcase_free(&c);
}

/* ---- planted signals: what sections 5 and 6 of docs/KARA_METHOD.md
 * claim, on synthetic queries and keys ---- */

/* A window whose keys are small noise, queries noise plus a shared
 * direction v in every head. */
static void planted_case(tcase *c, kr_kv_score_shape sh, uint64_t seed, double q_along_v, double *v) {
    rng_state = seed;
    tcase_random(c, sh, 0.5, false, false);
    int d = sh.head_dim;
    double nv = 0;
    for (int t = 0; t < d; t++) {
        v[t] = nrand();
        nv += v[t] * v[t];
    }
    for (int t = 0; t < d; t++) v[t] /= sqrt(nv);
    for (int i = 0; i < sh.n_w; i++)
        for (int a = 0; a < sh.n_head; a++)
            for (int t = 0; t < d; t++) c->q[((size_t)i * sh.n_head + a) * d + t] += (float)(q_along_v * v[t]);
}

static void set_key(tcase *c, int j, const double *v, double along) {
    int d = c->sh.head_dim;
    for (int h = 0; h < c->sh.n_head_kv; h++)
        for (int t = 0; t < d; t++) c->k[((size_t)j * c->sh.n_head_kv + h) * d + t] = (float)(along * v[t]);
}

static void select_default(const float *s, int n_c, float kappa, int32_t *keep, int32_t *k) {
    kara_kv_params p;
    kara_kv_params_init(&p);
    *k = kr_kv_keep_count(n_c, p.retention, kr_kv_tune(&p)->min_keep);
    kr_kv_t2c_params t = {*k, kappa, kr_kv_tune(&p)->max_gap, kr_kv_tune(&p)->len_penalty, NULL};
    size_t bytes = kr_kv_select_scratch_bytes(n_c);
    void *scratch = malloc(bytes);
    CHECK_EQ_INT(kr_kv_select_t2c(s, n_c, &t, NULL, keep, scratch, bytes), KARA_OK);
    free(scratch);
}

static bool in_keep(const int32_t *keep, int k, int j) {
    for (int t = 0; t < k; t++)
        if (keep[t] == j) return true;
    return false;
}

static void test_planted_heavy_key(void) {
    kr_kv_score_shape sh = {160, 32, 4, 2, 32, 0};
    for (int trial = 0; trial < 4; trial++) {
        tcase c;
        double v[32];
        planted_case(&c, sh, 300 + trial, 0.0, v);
        /* 60% of the query rows look for v; one key answers */
        const int star = 17 + 23 * trial;
        for (int i = 0; i < sh.n_w; i++) {
            if (urand() >= 0.6) continue;
            for (int a = 0; a < sh.n_head; a++)
                for (int t = 0; t < 32; t++) c.q[((size_t)i * sh.n_head + a) * 32 + t] += (float)(3.0 * v[t]);
        }
        set_key(&c, star, v, 3.0);
        kr_kv_score_opts o;
        kr_kv_score_opts_init(&o);
        float s[128];
        run_scorer(&c, &o, 0, 1, s);
        int best = 0;
        for (int j = 1; j < 128; j++) best = s[j] > s[best] ? j : best;
        CHECK_EQ_INT(best, star);
        int32_t keep[128], k;
        select_default(s, 128, 0.5f, keep, &k);
        CHECK_MSG(in_keep(keep, k, star), "heavily matched key %d not kept", star);
        tcase_free(&c);
    }
}

/* Endpoints a and a+3 strongly match what every query looks for; the two
 * slots between point away. Token2Chunk keeps all four, pure Top-K (kappa 1)
 * keeps the endpoints and drops the interior. */
static void test_planted_span(void) {
    kr_kv_score_shape sh = {160, 32, 4, 2, 32, 0};
    for (int trial = 0; trial < 4; trial++) {
        tcase c;
        double v[32];
        planted_case(&c, sh, 400 + trial, 1.0, v);
        const int a = 30 + 19 * trial;
        set_key(&c, a, v, 4.0);
        set_key(&c, a + 1, v, -4.0);
        set_key(&c, a + 2, v, -4.0);
        set_key(&c, a + 3, v, 4.0);
        kr_kv_score_opts o;
        kr_kv_score_opts_init(&o);
        float s[128];
        run_scorer(&c, &o, 0, 1, s);
        int32_t keep[128], k;
        select_default(s, 128, 0.5f, keep, &k);
        bool whole =
            in_keep(keep, k, a) && in_keep(keep, k, a + 1) && in_keep(keep, k, a + 2) && in_keep(keep, k, a + 3);
        CHECK_MSG(whole, "trial %d: span %d..%d not kept whole with Token2Chunk", trial, a, a + 3);
        select_default(s, 128, 1.0f, keep, &k);
        bool ends = in_keep(keep, k, a) && in_keep(keep, k, a + 3);
        bool inner = in_keep(keep, k, a + 1) || in_keep(keep, k, a + 2);
        CHECK_MSG(ends && !inner, "trial %d: pure Top-K should keep the endpoints only (ends %d inner %d)", trial, ends,
                  inner);
        tcase_free(&c);
    }
}

/* With keys and queries of no structure, causal scoring favours older slots
 * (more later queries see them) and bidirectional does not. Measured over 6
 * random windows: mean score of the oldest quarter of C over the newest
 * quarter, and the share of kept slots in the older half. */
static void test_causal_bias(void) {
    kr_kv_score_shape sh = {160, 32, 4, 2, 32, 0};
    double ratio[2] = {0, 0}, old_share[2] = {0, 0};
    const int trials = 6;
    for (int trial = 0; trial < trials; trial++) {
        tcase c;
        rng_state = 500 + trial;
        tcase_random(&c, sh, 1.0, false, false);
        for (int m = 0; m < 2; m++) {
            kr_kv_score_opts o;
            kr_kv_score_opts_init(&o);
            if (m) o.mode = KR_SCORE_CAUSAL;
            float s[128];
            run_scorer(&c, &o, 0, 1, s);
            double early = 0, late = 0;
            for (int j = 0; j < 32; j++) early += s[j], late += s[96 + j];
            ratio[m] += early / late / trials;
            int32_t keep[128], k, old = 0;
            select_default(s, 128, 0.5f, keep, &k);
            for (int t = 0; t < k; t++) old += keep[t] < 64;
            old_share[m] += (double)old / k / trials;
        }
        tcase_free(&c);
    }
    printf("older-slot bias: early/late score ratio bidirectional %.3f causal %.3f; kept share in older half "
           "bidirectional %.2f causal %.2f\n",
           ratio[0], ratio[1], old_share[0], old_share[1]);
    CHECK_MSG(ratio[1] > 2.0, "causal early/late ratio %.3f, expected > 2", ratio[1]);
    CHECK_MSG(ratio[0] > 0.85 && ratio[0] < 1.18, "bidirectional early/late ratio %.3f, expected within [0.85, 1.18]",
              ratio[0]);
    CHECK_MSG(old_share[1] > 0.8, "causal kept share in older half %.2f, expected > 0.8", old_share[1]);
    CHECK_MSG(old_share[0] > 0.3 && old_share[0] < 0.7, "bidirectional kept share in older half %.2f, expected 0.3-0.7",
              old_share[0]);
}

/* Value-aware scores (kara.score.value_aware): with one KV head, each slot's
 * score is the attention score times the L1 norm of its value row; without
 * value rows the option changes nothing. */
static void test_value_aware(void) {
    kr_kv_score_shape sh = {40, 8, 4, 1, 16, 0};
    tcase c;
    rng_state = 31;
    tcase_random(&c, sh, 1.0, false, false);
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    float plain[32], weighted[32], no_rows[32], norm[40];
    CHECK_EQ_INT(run_scorer(&c, &o, 0, 1, plain), KARA_OK);
    float *v = malloc((size_t)sh.n_w * sh.head_dim * sizeof(float));
    for (int j = 0; j < sh.n_w; j++) {
        norm[j] = 0.5f + (float)urand() * 1.5f;
        for (int t = 0; t < sh.head_dim; t++) v[j * sh.head_dim + t] = (t % 2 ? -1.0f : 1.0f) * norm[j] / sh.head_dim;
    }
    o.value_aware = true;
    CHECK_EQ_INT(run_scorer(&c, &o, 0, 1, no_rows), KARA_OK);
    CHECK(memcmp(plain, no_rows, sizeof plain) == 0);
    size_t bytes = kr_kv_score_scratch_bytes(&sh, 1);
    void *scratch = malloc(bytes);
    kr_kv_rows q = kr_kv_rows_plain(KARA_KV_F32, c.q, (size_t)sh.n_head * sh.head_dim * sizeof(float));
    kr_kv_rows k = kr_kv_rows_plain(KARA_KV_F32, c.k, (size_t)sh.head_dim * sizeof(float));
    kr_kv_score_job job;
    CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, &q, &k, NULL, scratch, bytes, 1), KARA_OK);
    job.v = kr_kv_rows_plain(KARA_KV_F32, v, (size_t)sh.head_dim * sizeof(float));
    kr_kv_score_run(&job, weighted, NULL);
    double err = 0;
    for (int j = 0; j < 32; j++) {
        double l1 = 0;
        for (int t = 0; t < sh.head_dim; t++) l1 += fabs(v[j * sh.head_dim + t]);
        err = fmax(err, fabs(weighted[j] - plain[j] * l1) / (1e-6 + fabs(plain[j] * l1)));
    }
    CHECK_MSG(err <= 1e-5, "value-aware score = score x ||v||_1: rel err %g", err);
    free(scratch);
    free(v);
    tcase_free(&c);
}

int main(void) {
    test_value_aware();
    test_reference_all_options();
    test_reference_default_large();
    test_reference_snapkv_shape();
    test_reference_query_suffix();
    test_thread_invariance();
    test_layer_reduce();
    test_errors();
    test_planted_heavy_key();
    test_planted_span();
    test_causal_bias();
    return kr_test_finish();
}
