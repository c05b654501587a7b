/* kv_compact.c - the in-place compaction plan and the invariants of
 * docs/KARA_METHOD.md section 8; see kv_compact.h. */
#include "kv_compact.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "status.h"

kara_status kr_kv_compact_plan_make(kr_kv_compact_plan *plan, int32_t frontier, int32_t n, int32_t n_buf,
                                    const int32_t *keep, int32_t k, kr_kv_move *moves) {
    if (!plan) return kr_set_error(KARA_ERR_ARG, "compact: NULL plan");
    if (frontier < 0 || n_buf < 0 || frontier + n_buf > n)
        return kr_set_error(KARA_ERR_ARG, "compact: frontier %d, buffer %d, n %d", frontier, n_buf, n);
    const int32_t n_c = n - frontier - n_buf;
    if (k < 0 || k > n_c || (k > 0 && !keep) || (k + n_buf > 0 && !moves))
        return kr_set_error(KARA_ERR_ARG, "compact: keep %d of %d compressible slots", k, n_c);
    for (int32_t t = 0; t < k; t++) {
        if (keep[t] < 0 || keep[t] >= n_c || (t > 0 && keep[t] <= keep[t - 1]))
            return kr_set_error(KARA_ERR_ARG, "compact: keep[%d] = %d is not strictly increasing within [0, %d)", t,
                                keep[t], n_c);
    }
    int32_t c = 0;
    for (int32_t t = 0; t < k; t++) {
        int32_t src = frontier + keep[t], dst = frontier + t;
        if (src != dst) moves[c++] = (kr_kv_move){src, dst};
    }
    for (int32_t u = 0; u < n_buf; u++) {
        int32_t src = n - n_buf + u, dst = frontier + k + u;
        if (src != dst) moves[c++] = (kr_kv_move){src, dst};
    }
    plan->frontier = frontier;
    plan->n = n;
    plan->new_frontier = frontier + k;
    plan->new_n = frontier + k + n_buf;
    plan->n_moves = c;
    plan->moves = moves;
    return KARA_OK;
}

void kr_kv_compact_apply(const kr_kv_compact_plan *plan, kr_kv_move_fn fn, void *user) {
    for (int32_t t = 0; t < plan->n_moves; t++) fn(user, plan->moves[t].src, plan->moves[t].dst);
}

void kr_kv_compact_apply_array(const kr_kv_compact_plan *plan, void *base, size_t elem_bytes) {
    uint8_t *b = (uint8_t *)base;
    for (int32_t t = 0; t < plan->n_moves; t++)
        memcpy(b + (size_t)plan->moves[t].dst * elem_bytes, b + (size_t)plan->moves[t].src * elem_bytes, elem_bytes);
}

void kr_kv_compact_store_scores(const kr_kv_compact_plan *plan, const int32_t *keep, const float *s, float *store) {
    int32_t k = plan->new_frontier - plan->frontier;
    for (int32_t t = 0; t < k; t++) store[plan->frontier + t] = s[keep[t]];
}

int32_t kr_kv_ring_first_after(int32_t first, int32_t cap, int32_t n_c) {
    if (cap <= 0) return 0;
    int64_t f = ((int64_t)first + n_c) % cap;
    return (int32_t)(f < 0 ? f + cap : f);
}

static kara_status violation(char *msg, size_t size, const char *fmt, ...) KR_PRINTF(3, 4);
static kara_status violation(char *msg, size_t size, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (msg && size) snprintf(msg, size, "%s", buf);
    return kr_set_error(KARA_ERR_INTERNAL, "%s", buf);
}

kara_status kr_kv_check_invariants(const kr_kv_invariants *inv, char *msg, size_t msg_size) {
    if (msg && msg_size) msg[0] = 0;
    if (!inv || inv->n < 0 || (inv->n > 0 && !inv->pos) || inv->n_prompt < 0)
        return violation(msg, msg_size, "kv invariants: bad arguments");
    if (inv->n_prompt > inv->n)
        return violation(msg, msg_size, "kv invariants: prompt of %d slots but only %d in use", inv->n_prompt, inv->n);
    for (int32_t s = 0; s < inv->n_prompt; s++)
        if (inv->pos[s] != s)
            return violation(msg, msg_size, "kv invariants: prompt slot %d holds position %d", s, inv->pos[s]);
    for (int32_t s = 1; s < inv->n; s++)
        if (inv->pos[s] <= inv->pos[s - 1])
            return violation(msg, msg_size, "kv invariants: pos not strictly increasing at slot %d (%d after %d)", s,
                             inv->pos[s], inv->pos[s - 1]);
    if (inv->frontier >= 0 && (inv->frontier < inv->n_prompt || inv->frontier > inv->n))
        return violation(msg, msg_size, "kv invariants: frontier %d outside [%d, %d]", inv->frontier, inv->n_prompt,
                         inv->n);
    if (inv->prompt_ref && inv->prompt_now && memcmp(inv->prompt_ref, inv->prompt_now, inv->prompt_bytes) != 0) {
        const uint8_t *a = inv->prompt_ref, *b = inv->prompt_now;
        size_t at = 0;
        while (a[at] == b[at]) at++;
        return violation(msg, msg_size, "kv invariants: prompt bytes changed at offset %zu of %zu", at,
                         inv->prompt_bytes);
    }
    if (inv->block_size > 0) {
        int32_t need = (inv->n + inv->block_size - 1) / inv->block_size;
        if (inv->blocks_held != need)
            return violation(msg, msg_size, "kv invariants: %d blocks held for %d slots (block size %d needs %d)",
                             inv->blocks_held, inv->n, inv->block_size, need);
    }
    if (inv->pool_total >= 0 && inv->pool_free + inv->pool_used != inv->pool_total)
        return violation(msg, msg_size, "kv invariants: free %d + used %d blocks != pool %d", inv->pool_free,
                         inv->pool_used, inv->pool_total);
    return KARA_OK;
}
