/* test_kv_online.c - kara.score.mode online (docs/KARA_METHOD.md section 5):
 * Kara's windows scored by the attention the decode's own queries gave
 * each slot, summed as the forward pass computes it, with no query ring
 * and no scorer.
 * - it reserves no ring and less than the bidirectional scorer;
 * - the scores a window gets when it is scored are, bit for bit, H2O's
 *   accumulated attention of those slots at the same step (a second
 *   context running h2o with a budget it never reaches, fed the same
 *   tokens), so they are the forward pass's sums and nothing else;
 * - it evicts under a share and per window like the other modes;
 * - it is refused with the threshold trigger, per-layer selection, read
 *   tracking, and for chunkkv, with a message naming the key;
 * - online_max (section 5.1): beside online's sums of the same run, every
 *   slot's maximum lies in [0, 1] and below its sum, is exactly 0 for the
 *   slots no query has read from min_distance away, and above 0 for the
 *   older ones;
 * - kara.evict_rank global with all scores tied (min_distance past every
 *   read) drops the oldest windows first: each window is whole or empty
 *   but one, and no whole window is older than an emptied one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_modes.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_CTX 512
#define P 6
#define STEPS 200

static const int32_t prompt[P] = {1, 17, 33, 49, 65, 81};

static void online_params(kara_kv_params *kv, kara_kv_evict evict) {
    kara_kv_params_init(kv);
    kv->method = KARA_KV_METHOD_KARA;
    kr_test_small_windows(kv);
    kr_kv_tune(kv)->evict = evict;
    kr_kv_tune(kv)->score_mode = KR_SCORE_ONLINE;
}

static void test_reservation(kara_model *m) {
    kara_kv_params on, bi;
    online_params(&on, KARA_KV_EVICT_ON_DEMAND);
    bi = on;
    kr_kv_tune(&bi)->score_mode = KR_SCORE_BIDIRECTIONAL;
    on.seq_tokens = bi.seq_tokens = 96;
    kara_context *a = kr_test_kv_context(m, &on, 1, 1, N_CTX), *b = kr_test_kv_context(m, &bi, 1, 1, N_CTX);
    if (CHECK(a != NULL && b != NULL)) {
        kara_kv_stats sa, sb;
        kara_context_kv_stats(a, &sa);
        kara_context_kv_stats(b, &sb);
        CHECK_EQ_INT(a->policy.ring_cap, 0);
        CHECK(a->policy.ring == NULL && a->policy.score_scratch == NULL && a->policy.needs_h2o);
        CHECK_MSG(sa.reserved_bytes < sb.reserved_bytes, "online reserves %llu bytes, bidirectional %llu",
                  (unsigned long long)sa.reserved_bytes, (unsigned long long)sb.reserved_bytes);
    }
    kara_context_free(a);
    kara_context_free(b);
}

/* Kara online with a share it never reaches (windows are scored, nothing
 * is evicted) beside h2o with a budget it never reaches: same tokens, same
 * attention; each window's stored scores equal h2o's sums at that step. */
static void test_scores_are_the_sums(kara_model *m) {
    kara_kv_params on, h;
    online_params(&on, KARA_KV_EVICT_ON_DEMAND);
    on.seq_tokens = 256; /* below the context, so windows are scored; above the P + STEPS slots it will hold */
    kara_kv_params_init(&h);
    h.method = KARA_KV_METHOD_H2O;
    kr_kv_tune(&h)->budget_tokens = N_CTX;
    kara_context *a = kr_test_kv_context(m, &on, 1, 1, N_CTX), *b = kr_test_kv_context(m, &h, 1, 1, N_CTX);
    if (!CHECK(a != NULL && b != NULL)) {
        kara_context_free(a);
        kara_context_free(b);
        return;
    }
    int V = kara_model_n_vocab(m), checked = 0;
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(a, &pb) == KARA_OK) && CHECK(kara_decode(b, &pb) == KARA_OK);
    for (int i = 0; i < STEPS && ok; i++) {
        int32_t tok = kr_test_argmax(kara_get_logits(a, -1), V);
        int32_t windows = a->policy.seqs[0].n_win;
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK(kara_decode(a, &one) == KARA_OK) && CHECK(kara_decode(b, &one) == KARA_OK);
        const kr_kv_policy_seq *q = &a->policy.seqs[0];
        if (!ok || q->n_win == windows) continue;
        /* the window just scored: [F - n_c, F) */
        int32_t n_c = q->win_size[q->n_win - 1], F = q->frontier, lo = F - n_c;
        const float *mine = q->scores + lo, *sums = b->policy.seqs[0].h2o_acc + lo;
        ok &= CHECK_MSG(!memcmp(mine, sums, (size_t)n_c * sizeof(float)),
                        "step %d: the window [%d, %d) scored otherwise than h2o summed it", i, lo, F);
        float mx = 0.0f;
        for (int32_t j = 0; j < n_c; j++) mx = mine[j] > mx ? mine[j] : mx;
        ok &= CHECK_MSG(mx > 0.0f, "step %d: the window's scores are all zero", i);
        checked++;
    }
    CHECK_MSG(checked >= 4, "%d windows checked", checked);
    CHECK_EQ_INT((int)a->policy.stats.slots_evicted, 0);
    kara_context_free(a);
    kara_context_free(b);
}

/* Under a share (on demand) and per window it evicts, and the logits stay
 * finite. */
static void test_evicts(kara_model *m, kara_kv_evict evict) {
    kara_kv_params kv;
    online_params(&kv, evict);
    kv.seq_tokens = 96;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    int V = kara_model_n_vocab(m);
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    for (int i = 0; i < STEPS && ok; i++) {
        const float *l = kara_get_logits(c, -1);
        for (int v = 0; v < V && ok; v++) ok &= CHECK_MSG(l[v] == l[v], "step %d: NaN logit", i);
        int32_t tok = kr_test_argmax(l, V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok &= CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        ok &= CHECK_MSG(c->kv.seqs[0].n <= 96, "step %d: %d slots over the share", i, c->kv.seqs[0].n);
    }
    CHECK_MSG(c->policy.stats.slots_evicted > 0, "%s: nothing evicted",
              evict == KARA_KV_EVICT_ON_DEMAND ? "on demand" : "per window");
    kara_context_free(c);
}

/* online and online_max on the same tokens, nothing evicted: the maxima
 * against the sums, slot by slot, after every step. */
static void test_online_max_scores(kara_model *m) {
    kara_kv_params on, mx;
    online_params(&on, KARA_KV_EVICT_ON_DEMAND);
    on.seq_tokens = 256; /* never reached: nothing is evicted, slot i is position i */
    mx = on;
    kr_kv_tune(&mx)->score_mode = KR_SCORE_ONLINE_MAX;
    const int32_t md = kr_kv_tune(&mx)->min_distance;
    kara_context *a = kr_test_kv_context(m, &on, 1, 1, N_CTX), *b = kr_test_kv_context(m, &mx, 1, 1, N_CTX);
    if (!CHECK(a != NULL && b != NULL)) {
        kara_context_free(a);
        kara_context_free(b);
        return;
    }
    CHECK(b->policy.h2o_max && !a->policy.h2o_max);
    int V = kara_model_n_vocab(m);
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(a, &pb) == KARA_OK) && CHECK(kara_decode(b, &pb) == KARA_OK);
    for (int i = 0; i < STEPS && ok; i++) {
        int32_t tok = kr_test_argmax(kara_get_logits(a, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK(kara_decode(a, &one) == KARA_OK) && CHECK(kara_decode(b, &one) == KARA_OK);
        int32_t n = b->kv.seqs[0].n;
        const float *sum = a->policy.seqs[0].h2o_acc, *top = b->policy.seqs[0].h2o_acc;
        for (int32_t j = 0; j < n && ok; j++) {
            /* decode steps read from here on: slot j was read from md away by the queries at P + md + j.. */
            bool read = j + md <= P + i;
            ok &= CHECK_MSG(top[j] >= 0.0f && top[j] <= 1.0f && top[j] <= sum[j] * (1.0f + 1e-6f),
                            "step %d slot %d: max %g, sum %g", i, j, (double)top[j], (double)sum[j]);
            ok &= CHECK_MSG(read ? top[j] > 0.0f : top[j] == 0.0f, "step %d slot %d (of %d): max %g", i, j, n,
                            (double)top[j]);
        }
    }
    kara_context_free(a);
    kara_context_free(b);
}

/* evict_rank global with every score 0 (no read is min_distance away):
 * ties go to the newest windows, so eviction empties the oldest first. */
static void test_global_rank_oldest_first(kara_model *m) {
    kara_kv_params kv;
    online_params(&kv, KARA_KV_EVICT_ON_DEMAND);
    kr_kv_tune(&kv)->score_mode = KR_SCORE_ONLINE_MAX;
    kr_kv_tune(&kv)->min_distance = N_CTX;
    kr_kv_tune(&kv)->evict_rank = KR_EVICT_RANK_GLOBAL;
    kv.seq_tokens = 96;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    int V = kara_model_n_vocab(m), checked = 0;
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    for (int i = 0; i < STEPS && ok; i++) {
        int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        const kr_kv_policy_seq *q = &c->policy.seqs[0];
        if (!ok || c->policy.stats.slots_evicted == 0) continue;
        int32_t held[64] = {0}, partial = 0, newest_empty = -1, oldest_whole = q->n_win;
        if (!CHECK(q->n_win <= 64)) break;
        for (int32_t s = q->n_prompt; s < q->frontier; s++)
            if (q->win[s] >= 0) held[q->win[s]]++;
        for (int32_t w = 0; w < q->n_win; w++) {
            if (held[w] == 0)
                newest_empty = w;
            else if (held[w] == q->win_size[w] && w < oldest_whole)
                oldest_whole = w;
            else if (held[w] != q->win_size[w])
                partial++;
        }
        ok &= CHECK_MSG(partial <= 1 && newest_empty < oldest_whole,
                        "step %d: %d windows partly kept, newest empty %d, oldest whole %d", i, partial, newest_empty,
                        oldest_whole);
        checked++;
    }
    CHECK_MSG(checked > 0, "nothing evicted");
    kara_context_free(c);
}

static void expect_refused(kara_model *m, const kara_kv_params *kv, const char *what, const char *needle) {
    kr_test_clear_error();
    kara_context *c = kr_test_kv_context(m, kv, 1, 1, N_CTX);
    CHECK_MSG(c == NULL && strstr(kara_last_error(), needle), "%s: '%s'", what, kara_last_error());
    kara_context_free(c);
}

static void test_refusals(kara_model *m) {
    kara_kv_params kv;
    online_params(&kv, KARA_KV_EVICT_ON_DEMAND);
    kr_kv_tune(&kv)->trigger = KARA_KV_TRIGGER_THRESHOLD;
    kr_kv_tune(&kv)->budget_tokens = 64;
    expect_refused(m, &kv, "threshold", "kara.score.mode: online");
    online_params(&kv, KARA_KV_EVICT_PER_WINDOW);
    kr_kv_tune(&kv)->per_layer_selection = true;
    expect_refused(m, &kv, "per_layer", "kara.score.mode: online");
    online_params(&kv, KARA_KV_EVICT_ON_DEMAND);
    kr_kv_tune(&kv)->reads_weight = 1.0f;
    expect_refused(m, &kv, "reads_weight", "kara.score.mode: online");
    online_params(&kv, KARA_KV_EVICT_PER_WINDOW);
    kv.method = KARA_KV_METHOD_CHUNKKV;
    expect_refused(m, &kv, "chunkkv", "method kara's only");
}

int main(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 31, N_CTX, "tiny-qwen3-online.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    test_reservation(m);
    test_scores_are_the_sums(m);
    test_evicts(m, KARA_KV_EVICT_ON_DEMAND);
    test_evicts(m, KARA_KV_EVICT_PER_WINDOW);
    test_refusals(m);
    test_online_max_scores(m);
    test_global_rank_oldest_first(m);
    kara_model_free(m);
    return kr_test_finish();
}
