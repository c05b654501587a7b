/* test_speculative.c - speculative decoding (spec NGRAM) gives plain
 * decoding's text, greedy and sampled, on a synthetic Qwen3 model (the
 * trained reasoning model: tests/cli/test_reasoner_model.sh); drafted tokens are taken back
 * exactly (the sequence holds its history after a stop inside a draft, an
 * abort, and a rejected draft, so the next start reuses it); under Kara's
 * compression (eviction on demand or per window) it gives plain decoding's
 * text, events and evictions, and
 * stays off for methods that cannot take drafts back; a verify-sized batch gives one-token
 * steps' logits bits; the n-gram index's drafts by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kara.h"
#include "ngram_draft.h"
#include "spec_run.h"
#include "kv_tuning.h"
#include "synth_model.h"
#include "test_models.h"
#include "test_util.h"

#define N_CTX 256
#define N_BATCH 32

typedef kr_spec_run_out run_out;

static kara_context *new_context(kara_model *m, kara_kv_method method, int32_t seq_tokens) {
    kara_context_params cp = kr_spec_ctx_params(method, N_CTX, N_BATCH, seq_tokens);
    return kr_spec_context(m, &cp);
}

/* A prompt that repeats itself, so that the random model's continuation
 * meets n-grams it has seen. */
#define N_PROMPT 48
static const int32_t *repeating_prompt(void) {
    static int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = 3 + (i % 6) * 7;
    return prompt;
}

/* Plain and speculative runs over one prompt give the same text and
 * counts, and leave the sequence holding exactly prompt + output (the last
 * chosen token is not decoded, as in plain decoding). */
static void check_same(kara_model *m, const int32_t *prompt, int32_t n, float temp, int32_t max_tokens,
                       const char *what, kara_generator_stats *spec_stats) {
    static run_out a, b;
    kara_generator_params gp;
    kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, 0);
    if (!ctx) return;
    kr_spec_params(&gp, temp, max_tokens, KARA_SPEC_NONE);
    kr_spec_run(ctx, &gp, prompt, n, &a);
    kr_spec_params(&gp, temp, max_tokens, KARA_SPEC_NGRAM);
    kr_spec_run(ctx, &gp, prompt, n, &b);
    CHECK_MSG(a.status == KARA_DONE && b.status == KARA_DONE, "%s: statuses %d, %d", what, a.status, b.status);
    CHECK_MSG(!a.st.spec_on && b.st.spec_on, "%s: spec_on %d, %d", what, a.st.spec_on, b.st.spec_on);
    CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "%s: speculative text differs from plain", what);
    CHECK_EQ_INT(b.st.n_generated, a.st.n_generated);
    CHECK_EQ_INT(b.n_past, a.n_past);
    CHECK_EQ_INT(b.n_past, n + b.st.n_generated - 1);
    CHECK(b.st.n_accepted <= b.st.n_drafted);
    *spec_stats = b.st;
    kara_context_free(ctx);
}

static void test_synthetic(kara_model *m) {
    const int32_t *prompt = repeating_prompt();
    kara_generator_stats st;
    check_same(m, prompt, N_PROMPT, 0.0f, 180, "synthetic greedy", &st);
    CHECK_MSG(st.n_accepted > 0 && st.n_drafted > st.n_accepted,
              "synthetic greedy: %d drafted, %d accepted: both a kept and a rejected draft should occur", st.n_drafted,
              st.n_accepted);
    /* stopping at every length, some inside an accepted draft: the drafted
     * tokens after the stop are taken back */
    for (int32_t max = 60; max <= 66; max++)
        check_same(m, prompt, N_PROMPT, 0.0f, max, "synthetic greedy, max_tokens", &st);
    /* sampled (top-3, so that the random model still repeats itself): the
     * same draws from the same seed */
    check_same(m, prompt, N_PROMPT, 0.7f, 180, "synthetic sampled", &st);
    CHECK_MSG(st.n_drafted > 0, "synthetic sampled: nothing drafted");
}

/* A speculative greedy generator over ctx, started on the repeating prompt. */
static kara_generator *started(kara_context *ctx, int32_t max_tokens) {
    kara_generator_params gp;
    kr_spec_params(&gp, 0.0f, max_tokens, KARA_SPEC_NGRAM);
    kara_generator *g = NULL;
    if (!CHECK(kara_generator_create(ctx, &gp, &g) == KARA_OK)) return NULL;
    CHECK(kara_generator_start(g, 0, repeating_prompt(), N_PROMPT) == KARA_OK);
    return g;
}

/* The next start reuses the sequence: it held exactly its history. */
static void test_reuse_after_stop(kara_model *m) {
    const int32_t *prompt = repeating_prompt();
    kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, 0);
    kara_generator *g = ctx ? started(ctx, 40) : NULL;
    if (!g) return;
    kara_piece p;
    while (kara_generator_next(g, &p) == KARA_OK) {
    }
    kara_generator_stats st;
    kara_generator_get_stats(g, &st);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_PROMPT + st.n_generated - 1);
    /* the same prompt again: all but its last two tokens reused */
    CHECK(kara_generator_start(g, 0, prompt, N_PROMPT) == KARA_OK);
    kara_generator_get_stats(g, &st);
    CHECK_EQ_INT(st.n_prompt_decoded, 2);
    kara_generator_free(g);
    kara_context_free(ctx);
}

/* Under KV compression that can act (kara, eviction on demand, small
 * windows and a share of 96 slots for 228 positions): drafts are checked in
 * batches that stop short of every window's scoring and of every eviction,
 * so the text, the events and the evictions are plain decoding's; with
 * per_window eviction too, and for the threshold methods (a budget of 64
 * tokens), whose batches stop short of the event over the whole cache.
 * The methods that sum every step's attention (h2o, lazy, kara with read
 * tracking) keep each drafted entry's attention apart with verify_max > 1:
 * then their sums end bit for bit as plain decoding's; with verify_max 1
 * they leave speculation off. */
#define SQUEEZE_THRESHOLD ((kara_kv_evict)-1)  /* squeezed_context: kara with trigger threshold */
#define READ_TRACKING ((kara_kv_evict)-2)      /* kara on demand with kara.score.reads_weight */
#define READ_TRACKING_LONG ((kara_kv_evict)-3) /* the same, windows of 48 slots due where reads start every 32 */
static int32_t g_verify_max = 1;               /* squeezed_context's verify_max */
static kara_context *squeezed_context(kara_model *m, kara_kv_method method, kara_kv_evict evict) {
    kara_context_params cp = kr_spec_ctx_params(method, N_CTX, N_BATCH, 96);
    cp.verify_max = g_verify_max;
    kr_kv_tune(&cp.kv)->budget_tokens = 64;
    kr_test_small_windows(&cp.kv);
    kr_kv_tune(&cp.kv)->evict = evict;
    kr_kv_tune(&cp.kv)->snapkv.trigger_slack = kr_kv_tune(&cp.kv)->rkv.trigger_slack = 16; /* several events */
    kr_kv_tune(&cp.kv)->lazy.window = 16; /* under the budget, so that lazy evicts */
    if (evict == SQUEEZE_THRESHOLD) {     /* kara's ablation A8: an event over the whole cache at its budget */
        kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_ON_DEMAND;
        kr_kv_tune(&cp.kv)->trigger = KARA_KV_TRIGGER_THRESHOLD;
    }
    if (evict == READ_TRACKING || evict == READ_TRACKING_LONG) {
        kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_ON_DEMAND;
        kr_kv_tune(&cp.kv)->reads_weight = 0.5f;
        if (evict == READ_TRACKING_LONG) kr_kv_tune(&cp.kv)->min_compressible = 48;
    }
    return kr_spec_context(m, &cp);
}

/* A hash of the attention sums of sequence 0 (h2o and read tracking's
 * accumulators, lazy's last-seen steps and intervals), bits and all. */
static uint64_t sums_hash(const kara_context *ctx) {
    const kr_kv_policy_seq *q = &ctx->policy.seqs[0];
    uint64_t h = 1469598103934665603ull;
    const int32_t n = ctx->kv.seqs[0].n;
    const int32_t *mri = q->slot_state ? q->slot_state + ctx->policy.max_slots : NULL; /* lazy's second array */
    const uint8_t *parts[3] = {(const uint8_t *)q->h2o_acc, (const uint8_t *)q->slot_state, (const uint8_t *)mri};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; parts[k] && i < (size_t)n * 4; i++) h = (h ^ parts[k][i]) * 1099511628211ull;
    return (h ^ (uint64_t)q->steps) * 1099511628211ull;
}
static uint64_t g_sums; /* compressed_run: sums_hash of its context */

typedef struct method_case {
    kara_kv_method method;
    kara_kv_evict evict; /* or SQUEEZE_THRESHOLD, READ_TRACKING, READ_TRACKING_LONG */
    const char *name;
} method_case;

static void compressed_run(kara_model *m, kara_kv_method method, kara_kv_evict evict, kara_spec_mode spec, float temp,
                           run_out *o, kara_kv_stats *ks) {
    kara_context *ctx = squeezed_context(m, method, evict);
    if (!ctx) return;
    CHECK(kara_context_kv_compressing(ctx));
    kara_generator_params gp;
    kr_spec_params(&gp, temp, 180, spec);
    kr_spec_run(ctx, &gp, repeating_prompt(), N_PROMPT, o);
    kara_context_kv_stats(ctx, ks);
    g_sums = sums_hash(ctx);
    kara_context_free(ctx);
}

/* h2o, lazy and read tracking: with verify_max 1 speculation stays off;
 * with 9 rows it is on, and the text, the events, the evictions and the
 * attention sums themselves are plain decoding's (which ran with 1). */
static void test_summing_methods(kara_model *m) {
    static run_out a, b;
    kara_kv_stats ka, kb;
    const method_case summing[] = {{KARA_KV_METHOD_H2O, KARA_KV_EVICT_ON_DEMAND, "h2o"},
                                   {KARA_KV_METHOD_LAZY, KARA_KV_EVICT_ON_DEMAND, "lazy"},
                                   {KARA_KV_METHOD_KARA, READ_TRACKING, "kara, read tracking"},
                                   {KARA_KV_METHOD_KARA, READ_TRACKING_LONG, "kara, read tracking, windows of 48"}};
    for (size_t i = 0; i < sizeof summing / sizeof summing[0]; i++) {
        compressed_run(m, summing[i].method, summing[i].evict, KARA_SPEC_NGRAM, 0.0f, &b, &kb);
        CHECK_MSG(!b.st.spec_on && b.st.n_drafted == 0, "%s: spec on with verify_max 1", summing[i].name);
        for (int sampled = 0; sampled < 2; sampled++) {
            float temp = sampled ? 0.7f : 0.0f;
            compressed_run(m, summing[i].method, summing[i].evict, KARA_SPEC_NONE, temp, &a, &ka);
            uint64_t plain = g_sums;
            g_verify_max = 9;
            compressed_run(m, summing[i].method, summing[i].evict, KARA_SPEC_NGRAM, temp, &b, &kb);
            g_verify_max = 1;
            CHECK_MSG(b.st.spec_on && (sampled || b.st.n_accepted > 0) && b.st.n_drafted > b.st.n_accepted,
                      "%s: spec %d, %d drafted, %d accepted", summing[i].name, b.st.spec_on, b.st.n_drafted,
                      b.st.n_accepted);
            CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "%s (temp %.1f): text differs", summing[i].name,
                      (double)temp);
            CHECK_MSG(ka.events > 1 && ka.slots_evicted > 0 && kb.slots_evicted == ka.slots_evicted &&
                          kb.events == ka.events,
                      "%s (temp %.1f): evicted %llu vs %llu, events %llu vs %llu", summing[i].name, (double)temp,
                      (unsigned long long)ka.slots_evicted, (unsigned long long)kb.slots_evicted,
                      (unsigned long long)ka.events, (unsigned long long)kb.events);
            CHECK_MSG(g_sums == plain, "%s (temp %.1f): the attention sums differ from plain decoding's",
                      summing[i].name, (double)temp);
            CHECK_EQ_INT(b.n_past, a.n_past);
        }
    }
}

static void test_under_compression(kara_model *m) {
    static run_out a, b;
    kara_kv_stats ka, kb;
    for (int sampled = 0; sampled < 2; sampled++) {
        float temp = sampled ? 0.7f : 0.0f;
        compressed_run(m, KARA_KV_METHOD_KARA, KARA_KV_EVICT_ON_DEMAND, KARA_SPEC_NONE, temp, &a, &ka);
        compressed_run(m, KARA_KV_METHOD_KARA, KARA_KV_EVICT_ON_DEMAND, KARA_SPEC_NGRAM, temp, &b, &kb);
        CHECK_MSG(a.status == KARA_DONE && b.status == KARA_DONE, "compressed: statuses %d, %d", a.status, b.status);
        CHECK_MSG(b.st.spec_on && b.st.n_accepted > 0 && b.st.n_drafted > b.st.n_accepted,
                  "compressed: spec %d, %d drafted, %d accepted", b.st.spec_on, b.st.n_drafted, b.st.n_accepted);
        CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "compressed (temp %.1f): text differs",
                  (double)temp);
        CHECK_MSG(ka.slots_evicted > 0, "the share of 96 should have evicted");
        CHECK_EQ_INT(kb.slots_evicted, ka.slots_evicted);
        CHECK_EQ_INT(kb.events, ka.events);
        CHECK_EQ_INT(b.n_past, a.n_past);
    }
    /* the other window methods with eviction on demand: the same */
    kara_kv_method others[] = {KARA_KV_METHOD_CHUNKKV, KARA_KV_METHOD_RECENT, KARA_KV_METHOD_RANDOM};
    for (int i = 0; i < 3; i++) {
        compressed_run(m, others[i], KARA_KV_EVICT_ON_DEMAND, KARA_SPEC_NONE, 0.0f, &a, &ka);
        compressed_run(m, others[i], KARA_KV_EVICT_ON_DEMAND, KARA_SPEC_NGRAM, 0.0f, &b, &kb);
        CHECK_MSG(b.st.spec_on && b.st.n_accepted > 0, "%s: spec %d, %d accepted", kara_kv_method_name(others[i]),
                  b.st.spec_on, b.st.n_accepted);
        CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "%s: text differs", kara_kv_method_name(others[i]));
        CHECK_MSG(ka.slots_evicted > 0 && kb.slots_evicted == ka.slots_evicted && kb.events == ka.events,
                  "%s: evicted %llu vs %llu, events %llu vs %llu", kara_kv_method_name(others[i]),
                  (unsigned long long)ka.slots_evicted, (unsigned long long)kb.slots_evicted,
                  (unsigned long long)ka.events, (unsigned long long)kb.events);
    }
    /* the threshold methods: events over the whole cache at the same tokens */
    const method_case thresholds[] = {{KARA_KV_METHOD_STREAMING, KARA_KV_EVICT_ON_DEMAND, "streaming"},
                                      {KARA_KV_METHOD_SNAPKV, KARA_KV_EVICT_ON_DEMAND, "snapkv"},
                                      {KARA_KV_METHOD_RKV, KARA_KV_EVICT_ON_DEMAND, "rkv"},
                                      {KARA_KV_METHOD_KARA, SQUEEZE_THRESHOLD, "kara, trigger threshold"}};
    for (size_t i = 0; i < sizeof thresholds / sizeof thresholds[0]; i++) {
        for (int sampled = 0; sampled < 2; sampled++) {
            float temp = sampled ? 0.7f : 0.0f;
            compressed_run(m, thresholds[i].method, thresholds[i].evict, KARA_SPEC_NONE, temp, &a, &ka);
            compressed_run(m, thresholds[i].method, thresholds[i].evict, KARA_SPEC_NGRAM, temp, &b, &kb);
            CHECK_MSG(b.st.spec_on && (sampled || b.st.n_accepted > 0), "%s: spec %d, %d accepted", thresholds[i].name,
                      b.st.spec_on, b.st.n_accepted);
            CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "%s (temp %.1f): text differs",
                      thresholds[i].name, (double)temp);
            CHECK_MSG(ka.events > 1 && ka.slots_evicted > 0 && kb.slots_evicted == ka.slots_evicted &&
                          kb.events == ka.events,
                      "%s (temp %.1f): evicted %llu vs %llu, events %llu vs %llu", thresholds[i].name, (double)temp,
                      (unsigned long long)ka.slots_evicted, (unsigned long long)kb.slots_evicted,
                      (unsigned long long)ka.events, (unsigned long long)kb.events);
            CHECK_EQ_INT(b.n_past, a.n_past);
        }
    }
    test_summing_methods(m);
    /* per_window eviction (its events at the same tokens, since no batch
     * crosses a due point): the same */
    for (int sampled = 0; sampled < 2; sampled++) {
        float temp = sampled ? 0.7f : 0.0f;
        compressed_run(m, KARA_KV_METHOD_KARA, KARA_KV_EVICT_PER_WINDOW, KARA_SPEC_NONE, temp, &a, &ka);
        compressed_run(m, KARA_KV_METHOD_KARA, KARA_KV_EVICT_PER_WINDOW, KARA_SPEC_NGRAM, temp, &b, &kb);
        CHECK_MSG(b.st.spec_on && (sampled || b.st.n_accepted > 0), "per_window: spec %d, %d drafted, %d accepted",
                  b.st.spec_on, b.st.n_drafted, b.st.n_accepted);
        CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "per_window (temp %.1f): text differs",
                  (double)temp);
        CHECK_MSG(ka.slots_evicted > 0 && kb.slots_evicted == ka.slots_evicted && kb.events == ka.events,
                  "per_window: evicted %llu vs %llu, events %llu vs %llu", (unsigned long long)ka.slots_evicted,
                  (unsigned long long)kb.slots_evicted, (unsigned long long)ka.events, (unsigned long long)kb.events);
        CHECK_EQ_INT(b.n_past, a.n_past);
    }
}

/* Taking back a drafted "</think>" under compress_scope think_only undoes
 * what it did: windows become due again (kara_seq_verify_room is bounded by
 * the next due point once more, as in plain decoding). */
static void test_take_back_think_end(kara_model *m) {
    /* n_batch 64: above the room, so that the room is what bounds a batch */
    kara_context_params cp = kr_spec_ctx_params(KARA_KV_METHOD_KARA, N_CTX, 64, 96);
    kr_test_small_windows(&cp.kv);
    kr_kv_tune(&cp.kv)->think_only = true;
    kara_context *ctx = kr_spec_context(m, &cp);
    if (!ctx) return;
    int32_t end[4], n_end = 0;
    CHECK(kara_tokenize(m, "</think>", -1, end, 4, false, true, &n_end) == KARA_OK && n_end == 1);
    kara_batch b = kara_batch_one_sequence(repeating_prompt(), N_BATCH, 0, 0);
    CHECK(kara_decode(ctx, &b) == KARA_OK);
    b = kara_batch_one_sequence(repeating_prompt() + N_BATCH, N_PROMPT - N_BATCH, N_BATCH, 0);
    CHECK(kara_decode(ctx, &b) == KARA_OK);
    int32_t t = 5;
    b = kara_batch_one_sequence(&t, 1, N_PROMPT, 0); /* the first generated token */
    CHECK(kara_decode(ctx, &b) == KARA_OK);
    int32_t room = kara_seq_verify_room(ctx, 0); /* the next window's due point bounds it */
    int32_t verify[3] = {7, end[0], 9};
    b = kara_batch_one_sequence(verify, 3, N_PROMPT + 1, 0);
    b.generated = true;
    CHECK_MSG(room >= 3 && kara_decode(ctx, &b) == KARA_OK, "room %d: %s", room, kara_last_error());
    int32_t after = kara_seq_verify_room(ctx, 0); /* thinking over: no more windows, the share alone */
    CHECK_MSG(after > room - 3, "after </think>: room %d, before %d", after, room);
    CHECK_EQ_INT(kara_seq_truncate(ctx, 0, N_PROMPT + 2), KARA_OK); /* keeps 7, takes back </think> and 9 */
    CHECK_EQ_INT(kara_seq_verify_room(ctx, 0), room - 1);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_PROMPT + 2);
    /* a generated batch past the room is refused, changing nothing */
    int32_t many[64];
    for (int i = 0; i < 64; i++) many[i] = 11;
    int32_t over = kara_seq_verify_room(ctx, 0) + 1;
    b = kara_batch_one_sequence(many, over, N_PROMPT + 2, 0);
    b.generated = true;
    CHECK_EQ_INT(kara_decode(ctx, &b), KARA_ERR_ARG);
    CHECK(strstr(kara_last_error(), "kara_seq_verify_room") != NULL);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_PROMPT + 2);
    /* the same per entry (generated_entries), and entries of one sequence that disagree, are refused too */
    int8_t gen[64];
    memset(gen, 1, sizeof gen);
    b.generated = false;
    b.generated_entries = gen;
    CHECK_EQ_INT(kara_decode(ctx, &b), KARA_ERR_ARG);
    CHECK(strstr(kara_last_error(), "kara_seq_verify_room") != NULL);
    gen[1] = 0;
    b = kara_batch_one_sequence(many, 2, N_PROMPT + 2, 0);
    b.generated_entries = gen;
    CHECK_EQ_INT(kara_decode(ctx, &b), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "must agree") != NULL, "%s", kara_last_error());
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_PROMPT + 2);
    kara_context_free(ctx);
}

static int stop_after;
static bool abort_after(void *user) {
    (void)user;
    return --stop_after < 0;
}

/* An abort between steps, maybe inside a draft: the sequence holds exactly
 * what was generated (every chosen token decoded, as in plain decoding). */
static void test_abort(kara_model *m) {
    for (int k = 20; k < 25; k++) {
        kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, 0);
        kara_generator *g = ctx ? started(ctx, 150) : NULL;
        if (!g) return;
        stop_after = k;
        kara_generator_set_abort(g, abort_after, NULL);
        kara_piece p;
        kara_status st;
        while ((st = kara_generator_next(g, &p)) == KARA_OK) {
        }
        CHECK_EQ_INT(st, KARA_STOPPED);
        kara_generator_stats gs;
        kara_generator_get_stats(g, &gs);
        CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_PROMPT + gs.n_generated);
        kara_generator_free(g);
        kara_context_free(ctx);
    }
}

static void test_bad_params(kara_model *m) {
    kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, 0);
    if (!ctx) return;
    kara_generator_params gp;
    kr_spec_params(&gp, 0.0f, 10, KARA_SPEC_NGRAM);
    kara_generator *g = NULL;
    gp.draft_max = 0;
    CHECK_EQ_INT(kara_generator_create(ctx, &gp, &g), KARA_ERR_ARG);
    CHECK(strstr(kara_last_error(), "draft_max") != NULL);
    gp.draft_max = KARA_MAX_DRAFT + 1;
    CHECK_EQ_INT(kara_generator_create(ctx, &gp, &g), KARA_ERR_ARG);
    gp.draft_max = 4;
    gp.spec = (kara_spec_mode)7;
    CHECK_EQ_INT(kara_generator_create(ctx, &gp, &g), KARA_ERR_ARG);
    kara_context_free(ctx);
}

/* What makes the text identical: a batch of K entries (up to a verify
 * step's largest) gives every entry the logits bits of one-token steps, on
 * F32 weights with an FFN width that is no multiple of the vector width
 * (stories260K's 172 put a different part of each row in a kernel's
 * scalar tail once) and on Q8_0 weights in the file's layout; with heads of
 * 8 (all in the attention products' scalar tails) and of 32 (their vector
 * blocks: a one-token step's 2 query rows per KV head in one block, a
 * batch's 30 in blocks of 4 and a last one of 2). */
static void test_batch_bits(void) {
    static const kr_ftype types[] = {KR_FTYPE_ALL_F32, KR_FTYPE_MOSTLY_Q8_0};
    for (int ti = 0; ti < 4; ti++) {
        kr_synth_params sp;
        kr_synth_params_init(&sp);
        sp.n_ff = 172;
        sp.n_embd = ti < 2 ? 64 : 128;
        sp.n_head = ti < 2 ? 8 : 4;
        sp.n_head_kv = ti < 2 ? 4 : 2;
        sp.ftype = types[ti % 2];
        char err[512];
        const char *path = kr_test_path(kr_test_tmpdir(), "spec-bits.gguf");
        if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "%s", err)) return;
        kara_model_params mp;
        kara_model_params_init(&mp);
        mp.no_repack = true;
        kara_model *m = NULL;
        if (!CHECK_MSG(kara_model_load(path, &mp, &m) == KARA_OK, "%s", kara_last_error())) return;
        const int32_t nv = kara_model_n_vocab(m), P = 20, K = KARA_MAX_DRAFT + 1;
        int32_t toks[64];
        for (int i = 0; i < P + K; i++) toks[i] = (i * 37 + 11) % nv;
        kara_context *a = new_context(m, KARA_KV_METHOD_FULL, 0), *b = new_context(m, KARA_KV_METHOD_FULL, 0);
        float *one = malloc(sizeof(float) * (size_t)nv * (size_t)K);
        if (a && b && one) {
            kara_batch pb = kara_batch_one_sequence(toks, P, 0, 0);
            CHECK(kara_decode(a, &pb) == KARA_OK && kara_decode(b, &pb) == KARA_OK);
            for (int j = 0; j < K; j++) {
                kara_batch s = kara_batch_one_sequence(toks + P + j, 1, P + j, 0);
                CHECK(kara_decode(a, &s) == KARA_OK);
                memcpy(one + (size_t)j * nv, kara_get_logits(a, -1), sizeof(float) * (size_t)nv);
            }
            int32_t pos[KARA_MAX_DRAFT + 1], seq[KARA_MAX_DRAFT + 1];
            int8_t lg[KARA_MAX_DRAFT + 1];
            for (int j = 0; j < K; j++) pos[j] = P + j, seq[j] = 0, lg[j] = 1;
            kara_batch bb = {.n_tokens = K, .tokens = toks + P, .pos = pos, .seq_id = seq, .logits = lg};
            CHECK(kara_decode(b, &bb) == KARA_OK);
            int differ = 0;
            for (int j = 0; j < K; j++)
                differ += memcmp(kara_get_logits(b, j), one + (size_t)j * nv, sizeof(float) * (size_t)nv) != 0;
            CHECK_MSG(differ == 0,
                      "%s, head_dim %d: %d of %d batched entries differ from one-token steps in their logits' bits",
                      ti % 2 ? "Q8_0" : "F32", (int)(sp.n_embd / sp.n_head), differ, K);
        }
        free(one);
        kara_context_free(a);
        kara_context_free(b);
        kara_model_free(m);
    }
}

/* Drafts by hand: a cycle repeated often is drafted to the limit; text
 * that never repeats predicts nothing; a continuation seen once is drafted
 * one token deep (2/3, then 4/9 < KR_DRAFT_MIN_PROB); a cut rebuilds. */
static void test_index(void) {
    kr_ngram_index ix;
    if (!CHECK(kr_ngram_init(&ix, 256, NULL, 0) == KARA_OK)) return;
    int32_t hist[256], out[KARA_MAX_DRAFT];
    int32_t n = 0;
    for (int i = 0; i < 40; i++) hist[n++] = 100 + i; /* nothing repeats */
    CHECK_EQ_INT(kr_ngram_draft(&ix, hist, n, 8, KR_DRAFT_MIN_PROB, out), 0);
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < 5; i++) hist[n++] = 1 + i; /* 1 2 3 4 5, repeated */
    hist[n++] = 1;
    hist[n++] = 2;
    int32_t k = kr_ngram_draft(&ix, hist, n, 8, KR_DRAFT_MIN_PROB, out);
    CHECK_EQ_INT(k, 8);
    static const int32_t want[8] = {3, 4, 5, 1, 2, 3, 4, 5};
    CHECK(!memcmp(out, want, sizeof want));
    CHECK_EQ_INT(kr_ngram_draft(&ix, hist, n, 3, KR_DRAFT_MIN_PROB, out), 3);
    /* the history cut back to the non-repeating start: no prediction */
    kr_ngram_cut(&ix, 40);
    CHECK_EQ_INT(kr_ngram_draft(&ix, hist, 40, 8, KR_DRAFT_MIN_PROB, out), 0);
    /* a continuation seen once: one token */
    n = 40;
    for (int i = 0; i < 5; i++) hist[n++] = 1 + i;
    hist[n++] = 1;
    hist[n++] = 2;
    CHECK_EQ_INT(kr_ngram_draft(&ix, hist, n, 8, KR_DRAFT_MIN_PROB, out), 1);
    CHECK_EQ_INT(out[0], 3);
    /* ... but not in a step shared by four sequences (2/3 < 0.77) */
    CHECK_EQ_INT(kr_ngram_draft(&ix, hist, n, 8, kr_ngram_min_prob(4), out), 0);
    CHECK(fabsf(kr_ngram_min_prob(1) - KR_DRAFT_MIN_PROB) < 1e-6f);
    CHECK(kr_ngram_min_prob(0) == kr_ngram_min_prob(1));
    for (int s = 1; s < 64; s++)
        CHECK(kr_ngram_min_prob(s + 1) > kr_ngram_min_prob(s) && kr_ngram_min_prob(s + 1) < 1.0f);
    kr_ngram_free(&ix);
}

/* The contexts aligned with the line above: rows "u 9 9 5 9 6 NL" with a
 * new u each. After "u 9" the last token alone is ambiguous (9 is followed
 * by 9, 5 and 6 equally often) and every longer context holds the new u, so
 * only the column tells that a 9 comes next. */
static void test_aligned(void) {
    enum { NL = 10, N_VOCAB = 300 };
    static uint8_t line_end[N_VOCAB];
    line_end[NL] = 1;
    int32_t hist[256], out[KARA_MAX_DRAFT], n = 0;
    for (int r = 0; r < 12; r++) {
        hist[n++] = 100 + r;
        hist[n++] = 9;
        hist[n++] = 9;
        hist[n++] = 5;
        hist[n++] = 9;
        hist[n++] = 6;
        hist[n++] = NL;
    }
    hist[n++] = 200;
    hist[n++] = 9;
    kr_ngram_index with, without;
    if (!CHECK(kr_ngram_init(&with, 256, line_end, N_VOCAB) == KARA_OK)) return;
    if (!CHECK(kr_ngram_init(&without, 256, NULL, 0) == KARA_OK)) {
        kr_ngram_free(&with);
        return;
    }
    CHECK_EQ_INT(kr_ngram_draft(&without, hist, n, 8, KR_DRAFT_MIN_PROB, out), 0);
    int32_t k = kr_ngram_draft(&with, hist, n, 8, KR_DRAFT_MIN_PROB, out);
    CHECK(k >= 3);
    static const int32_t want[3] = {9, 5, 9};
    CHECK(k >= 3 && !memcmp(out, want, sizeof want));
    kr_ngram_free(&with);
    kr_ngram_free(&without);
}

int main(void) {
    test_index();
    test_aligned();
    test_batch_bits();
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    char err[512];
    const char *path = kr_test_path(kr_test_tmpdir(), "spec-qwen3.gguf");
    if (kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "kr_synth_write: %s\n", err);
        return 1;
    }
    kara_model *m = NULL;
    if (kara_model_load(path, NULL, &m) != KARA_OK) {
        fprintf(stderr, "load: %s\n", kara_last_error());
        return 1;
    }
    test_synthetic(m);
    test_reuse_after_stop(m);
    test_under_compression(m);
    test_take_back_think_end(m);
    test_abort(m);
    test_bad_params(m);
    kara_model_free(m);
    return kr_test_finish();
}
