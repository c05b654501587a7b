/* test_kv_mirror.c - the hooks through which a device that holds the KV
 * pool follows the KV policy (kv_cache.h kr_kv_mirror, kv_policy.h
 * dev_score; the CUDA backend's are kernels_cuda/cuda_backend_kv.c), on
 * the CPU, with a mock device:
 *   - move_rows replaces the host's compaction copies: the mock runs the
 *     moves as kr_cuda_kv_move does (layer-0 K row offsets, then per layer
 *     and K/V plane, in order) on the host pool, so a wrong layer range,
 *     order or offset changes the text;
 *   - dev_score is called for every span the policy scores, with the span
 *     the host scorer would score (the mock scores it with the host scorer);
 *   - pull_rows brings the retention prior's layer of a window to the host
 *     before the prior reads it, and sequence state save pulls every row,
 *     load pushes them;
 * and with all of that in place the shipped reasoning model, with Kara and
 * its prior evicting under a 96-slot share, gives the plain CPU context's
 * logits bit for bit over 300 greedy steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_policy_impl.h"
#include "test_models.h"
#include "test_util.h"

typedef struct mock {
    kara_context *c;
    int moves, scores, pulls, pushes, prior_pulls;
    int64_t rows_pulled, rows_pushed;
} mock;

static kara_status mock_move_rows(void *user, int32_t seq, int32_t l0, int32_t l1, const kr_kv_move *mv,
                                  int32_t n_moves) {
    mock *m = user;
    kr_kv_cache *kv = &m->c->kv;
    const size_t run = (size_t)kv->block_size * kv->slot_bytes, layer_bytes = 2 * run;
    for (int32_t l = l0; l < l1; l++)
        for (int v = 0; v < 2; v++)
            for (int32_t i = 0; i < n_moves; i++) { /* the device kernel's order: per plane, moves in order */
                const size_t src = (size_t)((uint8_t *)kr_kv_k(kv, 0, seq, mv[i].src) - kv->pool);
                const size_t dst = (size_t)((uint8_t *)kr_kv_k(kv, 0, seq, mv[i].dst) - kv->pool);
                const size_t o = (size_t)l * layer_bytes + (size_t)v * run;
                memcpy(kv->pool + dst + o, kv->pool + src + o, kv->slot_bytes);
            }
    m->moves++;
    return KARA_OK;
}

static kara_status mock_pull(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    mock *m = user;
    const kr_kv_policy *pol = &m->c->policy;
    CHECK(seq >= 0 && first >= 0 && first + n <= m->c->kv.seqs[seq].n && l0 < l1 && l1 <= m->c->kv.n_layer);
    if (pol->use_prior && l0 == pol->prior.layer && l1 == l0 + 1) m->prior_pulls++;
    m->pulls++;
    m->rows_pulled += (int64_t)n * (l1 - l0);
    return KARA_OK;
}

static kara_status mock_push(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    mock *m = user;
    (void)seq;
    (void)first;
    m->pushes++;
    m->rows_pushed += (int64_t)n * (l1 - l0);
    return KARA_OK;
}

/* The host scorer on the span it was given (the hook is off while it runs). */
static kara_status mock_score(void *user, const kr_kv_span *sp, float *out) {
    mock *m = user;
    kr_kv_policy *pol = &m->c->policy;
    CHECK(out == pol->scores);
    pol->dev_score = NULL;
    kara_status st = kr_kvp_score_span(pol, sp->seq, sp->first, sp->n_w, sp->n_buf, sp->n_q, sp->q_first_pos, sp->mode,
                                       sp->exclude_self, sp->l_begin, sp->l_end);
    pol->dev_score = mock_score;
    m->scores++;
    return st;
}

static kara_context *make(kara_model *model) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_KARA;
    kr_test_small_windows(&cp.kv);
    cp.kv.seq_tokens = 96;
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(model, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

int main(void) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    kara_model *model = NULL;
    const char *path = KARA_SOURCE_DIR "/tools/train/model/kara-reasoner-1m.gguf";
    if (!CHECK_MSG(kara_model_load(path, &mp, &model) == KARA_OK, "load %s: %s", path, kara_last_error()))
        return kr_test_finish();
    kara_context *plain = make(model), *dev = make(model);
    if (!plain || !dev) return kr_test_finish();
    mock mk = {.c = dev};
    dev->kv.mirror = (kr_kv_mirror){&mk, NULL, mock_move_rows, mock_pull, mock_push};
    dev->policy.dev_score = mock_score;
    dev->policy.dev_user = &mk;
    CHECK(dev->policy.use_prior); /* the shipped model's prior is on by default */

    int32_t prompt[64], n_prompt = 0;
    CHECK(kara_tokenize(model, "Compute #1 37*46 + #2 59*21.", -1, prompt, 64, true, false, &n_prompt) == KARA_OK);
    const int32_t n_vocab = kara_model_n_vocab(model);
    int32_t tok[2] = {0, 0};
    int32_t step, same = 1;
    for (step = 0; step < 300 && same; step++) {
        kara_context *cs[2] = {plain, dev};
        const float *lg[2];
        for (int i = 0; i < 2; i++) {
            kara_batch b = step ? kara_batch_one_sequence(&tok[i], 1, n_prompt + step - 1, 0)
                                : kara_batch_one_sequence(prompt, n_prompt, 0, 0);
            if (!CHECK_MSG(kara_decode(cs[i], &b) == KARA_OK, "decode step %d: %s", step, kara_last_error()))
                return kr_test_finish();
            lg[i] = kara_get_logits(cs[i], -1);
        }
        same = CHECK_MSG(memcmp(lg[0], lg[1], (size_t)n_vocab * sizeof(float)) == 0,
                         "logits differ at step %d (moves %d, scores %d)", step, mk.moves, mk.scores);
        tok[0] = tok[1] = kr_test_argmax(lg[0], n_vocab);
    }
    kara_kv_stats st;
    kara_context_kv_stats(dev, &st);
    printf("test_kv_mirror: %d steps, %llu events, %llu slots evicted; %d scores, %d moves, %d prior pulls\n", step,
           (unsigned long long)st.events, (unsigned long long)st.slots_evicted, mk.scores, mk.moves, mk.prior_pulls);
    CHECK_MSG(st.slots_evicted > 0 && mk.moves > 0, "evictions ran through move_rows (%d)", mk.moves);
    CHECK_MSG(mk.scores > 0 && mk.prior_pulls > 0, "spans scored through dev_score (%d) and the prior pulled (%d)",
              mk.scores, mk.prior_pulls);
    CHECK_EQ_INT(mk.pushes, 0);

    /* state save pulls every row of every layer; load pushes them (on a
     * sequence holding its prompt only: a compressed one cannot be saved) */
    CHECK(kara_seq_clear(dev, 0) == KARA_OK);
    kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
    CHECK(kara_decode(dev, &b) == KARA_OK);
    const int32_t n = dev->kv.seqs[0].n, n_past = kara_seq_n_past(dev, 0);
    size_t bytes = kara_seq_state_size(dev, 0), written = 0;
    uint8_t *buf = malloc(bytes);
    const int64_t pulled = mk.rows_pulled;
    CHECK_EQ_INT(n, n_prompt);
    CHECK_MSG(kara_seq_state_save(dev, 0, prompt, n_past, buf, bytes, &written) == KARA_OK, "save: %s",
              kara_last_error());
    CHECK_EQ_INT(mk.rows_pulled - pulled, (int64_t)n * dev->kv.n_layer);
    int32_t n_loaded = 0;
    CHECK(kara_seq_state_load(dev, 0, buf, written, NULL, 0, &n_loaded) == KARA_OK);
    CHECK_EQ_INT(mk.rows_pushed, (int64_t)n * dev->kv.n_layer);
    free(buf);
    kara_context_free(plain);
    kara_context_free(dev);
    kara_model_free(model);
    return kr_test_finish();
}
