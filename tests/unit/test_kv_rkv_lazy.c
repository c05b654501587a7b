/*
 * test_kv_rkv_lazy.c - the rkv (R-KV) and lazy (LazyEviction) baselines
 * (docs/KARA_METHOD.md section 11):
 *   - key redundancy (kv_redund.h) against a double-precision reference
 *     written here from its definition, for plain f32, plain f16 and paged
 *     f16 keys (a shuffled block table, a span starting mid-block), and
 *     bit-identical for 1, 2 and 4 threads;
 *   - of three identical keys the newest is the least redundant, the
 *     oldest the most (the golden values of a hand-made case);
 *   - the redundancy term changes rkv's choice: near-duplicate keys with a
 *     little more attention than a unique one are kept at lambda 1 and
 *     dropped (all but their newest) at lambda 0.1;
 *   - rkv's selection on hand-made scores (pooling, protected prompt and
 *     observation window), its errors;
 *   - lazy's recurrence tracking and score on a hand-made attention
 *     history: a slot attended every 5 steps survives, a one-off does not,
 *     a slot past its longest interval ranks below one still within it;
 *     its selection and errors;
 *   - both inside real decoding (the seeded tiny model): events keep exactly
 *     budget_tokens slots, the prompt's bytes and the newest window are
 *     untouched, the invariants hold (kr_test_kv_invariants), lazy's state
 *     follows its slots through compaction, and a budget below the
 *     protected slots is refused with a message;
 *   - the reservation counts lazy's state and rkv's scratch; settings an
 *     event could not use are refused when the context is created.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kernels.h"
#include "kv_redund.h"
#include "kv_baselines.h"
#include "kv_select.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

static uint64_t rng_state = 7;
static double urand(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* ---- key rows ---- */

typedef struct keyset {
    kr_kv_rows rows;
    void *buf;
    int32_t *table;
    float *ref; /* the values as stored (f16-rounded when f16), m x heads x d */
} keyset;

/* layout 0: plain f32; 1: plain f16; 2: f16 paged through a reversed
 * block table of 16-row blocks, the span starting at row 5. */
static void keyset_make(keyset *k, const float *src, int m, int heads, int d, int layout) {
    memset(k, 0, sizeof *k);
    const bool f16 = layout > 0;
    const size_t esz = f16 ? 2 : 4, stride = (size_t)heads * d * esz;
    k->rows.type = f16 ? KARA_KV_F16 : KARA_KV_F32;
    k->rows.stride = stride;
    k->ref = malloc((size_t)m * heads * d * sizeof(float));
    const int block_rows = 16, first = layout == 2 ? 5 : 0;
    const int n_blocks = (first + m + block_rows - 1) / block_rows;
    const size_t block_bytes = stride * block_rows;
    k->buf = calloc(1, layout == 2 ? block_bytes * n_blocks : stride * m);
    if (layout == 2) {
        k->table = malloc(sizeof(int32_t) * n_blocks);
        for (int b = 0; b < n_blocks; b++) k->table[b] = n_blocks - 1 - b;
        k->rows.table = k->table;
        k->rows.block_rows = block_rows;
        k->rows.block_bytes = block_bytes;
        k->rows.first = first;
    }
    k->rows.base = k->buf;
    for (int i = 0; i < m; i++) {
        int idx = first + i;
        uint8_t *row = layout == 2
            ? (uint8_t *)k->buf + (size_t)k->table[idx / block_rows] * block_bytes + (size_t)(idx % block_rows) * stride
            : (uint8_t *)k->buf + (size_t)i * stride;
        for (int t = 0; t < heads * d; t++) {
            float x = src[(size_t)i * heads * d + t];
            if (f16) {
                kr_fp16 h = kr_fp32_to_fp16(x);
                memcpy(row + (size_t)t * 2, &h, 2);
                x = kr_fp16_to_fp32(h);
            } else {
                memcpy(row + (size_t)t * 4, &x, 4);
            }
            k->ref[(size_t)i * heads * d + t] = x;
        }
    }
}

static void keyset_free(keyset *k) {
    free(k->buf);
    free(k->table);
    free(k->ref);
}

/* The definition of kv_redund.h in double precision. */
static void ref_redundancy(const float *keys, int m, int heads, int d, double thr, double *out) {
    double *kn = malloc(sizeof(double) * m * d), *c = malloc(sizeof(double) * m);
    double *s = malloc(sizeof(double) * m * m);
    for (int j = 0; j < m; j++) out[j] = 0;
    for (int h = 0; h < heads; h++) {
        for (int i = 0; i < m; i++) {
            double n2 = 0;
            for (int t = 0; t < d; t++)
                n2 += (double)keys[((size_t)i * heads + h) * d + t] * keys[((size_t)i * heads + h) * d + t];
            for (int t = 0; t < d; t++) kn[i * d + t] = keys[((size_t)i * heads + h) * d + t] / (sqrt(n2) + 1e-8);
        }
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++) {
                double dot = 0;
                for (int t = 0; t < d; t++) dot += kn[i * d + t] * kn[j * d + t];
                s[i * m + j] = i == j ? 0 : dot;
            }
        for (int i = 0; i < m; i++) {
            int last = -1;
            for (int j = 0; j < m; j++)
                if (j != i && s[i * m + j] > thr) last = j;
            if (last >= 0) s[i * m + last] = 0; /* row i drops its newest near-duplicate */
        }
        double mx = -1e300, z = 0;
        for (int j = 0; j < m; j++) {
            c[j] = 0;
            for (int i = 0; i < m; i++) c[j] += s[i * m + j];
            c[j] /= m;
            if (c[j] > mx) mx = c[j];
        }
        for (int j = 0; j < m; j++) z += exp(c[j] - mx);
        for (int j = 0; j < m; j++) out[j] += exp(c[j] - mx) / z / heads;
    }
    free(kn);
    free(c);
    free(s);
}

/* Redundancy of a keyset with nth threads (each share run in turn). */
static bool run_redund(const keyset *k, int m, int heads, int d, float thr, int nth, float *acc) {
    size_t bytes = kr_kv_redund_scratch_bytes(m, heads, d, nth);
    void *scr = malloc(bytes);
    kr_kv_redund_job job;
    bool ok = CHECK(kr_kv_redund_prepare(&job, &k->rows, m, heads, d, thr, scr, bytes, nth) == KARA_OK);
    memset(acc, 0, (size_t)m * sizeof(float));
    for (int i = 0; ok && i < nth; i++) ok = CHECK(kr_kv_redund_compute(&job, i, nth) == KARA_OK);
    if (ok) kr_kv_redund_finish(&job, acc);
    free(scr);
    return ok;
}

static void test_redund_reference(void) {
    const int m = 70, heads = 2, d = 24; /* 70: a last tile of 6 rows */
    float *src = malloc(sizeof(float) * m * heads * d);
    for (int i = 0; i < m * heads * d; i++) src[i] = (float)(urand() * 2 - 1);
    /* near-duplicates, so that the threshold bites: rows 10, 30, 50 copy row 2 (head 0), with noise */
    for (int r = 10; r < 60; r += 20)
        for (int t = 0; t < d; t++)
            src[(size_t)r * heads * d + t] = src[(size_t)2 * heads * d + t] + 0.05f * (float)urand();
    float acc[70], acc2[70], acc4[70];
    double want[70];
    for (int layout = 0; layout < 3; layout++) {
        keyset k;
        keyset_make(&k, src, m, heads, d, layout);
        ref_redundancy(k.ref, m, heads, d, 0.5, want);
        if (run_redund(&k, m, heads, d, 0.5f, 1, acc)) {
            double err = 0, sum = 0;
            for (int j = 0; j < m; j++) {
                err = fmax(err, fabs(acc[j] - want[j]) / want[j]);
                sum += acc[j];
            }
            CHECK_MSG(err < 2e-5, "layout %d: redundancy differs from the reference by %g (relative)", layout, err);
            CHECK_NEAR(sum, 1.0, 1e-5);
            /* the planted duplicates are more redundant than the typical key */
            CHECK_MSG(acc[2] > acc[1] && acc[10] > acc[1], "layout %d: duplicates %g %g vs %g", layout, acc[2], acc[10],
                      acc[1]);
        }
        if (run_redund(&k, m, heads, d, 0.5f, 2, acc2) && run_redund(&k, m, heads, d, 0.5f, 4, acc4))
            CHECK_MSG(!memcmp(acc, acc2, sizeof acc) && !memcmp(acc, acc4, sizeof acc),
                      "layout %d: 1, 2 and 4 threads give different bits", layout);
        keyset_free(&k);
    }
    free(src);
}

/* Three identical keys (slots 1, 4, 7) among orthogonal ones: c = 2 for the
 * oldest (its similarity to both later copies counts), 1 for the middle
 * (slot 7's row drops it), 0 for the newest (every other copy's row drops
 * it); the orthogonal keys have c = 0. */
static void test_redund_newest_duplicate(void) {
    const int m = 8, d = 8;
    float src[8 * 8] = {0};
    int axis = 0;
    for (int i = 0; i < m; i++) {
        if (i == 1 || i == 4 || i == 7)
            src[i * d + 7] = 2.0f;
        else
            src[i * d + axis++] = 1.0f + (float)i;
    }
    keyset k;
    keyset_make(&k, src, m, 1, d, 0);
    float acc[8];
    if (run_redund(&k, m, 1, d, 0.5f, 1, acc)) {
        double z = 5 + exp(2.0 / 8) + exp(1.0 / 8) + 1;
        CHECK_NEAR(acc[1], exp(2.0 / 8) / z, 1e-6);
        CHECK_NEAR(acc[4], exp(1.0 / 8) / z, 1e-6);
        CHECK_NEAR(acc[7], 1.0 / z, 1e-6);
        CHECK_NEAR(acc[0], 1.0 / z, 1e-6);
        CHECK(acc[1] > acc[4] && acc[4] > acc[7]);
    }
    /* above the threshold nothing counts as a duplicate: no row drops
     * anything and the three copies are alike */
    if (run_redund(&k, m, 1, d, 1.0f, 1, acc)) CHECK(acc[1] == acc[4] && acc[4] == acc[7] && acc[7] > acc[0]);
    keyset_free(&k);
    size_t bytes = kr_kv_redund_scratch_bytes(m, 1, d, 1);
    void *scr = malloc(bytes);
    kr_kv_redund_job job;
    CHECK_EQ_INT(kr_kv_redund_prepare(&job, &k.rows, m, 1, d, 1.5f, scr, bytes, 1), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "threshold") != NULL, "message: %s", kara_last_error());
    free(scr);
}

/* Slots 4, 6 and 8 hold keys along one axis (cosine 1: duplicates), the
 * others keys along axes of their own (cosine 0), and the duplicates have
 * a little more attention (0.30) than slot 10's unique key (0.27). The
 * budget keeps 2 of the middle [2, 14): attention alone (lambda 1) takes
 * two duplicates, 4 and 6; at lambda 0.1 the redundancy (c = 2/14, 1/14,
 * 0 for 4, 6, 8: red 0.0811, 0.0755, 0.0703, the unique keys 0.0703) puts
 * the newest duplicate first (-0.0333), then the unique key (-0.0363),
 * ahead of 6 (-0.0379) and 4 (-0.0430). */
static void test_rkv_redundancy_changes_choice(void) {
    enum { n = 16, d = 20, front = 2, obs = 2 }; /* axis d - 1 is the duplicates' alone */
    float src[n * d] = {0};
    for (int i = 0; i < n; i++) src[i * d + i] = 1.0f + 0.1f * (float)i;
    for (int i = 4; i <= 8; i += 2) {
        src[i * d + i] = 0.0f;
        src[i * d + d - 1] = i == 4 ? 1.0f : i == 6 ? 1.01f : 0.99f;
    }
    keyset k;
    keyset_make(&k, src + front * d, n - front, 1, d, 0);
    float red[n] = {0}, imp[n];
    run_redund(&k, n - front, 1, d, 0.5f, 1, red + front);
    for (int j = 0; j < n; j++) imp[j] = 0.01f;
    imp[4] = imp[6] = imp[8] = 0.30f;
    imp[10] = 0.27f;
    int32_t keep[n], n_keep;
    size_t bytes = kr_kv_select_scratch_bytes(n);
    void *scr = malloc(bytes);
    const int budget = front + obs + 2;
    CHECK_NEAR(red[4], exp(2.0 / 14) / (12 + exp(2.0 / 14) + exp(1.0 / 14)), 1e-6);
    CHECK_NEAR(red[8], red[10], 1e-7);
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, n, front, obs, 1, 1.0f, budget, keep, &n_keep, scr, bytes), KARA_OK);
    int32_t e1[6] = {0, 1, 4, 6, 14, 15};
    CHECK_MSG(n_keep == 6 && !memcmp(keep, e1, sizeof e1), "lambda 1: %d %d %d %d", keep[0], keep[1], keep[2], keep[3]);
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, n, front, obs, 1, 0.1f, budget, keep, &n_keep, scr, bytes), KARA_OK);
    int32_t e2[6] = {0, 1, 8, 10, 14, 15};
    CHECK_MSG(n_keep == 6 && !memcmp(keep, e2, sizeof e2), "lambda 0.1: %d %d %d %d", keep[0], keep[1], keep[2],
              keep[3]);
    free(scr);
    keyset_free(&k);
}

static void test_rkv_select(void) {
    /* n 30, prompt 3, obs 4, budget 10: 3 middle slots from [3, 26) */
    float imp[30], red[30];
    for (int j = 0; j < 30; j++) imp[j] = 0.001f * (float)(j % 4), red[j] = 1.0f / 30;
    imp[12] = 0.5f; /* pooled (kernel 3) over 11..13 */
    imp[28] = 9.0f; /* in the observation window: ignored */
    imp[1] = 9.0f;  /* in the prompt: ignored */
    red[11] = 0.6f; /* 11 is a near-duplicate: at lambda 0.5 its pooled 0.5 is outweighed */
    int32_t keep[30], n_keep;
    size_t bytes = kr_kv_select_scratch_bytes(30);
    void *scr = malloc(bytes);
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, 30, 3, 4, 3, 0.5f, 10, keep, &n_keep, scr, bytes), KARA_OK);
    /* 12, 13 pooled 0.5; then pooled 0.003 at slots next to (or at) a j%4==3 slot, the lowest being 3 */
    int32_t e[10] = {0, 1, 2, 3, 12, 13, 26, 27, 28, 29};
    CHECK_MSG(n_keep == 10 && !memcmp(keep, e, sizeof e), "rkv example: %d %d %d", keep[3], keep[4], keep[5]);
    /* everything fits: all kept */
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, 10, 3, 4, 3, 0.5f, 10, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(n_keep, 10);
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, 30, 3, 4, 3, 0.5f, 6, keep, &n_keep, scr, bytes), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "rkv: budget of 6 slots cannot hold 3 protected + 4 observed") != NULL,
              "message: %s", kara_last_error());
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, 30, 3, 4, 2, 0.5f, 10, keep, &n_keep, scr, bytes), KARA_ERR_ARG);
    CHECK_EQ_INT(kr_kv_select_rkv(imp, red, 30, 3, 4, 3, 1.5f, 10, keep, &n_keep, scr, bytes), KARA_ERR_ARG);
    free(scr);
}

/* ---- lazy ---- */

static void test_lazy_tracking(void) {
    /* 12 slots present from the start (last 0, mri 0), 43 steps: slot 3
     * attended every 5 steps, slot 7 once (step 12), slot 5 at steps 1-20
     * only, the others never */
    int32_t last[12] = {0}, mri[12] = {0};
    float attn[12];
    for (int t = 1; t <= 43; t++) {
        for (int j = 0; j < 12; j++) attn[j] = 1e-6f;
        if (t % 5 == 0) attn[3] = 0.2f;
        if (t == 12) attn[7] = 0.2f;
        if (t <= 20) attn[5] = 1e-4f; /* exactly alpha counts */
        kr_kv_lazy_observe(last, mri, attn, 12, t, 1e-4f);
    }
    CHECK(last[3] == 40 && mri[3] == 5);
    CHECK(last[7] == 12 && mri[7] == 12);
    CHECK(last[5] == 20 && mri[5] == 1);
    CHECK(last[9] == 0 && mri[9] == 0);
    /* scores at step 43 (golden values of the formula) */
    CHECK_NEAR(kr_kv_lazy_score(40, 5, 43), 2 / (1 + exp(1 + 3 / 5.00001)) + 2 / (1 + exp(4.0)), 1e-6);
    CHECK_NEAR(kr_kv_lazy_score(12, 12, 43), 2 / (1 + exp(1 + 31 / 12.00001)) + 2 / (1 + exp(11.0)), 1e-6);
    CHECK_NEAR(kr_kv_lazy_score(0, 0, 43), 0.0, 1e-9);
    /* past its longest interval a slot ranks below one still within it */
    CHECK(kr_kv_lazy_score(30, 10, 35) > kr_kv_lazy_score(20, 10, 35));
    CHECK(kr_kv_lazy_score(30, 10, 35) > 2 / (1 + exp(2.0)) && kr_kv_lazy_score(20, 10, 35) < 2 / (1 + exp(2.0)));

    int32_t keep[12], n_keep;
    size_t bytes = kr_kv_select_scratch_bytes(12);
    void *scr = malloc(bytes);
    /* front 2, window 2, budget 6: two slots of [2, 10). Slot 5, attended at every step until step
     * 20, comes first: the reference score's second term (an interval of 1) does not decay with
     * time; then the regular recurrence (3), not the one-off (7) */
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 2, 6, keep, &n_keep, scr, bytes), KARA_OK);
    int32_t e[6] = {0, 1, 3, 5, 10, 11};
    CHECK_MSG(n_keep == 6 && !memcmp(keep, e, sizeof e), "lazy: %d %d", keep[2], keep[3]);
    mri[5] = 0; /* without slot 5: the recurring slot and the one-off, then nothing else */
    last[5] = 0;
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 2, 5, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_MSG(n_keep == 5 && keep[2] == 3, "the regular recurrence survives, the one-off does not: %d", keep[2]);
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 2, 6, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_MSG(n_keep == 6 && keep[2] == 3 && keep[3] == 7, "then the one-off: %d %d", keep[2], keep[3]);
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 2, 12, keep, &n_keep, scr, bytes), KARA_OK);
    CHECK_EQ_INT(n_keep, 12);
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 4, 5, keep, &n_keep, scr, bytes), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "lazy: budget of 5 slots cannot hold 2 protected + a window of 4") != NULL,
              "message: %s", kara_last_error());
    CHECK_EQ_INT(kr_kv_select_lazy(last, mri, 43, 12, 2, 2, 0, keep, &n_keep, scr, bytes), KARA_ERR_ARG);
    free(scr);
}

/* ---- inside real decoding ---- */

static void method_params(kara_kv_params *kv, kara_kv_method m) {
    kara_kv_params_init(kv);
    kv->method = m;
    kv->budget = 0;
    kr_kv_tune(kv)->budget_tokens = 64;
    kr_kv_tune(kv)->rkv.trigger_slack = 24;
    kr_kv_tune(kv)->rkv.obs_window = 6;
    kr_kv_tune(kv)->lazy.window = 16;
    kr_kv_tune(kv)->lazy.alpha = 0.004f; /* about the mean attention over the 64-88 slots of this tiny model */
}

static void test_decoding(kara_model *mdl, kara_kv_method method) {
    const char *name = kara_kv_method_name(method);
    kara_kv_params kv;
    method_params(&kv, method);
    kara_context *c = kr_test_kv_context(mdl, &kv, 1, 2, 1024);
    if (!CHECK(c != NULL)) return;
    const int V = kara_model_n_vocab(mdl), P = 10;
    const int tail = method == KARA_KV_METHOD_RKV ? kr_kv_tune(&kv)->rkv.obs_window : kr_kv_tune(&kv)->lazy.window;
    int32_t prompt[10];
    for (int i = 0; i < P; i++) prompt[i] = 3 + 11 * i;
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &b) == KARA_OK);
    size_t pb = kr_test_kv_prefix_bytes(c, P);
    uint8_t *ref = malloc(pb);
    kr_test_kv_copy_prefix(c, 0, P, ref);
    int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V), events = 0;
    int32_t *before_last = malloc(sizeof(int32_t) * 1024), *before_pos = malloc(sizeof(int32_t) * 1024);
    bool state_follows = true, kept_budget = true, tail_kept = true, inv = true;
    for (int i = 0; i < 300 && ok; i++) {
        const kr_kv_seq *s = &c->kv.seqs[0];
        const kr_kv_policy_seq *q = &c->policy.seqs[0];
        int n_before = s->n;
        if (q->slot_state) { /* lazy's state: its first array, the step each slot was last attended at */
            memcpy(before_last, q->slot_state, sizeof(int32_t) * n_before);
            memcpy(before_pos, s->pos, sizeof(int32_t) * n_before);
        }
        uint64_t ev = c->policy.stats.events;
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "%s step %d: %s", name, i, kara_last_error());
        tok = kr_test_argmax(kara_get_logits(c, -1), V);
        if (c->policy.stats.events == ev) continue;
        events++;
        kept_budget &= s->n == kr_kv_tune(&kv)->budget_tokens;
        /* the newest `tail` slots are the newest positions, consecutive */
        for (int j = 1; j <= tail; j++) tail_kept &= s->pos[s->n - j] == P + i - (j - 1);
        char msg[256];
        inv &=
            CHECK_MSG(kr_test_kv_invariants(c, 0, NULL, P, -1, ref, msg, sizeof msg) == KARA_OK, "%s: %s", name, msg);
        if (q->slot_state) /* every kept slot carries the state it had (the new one: observed once more) */
            for (int j = 0, k = 0; j < s->n - 1; j++) {
                while (k < n_before && before_pos[k] != s->pos[j]) k++;
                state_follows &= k < n_before && (q->slot_state[j] == before_last[k] || q->slot_state[j] == q->steps);
            }
    }
    CHECK_MSG(events >= 8, "%s: %d events in 300 steps", name, events);
    CHECK_MSG(kept_budget, "%s: an event kept other than budget_tokens slots", name);
    CHECK_MSG(tail_kept, "%s: the newest %d slots were not all kept", name, tail);
    CHECK_MSG(inv, "%s: invariants", name);
    if (method == KARA_KV_METHOD_LAZY) {
        CHECK_MSG(state_follows, "lazy: the recurrence state did not follow its slots");
        CHECK_EQ_INT(c->policy.seqs[0].steps, 300);
    }
    CHECK_EQ_INT(c->policy.stats.slots_evicted, (uint64_t)events * (method == KARA_KV_METHOD_RKV ? 24 : 16));
    free(ref);
    free(before_last);
    free(before_pos);
    kara_context_free(c);

    /* a token budget set below the protected prompt and tail: refused at
     * admission with the minimum, even for a request too short ever to
     * fire an event (it would otherwise be ignored without a word) */
    method_params(&kv, method);
    kr_kv_tune(&kv)->budget_tokens = P + tail - 1;
    c = kr_test_kv_context(mdl, &kv, 1, 1, 1024);
    if (!CHECK(c != NULL)) return;
    char want[64];
    snprintf(want, sizeof want, "set at least %d", P + tail);
    for (int n_predict = 200; n_predict >= 5; n_predict -= 195) {
        CHECK_EQ_INT(kara_seq_admit(c, 0, P, n_predict), KARA_ERR_KV_BUDGET);
        CHECK_MSG(strstr(kara_last_error(), want) && strstr(kara_last_error(), name), "message: %s", kara_last_error());
    }
    kara_context_free(c);
    kr_kv_tune(&kv)->budget_tokens = P + tail;
    c = kr_test_kv_context(mdl, &kv, 1, 1, 1024);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(kara_seq_admit(c, 0, P, 200), KARA_OK);
    kara_context_free(c);
}

/* The reservation counts lazy's per-slot state and rkv's redundancy
 * scratch, and both fit a budget that holds them and a few blocks. */
static void test_reservation(kara_model *mdl) {
    kara_kv_params a, b;
    method_params(&a, KARA_KV_METHOD_LAZY);
    method_params(&b, KARA_KV_METHOD_H2O);
    uint64_t lazy = kr_kv_policy_bytes(&a, 4, 4, 2, 32, 3, 1024), h2o = kr_kv_policy_bytes(&b, 4, 4, 2, 32, 3, 1024);
    CHECK_EQ_INT(lazy - h2o, 3 * 1024 * 2 * sizeof(int32_t));
    method_params(&a, KARA_KV_METHOD_RKV);
    method_params(&b, KARA_KV_METHOD_SNAPKV);
    kr_kv_tune(&b)->snapkv.obs_window = kr_kv_tune(&a)->rkv.obs_window;
    uint64_t rkv = kr_kv_policy_bytes(&a, 4, 4, 2, 32, 3, 1024), snap = kr_kv_policy_bytes(&b, 4, 4, 2, 32, 3, 1024);
    CHECK_EQ_INT(rkv - snap, kr_kv_redund_scratch_bytes(1024, 2, 32, KR_KV_SCORE_WORKERS));
    a.budget = kr_kv_budget_for_blocks(&a, 4, 4, 2, 32, 1, 1024, 12);
    kara_context *c = kr_test_kv_context(mdl, &a, 1, 1, 1024);
    if (CHECK(c != NULL)) {
        CHECK_EQ_INT(c->kv.n_blocks, 12);
        kara_context_free(c);
    }
}

/* Settings an event could not use are refused when the context is created. */
static void test_params(kara_model *mdl) {
    kara_kv_params kv;
    method_params(&kv, KARA_KV_METHOD_RKV);
    kr_kv_tune(&kv)->rkv.kernel = 4;
    CHECK(kr_test_kv_context(mdl, &kv, 1, 1, 1024) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "baselines.rkv: kernel must be odd (got 4)") != NULL, "message: %s",
              kara_last_error());
    method_params(&kv, KARA_KV_METHOD_RKV);
    kr_kv_tune(&kv)->rkv.lambda = 2.0f;
    CHECK(kr_test_kv_context(mdl, &kv, 1, 1, 1024) == NULL);
    method_params(&kv, KARA_KV_METHOD_LAZY);
    kr_kv_tune(&kv)->lazy.window = 0;
    CHECK(kr_test_kv_context(mdl, &kv, 1, 1, 1024) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "baselines.lazy: window must be at least 1 (got 0)") != NULL, "message: %s",
              kara_last_error());
    /* another method ignores them */
    kv.method = KARA_KV_METHOD_H2O;
    kara_context *c = kr_test_kv_context(mdl, &kv, 1, 1, 1024);
    if (CHECK(c != NULL)) kara_context_free(c);
}

int main(void) {
    test_redund_reference();
    test_redund_newest_duplicate();
    test_rkv_redundancy_changes_choice();
    test_rkv_select();
    test_lazy_tracking();
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-rl.gguf");
    if (CHECK(m != NULL)) {
        test_decoding(m, KARA_KV_METHOD_RKV);
        test_decoding(m, KARA_KV_METHOD_LAZY);
        test_reservation(m);
        test_params(m);
        kara_model_free(m);
    }
    return kr_test_finish();
}
