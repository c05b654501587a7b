/*
 * context.h - a kara_context: the KV cache, every scratch buffer the forward
 * pass uses (sized once for n_batch entries), and the logits of the last
 * decode. Nothing here is allocated after kara_context_create.
 */
#ifndef KR_CONTEXT_H
#define KR_CONTEXT_H

#include "backend.h"
#include "kernels.h"
#include "kv_cache.h"
#include "kv_policy.h"
#include "kv_quant.h"
#include "run_threads.h"
#include "model.h"
#include "context_access.h"

/* Activation rows converted to one vec_dot type (Q, K and V products whose
 * weights share that type share one conversion). */
typedef struct kr_act_buf {
    void *data;
    size_t row_bytes; /* for rows of the widest input (n_embd, n_ff or n_head*head_dim) */
} kr_act_buf;

struct kara_context {
    kara_model *model;
    const kr_kernels *kernels;
    const kr_backend *backend; /* backend.h: the CPU's, or a device's */
    void *backend_state;       /* the device backend's (NULL on the CPU) */
    kara_context_params params;
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_threads;
    int32_t run_threads;     /* threads of the current call (run_threads.h) */
    kr_run_threads_state rt; /* how it is chosen */
    kr_kv_cache kv;
    kr_kv_policy policy;

    /* forward-pass scratch, [n_batch][...] */
    float *x;           /* residual stream, n_embd */
    float *xn;          /* normed input, n_embd */
    float *q;           /* n_head * head_dim */
    float *k;           /* n_head_kv * head_dim */
    float *v;           /* n_head_kv * head_dim */
    float *attn;        /* attention output, n_head * head_dim */
    float *gate;        /* n_ff */
    float *up;          /* n_ff */
    float *proj;        /* output of wo / w_down, n_embd */
    float *rope_cs;     /* cos/sin per entry, rope_dim */
    float *att_scores;  /* per thread: att_rows rows of n_ctx scores */
    float *att_q;       /* per thread: att_rows rows of head_dim (scaled queries, then outputs) */
    int32_t att_rows;   /* query rows attended together (the heads of a KV group x entries) */
    int32_t att_ld;     /* floats per score row: n_ctx rounded up to whole KV blocks */
    float *att_kv;      /* q4_0 cache (or heads not of whole blocks), per thread: a block's rows of one head as f32 */
    uint8_t *att_q8;    /* q8_0 cache, per thread: att_rows query rows as Q8_0 blocks */
    int32_t *slot;      /* slot each entry was written to */
    int32_t *out_rows;  /* entries whose logits were requested */
    int32_t *entry_pos; /* position of each entry (validated) */
    int32_t *entry_seq; /* sequence of each entry */
    /* the attention row an entry sums for the KV policy (h2o, lazy, read
     * tracking): -1 none; 0 its sequence's last entry; the entry's rank in a
     * generated batch whose rows are kept apart (kr_kv_policy_attn_rows) */
    int8_t *entry_row;
    int32_t *seq_counts, *seq_next; /* per sequence, batch validation scratch */
    kr_act_buf act[KR_TYPE_COUNT];

    float *logits; /* [n_batch][n_vocab] */
    int32_t n_logits;
    uint64_t mem_bytes;

    /* kara_context_set_abort: asked between layers; a batch it stops is
     * rolled back to these copies of its sequences' state */
    kara_abort_fn abort;
    void *abort_user;
    kr_kv_seq *saved_kv;         /* [n_seq_max] */
    kr_kv_policy_seq *saved_pol; /* [n_seq_max] */
};

/* Query rows attended together by one thread (at least the heads of a KV
 * group); the per-thread score buffer holds this many rows of n_ctx. */
#define KR_ATT_ROWS 32

/* Run fn(arg, ith, nth) on the context's threads (OpenMP) and wait. */
void kr_parallel_run(kara_context *ctx, void (*fn)(void *arg, int ith, int nth), void *arg);
/* Mean seconds of one region on all the context's threads, each thread
 * busy for work_s of it, pinged for about budget_s. */
double kr_parallel_ping(kara_context *ctx, double budget_s, double work_s);

/* Inside fn of kr_parallel_run: wait until every thread of the region
 * gets here (nothing when single-threaded). */
void kr_parallel_barrier(const kara_context *ctx);

/* The forward pass over a validated batch whose slots are already reserved. */
kara_status kr_forward(kara_context *ctx, const kara_batch *batch);

#endif /* KR_CONTEXT_H */
