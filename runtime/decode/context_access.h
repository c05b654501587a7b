/* What the batch engine asks of a context. The engine includes only this header, so it never sees the
 * context's fields (or the model's): the plan, the sequence count and block counts are all it reads. */
#ifndef KR_CONTEXT_ACCESS_H
#define KR_CONTEXT_ACCESS_H

#include <stdint.h>

#include "kara.h"
#include "kv_plan.h"

const kr_kv_plan *kr_context_kv_plan(const kara_context *c);
int32_t kr_context_n_seq_max(const kara_context *c);
int32_t kr_context_blocks_free(const kara_context *c);
int32_t kr_context_seq_blocks(const kara_context *c, int32_t seq); /* blocks seq holds */

#endif /* KR_CONTEXT_ACCESS_H */
