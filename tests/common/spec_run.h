/* spec_run.h - what the speculative-decoding tests share: a one-thread
 * context for a KV method, and one generator start run to its end with the
 * text and counters it left (test_speculative.c, test_spec_draft.c). */
#ifndef KR_TEST_SPEC_RUN_H
#define KR_TEST_SPEC_RUN_H

#include <stddef.h>

#include "kara.h"

typedef struct kr_spec_run_out {
    char text[16384];
    size_t len;
    kara_generator_stats st;
    kara_status status;
    int32_t n_past; /* the sequence's positions after the run */
} kr_spec_run_out;

/* Params of a one-thread context: n_ctx, n_batch, the method and its
 * per-sequence share (0: auto), the budget sized for the context. */
kara_context_params kr_spec_ctx_params(kara_kv_method method, int32_t n_ctx, int32_t n_batch, int32_t seq_tokens);
/* The context (NULL after a failed check that names the error). */
kara_context *kr_spec_context(kara_model *m, const kara_context_params *cp);
/* Generator params of these tests: temperature temp (0: greedy), top-k 3
 * (a random model then still repeats itself), max_tokens, raw text past
 * end-of-generation tokens, the spec mode, drafts of up to 6 tokens. */
void kr_spec_params(kara_generator_params *gp, float temp, int32_t max_tokens, kara_spec_mode spec);
/* One start of a generator with gp over the prompt in sequence 0, run to
 * its end. */
void kr_spec_run(kara_context *ctx, const kara_generator_params *gp, const int32_t *prompt, int32_t n,
                 kr_spec_run_out *o);

#endif
