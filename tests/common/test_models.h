/*
 * test_models.h - models and contexts the runtime tests build for
 * themselves (a synthetic model written to the test's temporary folder, a
 * context with given KV parameters). Separate from test_util.h, which the
 * kernels-only (NEON cross) build compiles without the runtime.
 */
#ifndef KR_TEST_MODELS_H
#define KR_TEST_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"

/* A context for KV-policy tests: n_seq sequences of n_ctx slots with the
 * given KV parameters; NULL, with the reason on stderr, on failure. */
kara_context *kr_test_kv_context(kara_model *m, const kara_kv_params *kv, int n_seq, int threads, int n_ctx);
/* The small windows of the KV tests: the spec's lengths over 4, so that a
 * few hundred steps see many events (interval 32, buffer 8,
 * min_compressible 16, max_defer 8). Every other field is left as it is. */
void kr_test_small_windows(kara_kv_params *kv);
/* Index of the largest of x[0..n) (the first on ties): greedy decoding. */
int kr_test_argmax(const float *x, int n);
/* Bytes of K and V of every layer for n_slots slots, and a copy of them
 * for slots [0, n_slots) of seq packed into out (layer by layer, K then V
 * per slot): to check that compression never touches the prompt. */
size_t kr_test_kv_prefix_bytes(const kara_context *c, int n_slots);
void kr_test_kv_copy_prefix(const kara_context *c, int seq, int n_slots, uint8_t *out);
/* Admit and prefill sequences 0..n_seq-1 of c, one at a time: sequence s
 * gets a prompt of len0 + len_step * s tokens ((s * mul + 7 j) mod vocab,
 * at most 16) and room for n_predict more; toks/pos/seq receive each
 * sequence's greedy next token, next position and id, ready for a decode
 * batch of all of them. */
/* The invariants of docs/KARA_METHOD.md section 8 for sequence seq of c:
 * positions pos (NULL: the sequence's first row) strictly increasing with
 * [0, protect) untouched (its K and V bytes equal prompt_ref when given,
 * as kr_test_kv_copy_prefix packed them), frontier in [protect, n] (-1
 * skips), blocks held = ceil(n / B), free + used = the pool. KARA_OK, or
 * KARA_ERR_INTERNAL with the first violation in msg. */
kara_status kr_test_kv_invariants(const kara_context *c, int seq, const int32_t *pos, int protect, int frontier,
                                  const uint8_t *prompt_ref, char *msg, size_t msg_size);
void kr_test_start_seqs(kara_context *c, int n_seq, int len0, int len_step, int mul, int32_t n_predict, int32_t *toks,
                        int32_t *pos, int32_t *seq);
/* Empty this thread's kara_last_error(), so that a test can tell a call
 * set the message it then reads. */
void kr_test_clear_error(void);
kara_model *kr_test_synth_model(const char *preset, const char *arch, uint64_t seed, int32_t n_ctx, const char *file);

#endif
