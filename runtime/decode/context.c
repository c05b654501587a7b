/* context.c - creating a context (every buffer sized once), validating a
 * batch before any work, and the accessors around kara_decode. */
#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_features.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_prior.h"
#include "monotonic_clock.h"
#include "params_size.h"
#include "status.h"
#include "kv_tuning.h"
#include "mem_info.h"

void kara_context_params_init(kara_context_params *p) {
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->n_ctx = 0;
    p->n_batch = 512;
    p->n_seq_max = 1;
    p->n_threads = 0;
    kara_kv_params_init(&p->kv);
    p->verify_max = 1;
}

void kr_parallel_run(kara_context *ctx, void (*fn)(void *arg, int ith, int nth), void *arg) {
    ctx->rt.regions++;
#ifdef _OPENMP
    if (ctx->run_threads > 1) {
#pragma omp parallel num_threads(ctx->run_threads)
        fn(arg, omp_get_thread_num(), omp_get_num_threads());
        return;
    }
#endif
    (void)ctx;
    fn(arg, 0, 1);
}

/* Regions on all the context's threads in which every thread is busy
 * until work_s after the region began, run until budget_s has passed (at
 * least two, unless the first alone took twice the budget, since the ping
 * is paid inside the call it prices): the mean seconds of one region now.
 * A core held by another process shows only when that process gets its
 * time slice, so the ping must last about as long, and its threads must be
 * busy as in a real call or it reads quiet beside a busy core
 * (docs/PERFORMANCE.md, "Threads on a busy machine"; run_threads.h). */
double kr_parallel_ping(kara_context *ctx, double budget_s, double work_s) {
    double t0 = kr_monotonic_seconds(), dt = 0;
    int n = 0;
    do {
        const double until = kr_monotonic_seconds() + work_s;
#ifdef _OPENMP
#pragma omp parallel num_threads(ctx->n_threads)
        {
            while (kr_monotonic_seconds() < until) {
            }
        }
#else
        (void)ctx;
        while (kr_monotonic_seconds() < until) {
        }
#endif
        n++;
        dt = kr_monotonic_seconds() - t0;
    } while (dt < budget_s || (n < 2 && dt < 2 * budget_s));
    return dt / n;
}

/* kr_parallel_run for the KV policy, which knows no context. */
static void run_on_threads(void *user, void (*fn)(void *arg, int ith, int nth), void *arg) {
    kr_parallel_run(user, fn, arg);
}

void kr_parallel_barrier(const kara_context *ctx) {
    (void)ctx;
#ifdef _OPENMP
#pragma omp barrier
#endif
}

static void *scratch(kara_context *c, size_t n_floats) {
    c->mem_bytes += n_floats * sizeof(float);
    return calloc(n_floats ? n_floats : 1, sizeof(float));
}

/* One conversion buffer per activation format the model's weights need. */
static bool alloc_act_bufs(kara_context *c) {
    const kara_model *m = c->model;
    bool needed[KR_TYPE_COUNT] = {false};
    const kr_weight *ws[] = {&m->output};
    needed[kr_type_get(ws[0]->type)->vec_dot_type] = true;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        const kr_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) needed[kr_type_get(lw[i]->type)->vec_dot_type] = true;
    }
    int64_t widest = m->hp.n_embd;
    if (m->hp.n_ff > widest) widest = m->hp.n_ff;
    if ((int64_t)m->hp.n_head * m->hp.head_dim > widest) widest = (int64_t)m->hp.n_head * m->hp.head_dim;
    for (int t = 0; t < KR_TYPE_COUNT; t++) {
        if (!needed[t] || t == KR_TYPE_F32) continue; /* f32 weights read the rows directly */
        kr_act_buf *a = &c->act[t];
        /* round the width up to the format's block so any input fits */
        int64_t bs = kr_type_get((uint32_t)t)->block_size;
        a->row_bytes = kr_type_row_size((kr_type)t, (widest + bs - 1) / bs * bs);
        a->data = aligned_alloc(64, (a->row_bytes * (size_t)c->n_batch + 63) / 64 * 64);
        if (!a->data) return false;
        c->mem_bytes += a->row_bytes * (size_t)c->n_batch;
    }
    return true;
}

/* Which tokens' text holds a newline (Kara's line-aware selection); NULL
 * when out of memory. */
static uint8_t *line_end_table(const kara_model *model, int32_t *n_vocab) {
    int32_t n = model->hp.n_vocab;
    uint8_t *t = malloc(n > 0 ? (size_t)n : 1);
    if (!t) return NULL;
    char piece[256];
    for (int32_t id = 0; id < n; id++) {
        int32_t len = kr_vocab_token_to_piece(&model->vocab, id, piece, (int32_t)sizeof piece, false);
        t[id] = len > 0 && len <= (int32_t)sizeof piece && memchr(piece, '\n', (size_t)len) != NULL;
    }
    *n_vocab = n;
    return t;
}

/* The model's retention prior, as plain arrays for the KV policy (kv knows
 * no model; docs/KARA_METHOD.md section 14). */
static kara_status set_prior(kara_context *c) {
    const kr_prior *mp = &c->model->prior;
    const kr_hparams *hp = &c->model->hp;
    kr_kv_prior p = {mp->layer,    mp->key_pairs, hp->rope_neox, hp->rope_dim, mp->n_in,
                     mp->n_hidden, mp->w1,        mp->b1,        mp->w2,       mp->b2[0]};
    kara_status st = kr_kv_policy_set_prior(&c->policy, &p);
    if (!st && c->policy.use_prior) {
        c->mem_bytes += (size_t)(kr_kv_prior_scratch_floats(&p) + c->policy.max_slots) * sizeof(float);
        kr_log(KARA_LOG_DEBUG, "retention prior: layer %d, %d inputs (%s), %d hidden, weight %g", p.layer, p.n_in,
               p.key_pairs ? "v+kpair" : "v", p.n_hidden, (double)kr_kv_tune(&c->policy.p)->prior_weight);
    }
    return st;
}

/* "512 B", "3.0 KiB", ..., "2.5 TiB". */
static void size_text(uint64_t bytes, char *buf, size_t size) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* The memory a context reserves grows with its size (the KV pool, the
 * attention rows of each thread): one the machine cannot hold is refused
 * here, with what it needs and what there is, rather than at an allocation
 * that fails without saying why (or succeeds, overcommitted, and swaps).
 * With kv_cache.budget auto the pool alone is the usual culprit (n_ctx x
 * n_seq_max, every sequence whole), so that case says what would fit. */
static kara_status check_fits(const kara_context *c, const kr_kv_plan *plan) {
    const kr_hparams *hp = &c->model->hp;
    uint64_t have = kr_mem_physical_bytes();
    if (!have) return KARA_OK;
    uint64_t seq_bytes = (uint64_t)plan->blocks_per_seq * plan->block_bytes;
    uint64_t pool = (uint64_t)plan->n_seq_max * seq_bytes + plan->reserved_bytes;
    if (!plan->p.budget && pool > have) {
        uint64_t room = have > plan->reserved_bytes ? have - plan->reserved_bytes : 0;
        uint64_t seqs = seq_bytes ? room / seq_bytes : 0;
        uint64_t tokens = room / (uint64_t)plan->n_seq_max / plan->block_bytes * (uint64_t)plan->p.block_size;
        char need_s[32], have_s[32];
        size_text(pool, need_s, sizeof need_s);
        size_text(have, have_s, sizeof have_s);
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "a KV cache for a context of %d tokens x %d sequence%s (batch.max_concurrency, -j) needs "
                            "%s with kv_cache.budget auto, more than the %s of memory here: %llu sequence%s of %d "
                            "tokens, or %d sequence%s of about %llu tokens, would fit; lower -c or -j, or set a "
                            "--kv-budget",
                            plan->n_ctx, plan->n_seq_max, plan->n_seq_max == 1 ? "" : "s", need_s, have_s,
                            (unsigned long long)seqs, seqs == 1 ? "" : "s", plan->n_ctx, plan->n_seq_max,
                            plan->n_seq_max == 1 ? "" : "s", (unsigned long long)tokens);
    }
    int32_t rows = hp->n_head / hp->n_head_kv > KR_ATT_ROWS ? hp->n_head / hp->n_head_kv : KR_ATT_ROWS;
    double kv = (double)plan->n_blocks * (double)plan->block_bytes + (double)plan->reserved_bytes;
    double att = (double)c->n_threads * rows * (double)c->n_ctx * sizeof(float);
    double other = (double)c->n_batch * ((double)hp->n_vocab + 4.0 * hp->n_embd + 2.0 * hp->n_ff) * sizeof(float);
    double need = kv + att + other, gib = 1024.0 * 1024.0 * 1024.0;
    if (need <= (double)have) return KARA_OK;
    return kr_set_error(KARA_ERR_NOMEM,
                        "a context of %d positions needs %.2f GiB (KV %.2f GiB, attention rows %.2f GiB, the rest "
                        "%.2f GiB) and this machine has %.2f GiB of memory: lower context.size (-c) or "
                        "kv_cache.budget (--kv-budget)",
                        c->n_ctx, need / gib, kv / gib, att / gib, other / gib, (double)have / gib);
}

bool kara_device_built(kara_device device) {
#ifdef KARA_HAVE_CUDA
    return device == KARA_DEVICE_CPU || device == KARA_DEVICE_CUDA;
#else
    return device == KARA_DEVICE_CPU;
#endif
}

bool kara_device_available(kara_device device) {
#ifdef KARA_HAVE_CUDA
    if (device == KARA_DEVICE_CUDA) return kr_cuda_n_devices() > 0;
#endif
    return kara_device_built(device) && device == KARA_DEVICE_CPU;
}

kara_status kara_device_props_get(kara_device device, kara_device_props *out) {
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_device_props_get: out is NULL");
    memset(out, 0, sizeof *out);
    if (device == KARA_DEVICE_CPU) {
        snprintf(out->name, sizeof out->name, "cpu");
        return KARA_OK;
    }
    if (device != KARA_DEVICE_CUDA)
        return kr_set_error(KARA_ERR_ARG, "kara_device_props_get: unknown device %d", device);
#ifdef KARA_HAVE_CUDA
    if (kr_cuda_device_props(out)) return KARA_OK;
    return kr_set_error(KARA_ERR_UNSUPPORTED, "no CUDA device answers (no GPU, or its driver is missing or too old)");
#else
    return kr_set_error(KARA_ERR_UNSUPPORTED,
                        "this libkara was built without the CUDA backend: rebuild with -DKARA_CUDA=ON (docs/CUDA.md)");
#endif
}

kara_status kara_context_create(kara_model *model, const kara_context_params *params, kara_context **out) {
    if (out) *out = NULL;
    kara_status sz = kr_params_size_check(params, sizeof *params, "kara_context_create", "kara_context_params_init");
    if (sz) return sz;
    kara_context_params defaults;
    if (!params) {
        kara_context_params_init(&defaults);
        params = &defaults;
    }
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_context_create: out is NULL");
    *out = NULL;
    if (!model || model->vocab_only)
        return kr_set_error(KARA_ERR_ARG, "kara_context_create: the model was loaded without weights");
    if (params->n_batch < 1 || params->n_seq_max < 1 || params->n_ctx < 0)
        return kr_set_error(KARA_ERR_ARG, "kara_context_create: n_batch and n_seq_max must be >= 1, n_ctx >= 0");
    if (params->verify_max < 1 || params->verify_max > KARA_MAX_DRAFT + 1)
        return kr_set_error(KARA_ERR_ARG, "kara_context_create: verify_max is %d, outside [1, %d]", params->verify_max,
                            KARA_MAX_DRAFT + 1);
    if (params->device != KARA_DEVICE_CPU && params->device != KARA_DEVICE_CUDA)
        return kr_set_error(KARA_ERR_ARG,
                            "kara_context_create: device %d is neither KARA_DEVICE_CPU nor KARA_DEVICE_CUDA",
                            (int)params->device);
#ifndef KARA_HAVE_CUDA
    if (params->device == KARA_DEVICE_CUDA)
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "runtime.device is cuda but this libkara was built without the CUDA backend: rebuild "
                            "with -DKARA_CUDA=ON (needs a CUDA toolkit), or use device cpu");
#endif
    if (kr_kv_tune(&params->kv)->prior_weight > 0.0f && !model->prior.present) /* auto (< 0) just turns it off */
        return kr_set_error(KARA_ERR_CONFIG,
                            "kara.score.prior_weight is %g but the model has no retention prior (kara_prior.* "
                            "tensors, written by tools/train/retention_prior.py): set it to 0 or load a model with one",
                            (double)kr_kv_tune(&params->kv)->prior_weight);
    if (kr_kv_method_of(&params->kv)->needs_prior && !model->prior.present)
        return kr_set_error(KARA_ERR_CONFIG,
                            "kv_cache.method %s ranks slots by the model's retention prior, but the model has none "
                            "(kara_prior.* tensors, written by tools/train/retention_prior.py): use a model with one, "
                            "or method recent",
                            kara_kv_method_name(params->kv.method));
    kara_context *c = calloc(1, sizeof *c);
    if (!c) return kr_set_error(KARA_ERR_NOMEM, "out of memory creating a context");
    const kr_hparams *hp = &model->hp;
    c->model = model;
    c->params = *params;
    kr_kv_tune(&c->params.kv)->prior_weight = kr_kv_prior_weight_resolve(
        kr_kv_tune(&params->kv)->prior_weight, model->prior.present && kr_kv_method_of(&params->kv)->prior_by_default);
    c->kernels = kr_kernels_get();
    c->backend = &kr_backend_cpu;
    c->n_ctx = params->n_ctx ? params->n_ctx : hp->n_ctx_train;
    if (hp->n_ctx_train > 0 && c->n_ctx > hp->n_ctx_train)
        kr_log(KARA_LOG_WARN,
               "context of %d positions is longer than the model's training context of %d: positions past %d "
               "were never trained (no RoPE scaling is applied)",
               c->n_ctx, hp->n_ctx_train, hp->n_ctx_train);
    c->n_batch = params->n_batch;
    c->n_threads = params->n_threads > 0 ? params->n_threads : kr_cpu_count();
    kr_run_threads_init(c);

    /* the budget covers the policy's rings and scratch first, then blocks
     * (kv_plan.c owns the arithmetic) */
    kr_kv_shape shape = {hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim};
    kr_kv_plan plan;
    kara_status st = kr_kv_plan_make(&plan, &c->params.kv, &shape, c->n_ctx, params->n_seq_max);
    if (!st) st = check_fits(c, &plan);
    if (!st) st = kr_kv_init(&c->kv, &plan);
    if (st) {
        free(c);
        return st;
    }
    kr_kv_vocab_info vocab = {-1, NULL, 0};
    if (model->vocab.kind != KR_VOCAB_NONE) {
        vocab.think_end_token = kr_vocab_find(&model->vocab, "</think>", 8);
        if (kr_kv_selection_reads_lines(&params->kv) && !(vocab.line_end = line_end_table(model, &vocab.n_vocab))) {
            kr_kv_free(&c->kv);
            free(c);
            return kr_set_error(KARA_ERR_NOMEM, "out of memory for the vocabulary's line-end table");
        }
    }
    kr_kv_exec exec = {c->n_threads, run_on_threads, c};
    st = kr_kv_policy_init(&c->policy, &plan, &c->kv, &exec, &vocab, params->verify_max);
    free((void *)vocab.line_end);
    if (!st && model->prior.present) st = set_prior(c);
    if (st) {
        kr_kv_policy_free(&c->policy);
        kr_kv_free(&c->kv);
        free(c);
        return st;
    }
    c->mem_bytes += c->policy.reserved_bytes + c->policy.verify_bytes;
    size_t nb = (size_t)c->n_batch, qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    c->x = scratch(c, nb * hp->n_embd);
    c->xn = scratch(c, nb * hp->n_embd);
    c->q = scratch(c, nb * qd);
    c->k = scratch(c, nb * kvd);
    c->v = scratch(c, nb * kvd);
    c->attn = scratch(c, nb * qd);
    c->gate = scratch(c, nb * hp->n_ff);
    c->up = scratch(c, nb * hp->n_ff);
    c->proj = scratch(c, nb * hp->n_embd);
    c->rope_cs = scratch(c, nb * hp->rope_dim);
    /* attention takes the query heads of one KV head for up to 32 / group
     * consecutive entries at once, so each key and value row is read once
     * for all of them */
    c->att_rows = hp->n_head / hp->n_head_kv > KR_ATT_ROWS ? hp->n_head / hp->n_head_kv : KR_ATT_ROWS;
    c->att_ld = (c->n_ctx + c->kv.block_size - 1) / c->kv.block_size * c->kv.block_size;
    c->att_scores = scratch(c, (size_t)c->n_threads * (size_t)c->att_rows * (size_t)c->att_ld);
    c->att_q = scratch(c, (size_t)c->n_threads * (size_t)c->att_rows * (size_t)hp->head_dim);
    /* a q8_0 cache with heads of whole blocks: attention quantises the
     * queries and reads the keys and values in place; a q4_0 one reads a
     * block's rows of one head at a time, dequantised */
    const bool q8_in_place = kr_kv_q8_in_place(c->kv.dtype, hp->head_dim);
    const bool blocked = kr_kv_dtype_blocked(c->kv.dtype) && !q8_in_place;
    if (blocked) c->att_kv = scratch(c, (size_t)c->n_threads * (size_t)c->kv.block_size * (size_t)hp->head_dim);
    if (q8_in_place) {
        const size_t q8_bytes =
            (size_t)c->n_threads * (size_t)c->att_rows * kr_kv_row_bytes(KARA_KV_Q8_0, hp->head_dim);
        c->att_q8 = scratch(c, (q8_bytes + sizeof(float) - 1) / sizeof(float));
    }
    c->logits = scratch(c, nb * hp->n_vocab);
    c->slot = calloc(nb, sizeof(int32_t));
    c->out_rows = calloc(nb, sizeof(int32_t));
    c->entry_pos = calloc(nb, sizeof(int32_t));
    c->entry_seq = calloc(nb, sizeof(int32_t));
    c->entry_row = calloc(nb, sizeof(int8_t));
    c->seq_counts = calloc((size_t)params->n_seq_max, sizeof(int32_t));
    c->seq_next = calloc((size_t)params->n_seq_max, sizeof(int32_t));
    c->saved_kv = calloc((size_t)params->n_seq_max, sizeof *c->saved_kv);
    c->saved_pol = calloc((size_t)params->n_seq_max, sizeof *c->saved_pol);
    c->mem_bytes += c->kv.budget;
    if (!c->x || !c->xn || !c->q || !c->k || !c->v || !c->attn || !c->gate || !c->up || !c->proj || !c->rope_cs ||
        !c->att_scores || !c->att_q || (blocked && !c->att_kv) || (q8_in_place && !c->att_q8) || !c->logits ||
        !c->slot || !c->out_rows || !c->entry_pos || !c->entry_seq || !c->entry_row || !c->seq_counts || !c->seq_next ||
        !c->saved_kv || !c->saved_pol || !alloc_act_bufs(c)) {
        kara_context_free(c);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory allocating context scratch");
    }
#ifdef KARA_HAVE_CUDA
    if (params->device == KARA_DEVICE_CUDA && (st = kr_cuda_backend_attach(c))) {
        kara_context_free(c);
        return st;
    }
#endif
    *out = c;
    return KARA_OK;
}

void kara_context_free(kara_context *c) {
    if (!c) return;
    if (c->backend && c->backend->destroy) c->backend->destroy(c);
    kr_kv_free(&c->kv);
    kr_kv_policy_free(&c->policy);
    free(c->entry_row);
    float *bufs[] = {c->x,  c->xn,   c->q,       c->k,          c->v,     c->attn,  c->gate,
                     c->up, c->proj, c->rope_cs, c->att_scores, c->att_q, c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->att_kv);
    free(c->att_q8);
    for (int t = 0; t < KR_TYPE_COUNT; t++) free(c->act[t].data);
    free(c->slot);
    free(c->out_rows);
    free(c->entry_pos);
    free(c->entry_seq);
    free(c->seq_counts);
    free(c->seq_next);
    free(c->saved_kv);
    free(c->saved_pol);
    free(c);
}

void kara_context_set_abort(kara_context *c, kara_abort_fn fn, void *user) {
    if (!c) return;
    c->abort = fn;
    c->abort_user = user;
}

const kara_model *kara_context_model(const kara_context *c) { return c->model; }
const kr_kv_plan *kr_context_kv_plan(const kara_context *c) { return &c->policy.plan; }
int32_t kr_context_n_seq_max(const kara_context *c) { return c->kv.n_seq_max; }
int32_t kr_context_blocks_free(const kara_context *c) { return c->kv.n_free; }
int32_t kr_context_seq_blocks(const kara_context *c, int32_t seq) { return c->kv.seqs[seq].n_blocks; }
int32_t kara_context_n_ctx(const kara_context *c) { return c->n_ctx; }
int32_t kara_context_n_batch(const kara_context *c) { return c->n_batch; }
bool kara_context_kv_compressing(const kara_context *c) { return c && c->policy.scoring; }

int32_t kara_seq_verify_room(const kara_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max) return 0;
    int32_t room = kr_kv_policy_spec_room(&c->policy, seq);
    /* a device keeps its own view of a compressed cache: no taking back there yet */
    if (c->policy.scoring && c->backend != &kr_backend_cpu && room > 1) room = 1;
    return room < c->n_batch ? room : c->n_batch;
}

/* Check every entry and make room for all of them before any work, so a
 * failing call leaves every sequence exactly as it was. */
static kara_status validate_and_reserve(kara_context *c, const kara_batch *b) {
    const kara_model *m = c->model;
    if (!b || b->n_tokens < 1 || !b->tokens) return kr_set_error(KARA_ERR_ARG, "kara_decode: empty batch");
    if (b->n_tokens > c->n_batch)
        return kr_set_error(KARA_ERR_ARG, "kara_decode: batch of %d entries exceeds n_batch %d", b->n_tokens,
                            c->n_batch);
    int32_t n_seq = c->kv.n_seq_max;
    int32_t *counts = c->seq_counts, *next = c->seq_next;
    for (int32_t s = 0; s < n_seq; s++) {
        counts[s] = 0;
        next[s] = c->kv.seqs[s].next_pos;
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t seq = b->seq_id ? b->seq_id[i] : b->seq_all;
        if (b->tokens[i] < 0 || b->tokens[i] >= m->hp.n_vocab)
            return kr_set_error(KARA_ERR_TOKEN, "kara_decode: entry %d has token %d outside [0, %d)", i, b->tokens[i],
                                m->hp.n_vocab);
        if (seq < 0 || seq >= n_seq)
            return kr_set_error(KARA_ERR_ARG, "kara_decode: entry %d has sequence %d outside [0, %d)", i, seq, n_seq);
        int32_t pos = b->pos ? b->pos[i] : b->pos_first > 0 ? b->pos_first + i : next[seq];
        if (pos < next[seq])
            return kr_set_error(KARA_ERR_ARG,
                                "kara_decode: entry %d of sequence %d has position %d, expected %d or later", i, seq,
                                pos, next[seq]);
        if (pos >= c->n_ctx)
            return kr_set_error(KARA_ERR_CONTEXT_FULL,
                                "sequence %d is full: position %d is past the context of %d positions", seq, pos,
                                c->n_ctx);
        if (c->kv.seqs[seq].n + counts[seq] + 1 > c->n_ctx)
            return kr_set_error(KARA_ERR_CONTEXT_FULL,
                                "sequence %d is full: %d tokens do not fit the context of %d tokens", seq,
                                c->kv.seqs[seq].n + counts[seq] + 1, c->n_ctx);
        c->entry_pos[i] = pos;
        c->entry_seq[i] = seq;
        next[seq] = pos + 1;
        counts[seq]++;
    }
    /* which sequences' entries continue their generation (kara_batch.generated, generated_entries) */
    for (int32_t s = 0; s < n_seq; s++) next[s] = -1;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t s = c->entry_seq[i], g = b->generated_entries ? b->generated_entries[i] != 0 : b->generated;
        if (next[s] >= 0 && next[s] != g)
            return kr_set_error(
                KARA_ERR_ARG,
                "kara_decode: entry %d of sequence %d is %sgenerated and an earlier one %s: the entries "
                "of one sequence must agree (kara_batch.generated_entries)",
                i, s, g ? "" : "not ", g ? "is not" : "is");
        next[s] = g;
    }
    bool drafts = false; /* a verify batch: drafted entries that may be taken back */
    for (int32_t s = 0; s < n_seq; s++) {
        c->policy.seqs[s].generated = next[s] == 1;
        if (next[s] != 1 || counts[s] < 2) continue;
        if (counts[s] > kara_seq_verify_room(c, s))
            return kr_set_error(KARA_ERR_ARG,
                                "kara_decode: a generated batch of %d entries for sequence %d would run a KV event "
                                "inside it, or cannot be taken back (kara_seq_verify_room: %d)",
                                counts[s], s, kara_seq_verify_room(c, s));
        drafts = true;
    }
    /* the attention rows the policy sums: each sequence's last entry's, or
     * every entry's of a generated batch kept apart (next[] counts them) */
    for (int32_t i = 0; i < b->n_tokens; i++) c->entry_row[i] = -1;
    for (int32_t s = 0; s < n_seq; s++) next[s] = kr_kv_policy_attn_rows(&c->policy, s, counts[s]);
    for (int32_t i = b->n_tokens - 1; i >= 0; i--)
        if (next[c->entry_seq[i]] > 0) c->entry_row[i] = (int8_t)--next[c->entry_seq[i]];
    /* every sequence within its share, and the blocks the batch needs once
     * each has evicted what it must (next[] now holds slots after eviction) */
    int64_t need = 0;
    for (int32_t s = 0; s < n_seq; s++) {
        if (!counts[s]) continue;
        kara_status st = kr_kv_policy_check_room(&c->policy, s, counts[s], &next[s]);
        if (st) return st;
        need += kr_kv_blocks_to_grow(&c->kv, s, next[s] + counts[s]);
    }
    if (need > c->kv.n_free && !drafts) {
        /* pool pressure: per_window and the threshold methods may free
         * blocks of other sequences (forced events, history) - the one
         * change a failing call can leave behind; on demand never does.
         * Not for drafts: relief that only they need is an event plain
         * decoding would not run here (callers retry without them) */
        kara_status st = kr_kv_policy_relieve(&c->policy, (int32_t)need);
        if (st) return st;
        need = 0;
        for (int32_t s = 0; s < n_seq; s++)
            if (counts[s]) {
                if ((st = kr_kv_policy_check_room(&c->policy, s, counts[s], &next[s]))) return st;
                need += kr_kv_blocks_to_grow(&c->kv, s, next[s] + counts[s]);
            }
    }
    if (need > c->kv.n_free)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "KV budget exhausted: this batch needs %lld more blocks (%llu bytes), %d of %d are free",
                            (long long)need, (unsigned long long)need * c->kv.bytes_per_block, c->kv.n_free,
                            c->kv.n_blocks);
    /* every check has passed: evict within the shares, take the blocks */
    for (int32_t s = 0; s < n_seq; s++)
        if (counts[s]) {
            kara_status st = kr_kv_policy_before_append(&c->policy, s, counts[s]);
            if (!st) st = kr_kv_reserve(&c->kv, s, counts[s]);
            if (st) {
                /* per_window only: its events could not make the room. The
                 * sequences before this one took blocks for entries that
                 * now never come: give them back to the pool, or they would
                 * hold blocks for no slot until they grow (found by
                 * test_decode_atomic) */
                for (int32_t o = 0; o < s; o++)
                    if (counts[o]) kr_kv_truncate(&c->kv, o, c->kv.seqs[o].n);
                return st;
            }
        }
    return KARA_OK;
}

kara_status kara_decode(kara_context *c, const kara_batch *b) {
    if (!c) return kr_set_error(KARA_ERR_ARG, "kara_decode: context is NULL");
    kara_status st = validate_and_reserve(c, b);
    if (!st) {
        double t0 = kr_run_threads_choose(c, b->n_tokens);
        st = kr_forward(c, b);
        if (!st) st = kr_kv_policy_step(&c->policy);
        kr_run_threads_record(c, t0);
    }
    for (int32_t s = 0; s < c->kv.n_seq_max; s++) c->policy.seqs[s].generated = false;
    return st;
}

const float *kara_get_logits(kara_context *c, int32_t i) {
    if (!c || c->n_logits == 0) return NULL;
    if (i < 0) i = c->n_logits + i;
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->hp.n_vocab;
}

kara_status kara_seq_clear(kara_context *c, int32_t seq) {
    if (!c) return kr_set_error(KARA_ERR_ARG, "kara_seq_clear: context is NULL");
    if (seq < -1 || seq >= c->kv.n_seq_max)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_clear: sequence %d outside [0, %d)", seq, c->kv.n_seq_max);
    for (int32_t s = 0; s < c->kv.n_seq_max; s++)
        if (seq == -1 || s == seq) {
            kr_kv_seq_clear(&c->kv, s);
            kr_kv_policy_seq_clear(&c->policy, s);
        }
    return KARA_OK;
}

/* kara_seq_truncate of the entries of a generated batch under compression:
 * they are the newest slots (positions n_keep.. in order, in every group),
 * whatever was evicted before them. */
static kara_status take_back(kara_context *c, int32_t seq, int32_t n_keep) {
    kr_kv_seq *s = &c->kv.seqs[seq];
    int32_t m = s->next_pos - n_keep, keep = s->n - m;
    for (int32_t g = 0; g < c->kv.n_groups; g++)
        for (int32_t i = 0; i < m; i++)
            if (keep < 0 || s->pos[(size_t)g * c->kv.max_slots + keep + i] != n_keep + i)
                return kr_set_error(KARA_ERR_INTERNAL,
                                    "kara_seq_truncate: the last %d slots of sequence %d are not its last positions", m,
                                    seq);
    kr_kv_policy_spec_take_back(&c->policy, seq, n_keep);
    kr_kv_truncate(&c->kv, seq, keep);
    s->next_pos = n_keep;
    return KARA_OK;
}

/* Keep positions [0, n_keep) of a sequence, only where its slots still are
 * those positions in order (nothing of them evicted or compacted) and the
 * KV policy can go back exactly; the rest returns to the pool. */
kara_status kara_seq_truncate(kara_context *c, int32_t seq, int32_t n_keep) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max || n_keep < 0)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_truncate: invalid arguments");
    kr_kv_seq *s = &c->kv.seqs[seq];
    if (n_keep >= s->next_pos) return KARA_OK;
    if (n_keep == 0) return kara_seq_clear(c, seq);
    if (kr_kv_policy_spec_can_take_back(&c->policy, seq, n_keep)) return take_back(c, seq, n_keep);
    if (n_keep > s->n)
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "kara_seq_truncate: sequence %d holds %d slots of %d positions; slots were evicted", seq,
                            s->n, s->next_pos);
    for (int32_t g = 0; g < c->kv.n_groups; g++)
        for (int32_t i = 0; i < n_keep; i++)
            if (s->pos[(size_t)g * c->kv.max_slots + i] != i)
                return kr_set_error(KARA_ERR_UNSUPPORTED,
                                    "kara_seq_truncate: slot %d of sequence %d holds position %d: the first %d "
                                    "positions are no longer whole",
                                    i, seq, s->pos[(size_t)g * c->kv.max_slots + i], n_keep);
    kara_status st = kr_kv_policy_seq_truncate(&c->policy, seq, n_keep);
    if (st) return st;
    kr_kv_truncate(&c->kv, seq, n_keep);
    s->next_pos = n_keep;
    return KARA_OK;
}

int32_t kara_seq_n_past(const kara_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max) return 0;
    return c->kv.seqs[seq].next_pos;
}

uint64_t kara_context_kv_bytes(const kara_context *c) { return kr_kv_bytes_used(&c->kv) + c->policy.reserved_bytes; }
uint64_t kara_context_kv_bytes_peak(const kara_context *c) { return c->kv.bytes_peak + c->policy.reserved_bytes; }

void kara_context_kv_stats(const kara_context *c, kara_kv_stats *out) {
    *out = c->policy.stats;
    out->pool_bytes = (uint64_t)c->kv.n_blocks * c->kv.bytes_per_block;
    out->reserved_bytes = c->policy.reserved_bytes;
    out->cache_bytes = kr_kv_bytes_used(&c->kv);
    out->cache_bytes_peak = c->kv.bytes_peak;
    out->seq_tokens = c->policy.plan.seq_tokens;
    out->scoring = c->policy.scoring;
    out->blocks_total = c->kv.n_blocks;
    out->blocks_free = c->kv.n_free;
}

kara_status kara_seq_admit(kara_context *c, int32_t seq, int32_t n_prompt, int32_t n_predict) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max || n_prompt < 0)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_admit: invalid arguments");
    if (n_prompt > c->n_ctx)
        return kr_set_error(KARA_ERR_CONTEXT_FULL, "the prompt has %d tokens but the context holds %d", n_prompt,
                            c->n_ctx);
    const kr_kv_plan *plan = &c->policy.plan;
    char why[512];
    if (!kr_kv_plan_holds(plan, n_prompt, n_predict, why, sizeof why))
        return kr_set_error(KARA_ERR_KV_BUDGET, "the KV budget cannot hold this request: %s", why);
    int64_t blocks = kr_kv_plan_blocks(plan, kr_kv_plan_peak_slots(plan, n_prompt, n_predict)) + plan->reserve_blocks;
    int64_t avail = c->kv.n_free + kr_kv_private_blocks(&c->kv, seq); /* what clearing it frees */
    if (blocks > avail)
        return kr_set_error(
            KARA_ERR_KV_BUDGET,
            "the KV budget cannot hold this request now: %d prompt tokens under method %s need %lld "
            "blocks (%llu bytes of KV, reserve_blocks included) but %lld blocks (%llu bytes) are "
            "free; raise kv_cache.budget to at least %llu bytes",
            n_prompt, kara_kv_method_name(plan->p.method), (long long)blocks,
            (unsigned long long)blocks * c->kv.bytes_per_block, (long long)avail,
            (unsigned long long)avail * c->kv.bytes_per_block,
            (unsigned long long)(blocks * (int64_t)c->kv.bytes_per_block + (int64_t)c->policy.reserved_bytes));
    return KARA_OK;
}

int32_t kara_seq_n_cached(const kara_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max) return 0;
    return c->kv.seqs[seq].n;
}
uint64_t kara_context_mem_bytes(const kara_context *c) { return c->mem_bytes; }

kara_batch kara_batch_one_sequence(const int32_t *tokens, int32_t n, int32_t pos0, int32_t seq_id) {
    kara_batch b = {.n_tokens = n, .tokens = tokens, .seq_all = seq_id, .pos_first = pos0};
    return b;
}

int32_t kara_seq_positions(const kara_context *c, int32_t seq, int32_t *out, int32_t max) {
    return kara_seq_layer_positions(c, seq, 0, out, max);
}

int32_t kara_seq_layer_positions(const kara_context *c, int32_t seq, int32_t layer, int32_t *out, int32_t max) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max || layer < 0 || layer >= c->kv.n_layer) return 0;
    const int32_t *pos = kr_kv_layer_pos(&c->kv, seq, layer);
    for (int32_t i = 0; i < c->kv.seqs[seq].n && i < max; i++) out[i] = pos[i];
    return c->kv.seqs[seq].n;
}
