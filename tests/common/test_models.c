#include "test_models.h"

#include <stdio.h>

#include "synth_model.h"
#include "test_util.h"

kara_model *kara_test_synth_model(const char *preset, const char *arch, uint64_t seed, int32_t n_ctx,
                                  const char *file) {
    kara_synth_params sp;
    kara_synth_params_init(&sp);
    kara_synth_preset(&sp, preset);
    snprintf(sp.arch, sizeof sp.arch, "%s", arch);
    sp.seed = seed;
    sp.n_ctx = n_ctx;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", kara_test_tmpdir(), file);
    if (kara_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "synth: %s\n", err);
        return NULL;
    }
    kara_model *m = NULL;
    if (kara_model_load(path, NULL, &m) != KARA_OK) fprintf(stderr, "load: %s\n", kara_last_error());
    return m;
}

kara_context *kara_test_kv_context(kara_model *m, const kara_kv_params *kv, int n_seq, int threads, int n_ctx) {
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

int kara_test_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
