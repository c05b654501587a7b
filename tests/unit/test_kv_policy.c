/* test_kv_policy.c - the KV policies inside real decoding (the checks
 * docs/KARA_METHOD.md section 8 lists), on the seeded random-weight tiny
 * model the project writes itself (4 layers, 4 query heads, 2 KV heads,
 * head dim 32, vocab 512):
 *   - Kara at retention 1.0 gives logits bitwise equal to `full` over 512
 *     steps;
 *   - the invariants of docs/KARA_METHOD.md section 8 hold after every
 *     compression event, for every method;
 *   - block accounting stays exact with 8 interleaved sequences;
 *   - the KV bytes held never exceed the budget, for any method, over long
 *     generations;
 *   - 1 and 2 threads give identical tokens and logits for every method;
 *   - budgets too small for the policy or for a request are clear errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

static const kara_kv_method all_methods[] = {
    KARA_KV_METHOD_FULL,   KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_H2O, KARA_KV_METHOD_CHUNKKV,
    KARA_KV_METHOD_RANDOM, KARA_KV_METHOD_RECENT,    KARA_KV_METHOD_KARA,   KARA_KV_METHOD_RKV, KARA_KV_METHOD_LAZY,
};
#define N_METHODS (int)(sizeof all_methods / sizeof all_methods[0])

static kara_model *tiny_model(void) { return kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3.gguf"); }

/* Small windows so that a few hundred steps see many events; the window
 * methods keep `retention` of every window at its event (the paper's
 * setting: eviction on demand has its own test, test_kv_on_demand.c). */
static void small_window(kara_kv_params *kv, kara_kv_method method) {
    kv->method = method;
    kr_kv_tune(kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kr_test_small_windows(kv);
    kr_kv_tune(kv)->budget_tokens = 96;
    kr_kv_tune(kv)->snapkv.trigger_slack = 32;
    kr_kv_tune(kv)->rkv.trigger_slack = 32;
    kr_kv_tune(kv)->lazy.window = 32;
}

/* Check the invariants of docs/KARA_METHOD.md section 8 for one sequence,
 * and the pool's bookkeeping. */
static bool invariants_hold(const kara_context *c, int seq, const char *what) {
    const kr_kv_seq *s = &c->kv.seqs[seq];
    const kr_kv_policy_seq *q = &c->policy.seqs[seq];
    /* the prefix every method must leave untouched: the prompt (the first
     * n_sink generated tokens stand in for a shorter one), except that
     * StreamingLLM keeps only its sink tokens and SnapKV may be told not to
     * protect the prompt */
    int protect = q->prompt_marked ? q->n_prompt : 0;
    if (c->policy.p.method == KARA_KV_METHOD_STREAMING) protect = kr_kv_tune(&c->policy.p)->streaming.n_sink;
    if (c->policy.p.method == KARA_KV_METHOD_SNAPKV && !kr_kv_tune(&c->policy.p)->snapkv.protect_prompt) protect = 0;
    if (protect > s->n) protect = s->n;
    /* until the sequence reaches n_sink slots its frontier sits beyond n:
     * the window is simply empty */
    int frontier = q->prompt_marked ? (q->frontier < s->n ? q->frontier : s->n) : -1;
    char msg[256];
    return CHECK_MSG(kr_test_kv_invariants(c, seq, NULL, protect, frontier, NULL, msg, sizeof msg) == KARA_OK, "%s: %s",
                     what, msg);
}

/* Greedy generation of n_steps from a short prompt; returns the tokens and
 * (optionally) every step's logits. Checks the invariants after each event
 * and that the KV bytes never exceed the budget. */
static int32_t *generate(kara_model *m, const kara_kv_params *kv, int threads, int n_steps, float **logits_out) {
    kara_context *c = kr_test_kv_context(m, kv, 1, threads, 1024);
    if (!CHECK(c != NULL)) return NULL;
    int V = kara_model_n_vocab(m);
    int32_t prompt[6] = {1, 17, 33, 49, 65, 81};
    int32_t *toks = malloc((size_t)n_steps * sizeof *toks);
    float *logits = logits_out ? malloc((size_t)n_steps * V * sizeof(float)) : NULL;
    kara_batch b = kara_batch_one_sequence(prompt, 6, 0, 0);
    kara_status st = kara_decode(c, &b);
    uint64_t events = 0;
    bool inv_ok = true, budget_ok = true;
    for (int i = 0; i < n_steps && st == KARA_OK; i++) {
        const float *l = kara_get_logits(c, -1);
        if (logits) memcpy(logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        toks[i] = kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&toks[i], 1, 6 + i, 0);
        st = kara_decode(c, &nb);
        if (kv->budget && kara_context_kv_bytes(c) > kv->budget) budget_ok = false;
        if (c->policy.stats.events != events) {
            events = c->policy.stats.events;
            inv_ok &= invariants_hold(c, 0, kara_kv_method_name(kv->method));
        }
    }
    CHECK_MSG(st == KARA_OK, "%s: decode failed: %s", kara_kv_method_name(kv->method), kara_last_error());
    CHECK_MSG(inv_ok, "%s: invariants", kara_kv_method_name(kv->method));
    CHECK_MSG(budget_ok, "%s: KV bytes exceeded the budget", kara_kv_method_name(kv->method));
    CHECK_MSG(kv->budget == 0 || kara_context_kv_bytes_peak(c) <= kv->budget, "%s: peak %llu > budget %llu",
              kara_kv_method_name(kv->method), (unsigned long long)kara_context_kv_bytes_peak(c),
              (unsigned long long)kv->budget);
    if (kv->method != KARA_KV_METHOD_FULL)
        CHECK_MSG(events > 0, "%s: no compression event in %d steps", kara_kv_method_name(kv->method), n_steps);
    kara_context_free(c);
    if (logits_out) *logits_out = logits;
    return toks;
}

static void test_retention_one_is_full(kara_model *m) {
    kara_kv_params full, k1;
    kara_kv_params_init(&full);
    kara_kv_params_init(&k1);
    full.method = KARA_KV_METHOD_FULL;
    full.budget = k1.budget = 0;
    small_window(&k1, KARA_KV_METHOD_KARA);
    k1.retention = 1.0f;
    float *lf = NULL, *lk = NULL;
    int32_t *tf = generate(m, &full, 2, 512, &lf), *tk = generate(m, &k1, 2, 512, &lk);
    if (tf && tk)
        CHECK_MSG(memcmp(lf, lk, (size_t)512 * kara_model_n_vocab(m) * sizeof(float)) == 0,
                  "kara at retention 1.0 differs from full over 512 steps");
    free(tf);
    free(tk);
    free(lf);
    free(lk);
}

static void test_methods_budget_threads(kara_model *m) {
    for (int i = 0; i < N_METHODS; i++) {
        kara_kv_params kv;
        kara_kv_params_init(&kv);
        small_window(&kv, all_methods[i]);
        /* a budget that holds the policy's reservations and about 10 blocks
         * besides: every method must live inside it for 400 steps (about ten events each) */
        uint64_t reserved = kr_kv_policy_bytes(&kv, 4, 4, 2, 32, 1, 1024);
        uint64_t block = 4 * 2 * 16 * 2 * 32 * 2; /* layers x K,V x slots x KV heads x dim x f16 */
        kv.budget = reserved + 10 * block;
        if (all_methods[i] == KARA_KV_METHOD_FULL) kv.budget = 0; /* full keeps everything */
        float *l1 = NULL, *l2 = NULL;
        int32_t *t1 = generate(m, &kv, 1, 400, &l1), *t2 = generate(m, &kv, 2, 400, &l2);
        if (t1 && t2) {
            CHECK_MSG(memcmp(t1, t2, 400 * sizeof(int32_t)) == 0, "%s: tokens differ between 1 and 2 threads",
                      kara_kv_method_name(kv.method));
            CHECK_MSG(memcmp(l1, l2, (size_t)400 * kara_model_n_vocab(m) * sizeof(float)) == 0,
                      "%s: logits differ between 1 and 2 threads", kara_kv_method_name(kv.method));
        }
        free(t1);
        free(t2);
        free(l1);
        free(l2);
    }
}

/* Eight sequences decoding in one batch, each step, with Kara compressing
 * them at different times: blocks per sequence and the free list stay exact. */
static void test_interleaved_accounting(kara_model *m) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    small_window(&kv, KARA_KV_METHOD_KARA);
    kv.budget = 0;
    kara_context *c = kr_test_kv_context(m, &kv, 8, 2, 512);
    if (!CHECK(c != NULL)) return;
    int V = kara_model_n_vocab(m);
    int32_t toks[8], pos[8], seq[8];
    int8_t want[8];
    /* prompts of different lengths, fed together */
    for (int s = 0; s < 8; s++) {
        int32_t p[12];
        for (int j = 0; j < 4 + s; j++) p[j] = (s * 31 + j * 7) % V;
        kara_batch b = kara_batch_one_sequence(p, 4 + s, 0, s);
        CHECK(kara_decode(c, &b) == KARA_OK);
        toks[s] = kr_test_argmax(kara_get_logits(c, -1), V);
        pos[s] = 4 + s;
        seq[s] = s;
        want[s] = 1;
    }
    bool ok = true;
    for (int step = 0; step < 200 && ok; step++) {
        kara_batch b = {.n_tokens = 8, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
        ok &= CHECK_MSG(kara_decode(c, &b) == KARA_OK, "step %d: %s", step, kara_last_error());
        int held = 0;
        for (int s = 0; s < 8; s++) {
            ok &= invariants_hold(c, s, "interleaved");
            held += c->kv.seqs[s].n_blocks;
            toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
            pos[s]++;
        }
        ok &= CHECK_EQ_INT(held + c->kv.n_free, c->kv.n_blocks);
        if (step == 100) kara_seq_clear(c, 3); /* a finished sequence returns its blocks */
        if (step == 100) pos[3] = 0;
    }
    CHECK(c->policy.stats.events >= 8);
    kara_context_free(c);
}

/* Pool pressure (forced events, docs/KARA_METHOD.md section 9) under the
 * periodic trigger: three sequences whose windows (interval 128) outgrow a
 * 16-block pool long before any is due. With on_pool_exhausted:
 * recompress_history each step must still succeed, because relieve forces
 * an event on the sequence with the largest compressible window; the
 * invariants and the pool's accounting hold throughout. With preempt (the
 * default) no sequence gives slots to another: the step that runs short
 * fails with KARA_ERR_KV_BUDGET, appending nothing, and the caller
 * preempts. */
static void test_pool_pressure_forces_events(kara_model *m) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    small_window(&kv, KARA_KV_METHOD_KARA);
    kv.interval = 128;
    kr_kv_tune(&kv)->reserve_blocks = 0;
    kr_kv_tune(&kv)->on_pool_exhausted = KARA_POOL_RECOMPRESS_HISTORY;
    kv.budget = kr_kv_budget_for_blocks(&kv, 4, 4, 2, 32, 3, 1024, 16);
    kara_context *c = kr_test_kv_context(m, &kv, 3, 2, 1024);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->kv.n_blocks, 16);
    int V = kara_model_n_vocab(m);
    int32_t toks[3], pos[3], seq[3];
    int8_t want[3] = {1, 1, 1};
    kr_test_start_seqs(c, 3, 6, 0, 13, 200, toks, pos, seq);
    bool ok = true;
    for (int step = 0; step < 200 && ok; step++) {
        kara_batch b = {.n_tokens = 3, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
        ok &= CHECK_MSG(kara_decode(c, &b) == KARA_OK, "step %d: %s", step, kara_last_error());
        int held = 0;
        for (int s = 0; s < 3; s++) {
            ok &= invariants_hold(c, s, "pool pressure");
            held += c->kv.seqs[s].n_blocks;
            toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
            pos[s]++;
        }
        ok &= CHECK_EQ_INT(held + c->kv.n_free, c->kv.n_blocks);
        ok &= CHECK(kara_context_kv_bytes(c) <= kv.budget);
    }
    CHECK_MSG(c->policy.stats.forced_events >= 3, "%llu forced events",
              (unsigned long long)c->policy.stats.forced_events);
    kara_context_free(c);

    kr_kv_tune(&kv)->on_pool_exhausted = KARA_POOL_PREEMPT;
    c = kr_test_kv_context(m, &kv, 3, 2, 1024);
    if (!CHECK(c != NULL)) return;
    kr_test_start_seqs(c, 3, 6, 0, 13, 200, toks, pos, seq);
    kara_status st = KARA_OK;
    int step = 0;
    for (; step < 200 && st == KARA_OK; step++) {
        int32_t past[3];
        for (int s = 0; s < 3; s++) past[s] = kara_seq_n_past(c, s);
        kara_batch b = {.n_tokens = 3, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
        st = kara_decode(c, &b);
        if (st != KARA_OK) {
            for (int s = 0; s < 3; s++) CHECK_EQ_INT(kara_seq_n_past(c, s), past[s]);
            break;
        }
        for (int s = 0; s < 3; s++) {
            toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
            pos[s]++;
        }
    }
    CHECK_EQ_INT(st, KARA_ERR_KV_BUDGET);
    CHECK_EQ_INT(c->policy.stats.forced_events, 0);
    kara_context_free(c);
}

static void test_budget_errors(kara_model *m) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    small_window(&kv, KARA_KV_METHOD_KARA);
    kv.budget = 1000; /* less than the query rings */
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 1024;
    cp.kv = kv;
    kara_context *c = NULL;
    CHECK(kara_context_create(m, &cp, &c) == KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "too small") != NULL, "message: %s", kara_last_error());

    /* room for 20 blocks of 16 slots (16 KiB each) besides the policy's
     * reservation: a 300-token prompt cannot be admitted (per_window Kara
     * needs the prompt, a full window and reserve_blocks), an 8-token one
     * generating 200 can (8 + 6 events x 6 slots kept + the 49-slot window:
     * 6 blocks, plus the 8 reserved) */
    cp.n_threads = 1;
    cp.kv.budget = kr_kv_budget_for_blocks(&cp.kv, 4, 4, 2, 32, 1, 1024, 20);
    CHECK(kara_context_create(m, &cp, &c) == KARA_OK);
    if (!c) return;
    CHECK_EQ_INT(c->kv.n_blocks, 20);
    CHECK(kara_seq_admit(c, 0, 300, 100) == KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "raise kv_cache.budget") != NULL, "message: %s", kara_last_error());
    CHECK(kara_seq_admit(c, 0, 8, 200) == KARA_OK);
    /* a decode that does not fit fails cleanly and changes nothing */
    int32_t p[400];
    for (int i = 0; i < 400; i++) p[i] = i % 500;
    kara_batch b = kara_batch_one_sequence(p, 400, 0, 0);
    CHECK(kara_decode(c, &b) == KARA_ERR_KV_BUDGET);
    CHECK_EQ_INT(kara_seq_n_cached(c, 0), 0);
    CHECK_EQ_INT(c->kv.n_free, c->kv.n_blocks);
    kara_context_free(c);
}

/* compress_scope: think_only. Events stop at the end-of-thinking token and
 * the sequence goes on decoding far past the query ring's capacity. */
static void test_think_only(kara_model *m) {
    int32_t end_think = kr_vocab_find(&m->vocab, "</think>", 8);
    if (!CHECK_MSG(end_think >= 0, "the synthetic vocabulary has </think>")) return;
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    small_window(&kv, KARA_KV_METHOD_KARA);
    kr_kv_tune(&kv)->think_only = true;
    kv.budget = 0;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, 1024);
    if (!CHECK(c != NULL)) return;
    int32_t prompt[4] = {1, 2, 3, 4};
    kara_batch b = kara_batch_one_sequence(prompt, 4, 0, 0);
    bool ok = CHECK(kara_decode(c, &b) == KARA_OK);
    uint64_t events_at_end = 0;
    for (int i = 0; i < 400 && ok; i++) {
        int32_t tok = i == 150 ? end_think : 10 + i % 50;
        kara_batch one = kara_batch_one_sequence(&tok, 1, 4 + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        if (i == 150) events_at_end = c->policy.stats.events;
    }
    CHECK(events_at_end > 0);
    CHECK_EQ_INT(c->policy.stats.events, events_at_end);
    CHECK(kara_seq_n_cached(c, 0) > c->policy.ring_cap); /* the window grew past the ring, unscored */
    kara_context_free(c);
}

int main(void) {
    kara_model *m = tiny_model();
    if (!CHECK(m != NULL)) return kr_test_finish();
    test_retention_one_is_full(m);
    test_methods_budget_threads(m);
    test_interleaved_accounting(m);
    test_pool_pressure_forces_events(m);
    test_budget_errors(m);
    test_think_only(m);
    kara_model_free(m);
    return kr_test_finish();
}
