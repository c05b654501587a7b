/* test_cuda_graphs.c - the decode step as a CUDA graph (KARA_CUDA_GRAPHS=1,
 * kernels_cuda/cuda_graph.c) against the same context launching each
 * kernel (KARA_CUDA_GRAPHS=0), on a GPU. Exits 77 (skip) when no CUDA
 * device answers. For the full cache and for Kara compressing (its window
 * scoring and moves run in the middle of a pass, so the recorded launches
 * must be flushed before them), two device contexts of the shipped
 * reasoning model are fed the same tokens in lockstep:
 *   - a 500-token prompt (Kara: 20; a prefill, launched directly), then 160 steps of
 *     one entry, with every fifth step a batch of two entries (a second
 *     sequence), so the batch shape changes and the graph is re-captured;
 *     the full cache passes 512 slots, where split-K's split count grows;
 *   - every step's logits are equal bit for bit (the same kernels in the
 *     same order on the same data);
 *   - the graphed context replayed its graph on most steps and captured
 *     again when the shape changed (its counters), and the other never
 *     captured.
 * A mismatch prints the step and the test exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"

#include "context.h"
#include "cuda_backend_state.h"
#include "kara.h"
#include "test_util.h"

static kara_context *make(kara_model *m, kara_kv_method method, bool graphs) {
    setenv("KARA_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 800;
    cp.n_seq_max = 2;
    cp.n_threads = 1;
    cp.device = KARA_DEVICE_CUDA;
    cp.kv.method = method;
    kara_status st = KARA_OK;
    if (method == KARA_KV_METHOD_KARA) { /* windows of 32 after a buffer of 16, a share of 160 slots */
        cp.kv.seq_tokens = 160;
        cp.kv.interval = 32;
        st = kara_kv_params_set(&cp.kv, "kara.buffer", "16");
    }
    kara_context *c = NULL;
    if (st || kara_context_create(m, &cp, &c) != KARA_OK) {
        fprintf(stderr, "test_cuda_graphs: %s context: %s\n", kara_kv_method_name(method), kara_last_error());
        exit(1);
    }
    unsetenv("KARA_CUDA_GRAPHS");
    return c;
}

static void decode(kara_context *c, const kara_batch *b, const char *what) {
    if (kara_decode(c, b) != KARA_OK) {
        fprintf(stderr, "test_cuda_graphs: %s: %s\n", what, kara_last_error());
        exit(1);
    }
}

static int32_t argmax(const float *lg, int32_t n) {
    int32_t best = 0;
    for (int32_t v = 1; v < n; v++)
        if (lg[v] > lg[best]) best = v;
    return best;
}

static void run(kara_model *m, kara_kv_method method) {
    kara_context *c[2] = {make(m, method, false), make(m, method, true)};
    /* Kara keeps a prompt whole: short ones leave its share of 160 slots
     * room to evict in the steps */
    const bool kara = method == KARA_KV_METHOD_KARA;
    const int32_t n_vocab = kara_model_n_vocab(m), n_prompt = kara ? 20 : 500, n_prompt2 = kara ? 10 : 40,
                  n_steps = 160;
    int32_t *prompt = malloc(sizeof(int32_t) * n_prompt);
    srand(7);
    for (int32_t i = 0; i < n_prompt; i++) prompt[i] = 3 + rand() % (n_vocab - 3);
    for (int k = 0; k < 2; k++) {
        kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
        decode(c[k], &b, "the prompt");
        b = kara_batch_one_sequence(prompt, n_prompt2, 0, 1);
        decode(c[k], &b, "the second sequence's prompt");
    }
    int32_t tok[2] = {prompt[n_prompt - 1], prompt[n_prompt2 - 1]}, pos[2] = {n_prompt, n_prompt2}, seq[2] = {0, 1};
    int8_t want[2] = {1, 1};
    int32_t bad_step = -1;
    for (int32_t t = 0; t < n_steps; t++) {
        const int32_t n = t % 5 == 4 ? 2 : 1;
        kara_batch b = {.n_tokens = n, .tokens = tok, .pos = pos, .seq_id = seq, .logits = want};
        for (int k = 0; k < 2; k++) decode(c[k], &b, "a step");
        for (int32_t e = 0; e < n; e++) {
            const float *a = kara_get_logits(c[0], e), *g = kara_get_logits(c[1], e);
            if (bad_step < 0 && memcmp(a, g, sizeof(float) * (size_t)n_vocab) != 0) bad_step = t;
            tok[e] = argmax(a, n_vocab); /* both contexts are fed the plain one's token */
            pos[e]++;
        }
    }
    const cuda_state *s0 = c[0]->backend_state, *s1 = c[1]->backend_state;
    const char *name = kara_kv_method_name(method);
    CHECK_MSG(bad_step < 0,
              "%s: the graphed context's logits equal the plain one's bit for bit (first difference at "
              "step %d)",
              name, bad_step);
    printf("test_cuda_graphs: %s: %d steps, graph captured %lld times, replayed %lld times\n", name, n_steps,
           (long long)s1->n_captures, (long long)s1->n_replays);
    CHECK_MSG(s0->n_captures == 0 && s0->n_replays == 0, "%s: no graph without KARA_CUDA_GRAPHS=1", name);
    CHECK_MSG(s1->n_captures >= 2 && s1->n_replays >= n_steps / 2,
              "%s: captured for each shape (at least 2) and replayed on most steps", name);
    if (kara) {
        kara_kv_stats st;
        kara_context_kv_stats(c[1], &st);
        CHECK_MSG(st.events > 0 && st.slots_evicted > 0, "kara: window events ran on the graphed context");
    }
    free(prompt);
    kara_context_free(c[0]);
    kara_context_free(c[1]);
}

int main(void) {
    skip_without_gpu("test_cuda_graphs");
    const char *src = kr_test_source_dir();
    if (!src) {
        fprintf(stderr, "test_cuda_graphs: the source tree was not found above the binary; set KARA_SOURCE_DIR\n");
        return 1;
    }
    const char *path = kr_test_path(src, "tools/train/model/kara-reasoner-1m.gguf");
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.no_repack = true;
    kara_model *m = NULL;
    if (kara_model_load(path, &mp, &m) != KARA_OK) {
        fprintf(stderr, "test_cuda_graphs: cannot load %s: %s\n", path, kara_last_error());
        return 1;
    }
    run(m, KARA_KV_METHOD_FULL);
    run(m, KARA_KV_METHOD_KARA);
    kara_model_free(m);
    return kr_test_finish();
}
