/* kv_exact.c - see kv_exact.h. */
#include "kv_exact.h"

#include <stdio.h>
#include <string.h>

void kr_format_count(long long n, char *buf, size_t size) {
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", n < 0 ? -n : n);
    size_t nd = strlen(digits), w = 0;
    char out[48];
    if (n < 0) out[w++] = '-';
    for (size_t i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0) out[w++] = ',';
        out[w++] = digits[i];
    }
    out[w] = '\0';
    snprintf(buf, size, "%s", out);
}

void kr_format_bytes(double bytes, char *buf, size_t size) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0 || bytes == (double)(long long)bytes)
        snprintf(buf, size, "%.0f %s", bytes, units[u]);
    else
        snprintf(buf, size, "%.1f %s", bytes, units[u]);
}

bool kr_kv_exact_text(const kara_context *ctx, const kara_kv_params *kv, char *buf, size_t size) {
    if (size) buf[0] = '\0';
    kara_kv_stats ks;
    kara_context_kv_stats(ctx, &ks);
    int32_t n_ctx = kara_context_n_ctx(ctx);
    if (kv->method == KARA_KV_METHOD_FULL || ks.seq_tokens <= 0 || ks.seq_tokens >= n_ctx) return false;
    char budget[32], held[32], total[32];
    if (kv->budget)
        kr_format_bytes((double)kv->budget, budget, sizeof budget);
    else
        snprintf(budget, sizeof budget, "auto");
    kr_format_count(ks.seq_tokens, held, sizeof held);
    kr_format_count(n_ctx, total, sizeof total);
    snprintf(buf, size,
             "the %s KV budget holds %s of the %s context tokens exactly; past that, Kara compresses "
             "(`--kv-budget auto` keeps them all)",
             budget, held, total);
    return true;
}
