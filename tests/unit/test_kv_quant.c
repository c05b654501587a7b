/* test_kv_quant.c - the q8_0 and q4_0 KV cache types (runtime/kv/kv_quant.h):
 *   - a row's round trip stays within one quantisation step of each
 *     block (q8_0: amax / 127; q4_0: amax / 8), a range read across
 *     blocks and heads equals the whole row's, the bytes are GGML's
 *     (kr_quantize_row / kr_dequantize_row) and the in-place dot product
 *     equals the dot with the dequantised values; the scorer's logits
 *     with blocked keys (dequantised runs on the stack, or in place for
 *     heads over 256 values) match a double dot product to 1e-5;
 *   - on the seeded tiny model (4 layers, 4 query heads, 2 KV heads of
 *     32; random weights, logits up to about 4) the logits of a q8_0 cache
 *     stay within 0.1 of an f16 cache's (max |dlogit| over 64 positions)
 *     and q4_0's within 1.5; the top-1 token is the same wherever f16's
 *     leads the second by more than twice that, and with q8_0 at 90% of
 *     the positions at least;
 *   - slot bytes are the blocks' (34 or 18 per 32 values) and a byte
 *     budget holds 1.88x (q8_0) and 3.55x (q4_0) the blocks of f16;
 *   - every method (kara with a small window, h2o, snapkv, streaming, rkv,
 *     lazy, chunkkv, recent, random) decodes 300 steps under a small byte
 *     budget in either type: it never exceeds the budget, compresses,
 *     keeps the invariants, and 1 and 2 threads give the same tokens and
 *     logits bit for bit;
 *   - a model whose rows are not a multiple of 32 values is refused at
 *     context creation with the row length in the message;
 *   - the query ring is q8_0 by default (0.53x f16's bytes) and falls
 *     back to f16 for query rows that are not a multiple of 32 values; the
 *     window scores read from a wrapping q8_0 ring equal those of f32 rows
 *     of the same values and stay within 2% of the unrounded queries';
 *   - a sequence state saved under q8_0 loads into a q8_0 context and
 *     continues as the original did, and is refused by an f16 one with
 *     both type names in the message;
 *   - with heads of 32 attention reads the q8_0 cache in place (queries
 *     quantised, integer products): a prompt fed at once and token by
 *     token gives the same logits bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_plan.h"
#include "kv_quant.h"
#include "kv_score.h"
#include "synth_model.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ---- rows ---- */

/* Each value within frac x its block's largest magnitude of the original. */
static void test_row_roundtrip(kara_kv_dtype t, kr_type gt, double frac) {
    enum { N = 256 };
    float x[N], y[N], part[N];
    uint8_t row[N * 4], ref[N * 4];
    for (int i = 0; i < N; i++) x[i] = (float)((urand() - 0.5) * 4.0 * (i % 37 == 0 ? 8.0 : 1.0));
    x[40] = 0.0f; /* a block with a zero and one of all zeros */
    for (int i = 224; i < N; i++) x[i] = 0.0f;
    size_t rb = kr_kv_row_bytes(t, N);
    CHECK_EQ_INT(rb, (size_t)N / 32 * (t == KARA_KV_Q8_0 ? 34 : 18));
    kr_kv_row_store(t, x, row, N);
    CHECK(kr_quantize_row(gt, x, ref, N));
    CHECK_MSG(memcmp(row, ref, rb) == 0, "%s: bytes differ from the reference quantiser", kara_kv_dtype_name(t));
    kr_kv_row_load(t, row, 0, N, y);
    kr_dequantize_row(gt, row, part, N);
    CHECK_MSG(memcmp(y, part, sizeof y) == 0, "%s: values differ from the kernels' dequantiser", kara_kv_dtype_name(t));
    double worst = 0.0;
    for (int b = 0; b < N / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        const double bound = amax * frac + 1e-7;
        for (int j = 0; j < 32; j++) {
            double e = fabs((double)x[b * 32 + j] - y[b * 32 + j]);
            worst = fmax(worst, e / (bound > 0 ? bound : 1));
            CHECK_MSG(e <= bound, "%s: element %d off by %g > %g", kara_kv_dtype_name(t), b * 32 + j, e, bound);
        }
    }
    printf("%s row round trip: worst error %.3f of the bound (%.5f x the block's amax)\n", kara_kv_dtype_name(t), worst,
           frac);
    for (int i = 224; i < N; i++) CHECK(y[i] == 0.0f);
    /* ranges: heads of 20 values (not block-aligned), single values, a dot product */
    for (int v0 = 0; v0 + 20 <= N; v0 += 20) {
        kr_kv_row_load(t, row, v0, 20, part);
        CHECK_MSG(memcmp(part, y + v0, 20 * sizeof(float)) == 0, "%s: range at %d", kara_kv_dtype_name(t), v0);
        double dot = 0.0;
        for (int j = 0; j < 20; j++) dot += (double)x[j] * y[v0 + j];
        float got = kr_kv_row_dot(t, row, v0, 20, x);
        CHECK_MSG(fabs(got - dot) <= 1e-4 * (1.0 + fabs(dot)), "%s: dot at %d: %g vs %g", kara_kv_dtype_name(t), v0,
                  (double)got, dot);
    }
    for (int i = 0; i < N; i += 7) CHECK(kr_kv_row_value(t, row, i) == y[i]);
}

/* Logits of f32 queries with the keys of q8_0/q4_0 rows (kv_score.h): the
 * stack path (heads up to 256 values, gemm_nt) and the in-place path
 * (longer heads) against a double-precision dot product of the dequantised
 * keys, within 1e-5 relative. Rows hold 2 heads of d; keys 0..40 of head 1. */
static void test_logits_blocked(kara_kv_dtype t, int32_t d) {
    enum { NK = 41, NQ = 3 };
    const int64_t rowlen = 2 * (int64_t)d;
    const size_t rb = kr_kv_row_bytes(t, rowlen);
    uint8_t *rows = malloc(rb * NK);
    float *x = malloc((size_t)rowlen * sizeof(float)), *q = malloc((size_t)NQ * d * sizeof(float));
    float *k = malloc((size_t)d * sizeof(float)), z[NQ * NK];
    for (int j = 0; j < NK; j++) {
        for (int64_t i = 0; i < rowlen; i++) x[i] = (float)(urand() - 0.5);
        kr_kv_row_store(t, x, rows + (size_t)j * rb, rowlen);
    }
    for (int i = 0; i < NQ * d; i++) q[i] = (float)(urand() - 0.5);
    kr_kv_rows r = kr_kv_rows_plain(t, rows, rb);
    kr_kv_rows_logits(kr_kernels_get(), &r, 1, NK, d, q, NQ, z, NK);
    double worst = 0.0;
    for (int j = 0; j < NK; j++) {
        kr_kv_row_load(t, rows + (size_t)j * rb, d, d, k);
        for (int a = 0; a < NQ; a++) {
            double ref = 0.0, mag = 0.0;
            for (int i = 0; i < d; i++) {
                ref += (double)q[a * d + i] * k[i];
                mag += fabs((double)q[a * d + i] * k[i]);
            }
            worst = fmax(worst, fabs(z[a * NK + j] - ref) / (mag + 1e-30));
        }
    }
    CHECK_MSG(worst < 1e-5, "%s logits, heads of %d: relative error %.3g", kara_kv_dtype_name(t), d, worst);
    free(rows);
    free(x);
    free(q);
    free(k);
}

/* ---- the model ---- */

static kara_context *full_ctx(kara_model *m, kara_kv_dtype t, int threads) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = KARA_KV_METHOD_FULL;
    kv.dtype = t;
    kv.budget = 0;
    return kr_test_kv_context(m, &kv, 1, threads, 256);
}

/* Logits of a 48-token prompt (all positions) and 16 greedy steps. */
enum { T_PROMPT = 48, T_STEPS = 16, T_ALL = T_PROMPT + T_STEPS };
static float *model_logits(kara_model *m, kara_kv_dtype t) {
    const int V = kara_model_n_vocab(m);
    kara_context *c = full_ctx(m, t, 2);
    if (!CHECK(c != NULL)) return NULL;
    float *out = malloc((size_t)T_ALL * V * sizeof(float));
    int32_t toks[T_PROMPT], pos[T_PROMPT];
    int8_t want[T_PROMPT];
    for (int i = 0; i < T_PROMPT; i++) {
        toks[i] = (int32_t)((i * 37 + 11) % V);
        pos[i] = i;
        want[i] = 1;
    }
    kara_batch b = {.n_tokens = T_PROMPT, .tokens = toks, .pos = pos, .seq_id = NULL, .logits = want};
    CHECK(kara_decode(c, &b) == KARA_OK);
    for (int i = 0; i < T_PROMPT; i++) memcpy(out + (size_t)i * V, kara_get_logits(c, i), (size_t)V * sizeof(float));
    for (int i = 0; i < T_STEPS; i++) {
        /* the f16 run's tokens are fed to every type: compare like with like */
        int32_t tok = (int32_t)((i * 53 + 5) % V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, T_PROMPT + i, 0);
        CHECK(kara_decode(c, &one) == KARA_OK);
        memcpy(out + (size_t)(T_PROMPT + i) * V, kara_get_logits(c, -1), (size_t)V * sizeof(float));
    }
    kara_context_free(c);
    return out;
}

static void test_model_logits(kara_model *m) {
    const int V = kara_model_n_vocab(m);
    float *f16 = model_logits(m, KARA_KV_F16);
    const kara_kv_dtype types[] = {KARA_KV_Q8_0, KARA_KV_Q4_0};
    const double tol[] = {0.1, 1.5};
    for (int k = 0; k < 2 && f16; k++) {
        float *q = model_logits(m, types[k]);
        if (!q) continue;
        double max_d = 0.0, sum_d = 0.0, max_l = 0.0;
        int agree = 0, clear = 0, clear_agree = 0;
        for (int t = 0; t < T_ALL; t++) {
            const float *a = f16 + (size_t)t * V, *g = q + (size_t)t * V;
            int top = kr_test_argmax(a, V), second = top ? 0 : 1;
            for (int j = 0; j < V; j++) {
                max_d = fmax(max_d, fabs((double)a[j] - g[j]));
                sum_d += fabs((double)a[j] - g[j]);
                max_l = fmax(max_l, fabs((double)a[j]));
                if (j != top && a[j] > a[second]) second = j;
            }
            bool same = top == kr_test_argmax(g, V);
            agree += same;
            /* a top-1 ahead of the second by more than twice the tolerance must stay first */
            if (a[top] - a[second] > 2 * tol[k]) {
                clear++;
                clear_agree += same;
            }
        }
        printf("%s KV vs f16 KV: max |dlogit| %.4g, mean %.3g (logits up to %.3g); top-1 agrees at %d of %d "
               "positions, %d of the %d with a margin above %.2g\n",
               kara_kv_dtype_name(types[k]), max_d, sum_d / ((double)T_ALL * V), max_l, agree, T_ALL, clear_agree,
               clear, 2 * tol[k]);
        CHECK_MSG(max_d <= tol[k], "%s: max |dlogit| %.4g > %.3g", kara_kv_dtype_name(types[k]), max_d, tol[k]);
        CHECK_MSG(max_d > 0.0, "%s: logits equal f16's bit for bit (was the type applied?)",
                  kara_kv_dtype_name(types[k]));
        CHECK_MSG(clear_agree == clear, "%s: top-1 differs at %d positions with a clear margin",
                  kara_kv_dtype_name(types[k]), clear - clear_agree);
        if (types[k] == KARA_KV_Q8_0)
            CHECK_MSG(agree >= T_ALL * 9 / 10, "q8_0: top-1 agrees at only %d of %d positions", agree, T_ALL);
        free(q);
    }
    free(f16);
}

static void test_slot_bytes_and_budget(kara_model *m) {
    const kara_kv_dtype types[] = {KARA_KV_F16, KARA_KV_Q8_0, KARA_KV_Q4_0};
    const size_t want[] = {64 * 2, 2 * 34, 2 * 18}; /* a row of 2 KV heads x 32 */
    const uint64_t budget = 512u << 10;             /* below what 2048 slots need in any type */
    int32_t blocks[3] = {0};
    for (int k = 0; k < 3; k++) {
        kara_kv_params kv;
        kara_kv_params_init(&kv);
        kv.method = KARA_KV_METHOD_FULL;
        kv.dtype = types[k];
        kv.budget = budget;
        kara_context *c = kr_test_kv_context(m, &kv, 1, 1, 2048);
        if (!CHECK(c != NULL)) continue;
        CHECK_EQ_INT(c->kv.slot_bytes, want[k]);
        CHECK_EQ_INT(c->kv.bytes_per_block, 4 * 2 * 16 * want[k]); /* layers x K,V x slots */
        CHECK_EQ_INT(c->kv.n_blocks, budget / (4 * 2 * 16 * want[k]));
        blocks[k] = c->kv.n_blocks;
        kara_context_free(c);
    }
    double r8 = (double)blocks[1] / blocks[0], r4 = (double)blocks[2] / blocks[0];
    printf("blocks in a 512 KiB budget: f16 %d, q8_0 %d (%.2fx), q4_0 %d (%.2fx)\n", blocks[0], blocks[1], r8,
           blocks[2], r4);
    CHECK_MSG(r8 > 1.8 && r8 < 1.9, "q8_0 holds %.3fx the blocks of f16, not about 128/68", r8);
    CHECK_MSG(r4 > 3.4 && r4 < 3.6, "q4_0 holds %.3fx the blocks of f16, not about 128/36", r4);
}

/* ---- methods under a byte budget ---- */

static const kara_kv_method methods[] = {
    KARA_KV_METHOD_KARA, KARA_KV_METHOD_H2O,     KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_RKV,
    KARA_KV_METHOD_LAZY, KARA_KV_METHOD_CHUNKKV, KARA_KV_METHOD_RECENT, KARA_KV_METHOD_RANDOM,
};

static int32_t *generate(kara_model *m, const kara_kv_params *kv, int threads, int n_steps, float **logits_out) {
    kara_context *c = kr_test_kv_context(m, kv, 1, threads, 1024);
    if (!CHECK(c != NULL)) return NULL;
    const int V = kara_model_n_vocab(m);
    const char *name = kara_kv_method_name(kv->method), *tn = kara_kv_dtype_name(kv->dtype);
    int32_t prompt[6] = {1, 17, 33, 49, 65, 81};
    int32_t *toks = malloc((size_t)n_steps * sizeof *toks);
    float *logits = malloc((size_t)n_steps * V * sizeof(float));
    kara_batch b = kara_batch_one_sequence(prompt, 6, 0, 0);
    kara_status st = kara_decode(c, &b);
    bool inv_ok = true, budget_ok = true;
    uint64_t events = 0;
    for (int i = 0; i < n_steps && st == KARA_OK; i++) {
        const float *l = kara_get_logits(c, -1);
        memcpy(logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        toks[i] = kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&toks[i], 1, 6 + i, 0);
        st = kara_decode(c, &nb);
        budget_ok &= kara_context_kv_bytes(c) <= kv->budget;
        if (c->policy.stats.events != events) {
            events = c->policy.stats.events;
            const kr_kv_policy_seq *q = &c->policy.seqs[0];
            int n = c->kv.seqs[0].n, protect = q->prompt_marked ? q->n_prompt : 0;
            if (kv->method == KARA_KV_METHOD_STREAMING) protect = kr_kv_tune(&c->policy.p)->streaming.n_sink;
            if (kv->method == KARA_KV_METHOD_SNAPKV && !kr_kv_tune(&c->policy.p)->snapkv.protect_prompt) protect = 0;
            if (protect > n) protect = n;
            int frontier = q->prompt_marked ? (q->frontier < n ? q->frontier : n) : -1;
            char msg[256];
            kara_status is = kr_test_kv_invariants(c, 0, NULL, protect, frontier, NULL, msg, sizeof msg);
            if (is != KARA_OK && inv_ok) CHECK_MSG(false, "%s %s: %s", name, tn, msg);
            inv_ok &= is == KARA_OK;
        }
    }
    CHECK_MSG(st == KARA_OK, "%s %s: decode failed: %s", name, tn, kara_last_error());
    CHECK_MSG(budget_ok && kara_context_kv_bytes_peak(c) <= kv->budget, "%s %s: KV bytes exceeded the budget", name,
              tn);
    CHECK_MSG(events > 0, "%s %s: no compression event in %d steps", name, tn, n_steps);
    CHECK_MSG(c->kv.seqs[0].n < 6 + n_steps, "%s %s: holds all %d tokens", name, tn, c->kv.seqs[0].n);
    kara_context_free(c);
    *logits_out = logits;
    return toks;
}

static void test_methods(kara_model *m, kara_kv_dtype t) {
    enum { STEPS = 300 };
    const int V = kara_model_n_vocab(m);
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        kara_kv_params kv;
        kara_kv_params_init(&kv);
        kv.method = methods[i];
        kv.dtype = t;
        kr_kv_tune(&kv)->evict = KARA_KV_EVICT_PER_WINDOW;
        kr_test_small_windows(&kv);
        kr_kv_tune(&kv)->budget_tokens = 96;
        kr_kv_tune(&kv)->snapkv.trigger_slack = 32;
        kr_kv_tune(&kv)->rkv.trigger_slack = 32;
        kr_kv_tune(&kv)->lazy.window = 32;
        /* the policy's reservations and 10 blocks of this type besides */
        kv.budget = kr_kv_budget_for_blocks(&kv, 4, 4, 2, 32, 1, 1024, 10);
        float *l1 = NULL, *l2 = NULL;
        int32_t *t1 = generate(m, &kv, 1, STEPS, &l1), *t2 = generate(m, &kv, 2, STEPS, &l2);
        if (t1 && t2)
            CHECK_MSG(memcmp(t1, t2, STEPS * sizeof *t1) == 0 && memcmp(l1, l2, (size_t)STEPS * V * sizeof(float)) == 0,
                      "%s %s: 1 and 2 threads differ", kara_kv_method_name(methods[i]), kara_kv_dtype_name(t));
        free(t1);
        free(t2);
        free(l1);
        free(l2);
    }
}

/* ---- refusals and sequence state ---- */

static void test_bad_row(void) {
    /* qwen3 heads of 20: rows of 2 x 20 = 40 values */
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    sp.head_dim = 20;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/rows40.gguf", kr_test_tmpdir());
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "write: %s", err)) return;
    kara_model *m = NULL;
    if (!CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "load: %s", kara_last_error())) return;
    for (int k = 0; k < 2; k++) {
        kara_context_params cp;
        kara_context_params_init(&cp);
        cp.n_ctx = 64;
        cp.kv.dtype = k ? KARA_KV_Q4_0 : KARA_KV_Q8_0;
        kara_context *c = NULL;
        CHECK_EQ_INT(kara_context_create(m, &cp, &c), KARA_ERR_UNSUPPORTED);
        CHECK(c == NULL);
        CHECK_MSG(strstr(kara_last_error(), "40") && strstr(kara_last_error(), kara_kv_dtype_name(cp.kv.dtype)) &&
                      strstr(kara_last_error(), "32"),
                  "message: %s", kara_last_error());
        kara_context_free(c);
    }
    kara_context *c = full_ctx(m, KARA_KV_F16, 1);
    CHECK_MSG(c != NULL, "f16 on rows of 40 values: %s", kara_last_error());
    kara_context_free(c);
    kara_model_free(m);
    remove(path);
}

/* A q8_0 cache read in place (heads of 32: the queries quantised, integer
 * products): a prompt fed at once and token by token gives the same logits
 * bit for bit at every position, as f16's does; the entries of a chunk
 * share the key rows, and no score may depend on which share them. */
static void test_prompt_split(kara_model *m) {
    enum { N = 40 };
    const int V = kara_model_n_vocab(m);
    kara_context *a = full_ctx(m, KARA_KV_Q8_0, 1), *b = full_ctx(m, KARA_KV_Q8_0, 1);
    if (!CHECK(a && b)) return;
    int32_t toks[N], pos[N];
    int8_t want[N];
    for (int i = 0; i < N; i++) {
        toks[i] = (int32_t)((i * 41 + 9) % V);
        pos[i] = i;
        want[i] = 1;
    }
    kara_batch all = {.n_tokens = N, .tokens = toks, .pos = pos, .seq_id = NULL, .logits = want};
    CHECK(kara_decode(a, &all) == KARA_OK);
    int differ = 0;
    for (int i = 0; i < N; i++) {
        kara_batch one = kara_batch_one_sequence(&toks[i], 1, i, 0);
        CHECK(kara_decode(b, &one) == KARA_OK);
        differ += memcmp(kara_get_logits(a, i), kara_get_logits(b, -1), (size_t)V * sizeof(float)) != 0;
    }
    CHECK_MSG(differ == 0, "q8_0: %d of %d positions differ between a prompt at once and token by token", differ, N);
    kara_context_free(a);
    kara_context_free(b);
}

static void test_seq_state(kara_model *m) {
    const int V = kara_model_n_vocab(m);
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = (int32_t)((i * 29 + 3) % V);
    kara_context *a = full_ctx(m, KARA_KV_Q8_0, 1), *b = full_ctx(m, KARA_KV_Q8_0, 1), *f = full_ctx(m, KARA_KV_F16, 1);
    if (!CHECK(a && b && f)) return;
    kara_batch pb = kara_batch_one_sequence(prompt, 20, 0, 0);
    CHECK(kara_decode(a, &pb) == KARA_OK);
    size_t size = kara_seq_state_size(a, 0), written = 0;
    int32_t toks[64], n_toks = 0;
    void *buf = malloc(size);
    CHECK_MSG(kara_seq_state_save(a, 0, prompt, 20, buf, size, &written) == KARA_OK, "save: %s", kara_last_error());
    CHECK_MSG(kara_seq_state_load(b, 0, buf, written, toks, 64, &n_toks) == KARA_OK, "load: %s", kara_last_error());
    CHECK_EQ_INT(n_toks, 20);
    /* the same next steps from the original and the loaded copy */
    bool same = true;
    int32_t tok = 7;
    for (int i = 0; i < 8; i++) {
        kara_batch one = kara_batch_one_sequence(&tok, 1, 20 + i, 0);
        CHECK(kara_decode(a, &one) == KARA_OK && kara_decode(b, &one) == KARA_OK);
        same &= memcmp(kara_get_logits(a, -1), kara_get_logits(b, -1), (size_t)V * sizeof(float)) == 0;
        tok = kr_test_argmax(kara_get_logits(a, -1), V);
    }
    CHECK_MSG(same, "q8_0: a loaded sequence continues differently");
    CHECK_EQ_INT(kara_seq_state_load(f, 0, buf, written, toks, 64, &n_toks), KARA_ERR_FORMAT);
    CHECK_MSG(strstr(kara_last_error(), "q8_0") && strstr(kara_last_error(), "f16"), "message: %s", kara_last_error());
    free(buf);
    kara_context_free(a);
    kara_context_free(b);
    kara_context_free(f);
}

/* Window scores of n_w query rows q (any layout) against f32 keys, mode
 * bidirectional .. buffer_only, softmax over the window and 3 sinks. */
static void ring_scores(const kr_kv_rows *q, const float *k, const float *sink, int mode, float *out) {
    kr_kv_score_shape sh = {45, 9, 4, 2, 24, 3};
    size_t kst = (size_t)sh.n_head_kv * sh.head_dim * sizeof(float), bytes = kr_kv_score_scratch_bytes(&sh, 1);
    kr_kv_rows kr = kr_kv_rows_plain(KARA_KV_F32, k, kst), sr = kr_kv_rows_plain(KARA_KV_F32, sink, kst);
    kr_kv_score_opts o = {(kr_score_mode)mode, KR_SOFTMAX_WINDOW_PLUS_SINKS, false, KR_REDUCE_MEAN, false};
    void *scratch = malloc(bytes);
    kr_kv_score_job job;
    if (CHECK_EQ_INT(kr_kv_score_prepare(&job, &sh, &o, q, &kr, &sr, scratch, bytes, 1), KARA_OK))
        kr_kv_score_run(&job, out, NULL);
    free(scratch);
}

/* The query ring in q8_0 (query_cache_dtype's default): rows of 4 heads of
 * 24 in blocks of 32 that straddle heads, in a ring that wraps from a
 * negative first row. In every mode the scores equal those of f32 rows
 * holding the dequantised queries (1e-6; test_kv_score checks f32 rows
 * against the formulas) and stay within 2% of the unrounded queries'. */
static void test_q8_query_ring(void) {
    enum { N_W = 45, ROW = 4 * 24, CAP = N_W + 7, N_C = 36, KV = 2 * 24 };
    static float exact[N_W * ROW], dq[N_W * ROW], k[N_W * KV], sink[3 * KV];
    for (int i = 0; i < N_W * ROW; i++) exact[i] = (float)(3 * urand() - 1.5);
    for (int i = 0; i < N_W * KV; i++) k[i] = (float)(3 * urand() - 1.5);
    for (int i = 0; i < 3 * KV; i++) sink[i] = (float)(3 * urand() - 1.5);
    const size_t row_b = kr_kv_row_bytes(KARA_KV_Q8_0, ROW);
    CHECK_EQ_INT((int)row_b, ROW / 32 * 34);
    uint8_t *ring = calloc(CAP, row_b);
    kr_kv_rows q = {KARA_KV_Q8_0, ring, row_b, 0, -5 - 3 * (int64_t)CAP, CAP, NULL, 0, 0};
    for (int i = 0; i < N_W; i++) {
        uint8_t *row = ring + (size_t)((((q.first + i) % CAP) + CAP) % CAP) * row_b;
        kr_kv_row_store(KARA_KV_Q8_0, exact + i * ROW, row, ROW);
        kr_kv_row_load(KARA_KV_Q8_0, row, 0, ROW, dq + i * ROW);
    }
    kr_kv_rows q_dq = kr_kv_rows_plain(KARA_KV_F32, dq, ROW * sizeof(float));
    kr_kv_rows q_exact = kr_kv_rows_plain(KARA_KV_F32, exact, ROW * sizeof(float));
    double worst = 0, worst_exact = 0;
    for (int mode = 0; mode < 4; mode++) {
        float got[N_C], ref[N_C], ref_exact[N_C];
        ring_scores(&q, k, sink, mode, got);
        ring_scores(&q_dq, k, sink, mode, ref);
        ring_scores(&q_exact, k, sink, mode, ref_exact);
        double err = 0, err_exact = 0;
        for (int j = 0; j < N_C; j++) {
            err = fmax(err, fabs(got[j] - ref[j]) / (1e-3 + fabs(ref[j])));
            err_exact = fmax(err_exact, fabs(got[j] - ref_exact[j]) / (1e-3 + fabs(ref_exact[j])));
        }
        CHECK_MSG(err <= 1e-6 && err_exact <= 0.02, "q8_0 ring, mode %d: rel err %g (dequantised), %g (unrounded)",
                  mode, err, err_exact);
        worst = fmax(worst, err);
        worst_exact = fmax(worst_exact, err_exact);
    }
    printf("q8_0 query ring: scores within %.3g of f32 rows of the same values, %.3g of the unrounded queries\n", worst,
           worst_exact);
    free(ring);
}

/* The query ring's type (kara.query_cache_dtype): q8_0 by default, 34
 * bytes per 32 values, so the plan reserves 0.53x f16's ring; a model
 * whose query rows are not a multiple of 32 values (4 heads of 20) keeps
 * f16 instead of failing. */
static void test_query_ring_plan(void) {
    kara_kv_params p;
    kara_kv_params_init(&p);
    CHECK_EQ_INT(kr_kv_tune(&p)->query_cache_dtype, KARA_KV_Q8_0);
    p.budget = 2u << 20; /* less than 3 whole sequences of either shape: the policy scores */
    kr_kv_shape aligned = {4, 4, 2, 32}, odd = {4, 4, 2, 20};
    kr_kv_plan plan;
    CHECK_EQ_INT(kr_kv_plan_make(&plan, &p, &aligned, 2048, 3), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&plan.p)->query_cache_dtype, KARA_KV_Q8_0);
    kr_kv_reservation q8, f16;
    kr_kv_reserve_sizes(&q8, &plan.p, &aligned, 3, 2048);
    kara_kv_params pf = p;
    kr_kv_tune(&pf)->query_cache_dtype = KARA_KV_F16;
    kr_kv_reserve_sizes(&f16, &pf, &aligned, 3, 2048);
    /* 3 sequences x 4 layers x 289 rows x 128 values */
    CHECK_EQ_INT((long long)f16.ring, 3LL * 4 * 289 * 128 * 2);
    CHECK_EQ_INT((long long)q8.ring, 3LL * 4 * 289 * 4 * 34);
    CHECK_EQ_INT(kr_kv_plan_make(&plan, &p, &odd, 2048, 3), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&plan.p)->query_cache_dtype, KARA_KV_F16);
    CHECK(plan.scoring);
    CHECK_EQ_INT((long long)plan.reserved_bytes, (long long)kr_kv_policy_bytes(&plan.p, 4, 4, 2, 20, 3, 2048));
}

int main(void) {
    /* the step d is amax / 127 (q8_0) or amax / 8 (q4_0); stored as f16 it
     * is off by up to 2^-11 relative, which moves a value by up to 127 (or
     * 8) times that. q8_0 rounds to the nearest level: half a step; q4_0's
     * levels reach 7 steps on the side opposite the largest value, where
     * the clipping costs a whole step. */
    test_row_roundtrip(KARA_KV_Q8_0, KR_TYPE_Q8_0, (0.5 + 127.0 / 2048.0) / 127.0);
    test_row_roundtrip(KARA_KV_Q4_0, KR_TYPE_Q4_0, (1.0 + 8.0 / 2048.0) / 8.0);
    for (int k = 0; k < 2; k++) {
        test_logits_blocked(k ? KARA_KV_Q4_0 : KARA_KV_Q8_0, 48);  /* heads across block bounds, stack path */
        test_logits_blocked(k ? KARA_KV_Q4_0 : KARA_KV_Q8_0, 272); /* longer than KR_KV_DEQ_MAX_DIM: in place */
    }
    test_bad_row();
    test_query_ring_plan();
    test_q8_query_ring();
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3.gguf");
    if (CHECK(m != NULL)) {
        test_model_logits(m);
        test_slot_bytes_and_budget(m);
        test_methods(m, KARA_KV_Q8_0);
        test_methods(m, KARA_KV_Q4_0);
        test_seq_state(m);
        test_prompt_split(m);
        kara_model_free(m);
    }
    return kr_test_finish();
}
