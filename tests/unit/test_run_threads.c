/*
 * test_run_threads.c - how a kara_decode call chooses its threads
 * (runtime/decode/run_threads.h), on a seeded tiny model with 2 threads:
 *   - a call below KR_PARALLEL_MIN_FLOPS runs on one thread, untimed
 *     (every decode step of a tiny model);
 *   - before anything is measured, a mid-sized call starts on one thread and
 *     a large one on all; then the unmeasured mode is tried once;
 *   - once both are measured the cheaper one is used, the other is tried
 *     after probe_every calls; a probe that loses doubles probe_every (up
 *     to the maximum), one that wins resets it and takes over;
 *   - a try of all threads is priced first by the ping: when the ping times
 *     the call's regions exceeds one thread's measured cost, the try is
 *     skipped (one thread runs) and counts as a try that lost;
 *   - a try of all threads that beats one thread runs again on the next call
 *     and counts with the slower time: one lucky call does not take over;
 *   - decode steps and prompt batches are learned apart; a context's first
 *     timed call is not recorded (cold caches);
 *   - a large call starts on every thread and then tries one thread once;
 *   - the logits do not depend on the choice (one thread or two, bit for bit).
 */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "monotonic_clock.h"
#include "run_threads.h"
#include "test_models.h"
#include "test_util.h"

/* The ping's answer, set by the test (seconds per region). */
static double g_ping = 1e-9;
static int g_pings;
static double fake_ping(kara_context *c, double budget_s, double work_s) {
    (void)c;
    (void)budget_s;
    g_pings++;
    return g_ping + work_s;
}

/* Other processes' runnable tasks, set by the test. */
static int g_others = 0;
static int fake_others(void) { return g_others; }

/* n_tokens entries at positions 0.. whose work is about `work` flops */
static int32_t tokens_for(kara_context *c, double work) {
    int32_t n = (int32_t)(work / c->rt.flops_per_token);
    if (n < 1) n = 1;
    if (n > c->n_batch) n = c->n_batch;
    for (int32_t i = 0; i < n; i++) c->entry_pos[i] = 0;
    return n;
}

/* One timed call that takes one_thread or two_threads seconds, whichever it
 * runs on, and runs 20 parallel regions (simulated through its start time
 * and the region count). */
static void timed_call(kara_context *c, int32_t n, double one_thread, double two_threads) {
    double t0 = kr_run_threads_choose(c, n);
    c->rt.regions += 20; /* the call's parallel regions */
    if (c->rt.mode >= 0) kr_run_threads_record(c, t0 - (c->run_threads == 1 ? one_thread : two_threads));
}

/* A fresh context whose ping is fake_ping, warm (past its first call) or
 * not, with `big` entries placed deep enough in the context that a call of
 * them is twice KR_START_PARALLEL_FLOPS. */
static kara_context *big_call_context(kara_model *m, const kara_context_params *cp, int32_t big, bool warm) {
    kara_context *c = NULL;
    if (!CHECK_MSG(kara_context_create(m, cp, &c) == KARA_OK, "%s", kara_last_error())) return NULL;
    c->rt.ping = fake_ping;
    c->rt.others_running = fake_others;
    c->rt.warm = warm;
    for (int32_t e = 0; e < big; e++)
        c->entry_pos[e] = (int32_t)(2 * KR_START_PARALLEL_FLOPS / (big * c->rt.flops_per_context));
    return c;
}

static void check_choices(kara_model *m) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_batch = 4096;
    cp.n_threads = 2;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    if (!CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "%s", kara_last_error())) return;
    kr_run_threads_state *s = &c->rt;
    CHECK(s->flops_per_token > 0 && s->flops_per_context > 0);
    CHECK(s->ping == kr_parallel_ping);
    s->ping = fake_ping;
    s->others_running = fake_others;

    /* small: one thread, untimed */
    kr_run_threads_choose(c, 1);
    CHECK_EQ_INT(c->run_threads, 1);
    CHECK_EQ_INT(s->mode, -1);

    /* the context's first timed call is not recorded (cold caches) */
    int32_t mid0 = tokens_for(c, 2 * KR_PARALLEL_MIN_FLOPS);
    timed_call(c, mid0 < KR_BATCH_CLASS_TOKENS ? KR_BATCH_CLASS_TOKENS : mid0, 0.030, 0.002);
    CHECK_EQ_INT(c->run_threads, 1);
    CHECK(s->warm && s->cls[1].sec_per_flop[0] == 0);
    /* mid-sized, nothing measured: one thread first, then all once (the
     * ping finds the machine quiet) */
    int32_t mid = tokens_for(c, 2 * KR_PARALLEL_MIN_FLOPS);
    if (mid < KR_BATCH_CLASS_TOKENS) mid = KR_BATCH_CLASS_TOKENS; /* a prompt batch */
    if (!CHECK(s->flops_per_token * mid < KR_START_PARALLEL_FLOPS)) return;
    timed_call(c, mid, 0.010, 0.002);
    CHECK_EQ_INT(c->run_threads, 1);
    CHECK(s->regions_per_call > 0); /* kr_parallel_run counted the call's regions */
    timed_call(c, mid, 0.010, 0.002);
    CHECK_EQ_INT(c->run_threads, 2);
    CHECK_EQ_INT(g_pings, 1);
    kr_run_threads_class *L = &s->cls[s->cur];
    /* it won once: not believed until the next call wins again */
    CHECK(L->pending > 0 && L->sec_per_flop[1] == 0);
    timed_call(c, mid, 0.010, 0.002);
    CHECK_EQ_INT(c->run_threads, 2);
    CHECK_EQ_INT(g_pings, 2);
    CHECK(L->pending == 0 && L->sec_per_flop[0] > L->sec_per_flop[1]);
    /* two threads measured cheaper: used until the probe, which loses */
    int ones = 0;
    int32_t every = L->probe_every;
    for (int i = 0; i < every - 1; i++) {
        timed_call(c, mid, 0.010, 0.002);
        ones += c->run_threads == 1;
    }
    CHECK_EQ_INT(ones, 0);
    timed_call(c, mid, 0.010, 0.002);
    CHECK_EQ_INT(c->run_threads, 1);
    CHECK_EQ_INT(L->probe_every, 2 * every);
    /* probes that keep losing back off to the maximum and stay there */
    ones = 0;
    for (int i = 0; i < 8 * KR_RUN_THREADS_PROBE_MAX; i++) {
        timed_call(c, mid, 0.010, 0.002);
        ones += c->run_threads == 1;
    }
    CHECK_EQ_INT(L->probe_every, KR_RUN_THREADS_PROBE_MAX);
    CHECK(ones >= 5 && ones <= 12); /* 64, 128, ..., 1024, then one in 1024 */
    /* the machine gets busy: two threads now cost 100 ms a call; the next
     * probe of one thread (or its stale average) makes one thread the
     * choice within the probe interval, and a winning probe resets it */
    int i = 0;
    for (; i < 2 * KR_RUN_THREADS_PROBE_MAX && c->run_threads != 1; i++) timed_call(c, mid, 0.010, 0.100);
    CHECK(c->run_threads == 1 && i <= KR_RUN_THREADS_PROBE_MAX + 1);
    CHECK_EQ_INT(L->probe_every, KR_RUN_THREADS_PROBE_EVERY);
    for (int k = 0; k < 8; k++) {
        timed_call(c, mid, 0.010, 0.100);
        CHECK_EQ_INT(c->run_threads, 1);
    }
    /* still busy, and the ping shows it (a region costs a time slice): the
     * tries of two threads are skipped, never run, and back off */
    g_ping = 1.0;
    g_pings = 0;
    int twos = 0;
    for (int k = 0; k < 4 * KR_RUN_THREADS_PROBE_EVERY; k++) {
        timed_call(c, mid, 0.010, 0.100);
        twos += c->run_threads == 2;
    }
    CHECK_EQ_INT(twos, 0);
    CHECK(g_pings >= 2 && s->skipped == g_pings);
    CHECK(L->probe_every > KR_RUN_THREADS_PROBE_EVERY);
    /* quiet again: the next try runs, wins and takes over */
    g_ping = 1e-9;
    for (i = 0; i < 2 * KR_RUN_THREADS_PROBE_MAX && c->run_threads != 2; i++) timed_call(c, mid, 0.010, 0.002);
    CHECK(c->run_threads == 2 && i <= KR_RUN_THREADS_PROBE_MAX + 1);
    for (int k = 0; k < 3; k++) { /* the confirming call, then the choice */
        timed_call(c, mid, 0.010, 0.002);
        CHECK_EQ_INT(c->run_threads, 2);
    }

    /* a decode step is another class: nothing measured there yet, so it
     * starts on one thread whatever the prompt batches learned */
    c->entry_pos[0] = (int32_t)(2 * KR_PARALLEL_MIN_FLOPS / s->flops_per_context);
    timed_call(c, 1, 0.010, 0.002);
    CHECK_EQ_INT(s->cur, 0);
    CHECK(s->work >= KR_PARALLEL_MIN_FLOPS && s->work < KR_START_PARALLEL_FLOPS);
    CHECK_EQ_INT(c->run_threads, 1);
    kara_context_free(c);

    /* a large call with nothing measured: every thread first, then one
     * thread once, then the cheaper (no size is too large to try) */
    int32_t big = KR_BATCH_CLASS_TOKENS; /* entries deep in a long context */
    if (!(c = big_call_context(m, &cp, big, true))) return;
    s = &c->rt;
    timed_call(c, big, 1.0, 4.0);
    CHECK(s->work >= KR_START_PARALLEL_FLOPS);
    CHECK_EQ_INT(c->run_threads, 2);
    timed_call(c, big, 1.0, 4.0);
    CHECK_EQ_INT(c->run_threads, 1);
    timed_call(c, big, 1.0, 4.0);
    CHECK_EQ_INT(c->run_threads, 1);
    kara_context_free(c);

    /* the same large call beside a busy core: once the first call has
     * counted its regions, a ping that prices them above a fast core's time
     * for the whole call keeps it on one thread until one thread is
     * measured; then the try of all threads is priced against that */
    if (!(c = big_call_context(m, &cp, big, false))) return;
    s = &c->rt;
    g_ping = 0.005;                   /* a scheduler slice per region: 20 regions = 100 ms */
    timed_call(c, big, 0.002, 0.100); /* the first call (not recorded) knows no region count */
    CHECK_EQ_INT(c->run_threads, 2);
    CHECK(s->regions_per_call == 20 && s->work / KR_ONE_THREAD_FLOPS_FAST < 20 * g_ping);
    int skipped = s->skipped;
    timed_call(c, big, 0.002, 0.100);
    CHECK_EQ_INT(c->run_threads, 1);
    CHECK_EQ_INT(s->skipped, skipped + 1);
    L = &s->cls[s->cur];
    CHECK(L->sec_per_flop[0] > 0 && L->sec_per_flop[1] == 0); /* no made-up price for all threads */
    for (int k = 0; k < 4; k++) {
        timed_call(c, big, 0.002, 0.100);
        CHECK_EQ_INT(c->run_threads, 1);
    }
    /* a lucky first call on all threads (before one thread was measured)
     * is confirmed like any try: it runs again, and the slower time counts */
    kara_context_free(c);
    if (!(c = big_call_context(m, &cp, big, true))) return;
    s = &c->rt;
    g_ping = 1e-9;
    timed_call(c, big, 1.0, 0.5); /* lucky */
    CHECK_EQ_INT(c->run_threads, 2);
    timed_call(c, big, 1.0, 4.0);
    CHECK_EQ_INT(c->run_threads, 1);
    L = &s->cls[s->cur];
    CHECK(L->pending > 0 && L->sec_per_flop[1] == 0);
    timed_call(c, big, 1.0, 4.0); /* the confirmation loses */
    CHECK_EQ_INT(c->run_threads, 2);
    CHECK(L->pending == 0 && L->sec_per_flop[1] > L->sec_per_flop[0]);
    for (int k = 0; k < 4; k++) {
        timed_call(c, big, 1.0, 4.0);
        CHECK_EQ_INT(c->run_threads, 1);
    }
    /* another process keeps a core busy (the least of three reads says
     * so): every try of all threads is refused before any ping, the first
     * while nothing is measured, then priced at KR_BUSY_TRY_COST x one
     * thread; the probes back off. A busy core among more cores than the
     * threads need refuses nothing */
    kara_context_free(c);
    if (!(c = big_call_context(m, &cp, big, false))) return;
    s = &c->rt;
    s->cores = 2;
    g_others = 1;
    g_pings = 0;
    for (int k = 0; k < 6; k++) {
        timed_call(c, big, 0.002, 0.100);
        CHECK_EQ_INT(c->run_threads, 1);
    }
    L = &s->cls[s->cur];
    CHECK_EQ_INT(g_pings, 0);
    CHECK(s->busy_skips >= 2 && L->sec_per_flop[1] > 0.9 * KR_BUSY_TRY_COST * L->sec_per_flop[0]);
    s->cores = 4;
    L->since_probe = L->probe_every - 1; /* the next call is a probe */
    timed_call(c, big, 0.002, 0.001);
    CHECK_EQ_INT(c->run_threads, 2);
    CHECK(g_pings == 1);
    g_others = 0;
    /* quiet: the same start runs on all threads */
    kara_context_free(c);
    if (!(c = big_call_context(m, &cp, big, false))) return;
    g_ping = 1e-6;
    timed_call(c, big, 0.002, 0.001);
    timed_call(c, big, 0.002, 0.001);
    CHECK_EQ_INT(c->run_threads, 2);
    g_ping = 1e-9;
    kara_context_free(c);

    /* beside a busy core: one lucky call on two threads (2 ms against one
     * thread's 10), then the usual 60 ms. The confirming call loses, so
     * one thread stays the choice and the next try waits twice as long */
    if (!CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "%s", kara_last_error())) return;
    s = &c->rt;
    s->ping = fake_ping;
    s->others_running = fake_others;
    s->warm = true;
    timed_call(c, mid, 0.010, 0.002);
    CHECK_EQ_INT(c->run_threads, 1);
    timed_call(c, mid, 0.010, 0.002); /* the lucky try */
    CHECK_EQ_INT(c->run_threads, 2);
    timed_call(c, mid, 0.010, 0.060); /* its confirmation */
    CHECK_EQ_INT(c->run_threads, 2);
    L = &s->cls[s->cur];
    CHECK(L->pending == 0 && L->sec_per_flop[1] > L->sec_per_flop[0]);
    CHECK_EQ_INT(L->probe_every, 2 * KR_RUN_THREADS_PROBE_EVERY);
    for (int k = 0; k < 8; k++) {
        timed_call(c, mid, 0.010, 0.002);
        CHECK_EQ_INT(c->run_threads, 1);
    }
    kara_context_free(c);
}

/* The same prompt's logits with the choice forced to one thread and to two. */
static void check_same_logits(kara_model *m) {
    const int V = kara_model_n_vocab(m), T = 200;
    float *out[2] = {malloc((size_t)V * sizeof(float)), malloc((size_t)V * sizeof(float))};
    int32_t *t = malloc(T * sizeof *t);
    for (int i = 0; i < T; i++) t[i] = (i * 11 + 5) % V;
    for (int k = 0; k < 2; k++) {
        kara_context_params cp;
        kara_context_params_init(&cp);
        cp.n_ctx = 256;
        cp.n_threads = 2;
        cp.kv.method = KARA_KV_METHOD_FULL;
        kara_context *c = NULL;
        if (!CHECK(kara_context_create(m, &cp, &c) == KARA_OK)) return;
        /* force the mode: measured averages that favour k threads */
        for (int cl = 0; cl < 2; cl++) {
            c->rt.cls[cl].sec_per_flop[0] = k == 0 ? 1e-12 : 1.0;
            c->rt.cls[cl].sec_per_flop[1] = k == 0 ? 1.0 : 1e-12;
        }
        kara_batch b = kara_batch_one_sequence(t, T, 0, 0);
        CHECK(kara_decode(c, &b) == KARA_OK);
        if (c->rt.work >= KR_PARALLEL_MIN_FLOPS) CHECK_EQ_INT(c->run_threads, k + 1);
        memcpy(out[k], kara_get_logits(c, -1), (size_t)V * sizeof(float));
        kara_context_free(c);
    }
    CHECK(memcmp(out[0], out[1], (size_t)V * sizeof(float)) == 0);
    free(out[0]);
    free(out[1]);
    free(t);
}

int main(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 5, 256, "run_threads.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    check_choices(m);
    check_same_logits(m);
    kara_model_free(m);
    return kr_test_finish();
}
