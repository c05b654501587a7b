/* batch_fit.h - the note `kara batch` prints when the KV budget cuts
 * max_concurrency, worded from what the budget really holds, and the
 * typical request it sizes sequences for. */
#ifndef KR_BATCH_FIT_H
#define KR_BATCH_FIT_H

#include <stdint.h>

#include "kara.h"

/* The concurrency to run with, given max_concurrency want and fit, the
 * sequences of the typical request (n_prompt + n_predict tokens, -1: to the
 * context's end) the budget of cp holds (kara_engine_fit_concurrency). A note
 * on stderr when it is below want; fit 0 is said as such (one sequence still
 * runs what is smaller, and requests of that size fail). */
int32_t kr_batch_fit_note(int32_t want, int32_t fit, const kara_context_params *cp, int32_t n_prompt,
                          int32_t n_predict);

/* The typical request of a job from the lengths of its first n requests
 * (prompt p_len[i], generation g_len[i], < 0: to the context's end): what
 * kara_engine_fit_concurrency sizes the context for. An outlier (over 4
 * times the median prompt + generation) does not count: one huge request
 * would otherwise size every sequence for itself and cut the whole job's
 * concurrency. The engine still runs it when the pool holds it - alone if
 * need be, as admission waits for room - or refuses it with an error line.
 * Outliers are noted on stderr. */
void kr_batch_typical(const int64_t *p_len, const int64_t *g_len, int n, int32_t n_ctx, int32_t default_predict,
                      int32_t *n_prompt, int32_t *n_predict);

#endif
