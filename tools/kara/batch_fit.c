/* batch_fit.c - the max_concurrency note (batch_fit.h). */
#include "batch_fit.h"

#include <stdio.h>

int32_t kr_batch_fit_note(int32_t want, int32_t fit, const kara_context_params *cp, int32_t n_prompt,
                          int32_t n_predict) {
    if (fit >= want) return want;
    char gen[48];
    if (n_predict < 0)
        snprintf(gen, sizeof gen, "up to the context's end");
    else
        snprintf(gen, sizeof gen, "%d generated tokens", n_predict);
    double mib = (double)cp->kv.budget / 1048576.0;
    const char *method = kara_kv_method_name(cp->kv.method);
    if (fit < 1) {
        fprintf(stderr,
                "kara batch: max_concurrency %d -> 1: the KV budget of %.1f MiB holds no sequence of about %d prompt + "
                "%s under method %s: requests that size fail with kv_budget_exceeded (raise --kv-budget)\n",
                want, mib, n_prompt, gen, method);
        return 1;
    }
    fprintf(
        stderr,
        "kara batch: max_concurrency %d -> %d: the KV budget of %.1f MiB holds %d sequence%s of about %d prompt + %s "
        "under method %s (--no-fit keeps %d)\n",
        want, fit, mib, fit, fit == 1 ? "" : "s", n_prompt, gen, method, want);
    return fit;
}
