/* draft_model.h - the draft model of speculative.mode draft for the
 * commands that generate (run, chat, eval, batch): loaded from
 * speculative.draft_model with the target's model options, in a context
 * of the target's size and batch and n_seq sequences (batch: one per
 * request running at once) with full KV (kv_cache.budget 0: sized for
 * that context; its bytes come on top of the target's budget). */
#ifndef KR_DRAFT_MODEL_H
#define KR_DRAFT_MODEL_H

#include "kara.h"

typedef struct kr_draft_model {
    kara_model *model;
    kara_context *ctx; /* NULL unless speculative.mode is draft */
} kr_draft_model;

/* Nothing to do (KARA_OK, d->ctx NULL) unless cfg asks for spec draft;
 * then KARA_ERR_CONFIG without a draft model path, or the load's or the
 * context's error, each printed to stderr as "kara CMD: draft model: ...". */
kara_status kr_draft_model_open(const char *cmd, const kara_config *cfg, const kara_context *target, int32_t n_seq,
                                kr_draft_model *d);
void kr_draft_model_close(kr_draft_model *d);

#endif
