/* batch_fit.c - the max_concurrency note (batch_fit.h). */
#include "batch_fit.h"

#include <stdio.h>
#include <stdlib.h>

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

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void kr_batch_typical(const int64_t *p_len, const int64_t *g_len, int n, int32_t n_ctx, int32_t default_predict,
                      int32_t *n_prompt, int32_t *n_predict) {
    int64_t tot[64], sorted[64], sum_p = 0, sum_g = 0;
    int used = 0, outliers = 0, biggest = -1;
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) {
        int64_t g = g_len[i] < 0 && n_ctx > 0 ? n_ctx - p_len[i] : g_len[i] < 0 ? 0 : g_len[i];
        tot[i] = sorted[i] = p_len[i] + g;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    int64_t cap = n ? 4 * sorted[n / 2] : 0;
    for (int i = 0; i < n; i++) {
        if (tot[i] > cap && tot[i] > 64) {
            if (biggest < 0 || tot[i] > tot[biggest]) biggest = i;
            outliers++;
            continue;
        }
        sum_p += p_len[i];
        sum_g += g_len[i];
        used++;
    }
    if (outliers)
        fprintf(stderr,
                "kara batch: sizing for the typical request: %d much larger request%s (up to %lld prompt + generated "
                "tokens, over 4 x the median %lld) left out; %s alone if the KV budget holds %s, else fail%s\n",
                outliers, outliers == 1 ? "" : "s", (long long)tot[biggest], (long long)(cap / 4),
                outliers == 1 ? "it runs" : "they run", outliers == 1 ? "it" : "them", outliers == 1 ? "s" : "");
    *n_prompt = used ? (int32_t)(sum_p / used) : 1;
    *n_predict = used ? (int32_t)(sum_g / used) : default_predict;
    if (*n_predict < -1) *n_predict = -1;
}
