/* kv_cache.c - block pool, per-sequence block tables and slot positions. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "kv_method.h"
#include "kv_plan.h"
#include "kv_quant.h"
#include "status.h"
#include "kv_tuning.h"

bool kr_kv_params_per_layer(const kara_kv_params *p) {
    return kr_kv_tune(p)->per_layer_selection && kr_kv_method_of(p)->per_layer;
}

int32_t kr_kv_layers_per_group(const kara_kv_params *p, int32_t n_layer) {
    int32_t stride = kr_kv_layer_stride(kr_kv_tune(p));
    if (!kr_kv_params_per_layer(p) || stride > n_layer) return n_layer > 0 ? n_layer : 1;
    return stride;
}

int32_t kr_kv_n_groups(const kara_kv_params *p, int32_t n_layer) {
    int32_t lpg = kr_kv_layers_per_group(p, n_layer);
    return n_layer > 0 ? (n_layer + lpg - 1) / lpg : 1;
}

kara_status kr_kv_init(kr_kv_cache *kv, const kr_kv_plan *plan) {
    memset(kv, 0, sizeof *kv);
    const kara_kv_params *p = &plan->p;
    const int32_t n_layer = plan->shape.n_layer, n_head_kv = plan->shape.n_head_kv, head_dim = plan->shape.head_dim;
    const int32_t n_seq_max = plan->n_seq_max, max_slots = plan->n_ctx;
    if (p->block_size < 1 || p->block_size > 4096)
        return kr_set_error(KARA_ERR_CONFIG, "kv_cache.block_size %d is out of range (1..4096)", p->block_size);
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->block_size = p->block_size;
    kv->dtype = p->dtype;
    kv->elem_size = kr_kv_dtype_blocked(p->dtype) ? 0 : p->dtype == KARA_KV_F32 ? 4 : 2;
    kv->slot_bytes = kr_kv_row_bytes(p->dtype, (int64_t)n_head_kv * head_dim);
    kv->bytes_per_block = (size_t)n_layer * 2 * (size_t)kv->block_size * kv->slot_bytes;
    kv->n_seq_max = n_seq_max;
    kv->max_slots = max_slots;
    kv->max_blocks_per_seq = (max_slots + kv->block_size - 1) / kv->block_size;
    kv->layers_per_group = kr_kv_layers_per_group(p, n_layer);
    kv->n_groups = kr_kv_n_groups(p, n_layer);

    if (plan->n_blocks < 1)
        return kr_set_error(KARA_ERR_KV_BUDGET, "KV budget of %llu bytes cannot hold one block of %d slots (%zu bytes)",
                            (unsigned long long)p->budget, kv->block_size, kv->bytes_per_block);
    kv->n_blocks = plan->n_blocks;
    kv->budget = (uint64_t)kv->n_blocks * kv->bytes_per_block;

    kv->pool = calloc((size_t)kv->n_blocks, kv->bytes_per_block);
    kv->free_list = malloc((size_t)kv->n_blocks * sizeof(int32_t));
    kv->refs = calloc((size_t)kv->n_blocks, sizeof(int32_t));
    kv->seqs = calloc((size_t)n_seq_max, sizeof(kr_kv_seq));
    if (!kv->pool || !kv->free_list || !kv->refs || !kv->seqs) {
        uint64_t bytes = kv->budget; /* kr_kv_free clears it */
        kr_kv_free(kv);
        return kr_set_error(KARA_ERR_NOMEM,
                            "cannot allocate a KV pool of %llu bytes (%d blocks): lower the context or "
                            "batch.max_concurrency, or set kv_cache.budget",
                            (unsigned long long)bytes, plan->n_blocks);
    }
    /* blocks are handed out lowest id first */
    for (int32_t i = 0; i < kv->n_blocks; i++) kv->free_list[i] = kv->n_blocks - 1 - i;
    kv->n_free = kv->n_blocks;
    for (int32_t s = 0; s < n_seq_max; s++) {
        kv->seqs[s].table = malloc((size_t)kv->max_blocks_per_seq * sizeof(int32_t));
        kv->seqs[s].pos = malloc((size_t)kv->n_groups * (size_t)max_slots * sizeof(int32_t));
        if (!kv->seqs[s].table || !kv->seqs[s].pos) {
            kr_kv_free(kv);
            return kr_set_error(KARA_ERR_NOMEM, "cannot allocate KV block tables");
        }
    }
    return KARA_OK;
}

void kr_kv_free(kr_kv_cache *kv) {
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq_max; s++) {
            free(kv->seqs[s].table);
            free(kv->seqs[s].pos);
        }
    free(kv->seqs);
    free(kv->pool);
    free(kv->free_list);
    free(kv->refs);
    memset(kv, 0, sizeof *kv);
}

int32_t kr_kv_blocks_for(const kr_kv_cache *kv, int32_t n_slots) {
    return (n_slots + kv->block_size - 1) / kv->block_size;
}

uint64_t kr_kv_bytes_used(const kr_kv_cache *kv) { return (uint64_t)(kv->n_blocks - kv->n_free) * kv->bytes_per_block; }

static int32_t take_block(kr_kv_cache *kv) {
    int32_t b = kv->free_list[--kv->n_free];
    kv->refs[b] = 1;
    return b;
}

/* One table lets go of block b; the last one returns it to the pool. */
static void release_block(kr_kv_cache *kv, int32_t b) {
    if (--kv->refs[b] == 0) kv->free_list[kv->n_free++] = b;
}

static void note_peak(kr_kv_cache *kv) {
    uint64_t used = kr_kv_bytes_used(kv);
    if (used > kv->bytes_peak) kv->bytes_peak = used;
}

/* A free block holding a copy of block src (the caller checked that one is free). */
static int32_t take_copy(kr_kv_cache *kv, int32_t src) {
    int32_t b = take_block(kv);
    /* with a device's pool the host's is not current (kv_mirror): copy there only, and leave the host's pages
     * untouched (the pool is calloc'd: pages never written cost address space, not memory) */
    if (!kv->mirror.move_rows)
        memcpy(kv->pool + (size_t)b * kv->bytes_per_block, kv->pool + (size_t)src * kv->bytes_per_block,
               kv->bytes_per_block);
    if (kv->mirror.block_copy) kv->mirror.block_copy(kv->mirror.user, b, src);
    return b;
}

/* Give seq its own copy of the block at table index i. */
static void own_block(kr_kv_cache *kv, kr_kv_seq *s, int32_t i) {
    int32_t old = s->table[i];
    s->table[i] = take_copy(kv, old);
    release_block(kv, old);
}

/* The last block is partly filled and shared: the next slot would be
 * written into another sequence's block. */
static bool tail_shared(const kr_kv_cache *kv, const kr_kv_seq *s) {
    return s->n % kv->block_size != 0 && kv->refs[s->table[s->n / kv->block_size]] > 1;
}

int32_t kr_kv_blocks_to_grow(const kr_kv_cache *kv, int32_t seq, int32_t n_after) {
    const kr_kv_seq *s = &kv->seqs[seq];
    int32_t need = kr_kv_blocks_for(kv, n_after) - s->n_blocks;
    return need + (n_after > s->n && tail_shared(kv, s));
}

int32_t kr_kv_private_blocks(const kr_kv_cache *kv, int32_t seq) {
    const kr_kv_seq *s = &kv->seqs[seq];
    int32_t n = 0;
    for (int32_t i = 0; i < s->n_blocks; i++) n += kv->refs[s->table[i]] == 1;
    return n;
}

kara_status kr_kv_reserve(kr_kv_cache *kv, int32_t seq, int32_t n_new) {
    kr_kv_seq *s = &kv->seqs[seq];
    int32_t n = s->n + n_new;
    if (n > kv->max_slots)
        return kr_set_error(KARA_ERR_CONTEXT_FULL, "sequence %d would hold %d slots, the context holds %d", seq, n,
                            kv->max_slots);
    int32_t need = kr_kv_blocks_to_grow(kv, seq, n);
    if (need <= 0) return KARA_OK;
    if (need > kv->n_free)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "KV budget exhausted: sequence %d needs %d more blocks of %zu bytes, %d free of %d", seq,
                            need, kv->bytes_per_block, kv->n_free, kv->n_blocks);
    if (n_new > 0 && tail_shared(kv, s)) own_block(kv, s, s->n / kv->block_size);
    int32_t grow = kr_kv_blocks_for(kv, n) - s->n_blocks;
    while (grow-- > 0) s->table[s->n_blocks++] = take_block(kv);
    s->active = true;
    note_peak(kv);
    return KARA_OK;
}

kara_status kr_kv_unshare_from(kr_kv_cache *kv, int32_t seq, int32_t first_slot) {
    kr_kv_seq *s = &kv->seqs[seq];
    int32_t first = first_slot / kv->block_size, need = 0;
    for (int32_t i = first; i < s->n_blocks; i++) need += kv->refs[s->table[i]] > 1;
    if (need == 0) return KARA_OK;
    if (need > kv->n_free)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "KV budget exhausted: sequence %d shares %d blocks it must rewrite, %d free of %d", seq,
                            need, kv->n_free, kv->n_blocks);
    for (int32_t i = first; i < s->n_blocks; i++)
        if (kv->refs[s->table[i]] > 1) own_block(kv, s, i);
    note_peak(kv);
    return KARA_OK;
}

kara_status kr_kv_share(kr_kv_cache *kv, int32_t src, int32_t dst, int32_t n_shared_blocks) {
    kr_kv_seq *a = &kv->seqs[src], *d = &kv->seqs[dst];
    if (d->n_blocks || n_shared_blocks < 0 || (int64_t)n_shared_blocks * kv->block_size > a->n)
        return kr_set_error(KARA_ERR_INTERNAL, "kv share: %d blocks of sequence %d (%d slots) into %d (%d blocks)",
                            n_shared_blocks, src, a->n, dst, d->n_blocks);
    int32_t need = a->n_blocks - n_shared_blocks;
    if (need > kv->n_free)
        return kr_set_error(KARA_ERR_KV_BUDGET, "KV budget exhausted: the copy needs %d blocks of %zu bytes, %d free",
                            need, kv->bytes_per_block, kv->n_free);
    for (int32_t i = 0; i < a->n_blocks; i++) {
        if (i < n_shared_blocks)
            kv->refs[d->table[i] = a->table[i]]++;
        else
            d->table[i] = take_copy(kv, a->table[i]);
    }
    d->n_blocks = a->n_blocks;
    d->n = a->n;
    d->next_pos = a->next_pos;
    d->active = true;
    memcpy(d->pos, a->pos, (size_t)kv->n_groups * (size_t)kv->max_slots * sizeof(int32_t));
    note_peak(kv);
    return KARA_OK;
}

int32_t kr_kv_append(kr_kv_cache *kv, int32_t seq, int32_t pos) {
    kr_kv_seq *s = &kv->seqs[seq];
    int32_t slot = s->n++;
    for (int32_t g = 0; g < kv->n_groups; g++) s->pos[(size_t)g * kv->max_slots + slot] = pos;
    s->next_pos = pos + 1;
    return slot;
}

void kr_kv_truncate(kr_kv_cache *kv, int32_t seq, int32_t n_keep) {
    kr_kv_seq *s = &kv->seqs[seq];
    if (n_keep < s->n) s->n = n_keep < 0 ? 0 : n_keep;
    int32_t keep_blocks = kr_kv_blocks_for(kv, s->n);
    while (s->n_blocks > keep_blocks) release_block(kv, s->table[--s->n_blocks]);
}

void kr_kv_seq_clear(kr_kv_cache *kv, int32_t seq) {
    kr_kv_truncate(kv, seq, 0);
    kv->seqs[seq].next_pos = 0;
    kv->seqs[seq].active = false;
}

kara_status kr_kv_pull_rows(kr_kv_cache *kv, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    return kv->mirror.pull_rows && n > 0 ? kv->mirror.pull_rows(kv->mirror.user, seq, l0, l1, first, n) : KARA_OK;
}

kara_status kr_kv_push_rows(kr_kv_cache *kv, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    return kv->mirror.push_rows && n > 0 ? kv->mirror.push_rows(kv->mirror.user, seq, l0, l1, first, n) : KARA_OK;
}
