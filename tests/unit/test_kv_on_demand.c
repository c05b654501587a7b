/* test_kv_on_demand.c - eviction on demand (kara.evict: on_demand, the
 * default) on a synthetic Qwen3 model:
 * - with the default parameters and a budget that holds the whole context,
 *   Kara is full: logits bit for bit over 600 steps, nothing reserved for
 *   scoring, no event;
 * - under a share (kv_cache.seq_tokens) every window method keeps at most
 *   the share at every step, evicts down to share - margin, never touches
 *   the prompt, keeps the invariants of docs/KARA_METHOD.md section 8, and
 *   after each eviction every scored window holds the same fraction of its
 *   slots (to the rounding of one slot), and an eviction that leaves scored
 *   history below kara.retention of what its windows held when scored has
 *   scored the open window first (so the only scored window is never
 *   whittled away while the next one fills); the logits equal full's until the
 *   first eviction and tokens are identical on 1 and 2 threads;
 * - a share smaller than the prompt plus a whole window still works: the
 *   open window is scored early;
 * - text appended in one piece after generation started (a chat turn) is
 *   kept whole, whatever is evicted around it;
 * - per_window keeps its retention and is capped by an explicit share;
 *   with evict_lag it compresses each window that many windows late;
 * - requests the share cannot hold are refused at admission with a message
 *   that names what they need.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "kv_select.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_CTX 1024
#define P 6
static const int32_t prompt[P] = {1, 17, 33, 49, 65, 81};

static kara_model *tiny_model(void) {
    return kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-on-demand.gguf");
}

/* Small windows so that a few hundred steps see many of them. */
static void small_window(kara_kv_params *kv, kara_kv_method method, int32_t share) {
    kara_kv_params_init(kv);
    kv->method = method;
    kr_test_small_windows(kv);
    kv->seq_tokens = share;
    kr_kv_tune(kv)->evict_lag = 0; /* per_window tests: the paper's eager events unless a test sets a lag */
}

/* Slots each scored window of seq holds now. */
static void window_counts(const kara_context *c, int seq, int32_t *held) {
    const kr_kv_policy_seq *q = &c->policy.seqs[seq];
    memset(held, 0, N_CTX * sizeof *held);
    for (int i = q->n_prompt; i < q->frontier; i++)
        if (q->win[i] >= 0) held[q->win[i]]++;
}

/* After an eviction (before: each window's count before it): the windows
 * that gave slots now keep the same share of their original size, to the
 * rounding of half a slot of each, and no window that gave nothing keeps a
 * larger share than they do (water-filling: windows already below the
 * common share stay as they are). */
static bool even_across_windows(const kara_context *c, int seq, const int32_t *before, int32_t n_win_before,
                                const char *what, int step) {
    const kr_kv_policy_seq *q = &c->policy.seqs[seq];
    int32_t held[N_CTX];
    window_counts(c, seq, held);

    double lo = 2, hi = -1, lo_tol = 0, hi_tol = 0;
    for (int w = 0; w < q->n_win; w++)
        if (held[w] < before[w]) {
            double r = (double)held[w] / q->win_size[w], tol = 0.5 / q->win_size[w];
            if (r < lo) lo = r, lo_tol = tol;
            if (r > hi) hi = r, hi_tol = tol;
        }
    /* (all of it may come from the open window, scored first in this step) */
    bool ok =
        CHECK_MSG(hi >= 0 || q->n_win > n_win_before, "%s step %d: an eviction that took from no window", what, step) &&
        CHECK_MSG(hi - lo <= lo_tol + hi_tol + 1e-9, "%s step %d: windows that gave keep %.3f..%.3f", what, step, lo,
                  hi);
    for (int w = 0; w < q->n_win && ok && hi >= 0; w++)
        if (held[w] == before[w])
            ok = CHECK_MSG((double)held[w] / q->win_size[w] <= hi + hi_tol + 0.5 / q->win_size[w] + 1e-9,
                           "%s step %d: window %d kept %d/%d, more than the %.3f the others came down to", what, step,
                           w, held[w], q->win_size[w], hi);
    return ok;
}

typedef struct run_result {
    int32_t toks[1024];
    float *logits;   /* [steps][V] */
    int first_evict; /* step of the first eviction, -1 */
    uint64_t evicted, events;
    int steps;
} run_result;

/* Greedy generation of n_steps after the prompt, checking everything the
 * header lists at every step. */
static void run(kara_model *m, const kara_kv_params *kv, int threads, int n_steps, run_result *r, const char *what) {
    memset(r, 0, sizeof *r);
    r->first_evict = -1;
    int V = kara_model_n_vocab(m);
    r->logits = malloc((size_t)n_steps * V * sizeof(float));
    kara_context *c = kr_test_kv_context(m, kv, 1, threads, N_CTX);
    if (!CHECK(c != NULL)) return;
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    kara_status st = kara_decode(c, &b);
    uint8_t *ref = malloc(kr_test_kv_prefix_bytes(c, P));
    kr_test_kv_copy_prefix(c, 0, P, ref);
    const int32_t share = c->policy.plan.seq_tokens, margin = c->policy.plan.margin;
    bool share_ok = true, margin_ok = true, inv_ok = true, even_ok = true, floor_ok = true;
    uint64_t evicted = 0;
    static int32_t before[N_CTX];
    for (int i = 0; i < n_steps && st == KARA_OK; i++) {
        window_counts(c, 0, before);
        const int32_t n_win_before = c->policy.seqs[0].n_win;
        const bool open_scorable = c->kv.seqs[0].n - c->policy.seqs[0].frontier - kr_kv_tune(kv)->buffer >= 1;
        const float *l = kara_get_logits(c, -1);
        memcpy(r->logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        r->toks[i] = kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&r->toks[i], 1, P + i, 0);
        st = kara_decode(c, &nb);
        r->steps = i + 1;
        const kr_kv_seq *s = &c->kv.seqs[0];
        if (s->n > share)
            share_ok = CHECK_MSG(false, "%s step %d: %d slots over the share of %d", what, i, s->n, share);
        if (c->policy.stats.slots_evicted != evicted) {
            if (r->first_evict < 0) r->first_evict = i;
            evicted = c->policy.stats.slots_evicted;
            /* evicted down to the margin below the share (this step's token on top) */
            if (kr_kv_tune(kv)->evict == KARA_KV_EVICT_ON_DEMAND && s->n > share - margin + 1)
                margin_ok = CHECK_MSG(false, "%s step %d: %d slots after an eviction, share %d margin %d", what, i,
                                      s->n, share, margin);
            const kr_kv_policy_seq *q = &c->policy.seqs[0];
            char msg[256];
            if (kr_test_kv_invariants(c, 0, NULL, q->n_prompt, q->frontier, ref, msg, sizeof msg) != KARA_OK)
                inv_ok = CHECK_MSG(false, "%s step %d: %s", what, i, msg);
            if (kr_kv_tune(kv)->evict == KARA_KV_EVICT_ON_DEMAND && even_ok)
                even_ok = even_across_windows(c, 0, before, n_win_before, what, i);
            int64_t scored = 0, held = 0;
            for (int w = 0; w < q->n_win; w++) scored += q->win_size[w];
            for (int t = q->n_prompt; t < q->frontier; t++) held += q->win[t] >= 0;
            if (kr_kv_tune(kv)->evict == KARA_KV_EVICT_ON_DEMAND && floor_ok && open_scorable &&
                q->n_win == n_win_before &&
                (double)held < (double)kv->retention * (double)scored - 0.5 * q->n_win) /* rounding */
                floor_ok = CHECK_MSG(false,
                                     "%s step %d: scored history cut to %lld of %lld slots (retention %.2f) "
                                     "without scoring the open window first",
                                     what, i, (long long)held, (long long)scored, (double)kv->retention);
        }
    }
    CHECK_MSG(st == KARA_OK, "%s: decode failed: %s", what, kara_last_error());
    (void)share_ok, (void)margin_ok, (void)inv_ok, (void)even_ok, (void)floor_ok;
    r->evicted = c->policy.stats.slots_evicted;
    r->events = c->policy.stats.events;
    free(ref);
    kara_context_free(c);
}

static void test_defaults_are_full(kara_model *m) {
    kara_kv_params full, def;
    kara_kv_params_init(&full);
    kara_kv_params_init(&def);
    full.method = KARA_KV_METHOD_FULL;
    CHECK_EQ_INT(def.method, KARA_KV_METHOD_KARA);
    CHECK_EQ_INT(kr_kv_tune(&def)->evict, KARA_KV_EVICT_ON_DEMAND);
    kara_context *c = kr_test_kv_context(m, &def, 1, 2, N_CTX);
    if (CHECK(c != NULL)) {
        kara_kv_stats ks;
        kara_context_kv_stats(c, &ks);
        CHECK(!ks.scoring);
        CHECK_EQ_INT(ks.reserved_bytes, 0);
        CHECK_EQ_INT(ks.seq_tokens, N_CTX);
        kara_context_free(c);
    }
    run_result a, b;
    run(m, &full, 2, 600, &a, "full");
    run(m, &def, 2, 600, &b, "defaults");
    CHECK_MSG(!memcmp(a.logits, b.logits, (size_t)600 * kara_model_n_vocab(m) * sizeof(float)),
              "the defaults differ from full over 600 steps");
    CHECK_EQ_INT(b.events, 0);
    CHECK_EQ_INT(b.evicted, 0);
    free(a.logits);
    free(b.logits);
}

static void test_share(kara_model *m) {
    const kara_kv_method methods[] = {KARA_KV_METHOD_KARA, KARA_KV_METHOD_CHUNKKV, KARA_KV_METHOD_RECENT,
                                      KARA_KV_METHOD_RANDOM};
    kara_kv_params full;
    kara_kv_params_init(&full);
    full.method = KARA_KV_METHOD_FULL;
    run_result f;
    run(m, &full, 1, 500, &f, "full");
    int V = kara_model_n_vocab(m);
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        kara_kv_params kv;
        small_window(&kv, methods[i], 160);
        run_result a, b;
        run(m, &kv, 1, 500, &a, kara_kv_method_name(methods[i]));
        run(m, &kv, 2, 500, &b, kara_kv_method_name(methods[i]));
        CHECK_MSG(a.evicted > 200, "%s: %llu slots evicted", kara_kv_method_name(methods[i]),
                  (unsigned long long)a.evicted);
        CHECK_MSG(a.steps == 500 && !memcmp(a.toks, b.toks, sizeof a.toks), "%s: 1 and 2 threads differ",
                  kara_kv_method_name(methods[i]));
        /* lossless until the share is reached: full's logits, bit for bit */
        CHECK_MSG(a.first_evict > 100, "%s: first eviction at step %d", kara_kv_method_name(methods[i]), a.first_evict);
        if (a.first_evict > 0)
            CHECK_MSG(!memcmp(a.logits, f.logits, (size_t)(a.first_evict + 1) * V * sizeof(float)),
                      "%s: logits differ from full before the first eviction", kara_kv_method_name(methods[i]));
        free(a.logits);
        free(b.logits);
    }
    free(f.logits);
}

/* A share of 64 slots: less than the prompt and a whole window (6 + 32 + 8),
 * so evictable history only exists because the open window is scored early. */
static void test_small_share(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 64);
    run_result a;
    run(m, &kv, 1, 300, &a, "share 64");
    CHECK_EQ_INT(a.steps, 300);
    CHECK(a.evicted > 200);
    free(a.logits);
}

/* Generate, then feed 40 tokens in one decode (a chat turn), then generate
 * again under a share: the turn is never evicted. */
static void test_turn_kept_whole(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 200);
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    int V = kara_model_n_vocab(m), pos = 0;
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &b) == KARA_OK);
    pos = P;
    for (int i = 0; i < 70 && ok; i++, pos++) {
        int32_t t = kr_test_argmax(kara_get_logits(c, -1), V);
        b = kara_batch_one_sequence(&t, 1, pos, 0);
        ok = CHECK(kara_decode(c, &b) == KARA_OK);
    }
    int32_t turn[40];
    for (int i = 0; i < 40; i++) turn[i] = (i * 37 + 5) % V;
    int turn_pos = pos;
    b = kara_batch_one_sequence(turn, 40, pos, 0);
    ok = ok && CHECK_MSG(kara_decode(c, &b) == KARA_OK, "turn: %s", kara_last_error());
    pos += 40;
    for (int i = 0; i < 300 && ok; i++, pos++) {
        int32_t t = kr_test_argmax(kara_get_logits(c, -1), V);
        b = kara_batch_one_sequence(&t, 1, pos, 0);
        ok = CHECK_MSG(kara_decode(c, &b) == KARA_OK, "step %d: %s", i, kara_last_error());
    }
    CHECK(c->policy.stats.slots_evicted > 100);
    /* every position of the turn is still held */
    int32_t held[N_CTX];
    int32_t n = kara_seq_positions(c, 0, held, N_CTX), found = 0;
    for (int i = 0; i < n; i++) found += held[i] >= turn_pos && held[i] < turn_pos + 40;
    CHECK_EQ_INT(found, 40);
    kara_context_free(c);
}

/* per_window keeps `retention` at each event, and an explicit share caps it. */
static void test_per_window_share(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 0);
    kr_kv_tune(&kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kv.retention = 0.5f;
    run_result a, b;
    run(m, &kv, 1, 600, &a, "per_window");
    kv.seq_tokens = 120;
    run(m, &kv, 1, 600, &b, "per_window, share 120");
    CHECK(a.events >= 15 && b.events >= 15);
    CHECK_MSG(b.evicted > a.evicted, "the share evicted more (%llu vs %llu)", (unsigned long long)b.evicted,
              (unsigned long long)a.evicted);
    free(a.logits);
    free(b.logits);
}

/* per_window with evict_lag 2: each window is scored when due and
 * compressed two windows later, so after a run every window but the two
 * newest holds its retention and those two are whole; the first
 * compression comes two intervals after lag 0's, and the logits agree with
 * lag 0's (and full's) until lag 0's first compression. */
static void test_per_window_lag(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 0);
    kr_kv_tune(&kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kv.retention = 0.25f;
    run_result a, b;
    run(m, &kv, 1, 400, &a, "per_window lag 0");
    kr_kv_tune(&kv)->evict_lag = 2;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    run(m, &kv, 1, 400, &b, "per_window lag 2");
    CHECK(a.first_evict >= 0 && b.first_evict >= 0);
    CHECK_MSG(b.first_evict >= a.first_evict + 2 * kv.interval, "lag 2 first evicts at step %d, lag 0 at %d",
              b.first_evict, a.first_evict);
    int V = kara_model_n_vocab(m);
    CHECK_MSG(memcmp(a.logits, b.logits, (size_t)(a.first_evict + 1) * V * sizeof(float)) == 0,
              "lag 0 and lag 2 differ before lag 0's first compression");
    /* replay lag 2 in a context we can inspect */
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    kara_status st = kara_decode(c, &pb);
    for (int i = 0; i < b.steps && st == KARA_OK; i++) {
        kara_batch nb = kara_batch_one_sequence(&b.toks[i], 1, P + i, 0);
        st = kara_decode(c, &nb);
    }
    CHECK_EQ_INT(st, KARA_OK);
    const kr_kv_policy_seq *q = &c->policy.seqs[0];
    int32_t held[N_CTX];
    window_counts(c, 0, held);
    CHECK_MSG(q->n_win >= 10, "%d windows", q->n_win);
    for (int w = 0; w < q->n_win; w++) {
        int32_t want = w < q->n_win - 2 ? kr_kv_keep_count(q->win_size[w], kv.retention, kr_kv_tune(&kv)->min_keep)
                                        : q->win_size[w];
        if (!CHECK_MSG(held[w] == want, "window %d of %d holds %d of %d, want %d", w, q->n_win, held[w], q->win_size[w],
                       want))
            break;
    }
    CHECK_EQ_INT(q->n_done, q->n_win - 2);
    kara_context_free(c);
    free(a.logits);
    free(b.logits);
}

static void test_admission(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 40);
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    /* 20 prompt tokens + the buffer (8) + the margin (16) + 2 > 40 */
    CHECK_EQ_INT(kara_seq_admit(c, 0, 20, 100), KARA_ERR_KV_BUDGET);
    CHECK_MSG(strstr(kara_last_error(), "kv_cache.seq_tokens") && strstr(kara_last_error(), "need 46"), "message: %s",
              kara_last_error());
    CHECK_EQ_INT(kara_seq_admit(c, 0, 20, 10), KARA_OK); /* 30 tokens in all: no eviction needed */
    CHECK_EQ_INT(kara_seq_admit(c, 0, 10, 100), KARA_OK);
    kara_context_free(c);
}

/* Under a budget that binds, a sequence's share (and so its answer) is the
 * same whatever the thread count: the scorer's scratch is reserved for a
 * fixed number of workers. */
static void test_share_ignores_threads(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 0);
    kv.budget = kr_kv_budget_for_blocks(&kv, 4, 4, 2, 32, 2, N_CTX, 21);
    int32_t share[3];
    uint64_t reserved[3];
    const int threads[3] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        kara_context *c = kr_test_kv_context(m, &kv, 2, threads[i], N_CTX);
        if (!CHECK(c != NULL)) return;
        kara_kv_stats ks;
        kara_context_kv_stats(c, &ks);
        share[i] = ks.seq_tokens;
        reserved[i] = ks.reserved_bytes;
        kara_context_free(c);
    }
    CHECK_EQ_INT(share[0], 10 * 16); /* 21 blocks for 2 sequences */
    CHECK(share[1] == share[0] && share[2] == share[0]);
    CHECK(reserved[1] == reserved[0] && reserved[2] == reserved[0]);
}

/* Everything kara_decode may change, for every sequence of c. */
typedef struct snapshot {
    int32_t n[3], frontier[3], n_win[3], next_pos[3], n_free;
    int32_t pos[3][N_CTX], win[3][N_CTX];
    float scores[3][N_CTX];
    uint8_t *kv[3];
} snapshot;

static void take(const kara_context *c, snapshot *sn) {
    sn->n_free = c->kv.n_free;
    for (int s = 0; s < 3; s++) {
        const kr_kv_seq *q = &c->kv.seqs[s];
        const kr_kv_policy_seq *ps = &c->policy.seqs[s];
        sn->n[s] = q->n;
        sn->next_pos[s] = q->next_pos;
        sn->frontier[s] = ps->frontier;
        sn->n_win[s] = ps->n_win;
        memcpy(sn->pos[s], q->pos, N_CTX * sizeof(int32_t));
        /* the policy's per-slot rows hold max_slots (the slots the budget can hold) */
        memcpy(sn->win[s], ps->win, (size_t)c->policy.max_slots * sizeof(int32_t));
        memcpy(sn->scores[s], ps->scores, (size_t)c->policy.max_slots * sizeof(float));
        free(sn->kv[s]);
        sn->kv[s] = malloc(kr_test_kv_prefix_bytes(c, q->n) + 1);
        kr_test_kv_copy_prefix(c, s, q->n, sn->kv[s]);
    }
}

static bool same(const kara_context *c, const snapshot *a, const char *what) {
    snapshot b = {0};
    take(c, &b);
    bool ok = a->n_free == b.n_free;
    for (int s = 0; s < 3; s++)
        ok = ok && a->n[s] == b.n[s] && a->next_pos[s] == b.next_pos[s] && a->frontier[s] == b.frontier[s] &&
            a->n_win[s] == b.n_win[s] && !memcmp(a->pos[s], b.pos[s], sizeof a->pos[s]) &&
            !memcmp(a->win[s], b.win[s], sizeof a->win[s]) && !memcmp(a->scores[s], b.scores[s], sizeof a->scores[s]) &&
            !memcmp(a->kv[s], b.kv[s], kr_test_kv_prefix_bytes(c, a->n[s]));
    for (int s = 0; s < 3; s++) free(b.kv[s]);
    return CHECK_MSG(ok, "%s: a failed kara_decode changed the context", what);
}

/* kara_decode on demand is atomic: three sequences whose explicit shares
 * (200 slots each) over-commit a pool of 30 blocks (480 slots). Each step
 * decodes one token of each; when the pool runs short the call fails with
 * KARA_ERR_KV_BUDGET, and every sequence - slots, positions, K and V bytes,
 * windows and scores - is exactly as before it, also when the failing
 * batch held a chat turn that would have closed a window and evicted. */
static void test_decode_atomic(kara_model *m) {
    kara_kv_params kv;
    small_window(&kv, KARA_KV_METHOD_KARA, 200);
    kv.budget = kr_kv_budget_for_blocks(&kv, 4, 4, 2, 32, 3, N_CTX, 30);
    kara_context *c = kr_test_kv_context(m, &kv, 3, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->kv.n_blocks, 30);
    int V = kara_model_n_vocab(m);
    int32_t toks[3], pos[3], seq[3];
    kr_test_start_seqs(c, 3, 6, 3, 5, 1000, toks, pos, seq);
    snapshot before = {0};
    int failures = 0, steps = 0, evictions = 0, chat_checked = 0;
    for (int step = 0; step < 400 && failures < 3; step++) {
        take(c, &before);
        uint64_t ev = c->policy.stats.slots_evicted;
        kara_batch b = {.n_tokens = 3, .tokens = toks, .pos = pos, .seq_id = seq, .logits = NULL};
        int8_t all[3] = {1, 1, 1};
        b.logits = all;
        kara_status st = kara_decode(c, &b);
        if (st == KARA_OK) {
            steps++;
            evictions += c->policy.stats.slots_evicted != ev;
            for (int s = 0; s < 3; s++) {
                toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
                pos[s]++;
            }
            continue;
        }
        CHECK_EQ_INT(st, KARA_ERR_KV_BUDGET);
        same(c, &before, "one token each");
        failures++;
        /* the same step with a chat turn on sequence 0 instead, short
         * enough to stay within its share: it would close sequence 0's
         * window, and the pool is still short */
        int32_t len = 200 - c->kv.seqs[0].n < 20 ? 200 - c->kv.seqs[0].n : 20;
        if (len >= 2) {
            int32_t turn[22], tpos[22], tseq[22];
            for (int i = 0; i < len; i++) {
                turn[i] = (i * 13 + 1) % V;
                tpos[i] = pos[0] + i;
                tseq[i] = 0;
            }
            turn[len] = toks[1], tpos[len] = pos[1], tseq[len] = 1;
            turn[len + 1] = toks[2], tpos[len + 1] = pos[2], tseq[len + 1] = 2;
            kara_batch t = {.n_tokens = len + 2, .tokens = turn, .pos = tpos, .seq_id = tseq, .logits = NULL};
            CHECK_EQ_INT(kara_decode(c, &t), KARA_ERR_KV_BUDGET);
            same(c, &before, "with a chat turn");
            chat_checked++;
        }
        /* room again: drop sequence 2 and go on with the other two */
        kara_seq_clear(c, 2);
        seq[2] = 2;
        toks[2] = 1;
        pos[2] = 0;
    }
    CHECK_MSG(steps > 50 && failures >= 1 && evictions > 0 && chat_checked >= 1,
              "%d steps, %d failures (%d with a chat turn), %d evicting steps", steps, failures, chat_checked,
              evictions);
    for (int s = 0; s < 3; s++) free(before.kv[s]);
    kara_context_free(c);
}

int main(void) {
    kara_model *m = tiny_model();
    if (!CHECK(m != NULL)) return kr_test_finish();
    test_defaults_are_full(m);
    test_share(m);
    test_small_share(m);
    test_turn_kept_whole(m);
    test_per_window_share(m);
    test_per_window_lag(m);
    test_admission(m);
    test_share_ignores_threads(m);
    test_decode_atomic(m);
    kara_model_free(m);
    return kr_test_finish();
}
