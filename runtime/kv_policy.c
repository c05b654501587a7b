/* kv_policy.c - compression events for every KV method: when they fire,
 * how the window or cache is scored (kv_score.c), which slots survive
 * (kv_select.c), and moving the survivors down through the paged cache
 * (kv_compact.c). Everything is reserved at init; an event allocates
 * nothing. */
#include "kv_policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "kv_params.h"
#include "kv_score.h"
#include "kv_select.h"
#include "status.h"
#include "monotonic_clock.h"

/* ---- sizing ---- */

typedef struct policy_shape {
    bool window_method, needs_scores, needs_h2o;
    int32_t ring_cap;       /* queries kept per sequence and scored layer */
    int32_t n_scored;       /* scored layers */
    int32_t score_n;        /* longest span an event scores */
    int32_t score_q;        /* most query rows an event scores with (<= score_n) */
} policy_shape;

static bool threshold_trigger(const kara_kv_params *p) {
    return p->method == KARA_KV_METHOD_KARA && p->trigger == KARA_KV_TRIGGER_THRESHOLD;
}

bool kara_kv_params_periodic(const kara_kv_params *p) {
    switch (p->method) {
    case KARA_KV_METHOD_KARA: return !threshold_trigger(p);
    case KARA_KV_METHOD_CHUNKKV: case KARA_KV_METHOD_RECENT: case KARA_KV_METHOD_RANDOM: return true;
    default: return false;
    }
}

int32_t kara_kv_trigger_slack(const kara_kv_params *p) {
    if (p->method == KARA_KV_METHOD_SNAPKV) return p->snapkv_trigger_slack;
    if (threshold_trigger(p)) return p->trigger_slack > 0 ? p->trigger_slack : p->interval;
    return 1;
}

static policy_shape shape_of(const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    policy_shape s = {0};
    int32_t stride = p->layer_stride > 0 ? p->layer_stride : 1;
    if (threshold_trigger(p)) {
        /* ablation A8: the whole generated cache is scored, by the queries
         * of the newest slots: the last event's buffer and everything
         * generated since, at most slack + buffer of them at a steady
         * one-token-per-step pace */
        s.needs_scores = true;
        s.ring_cap = kara_kv_trigger_slack(p) + p->buffer + 1;
        s.score_n = max_slots;
        s.score_q = s.ring_cap;
        s.n_scored = (n_layer + stride - 1) / stride;
        if (s.score_q > s.score_n) s.score_q = s.score_n;
        return s;
    }
    switch (p->method) {
    case KARA_KV_METHOD_KARA:
    case KARA_KV_METHOD_CHUNKKV:
        s.window_method = s.needs_scores = true;
        s.ring_cap = p->interval + p->buffer + p->max_defer + 1;
        s.score_n = s.ring_cap;
        s.n_scored = (n_layer + stride - 1) / stride;
        break;
    case KARA_KV_METHOD_RECENT:
    case KARA_KV_METHOD_RANDOM:
        s.window_method = true;
        s.score_n = p->interval + p->buffer + p->max_defer + 1;
        break;
    case KARA_KV_METHOD_SNAPKV:
        /* keys over the whole cache, but only the observation window asks
         * queries (buffer_only scoring): scratch for obs_window query rows */
        s.needs_scores = true;
        s.ring_cap = p->snapkv_obs_window;
        s.score_n = max_slots;
        s.score_q = p->snapkv_obs_window;
        s.n_scored = (n_layer + stride - 1) / stride;
        break;
    case KARA_KV_METHOD_H2O:
        s.needs_h2o = true;
        s.score_n = max_slots;
        break;
    case KARA_KV_METHOD_STREAMING:
        s.score_n = max_slots;
        break;
    default: break;
    }
    if (s.score_n > max_slots) s.score_n = max_slots;
    if (s.score_q < 1 || s.score_q > s.score_n) s.score_q = s.score_n;
    return s;
}

static size_t qsize(const kara_kv_params *p) { return p->query_cache_dtype == KARA_KV_F32 ? 4 : 2; }

static kara_kv_score_shape score_shape(const kara_kv_params *p, int32_t n_w, int32_t n_buf, int32_t n_head,
                                       int32_t n_head_kv, int32_t head_dim) {
    kara_kv_score_shape sh = {n_w, n_buf, n_head, n_head_kv, head_dim, p->n_sink};
    return sh;
}

/* Sizes of every reserved buffer, in one place so init and the budget
 * arithmetic cannot disagree. */
typedef struct policy_sizes {
    size_t ring, h2o, score_scratch, select_scratch, floats, keep, moves;
    size_t per_layer; /* selection_scope per_layer: the extra groups' pos[] and stored-score rows */
} policy_sizes;

static policy_sizes sizes_of(const kara_kv_params *p, const policy_shape *s, int32_t n_layer, int32_t n_head,
                             int32_t n_head_kv, int32_t head_dim, int32_t n_seq_max, int32_t max_slots,
                             int32_t n_threads) {
    policy_sizes z = {0};
    if (p->method == KARA_KV_METHOD_FULL) return z;
    /* per_layer: every group after the first holds its own positions
     * (kv_cache.c) and stored scores (recompress_history); the scores,
     * selection and moves of an event are reused group after group */
    z.per_layer = (size_t)n_seq_max * (size_t)(kara_kv_n_groups(p, n_layer) - 1) * (size_t)max_slots *
                  (sizeof(int32_t) + sizeof(float));
    z.ring = (size_t)n_seq_max * (size_t)s->n_scored * (size_t)s->ring_cap * (size_t)n_head * (size_t)head_dim *
             qsize(p);
    if (s->needs_h2o) z.h2o = (size_t)n_seq_max * (size_t)n_head * (size_t)max_slots * sizeof(float);
    if (s->needs_scores) {
        int32_t n_buf = p->method == KARA_KV_METHOD_SNAPKV ? p->snapkv_obs_window : p->buffer;
        if (n_buf >= s->score_n) n_buf = s->score_n - 1;
        kara_kv_score_shape sh = score_shape(p, s->score_n, n_buf, n_head, n_head_kv, head_dim);
        z.score_scratch = kara_kv_score_scratch_bytes_q(&sh, s->score_q, n_threads);
    }
    z.select_scratch = kara_kv_select_scratch_bytes(max_slots);
    z.floats = 2 * (size_t)max_slots * sizeof(float);
    z.keep = (size_t)max_slots * sizeof(int32_t);
    z.moves = (size_t)max_slots * sizeof(kara_kv_move);
    return z;
}

static uint64_t total_of(const policy_sizes *z) {
    return z->ring + z->h2o + z->score_scratch + z->select_scratch + z->floats + z->keep + z->moves + z->per_layer;
}

uint64_t kara_kv_policy_bytes(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                              int32_t head_dim, int32_t n_seq_max, int32_t max_slots, int32_t n_threads) {
    policy_shape s = shape_of(p, n_layer, max_slots);
    policy_sizes z = sizes_of(p, &s, n_layer, n_head, n_head_kv, head_dim, n_seq_max, max_slots, n_threads);
    return total_of(&z);
}

kara_status kara_kv_policy_init(kara_kv_policy *pol, const kara_kv_params *p, int32_t n_layer, int32_t n_head,
                                int32_t n_head_kv, int32_t head_dim, int32_t n_seq_max, int32_t max_slots,
                                int32_t n_threads, int32_t think_end_token) {
    memset(pol, 0, sizeof *pol);
    if (kara_kv_params_per_layer(p) && threshold_trigger(p))
        return kara_set_error(KARA_ERR_CONFIG,
                              "kara.selection_scope: per_layer does not combine with kara.trigger: threshold "
                              "(ablation A8 rescores the whole cache with one shared selection); use one of them");
    if (p->interval < 1 || p->buffer < 0 || p->max_defer < 0)
        return kara_set_error(KARA_ERR_CONFIG, "kara.interval must be >= 1, buffer and max_defer >= 0");
    if (p->trigger != KARA_KV_TRIGGER_PERIODIC && p->trigger != KARA_KV_TRIGGER_THRESHOLD)
        return kara_set_error(KARA_ERR_CONFIG, "kara.trigger: unknown value %d (expected periodic | threshold)",
                              (int)p->trigger);
    if (p->trigger_slack < 0)
        return kara_set_error(KARA_ERR_CONFIG, "kara.trigger_slack must be >= 1, or 0 for auto (got %d)",
                              p->trigger_slack);
    pol->p = *p;
    pol->n_layer = n_layer;
    pol->n_head = n_head;
    pol->n_head_kv = n_head_kv;
    pol->head_dim = head_dim;
    pol->n_seq_max = n_seq_max;
    pol->max_slots = max_slots;
    pol->think_end_token = think_end_token;
    policy_shape s = shape_of(p, n_layer, max_slots);
    pol->window_method = s.window_method;
    pol->needs_scores = s.needs_scores;
    pol->needs_h2o = s.needs_h2o;
    pol->ring_cap = s.ring_cap;
    pol->n_scored_layers = s.n_scored;
    pol->q_row_bytes = (size_t)n_head * (size_t)head_dim * qsize(p);
    pol->seqs = calloc((size_t)n_seq_max, sizeof *pol->seqs);
    if (!pol->seqs) return kara_set_error(KARA_ERR_NOMEM, "out of memory for KV policy state");
    if (p->method == KARA_KV_METHOD_FULL) return KARA_OK;

    policy_sizes z = sizes_of(p, &s, n_layer, n_head, n_head_kv, head_dim, n_seq_max, max_slots, n_threads);
    pol->reserved_bytes = total_of(&z);
    pol->ring = z.ring ? calloc(1, z.ring) : NULL;
    pol->h2o_probs = z.h2o ? calloc(1, z.h2o) : NULL;
    pol->score_scratch_bytes = z.score_scratch;
    pol->score_scratch = z.score_scratch ? aligned_alloc(64, (z.score_scratch + 63) / 64 * 64) : NULL;
    pol->select_scratch_bytes = z.select_scratch;
    pol->select_scratch = aligned_alloc(64, (z.select_scratch + 63) / 64 * 64);
    pol->layer_scores = calloc((size_t)max_slots, sizeof(float));
    pol->scores = calloc((size_t)max_slots, sizeof(float));
    pol->keep = calloc((size_t)max_slots, sizeof(int32_t));
    pol->moves = calloc((size_t)max_slots, sizeof(kara_kv_move));
    bool ok = (!z.ring || pol->ring) && (!z.h2o || pol->h2o_probs) && (!z.score_scratch || pol->score_scratch) &&
              pol->select_scratch && pol->layer_scores && pol->scores && pol->keep && pol->moves;
    for (int32_t i = 0; ok && i < n_seq_max; i++) {
        kara_kv_policy_seq *q = &pol->seqs[i];
        q->tokens = calloc((size_t)max_slots, sizeof(int32_t));
        q->scores = calloc((size_t)kara_kv_n_groups(p, n_layer) * (size_t)max_slots, sizeof(float));
        q->h2o_acc = s.needs_h2o ? calloc((size_t)max_slots, sizeof(float)) : NULL;
        ok = q->tokens && q->scores && (!s.needs_h2o || q->h2o_acc);
    }
    if (!ok) {
        kara_kv_policy_free(pol);
        return kara_set_error(KARA_ERR_NOMEM, "out of memory for KV policy buffers");
    }
    return KARA_OK;
}

void kara_kv_policy_free(kara_kv_policy *pol) {
    if (pol->seqs)
        for (int32_t i = 0; i < pol->n_seq_max; i++) {
            free(pol->seqs[i].tokens);
            free(pol->seqs[i].scores);
            free(pol->seqs[i].h2o_acc);
        }
    free(pol->seqs);
    free(pol->ring);
    free(pol->h2o_probs);
    free(pol->score_scratch);
    free(pol->select_scratch);
    free(pol->layer_scores);
    free(pol->scores);
    free(pol->keep);
    free(pol->moves);
    memset(pol, 0, sizeof *pol);
}

void kara_kv_policy_seq_clear(kara_kv_policy *pol, int32_t seq) {
    kara_kv_policy_seq *q = &pol->seqs[seq];
    q->prompt_marked = false;
    q->n_prompt = q->frontier = q->due_steps = 0;
    q->think_done = false;
    if (q->h2o_acc) memset(q->h2o_acc, 0, (size_t)pol->max_slots * sizeof(float));
}

/* ---- hooks for the forward pass ---- */

void kara_kv_policy_on_append(kara_kv_policy *pol, const kara_kv_cache *kv, int32_t seq, int32_t slot,
                              int32_t token, int32_t n_new) {
    kara_kv_policy_seq *q = &pol->seqs[seq];
    if (q->tokens) q->tokens[slot] = token;
    if (q->h2o_acc) q->h2o_acc[slot] = 0.0f;
    if (!q->prompt_marked && n_new == 1 && slot > 0) {
        /* generation starts: everything before this slot is the prompt; a
         * prompt shorter than n_sink takes the first generated tokens too */
        q->prompt_marked = true;
        q->n_prompt = slot > pol->p.n_sink ? slot : pol->p.n_sink;
        q->frontier = q->n_prompt;
    }
    if (q->prompt_marked && token == pol->think_end_token && pol->think_end_token >= 0) q->think_done = true;
    (void)kv;
}

void *kara_kv_policy_query_row(kara_kv_policy *pol, int32_t seq, int32_t layer, int32_t slot, int32_t pos) {
    if (!pol->ring) return NULL;
    const kara_kv_policy_seq *q = &pol->seqs[seq];
    int32_t stride = pol->p.layer_stride > 0 ? pol->p.layer_stride : 1;
    if (!q->prompt_marked || layer % stride || slot < q->frontier) return NULL;
    if (pol->p.think_only && q->think_done) return NULL; /* no longer compressed */
    size_t row = (size_t)(pos % pol->ring_cap);
    size_t lay = (size_t)(layer / stride);
    return pol->ring + (((size_t)seq * pol->n_scored_layers + lay) * pol->ring_cap + row) * pol->q_row_bytes;
}

float *kara_kv_policy_h2o_row(kara_kv_policy *pol, int32_t seq, int32_t head) {
    if (!pol->h2o_probs || !pol->seqs[seq].prompt_marked) return NULL;
    return pol->h2o_probs + ((size_t)seq * pol->n_head + head) * pol->max_slots;
}

void kara_kv_policy_h2o_commit(kara_kv_policy *pol, int32_t seq, int32_t n_slots) {
    if (!pol->h2o_probs || !pol->seqs[seq].prompt_marked) return;
    float *acc = pol->seqs[seq].h2o_acc;
    for (int32_t h = 0; h < pol->n_head; h++) {
        float *row = pol->h2o_probs + ((size_t)seq * pol->n_head + h) * pol->max_slots;
        kara_kv_h2o_accumulate(acc, row, n_slots);
        memset(row, 0, (size_t)n_slots * sizeof(float));
    }
}

/* ---- compaction ---- */

typedef struct move_ctx {
    kara_kv_cache *kv;
    int32_t seq;
    int32_t l0, l1; /* layers [l0, l1) move */
} move_ctx;

static void move_slot(void *user, int32_t src, int32_t dst) {
    move_ctx *m = user;
    for (int32_t l = m->l0; l < m->l1; l++) {
        memcpy(kara_kv_k(m->kv, l, m->seq, dst), kara_kv_k(m->kv, l, m->seq, src), m->kv->slot_bytes);
        memcpy(kara_kv_v(m->kv, l, m->seq, dst), kara_kv_v(m->kv, l, m->seq, src), m->kv->slot_bytes);
    }
}

/* Keep `keep` (k slots, relative to frontier) of [frontier, n - n_buf) in
 * selection group `group` (its layers' K and V, its pos[] and stored-score
 * rows), or in every layer and row when group < 0, and move the survivors
 * and the buffer down. The per-slot arrays that have one row (token ids,
 * H2O accumulators) follow group 0. Blocks are released by
 * compact_release once every group has moved: until then the slots above
 * the new n still hold the other groups' sources. */
static kara_status compact_group(kara_kv_policy *pol, kara_kv_cache *kv, int32_t seq, int32_t frontier,
                                 int32_t n_buf, int32_t k, const float *keep_scores, int32_t group) {
    kara_kv_seq *s = &kv->seqs[seq];
    kara_kv_policy_seq *q = &pol->seqs[seq];
    kara_kv_compact_plan plan;
    kara_status st = kara_kv_compact_plan_make(&plan, frontier, s->n, n_buf, pol->keep, k, pol->moves);
    if (st) return st;
    int32_t g0 = group < 0 ? 0 : group, g1 = group < 0 ? kv->n_groups : group + 1;
    int32_t l1 = g1 * kv->layers_per_group;
    move_ctx mc = {kv, seq, g0 * kv->layers_per_group, l1 < kv->n_layer ? l1 : kv->n_layer};
    kara_kv_compact_apply(&plan, move_slot, &mc);
    for (int32_t g = g0; g < g1; g++) {
        size_t row = (size_t)g * (size_t)kv->max_slots;
        kara_kv_compact_apply_array(&plan, s->pos + row, sizeof(int32_t));
        kara_kv_compact_apply_array(&plan, q->scores + row, sizeof(float));
        if (keep_scores) kara_kv_compact_store_scores(&plan, pol->keep, keep_scores, q->scores + row);
    }
    if (g0 == 0) {
        kara_kv_compact_apply_array(&plan, q->tokens, sizeof(int32_t));
        if (q->h2o_acc) kara_kv_compact_apply_array(&plan, q->h2o_acc, sizeof(float));
    }
    return KARA_OK;
}

/* After an event's compact_group calls: the sequence now holds new_n slots. */
static void compact_release(kara_kv_policy *pol, kara_kv_cache *kv, int32_t seq, int32_t new_n) {
    pol->stats.slots_evicted += (uint64_t)(kv->seqs[seq].n - new_n);
    kara_kv_truncate(kv, seq, new_n);
}

/* One selection for every layer (shared scope and the baselines). */
static kara_status compact(kara_kv_policy *pol, kara_kv_cache *kv, int32_t seq, int32_t frontier, int32_t n_buf,
                           int32_t k, const float *keep_scores) {
    kara_status st = compact_group(pol, kv, seq, frontier, n_buf, k, keep_scores, -1);
    if (!st) compact_release(pol, kv, seq, frontier + k + n_buf);
    return st;
}

/* ---- scoring ---- */

typedef struct score_task {
    const kara_kv_score_job *job;
} score_task;

static void score_compute(void *arg, int ith, int nth) {
    const score_task *t = arg;
    kara_kv_score_compute(t->job, ith, nth);
}

/* Score rows [first, first + n_w) of seq's cache into pol->scores[0 ..
 * n_w - n_buf), averaged over the scored layers in [l_begin, l_end) (all
 * layers: the shared aggregation of spec 5.4; one scored layer: per_layer
 * selection). The last n_q rows have queries, read from the ring at
 * positions q_first_pos + row. */
static kara_status score_span(kara_context *ctx, int32_t seq, int32_t first, int32_t n_w, int32_t n_buf,
                              int32_t n_q, int32_t q_first_pos, kara_score_mode mode, bool exclude_self,
                              int32_t l_begin, int32_t l_end) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    const kara_kv_params *p = &pol->p;
    int32_t n_c = n_w - n_buf, stride = p->layer_stride > 0 ? p->layer_stride : 1;
    kara_kv_score_shape sh = score_shape(p, n_w, n_buf, pol->n_head, pol->n_head_kv, pol->head_dim);
    kara_kv_score_opts opts;
    kara_kv_score_opts_from_params(&opts, p);
    opts.mode = mode;
    opts.exclude_self = exclude_self;
    kara_kv_score_acc acc;
    kara_status st = kara_kv_score_acc_init(&acc, pol->scores, n_c, p->layer_reduce);
    for (int32_t l = l_begin; !st && l < l_end; l += stride) {
        kara_kv_rows qr = {p->query_cache_dtype,
                           pol->ring + ((size_t)seq * pol->n_scored_layers + (size_t)(l / stride)) *
                                           (size_t)pol->ring_cap * pol->q_row_bytes,
                           pol->q_row_bytes, 0, q_first_pos, pol->ring_cap, NULL, 0, 0};
        const uint8_t *k_base = kv->pool + (size_t)l * 2 * (size_t)kv->block_size * kv->slot_bytes;
        kara_kv_rows kr = {kv->dtype, k_base, kv->slot_bytes, 0, first, 0, kv->seqs[seq].table, kv->block_size,
                           kv->bytes_per_block};
        kara_kv_rows sink = kr;
        sink.first = 0;
        kara_kv_score_job job;
        st = kara_kv_score_prepare_q(&job, &sh, n_q, &opts, &qr, &kr, &sink, pol->score_scratch,
                                     pol->score_scratch_bytes, ctx->n_threads);
        if (st) break;
        score_task t = {&job};
        kara_parallel_run(ctx, score_compute, &t);
        kara_kv_score_finish(&job, pol->layer_scores, &acc);
    }
    if (!st) kara_kv_score_acc_finalize(&acc, pol->scores);
    return st;
}

/* One periodic event over the window of a window method (sections 5-7).
 * With selection_scope per_layer (ablation A5, spec 7.4) each selection
 * group is scored on its own scored layer, selects its own Keep and moves
 * its own layers; K depends only on n_c, so every group keeps the same
 * count and n, F and the block table stay shared. The window holds the
 * same positions in every group (it starts at the previous event's buffer),
 * so the queries and token ids read for one group serve them all. Groups go
 * last to first so that group 0, whose plan the token ids follow, moves
 * last and every selection reads the window's token ids unmoved. Whatever
 * can fail (shapes, scratch sizes) fails for the first group, before
 * anything has moved. */
static kara_status window_event(kara_context *ctx, int32_t seq) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    kara_kv_policy_seq *q = &pol->seqs[seq];
    const kara_kv_params *p = &pol->p;
    int32_t n = kv->seqs[seq].n, F = q->frontier, b = p->buffer, n_w = n - F, n_c = n_w - b;
    if (n_c < p->min_compressible || n_c < 1) return KARA_OK;
    if (pol->needs_scores && n_w > pol->ring_cap) return KARA_OK; /* queries not all kept (think_only) */
    const int32_t q_first_pos = kv->seqs[seq].pos[F], n_groups = kv->n_groups;
    kara_status st = KARA_OK;
    int32_t k = -1;
    for (int32_t g = n_groups - 1; g >= 0 && !st; g--) {
        if (pol->needs_scores) {
            /* shared: mean over every scored layer; per group: its scored layer */
            int32_t l0 = n_groups > 1 ? g * kv->layers_per_group : 0, l1 = n_groups > 1 ? l0 + 1 : pol->n_layer;
            st = score_span(ctx, seq, F, n_w, b, n_w, q_first_pos, p->score_mode, p->exclude_self, l0, l1);
        } else {
            memset(pol->scores, 0, (size_t)n_c * sizeof(float));
        }
        int32_t k_g = 0;
        if (!st)
            st = kara_kv_select_window(p, pol->scores, q->tokens + F, n_c, q->events, pol->keep, &k_g,
                                       pol->select_scratch, pol->select_scratch_bytes);
        if (!st && k >= 0 && k_g != k)
            st = kara_set_error(KARA_ERR_INTERNAL, "kv policy: group %d keeps %d slots, group %d kept %d", g, k_g,
                                g + 1, k);
        k = k_g;
        if (!st) st = compact_group(pol, kv, seq, F, b, k, pol->scores, g);
    }
    if (!st) {
        compact_release(pol, kv, seq, F + k + b);
        q->frontier = F + k;
        q->events++;
        q->due_steps = 0;
    }
    return st;
}

/* Ablation A8: Kara's scorer and selection, fired like the decode-time
 * baselines once the cache reaches budget_tokens + trigger_slack, over the
 * whole generated cache [P, n) instead of the window. The newest `buffer`
 * slots stay; of the rest, Token2Chunk keeps what the token budget leaves
 * after the prompt and the buffer. Only queries still in the ring can
 * score, so the query rows are the newest run of consecutive positions (at
 * most ring_cap): normally the previous event's buffer and every slot
 * generated since; older slots are judged as keys only. The frontier stays
 * at P: every event rescores everything generated. */
static kara_status threshold_event(kara_context *ctx, int32_t seq) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    kara_kv_policy_seq *q = &pol->seqs[seq];
    const kara_kv_params *p = &pol->p;
    const int32_t *pos = kv->seqs[seq].pos;
    int32_t n = kv->seqs[seq].n, P = q->n_prompt, n_w = n - P;
    if (n_w < 2) return KARA_OK;
    int32_t b = p->buffer < n_w ? p->buffer : n_w - 1, n_c = n_w - b, k = pol->budget_tokens - P - b;
    if (k < 0) {
        /* the budget cannot hold the prompt and the buffer: keep everything
         * (the block pool still bounds memory), as snapkv does */
        kara_log(KARA_LOG_DEBUG, "kara (trigger threshold): budget of %d tokens below the prompt (%d) and buffer (%d) "
                 "of sequence %d", pol->budget_tokens, P, b, seq);
        return KARA_OK;
    }
    if (k >= n_c) return KARA_OK;
    int32_t n_q = 1;
    while (n_q < n_w && n_q < pol->ring_cap && pos[n - 1 - n_q] == pos[n - 1] - n_q) n_q++;
    kara_status st = score_span(ctx, seq, P, n_w, b, n_q, pos[n - 1] + 1 - n_w, p->score_mode, p->exclude_self, 0,
                                pol->n_layer);
    if (!st)
        st = kara_kv_select_window_k(p, pol->scores, q->tokens + P, n_c, k, q->events, pol->keep,
                                     pol->select_scratch, pol->select_scratch_bytes);
    if (!st) st = compact(pol, kv, seq, P, b, k, pol->scores);
    if (!st) q->events++;
    return st;
}

/* The decode-time baselines compress the whole cache when it overflows
 * their per-sequence token budget (section 10). */
static kara_status cache_event(kara_context *ctx, int32_t seq) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    kara_kv_policy_seq *q = &pol->seqs[seq];
    const kara_kv_params *p = &pol->p;
    int32_t n = kv->seqs[seq].n, budget = pol->budget_tokens, k = 0;
    kara_status st = KARA_OK;
    switch (p->method) {
    case KARA_KV_METHOD_STREAMING:
        st = kara_kv_select_streaming(n, p->streaming_n_sink, budget, pol->keep, &k);
        break;
    case KARA_KV_METHOD_H2O:
        st = kara_kv_select_h2o(q->h2o_acc, n, q->n_prompt, budget, p->h2o_heavy_frac, pol->keep, &k,
                                pol->select_scratch, pol->select_scratch_bytes);
        break;
    case KARA_KV_METHOD_SNAPKV: {
        int32_t front = p->snapkv_protect_prompt ? q->n_prompt : 0, obs = p->snapkv_obs_window;
        int32_t n_w = n - front;
        if (n_w <= obs) return KARA_OK;
        const int32_t *pos = kv->seqs[seq].pos;
        /* the observation window's queries: the newest obs positions */
        st = score_span(ctx, seq, front, n_w, obs, obs, pos[n - 1] + 1 - n_w, KARA_SCORE_BUFFER_ONLY, false, 0,
                        pol->n_layer);
        if (st) break;
        memmove(pol->layer_scores + front, pol->scores, (size_t)(n_w - obs) * sizeof(float));
        st = kara_kv_select_snapkv(pol->layer_scores, n, front, obs, p->snapkv_kernel, p->snapkv_pool, budget,
                                   pol->keep, &k, pol->select_scratch, pol->select_scratch_bytes);
        break;
    }
    case KARA_KV_METHOD_KARA: return threshold_event(ctx, seq);
    default: return KARA_OK;
    }
    if (st == KARA_ERR_KV_BUDGET) {
        /* the token budget cannot even hold the protected prompt (and
         * observation window): keep everything; the block pool still bounds
         * memory, and kara_decode keeps its no-partial-failure promise */
        kara_log(KARA_LOG_DEBUG, "%s: budget of %d tokens below the protected prefix of sequence %d",
                 kara_kv_method_name(p->method), budget, seq);
        return KARA_OK;
    }
    if (!st && k < n) st = compact(pol, kv, seq, 0, 0, k, NULL);
    if (!st) {
        if (q->frontier > kv->seqs[seq].n) q->frontier = kv->seqs[seq].n;
        q->events++;
    }
    return st;
}

static bool cache_overflows(const kara_kv_policy *pol, int32_t seq, int32_t n) {
    switch (pol->p.method) {
    case KARA_KV_METHOD_STREAMING: case KARA_KV_METHOD_H2O: return n > pol->budget_tokens;
    case KARA_KV_METHOD_SNAPKV: return n >= pol->budget_tokens + pol->p.snapkv_trigger_slack;
    case KARA_KV_METHOD_KARA: /* trigger: threshold; think_only stops it as it stops the periodic events */
        return !(pol->p.think_only && pol->seqs[seq].think_done) &&
               n >= pol->budget_tokens + kara_kv_trigger_slack(&pol->p);
    default: return false;
    }
}

static bool window_due(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t seq) {
    const kara_kv_policy_seq *q = &pol->seqs[seq];
    if (!q->prompt_marked || (pol->p.think_only && q->think_done)) return false;
    int32_t n_c = kv->seqs[seq].n - q->frontier - pol->p.buffer;
    return n_c >= pol->p.interval && n_c >= pol->p.min_compressible;
}

kara_status kara_kv_policy_step(kara_context *ctx) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    if (pol->p.method == KARA_KV_METHOD_FULL) return KARA_OK;
    pol->step++;
    double t0 = kara_monotonic_seconds();
    uint64_t events0 = pol->stats.events;
    kara_status st = KARA_OK;
    if (!pol->window_method) {
        for (int32_t s = 0; s < pol->n_seq_max && !st; s++)
            if (kv->seqs[s].active && pol->seqs[s].prompt_marked && cache_overflows(pol, s, kv->seqs[s].n)) {
                st = cache_event(ctx, s);
                pol->stats.events++;
            }
    } else {
        /* periodic events, at most max_compress_per_step per step, oldest
         * due first; a sequence deferred max_defer steps goes regardless */
        int32_t running = 0, due = 0;
        for (int32_t s = 0; s < pol->n_seq_max; s++) {
            running += kv->seqs[s].active;
            due += kv->seqs[s].active && window_due(pol, kv, s);
        }
        int32_t cap = pol->p.max_compress_per_step > 0 ? pol->p.max_compress_per_step
                                                       : (running + pol->p.interval - 1) / pol->p.interval;
        if (cap < 1) cap = 1;
        for (int32_t served = 0; due > 0 && !st;) {
            int32_t pick = -1;
            for (int32_t s = 0; s < pol->n_seq_max; s++)
                if (kv->seqs[s].active && window_due(pol, kv, s) &&
                    (pick < 0 || pol->seqs[s].due_steps > pol->seqs[pick].due_steps))
                    pick = s;
            if (pick < 0) break;
            if (served >= cap && pol->seqs[pick].due_steps < pol->p.max_defer) break;
            st = window_event(ctx, pick);
            pol->stats.events++;
            served++;
            due--;
        }
        for (int32_t s = 0; s < pol->n_seq_max; s++)
            if (kv->seqs[s].active && window_due(pol, kv, s)) pol->seqs[s].due_steps++;
    }
    if (pol->stats.events > events0) pol->stats.event_seconds += kara_monotonic_seconds() - t0;
    return st;
}

/* ---- pool pressure (section 4.5) ---- */

/* Drop the lowest stored-score slots of the frozen history [P, F) of the
 * sequence with the most history, enough to free `blocks` blocks. With
 * selection_scope per_layer every group drops the same number of its own
 * lowest stored scores (groups last to first, as in window_event). */
static kara_status recompress_history(kara_context *ctx, int32_t blocks) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    int32_t pick = -1, best = 0;
    for (int32_t s = 0; s < pol->n_seq_max; s++) {
        const kara_kv_policy_seq *q = &pol->seqs[s];
        int32_t hist = q->frontier - q->n_prompt;
        if (kv->seqs[s].active && q->prompt_marked && hist > best) {
            best = hist;
            pick = s;
        }
    }
    if (pick < 0) return KARA_ERR_KV_BUDGET;
    kara_kv_policy_seq *q = &pol->seqs[pick];
    int32_t P = q->n_prompt, F = q->frontier, n = kv->seqs[pick].n;
    int32_t drop = blocks * kv->block_size;
    if (drop > F - P) drop = F - P;
    int32_t k = (F - P) - drop, m = 0;
    kara_status st = KARA_OK;
    for (int32_t g = kv->n_groups - 1; g >= 0 && !st; g--) {
        /* keep the k highest stored scores, in slot order (ties to the lower slot) */
        const float *s = q->scores + (size_t)g * (size_t)kv->max_slots + P;
        m = 0;
        for (int32_t i = 0; i < F - P; i++) {
            int32_t better = 0;
            for (int32_t j = 0; j < F - P && better < k; j++)
                better += s[j] > s[i] || (s[j] == s[i] && j < i);
            if (better < k) pol->keep[m++] = i;
        }
        /* the survivors keep their stored scores: copy them aside first */
        for (int32_t i = 0; i < m; i++) pol->scores[i] = s[pol->keep[i]];
        for (int32_t i = 0; i < m; i++) pol->layer_scores[pol->keep[i]] = pol->scores[i];
        st = compact_group(pol, kv, pick, P, n - F, m, pol->layer_scores, g);
    }
    if (!st) {
        compact_release(pol, kv, pick, P + m + (n - F));
        q->frontier = P + m;
    }
    pol->stats.recompress_events++;
    return st;
}

/* What a forced event (section 4.5 a) could take from sequence s, 0 when
 * it can have none: the compressible region of a window method (at least
 * min_compressible, its queries all still in the ring), or, for ablation A8,
 * the slots beyond the token budget. */
static int32_t forced_event_gain(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t s) {
    const kara_kv_policy_seq *q = &pol->seqs[s];
    if (!kv->seqs[s].active || !q->prompt_marked || (pol->p.think_only && q->think_done)) return 0;
    if (threshold_trigger(&pol->p)) {
        int32_t over = kv->seqs[s].n - pol->budget_tokens;
        return over > 0 ? over : 0;
    }
    if (!pol->window_method) return 0;
    int32_t n_c = kv->seqs[s].n - q->frontier - pol->p.buffer;
    if (n_c < pol->p.min_compressible || (pol->needs_scores && n_c + pol->p.buffer > pol->ring_cap)) return 0;
    return n_c > 0 ? n_c : 0;
}

kara_status kara_kv_policy_relieve(kara_context *ctx, int32_t need) {
    kara_kv_policy *pol = &ctx->policy;
    kara_kv_cache *kv = &ctx->kv;
    /* (a) force events, each on the sequence with the most to give: the
     * largest compressible window, or (A8) the most slots over the budget,
     * which its event brings back to exactly budget_tokens */
    while (need > kv->n_free) {
        int32_t pick = -1, best = 0;
        for (int32_t s = 0; s < pol->n_seq_max; s++) {
            int32_t gain = forced_event_gain(pol, kv, s);
            if (gain > best) {
                best = gain;
                pick = s;
            }
        }
        if (pick < 0) break;
        uint64_t events = pol->seqs[pick].events;
        kara_status st = threshold_trigger(&pol->p) ? threshold_event(ctx, pick) : window_event(ctx, pick);
        if (st) return st;
        if (pol->seqs[pick].events == events) break; /* A8: the budget cannot hold its prompt and buffer */
        pol->stats.events++;
        pol->stats.forced_events++;
    }
    if (need <= kv->n_free) return KARA_OK;
    /* (b) the configured fallback */
    if (pol->window_method && pol->p.on_pool_exhausted == KARA_POOL_RECOMPRESS_HISTORY) {
        while (need > kv->n_free)
            if (recompress_history(ctx, need - kv->n_free) != KARA_OK) break;
        if (need <= kv->n_free) return KARA_OK;
    }
    return kara_set_error(KARA_ERR_KV_BUDGET,
                          "KV budget exhausted: %d more blocks of %zu bytes needed, %d of %d free "
                          "(on_pool_exhausted: %s)",
                          need, kv->bytes_per_block, kv->n_free, kv->n_blocks,
                          pol->p.on_pool_exhausted == KARA_POOL_PREEMPT ? "preempt - the caller must free a sequence"
                          : pol->p.on_pool_exhausted == KARA_POOL_FAIL ? "fail"
                                                                        : "recompress_history found nothing to drop");
}

int64_t kara_kv_policy_blocks_needed(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t n_prompt,
                                     int32_t n_predict) {
    int64_t total = n_predict < 0 ? (int64_t)kv->max_slots : (int64_t)n_prompt + n_predict;
    if (total > kv->max_slots) total = kv->max_slots;
    int64_t peak = total;
    const kara_kv_params *p = &pol->p;
    int32_t front = n_prompt > p->n_sink ? n_prompt : p->n_sink;
    if (pol->window_method)
        peak = front + (int64_t)p->interval + p->buffer + p->max_defer + 1;
    else if (p->method != KARA_KV_METHOD_FULL) {
        int64_t b = (int64_t)pol->budget_tokens + kara_kv_trigger_slack(p);
        peak = n_prompt > b ? n_prompt + 1 : b;
    }
    if (peak > total) peak = total;
    int64_t blocks = (peak + kv->block_size - 1) / kv->block_size;
    if (pol->window_method) blocks += p->reserve_blocks;
    return blocks;
}

kara_status kara_kv_policy_check_append(const kara_kv_policy *pol, const kara_kv_cache *kv, int32_t seq,
                                        int32_t n_new) {
    const kara_kv_policy_seq *q = &pol->seqs[seq];
    if (!pol->ring || !pol->window_method || !q->prompt_marked) return KARA_OK;
    if (pol->p.think_only && q->think_done) return KARA_OK; /* its window is no longer scored */
    int32_t n_w = kv->seqs[seq].n - q->frontier + n_new;
    if (n_w > pol->ring_cap)
        return kara_set_error(KARA_ERR_ARG,
                              "sequence %d: %d tokens in one decode would grow the compression window to %d slots, "
                              "beyond the %d its query ring holds (interval + buffer + max_defer + 1); feed "
                              "generated tokens a few at a time",
                              seq, n_new, n_w, pol->ring_cap);
    return KARA_OK;
}
