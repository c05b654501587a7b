/* test_kv_trigger.c - Kara with `kara.trigger: threshold` (ablation A8,
 * docs/KARA_METHOD.md section 11; docs/KV_COMPRESSION.md) inside real
 * decoding, on the seeded random-weight tiny model (4 layers, 4 query
 * heads, 2 KV heads, head dim 32):
 *   - no event while the cache holds fewer than budget_tokens +
 *     trigger_slack slots, one at the very step it reaches that many;
 *   - after each event the sequence holds budget_tokens slots: the prompt
 *     untouched (positions and K/V bytes), the newest `buffer` slots, and
 *     survivors chosen over the whole generated cache, which later events
 *     rescore (unlike the periodic trigger's frozen history);
 *   - the invariants of docs/KARA_METHOD.md section 8 after every event
 *     and the KV budget at every step, peak included, over long
 *     generations;
 *   - 1 and 2 threads give identical tokens and logits;
 *   - budget_tokens auto (the pool share less the slack), an explicit slack,
 *     three sequences sharing one pool;
 *   - pool pressure before any sequence reaches its threshold forces the
 *     event early on the sequence furthest over its token budget
 *     (docs/KARA_METHOD.md section 9) instead of failing the step;
 *   - bad parameters are clear errors; the trigger leaves other methods alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define BLOCK_BYTES (4 * 2 * 16 * 2 * 32 * 2) /* layers x K,V x slots x KV heads x dim x f16 */

static kara_model *tiny_model(void) {
    return kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-trigger.gguf");
}

/* Ablation A8 at the small scale of test_kv_policy.c: 32 slots generated
 * between events (trigger_slack auto = interval), an 8-slot buffer. */
static void a8_params(kara_kv_params *kv, int32_t budget_tokens, int n_seq, int pool_blocks) {
    kara_kv_params_init(kv);
    kv->method = KARA_KV_METHOD_KARA;
    kr_kv_tune(kv)->trigger = KARA_KV_TRIGGER_THRESHOLD;
    kv->interval = 32;
    kr_kv_tune(kv)->buffer = 8;
    kr_kv_tune(kv)->budget_tokens = budget_tokens;
    kv->budget = kr_kv_budget_for_blocks(kv, 4, 4, 2, 32, n_seq, 1024, pool_blocks);
}

/* The invariants of docs/KARA_METHOD.md section 8 for one sequence:
 * positions, the prompt's bytes against the copy taken after the prompt
 * was decoded, blocks held, pool accounting. */
static bool invariants_hold(const kara_context *c, int seq, const uint8_t *prompt_ref, const char *what) {
    const kr_kv_policy_seq *q = &c->policy.seqs[seq];
    char msg[256];
    return CHECK_MSG(kr_test_kv_invariants(c, seq, NULL, q->n_prompt, q->frontier, prompt_ref, msg, sizeof msg) ==
                         KARA_OK,
                     "%s: %s", what, msg);
}

/* Greedy decoding of one sequence from a 6-token prompt with every check of
 * the file's header at every step. Returns the tokens (and logits). */
static int32_t *run_one(kara_model *m, const kara_kv_params *kv, int threads, int n_steps, int32_t want_budget,
                        float **logits_out, const char *what) {
    kara_context *c = kr_test_kv_context(m, kv, 1, threads, 1024);
    if (!CHECK_MSG(c != NULL, "%s: context", what)) return NULL;
    const int32_t T = c->policy.budget_tokens, S = kr_kv_trigger_slack(&c->policy.p), b = kr_kv_tune(kv)->buffer;
    CHECK_MSG(T == want_budget, "%s: budget_tokens %d, want %d", what, T, want_budget);
    CHECK_EQ_INT(c->policy.window_method, 0);
    CHECK_EQ_INT(c->policy.ring_cap, S + b + 1);
    int V = kara_model_n_vocab(m);
    int32_t prompt[6] = {1, 17, 33, 49, 65, 81};
    const int P = 6;
    int32_t *toks = malloc((size_t)n_steps * sizeof *toks);
    int32_t *kept = malloc(1024 * sizeof(int32_t)); /* generated non-buffer positions kept by the last event */
    int n_kept = 0;
    float *logits = logits_out ? malloc((size_t)n_steps * V * sizeof(float)) : NULL;
    uint8_t *ref = malloc(kr_test_kv_prefix_bytes(c, P));
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    kara_status st = kara_decode(c, &pb);
    kr_test_kv_copy_prefix(c, 0, P, ref);
    bool trigger_ok = true, after_ok = true, below_ok = true, inv_ok = true, budget_ok = true, rescored = false;
    int n_events = 0, first_event_step = -1;
    for (int i = 0; i < n_steps && st == KARA_OK; i++) {
        const float *l = kara_get_logits(c, -1);
        if (logits) memcpy(logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        toks[i] = kr_test_argmax(l, V);
        int32_t n_before = c->kv.seqs[0].n;
        uint64_t ev0 = c->policy.stats.events;
        kara_batch nb = kara_batch_one_sequence(&toks[i], 1, P + i, 0);
        st = kara_decode(c, &nb);
        bool event = c->policy.stats.events != ev0, due = n_before + 1 >= T + S;
        const kr_kv_seq *s = &c->kv.seqs[0];
        if (event != due && trigger_ok)
            trigger_ok = CHECK_MSG(false, "%s step %d: %d slots after the append, event %d (threshold %d + %d)", what,
                                   i, n_before + 1, event, T, S);
        if (kv->budget && kara_context_kv_bytes(c) > kv->budget) budget_ok = false;
        if (!event) {
            below_ok &= s->n < T + S;
            continue;
        }
        n_events++;
        if (first_event_step < 0) first_event_step = i;
        /* budget_tokens slots: the prompt, what the budget leaves, the buffer */
        if (after_ok)
            after_ok = CHECK_MSG(s->n == T, "%s step %d: %d slots after the event, budget %d", what, i, s->n, T);
        CHECK_EQ_INT(c->policy.seqs[0].frontier, P);
        for (int u = 0; u < b && after_ok; u++)
            after_ok = CHECK_MSG(s->pos[s->n - b + u] == P + i - b + 1 + u, "%s step %d: buffer slot %d holds %d", what,
                                 i, u, s->pos[s->n - b + u]);
        inv_ok &= invariants_hold(c, 0, ref, what);
        /* did this event drop a slot that the previous one had kept? */
        for (int t = 0, j = P; t < n_kept; t++) {
            while (j < s->n && s->pos[j] < kept[t]) j++;
            if (j >= s->n || s->pos[j] != kept[t]) rescored = true;
        }
        n_kept = 0;
        for (int j = P; j < s->n - b; j++) kept[n_kept++] = s->pos[j];
    }
    CHECK_MSG(st == KARA_OK, "%s: decode failed: %s", what, kara_last_error());
    CHECK_MSG(trigger_ok && after_ok && inv_ok, "%s: trigger, post-event layout, invariants", what);
    CHECK_MSG(below_ok, "%s: a cache stayed at or above budget_tokens + trigger_slack", what);
    CHECK_MSG(budget_ok, "%s: KV bytes exceeded the budget", what);
    CHECK_MSG(kara_context_kv_bytes_peak(c) <= kv->budget, "%s: peak %llu > budget %llu", what,
              (unsigned long long)kara_context_kv_bytes_peak(c), (unsigned long long)kv->budget);
    /* the first event fires when the cache first reaches T + S slots */
    CHECK_MSG(first_event_step == T + S - P - 1, "%s: first event at step %d, want %d", what, first_event_step,
              T + S - P - 1);
    CHECK_MSG(n_events >= 3, "%s: %d events in %d steps", what, n_events, n_steps);
    CHECK_MSG(rescored, "%s: no event ever dropped a slot an earlier event kept", what);
    /* admission sees the same peak: budget_tokens + slack */
    CHECK_EQ_INT(kr_kv_plan_blocks(&c->policy.plan, kr_kv_plan_peak_slots(&c->policy.plan, P, 10000)),
                 (T + S + 15) / 16);
    kara_context_free(c);
    free(kept);
    free(ref);
    if (logits_out) *logits_out = logits;
    return toks;
}

static void test_threshold_one_sequence(kara_model *m) {
    kara_kv_params kv;
    a8_params(&kv, 96, 1, 10);
    float *l1 = NULL, *l2 = NULL;
    int32_t *t1 = run_one(m, &kv, 1, 400, 96, &l1, "a8 t=1"), *t2 = run_one(m, &kv, 2, 400, 96, &l2, "a8 t=2");
    if (t1 && t2) {
        CHECK_MSG(memcmp(t1, t2, 400 * sizeof(int32_t)) == 0, "a8: tokens differ between 1 and 2 threads");
        CHECK_MSG(memcmp(l1, l2, (size_t)400 * kara_model_n_vocab(m) * sizeof(float)) == 0,
                  "a8: logits differ between 1 and 2 threads");
    }
    free(t1);
    free(t2);
    free(l1);
    free(l2);
}

/* budget_tokens auto: the pool's 10 blocks (160 slots) less the slack of
 * 32; and an explicit trigger_slack of 16 (a smaller query ring). */
static void test_threshold_auto_and_slack(kara_model *m) {
    kara_kv_params kv;
    a8_params(&kv, 0, 1, 10);
    free(run_one(m, &kv, 2, 360, 160 - 32, NULL, "a8 auto budget"));
    a8_params(&kv, 80, 1, 10);
    kr_kv_tune(&kv)->trigger_slack = 16;
    free(run_one(m, &kv, 2, 300, 80, NULL, "a8 slack 16"));
}

/* Three sequences of different prompt lengths decoding in one batch under
 * one pool of 30 blocks: each gets a share of 160 slots, budget 128 + slack
 * 32 fills it exactly at its events; accounting stays exact and the budget
 * holds. */
static void test_threshold_shared_pool(kara_model *m) {
    kara_kv_params kv;
    a8_params(&kv, 0, 3, 30);
    kara_context *c = kr_test_kv_context(m, &kv, 3, 2, 1024);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->policy.budget_tokens, 128);
    int V = kara_model_n_vocab(m);
    int32_t toks[3], pos[3], seq[3];
    int8_t want[3] = {1, 1, 1};
    kr_test_start_seqs(c, 3, 5, 2, 31, 300, toks, pos, seq);
    bool ok = true;
    for (int step = 0; step < 300 && ok; step++) {
        kara_batch b = {.n_tokens = 3, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
        ok &= CHECK_MSG(kara_decode(c, &b) == KARA_OK, "step %d: %s", step, kara_last_error());
        int held = 0;
        for (int s = 0; s < 3; s++) {
            const kr_kv_seq *q = &c->kv.seqs[s];
            held += q->n_blocks;
            ok &= CHECK_MSG(q->n < 128 + 32, "step %d: sequence %d holds %d slots", step, s, q->n);
            for (int j = 1; j < q->n; j++) ok &= q->pos[j] > q->pos[j - 1];
            toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
            pos[s]++;
        }
        ok &= CHECK_EQ_INT(held + c->kv.n_free, c->kv.n_blocks);
        ok &= CHECK(kara_context_kv_bytes(c) <= kv.budget);
    }
    /* each sequence reached 160 slots after about 150 steps, then every 32 */
    CHECK_MSG(c->policy.stats.events >= 3 * 5, "%llu events", (unsigned long long)c->policy.stats.events);
    for (int s = 0; s < 3; s++) CHECK(c->policy.seqs[s].events >= 5);
    kara_context_free(c);
}

/* Three sequences whose token budget (64) plus slack (32) is more than the
 * pool can give each of them (16 blocks of 16 slots, about 85 each): the
 * pool runs short before any threshold is reached, and every step must still
 * succeed because relieve forces the A8 event on the sequence furthest over
 * its token budget, which then holds exactly budget_tokens slots (and a
 * block less). */
static void test_threshold_pool_pressure(kara_model *m) {
    kara_kv_params kv;
    a8_params(&kv, 64, 3, 16);
    kr_kv_tune(&kv)->on_pool_exhausted =
        KARA_POOL_RECOMPRESS_HISTORY; /* forced events take from one sequence for another */
    kara_context *c = kr_test_kv_context(m, &kv, 3, 2, 1024);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->kv.n_blocks, 16);
    int V = kara_model_n_vocab(m);
    int32_t toks[3], pos[3], seq[3];
    int8_t want[3] = {1, 1, 1};
    kr_test_start_seqs(c, 3, 6, 2, 17, 200, toks, pos, seq);
    bool ok = true;
    int32_t most = 0;
    for (int step = 0; step < 200 && ok; step++) {
        uint64_t forced0 = c->policy.stats.forced_events;
        int32_t n_before[3];
        for (int s = 0; s < 3; s++) n_before[s] = c->kv.seqs[s].n;
        kara_batch b = {.n_tokens = 3, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
        ok &= CHECK_MSG(kara_decode(c, &b) == KARA_OK, "step %d: %s", step, kara_last_error());
        int held = 0;
        for (int s = 0; s < 3; s++) {
            const kr_kv_seq *q = &c->kv.seqs[s];
            held += q->n_blocks;
            if (q->n > most) most = q->n;
            /* a forced event trims to the budget before this step's token is
             * appended (65); the threshold's own event runs after it (64) */
            if (q->n < n_before[s])
                ok &= CHECK_MSG(q->n == 65 || q->n == 64, "step %d: sequence %d trimmed to %d slots", step, s, q->n);
            for (int j = 1; j < q->n; j++) ok &= q->pos[j] > q->pos[j - 1];
            toks[s] = kr_test_argmax(kara_get_logits(c, s), V);
            pos[s]++;
        }
        ok &= CHECK(c->policy.stats.forced_events >= forced0);
        ok &= CHECK_EQ_INT(held + c->kv.n_free, c->kv.n_blocks);
        ok &= CHECK(kara_context_kv_bytes(c) <= kv.budget);
    }
    /* the pool ran short first (three sequences of 96 need 18 blocks): events
     * were forced, and nobody ever held more than the threshold */
    CHECK_MSG(most <= 64 + 32, "a sequence held %d slots", most);
    CHECK_MSG(c->policy.stats.forced_events >= 3, "%llu forced events",
              (unsigned long long)c->policy.stats.forced_events);
    kara_context_free(c);
}

static void test_params(kara_model *m) {
    kara_kv_params kv;
    a8_params(&kv, 96, 1, 10);
    kr_kv_tune(&kv)->trigger = (kara_kv_trigger)7;
    CHECK(kr_test_kv_context(m, &kv, 1, 1, 1024) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "kara.trigger: unknown value 7") != NULL, "message: %s", kara_last_error());
    a8_params(&kv, 96, 1, 10);
    kr_kv_tune(&kv)->trigger_slack = -1;
    CHECK(kr_test_kv_context(m, &kv, 1, 1, 1024) == NULL);
    CHECK_MSG(strstr(kara_last_error(), "kara.trigger_slack") != NULL, "message: %s", kara_last_error());

    /* the slack: auto is the interval, snapkv keeps its own, the others fire on the first slot over */
    a8_params(&kv, 96, 1, 10);
    CHECK_EQ_INT(kr_kv_trigger_slack(&kv), 32);
    kr_kv_tune(&kv)->trigger_slack = 5;
    CHECK_EQ_INT(kr_kv_trigger_slack(&kv), 5);
    CHECK(!kr_kv_params_periodic(&kv));
    kr_kv_tune(&kv)->trigger = KARA_KV_TRIGGER_PERIODIC;
    CHECK(kr_kv_params_periodic(&kv));
    CHECK_EQ_INT(kr_kv_trigger_slack(&kv), 1);
    /* rkv has its own slack; lazy grows by its window between evictions */
    kv.method = KARA_KV_METHOD_RKV;
    kr_kv_tune(&kv)->rkv.trigger_slack = 40;
    CHECK_EQ_INT(kr_kv_trigger_slack(&kv), 40);
    CHECK(!kr_kv_params_periodic(&kv));
    kv.method = KARA_KV_METHOD_LAZY;
    kr_kv_tune(&kv)->lazy.window = 24;
    CHECK_EQ_INT(kr_kv_trigger_slack(&kv), 24);
    CHECK(!kr_kv_params_periodic(&kv));

    /* only kara reads the trigger: chunkkv stays a periodic window method */
    a8_params(&kv, 96, 1, 10);
    kv.method = KARA_KV_METHOD_CHUNKKV;
    kr_kv_tune(&kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kv.budget = 0;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, 1024);
    if (CHECK(c != NULL)) {
        CHECK(c->policy.window_method);
        kara_context_free(c);
    }
}

int main(void) {
    kara_model *m = tiny_model();
    if (!CHECK(m != NULL)) return kr_test_finish();
    test_threshold_one_sequence(m);
    test_threshold_auto_and_slack(m);
    test_threshold_shared_pool(m);
    test_threshold_pool_pressure(m);
    test_params(m);
    kara_model_free(m);
    return kr_test_finish();
}
