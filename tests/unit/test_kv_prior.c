/* test_kv_prior.c - Kara's retention prior (docs/KARA_METHOD.md section 14)
 * on a synthetic Qwen3 model copied with kara_prior.* tensors added:
 * - the loader reads the prior (layer, features, shapes) and a model
 *   without one loads with prior.present false;
 * - the prior of a slot, from what the cache holds, equals a value worked
 *   out by hand from one value element and one key-pair norm, and a random
 *   MLP matches a double-precision reference on every slot;
 * - weight 0 leaves the run bit for bit as on the model without a prior
 *   (logits, tokens, kept positions) on demand, per_window and with the
 *   threshold trigger; a large weight changes what is kept;
 * - kr_kv_prior_combine normalises by the window's maximum;
 * - malformed priors (a w1 the cache rows cannot feed, an F16 tensor, a
 *   missing tensor, a bad features key) are load errors naming the tensor
 *   or key; prior_weight > 0 on a model without a prior is refused when
 *   the context is created, while auto (the default) turns it off there and
 *   uses KR_PRIOR_WEIGHT_AUTO on a model with one;
 * - snapkv, h2o and streaming take the prior through the same key: auto
 *   leaves them bit for bit the published methods, a weight changes what
 *   they keep, and streaming's events keep the sinks, the prior's best
 *   older slots and the newest exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "gguf_writer.h"
#include "kv_prior.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_CTX 1024
#define P 6
#define STEPS 300
static const int32_t prompt[P] = {1, 17, 33, 49, 65, 81};

/* tiny: 2 KV heads of 32, all dimensions rotated: 64 values + 32 pair norms */
#define N_IN_V 64
#define N_IN 96
#define HIDDEN 8

/* One prior tensor to write: skip it, or its type, shape and data. */
typedef struct ptensor {
    bool skip;
    kr_type type;
    int64_t ne0, ne1; /* ne1 0: a vector */
    const void *data;
} ptensor;

typedef struct pspec {
    uint32_t layer;
    const char *features;
    ptensor t[4]; /* w1, b1, w2, b2 */
} pspec;

static const char *const tnames[4] = {"kara_prior.w1", "kara_prior.b1", "kara_prior.w2", "kara_prior.b2"};

/* Copy the GGUF src to dst (metadata and tensors) and add the prior of sp. */
static bool write_with_prior(const char *src, const char *dst, const pspec *sp) {
    kara_gguf *g = NULL;
    kr_gguf_writer *w = NULL;
    if (!CHECK(kara_gguf_open(src, &g) == KARA_OK) || !CHECK(kr_gguf_writer_create(&w) == KARA_OK)) return false;
    bool ok = true;
    char name[256];
    for (uint64_t i = 0; ok && i < kara_gguf_n_kv(g); i++) {
        const kara_gguf_kv *kv = kara_gguf_kv_at(g, i);
        snprintf(name, sizeof name, "%.*s", (int)kv->key.len, kv->key.ptr);
        ok = kr_gguf_writer_set_value(w, name, &kv->value) == KARA_OK;
    }
    ok = ok && kr_gguf_writer_set_u32(w, "kara.prior.layer", sp->layer) == KARA_OK;
    ok = ok && kr_gguf_writer_set_str(w, "kara.prior.features", sp->features) == KARA_OK;
    for (uint64_t i = 0; ok && i < kara_gguf_n_tensors(g); i++) {
        const kara_gguf_tensor *t = kara_gguf_tensor_at(g, i);
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        ok = kr_gguf_writer_add_tensor(w, name, (kr_type)t->type, (int)t->n_dims, t->ne, t->data) == KARA_OK;
    }
    for (int i = 0; ok && i < 4; i++) {
        const ptensor *t = &sp->t[i];
        int64_t ne[2] = {t->ne0, t->ne1};
        if (!t->skip) ok = kr_gguf_writer_add_tensor(w, tnames[i], t->type, t->ne1 ? 2 : 1, ne, t->data) == KARA_OK;
    }
    ok = ok && kr_gguf_writer_save(w, dst) == KARA_OK;
    CHECK_MSG(ok, "writing %s: %s", dst, kr_gguf_writer_error(w));
    kr_gguf_writer_free(w);
    kara_gguf_close(g);
    return ok;
}

/* A path in the test's folder (the last four stay valid). */
static const char *tmp(const char *file) {
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", kr_test_tmpdir(), file);
    return path[k];
}

static void pspec_f32(pspec *sp, uint32_t layer, const char *features, int32_t n_in, int32_t hidden, const float *w1,
                      const float *b1, const float *w2, const float *b2) {
    memset(sp, 0, sizeof *sp);
    sp->layer = layer;
    sp->features = features;
    sp->t[0] = (ptensor){false, KR_TYPE_F32, n_in, hidden, w1};
    sp->t[1] = (ptensor){false, KR_TYPE_F32, hidden, 0, b1};
    sp->t[2] = (ptensor){false, KR_TYPE_F32, hidden, 0, w2};
    sp->t[3] = (ptensor){false, KR_TYPE_F32, 1, 0, b2};
}

/* Load path; expect KARA_ERR_FORMAT naming `what`. */
static void expect_load_error(const char *path, const char *what) {
    kara_model *m = NULL;
    kr_test_clear_error();
    kara_status st = kara_model_load(path, NULL, &m);
    CHECK_MSG(st == KARA_ERR_FORMAT && m == NULL && strstr(kara_last_error(), what),
              "%s: status %d, error '%s', expected a format error naming %s", path, (int)st, kara_last_error(), what);
    kara_model_free(m);
}

static float f32_of(const kr_kv_cache *kv, const void *row, int i) {
    return kv->dtype == KARA_KV_F32 ? ((const float *)row)[i] : kr_fp16_to_fp32(((const kr_fp16 *)row)[i]);
}

/* Prefill the prompt and decode n greedy steps on a fresh context (full). */
static kara_context *prefilled(kara_model *m, int n) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!c) return NULL;
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    CHECK(kara_decode(c, &b) == KARA_OK);
    for (int i = 0; i < n; i++) {
        int32_t t = kr_test_argmax(kara_get_logits(c, -1), kara_model_n_vocab(m));
        kara_batch nb = kara_batch_one_sequence(&t, 1, P + i, 0);
        CHECK(kara_decode(c, &nb) == KARA_OK);
    }
    return c;
}

/* A prior that reads value element 3 and key-pair norm 5 of KV head 0 of
 * layer 1: prior = sigmoid(1.5 relu(2 v3 + 0.5) - 0.75 relu(|k pair 5| - 0.25) + 0.1). */
static void test_hand_value(const char *base) {
    static float w1[2 * N_IN];
    memset(w1, 0, sizeof w1);
    w1[3] = 2.0f;
    w1[N_IN + N_IN_V + 5] = 1.0f;
    const float b1[2] = {0.5f, -0.25f}, w2[2] = {1.5f, -0.75f}, b2[1] = {0.1f};
    pspec sp;
    pspec_f32(&sp, 1, "v+kpair", N_IN, 2, w1, b1, w2, b2);
    const char *path = tmp("prior-hand.gguf");
    if (!write_with_prior(base, path, &sp)) return;
    kara_model *m = NULL;
    if (!CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "load: %s", kara_last_error())) return;
    const kr_prior *pr = &m->prior;
    CHECK(pr->present && pr->layer == 1 && pr->key_pairs && pr->n_in == N_IN && pr->n_hidden == 2);
    CHECK(m->hp.rope_neox && m->hp.rope_dim == 32); /* qwen3: NeoX pairs (i, i + 16) */
    kara_context *c = prefilled(m, 20);
    if (!CHECK(c != NULL)) goto done;
    const kr_kv_prior *p = &c->policy.prior;
    CHECK(!c->policy.use_prior); /* weight 0 (the default): kept, unused */
    float scratch[N_IN + 2];
    double worst = 0;
    for (int j = 0; j < P + 20; j++) {
        const void *v = kr_kv_v(&c->kv, 1, 0, j), *k = kr_kv_k(&c->kv, 1, 0, j);
        double v3 = f32_of(&c->kv, v, 3), k5 = f32_of(&c->kv, k, 5), k21 = f32_of(&c->kv, k, 21);
        double h0 = fmax(2.0 * v3 + 0.5, 0.0), h1 = fmax(sqrt(k5 * k5 + k21 * k21) - 0.25, 0.0);
        double want = 1.0 / (1.0 + exp(-(1.5 * h0 - 0.75 * h1 + 0.1)));
        double got = kr_kv_prior_slot(p, &c->kv, 0, j, scratch);
        worst = fmax(worst, fabs(got - want));
    }
    CHECK_MSG(worst < 1e-6, "hand-worked prior: worst difference %g", worst);
    kara_context_free(c);
done:
    kara_model_free(m);
}

static uint64_t rng = 7;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / 16777216.0 - 0.5);
}

static float rw1[HIDDEN * N_IN], rb1[HIDDEN], rw2[HIDDEN], rb2[1];

/* A random MLP over every slot against a double reference. */
static void test_random_mlp(kara_model *m) {
    kara_context *c = prefilled(m, 40);
    if (!CHECK(c != NULL)) return;
    const kr_kv_prior *p = &c->policy.prior;
    CHECK(p->n_in == N_IN && p->n_hidden == HIDDEN && p->layer == 2);
    static float out[P + 40];
    float scratch[N_IN + HIDDEN];
    kr_kv_prior_eval(p, &c->kv, 0, 0, P + 40, out, scratch);
    double worst = 0;
    for (int j = 0; j < P + 40; j++) {
        const void *v = kr_kv_v(&c->kv, 2, 0, j), *k = kr_kv_k(&c->kv, 2, 0, j);
        double x[N_IN], z = rb2[0];
        for (int i = 0; i < N_IN_V; i++) x[i] = f32_of(&c->kv, v, i);
        for (int e = 0; e < 2; e++)
            for (int i = 0; i < 16; i++) {
                double a = f32_of(&c->kv, k, e * 32 + i), b = f32_of(&c->kv, k, e * 32 + i + 16);
                x[N_IN_V + e * 16 + i] = sqrt(a * a + b * b);
            }
        for (int u = 0; u < HIDDEN; u++) {
            double a = rb1[u];
            for (int i = 0; i < N_IN; i++) a += (double)rw1[u * N_IN + i] * x[i];
            z += rw2[u] * fmax(a, 0.0);
        }
        worst = fmax(worst, fabs(out[j] - 1.0 / (1.0 + exp(-z))));
    }
    CHECK_MSG(worst < 1e-5, "random prior: worst difference %g from the reference", worst);
    kara_context_free(c);
}

static void test_combine(void) {
    float s[4] = {0.5f, 2.0f, 1.0f, 0.0f};
    const float pr[4] = {0.25f, 0.0f, 1.0f, 0.5f};
    kr_kv_prior_combine(s, pr, 4, 2.0f);
    CHECK(s[0] == 0.75f && s[1] == 1.0f && s[2] == 2.5f && s[3] == 1.0f);
    float z[2] = {0.0f, 0.0f};
    kr_kv_prior_combine(z, pr, 2, 1.0f);
    CHECK(z[0] == 0.25f && z[1] == 0.0f);
}

typedef struct run_result {
    int32_t toks[STEPS];
    float *logits;
    int32_t pos[N_CTX];
    int32_t n;
    uint64_t evicted, events;
} run_result;

/* Greedy generation of STEPS tokens from the prompt on c, kept in r (its
 * logits, tokens, final positions and eviction counts); frees c. */
static void generate(kara_context *c, run_result *r, const char *what) {
    int V = kara_model_n_vocab(c->model);
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    kara_status st = kara_decode(c, &b);
    for (int i = 0; i < STEPS && st == KARA_OK; i++) {
        const float *l = kara_get_logits(c, -1);
        memcpy(r->logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        r->toks[i] = kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&r->toks[i], 1, P + i, 0);
        st = kara_decode(c, &nb);
    }
    CHECK_MSG(st == KARA_OK, "%s: decode: %s", what, kara_last_error());
    r->n = c->kv.seqs[0].n;
    memcpy(r->pos, c->kv.seqs[0].pos, (size_t)r->n * sizeof(int32_t));
    r->evicted = c->policy.stats.slots_evicted;
    r->events = c->policy.stats.events;
    kara_context_free(c);
}

/* Greedy generation under a small share, kara on demand, per_window, or
 * with the threshold trigger (A8) when threshold. */
static void run(kara_model *m, float weight, kara_kv_evict evict, bool threshold, run_result *r) {
    memset(r, 0, sizeof *r);
    r->logits = malloc((size_t)STEPS * kara_model_n_vocab(m) * sizeof(float));
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = KARA_KV_METHOD_KARA;
    kr_kv_tune(&kv)->evict = evict;
    kr_test_small_windows(&kv);
    kv.seq_tokens = 160;
    kr_kv_tune(&kv)->prior_weight = weight;
    if (threshold) {
        kr_kv_tune(&kv)->trigger = KARA_KV_TRIGGER_THRESHOLD;
        kr_kv_tune(&kv)->budget_tokens = 120;
    }
    kara_context *c = kr_test_kv_context(m, &kv, 1, 2, N_CTX);
    if (!CHECK(c != NULL)) return;
    CHECK(c->policy.use_prior == (kr_kv_prior_weight_resolve(weight, m->prior.present) > 0.0f));
    CHECK(kr_kv_tune(&c->policy.p)->prior_weight == kr_kv_prior_weight_resolve(weight, m->prior.present));
    generate(c, r, "kara");
}

static bool same_run(const run_result *a, const run_result *b, int V) {
    return a->n == b->n && !memcmp(a->toks, b->toks, sizeof a->toks) &&
        !memcmp(a->pos, b->pos, (size_t)a->n * sizeof(int32_t)) &&
        !memcmp(a->logits, b->logits, (size_t)STEPS * V * sizeof(float));
}

static void test_weight(kara_model *base, kara_model *with) {
    int V = kara_model_n_vocab(base);
    static run_result r0, r1, r2;
    run(base, 0.0f, KARA_KV_EVICT_ON_DEMAND, false, &r0);
    run(with, 0.0f, KARA_KV_EVICT_ON_DEMAND, false, &r1);
    CHECK_MSG(r0.evicted > 0, "no eviction: the test exercises nothing");
    CHECK_MSG(same_run(&r0, &r1, V), "weight 0 changed the run");
    run(with, 50.0f, KARA_KV_EVICT_ON_DEMAND, false, &r2);
    CHECK_MSG(r2.evicted > 0 && (r2.n != r0.n || memcmp(r2.pos, r0.pos, (size_t)r0.n * sizeof(int32_t))),
              "weight 50 kept the same positions as weight 0");
    free(r0.logits), free(r1.logits), free(r2.logits);
    /* auto (the default): off on a model without a prior (the run of weight
     * 0), KR_PRIOR_WEIGHT_AUTO on one with it */
    run(base, -1.0f, KARA_KV_EVICT_ON_DEMAND, false, &r0);
    run(base, 0.0f, KARA_KV_EVICT_ON_DEMAND, false, &r1);
    CHECK_MSG(same_run(&r0, &r1, V), "auto on a model without a prior differs from weight 0");
    free(r0.logits), free(r1.logits);
    run(with, -1.0f, KARA_KV_EVICT_ON_DEMAND, false, &r0);
    run(with, KR_PRIOR_WEIGHT_AUTO, KARA_KV_EVICT_ON_DEMAND, false, &r1);
    CHECK_MSG(same_run(&r0, &r1, V), "auto on a model with a prior differs from weight %g", KR_PRIOR_WEIGHT_AUTO);
    free(r0.logits), free(r1.logits);
    /* per_window events score with the prior too */
    run(base, 0.0f, KARA_KV_EVICT_PER_WINDOW, false, &r0);
    run(with, 0.0f, KARA_KV_EVICT_PER_WINDOW, false, &r1);
    CHECK_MSG(r0.events > 0 && same_run(&r0, &r1, V), "per_window: weight 0 changed the run");
    run(with, 50.0f, KARA_KV_EVICT_PER_WINDOW, false, &r2);
    CHECK_MSG(r2.events > 0 && memcmp(r2.pos, r0.pos, (size_t)(r0.n < r2.n ? r0.n : r2.n) * sizeof(int32_t)),
              "per_window: weight 50 kept the same positions as weight 0");
    free(r0.logits), free(r1.logits), free(r2.logits);
    /* so do the threshold trigger's events over the whole cache */
    run(base, 0.0f, KARA_KV_EVICT_ON_DEMAND, true, &r0);
    run(with, 0.0f, KARA_KV_EVICT_ON_DEMAND, true, &r1);
    CHECK_MSG(r0.events > 0 && same_run(&r0, &r1, V), "threshold: weight 0 changed the run");
    run(with, 50.0f, KARA_KV_EVICT_ON_DEMAND, true, &r2);
    CHECK_MSG(r2.events > 0 && memcmp(r2.pos, r0.pos, (size_t)(r0.n < r2.n ? r0.n : r2.n) * sizeof(int32_t)),
              "threshold: weight 50 kept the same positions as weight 0");
    free(r0.logits), free(r1.logits), free(r2.logits);
}

static void test_no_prior_weight(kara_model *base) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    CHECK(kr_kv_tune(&kv)->prior_weight < 0.0f); /* auto by default: no error on a model without a prior */
    kv.method = KARA_KV_METHOD_KARA;
    kara_context_params cp0;
    kara_context_params_init(&cp0);
    cp0.n_ctx = 256;
    cp0.kv = kv;
    kara_context *c0 = NULL;
    CHECK_MSG(kara_context_create(base, &cp0, &c0) == KARA_OK && c0 && !c0->policy.use_prior,
              "auto on a model without a prior: %s", kara_last_error());
    kara_context_free(c0);
    kv.method = KARA_KV_METHOD_KARA;
    kr_kv_tune(&kv)->prior_weight = 1.0f;
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.kv = kv;
    kara_context *c = NULL;
    kr_test_clear_error();
    kara_status st = kara_context_create(base, &cp, &c);
    CHECK_MSG(st == KARA_ERR_CONFIG && c == NULL && strstr(kara_last_error(), "kara.score.prior_weight"),
              "prior_weight on a model without a prior: status %d, '%s'", (int)st, kara_last_error());
    kara_context_free(c);
}

/* prior_recent (issue 47's attribution baseline): refused on a model
 * without a prior and with weight 0; on one with a prior it reserves no
 * query ring, and every window event keeps exactly the candidates the
 * prior ranks highest (ties to the older slot), as worked out from the
 * cache just before the step that fired it. */
static void test_prior_recent(kara_model *base, kara_model *with) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = KARA_KV_METHOD_PRIOR_RECENT;
    kr_test_small_windows(&kv);
    kr_kv_tune(&kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kv.retention = 0.25f;
    kr_test_clear_error();
    CHECK(kr_test_kv_context(base, &kv, 1, 1, N_CTX) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "prior_recent ranks slots by the model's retention prior") != NULL,
              "no prior: '%s'", kara_last_error());
    kr_kv_tune(&kv)->prior_weight = 0.0f;
    kr_test_clear_error();
    CHECK(kr_test_kv_context(with, &kv, 1, 1, N_CTX) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "kara.score.prior_weight 0 turns it off") != NULL, "weight 0: '%s'",
              kara_last_error());
    kr_kv_tune(&kv)->prior_weight = -1.0f; /* auto */
    kara_context *c = kr_test_kv_context(with, &kv, 1, 1, N_CTX);
    if (!CHECK_MSG(c != NULL, "prior_recent: %s", kara_last_error())) return;
    CHECK(c->policy.use_prior && c->policy.ring_cap == 0);
    int V = kara_model_n_vocab(with), checked = 0;
    static float vals[N_CTX], scratch[N_IN + HIDDEN + 64];
    static int32_t pos_before[N_CTX], win_before[N_CTX];
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    for (int i = 0; i < STEPS && ok; i++) {
        const kr_kv_policy_seq *q = &c->policy.seqs[0];
        int32_t n = c->kv.seqs[0].n;
        uint64_t evicted = c->policy.stats.slots_evicted;
        kr_kv_prior_eval(&c->policy.prior, &c->kv, 0, 0, n, vals, scratch);
        memcpy(pos_before, c->kv.seqs[0].pos, (size_t)n * sizeof(int32_t));
        memcpy(win_before, q->win, (size_t)n * sizeof(int32_t));
        int32_t F0 = q->frontier;
        int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        if (!ok || c->policy.stats.slots_evicted == evicted) continue;
        /* the window that lost slots: the first slot before the step whose
         * position is gone, and every closed slot of its window */
        const int32_t *pos = c->kv.seqs[0].pos;
        int32_t n_after = c->kv.seqs[0].n, gone = -1;
        for (int32_t j = P, a = P; j < F0 && gone < 0; j++) {
            while (a < n_after && pos[a] < pos_before[j]) a++;
            if (a >= n_after || pos[a] != pos_before[j]) gone = j;
        }
        if (!CHECK_MSG(gone >= 0, "step %d: slots evicted but every closed position is still held", i)) break;
        int32_t w = win_before[gone], lo = gone, hi = gone;
        while (lo > P && win_before[lo - 1] == w) lo--;
        while (hi + 1 < F0 && win_before[hi + 1] == w) hi++;
        int32_t n_c = hi - lo + 1, k = 0;
        for (int32_t j = lo; j <= hi; j++)
            for (int32_t a = 0; a < n_after; a++) k += pos[a] == pos_before[j];
        /* what it kept is the k best of the window by prior, ties to the lower slot */
        for (int32_t j = lo; j <= hi && ok; j++) {
            int32_t better = 0;
            for (int32_t x = lo; x <= hi; x++) better += vals[x] > vals[j] || (vals[x] == vals[j] && x < j);
            bool held = false;
            for (int32_t a = 0; a < n_after; a++) held |= pos[a] == pos_before[j];
            ok &= CHECK_MSG(held == (better < k), "step %d: window of %d slots kept %d; position %d (rank %d) %s", i,
                            n_c, k, pos_before[j], better, held ? "kept" : "dropped");
        }
        ok &= CHECK_MSG(k > 0 && k < n_c, "step %d: kept %d of %d", i, k, n_c);
        checked++;
    }
    CHECK_MSG(checked >= 3, "%d window events checked", checked);
    kara_context_free(c);
}

/* Greedy generation under a token budget of 96 with a budget baseline at
 * prior weight w (auto: -1); the context is checked for use_prior. */
static void run_baseline(kara_model *m, kara_kv_method method, float w, run_result *r) {
    memset(r, 0, sizeof *r);
    r->logits = malloc((size_t)STEPS * kara_model_n_vocab(m) * sizeof(float));
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = method;
    kr_test_small_windows(&kv);
    kr_kv_tune(&kv)->budget_tokens = 96;
    kr_kv_tune(&kv)->prior_weight = w;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK_MSG(c != NULL, "%s: %s", kara_kv_method_name(method), kara_last_error())) return;
    CHECK_MSG(c->policy.use_prior == (w > 0.0f), "%s at weight %g: use_prior %d", kara_kv_method_name(method),
              (double)w, (int)c->policy.use_prior);
    generate(c, r, kara_kv_method_name(method));
}

/* Issue 47's attribution: snapkv, h2o and streaming take the prior through
 * kara.score.prior_weight. auto leaves them the published methods (bit for
 * bit the run of weight 0, also on a model with a prior); a weight above 0
 * changes what they keep. */
static void test_baselines_take_prior(kara_model *with) {
    const kara_kv_method ms[3] = {KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_H2O, KARA_KV_METHOD_STREAMING};
    int V = kara_model_n_vocab(with);
    for (int i = 0; i < 3; i++) {
        const char *name = kara_kv_method_name(ms[i]);
        static run_result r0, r1, r2;
        run_baseline(with, ms[i], 0.0f, &r0);
        run_baseline(with, ms[i], -1.0f, &r1);
        run_baseline(with, ms[i], 50.0f, &r2);
        CHECK_MSG(r0.evicted > 0 && r2.evicted > 0, "%s: no eviction: the test exercises nothing", name);
        CHECK_MSG(same_run(&r0, &r1, V), "%s: auto differs from weight 0 on a model with a prior", name);
        CHECK_MSG(r2.n != r0.n || memcmp(r2.pos, r0.pos, (size_t)r0.n * sizeof(int32_t)),
                  "%s: weight 50 kept the same positions as weight 0", name);
        free(r0.logits), free(r1.logits), free(r2.logits);
    }
}

/* streaming with the prior: every event keeps the sinks, the prior_frac
 * share of the rest that the prior ranks highest among the older slots
 * (ties to the older slot), and the newest for what is left, as worked out
 * from the cache just before the step that fired it. */
static void test_streaming_prior(kara_model *with) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.method = KARA_KV_METHOD_STREAMING;
    kr_kv_tune(&kv)->budget_tokens = 64;
    kr_kv_tune(&kv)->prior_weight = 1.0f;
    kara_context *c = kr_test_kv_context(with, &kv, 1, 1, N_CTX);
    if (!CHECK_MSG(c != NULL, "streaming: %s", kara_last_error())) return;
    const int32_t n_sink = kr_kv_tune(&kv)->streaming.n_sink, rest = 64 - n_sink;
    const int32_t n_prior = (int32_t)lround(kr_kv_tune(&kv)->streaming.prior_frac * rest);
    CHECK(n_prior > 0 && n_prior < rest);
    int V = kara_model_n_vocab(with), checked = 0;
    static float vals[N_CTX], scratch[N_IN + HIDDEN + 64];
    static int32_t pos_before[N_CTX];
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    for (int i = 0; i < 120 && ok; i++) {
        int32_t n = c->kv.seqs[0].n;
        uint64_t evicted = c->policy.stats.slots_evicted;
        kr_kv_prior_eval(&c->policy.prior, &c->kv, 0, 0, n, vals, scratch);
        memcpy(pos_before, c->kv.seqs[0].pos, (size_t)n * sizeof(int32_t));
        int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        if (!ok || c->policy.stats.slots_evicted == evicted) continue;
        /* the event ran over the n slots before the step and the new one */
        const int32_t *pos = c->kv.seqs[0].pos, hi = n + 1 - (rest - n_prior);
        ok &= CHECK_EQ_INT(c->kv.seqs[0].n, 64);
        for (int32_t j = 0; j < n && ok; j++) {
            bool want = j < n_sink || j >= hi;
            if (!want) {
                int32_t better = 0;
                for (int32_t x = n_sink; x < hi; x++) better += vals[x] > vals[j] || (vals[x] == vals[j] && x < j);
                want = better < n_prior;
            }
            bool held = false;
            for (int32_t a = 0; a < c->kv.seqs[0].n; a++) held |= pos[a] == pos_before[j];
            ok &= CHECK_MSG(held == want, "step %d: position %d %s, want %s", i, pos_before[j],
                            held ? "kept" : "dropped", want ? "kept" : "dropped");
        }
        checked++;
    }
    CHECK_MSG(checked >= 20, "%d events checked", checked);
    kara_context_free(c);
}

static void test_malformed(const char *base) {
    static float w1[HIDDEN * (N_IN + 2)], b1[HIDDEN], w2[HIDDEN], b2[1];
    static uint16_t b1_f16[HIDDEN];
    pspec sp;
    pspec_f32(&sp, 1, "v+kpair", N_IN + 2, HIDDEN, w1, b1, w2, b2); /* two inputs too many */
    if (write_with_prior(base, tmp("prior-bad-w1.gguf"), &sp))
        expect_load_error(tmp("prior-bad-w1.gguf"), "kara_prior.w1");
    pspec_f32(&sp, 1, "v", N_IN, HIDDEN, w1, b1, w2, b2); /* "v" needs 64 inputs */
    if (write_with_prior(base, tmp("prior-bad-feat.gguf"), &sp))
        expect_load_error(tmp("prior-bad-feat.gguf"), "kara_prior.w1");
    pspec_f32(&sp, 1, "v+kpair", N_IN, HIDDEN, w1, b1, w2, b2);
    sp.t[1] = (ptensor){false, KR_TYPE_F16, HIDDEN, 0, b1_f16};
    if (write_with_prior(base, tmp("prior-bad-type.gguf"), &sp))
        expect_load_error(tmp("prior-bad-type.gguf"), "kara_prior.b1");
    pspec_f32(&sp, 1, "v+kpair", N_IN, HIDDEN, w1, b1, w2, b2);
    sp.t[2].ne0 = HIDDEN - 1;
    if (write_with_prior(base, tmp("prior-bad-w2.gguf"), &sp))
        expect_load_error(tmp("prior-bad-w2.gguf"), "kara_prior.w2");
    pspec_f32(&sp, 1, "v+kpair", N_IN, HIDDEN, w1, b1, w2, b2);
    sp.t[3].skip = true;
    if (write_with_prior(base, tmp("prior-no-b2.gguf"), &sp))
        expect_load_error(tmp("prior-no-b2.gguf"), "kara_prior.b2");
    pspec_f32(&sp, 1, "k", N_IN, HIDDEN, w1, b1, w2, b2);
    if (write_with_prior(base, tmp("prior-bad-key.gguf"), &sp))
        expect_load_error(tmp("prior-bad-key.gguf"), "kara.prior.features");
    pspec_f32(&sp, 9, "v+kpair", N_IN, HIDDEN, w1, b1, w2, b2);
    if (write_with_prior(base, tmp("prior-bad-layer.gguf"), &sp))
        expect_load_error(tmp("prior-bad-layer.gguf"), "kara.prior.layer");
}

int main(void) {
    kara_model *base = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-prior-base.gguf");
    if (!CHECK(base != NULL)) return kr_test_finish();
    CHECK(!base->prior.present);
    static char base_path[512];
    snprintf(base_path, sizeof base_path, "%s", tmp("tiny-qwen3-prior-base.gguf"));
    test_combine();
    test_hand_value(base_path);
    for (int i = 0; i < HIDDEN * N_IN; i++) rw1[i] = frand() * 0.5f;
    for (int i = 0; i < HIDDEN; i++) rb1[i] = frand(), rw2[i] = 4.0f * frand();
    rb2[0] = 0.2f;
    pspec sp;
    pspec_f32(&sp, 2, "v+kpair", N_IN, HIDDEN, rw1, rb1, rw2, rb2);
    const char *with_path = tmp("tiny-qwen3-prior.gguf");
    kara_model *with = NULL;
    if (write_with_prior(base_path, with_path, &sp) &&
        CHECK_MSG(kara_model_load(with_path, NULL, &with) == KARA_OK, "load: %s", kara_last_error())) {
        test_random_mlp(with);
        test_weight(base, with);
        test_prior_recent(base, with);
        test_baselines_take_prior(with);
        test_streaming_prior(with);
    }
    test_no_prior_weight(base);
    test_malformed(base_path);
    kara_model_free(with);
    kara_model_free(base);
    return kr_test_finish();
}
