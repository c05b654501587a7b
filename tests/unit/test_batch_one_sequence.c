/*
 * test_batch_one_sequence.c - kara_batch_one_sequence and the batch fields
 * it uses (seq_all, pos_first), on a seeded tiny model:
 *   - two batches made before either is decoded keep their own sequences
 *     and positions (the helper once filled shared static arrays, so the
 *     second call rewrote the first batch);
 *   - a batch of 5,000 entries, past the old 4,096-entry limit, goes to the
 *     sequence it names at the positions it names;
 *   - pos_first leaves a gap like explicit positions do, and a position
 *     before the sequence's next is refused;
 *   - logits from the helper's batch equal those of the same entries given
 *     as explicit arrays (bit for bit);
 *   - two threads with two contexts decode at once and get the logits of
 *     one thread alone.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_models.h"
#include "test_util.h"

enum { BIG = 5000, SMALL = 24 };

static kara_context *new_ctx(kara_model *m, int n_seq, int n_ctx, int n_batch) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

static void fill_tokens(int32_t *t, int n, int n_vocab, int salt) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 7 + salt * 13 + 3) % n_vocab);
}

static void check_two_batches_before_decoding(kara_model *m) {
    kara_context *c = new_ctx(m, 2, 64, 64);
    if (!c) return;
    int32_t t[8];
    fill_tokens(t, 8, kara_model_n_vocab(m), 1);
    kara_batch a = kara_batch_one_sequence(t, 3, 0, 0);
    kara_batch b = kara_batch_one_sequence(t + 3, 5, 0, 1);
    CHECK(kara_decode(c, &a) == KARA_OK);
    CHECK(kara_decode(c, &b) == KARA_OK);
    CHECK_EQ_INT(kara_seq_n_past(c, 0), 3);
    CHECK_EQ_INT(kara_seq_n_past(c, 1), 5);
    /* pos_first may leave a gap (as explicit positions may); a position
     * before the sequence's next is refused and changes nothing */
    kara_batch gap = kara_batch_one_sequence(t, 1, 10, 0);
    CHECK(kara_decode(c, &gap) == KARA_OK);
    CHECK_EQ_INT(kara_seq_n_past(c, 0), 11);
    kara_batch back = kara_batch_one_sequence(t, 1, 4, 1);
    CHECK(kara_decode(c, &back) == KARA_ERR_ARG);
    CHECK(strstr(kara_last_error(), "expected 5 or later") != NULL);
    CHECK_EQ_INT(kara_seq_n_past(c, 1), 5);
    kara_context_free(c);
}

static void check_big_batch(kara_model *m) {
    kara_context *c = new_ctx(m, 2, BIG + 8, BIG);
    if (!c) return;
    int32_t *t = malloc(BIG * sizeof *t), *pos = malloc(BIG * sizeof *pos);
    fill_tokens(t, BIG, kara_model_n_vocab(m), 2);
    kara_batch b = kara_batch_one_sequence(t, BIG, 0, 1);
    CHECK_MSG(kara_decode(c, &b) == KARA_OK, "%s", kara_last_error());
    CHECK_EQ_INT(kara_seq_n_past(c, 0), 0);
    CHECK_EQ_INT(kara_seq_n_past(c, 1), BIG);
    CHECK_EQ_INT(kara_seq_positions(c, 1, pos, BIG), BIG);
    int bad = 0;
    for (int i = 0; i < BIG; i++) bad += pos[i] != i;
    CHECK_EQ_INT(bad, 0);
    free(t);
    free(pos);
    kara_context_free(c);
}

/* Logits of SMALL tokens of sequence seq (fed as the helper's batch, or as
 * explicit arrays), then of one more token at position SMALL. */
static void logits_of(kara_model *m, int seq, bool helper, float *out) {
    const int V = kara_model_n_vocab(m);
    kara_context *c = new_ctx(m, 2, 64, 64);
    if (!c) return;
    int32_t t[SMALL + 1], pos[SMALL + 1], sid[SMALL + 1];
    fill_tokens(t, SMALL + 1, V, 3);
    for (int i = 0; i <= SMALL; i++) {
        pos[i] = i;
        sid[i] = seq;
    }
    kara_batch p = helper ? kara_batch_one_sequence(t, SMALL, 0, seq)
                          : (kara_batch){.n_tokens = SMALL, .tokens = t, .pos = pos, .seq_id = sid};
    kara_batch one = helper ? kara_batch_one_sequence(t + SMALL, 1, SMALL, seq)
                            : (kara_batch){.n_tokens = 1, .tokens = t + SMALL, .pos = pos + SMALL, .seq_id = sid};
    CHECK(kara_decode(c, &p) == KARA_OK);
    memcpy(out, kara_get_logits(c, -1), (size_t)V * sizeof(float));
    CHECK(kara_decode(c, &one) == KARA_OK);
    memcpy(out + V, kara_get_logits(c, -1), (size_t)V * sizeof(float));
    kara_context_free(c);
}

typedef struct {
    kara_model *m;
    int seq;
    float *out;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    for (int r = 0; r < 20; r++) logits_of(j->m, j->seq, true, j->out);
    return NULL;
}

static void check_logits_and_threads(kara_model *m) {
    const size_t V = (size_t)kara_model_n_vocab(m);
    float *ref = malloc(2 * V * sizeof(float)), *got = malloc(2 * V * sizeof(float));
    float *th[2] = {malloc(2 * V * sizeof(float)), malloc(2 * V * sizeof(float))};
    logits_of(m, 1, false, ref);
    logits_of(m, 1, true, got);
    CHECK(memcmp(ref, got, 2 * V * sizeof(float)) == 0);
    thread_job jobs[2] = {{m, 0, th[0]}, {m, 1, th[1]}};
    pthread_t tid[2];
    for (int i = 0; i < 2; i++) pthread_create(&tid[i], NULL, thread_main, &jobs[i]);
    for (int i = 0; i < 2; i++) pthread_join(tid[i], NULL);
    /* the sequence id does not change a sequence's own logits */
    CHECK(memcmp(ref, th[0], 2 * V * sizeof(float)) == 0);
    CHECK(memcmp(ref, th[1], 2 * V * sizeof(float)) == 0);
    free(ref);
    free(got);
    free(th[0]);
    free(th[1]);
}

int main(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 11, BIG + 8, "one_sequence.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    check_two_batches_before_decoding(m);
    check_big_batch(m);
    check_logits_and_threads(m);
    kara_model_free(m);
    return kr_test_finish();
}
