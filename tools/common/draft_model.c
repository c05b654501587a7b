/* draft_model.c - the draft model of speculative.mode draft (draft_model.h). */
#include "draft_model.h"

#include <stdio.h>
#include <string.h>

#include "cli_config.h"

kara_status kr_draft_model_open(const char *cmd, const kara_config *cfg, const kara_context *target, int32_t n_seq,
                                kr_draft_model *d) {
    memset(d, 0, sizeof *d);
    if (cfg->spec != KARA_SPEC_DRAFT) return KARA_OK;
    if (!cfg->draft_model[0]) {
        fprintf(stderr, "kara %s: speculative.mode draft needs a draft model (-md FILE or speculative.draft_model)\n",
                cmd);
        return KARA_ERR_CONFIG;
    }
    kara_status st = kr_cli_load_model_at(cfg, cfg->draft_model, &d->model);
    if (st) {
        fprintf(stderr, "kara %s: draft model: %s\n", cmd, kara_last_error());
        return st;
    }
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = kara_context_n_ctx(target);
    cp.n_batch = kara_context_n_batch(target);
    cp.n_seq_max = n_seq;
    cp.n_threads = cfg->context.n_threads;
    cp.device = cfg->context.device;
    cp.kv.method = KARA_KV_METHOD_FULL;
    cp.kv.budget = 0;
    st = kara_context_create(d->model, &cp, &d->ctx);
    if (st) {
        fprintf(stderr, "kara %s: draft model: %s\n", cmd, kara_last_error());
        kr_draft_model_close(d);
    }
    return st;
}

void kr_draft_model_close(kr_draft_model *d) {
    kara_context_free(d->ctx);
    kara_model_free(d->model);
    memset(d, 0, sizeof *d);
}
