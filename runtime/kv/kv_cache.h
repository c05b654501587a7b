/*
 * kv_cache.h - the paged KV cache (docs/KARA_METHOD.md section 2).
 *
 * One pool of fixed-size blocks is sized once from the byte budget. A block
 * holds K and V of every layer for block_size slots; each sequence has a
 * block table (slot s -> table[s / B], offset s % B) and the original
 * position of every slot. Attention reads through kr_kv_k / kr_kv_v, so
 * compaction and eviction change the storage without touching the forward
 * pass. Keys are stored after RoPE at their original positions.
 */
#ifndef KR_KV_CACHE_H
#define KR_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_compact.h"

typedef struct kr_kv_seq {
    bool active;
    int32_t n;        /* slots in use */
    int32_t next_pos; /* position the next token takes (tokens ever fed) */
    int32_t n_blocks; /* entries of table in use */
    int32_t *table;   /* block ids, capacity max_blocks_per_seq */
    int32_t *pos;     /* original position of each slot: n_groups rows of max_slots */
} kr_kv_seq;

/* A device that keeps its own copy of the pool (runtime/decode/backend.h)
 * follows the host's changes through these hooks; user is the device's.
 * With move_rows set, compaction moves rows on the device only and the
 * host's pool is no longer current: code that reads rows on the host pulls
 * them first and pushes what it writes (kr_kv_pull_rows, kr_kv_push_rows). */
typedef struct kr_kv_mirror {
    void *user;
    /* a block copy the cache made (a shared block about to be written) */
    void (*block_copy)(void *user, int32_t dst_block, int32_t src_block);
    /* a compaction's slot moves of seq in layers [l0, l1), to run in order */
    kara_status (*move_rows)(void *user, int32_t seq, int32_t l0, int32_t l1, const kr_kv_move *moves, int32_t n_moves);
    kara_status (*pull_rows)(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n);
    kara_status (*push_rows)(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n);
} kr_kv_mirror;

typedef struct kr_kv_cache {
    int32_t n_layer, n_head_kv, head_dim, block_size;
    kara_kv_dtype dtype;
    size_t elem_size;       /* bytes per value; 0 for q8_0/q4_0 (blocks of 32 values, kv_quant.h) */
    size_t slot_bytes;      /* one slot of K (or V) in one layer: a row of n_head_kv * head_dim values */
    size_t bytes_per_block; /* n_layer * 2 * block_size * slot_bytes */
    int32_t n_blocks;       /* blocks in the pool */
    int32_t n_free;
    int32_t *free_list;
    int32_t *refs; /* per block: the tables holding it (0: free; > 1: shared by kr_kv_share) */
    uint8_t *pool;
    int32_t n_seq_max;
    int32_t max_slots; /* per sequence: the context size */
    int32_t max_blocks_per_seq;
    int32_t n_groups;         /* selection groups: 1, or one per scored layer (per_layer) */
    int32_t layers_per_group; /* layer l belongs to group l / layers_per_group */
    kr_kv_seq *seqs;
    uint64_t budget; /* bytes the pool may hold */
    uint64_t bytes_peak;
    kr_kv_mirror mirror; /* a device's copy of the pool (all NULL on the CPU) */
} kr_kv_cache;

/* Copy rows [first, first + n) of seq in layers [l0, l1) from the device's
 * pool into the host's before the host reads them (kv_mirror.pull_rows),
 * or from the host's to the device's after the host wrote them
 * (push_rows); KARA_OK at once when no device holds the pool. */
kara_status kr_kv_pull_rows(kr_kv_cache *kv, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n);
kara_status kr_kv_push_rows(kr_kv_cache *kv, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n);

/* Selection groups (docs/KARA_METHOD.md section 7.3). With
 * kara.selection_scope: per_layer every scored layer and the unscored
 * layers after it (`layers: stride:N`) keep their own slots, so each such
 * group has its own row of positions; the block table and n stay shared
 * because every group keeps the same number of slots at every event.
 * Shared scope is one group of all layers. Only the methods that score a
 * window select per layer (kara, chunkkv); the others ignore the key. */
bool kr_kv_params_per_layer(const kara_kv_params *p);
/* Layers per group (n_layer for shared scope) and the number of groups. */
int32_t kr_kv_layers_per_group(const kara_kv_params *p, int32_t n_layer);
int32_t kr_kv_n_groups(const kara_kv_params *p, int32_t n_layer);

/* The pool of plan->n_blocks blocks (kv_plan.h sizes it from the budget)
 * and the tables of plan->n_seq_max sequences of plan->n_ctx slots. Fails
 * with KARA_ERR_KV_BUDGET when the plan holds no block. */
struct kr_kv_plan;
kara_status kr_kv_init(kr_kv_cache *kv, const struct kr_kv_plan *plan);
void kr_kv_free(kr_kv_cache *kv);

/* Blocks a sequence needs to hold n slots. */
int32_t kr_kv_blocks_for(const kr_kv_cache *kv, int32_t n_slots);
/* Make room for n_new more slots in seq (takes blocks from the pool, and
 * copies a shared last block); fails with KARA_ERR_KV_BUDGET, changing
 * nothing, when the pool is short. */
kara_status kr_kv_reserve(kr_kv_cache *kv, int32_t seq, int32_t n_new);
/* Blocks seq must take from the pool to hold n_after slots: new blocks,
 * and its own copy of a shared, partly filled last block it would write.
 * Negative when n_after needs fewer blocks than it holds (an eviction's
 * gain, which offsets another sequence's need). */
int32_t kr_kv_blocks_to_grow(const kr_kv_cache *kv, int32_t seq, int32_t n_after);
/* Blocks of seq no other sequence holds (what clearing it would free). */
int32_t kr_kv_private_blocks(const kr_kv_cache *kv, int32_t seq);
/* Make dst (empty) a copy of src: its first n_shared_blocks blocks are
 * shared (reference counted), the rest copied. Shared blocks are never
 * written in place: a sequence about to write into one gets its own copy
 * first (kr_kv_reserve for its last block, kr_kv_unshare_from before a
 * compaction). KARA_ERR_KV_BUDGET when the copied blocks do not fit;
 * nothing changes then. */
kara_status kr_kv_share(kr_kv_cache *kv, int32_t src, int32_t dst, int32_t n_shared_blocks);
/* Give seq its own copy of every shared block holding slot first_slot or
 * a later one; KARA_ERR_KV_BUDGET (nothing changed) when the pool is short. */
kara_status kr_kv_unshare_from(kr_kv_cache *kv, int32_t seq, int32_t first_slot);
/* Append a slot at position pos (after kr_kv_reserve; every group's
 * row); returns its index. */
int32_t kr_kv_append(kr_kv_cache *kv, int32_t seq, int32_t pos);
/* Drop slots >= n_keep of seq and release blocks no longer needed (a
 * shared block returns to the pool when its last holder lets go). */
void kr_kv_truncate(kr_kv_cache *kv, int32_t seq, int32_t n_keep);
void kr_kv_seq_clear(kr_kv_cache *kv, int32_t seq);

/* Original positions of seq's slots as layer `layer` holds them (its
 * group's row; shared scope: the one row). */
static inline int32_t *kr_kv_layer_pos(const kr_kv_cache *kv, int32_t seq, int32_t layer) {
    return kv->seqs[seq].pos + (size_t)(layer / kv->layers_per_group) * (size_t)kv->max_slots;
}

/* Bytes of blocks currently in use (and the peak since init). */
uint64_t kr_kv_bytes_used(const kr_kv_cache *kv);

static inline void *kr_kv_k(const kr_kv_cache *kv, int32_t layer, int32_t seq, int32_t slot) {
    const kr_kv_seq *s = &kv->seqs[seq];
    int32_t blk = s->table[slot / kv->block_size], off = slot % kv->block_size;
    return kv->pool + (size_t)blk * kv->bytes_per_block +
        ((size_t)layer * 2 * (size_t)kv->block_size + (size_t)off) * kv->slot_bytes;
}

static inline void *kr_kv_v(const kr_kv_cache *kv, int32_t layer, int32_t seq, int32_t slot) {
    const kr_kv_seq *s = &kv->seqs[seq];
    int32_t blk = s->table[slot / kv->block_size], off = slot % kv->block_size;
    return kv->pool + (size_t)blk * kv->bytes_per_block +
        (((size_t)layer * 2 + 1) * (size_t)kv->block_size + (size_t)off) * kv->slot_bytes;
}

#endif /* KR_KV_CACHE_H */
