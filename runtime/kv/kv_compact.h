/*
 * kv_compact.h - in-place compaction after a selection and its
 * invariants (docs/KARA_METHOD.md section 8), for a generic slot store.
 *
 * Before: slots [0, F) frozen (prompt and earlier events), window [F, n),
 * buffer [n - b, n). After: slot F + t takes F + keep[t] (t < k, keep sorted
 * and relative to F), slot F + k + u takes n - b + u (u < b); F' = F + k,
 * n' = F + k + b. Every destination is at or below its source and moves are
 * ascending, so copying them in order never overwrites a source that a later
 * move still reads. Moves with src == dst are left out.
 *
 * The same plan serves the decode-time baselines: F = 0, b = 0 and keep
 * over the whole cache.
 */
#ifndef KR_KV_COMPACT_H
#define KR_KV_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"

typedef struct kr_kv_move {
    int32_t src, dst; /* absolute slots, dst < src */
} kr_kv_move;

typedef struct kr_kv_compact_plan {
    int32_t frontier, n;         /* before */
    int32_t new_frontier, new_n; /* after */
    int32_t n_moves;
    kr_kv_move *moves; /* caller memory, room for k + b */
} kr_kv_compact_plan;

/* Build the plan into moves (capacity k + n_buf). Fails with KARA_ERR_ARG
 * (and a message) unless 0 <= F, 0 <= n_buf <= n - F, 0 <= k <= n_c and keep
 * is strictly increasing within [0, n_c), n_c = n - F - n_buf. */
kara_status kr_kv_compact_plan_make(kr_kv_compact_plan *plan, int32_t frontier, int32_t n, int32_t n_buf,
                                    const int32_t *keep, int32_t k, kr_kv_move *moves);

/* Run every move in order through fn (e.g. copy K and V of every layer). */
typedef void (*kr_kv_move_fn)(void *user, int32_t src, int32_t dst);
void kr_kv_compact_apply(const kr_kv_compact_plan *plan, kr_kv_move_fn fn, void *user);

/* Apply the moves to a parallel array of elem_bytes per slot (pos[],
 * stored scores, H2O accumulators, per-slot token ids). */
void kr_kv_compact_apply_array(const kr_kv_compact_plan *plan, void *base, size_t elem_bytes);

/* Stored scores of the new frozen slots (for recompress_history):
 * store[F + t] = s[keep[t]]. */
void kr_kv_compact_store_scores(const kr_kv_compact_plan *plan, const int32_t *keep, const float *s, float *store);

/* The query ring keeps window slot i at ring[(first + i) mod cap]. After the
 * event the buffer's entries are the new window's first slots and the ring
 * entries of C are dropped, so nothing moves: the ring start advances by
 * n_c. Returns the new first (in [0, cap)). */
int32_t kr_kv_ring_first_after(int32_t first, int32_t cap, int32_t n_c);

/* ---- invariants (docs/KARA_METHOD.md section 8) ---- */
typedef struct kr_kv_invariants {
    const int32_t *pos;     /* positions of slots [0, n) */
    int32_t n;              /* slots in use */
    int32_t n_prompt;       /* P: pos[s] == s for s < P */
    int32_t frontier;       /* F (P <= F <= n); -1 skips */
    const void *prompt_now; /* bytes of the prompt region now, and a copy */
    const void *prompt_ref; /* taken before the event; NULL skips */
    size_t prompt_bytes;
    int32_t block_size; /* B; blocks_held == ceil(n / B); <= 0 skips */
    int32_t blocks_held;
    int32_t pool_free, pool_used, pool_total; /* free + used == total; total < 0 skips */
} kr_kv_invariants;

/* Check every invariant that was given. KARA_OK, or KARA_ERR_INTERNAL with
 * the first violation described in msg (and as the thread's last error). */
kara_status kr_kv_check_invariants(const kr_kv_invariants *inv, char *msg, size_t msg_size);

#endif /* KR_KV_COMPACT_H */
