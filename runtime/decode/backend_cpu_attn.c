/* backend_cpu_attn.c - the CPU backend's attention (backend.h): each
 * entry's queries against its sequence's cached keys and values, read in
 * place from the paged pool (f16, f32; q8_0 with the queries quantised to
 * Q8_0, integer products) or a block at a time dequantised (q4_0), on the
 * context's threads. The H2O accumulation of the KV policies rides along:
 * it needs each newest query's probabilities. */
#include <math.h>
#include <string.h>

#include "backend_cpu.h"
#include "context.h"
#include "kv_select.h"

typedef struct attn_job {
    kara_context *c;
    int32_t layer;
    int32_t n;
} attn_job;

/* The entries [*i0, *i1) of the next attention chunk from entry `from`:
 * consecutive entries of one sequence, at most `max_entries`. */
static int32_t next_chunk(const kara_context *c, int32_t from, int32_t n, int32_t max_entries) {
    int32_t i = from + 1;
    while (i < n && i - from < max_entries && c->entry_seq[i] == c->entry_seq[from] && c->slot[i] > c->slot[i - 1]) i++;
    return i;
}

/* Ask for the rows of KV heads [h0, h1) of a block (n_rows slots,
 * slot_bytes apart) to be brought into L2. Why: during decode the weights
 * streamed since the last token have pushed the cache out of L2/L3, and a
 * sequence's blocks lie anywhere in the pool, so each block would start
 * with a wait on DRAM. Attention asks for the next block one head at a
 * time, between the current block's heads: a whole block at once (32 KiB
 * for Qwen3-0.6B) fills the miss queues and stalls the loop, and into L1
 * it evicts the block being read (docs/history/PERFORMANCE-2026-12.md, session 5, "Decode
 * at depth, step by step"). */
static inline void prefetch_rows(const void *block_base, int32_t h0, int32_t h1, size_t head_bytes, size_t slot_bytes,
                                 int32_t n_rows) {
    const uint8_t *p = (const uint8_t *)block_base + (size_t)h0 * head_bytes;
    const size_t span = (size_t)(h1 - h0) * head_bytes;
    for (int32_t r = 0; r < n_rows; r++, p += slot_bytes)
        for (size_t off = 0; off < span; off += 64) __builtin_prefetch(p + off, 0, 2);
}

/* Head h's rows [0, n) of a block of K or V rows (base: slot 0 of the
 * block) as the b operand of the attention products: read in place for f16
 * and f32; for a q4_0 cache (or a q8_0 one whose heads are not whole
 * blocks; kv_quant.h, buf set) dequantised to f32
 * rows of hd floats at buf first. */
static const void *head_rows(const kr_kernels *k, const kr_kv_cache *kv, const void *base, int32_t h, int32_t hd,
                             int32_t n, float *buf, size_t *ldb, bool *b_f16) {
    if (buf) {
        if (hd % 32 == 0) /* whole blocks: the kernel table's SIMD dequantiser */
            k->dequant_kv(kv->dtype == KARA_KV_Q8_0 ? KR_TYPE_Q8_0 : KR_TYPE_Q4_0, base, kv->slot_bytes, n,
                          (int64_t)h * hd / 32, hd / 32, buf);
        else
            kr_kv_rows_load(kv->dtype, base, kv->slot_bytes, n, (int64_t)h * hd, hd, buf);
        *ldb = (size_t)hd * sizeof(float);
        *b_f16 = false;
        return buf;
    }
    *ldb = kv->slot_bytes;
    *b_f16 = kv->dtype == KARA_KV_F16;
    return (const uint8_t *)base + (size_t)h * (size_t)hd * kv->elem_size;
}

/* Attention of a chunk of entries for the query heads of KV heads [h0, h1):
 * the queries (scaled by 1/sqrt(head_dim)) are scored against the
 * sequence's keys block by block (gemm_nt, each key row read once for all
 * rows of its head), each row's softmax runs over the slots up to its
 * entry's own, and the probabilities times the value rows (gemm_nn_acc)
 * give the outputs. Blocks are the outer loop and heads the inner one: a
 * block's rows of all the heads lie together (slot after slot, each slot
 * all heads), so the cache is read as one stream instead of once per head
 * with a stride of a slot; each head's products are the same calls in the
 * same order as head by head, so the bits do not change. */
static void attn_chunk(kara_context *c, int32_t layer, int32_t i0, int32_t i1, int32_t h0, int32_t h1, int ith) {
    const kr_hparams *hp = &c->model->hp;
    const kr_kernels *k = c->kernels;
    const kr_kv_cache *kv = &c->kv;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t seq = c->entry_seq[i0], nq = (i1 - i0) * group, nh = h1 - h0;
    /* bytes of one head's row in a slot: q8_0/q4_0 hold it as hd / 32 blocks (kv_quant.h) */
    const size_t ld = (size_t)c->att_ld,
                 head_bytes = kv->elem_size ? (size_t)hd * kv->elem_size : kr_kv_row_bytes(kv->dtype, hd);
    float *sc = c->att_scores + (size_t)ith * (size_t)c->att_rows * ld;
    float *qo = c->att_q + (size_t)ith * (size_t)c->att_rows * (size_t)hd;
    /* a q8_0 cache read in place: the scaled queries as Q8_0 rows too */
    const size_t q8_ld = kr_kv_row_bytes(KARA_KV_Q8_0, hd);
    uint8_t *q8 = c->att_q8 ? c->att_q8 + (size_t)ith * (size_t)c->att_rows * q8_ld : NULL;
    int32_t n_vis = 0;
    for (int32_t i = i0; i < i1; i++) n_vis = c->slot[i] + 1 > n_vis ? c->slot[i] + 1 : n_vis;

    /* row hh * nq + r: head h0 + hh, query r of the chunk */
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t h = (h0 + hh) * group + r % group;
            const float *q = c->q + ((size_t)(i0 + r / group) * hp->n_head + (size_t)h) * hd;
            float *o = qo + ((size_t)hh * nq + r) * hd;
            for (int32_t d = 0; d < hd; d++) o[d] = q[d] * scale;
            if (q8) k->from_float[KR_TYPE_Q8_0](o, q8 + ((size_t)hh * nq + r) * q8_ld, hd);
        }
    }
    /* whole blocks of keys, also the slots not written yet (their scores are
     * dropped): a slot's score is then computed the same way whatever the
     * batch, so a prompt fed at once or token by token gives equal bits */
    float *kvb = c->att_kv ? c->att_kv + (size_t)ith * (size_t)bs * (size_t)hd : NULL; /* q8_0/q4_0 */
    size_t ldb;
    bool b_f16;
    prefetch_rows(kr_kv_k(kv, layer, seq, 0), h0, h1, head_bytes, kv->slot_bytes, bs);
    for (int32_t s0 = 0; s0 < n_vis; s0 += bs) {
        const void *kb = kr_kv_k(kv, layer, seq, s0);
        const void *next = s0 + bs < n_vis ? kr_kv_k(kv, layer, seq, s0 + bs) : kr_kv_v(kv, layer, seq, 0);
        for (int32_t hh = 0; hh < nh; hh++) {
            prefetch_rows(next, h0 + hh, h0 + hh + 1, head_bytes, kv->slot_bytes, bs);
            if (q8) {
                k->gemm_nt_q8(sc + (size_t)hh * nq * ld + s0, (int64_t)ld, q8 + (size_t)hh * nq * q8_ld, q8_ld,
                              (const uint8_t *)kb + (size_t)(h0 + hh) * head_bytes, kv->slot_bytes, nq, bs, hd / 32);
                continue;
            }
            const void *b = head_rows(k, kv, kb, h0 + hh, hd, bs, kvb, &ldb, &b_f16);
            k->gemm_nt(sc + (size_t)hh * nq * ld + s0, (int64_t)ld, qo + (size_t)hh * nq * hd, hd, b, ldb, b_f16, nq,
                       bs, hd);
        }
    }
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t i = i0 + r / group, h = (h0 + hh) * group + r % group, nv = c->slot[i] + 1;
            float *row = sc + ((size_t)hh * nq + r) * ld;
            k->softmax(row, nv);
            for (int32_t s = nv; s < n_vis; s++) row[s] = 0.0f; /* slots after the entry's own */
            /* H2O accumulates the attention of each sequence's newest query (of
             * each entry of a verify batch kept apart, in rows of their own);
             * kara.score.mode online_max keeps the largest over layers */
            float *h2o = c->entry_row[i] >= 0 ? kr_kv_policy_attn_row(&c->policy, seq, c->entry_row[i], h) : NULL;
            if (h2o && c->policy.h2o_max)
                kr_kv_h2o_maximum(h2o, row, nv);
            else if (h2o)
                kr_kv_h2o_accumulate(h2o, row, nv);
        }
    }
    memset(qo, 0, (size_t)nh * nq * hd * sizeof(float));
    for (int32_t s0 = 0; s0 < n_vis; s0 += bs) {
        const int32_t ns = n_vis - s0 < bs ? n_vis - s0 : bs;
        const void *vb = kr_kv_v(kv, layer, seq, s0);
        const void *next = s0 + bs < n_vis ? kr_kv_v(kv, layer, seq, s0 + bs) : NULL;
        for (int32_t hh = 0; hh < nh; hh++) {
            if (next) prefetch_rows(next, h0 + hh, h0 + hh + 1, head_bytes, kv->slot_bytes, bs);
            if (q8) {
                k->gemm_nn_acc_q8(qo + (size_t)hh * nq * hd, hd, sc + (size_t)hh * nq * ld + s0, (int64_t)ld,
                                  (const uint8_t *)vb + (size_t)(h0 + hh) * head_bytes, kv->slot_bytes, nq, ns, hd);
                continue;
            }
            const void *b = head_rows(k, kv, vb, h0 + hh, hd, ns, kvb, &ldb, &b_f16);
            k->gemm_nn_acc(qo + (size_t)hh * nq * hd, hd, sc + (size_t)hh * nq * ld + s0, (int64_t)ld, b, ldb, b_f16,
                           nq, ns, hd);
        }
    }
    for (int32_t hh = 0; hh < nh; hh++) {
        for (int32_t r = 0; r < nq; r++) {
            const int32_t h = (h0 + hh) * group + r % group;
            float *out = c->attn + ((size_t)(i0 + r / group) * hp->n_head + (size_t)h) * hd;
            memcpy(out, qo + ((size_t)hh * nq + r) * hd, (size_t)hd * sizeof(float));
        }
    }
}

/* Units of work are (chunk of entries, range of KV heads), dealt
 * round-robin so that the longer chunks at the end of a prompt are spread
 * over the threads. A range holds as many heads as the scratch rows allow
 * (all of them for a decode entry), split further only when there are fewer
 * chunks than threads. */
static void attn_task(void *arg, int ith, int nth) {
    const attn_job *j = arg;
    kara_context *c = j->c;
    const kr_hparams *hp = &c->model->hp;
    const int32_t group = hp->n_head / hp->n_head_kv, max_entries = c->att_rows / group;
    int32_t n_chunks = 0;
    for (int32_t i0 = 0; i0 < j->n; n_chunks++) i0 = next_chunk(c, i0, j->n, max_entries);
    const int32_t min_parts = n_chunks >= nth ? 1 : (nth + n_chunks - 1) / n_chunks;
    int64_t u = 0;
    for (int32_t i0 = 0; i0 < j->n;) {
        const int32_t i1 = next_chunk(c, i0, j->n, max_entries);
        const int32_t per_unit = c->att_rows / ((i1 - i0) * group); /* heads the scratch holds */
        int32_t parts = (hp->n_head_kv + per_unit - 1) / per_unit;
        if (parts < min_parts) parts = min_parts < hp->n_head_kv ? min_parts : hp->n_head_kv;
        for (int32_t p = 0; p < parts; p++, u++) {
            const int32_t h0 = (int32_t)((int64_t)hp->n_head_kv * p / parts);
            const int32_t h1 = (int32_t)((int64_t)hp->n_head_kv * (p + 1) / parts);
            if (u % nth == ith) attn_chunk(c, j->layer, i0, i1, h0, h1, ith);
        }
        i0 = i1;
    }
}

void kr_cpu_attention(kara_context *c, int32_t il, int32_t n) {
    attn_job aj = {c, il, n};
    kr_parallel_run(c, attn_task, &aj);
}
