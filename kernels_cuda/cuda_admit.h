/*
 * cuda_admit.h - what a context asks of the CUDA backend, worked out on the
 * host before any device call (plain C: tested on the CPU in every build,
 * tests/unit/test_cuda_plan.c and test_kv_mirror.c):
 *   - the memory plan's inputs for the context (cuda_plan.h), the KV
 *     policy's ring, scorer buffers and compaction moves included;
 *   - the shapes the kernels cannot take, refused at attach with the
 *     tensor or setting named, never at the first decode.
 */
#ifndef KR_CUDA_ADMIT_H
#define KR_CUDA_ADMIT_H

#include "context.h"
#include "cuda_plan.h"

/* Every field of *in that the context decides (everything but the weight
 * and vector bytes, which the caller adds up as it lists the tensors). */
void kr_cuda_plan_in_ctx(const kara_context *c, kr_cuda_plan_in *in);

/* Whether the device scores Kara's windows for this policy (else the
 * policy never scores: streaming, recent, random, full). */
bool kr_cuda_scores_on_device(const kr_kv_policy *pol);

/* KARA_OK, or KARA_ERR_UNSUPPORTED with a message naming the first tensor
 * or shape the kernels do not take (a quantised row width that is not
 * whole blocks, a head wider than the attention kernel's, a q8_0 / q4_0
 * cache or query ring with heads not whole 32-value blocks, the scorer's
 * limits) and pointing at runtime.device cpu. */
kara_status kr_cuda_check_shapes(const kara_context *c);

#endif /* KR_CUDA_ADMIT_H */
