/* spec_run.c - the speculative-decoding tests' shared runs (spec_run.h). */
#include "spec_run.h"

#include <string.h>

#include "test_util.h"

kara_context_params kr_spec_ctx_params(kara_kv_method method, int32_t n_ctx, int32_t n_batch, int32_t seq_tokens) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.kv.method = method;
    cp.kv.budget = 0;
    cp.kv.seq_tokens = seq_tokens;
    return cp;
}

kara_context *kr_spec_context(kara_model *m, const kara_context_params *cp) {
    kara_context *ctx = NULL;
    CHECK_MSG(kara_context_create(m, cp, &ctx) == KARA_OK, "context: %s", kara_last_error());
    return ctx;
}

void kr_spec_params(kara_generator_params *gp, float temp, int32_t max_tokens, kara_spec_mode spec) {
    kara_generator_params_init(gp);
    gp->sampling.temperature = temp;
    gp->sampling.top_k = 3;
    gp->max_tokens = max_tokens;
    gp->split_thinking = false;
    gp->ignore_eog = true;
    gp->spec = spec;
    gp->draft_max = 6;
}

void kr_spec_run(kara_context *ctx, const kara_generator_params *gp, const int32_t *prompt, int32_t n,
                 kr_spec_run_out *o) {
    memset(o, 0, sizeof *o);
    kara_generator *g = NULL;
    if (!CHECK_MSG(kara_generator_create(ctx, gp, &g) == KARA_OK, "generator: %s", kara_last_error())) return;
    o->status = kara_generator_start(g, 0, prompt, n);
    kara_piece p;
    while (!o->status && (o->status = kara_generator_next(g, &p)) == KARA_OK) {
        if (o->len + (size_t)p.len < sizeof o->text) memcpy(o->text + o->len, p.text, (size_t)p.len);
        o->len += (size_t)p.len;
    }
    kara_generator_get_stats(g, &o->st);
    o->n_past = kara_seq_n_past(ctx, 0);
    kara_generator_free(g);
}
