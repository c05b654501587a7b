#include "test_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "status.h"
#include "synth_model.h"
#include "test_util.h"
#include "kv_tuning.h"

kara_model *kr_test_synth_model(const char *preset, const char *arch, uint64_t seed, int32_t n_ctx, const char *file) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, preset);
    snprintf(sp.arch, sizeof sp.arch, "%s", arch);
    sp.seed = seed;
    sp.n_ctx = n_ctx;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), file);
    if (kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "synth: %s\n", err);
        return NULL;
    }
    kara_model *m = NULL;
    if (kara_model_load(path, NULL, &m) != KARA_OK) fprintf(stderr, "load: %s\n", kara_last_error());
    return m;
}

void kr_test_small_windows(kara_kv_params *kv) {
    kv->interval = 32;
    kr_kv_tune(kv)->buffer = 8;
    kr_kv_tune(kv)->min_compressible = 16;
    kr_kv_tune(kv)->max_defer = 8;
}

kara_context *kr_test_kv_context(kara_model *m, const kara_kv_params *kv, int n_seq, int threads, int n_ctx) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_seq;
    cp.n_threads = threads;
    cp.kv = *kv;
    kara_context *c = NULL;
    if (kara_context_create(m, &cp, &c) != KARA_OK) fprintf(stderr, "context: %s\n", kara_last_error());
    return c;
}

int kr_test_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

size_t kr_test_kv_prefix_bytes(const kara_context *c, int n_slots) {
    return (size_t)c->kv.n_layer * (size_t)n_slots * 2 * c->kv.slot_bytes;
}

void kr_test_kv_copy_prefix(const kara_context *c, int seq, int n_slots, uint8_t *out) {
    size_t sb = c->kv.slot_bytes;
    for (int l = 0; l < c->kv.n_layer; l++)
        for (int s = 0; s < n_slots; s++) {
            memcpy(out, kr_kv_k(&c->kv, l, seq, s), sb);
            memcpy(out + sb, kr_kv_v(&c->kv, l, seq, s), sb);
            out += 2 * sb;
        }
}

kara_status kr_test_kv_invariants(const kara_context *c, int seq, const int32_t *pos, int protect, int frontier,
                                  const uint8_t *prompt_ref, char *msg, size_t msg_size) {
    const kr_kv_seq *s = &c->kv.seqs[seq];
    size_t bytes = prompt_ref ? kr_test_kv_prefix_bytes(c, protect) : 0;
    uint8_t *now = bytes ? malloc(bytes) : NULL;
    if (now) kr_test_kv_copy_prefix(c, seq, protect, now);
    kr_kv_invariants inv = {pos ? pos : s->pos,
                            s->n,
                            protect,
                            frontier,
                            now,
                            now ? prompt_ref : NULL,
                            bytes,
                            c->kv.block_size,
                            s->n_blocks,
                            c->kv.n_free,
                            c->kv.n_blocks - c->kv.n_free,
                            c->kv.n_blocks};
    kara_status st = kr_kv_check_invariants(&inv, msg, msg_size);
    free(now);
    return st;
}

void kr_test_clear_error(void) { kr_set_error(KARA_OK, "%s", ""); }

void kr_test_start_seqs(kara_context *c, int n_seq, int len0, int len_step, int mul, int32_t n_predict, int32_t *toks,
                        int32_t *pos, int32_t *seq) {
    int V = kara_model_n_vocab(c->model);
    for (int s = 0; s < n_seq; s++) {
        int32_t p[16];
        int n = len0 + len_step * s;
        for (int j = 0; j < n && j < 16; j++) p[j] = (s * mul + j * 7) % V;
        CHECK_EQ_INT(kara_seq_admit(c, s, n, n_predict), KARA_OK);
        kara_batch b = kara_batch_one_sequence(p, n, 0, s);
        CHECK(kara_decode(c, &b) == KARA_OK);
        toks[s] = kr_test_argmax(kara_get_logits(c, -1), V);
        pos[s] = n;
        seq[s] = s;
    }
}
