/* cuda_admit.c - what a context asks of the CUDA backend (cuda_admit.h). */
#include "cuda_admit.h"

#include <stdio.h>

#include "cuda_dequant.h"
#include "cuda_kvquant.h"
#include "cuda_ops.h"
#include "kv_policy.h"
#include "status.h"

bool kr_cuda_scores_on_device(const kr_kv_policy *pol) { return pol->needs_scores && pol->ring; }

void kr_cuda_plan_in_ctx(const kara_context *c, kr_cuda_plan_in *in) {
    const kr_hparams *hp = &c->model->hp;
    const kr_kv_policy *pol = &c->policy;
    in->n_embd = hp->n_embd;
    in->n_head = hp->n_head;
    in->n_head_kv = hp->n_head_kv;
    in->head_dim = hp->head_dim;
    in->n_ff = hp->n_ff;
    in->n_vocab = hp->n_vocab;
    in->n_batch = c->n_batch;
    in->n_seq_max = c->kv.n_seq_max;
    in->max_blocks_per_seq = c->kv.max_blocks_per_seq;
    in->pool_bytes = (uint64_t)c->kv.n_blocks * c->kv.bytes_per_block;
    in->ring_bytes = pol->ring ? (uint64_t)pol->n_seq_max * (uint64_t)pol->n_scored_layers * (uint64_t)pol->ring_cap *
            (uint64_t)pol->q_row_bytes
                               : 0;
    /* every method that evicts compacts through the mirror's move_rows, up
     * to a whole sequence's slots per event, scored or not */
    in->move_slots_max = c->kv.max_slots;
    in->score_q_max = in->score_slots_max = in->score_keys_max = 0;
    if (!kr_cuda_scores_on_device(pol)) return;
    in->score_q_max = pol->ring_cap;
    in->score_slots_max = c->kv.max_slots;
    in->score_keys_max = (int64_t)c->kv.max_slots + (kr_kv_tune(&pol->p)->n_sink > 0 ? kr_kv_tune(&pol->p)->n_sink : 0);
}

static kara_status refuse(const char *what) {
    return kr_set_error(KARA_ERR_UNSUPPORTED,
                        "runtime.device cuda cannot run this model: %s; use runtime.device cpu (the CPU runs it)",
                        what);
}

/* A matrix the kernels cannot read: an unknown type, or a quantised row
 * that is not whole blocks. */
static kara_status check_weight(const kr_weight *w, const char *name, int32_t layer) {
    if (!w->data) return KARA_OK;
    const int type = (int)kr_layout_source(w->type);
    char what[160];
    const char *tname = kr_type_get((kr_type)type)->name;
    char full[48];
    if (layer >= 0)
        snprintf(full, sizeof full, "blk.%d.%s", (int)layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (!kr_cu_type_known(type)) {
        snprintf(what, sizeof what, "tensor %s has type %s, which has no CUDA kernel", full, tname);
        return refuse(what);
    }
    if (!kr_cu_cols_ok(type, w->n_cols)) {
        snprintf(what, sizeof what, "tensor %s (%s) has rows of %lld values, not whole %d-value blocks", full, tname,
                 (long long)w->n_cols, kr_cu_block_values(type));
        return refuse(what);
    }
    return KARA_OK;
}

static bool blocked(kara_kv_dtype t) { return t == KARA_KV_Q8_0 || t == KARA_KV_Q4_0; }

kara_status kr_cuda_check_shapes(const kara_context *c) {
    const kara_model *m = c->model;
    const kr_hparams *hp = &m->hp;
    kara_status st;
    if ((st = check_weight(&m->tok_embd, "token_embd", -1)) || (st = check_weight(&m->output, "output", -1))) return st;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        const kr_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        const char *names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if ((st = check_weight(ws[i], names[i], il))) return st;
    }
    char what[200];
    const kr_kv_policy *pol = &c->policy;
    const kara_kv_dtype kv = c->kv.dtype;
    if (hp->head_dim > KR_CUDA_ATTN_MAX_DIM || hp->head_dim_v != hp->head_dim)
        snprintf(what, sizeof what,
                 "heads of %d key and %d value values (the attention kernel takes equal ones of at most %d)",
                 (int)hp->head_dim, (int)hp->head_dim_v, KR_CUDA_ATTN_MAX_DIM);
    else if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv)
        snprintf(what, sizeof what, "%d query heads over %d KV heads", (int)hp->n_head, (int)hp->n_head_kv);
    else if (blocked(kv) && hp->head_dim % KR_CU_QK)
        snprintf(what, sizeof what, "kv_cache.dtype %s with heads of %d values (not whole %d-value blocks)",
                 kara_kv_dtype_name(kv), (int)hp->head_dim, KR_CU_QK);
    else if (kr_cuda_scores_on_device(pol) && blocked(kr_kv_tune(&pol->p)->query_cache_dtype) &&
             hp->head_dim % KR_CU_QK)
        snprintf(what, sizeof what, "a %s query ring with heads of %d values (not whole %d-value blocks)",
                 kara_kv_dtype_name(kr_kv_tune(&pol->p)->query_cache_dtype), (int)hp->head_dim, KR_CU_QK);
    else if (kr_cuda_scores_on_device(pol) && hp->n_head_kv > KR_CUDA_SCORE_MAX_KV)
        snprintf(what, sizeof what, "%d KV heads (Kara's device scorer takes at most %d)", (int)hp->n_head_kv,
                 KR_CUDA_SCORE_MAX_KV);
    else
        return KARA_OK;
    return refuse(what);
}
