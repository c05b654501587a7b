/* test_batch_engine.c - the continuous-batching engine on a synthetic Qwen3
 * model:
 * - greedy answers equal a plain one-sequence decode loop, at concurrency
 *   1, 2 and 4, with prompts of many lengths and prefill chunks that cut
 *   them anywhere;
 * - with a pool too small for everything that was admitted (optimistic
 *   admission), requests are preempted, recomputed, and still give the same
 *   answers; the KV peak never exceeds the budget;
 * - sampled answers depend on (seed, id) only, not on concurrency;
 * - Kara compression with events that are never deferred gives the same
 *   greedy answers at concurrency 1 and 4, and events do happen;
 * - many sequences under a tight budget with Kara: all finish, peak <= budget;
 * - stop strings end the answer before the string;
 * - requests that can never run are refused at submit with the right code;
 * - speculative decoding (n-gram drafts, and a draft model's: the target
 *   itself, every guess right, and a Q8_0 copy, some wrong) changes no
 *   answer, greedy or sampled, at any concurrency, through preemptions and
 *   a draft context too short for the requests, and under Kara's
 *   compression, evicting on demand or per window (the same events and
 *   evicted slots; the threshold methods streaming and snapkv too, and h2o
 *   and lazy with their attention kept apart per entry, verify_max 9; off
 *   under h2o with verify_max 1); bad draft contexts are refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kara.h"
#include "synth_model.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_REQ 6
#define MAX_TEXT 8192

static kara_model *g_model;

typedef struct answer {
    char text[MAX_TEXT];
    size_t len;
    kara_status status;
    kara_stop_reason reason;
    int32_t n_generated, n_preempted;
    int done;
} answer;

/* Prompts of assorted lengths (ids inside the vocabulary). */
static int32_t prompt_len(int r) { return 1 + (r * 13) % 41 + (r == 3 ? 60 : 0); }
static void make_prompt(int r, int32_t *out) {
    for (int32_t i = 0; i < prompt_len(r); i++) out[i] = (int32_t)((r * 97 + i * 31 + 7) % 500);
}

static int32_t g_min_compressible = 8;
static kara_kv_evict g_evict = KARA_KV_EVICT_ON_DEMAND;
static int32_t g_seq_tokens = 0;
static uint64_t g_slots_evicted; /* by the last run_engine */
static int32_t g_budget_tokens;  /* the threshold methods' token budget, 0: the default */
static kara_spec_mode g_spec = KARA_SPEC_NONE;
static kara_model *g_draft_model;   /* spec DRAFT: run_engine's draft model */
static int32_t g_draft_n_ctx = 512; /* and its context's size */
static int32_t g_verify_max = 1;    /* make_ctx's verify_max */

static kara_context *make_ctx(kara_kv_method method, int32_t n_seq, uint64_t budget, int32_t n_batch,
                              int32_t max_compress_per_step) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq;
    cp.n_threads = 1;
    cp.kv.method = method;
    cp.kv.budget = budget;
    cp.verify_max = g_verify_max;
    kr_test_small_windows(&cp.kv);
    kr_kv_tune(&cp.kv)->min_compressible = g_min_compressible;
    kr_kv_tune(&cp.kv)->reserve_blocks = 1;
    kr_kv_tune(&cp.kv)->max_compress_per_step = max_compress_per_step;
    kr_kv_tune(&cp.kv)->evict = g_evict;
    kr_kv_tune(&cp.kv)->evict_lag = 0; /* per_window: eager events, for which the budgets below are sized */
    cp.kv.seq_tokens = g_seq_tokens;
    if (g_budget_tokens) {
        kr_kv_tune(&cp.kv)->budget_tokens = g_budget_tokens;
        kr_kv_tune(&cp.kv)->snapkv.trigger_slack = 8;
        kr_kv_tune(&cp.kv)->lazy.window = 8; /* lazy: an event every 8 tokens past the budget */
    }
    kara_context *ctx = NULL;
    if (kara_context_create(g_model, &cp, &ctx) != KARA_OK) {
        fprintf(stderr, "kara_context_create: %s\n", kara_last_error());
        return NULL;
    }
    return ctx;
}

/* The reference: one sequence, whole prompt in one decode, then one token
 * per decode, greedy, past end-of-generation tokens. */
static void reference(int r, int32_t n_gen, answer *out) {
    kara_context *ctx = make_ctx(KARA_KV_METHOD_FULL, 1, 0, 512, 0);
    int32_t prompt[128];
    make_prompt(r, prompt);
    int32_t n = prompt_len(r), n_vocab = kara_model_n_vocab(g_model);
    memset(out, 0, sizeof *out);
    kara_batch b = kara_batch_one_sequence(prompt, n, 0, 0);
    kara_status st = kara_decode(ctx, &b);
    for (int32_t g = 0; g < n_gen && !st; g++) {
        const float *l = kara_get_logits(ctx, -1);
        int32_t best = 0;
        for (int32_t t = 1; t < n_vocab; t++)
            if (l[t] > l[best]) best = t;
        char piece[64];
        int32_t k = 0;
        CHECK(kara_token_to_piece(g_model, best, piece, sizeof piece, false, &k) == KARA_OK);
        if (k > 0) {
            memcpy(out->text + out->len, piece, (size_t)k);
            out->len += (size_t)k;
        }
        out->n_generated++;
        if (g + 1 < n_gen) {
            b = kara_batch_one_sequence(&best, 1, n + g, 0);
            st = kara_decode(ctx, &b);
        }
    }
    CHECK_MSG(st == KARA_OK, "reference decode: %s", kara_last_error());
    kara_context_free(ctx);
}

typedef struct run_opts {
    kara_kv_method method;
    int32_t n_seq;
    uint64_t budget;
    int32_t n_gen;
    float temperature;
    int32_t prefill_chunk;
    bool optimistic;
    int32_t max_compress_per_step;
    int n_req;
} run_opts;

/* Submit every request (ids 100 + r) and step until done. */
static bool run_engine(const run_opts *o, answer *ans, kara_engine_stats *stats) {
    kara_context *ctx = make_ctx(o->method, o->n_seq, o->budget, 64, o->max_compress_per_step);
    if (!ctx) return false;
    kara_engine_params ep;
    kara_engine_params_init(&ep);
    ep.prefill_chunk = o->prefill_chunk ? o->prefill_chunk : 256;
    ep.optimistic_admission = o->optimistic;
    ep.max_queue = 4;
    ep.spec = g_spec;
    ep.draft_max = 6;
    ep.draft_p_min = 0.0f; /* always draft_max guesses: the most to take back */
    kara_context *dctx = NULL;
    if (g_spec == KARA_SPEC_DRAFT) {
        kara_context_params dp;
        kara_context_params_init(&dp);
        dp.n_ctx = g_draft_n_ctx;
        dp.n_batch = 64;
        dp.n_seq_max = o->n_seq;
        dp.n_threads = 1;
        dp.kv.method = KARA_KV_METHOD_FULL;
        dp.kv.budget = 0;
        if (!CHECK_MSG(kara_context_create(g_draft_model, &dp, &dctx) == KARA_OK, "draft context: %s",
                       kara_last_error())) {
            kara_context_free(ctx);
            return false;
        }
        ep.draft_ctx = dctx;
    }
    kara_engine *eng = NULL;
    if (kara_engine_create(ctx, &ep, &eng) != KARA_OK) {
        fprintf(stderr, "kara_engine_create: %s\n", kara_last_error());
        kara_context_free(ctx);
        kara_context_free(dctx);
        return false;
    }
    int32_t prompts[N_REQ * 2][128];
    int n_req = o->n_req ? o->n_req : N_REQ;
    memset(ans, 0, sizeof(answer) * (size_t)n_req);
    int next = 0, steps = 0;
    kara_status st = KARA_OK;
    bool ok = true;
    for (;;) {
        while (next < n_req && kara_engine_queue_room(eng) > 0) {
            kara_engine_request r;
            kara_engine_request_init(&r);
            make_prompt(next % N_REQ, prompts[next]);
            r.id = 100 + (uint64_t)next;
            r.user = &ans[next];
            r.prompt = prompts[next];
            r.n_prompt = prompt_len(next % N_REQ);
            r.max_tokens = o->n_gen;
            r.sampling.temperature = o->temperature;
            r.sampling.seed = 42;
            r.ignore_eog = true;
            r.split_thinking = false;
            if (kara_engine_submit(eng, &r) != KARA_OK) {
                fprintf(stderr, "submit: %s\n", kara_last_error());
                ok = false;
            }
            next++;
        }
        st = kara_engine_step(eng);
        if (st != KARA_OK) break;
        kara_engine_event ev;
        while (kara_engine_next_event(eng, &ev)) {
            answer *a = ev.user;
            if (ev.kind == KARA_ENGINE_TEXT) {
                if (a->len + (size_t)ev.len <= MAX_TEXT) memcpy(a->text + a->len, ev.text, (size_t)ev.len);
                a->len += (size_t)ev.len;
            } else {
                a->done++;
                a->status = ev.status;
                a->reason = ev.reason;
                a->n_generated = ev.n_generated;
                a->n_preempted = ev.n_preempted;
            }
        }
        if (++steps > 100000) break;
    }
    CHECK_MSG(st == KARA_DONE, "engine ended with %d: %s", (int)st, kara_last_error());
    kara_engine_get_stats(eng, stats);
    CHECK_MSG(stats->kv_bytes_peak <= stats->kv_budget, "KV peak %llu exceeds the budget %llu",
              (unsigned long long)stats->kv_bytes_peak, (unsigned long long)stats->kv_budget);
    CHECK_MSG(kara_context_kv_bytes_peak(ctx) == stats->kv_bytes_peak, "stats report the context's peak");
    kara_kv_stats ks;
    kara_context_kv_stats(ctx, &ks);
    g_slots_evicted = ks.slots_evicted;
    kara_engine_free(eng);
    kara_context_free(ctx);
    kara_context_free(dctx);
    return ok && st == KARA_DONE;
}

static bool same_answers(const answer *a, const answer *b, int n, const char *what) {
    bool same = true;
    for (int r = 0; r < n; r++) {
        bool eq = a[r].len == b[r].len && !memcmp(a[r].text, b[r].text, a[r].len);
        CHECK_MSG(eq, "%s: request %d differs (%zu vs %zu bytes)", what, r, a[r].len, b[r].len);
        same = same && eq;
    }
    return same;
}

static void test_greedy_matches_reference(void) {
    const int32_t n_gen = 24;
    answer ref[N_REQ];
    for (int r = 0; r < N_REQ; r++) reference(r, n_gen, &ref[r]);
    int32_t seqs[] = {1, 2, 4};
    int32_t chunks[] = {256, 7, 3};
    for (int i = 0; i < 3; i++) {
        answer ans[N_REQ];
        kara_engine_stats stats;
        run_opts o = {KARA_KV_METHOD_FULL, seqs[i], 0, n_gen, 0.0f, chunks[i], false, 0, 0};
        CHECK(run_engine(&o, ans, &stats));
        char what[64];
        snprintf(what, sizeof what, "greedy, concurrency %d, chunk %d", seqs[i], chunks[i]);
        same_answers(ref, ans, N_REQ, what);
        for (int r = 0; r < N_REQ; r++) {
            CHECK_EQ_INT(ans[r].done, 1);
            CHECK_EQ_INT(ans[r].status, KARA_DONE);
            CHECK_EQ_INT(ans[r].reason, KARA_STOP_MAX_TOKENS);
            CHECK_EQ_INT(ans[r].n_generated, n_gen);
        }
        CHECK_EQ_INT(stats.tokens_generated, N_REQ * n_gen);
        CHECK_EQ_INT(stats.requests_done, N_REQ);
        CHECK_EQ_INT(stats.preemptions, 0);
        CHECK_MSG(stats.peak_running <= seqs[i], "peak running %d <= %d", stats.peak_running, seqs[i]);
        if (seqs[i] == 4) CHECK_MSG(stats.peak_running >= 3, "requests ran together (peak %d)", stats.peak_running);
        /* decode entries per step: with concurrency > 1 there must be fewer steps than tokens */
        if (seqs[i] > 1)
            CHECK_MSG(stats.steps < (uint64_t)(N_REQ * n_gen), "batched steps (%llu)", (unsigned long long)stats.steps);
    }
}

/* Block of the tiny model: 4 layers x 2 (K, V) x 16 slots x 2 heads x 32 x 2 bytes. */
#define BLOCK_BYTES (4 * 2 * 16 * 2 * 32 * 2)

static void test_preemption_recompute(void) {
    const int32_t n_gen = 40;
    answer ref[N_REQ];
    for (int r = 0; r < N_REQ; r++) reference(r, n_gen, &ref[r]);
    /* 14 blocks: room for two or three requests at their peak (up to 7 blocks
     * each), while optimistic admission lets more in */
    answer ans[N_REQ];
    kara_engine_stats stats;
    run_opts o = {KARA_KV_METHOD_FULL, 4, 14 * BLOCK_BYTES, n_gen, 0.0f, 16, true, 0, 0};
    CHECK(run_engine(&o, ans, &stats));
    CHECK_MSG(stats.preemptions > 0, "the tight pool preempted (%llu)", (unsigned long long)stats.preemptions);
    CHECK_MSG(stats.tokens_recomputed > 0, "preempted requests were recomputed");
    same_answers(ref, ans, N_REQ, "after preemption and recompute");
    int preempted = 0;
    for (int r = 0; r < N_REQ; r++) {
        CHECK_EQ_INT(ans[r].done, 1);
        CHECK_EQ_INT(ans[r].status, KARA_DONE);
        preempted += ans[r].n_preempted;
    }
    CHECK_EQ_INT(preempted, stats.preemptions);
    CHECK_EQ_INT(stats.kv_budget, 14 * BLOCK_BYTES);

    /* the same pool with projected admission: nothing is preempted */
    run_opts o2 = o;
    o2.optimistic = false;
    CHECK(run_engine(&o2, ans, &stats));
    CHECK_EQ_INT(stats.preemptions, 0);
    same_answers(ref, ans, N_REQ, "projected admission");
}

static void test_sampled_determinism(void) {
    answer a1[N_REQ], a4[N_REQ];
    kara_engine_stats stats;
    run_opts o = {KARA_KV_METHOD_FULL, 1, 0, 20, 0.9f, 5, false, 0, 0};
    CHECK(run_engine(&o, a1, &stats));
    o.n_seq = 4;
    o.prefill_chunk = 64;
    CHECK(run_engine(&o, a4, &stats));
    same_answers(a1, a4, N_REQ, "sampled, concurrency 1 vs 4");
    /* requests 0 and N_REQ have the same prompt but other ids: other draws */
    answer b[N_REQ * 2];
    o.n_req = N_REQ + 1;
    CHECK(run_engine(&o, b, &stats));
    CHECK_MSG(b[0].len != b[N_REQ].len || memcmp(b[0].text, b[N_REQ].text, b[0].len),
              "the same prompt under another id samples differently");
}

/* The paper's setting: every window keeps `retention` at its event. */
static void test_kara_compression(void) {
    g_evict = KARA_KV_EVICT_PER_WINDOW;
    answer a1[N_REQ], a4[N_REQ];
    kara_engine_stats s1, s4;
    /* events never deferred: every sequence compresses when it is due */
    run_opts o = {KARA_KV_METHOD_KARA, 1, 0, 120, 0.0f, 32, false, 64, 0};
    CHECK(run_engine(&o, a1, &s1));
    o.n_seq = 4;
    CHECK(run_engine(&o, a4, &s4));
    CHECK_MSG(s1.kv_events > 0, "Kara events happened (%llu)", (unsigned long long)s1.kv_events);
    CHECK_EQ_INT(s1.kv_events, s4.kv_events);
    same_answers(a1, a4, N_REQ, "kara, no deferral, concurrency 1 vs 4");

    /* many sequences, a tight budget, staggered events: all finish inside it */
    answer many[N_REQ * 2];
    kara_engine_stats sm;
    run_opts m = {KARA_KV_METHOD_KARA, 8, 0, 160, 0.0f, 32, false, 0, 2 * N_REQ};
    /* rings of 8 sequences + 40 blocks */
    kara_context *probe = make_ctx(KARA_KV_METHOD_KARA, 8, 0, 64, 0);
    kara_kv_stats ks;
    kara_context_kv_stats(probe, &ks);
    kara_context_free(probe);
    m.budget = ks.reserved_bytes + 40 * BLOCK_BYTES;
    CHECK(run_engine(&m, many, &sm));
    for (int r = 0; r < 2 * N_REQ; r++) {
        CHECK_EQ_INT(many[r].done, 1);
        CHECK_EQ_INT(many[r].status, KARA_DONE);
        CHECK_EQ_INT(many[r].n_generated, 160);
    }
    CHECK_MSG(sm.kv_events >= 2 * N_REQ, "every request compressed (%llu events)", (unsigned long long)sm.kv_events);
    CHECK_MSG(sm.peak_running >= 3, "several ran at once (%d)", sm.peak_running);
    CHECK_MSG(sm.kv_bytes_peak <= m.budget, "peak %llu <= budget %llu", (unsigned long long)sm.kv_bytes_peak,
              (unsigned long long)m.budget);

    /* preempted Kara sequences are recomputed with their events at the same
     * points (generated tokens re-fed up to each due point), so with no
     * deferral and no forced events (min_compressible = interval: nothing is
     * ever compressible before it is due) the answers are unchanged */
    g_min_compressible = 32;
    answer roomy[N_REQ], tight[N_REQ];
    kara_engine_stats sr, st;
    run_opts k = {KARA_KV_METHOD_KARA, 4, 0, 200, 0.0f, 32, true, 64, 0};
    CHECK(run_engine(&k, roomy, &sr));
    probe = make_ctx(KARA_KV_METHOD_KARA, 4, 0, 64, 64);
    kara_context_kv_stats(probe, &ks);
    kara_context_free(probe);
    k.budget = ks.reserved_bytes + 14 * BLOCK_BYTES;
    CHECK(run_engine(&k, tight, &st));
    CHECK_MSG(st.preemptions > 0, "Kara under a tight pool preempted (%llu)", (unsigned long long)st.preemptions);
    CHECK_MSG(st.tokens_recomputed > 600, "generated tokens were recomputed (%llu)",
              (unsigned long long)st.tokens_recomputed);
    CHECK(st.kv_events > sr.kv_events); /* recomputed sequences compress again */
    CHECK_EQ_INT(st.kv_forced_events, 0);
    CHECK_EQ_INT(sr.preemptions, 0);
    same_answers(roomy, tight, N_REQ, "kara after preemption and recompute");
    g_min_compressible = 8;
    g_evict = KARA_KV_EVICT_ON_DEMAND;
}

/* Eviction on demand under a share of 160 slots per sequence (whatever the
 * concurrency): every window method and Kara evict, and each request's
 * answer is the same at concurrency 1 and 4, with scoring deferred to one
 * sequence per step, and after preemptions under a pool too small for what
 * optimistic admission let in. */
static void test_on_demand_determinism(void) {
    const kara_kv_method methods[] = {KARA_KV_METHOD_KARA, KARA_KV_METHOD_CHUNKKV, KARA_KV_METHOD_RECENT,
                                      KARA_KV_METHOD_RANDOM};
    /* the longest prompt (101 tokens), the unscored window (32 + 8) and
     * the margin (16) fit 160 slots; 200 generated tokens do not */
    g_seq_tokens = 160;
    for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; mi++) {
        const char *name = kara_kv_method_name(methods[mi]);
        answer a1[N_REQ], a4[N_REQ], ad[N_REQ], ap[N_REQ];
        kara_engine_stats s1, s4, sd, sp;
        run_opts o = {methods[mi], 1, 0, 200, 0.0f, 32, false, 0, 0};
        CHECK(run_engine(&o, a1, &s1));
        CHECK_MSG(g_slots_evicted > 0, "%s: nothing was evicted", name);
        o.n_seq = 4;
        CHECK(run_engine(&o, a4, &s4));
        o.max_compress_per_step = 1; /* scoring of sequences due together waits */
        CHECK(run_engine(&o, ad, &sd));
        /* a pool of 24 blocks under optimistic admission: preemptions */
        kara_context *probe = make_ctx(methods[mi], 4, 0, 64, 1);
        kara_kv_stats ks;
        kara_context_kv_stats(probe, &ks);
        kara_context_free(probe);
        o.budget = ks.reserved_bytes + 24 * BLOCK_BYTES;
        o.optimistic = true;
        CHECK(run_engine(&o, ap, &sp));
        char what[96];
        snprintf(what, sizeof what, "%s on demand, concurrency 1 vs 4", name);
        same_answers(a1, a4, N_REQ, what);
        snprintf(what, sizeof what, "%s on demand, deferred scoring", name);
        same_answers(a1, ad, N_REQ, what);
        snprintf(what, sizeof what, "%s on demand, preempted and recomputed", name);
        same_answers(a1, ap, N_REQ, what);
        CHECK_MSG(s1.kv_events > 0 && s1.kv_events == s4.kv_events, "%s: %llu / %llu scoring events", name,
                  (unsigned long long)s1.kv_events, (unsigned long long)s4.kv_events);
        CHECK_MSG(sp.preemptions > 0, "%s: the small pool preempted (%llu)", name, (unsigned long long)sp.preemptions);
        for (int r = 0; r < N_REQ; r++) CHECK_EQ_INT(a1[r].n_generated, 200);
    }
    g_seq_tokens = 0;
}

static void test_stop_and_refusals(void) {
    const int32_t n_gen = 30;
    answer ref;
    reference(2, n_gen, &ref);
    kara_context *ctx = make_ctx(KARA_KV_METHOD_FULL, 2, 8 * BLOCK_BYTES, 64, 0);
    kara_engine *eng = NULL;
    CHECK(kara_engine_create(ctx, NULL, &eng) == KARA_OK);
    int32_t prompt[128];
    make_prompt(2, prompt);
    /* a stop string from the middle of the reference answer */
    size_t at = ref.len / 2;
    char stop[4];
    memcpy(stop, ref.text + at, 3);
    stop[3] = '\0';
    const char *first = strstr(ref.text, stop);
    size_t expect = first ? (size_t)(first - ref.text) : 0;
    kara_engine_request r;
    kara_engine_request_init(&r);
    r.prompt = prompt;
    r.n_prompt = prompt_len(2);
    r.max_tokens = n_gen;
    r.sampling.temperature = 0;
    r.ignore_eog = true;
    r.split_thinking = false;
    r.n_stop = 1;
    r.stop[0] = stop;
    CHECK(kara_engine_submit(eng, &r) == KARA_OK);
    answer a;
    memset(&a, 0, sizeof a);
    while (kara_engine_step(eng) == KARA_OK) {
        kara_engine_event ev;
        while (kara_engine_next_event(eng, &ev)) {
            if (ev.kind == KARA_ENGINE_TEXT) {
                memcpy(a.text + a.len, ev.text, (size_t)ev.len);
                a.len += (size_t)ev.len;
            } else {
                a.status = ev.status;
                a.reason = ev.reason;
            }
        }
    }
    CHECK_EQ_INT(a.status, KARA_STOPPED);
    CHECK_EQ_INT(a.reason, KARA_STOP_STRING);
    CHECK_EQ_INT(a.len, expect);
    CHECK(!memcmp(a.text, ref.text, expect));

    /* refusals */
    int32_t big[600];
    for (int i = 0; i < 600; i++) big[i] = i % 500;
    r.n_stop = 0;
    r.prompt = big;
    r.n_prompt = 512;
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_ERR_CONTEXT_FULL);
    r.n_prompt = 100;
    r.max_tokens = 200; /* 19 blocks > the pool of 8 */
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "bytes") != NULL, "budget message names bytes: %s", kara_last_error());
    r.max_tokens = 10;
    r.n_prompt = 20;
    big[3] = 9999;
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_ERR_TOKEN);
    r.n_prompt = 0;
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_ERR_ARG);
    kara_engine_free(eng);

    /* snapkv's per-sequence budget (the pool's share per sequence, less its
     * trigger slack) must hold the prompt it protects */
    kara_context *snap = make_ctx(KARA_KV_METHOD_SNAPKV, 8, 0, 64, 0);
    kara_kv_stats sks;
    kara_context_kv_stats(snap, &sks);
    uint64_t snap_budget = sks.reserved_bytes + 24 * BLOCK_BYTES; /* 48 slots each: budget_tokens 8 */
    kara_context_free(snap);
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_batch = 64;
    cp.n_seq_max = 8;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_SNAPKV;
    cp.kv.budget = snap_budget;
    kr_kv_tune(&cp.kv)->reserve_blocks = 0;
    CHECK(kara_context_create(g_model, &cp, &snap) == KARA_OK);
    CHECK(kara_engine_create(snap, NULL, &eng) == KARA_OK);
    r.prompt = big;
    big[3] = 3;
    r.n_prompt = 20;
    r.max_tokens = 200;
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "snapkv keeps at most") != NULL, "names the method's budget: %s",
              kara_last_error());
    r.max_tokens = 10; /* never outgrows the budget: no event, fine */
    CHECK_EQ_INT(kara_engine_submit(eng, &r), KARA_OK);
    kara_engine_free(eng);
    kara_context_free(snap);

    /* n_batch must leave room for one entry per sequence plus a chunk */
    kara_context *small = make_ctx(KARA_KV_METHOD_FULL, 8, 0, 8, 0);
    CHECK_EQ_INT(kara_engine_create(small, NULL, &eng), KARA_ERR_ARG);
    kara_context_free(small);
    kara_context_free(ctx);
}

static void test_fit_concurrency(void) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_seq_max = 32;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kr_kv_tune(&cp.kv)->reserve_blocks = 0;
    cp.kv.budget = 40 * BLOCK_BYTES;
    /* 64 + 96 tokens = 10 blocks: 4 fit in 40 */
    CHECK_EQ_INT(kara_engine_fit_concurrency(g_model, &cp, 64, 96), 4);
    cp.kv.budget = 0;
    CHECK_EQ_INT(kara_engine_fit_concurrency(g_model, &cp, 64, 96), 32);
    cp.kv.budget = 5 * BLOCK_BYTES;
    CHECK_EQ_INT(kara_engine_fit_concurrency(g_model, &cp, 64, 96), 0);
}

/* With the drafts of g_spec: a pool that preempts (drafts never cost a
 * preemption of their own) and sampled answers (the same draws) give what
 * they give without drafts. */
static void check_spec_preempt_sampled(const answer *ref, int32_t n_gen, const char *label) {
    static answer ans[N_REQ], plain[N_REQ];
    kara_engine_stats stats;
    const kara_spec_mode mode = g_spec;
    char what[96];
    run_opts tight = {KARA_KV_METHOD_FULL, 4, 14 * BLOCK_BYTES, n_gen, 0.0f, 16, true, 0, 0};
    CHECK(run_engine(&tight, ans, &stats));
    CHECK_MSG(stats.preemptions > 0, "%s: the tight pool preempted (%llu)", label,
              (unsigned long long)stats.preemptions);
    snprintf(what, sizeof what, "%s, after preemption and recompute", label);
    same_answers(ref, ans, N_REQ, what);
    run_opts s = {KARA_KV_METHOD_FULL, 4, 0, 40, 0.9f, 64, false, 0, 0};
    g_spec = KARA_SPEC_NONE;
    CHECK(run_engine(&s, plain, &stats));
    g_spec = mode;
    CHECK(run_engine(&s, ans, &stats));
    snprintf(what, sizeof what, "%s, sampled", label);
    same_answers(plain, ans, N_REQ, what);
}

/* n-gram drafts in the batch: every answer as without them (the random
 * model falls into loops, so drafts are made, kept and rejected). */
static void test_speculative(void) {
    const int32_t n_gen = 60;
    answer ref[N_REQ], ans[N_REQ];
    for (int r = 0; r < N_REQ; r++) reference(r, n_gen, &ref[r]);
    kara_engine_stats stats;
    g_spec = KARA_SPEC_NGRAM;
    int32_t seqs[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        run_opts o = {KARA_KV_METHOD_FULL, seqs[i], 0, n_gen, 0.0f, i ? 7 : 256, false, 0, 0};
        CHECK(run_engine(&o, ans, &stats));
        char what[64];
        snprintf(what, sizeof what, "speculative greedy, concurrency %d", seqs[i]);
        same_answers(ref, ans, N_REQ, what);
        for (int r = 0; r < N_REQ; r++) CHECK_EQ_INT(ans[r].n_generated, n_gen);
        CHECK_EQ_INT(stats.tokens_generated, N_REQ * n_gen);
        CHECK(stats.spec_on);
        CHECK_MSG(stats.n_accepted > 0 && stats.n_accepted < stats.n_drafted,
                  "%s: %llu drafted, %llu accepted: both kept and rejected drafts should occur", what,
                  (unsigned long long)stats.n_drafted, (unsigned long long)stats.n_accepted);
    }
    check_spec_preempt_sampled(ref, n_gen, "n-gram drafts");
    answer plain[N_REQ];
    /* Kara evicting on demand under a share of 160 slots, 3 requests at a
     * time beside each other's prompt chunks: drafts go on, and answers,
     * events and evicted slots are those without drafts */
    const int32_t kn = 160;
    answer kref[N_REQ];
    run_opts k = {KARA_KV_METHOD_KARA, 3, 0, kn, 0.0f, 16, false, 0, 0};
    g_seq_tokens = 160;
    g_spec = KARA_SPEC_NONE;
    CHECK(run_engine(&k, kref, &stats));
    uint64_t events = stats.kv_events, evicted = g_slots_evicted;
    CHECK_MSG(events > 0 && evicted > 0, "Kara compressed without drafts (%llu events, %llu slots)",
              (unsigned long long)events, (unsigned long long)evicted);
    g_spec = KARA_SPEC_NGRAM;
    CHECK(run_engine(&k, ans, &stats));
    CHECK(stats.spec_on);
    CHECK_MSG(stats.n_accepted > 0, "drafts kept under compression (%llu of %llu)",
              (unsigned long long)stats.n_accepted, (unsigned long long)stats.n_drafted);
    same_answers(kref, ans, N_REQ, "speculative under Kara's compression");
    CHECK_EQ_INT(stats.kv_events, events);
    CHECK_EQ_INT(g_slots_evicted, evicted);
    /* per_window eviction: the same (its events evict at the due tokens, which no verify batch crosses) */
    g_evict = KARA_KV_EVICT_PER_WINDOW;
    g_spec = KARA_SPEC_NONE;
    CHECK(run_engine(&k, kref, &stats));
    events = stats.kv_events;
    evicted = g_slots_evicted;
    CHECK_MSG(events > 0 && evicted > 0, "per_window compressed without drafts (%llu events, %llu slots)",
              (unsigned long long)events, (unsigned long long)evicted);
    g_spec = KARA_SPEC_NGRAM;
    CHECK(run_engine(&k, ans, &stats));
    CHECK_MSG(stats.spec_on && stats.n_accepted > 0, "per_window: drafts kept (%llu of %llu)",
              (unsigned long long)stats.n_accepted, (unsigned long long)stats.n_drafted);
    same_answers(kref, ans, N_REQ, "speculative under per_window eviction");
    CHECK_EQ_INT(stats.kv_events, events);
    CHECK_EQ_INT(g_slots_evicted, evicted);
    g_evict = KARA_KV_EVICT_ON_DEMAND;
    /* the threshold methods (a budget of 128 tokens, prompts of 100): their events over the
     * whole cache at the same tokens, which no verify batch crosses; h2o and
     * lazy, which sum every step's attention, with each entry's kept apart
     * (verify_max 9; the runs without drafts have 1) */
    g_seq_tokens = 0;
    g_budget_tokens = 128;
    const kara_kv_method thresholds[] = {KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_H2O,
                                         KARA_KV_METHOD_LAZY};
    for (int i = 0; i < 4; i++) {
        run_opts t = {thresholds[i], 3, 0, 60, 0.0f, 16, false, 0, 0};
        g_spec = KARA_SPEC_NONE;
        CHECK(run_engine(&t, kref, &stats));
        events = stats.kv_events;
        evicted = g_slots_evicted;
        g_spec = KARA_SPEC_NGRAM;
        g_verify_max = 9;
        CHECK(run_engine(&t, ans, &stats));
        g_verify_max = 1;
        const char *name = kara_kv_method_name(thresholds[i]);
        CHECK_MSG(events > 1 && evicted > 0 && stats.spec_on && stats.n_accepted > 0,
                  "%s: %llu events, %llu slots evicted, %llu of %llu drafts kept", name, (unsigned long long)events,
                  (unsigned long long)evicted, (unsigned long long)stats.n_accepted,
                  (unsigned long long)stats.n_drafted);
        same_answers(kref, ans, N_REQ, name);
        CHECK_EQ_INT(stats.kv_events, events);
        CHECK_EQ_INT(g_slots_evicted, evicted);
    }
    g_budget_tokens = 0;
    g_seq_tokens = 160;
    /* without the rows (verify_max 1), h2o cannot take drafts back: off */
    run_opts h = {KARA_KV_METHOD_H2O, 2, 0, 40, 0.0f, 16, false, 0, 0};
    g_spec = KARA_SPEC_NONE;
    CHECK(run_engine(&h, plain, &stats));
    g_spec = KARA_SPEC_NGRAM;
    CHECK(run_engine(&h, ans, &stats));
    CHECK(!stats.spec_on && stats.n_drafted == 0);
    same_answers(plain, ans, N_REQ, "speculative off under h2o");
    g_seq_tokens = 0;
    g_budget_tokens = 0;
    g_spec = KARA_SPEC_NONE;
}

/* A draft model's guesses in the batch (spec DRAFT): every answer as
 * without drafts. The target as its own draft guesses right every time but
 * the last of a request (chosen as it ends); its Q8_0 copy sometimes not. */
static void test_draft_model(kara_model *q8) {
    const int32_t n_gen = 60;
    answer ref[N_REQ], ans[N_REQ];
    for (int r = 0; r < N_REQ; r++) reference(r, n_gen, &ref[r]);
    kara_engine_stats stats;
    g_spec = KARA_SPEC_DRAFT;
    kara_model *drafts[2] = {g_model, q8};
    int32_t seqs[] = {1, 2, 4};
    for (int d = 0; d < 2; d++) {
        g_draft_model = drafts[d];
        for (int i = 0; i < 3; i++) {
            run_opts o = {KARA_KV_METHOD_FULL, seqs[i], 0, n_gen, 0.0f, i ? 7 : 256, false, 0, 0};
            CHECK(run_engine(&o, ans, &stats));
            char what[80];
            snprintf(what, sizeof what, "%s draft, greedy, concurrency %d", d ? "Q8_0" : "self", seqs[i]);
            same_answers(ref, ans, N_REQ, what);
            CHECK_EQ_INT(stats.tokens_generated, N_REQ * n_gen);
            CHECK_MSG(stats.spec_on && stats.draft_seconds > 0, "%s: drafting ran", what);
            if (d == 0)
                CHECK_MSG(stats.n_drafted >= (uint64_t)(N_REQ * n_gen / 2) &&
                              stats.n_accepted + N_REQ >= stats.n_drafted,
                          "%s: %llu drafted, %llu accepted: all but one per request should be", what,
                          (unsigned long long)stats.n_drafted, (unsigned long long)stats.n_accepted);
            else
                CHECK_MSG(stats.n_accepted > 0 && stats.n_accepted + N_REQ < stats.n_drafted,
                          "%s: %llu drafted, %llu accepted: both kept and rejected guesses should occur", what,
                          (unsigned long long)stats.n_drafted, (unsigned long long)stats.n_accepted);
        }
    }
    /* the draft sequences follow the recomputed ones */
    check_spec_preempt_sampled(ref, n_gen, "Q8_0 draft");
    /* a draft context shorter than the requests: drafting stops where it is full */
    g_draft_n_ctx = 48;
    run_opts o = {KARA_KV_METHOD_FULL, 4, 0, n_gen, 0.0f, 7, false, 0, 0};
    CHECK(run_engine(&o, ans, &stats));
    same_answers(ref, ans, N_REQ, "Q8_0 draft, short draft context");
    CHECK(stats.n_drafted > 0);
    g_draft_n_ctx = 512;
    g_spec = KARA_SPEC_NONE;

    /* bad draft contexts, refused by name */
    kara_context *ctx = make_ctx(KARA_KV_METHOD_FULL, 2, 0, 64, 0), *one = NULL;
    kara_context_params dp;
    kara_context_params_init(&dp);
    dp.n_ctx = 128;
    dp.n_threads = 1;
    dp.kv.method = KARA_KV_METHOD_FULL;
    dp.kv.budget = 0;
    CHECK(kara_context_create(q8, &dp, &one) == KARA_OK);
    kara_engine_params ep;
    kara_engine_params_init(&ep);
    ep.spec = KARA_SPEC_DRAFT;
    const struct {
        kara_context *d;
        const char *msg;
    } bad[] = {{NULL, "needs a draft model's context"},
               {ctx, "another context than the engine's"},
               {one, "one draft sequence per request"}};
    for (int i = 0; ctx && one && i < 3; i++) {
        kara_engine *eng = NULL;
        ep.draft_ctx = bad[i].d;
        CHECK_EQ_INT(kara_engine_create(ctx, &ep, &eng), KARA_ERR_ARG);
        CHECK_MSG(strstr(kara_last_error(), bad[i].msg) != NULL, "refusal %d: \"%s\" should say \"%s\"", i,
                  kara_last_error(), bad[i].msg);
        CHECK(eng == NULL);
    }
    kara_context_free(one);
    kara_context_free(ctx);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/batch-engine-tiny.gguf", kr_test_tmpdir());
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    char err[256];
    if (kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "kr_synth_write: %s\n", err);
        return 1;
    }
    if (kara_model_load(path, NULL, &g_model) != KARA_OK) {
        fprintf(stderr, "load: %s\n", kara_last_error());
        return 1;
    }
    test_greedy_matches_reference();
    test_preemption_recompute();
    test_sampled_determinism();
    test_kara_compression();
    test_on_demand_determinism();
    test_stop_and_refusals();
    test_fit_concurrency();
    test_speculative();
    kara_model *q8 = NULL;
    snprintf(path, sizeof path, "%s/batch-engine-tiny-q8.gguf", kr_test_tmpdir());
    sp.ftype = KR_FTYPE_MOSTLY_Q8_0;
    if (CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth Q8_0: %s", err) &&
        CHECK_MSG(kara_model_load(path, NULL, &q8) == KARA_OK, "load Q8_0: %s", kara_last_error()))
        test_draft_model(q8);
    kara_model_free(q8);
    kara_model_free(g_model);
    return kr_test_finish();
}
