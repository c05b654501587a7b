/* batch_fit.h - the note `kara batch` prints when the KV budget cuts
 * max_concurrency, worded from what the budget really holds. */
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

#endif
