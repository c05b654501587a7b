/* forward.c - the transformer forward pass, one function for Llama, Qwen2
 * and Qwen3, parameterised by the architecture's flags (model.h).
 *
 * A batch holds entries of one or more sequences. Per layer: RMSNorm, Q/K/V
 * projections (+bias on Qwen2), per-head RMSNorm of Q and K (Qwen3), RoPE,
 * K and V written to the entries' cache slots, attention of each entry over
 * its sequence's slots up to its own, the output projection and residual,
 * then RMSNorm and the SwiGLU feed-forward with its residual. Finally the
 * entries that asked for logits get the output norm and the vocabulary
 * projection. Each step is one operation of the context's backend
 * (backend.h: the CPU's kernel table or the CUDA kernels); this file keeps
 * the order of the steps and the host's bookkeeping (slots, the policy's
 * per-slot state, the abort rollback). */
#include <string.h>

#include "backend.h"
#include "context.h"
#include "status.h"

/* Before the batch's slots are appended (with an abort callback set, or
 * on a device):
 * copy the cache's and the policy's state of each sequence it touches. */
static void save_seqs(kara_context *c) {
    for (int32_t s = 0; s < c->kv.n_seq_max; s++)
        if (c->seq_counts[s]) {
            c->saved_kv[s] = c->kv.seqs[s];
            c->saved_pol[s] = c->policy.seqs[s];
        }
}

/* Take the batch's slots back out (their blocks return to the pool) and
 * restore each touched sequence's policy state, so the cache holds what it
 * held before the call. The appends wrote only the new slots' per-slot
 * entries, which the truncation drops; what validation did first to make
 * room (evictions) stays, as after any failing call. */
static void undo_batch(kara_context *c) {
    for (int32_t s = 0; s < c->kv.n_seq_max; s++) {
        if (!c->seq_counts[s]) continue;
        kr_kv_truncate(&c->kv, s, c->saved_kv[s].n);
        c->kv.seqs[s].next_pos = c->saved_kv[s].next_pos;
        c->kv.seqs[s].active = c->saved_kv[s].active;
        c->policy.seqs[s] = c->saved_pol[s];
        /* the attention of the sequence's newest queries, summed layer by
         * layer for H2O, lazy and read tracking: only kr_kv_policy_after_pass
         * adds it to the scores, which a stopped pass never reaches, so drop
         * the partial sums (found by test_decode_atomic) */
        kr_kv_policy_pass_discard(&c->policy, s);
    }
    c->n_logits = 0;
}

/* The abort callback stopped the batch before layer il. */
static kara_status roll_back(kara_context *c, int32_t il, int32_t n_layer) {
    c->backend->finish(c);
    undo_batch(c);
    return kr_set_error(KARA_ERR_ABORTED,
                        "kara_decode: stopped by the abort callback at layer %d of %d; the batch "
                        "was rolled back (nothing of it is in the cache)",
                        il, n_layer);
}

kara_status kr_forward(kara_context *c, const kara_batch *b) {
    const kara_model *m = c->model;
    const kr_hparams *hp = &m->hp;
    const kr_backend *be = c->backend;
    const int32_t n = b->n_tokens, e = hp->n_embd;
    const int32_t qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;

    /* a device can fail where the CPU cannot: keep what to roll back to */
    if (c->abort || be != &kr_backend_cpu) save_seqs(c);
    /* slots, then embeddings and RoPE angles */
    for (int32_t i = 0; i < n; i++) {
        int32_t seq = c->entry_seq[i];
        c->slot[i] = kr_kv_append(&c->kv, seq, c->entry_pos[i]);
        kr_kv_policy_on_append(&c->policy, seq, c->slot[i], b->tokens[i], c->seq_counts[seq]);
    }
    be->begin(c, b->tokens, n);

    for (int32_t il = 0; il < hp->n_layer; il++) {
        if (c->abort && c->abort(c->abort_user)) return roll_back(c, il, hp->n_layer);
        const kr_layer *L = &m->layers[il];
        /* attention block */
        be->rmsnorm(c, KR_BUF_XN, KR_BUF_X, L->attn_norm, n, e);
        const kr_weight *qkv[] = {&L->wq, &L->wk, &L->wv};
        const kr_buf qkv_out[] = {KR_BUF_Q, KR_BUF_K, KR_BUF_V};
        be->matmul(c, 3, qkv, KR_BUF_XN, n, qkv_out);
        if (L->bq) be->add_bias(c, KR_BUF_Q, L->bq, n, qd);
        if (L->bk) be->add_bias(c, KR_BUF_K, L->bk, n, kvd);
        if (L->bv) be->add_bias(c, KR_BUF_V, L->bv, n, kvd);
        if (L->q_norm) be->rmsnorm(c, KR_BUF_Q, KR_BUF_Q, L->q_norm, (int64_t)n * hp->n_head, hp->head_dim);
        be->rope(c, KR_BUF_Q, n, hp->n_head);
        if (L->k_norm) be->rmsnorm(c, KR_BUF_K, KR_BUF_K, L->k_norm, (int64_t)n * hp->n_head_kv, hp->head_dim);
        be->rope(c, KR_BUF_K, n, hp->n_head_kv);
        be->kv_store(c, il, n);
        be->attention(c, il, n);
        const kr_weight *wo = &L->wo;
        const kr_buf proj = KR_BUF_PROJ;
        be->matmul(c, 1, &wo, KR_BUF_ATTN, n, &proj);
        be->add(c, KR_BUF_X, KR_BUF_PROJ, (int64_t)n * e);

        /* feed-forward block */
        be->rmsnorm(c, KR_BUF_XN, KR_BUF_X, L->ffn_norm, n, e);
        const kr_weight *gate_up[] = {&L->w_gate, &L->w_up};
        const kr_buf gate_up_out[] = {KR_BUF_GATE, KR_BUF_UP};
        be->matmul(c, 2, gate_up, KR_BUF_XN, n, gate_up_out);
        be->silu_mul(c, KR_BUF_GATE, KR_BUF_UP, n, hp->n_ff);
        const kr_weight *down = &L->w_down;
        be->matmul(c, 1, &down, KR_BUF_GATE, n, &proj);
        be->add(c, KR_BUF_X, KR_BUF_PROJ, (int64_t)n * e);
    }

    if (c->abort && c->abort(c->abort_user)) return roll_back(c, hp->n_layer, hp->n_layer);
    /* logits for the entries that asked for them */
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++)
        if (b->logits ? b->logits[i] != 0 : i == n - 1) c->out_rows[n_out++] = i;
    c->n_logits = n_out;
    for (int32_t s = 0; s < c->kv.n_seq_max; s++)
        if (c->seq_counts[s])
            kr_kv_policy_after_pass(&c->policy, s, kr_kv_policy_attn_rows(&c->policy, s, c->seq_counts[s]),
                                    c->kv.seqs[s].n);
    be->logits(c, c->out_rows, n_out);
    kara_status st = be->finish(c);
    if (st) undo_batch(c); /* a device error: the batch is not in the cache either */
    return st;
}
