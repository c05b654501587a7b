/* cuda_plan.c - the CUDA backend's memory plan (cuda_plan.h). */
#include "cuda_plan.h"

#include <string.h>

#include "cuda_ops.h"
#include "cuda_splitk.h"

/* a + b and a * b, or false on 64-bit overflow: the inputs come from a
 * model file and a YAML budget, so a product must not wrap silently */
static bool add_ok(uint64_t *acc, uint64_t b) {
    if (*acc > UINT64_MAX - b) return false;
    *acc += b;
    return true;
}

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool align_ok(uint64_t *v) {
    uint64_t r = *v % KR_CUDA_ALIGN;
    return r == 0 || add_ok(v, KR_CUDA_ALIGN - r);
}

/* Append a sub-buffer of n elements of elem bytes at *cursor (aligned). */
static bool place(uint64_t *cursor, uint64_t *off, uint64_t n, uint64_t elem) {
    uint64_t bytes;
    if (!align_ok(cursor) || !mul_ok(n, elem, &bytes)) return false;
    *off = *cursor;
    return add_ok(cursor, bytes);
}

uint64_t kr_cuda_plan_matmul_scratch(int64_t max_cols, int64_t n_batch) {
    uint64_t tile, acts, total = 0, off;
    /* f16 rows are whole 32-value stretches (a partial last one padded) */
    if (max_cols > 0 && max_cols <= INT64_MAX - 31) max_cols = (max_cols + 31) / 32 * 32;
    if (max_cols <= 0 || n_batch <= 0 || !mul_ok((uint64_t)KR_CUDA_TILE_ROWS * 2, (uint64_t)max_cols, &tile) ||
        !mul_ok((uint64_t)n_batch * 2, (uint64_t)max_cols, &acts))
        return 0;
    /* one alignment unit of slack: the kernels round their base up themselves */
    total = KR_CUDA_ALIGN;
    if (!place(&total, &off, tile, 1) || !place(&total, &off, acts, 1) || !align_ok(&total)) return 0;
    return total;
}

/* The scorer's buffers and the move arrays (KR_CUDA_R_KVSCORE) into
 * *bytes: the scorer's only with scoring, the moves whenever a compaction
 * can run. Every buffer gets its own aligned range, so the two move arrays
 * never share an address with each other or lie past the region. */
static bool score_buffers(kr_cuda_plan *plan, const kr_cuda_plan_in *in, uint64_t *bytes) {
    const int64_t q = in->score_q_max, sl = in->score_slots_max, k = in->score_keys_max, mv = in->move_slots_max;
    if (q < 0 || sl < 0 || k < 0 || mv < 0 || mv < sl) return false;
    const bool scoring = q || sl || k;
    if (scoring && (!q || !sl || k < sl)) return false;
    uint64_t n[KR_CUDA_S_COUNT] = {0};
    const uint64_t elem[KR_CUDA_S_COUNT] = {4, 4, 4, 4, 8, 8, 8};
    const uint64_t tiles = scoring ? ((uint64_t)q + 31) / 32 : 0, h = (uint64_t)in->n_head;
    if (scoring) {
        uint64_t units;
        if (!mul_ok(h, tiles, &units) || !mul_ok(units, (uint64_t)sl, &n[KR_CUDA_S_PARTIAL]) ||
            !mul_ok(units, (uint64_t)k, &n[KR_CUDA_S_ZBUF]))
            return false;
        n[KR_CUDA_S_LAYER] = n[KR_CUDA_S_ACC] = (uint64_t)sl;
        n[KR_CUDA_S_KEY_OFFS] = (uint64_t)k;
    }
    n[KR_CUDA_S_MOVE_SRC] = n[KR_CUDA_S_MOVE_DST] = (uint64_t)mv;
    for (int i = 0; i < KR_CUDA_S_COUNT; i++)
        if (n[i] && !place(bytes, &plan->score_off[i], n[i], elem[i])) return false;
    if (!align_ok(bytes)) return false;
    plan->score_tiles = (int64_t)tiles;
    plan->move_slots = mv;
    return true;
}

bool kr_cuda_plan_make(kr_cuda_plan *plan, const kr_cuda_plan_in *in) {
    memset(plan, 0, sizeof *plan);
    const int64_t dims[] = {in->n_embd,  in->n_head,  in->n_head_kv, in->head_dim,          in->n_ff,
                            in->n_vocab, in->n_batch, in->n_seq_max, in->max_blocks_per_seq};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0) return false;
    const uint64_t nb = (uint64_t)in->n_batch;
    uint64_t qd, kvd;
    if (!mul_ok((uint64_t)in->n_head, (uint64_t)in->head_dim, &qd) ||
        !mul_ok((uint64_t)in->n_head_kv, (uint64_t)in->head_dim, &kvd))
        return false;
    uint64_t max_cols = (uint64_t)in->n_embd;
    if ((uint64_t)in->n_ff > max_cols) max_cols = (uint64_t)in->n_ff;
    if (qd > max_cols) max_cols = qd;
    plan->max_cols = max_cols;

    /* activation rows, kr_buf order */
    const uint64_t act_cols[KR_CUDA_N_ACTS] = {
        (uint64_t)in->n_embd, (uint64_t)in->n_embd, qd, kvd, kvd, qd, (uint64_t)in->n_ff,
        (uint64_t)in->n_ff,   (uint64_t)in->n_embd};
    uint64_t acts = 0, n_vals;
    for (int b = 0; b < KR_CUDA_N_ACTS; b++)
        if (!mul_ok(nb, act_cols[b], &n_vals) || !place(&acts, &plan->act_off[b], n_vals, sizeof(float))) goto overflow;
    uint64_t index = 0, tables;
    if (!mul_ok((uint64_t)in->n_seq_max, (uint64_t)in->max_blocks_per_seq, &tables)) goto overflow;
    const uint64_t idx_n[KR_CUDA_I_COUNT] = {nb, nb, nb, nb, nb, tables, nb, nb};
    const uint64_t idx_elem[KR_CUDA_I_COUNT] = {4, 4, 8, 4, 4, 4, 4, 8};
    for (int i = 0; i < KR_CUDA_I_COUNT; i++)
        if (!place(&index, &plan->index_off[i], idx_n[i], idx_elem[i])) goto overflow;
    uint64_t logits, row;
    if (!mul_ok((uint64_t)in->n_vocab, sizeof(float), &row) || !mul_ok(nb, row, &logits)) goto overflow;
    const uint64_t scratch = kr_cuda_plan_matmul_scratch((int64_t)max_cols, in->n_batch);
    if (!scratch) goto overflow;

    uint64_t kvscore = 0;
    if (!score_buffers(plan, in, &kvscore)) goto overflow;

    uint64_t part;
    if (!mul_ok((uint64_t)kr_cu_splitk_part_floats(in->n_batch, in->n_head, in->head_dim), sizeof(float), &part))
        goto overflow;

    const uint64_t sizes[KR_CUDA_R_COUNT] = {in->weight_bytes,
                                             in->vector_bytes,
                                             in->pool_bytes,
                                             acts,
                                             logits,
                                             scratch,
                                             index,
                                             in->ring_bytes,
                                             kvscore,
                                             part};
    uint64_t cursor = 0;
    for (int r = 0; r < KR_CUDA_R_COUNT; r++) {
        if (!place(&cursor, &plan->off[r], sizes[r], 1)) goto overflow;
        plan->size[r] = sizes[r];
    }
    if (!align_ok(&cursor)) goto overflow;
    plan->total = cursor;
    return true;
overflow:
    memset(plan, 0, sizeof *plan);
    return false;
}
