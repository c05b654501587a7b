/* kv_policy.c - compression events for every KV method: when they fire,
 * how the window or cache is scored (kv_score.c), which slots survive
 * (kv_select.c), and moving the survivors down through the paged cache
 * (kv_compact.c). On-demand eviction lives in kv_evict.c. Everything is
 * reserved at init; an event allocates nothing. */
#include "kv_policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_compact.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_policy_impl.h"
#include "kv_quant.h"
#include "kv_score.h"
#include "kv_select.h"
#include "status.h"
#include "monotonic_clock.h"

/* A method whose cache event pool pressure may force early. */
static bool forced_events(const kr_kv_policy *pol) {
    return pol->method->forced_events && pol->method->forced_events(&pol->p);
}

static bool on_demand(const kr_kv_policy *pol) { return kr_kv_tune(&pol->p)->evict == KARA_KV_EVICT_ON_DEMAND; }

kara_status kr_kv_policy_init(kr_kv_policy *pol, const kr_kv_plan *plan, kr_kv_cache *kv, const kr_kv_exec *exec,
                              const kr_kv_vocab_info *vocab, int32_t verify_rows) {
    memset(pol, 0, sizeof *pol);
    pol->kv = kv;
    pol->exec = *exec;
    const kara_kv_params *p = &plan->p;
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (p->interval < 1 || t->buffer < 0 || t->max_defer < 0)
        return kr_set_error(KARA_ERR_CONFIG, "kara.interval must be >= 1, buffer and max_defer >= 0");
    if (t->trigger != KARA_KV_TRIGGER_PERIODIC && t->trigger != KARA_KV_TRIGGER_THRESHOLD)
        return kr_set_error(KARA_ERR_CONFIG, "kara.trigger: unknown value %d (expected periodic | threshold)",
                            (int)t->trigger);
    if (t->evict != KARA_KV_EVICT_ON_DEMAND && t->evict != KARA_KV_EVICT_PER_WINDOW)
        return kr_set_error(KARA_ERR_CONFIG, "kara.evict: unknown value %d (expected on_demand | per_window)",
                            (int)t->evict);
    if (t->trigger_slack < 0)
        return kr_set_error(KARA_ERR_CONFIG, "kara.trigger_slack must be >= 1, or 0 for auto (got %d)",
                            t->trigger_slack);
    const int32_t n_layer = plan->shape.n_layer, n_seq_max = plan->n_seq_max, max_slots = plan->max_slots;
    pol->p = *p;
    pol->method = kr_kv_method_of(p);
    pol->plan = *plan;
    pol->n_layer = n_layer;
    pol->n_head = plan->shape.n_head;
    pol->n_head_kv = plan->shape.n_head_kv;
    pol->head_dim = plan->shape.head_dim;
    pol->n_seq_max = n_seq_max;
    pol->max_slots = max_slots;
    pol->think_end_token = vocab->think_end_token;
    pol->budget_tokens = plan->budget_tokens;
    pol->scoring = plan->scoring;
    pol->q_row_bytes = kr_kv_row_bytes(t->query_cache_dtype, (int64_t)pol->n_head * pol->head_dim);
    pol->seqs = calloc((size_t)n_seq_max, sizeof *pol->seqs);
    if (!pol->seqs) return kr_set_error(KARA_ERR_NOMEM, "out of memory for KV policy state");
    for (int32_t s = 0; s < n_seq_max; s++) pol->seqs[s].spec_slot = -1;
    if (!plan->scoring) return KARA_OK; /* full, or a share that holds the whole context */

    kr_kv_reservation z;
    kr_kv_reserve_sizes(&z, p, &plan->shape, n_seq_max, max_slots);
    pol->window_method = z.window_method;
    pol->needs_scores = z.needs_scores;
    pol->needs_h2o = z.needs_h2o;
    pol->online_scores = z.online_scores;
    pol->h2o_max = z.h2o_max;
    pol->ring_cap = z.ring_cap;
    pol->n_scored_layers = z.n_scored;
    pol->reserved_bytes = kr_kv_reserve_total(&z);
    if (z.slot_state &&
        (z.slot_state % sizeof(int32_t) || z.slot_state / sizeof(int32_t) > KR_KV_SLOT_ARRAYS_MAX ||
         !pol->method->slot_init || !pol->method->observe)) {
        kr_kv_policy_free(pol);
        return kr_set_error(KARA_ERR_INTERNAL,
                            "KV method %s keeps %zu bytes per slot without its slot_init and observe hooks, or more "
                            "than %d int32 arrays",
                            pol->method->name, z.slot_state, KR_KV_SLOT_ARRAYS_MAX);
    }
    pol->ring = z.ring ? calloc(1, z.ring) : NULL;
    pol->h2o_probs = z.h2o ? calloc(1, z.h2o) : NULL;
    pol->score_scratch_bytes = z.score_scratch;
    pol->score_scratch = z.score_scratch ? aligned_alloc(64, (z.score_scratch + 63) / 64 * 64) : NULL;
    pol->select_scratch_bytes = z.select_scratch;
    pol->select_scratch = aligned_alloc(64, (z.select_scratch + 63) / 64 * 64);
    size_t nf = (size_t)max_slots;
    pol->layer_scores = calloc(nf, sizeof(float));
    pol->scores = calloc(nf, sizeof(float));
    pol->gather = calloc(nf, sizeof(float));
    pol->keep = calloc(nf, sizeof(int32_t));
    pol->gather_tokens = calloc(nf, sizeof(int32_t));
    pol->gather_keep = calloc(nf, sizeof(int32_t));
    pol->win_keep = calloc(nf, sizeof(int32_t));
    pol->moves = calloc(nf, sizeof(kr_kv_move));
    bool lines = kr_kv_selection_reads_lines(p) && vocab->line_end;
    if (lines) {
        pol->n_vocab = vocab->n_vocab;
        pol->line_end = malloc((size_t)vocab->n_vocab);
        pol->line_flags = calloc(nf, 1);
        if (pol->line_end) memcpy(pol->line_end, vocab->line_end, (size_t)vocab->n_vocab);
    }
    pol->redund_scratch_bytes = z.redund_scratch;
    pol->redund_scratch = z.redund_scratch ? aligned_alloc(64, (z.redund_scratch + 63) / 64 * 64) : NULL;
    pol->method_state = z.slot_states ? calloc(1, z.slot_states) : NULL;
    pol->n_slot_arrays = (int32_t)(z.slot_state / sizeof(int32_t));
    bool ok = (!z.ring || pol->ring) && (!z.h2o || pol->h2o_probs) && (!z.score_scratch || pol->score_scratch) &&
        pol->select_scratch && pol->layer_scores && pol->scores && pol->gather && pol->keep && pol->gather_tokens &&
        pol->gather_keep && pol->win_keep && pol->moves && (!lines || (pol->line_end && pol->line_flags)) &&
        (!z.redund_scratch || pol->redund_scratch) && (!z.slot_states || pol->method_state);
    for (int32_t i = 0; ok && i < n_seq_max; i++) {
        kr_kv_policy_seq *q = &pol->seqs[i];
        q->tokens = calloc(nf, sizeof(int32_t));
        q->scores = calloc((size_t)kr_kv_n_groups(p, n_layer) * nf, sizeof(float));
        q->win = calloc(nf, sizeof(int32_t));
        q->win_size = calloc(nf, sizeof(int32_t));
        /* a method with its own slot state observes the rows instead of summing them */
        q->h2o_acc = z.needs_h2o && !pol->method_state ? calloc(nf, sizeof(float)) : NULL;
        ok = q->tokens && q->scores && q->win && q->win_size && (!z.needs_h2o || pol->method_state || q->h2o_acc);
        if (pol->method_state) q->slot_state = pol->method_state + (size_t)i * (size_t)pol->n_slot_arrays * nf;
        if (ok && pol->h2o_probs && verify_rows > 1)
            ok = (q->spec_save = malloc(nf * KR_KV_SLOT_ARRAYS_MAX * sizeof(int32_t))) != NULL;
    }
    if (ok && pol->h2o_probs && verify_rows > 1) {
        /* verify batches' rows past the first: scratch, outside the budget */
        size_t rows = (size_t)(verify_rows - 1) * (size_t)n_seq_max * (size_t)pol->n_head * nf;
        ok = (pol->verify_probs = calloc(rows, sizeof(float))) != NULL;
        pol->verify_rows = verify_rows;
        pol->verify_bytes = rows * sizeof(float) + (size_t)n_seq_max * nf * KR_KV_SLOT_ARRAYS_MAX * sizeof(int32_t);
    }
    if (!ok) {
        kr_kv_policy_free(pol);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for KV policy buffers");
    }
    return KARA_OK;
}

void kr_kv_policy_free(kr_kv_policy *pol) {
    if (pol->seqs)
        for (int32_t i = 0; i < pol->n_seq_max; i++) {
            free(pol->seqs[i].tokens);
            free(pol->seqs[i].scores);
            free(pol->seqs[i].win);
            free(pol->seqs[i].win_size);
            free(pol->seqs[i].h2o_acc);
            free(pol->seqs[i].spec_save);
        }
    free(pol->seqs);
    free(pol->ring);
    free(pol->h2o_probs);
    free(pol->verify_probs);
    free(pol->score_scratch);
    free(pol->select_scratch);
    free(pol->layer_scores);
    free(pol->scores);
    free(pol->gather);
    free(pol->keep);
    free(pol->gather_tokens);
    free(pol->gather_keep);
    free(pol->win_keep);
    free(pol->moves);
    free(pol->line_end);
    free(pol->line_flags);
    free(pol->redund_scratch);
    free(pol->method_state);
    free(pol->prior_vals);
    memset(pol, 0, sizeof *pol);
}

void kr_kv_policy_seq_clear(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    q->prompt_marked = false;
    q->n_prompt = q->frontier = q->due_steps = q->n_win = q->n_done = q->reads_grid = 0;
    q->events = 0;
    q->evictions = 0;
    q->think_done = false;
    q->steps = 0;
    q->spec_slot = -1;
    if (q->h2o_acc) memset(q->h2o_acc, 0, (size_t)pol->max_slots * sizeof(float));
}

/* ---- hooks for the forward pass ---- */

/* Read tracking (window methods with reads_weight): a window's slots count
 * the attention they receive from the step their window becomes due, by
 * the sequence's own progress (the grid of due windows), never from when
 * scoring runs, which may be deferred by other sequences. */
static void start_reads(kr_kv_policy *pol, kr_kv_policy_seq *q, int32_t n) {
    /* online scores sum from a slot's append on: nothing restarts */
    if (!q->h2o_acc || !pol->window_method || pol->online_scores) return;
    if (q->reads_grid < q->frontier) q->reads_grid = q->frontier;
    while (n - q->reads_grid - kr_kv_tune(&pol->p)->buffer >= pol->p.interval) {
        memset(q->h2o_acc + q->reads_grid, 0, (size_t)pol->p.interval * sizeof(float));
        q->reads_grid += pol->p.interval;
    }
}

void kr_kv_policy_on_append(kr_kv_policy *pol, int32_t seq, int32_t slot, int32_t token, int32_t n_new) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (q->generated) n_new = 1; /* a verify batch: generated tokens, each as a step of its own */
    if (q->tokens) q->tokens[slot] = token;
    if (q->h2o_acc) q->h2o_acc[slot] = 0.0f;
    if (q->slot_state) /* its own step is the next one observed; a verify batch's, after those before it */
        pol->method->slot_init(q->slot_state, pol->max_slots, slot, q->steps + (q->generated ? q->spec_appended : 0));
    if (q->generated) q->spec_appended++;
    if (!q->prompt_marked && n_new == 1 && slot > 0) {
        /* generation starts: everything before this slot is the prompt; a
         * prompt shorter than n_sink takes the first generated tokens too */
        q->prompt_marked = true;
        q->n_prompt = slot > kr_kv_tune(&pol->p)->n_sink ? slot : kr_kv_tune(&pol->p)->n_sink;
        q->frontier = q->reads_grid = q->n_prompt;
    }
    if (q->prompt_marked && n_new > 1 && pol->window_method && slot >= q->frontier) {
        /* a later turn's text (the next chat message): kept whole, outside
         * every window, like the prompt (kr_kv_policy_before_append closed
         * the window before it) */
        q->win[slot] = -1;
        q->frontier = slot + 1;
    }
    if (q->prompt_marked && token == pol->think_end_token && pol->think_end_token >= 0) q->think_done = true;
    if (q->prompt_marked && n_new == 1) start_reads(pol, q, slot + 1);
}

void *kr_kv_policy_query_row(kr_kv_policy *pol, int32_t seq, int32_t layer, int32_t slot, int32_t pos) {
    if (!pol->ring) return NULL;
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t stride = kr_kv_layer_stride(kr_kv_tune(&pol->p));
    if (!q->prompt_marked || layer % stride || slot < q->frontier) return NULL;
    if (kr_kv_tune(&pol->p)->think_only && q->think_done) return NULL; /* no longer compressed */
    size_t row = (size_t)(pos % pol->ring_cap);
    size_t lay = (size_t)(layer / stride);
    return pol->ring + (((size_t)seq * pol->n_scored_layers + lay) * pol->ring_cap + row) * pol->q_row_bytes;
}

const uint8_t *kr_kvp_line_flags(kr_kv_policy *pol, const int32_t *tokens, int32_t n) {
    if (!pol->line_end) return NULL;
    for (int32_t j = 0; j < n; j++)
        pol->line_flags[j] = tokens[j] >= 0 && tokens[j] < pol->n_vocab && pol->line_end[tokens[j]];
    return pol->line_flags;
}

/* ---- compaction ---- */

typedef struct move_ctx {
    kr_kv_cache *kv;
    int32_t seq;
    int32_t l0, l1; /* layers [l0, l1) move */
} move_ctx;

static void move_slot(void *user, int32_t src, int32_t dst) {
    move_ctx *m = user;
    for (int32_t l = m->l0; l < m->l1; l++) {
        memcpy(kr_kv_k(m->kv, l, m->seq, dst), kr_kv_k(m->kv, l, m->seq, src), m->kv->slot_bytes);
        memcpy(kr_kv_v(m->kv, l, m->seq, dst), kr_kv_v(m->kv, l, m->seq, src), m->kv->slot_bytes);
    }
}

kara_status kr_kvp_compact_group(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t frontier, int32_t n_buf,
                                 int32_t k, const float *keep_scores, int32_t group) {
    kr_kv_seq *s = &kv->seqs[seq];
    kr_kv_policy_seq *q = &pol->seqs[seq];
    kr_kv_compact_plan plan;
    kara_status st = kr_kv_compact_plan_make(&plan, frontier, s->n, n_buf, pol->keep, k, pol->moves);
    if (!st && plan.n_moves) st = kr_kv_unshare_from(kv, seq, plan.moves[0].dst); /* the lowest slot written */
    if (st) return st;
    int32_t g0 = group < 0 ? 0 : group, g1 = group < 0 ? kv->n_groups : group + 1, l1 = g1 * kv->layers_per_group;
    move_ctx mc = {kv, seq, g0 * kv->layers_per_group, l1 < kv->n_layer ? l1 : kv->n_layer};
    if (kv->mirror.move_rows) /* the pool lives on a device: the rows move there */
        st = plan.n_moves ? kv->mirror.move_rows(kv->mirror.user, seq, mc.l0, mc.l1, plan.moves, plan.n_moves) : 0;
    else
        kr_kv_compact_apply(&plan, move_slot, &mc);
    if (st) return st;
    for (int32_t g = g0; g < g1; g++) {
        /* the cache's positions and the policy's scores have rows of their own lengths */
        size_t row = (size_t)g * (size_t)kv->max_slots, srow = (size_t)g * (size_t)pol->max_slots;
        kr_kv_compact_apply_array(&plan, s->pos + row, sizeof(int32_t));
        kr_kv_compact_apply_array(&plan, q->scores + srow, sizeof(float));
        if (keep_scores) kr_kv_compact_store_scores(&plan, pol->keep, keep_scores, q->scores + srow);
    }
    if (g0 == 0) {
        kr_kv_compact_apply_array(&plan, q->tokens, sizeof(int32_t));
        kr_kv_compact_apply_array(&plan, q->win, sizeof(int32_t));
        if (q->h2o_acc) kr_kv_compact_apply_array(&plan, q->h2o_acc, sizeof(float));
        for (int32_t a = 0; q->slot_state && a < pol->n_slot_arrays; a++)
            kr_kv_compact_apply_array(&plan, q->slot_state + (size_t)a * (size_t)pol->max_slots, sizeof(int32_t));
    }
    return KARA_OK;
}

void kr_kvp_compact_release(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t new_n) {
    pol->stats.slots_evicted += (uint64_t)(kv->seqs[seq].n - new_n);
    kr_kv_truncate(kv, seq, new_n);
}

kara_status kr_kvp_compact(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t frontier, int32_t n_buf, int32_t k,
                           const float *keep_scores) {
    kara_status st = kr_kvp_compact_group(pol, kv, seq, frontier, n_buf, k, keep_scores, -1);
    if (!st) kr_kvp_compact_release(pol, kv, seq, frontier + k + n_buf);
    return st;
}

/* One per_window event over the window of a window method: score it,
 * keep `retention` of its compressible slots, move the survivors down.
 * With selection_scope per_layer (ablation A5) each selection group is
 * scored on its own scored layer, selects its own Keep and moves its own
 * layers; K depends only on n_c, so every group keeps the same count and
 * n, F and the block table stay shared. The window holds the same
 * positions in every group, so the queries and token ids read for one
 * group serve them all. Groups go last to first so that group 0, whose
 * plan the token ids follow, moves last and every selection reads the
 * window's token ids unmoved. Whatever can fail (shapes, scratch sizes)
 * fails for the first group, before anything has moved. */
static kara_status window_event(kr_kv_policy *pol, int32_t seq, int32_t min_compressible) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t n = kv->seqs[seq].n, F = q->frontier, b = kr_kv_tune(&pol->p)->buffer, n_w = n - F, n_c = n_w - b;
    if (n_c < min_compressible || n_c < 1) return KARA_OK;
    if (pol->needs_scores && n_w > pol->ring_cap) return KARA_OK; /* queries not all kept (think_only) */
    const int32_t q_first_pos = kv->seqs[seq].pos[F], n_groups = kv->n_groups;
    kara_status st = KARA_OK;
    int32_t k = -1;
    for (int32_t g = n_groups - 1; g >= 0 && !st; g--) {
        if (pol->needs_scores) {
            /* shared: mean over every scored layer; per group: its scored layer */
            int32_t l0 = n_groups > 1 ? g * kv->layers_per_group : 0, l1 = n_groups > 1 ? l0 + 1 : pol->n_layer;
            st = kr_kvp_score_prior(pol, seq, F, n_w, b, n_w, q_first_pos, l0, l1, g == n_groups - 1);
        } else {
            st = kr_kvp_unscored(pol, seq, F, n_c); /* zeros or online sums, with the prior */
        }
        int32_t k_g = 0;
        if (!st)
            st = kr_kv_select_window(&pol->p, pol->scores, q->tokens + F, kr_kvp_line_flags(pol, q->tokens + F, n_c),
                                     n_c, q->events, pol->keep, &k_g, pol->select_scratch, pol->select_scratch_bytes);
        if (!st && k >= 0 && k_g != k)
            st = kr_set_error(KARA_ERR_INTERNAL, "kv policy: group %d keeps %d slots, group %d kept %d", g, k_g, g + 1,
                              k);
        k = k_g;
        if (!st) st = kr_kvp_compact_group(pol, kv, seq, F, b, k, pol->scores, g);
    }
    if (!st) {
        kr_kvp_compact_release(pol, kv, seq, F + k + b);
        /* the survivors form a window of their own for later evictions */
        for (int32_t i = F; i < F + k; i++) q->win[i] = q->n_win;
        q->win_size[q->n_win++] = n_c;
        q->frontier = q->reads_grid = F + k;
        q->events++;
        q->due_steps = 0;
    }
    return st;
}

kara_status kr_kvp_cache_keep(kr_kv_policy *pol, int32_t seq, kara_status st, int32_t k) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t n = kv->seqs[seq].n, budget = pol->budget_tokens;
    if (st == KARA_ERR_KV_BUDGET) {
        /* the token budget cannot even hold the protected prompt (and
         * observation window): keep everything; the block pool still bounds
         * memory, and kara_decode keeps its no-partial-failure promise */
        kr_log(KARA_LOG_DEBUG, "%s: budget of %d tokens below the protected prefix of sequence %d",
               kara_kv_method_name(pol->p.method), budget, seq);
        return KARA_OK;
    }
    if (!st && k < n) st = kr_kvp_compact(pol, kv, seq, 0, 0, k, NULL);
    if (!st) {
        if (q->frontier > kv->seqs[seq].n) q->frontier = kv->seqs[seq].n;
        q->events++;
    }
    return st;
}

int32_t kr_kvp_cache_limit(const kr_kv_policy *pol, int32_t seq) {
    if (pol->method->kind(&pol->p) != KR_KV_AT_BUDGET) return INT32_MAX;
    if (pol->method->cache_limit) return pol->method->cache_limit(pol, seq);
    return pol->budget_tokens + kr_kv_trigger_slack(&pol->p) - 1;
}

static bool cache_overflows(const kr_kv_policy *pol, int32_t seq, int32_t n) {
    return n > kr_kvp_cache_limit(pol, seq);
}

bool kr_kvp_window_due(const kr_kv_policy *pol, const kr_kv_cache *kv, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    if (!kv->seqs[seq].active || !q->prompt_marked || (kr_kv_tune(&pol->p)->think_only && q->think_done)) return false;
    int32_t n_c = kv->seqs[seq].n - q->frontier - kr_kv_tune(&pol->p)->buffer;
    return n_c >= pol->p.interval && n_c >= kr_kv_tune(&pol->p)->min_compressible;
}

/* On-demand scoring, or a per_window event (evict_lag: compressed later). */
static kara_status run_window_event(kr_kv_policy *pol, int32_t seq) {
    pol->stats.events++;
    if (on_demand(pol)) return kr_kvp_score_window(pol, seq);
    if (kr_kv_tune(&pol->p)->evict_lag <= 0) return window_event(pol, seq, kr_kv_tune(&pol->p)->min_compressible);
    kara_status st = kr_kvp_score_window(pol, seq);
    return st ? st : kr_kvp_compress_aged(pol, seq);
}

/* Window methods after a step. A per_window event changes what later
 * tokens attend to, so it runs in the step its window becomes due, for
 * every due sequence. On-demand scoring changes nothing the model sees and
 * always scores the window as it stood when due, so it may wait:
 * at most max_compress_per_step sequences per step, the longest-waiting
 * first, and one that waited max_defer steps goes regardless (it spreads
 * the scoring of sequences that became due together over several steps). */
static kara_status window_step(kr_kv_policy *pol) {
    kr_kv_cache *kv = pol->kv;
    kara_status st = KARA_OK;
    int32_t running = 0, due = 0;
    for (int32_t s = 0; s < pol->n_seq_max; s++) {
        running += kv->seqs[s].active;
        due += kr_kvp_window_due(pol, kv, s);
    }
    int32_t cap = kr_kv_tune(&pol->p)->max_compress_per_step > 0 ? kr_kv_tune(&pol->p)->max_compress_per_step
                                                                 : (running + pol->p.interval - 1) / pol->p.interval;
    if (cap < 1) cap = 1;
    if (!on_demand(pol)) cap = pol->n_seq_max;
    for (int32_t served = 0; due > 0 && !st;) {
        int32_t pick = -1;
        for (int32_t s = 0; s < pol->n_seq_max; s++)
            if (kr_kvp_window_due(pol, kv, s) && (pick < 0 || pol->seqs[s].due_steps > pol->seqs[pick].due_steps))
                pick = s;
        if (pick < 0) break;
        if (served >= cap && pol->seqs[pick].due_steps < kr_kv_tune(&pol->p)->max_defer) break;
        st = run_window_event(pol, pick);
        served++;
        due--;
    }
    for (int32_t s = 0; s < pol->n_seq_max; s++)
        if (kr_kvp_window_due(pol, kv, s)) pol->seqs[s].due_steps++;
    return st;
}

kara_status kr_kv_policy_step(kr_kv_policy *pol) {
    kr_kv_cache *kv = pol->kv;
    if (!pol->scoring) return KARA_OK;
    pol->step++;
    double t0 = kr_monotonic_seconds();
    uint64_t events0 = pol->stats.events;
    kara_status st = KARA_OK;
    if (!pol->window_method) {
        for (int32_t s = 0; s < pol->n_seq_max && !st; s++)
            if (kv->seqs[s].active && pol->seqs[s].prompt_marked && cache_overflows(pol, s, kv->seqs[s].n)) {
                st = pol->method->cache_event(pol, s);
                pol->stats.events++;
            }
    } else {
        st = window_step(pol);
    }
    if (pol->stats.events > events0) pol->stats.event_seconds += kr_monotonic_seconds() - t0;
    return st;
}

/* ---- before a decode: closing a window, the share ---- */

/* Score every window of seq that is due now (on-demand scoring that was
 * deferred must run before anything is evicted, so that what is evicted
 * never depends on the deferral). */
static kara_status score_due(kr_kv_policy *pol, int32_t seq) {
    kara_status st = KARA_OK;
    while (!st && kr_kvp_window_due(pol, pol->kv, seq)) st = run_window_event(pol, seq);
    return st;
}

/* Score everything of seq's open window up to its buffer (due windows as
 * they stood when due, then the rest) when the queries are at hand: the
 * first step of a chat turn, and of an eviction that finds too little
 * scored history. On demand only; changes no slot. */
static kara_status score_open(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    kara_status st = score_due(pol, seq);
    int32_t n = pol->kv->seqs[seq].n;
    if (!st && n - q->frontier - kr_kv_tune(&pol->p)->buffer >= 1 && kr_kvp_queries_kept(pol, seq, n) &&
        !(kr_kv_tune(&pol->p)->think_only && q->think_done)) {
        st = kr_kvp_score_window(pol, seq);
        pol->stats.events++;
    }
    return st;
}

kara_status kr_kv_policy_check_room(const kr_kv_policy *pol, int32_t seq, int32_t n_new, int32_t *n_after) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t n = pol->kv->seqs[seq].n, share = pol->plan.seq_tokens;
    *n_after = n;
    if (!pol->scoring || !pol->window_method || !q->prompt_marked || n + n_new <= share) return KARA_OK;
    if (!on_demand(pol)) {
        /* per_window: its events bring it within the share (or fail then) */
        *n_after = share - n_new > 0 ? share - n_new : 0;
        return KARA_OK;
    }
    int32_t drop;
    bool score_first;
    kara_status st = kr_kvp_on_demand_plan(pol, seq, n_new, &drop, &score_first);
    *n_after = n - drop;
    return st;
}

/* per_window: the share evicts evenly across the windows compressed so far;
 * too little of them, and the open window's event runs early. */
static kara_status per_window_room(kr_kv_policy *pol, int32_t seq, int32_t n_new) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t share = pol->plan.seq_tokens, n = kv->seqs[seq].n;
    if (n + n_new <= share) return KARA_OK;
    kara_status st = score_due(pol, seq);
    n = kv->seqs[seq].n;
    int32_t need = n + n_new - share, evictable = kr_kvp_evictable(pol, seq);
    if (!st && need > 0 && evictable < need && n - q->frontier - kr_kv_tune(&pol->p)->buffer >= 1 &&
        kr_kvp_queries_kept(pol, seq, n) && !(kr_kv_tune(&pol->p)->think_only && q->think_done)) {
        pol->stats.events++;
        st = window_event(pol, seq, 1);
        n = kv->seqs[seq].n;
        need = n + n_new - share;
        evictable = kr_kvp_evictable(pol, seq);
    }
    if (st || need <= 0) return st;
    if (evictable < need)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "sequence %d cannot stay within its share of %d KV slots (kv_cache.seq_tokens): it "
                            "needs %d more, and only %d of its %d slots are compressed history that may be evicted",
                            seq, share, need, evictable, n);
    return kr_kvp_evict_even(pol, seq, need);
}

/* The policy's state of seq cut back to [0, n_keep) equals a fresh decode
 * when nothing can have been scored (no scoring, `full`); for a window
 * method, when no window was scored below n_keep (generation not started,
 * or n_keep within the prompt); for the others, before generation and with
 * no attention summed (h2o, lazy and read tracking sum from the prompt on).
 * The one rule of kara_seq_truncate, kara_seq_state_save and kara_seq_copy. */
bool kr_kv_policy_can_rewind(const kr_kv_policy *pol, int32_t seq, int32_t n_keep) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    if (!pol->scoring || pol->method->kind(&pol->p) == KR_KV_KEEPS_ALL) return true;
    if (pol->window_method) return !q->prompt_marked || n_keep <= q->n_prompt;
    return !q->prompt_marked && !pol->needs_h2o && !q->slot_state;
}

int32_t kr_kv_policy_shareable(const kr_kv_policy *pol, int32_t seq, int32_t n) {
    const kr_kv_method *m = pol->method;
    if (!m->keeps_prompt || !m->keeps_prompt(&pol->p)) return 0;
    if (!pol->seqs[seq].prompt_marked || m->kind(&pol->p) == KR_KV_KEEPS_ALL) return n;
    return pol->seqs[seq].n_prompt < n ? pol->seqs[seq].n_prompt : n;
}

const char *kr_kv_policy_host_only(const kr_kv_policy *pol) {
    if (pol->h2o_probs) return "its attention sums (h2o, lazy) are collected by the CPU's attention";
    if (pol->scoring && pol->method->host_only) return pol->method->host_only;
    if (pol->needs_scores && !pol->ring) return "it scores without a query ring";
    return NULL;
}

/* kara_seq_truncate: forget slots [n_keep, n) where kr_kv_policy_can_rewind
 * allows it; refused otherwise (the caller re-decodes). */
kara_status kr_kv_policy_seq_truncate(kr_kv_policy *pol, int32_t seq, int32_t n_keep) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (kr_kv_policy_spec_can_take_back(pol, seq, n_keep)) {
        kr_kv_policy_spec_take_back(pol, seq, n_keep);
        return KARA_OK;
    }
    if (!kr_kv_policy_can_rewind(pol, seq, n_keep))
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "kara_seq_truncate: sequence %d is past its prompt of %d slots under %s with scoring on; "
                            "only kara_seq_clear can undo that",
                            seq, q->n_prompt, kara_kv_method_name(pol->p.method));
    if (q->prompt_marked && n_keep <= q->n_prompt) {
        q->prompt_marked = false;
        q->n_prompt = q->frontier = q->reads_grid = 0;
        q->n_win = q->n_done = q->due_steps = 0;
        q->think_done = false;
    }
    return KARA_OK;
}

kara_status kr_kv_policy_before_append(kr_kv_policy *pol, int32_t seq, int32_t n_new) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    kr_kv_policy_spec_mark(pol, seq);
    if (!pol->scoring || !pol->window_method || !q->prompt_marked) return KARA_OK;
    kara_status st = KARA_OK;
    bool turn = n_new > 1 && !q->generated; /* a verify batch is generation, not the next turn */
    if (!on_demand(pol)) {
        if (turn) { /* a chat turn: what is due runs, the rest is kept whole */
            st = score_due(pol, seq);
            for (int32_t i = q->frontier; !st && i < pol->kv->seqs[seq].n; i++) q->win[i] = -1;
            if (!st) q->frontier = pol->kv->seqs[seq].n;
        }
        return st ? st : per_window_room(pol, seq, n_new);
    }
    int32_t drop;
    bool score_first;
    if ((st = kr_kvp_on_demand_plan(pol, seq, n_new, &drop, &score_first))) return st;
    if (score_first)
        st = score_open(pol, seq);
    else if (drop > 0)
        st = score_due(pol, seq);
    if (!st && turn) { /* a chat turn: the buffer is kept whole with it */
        for (int32_t i = q->frontier; i < pol->kv->seqs[seq].n; i++) q->win[i] = -1;
        q->frontier = pol->kv->seqs[seq].n;
    }
    if (!st && drop > 0) st = kr_kvp_evict_even(pol, seq, drop);
    return st;
}

/* ---- pool pressure ---- */

/* What a forced event could take from sequence s, 0 when it can have none:
 * the compressible region of a per_window method (at least
 * min_compressible, its queries all still in the ring), or, for ablation
 * A8, the slots beyond the token budget. */
static int32_t forced_event_gain(const kr_kv_policy *pol, const kr_kv_cache *kv, int32_t s) {
    const kr_kv_policy_seq *q = &pol->seqs[s];
    if (!kv->seqs[s].active || !q->prompt_marked || (kr_kv_tune(&pol->p)->think_only && q->think_done)) return 0;
    if (forced_events(pol)) {
        int32_t over = kv->seqs[s].n - pol->budget_tokens;
        return over > 0 ? over : 0;
    }
    if (!pol->window_method) return 0;
    int32_t n_c = kv->seqs[s].n - q->frontier - kr_kv_tune(&pol->p)->buffer;
    if (n_c < kr_kv_tune(&pol->p)->min_compressible ||
        (pol->needs_scores && n_c + kr_kv_tune(&pol->p)->buffer > pol->ring_cap))
        return 0;
    return n_c > 0 ? n_c : 0;
}

kara_status kr_kv_policy_relieve(kr_kv_policy *pol, int32_t need) {
    kr_kv_cache *kv = pol->kv;
    bool per_window = pol->scoring && !on_demand(pol);
    /* Only on_pool_exhausted: recompress_history takes from one sequence
     * for another: (a) force events, each on the sequence with the most to
     * give (the largest compressible window, or for A8 the most slots over
     * the budget), then (b) drop history. With preempt (the default) the
     * caller preempts instead, and a recomputed sequence gives the same
     * answer; with fail the call fails. */
    bool take = kr_kv_tune(&pol->p)->on_pool_exhausted == KARA_POOL_RECOMPRESS_HISTORY;
    while (take && need > kv->n_free && (per_window || forced_events(pol))) {
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
        kara_status st = forced_events(pol) ? pol->method->cache_event(pol, pick)
                                            : window_event(pol, pick, kr_kv_tune(&pol->p)->min_compressible);
        if (st) return st;
        if (pol->seqs[pick].events == events) break; /* A8: the budget cannot hold its prompt and buffer */
        pol->stats.events++;
        pol->stats.forced_events++;
    }
    if (need <= kv->n_free) return KARA_OK;
    /* (b) the configured fallback: drop scored history of the sequence
     * that has the most, evenly across its windows */
    if (take && per_window && pol->window_method) {
        while (need > kv->n_free) {
            int32_t pick = -1, best = 0;
            for (int32_t s = 0; s < pol->n_seq_max; s++) {
                int32_t e = kv->seqs[s].active && pol->seqs[s].prompt_marked ? kr_kvp_evictable(pol, s) : 0;
                if (e > best) {
                    best = e;
                    pick = s;
                }
            }
            if (pick < 0) break;
            int32_t drop = (need - kv->n_free) * kv->block_size;
            kara_status st = kr_kvp_evict_even(pol, pick, drop < best ? drop : best);
            pol->stats.recompress_events++;
            if (st) return st;
        }
        if (need <= kv->n_free) return KARA_OK;
    }
    return kr_set_error(
        KARA_ERR_KV_BUDGET,
        "KV budget exhausted: %d more blocks of %zu bytes needed, %d of %d free (on_pool_exhausted: %s)", need,
        kv->bytes_per_block, kv->n_free, kv->n_blocks,
        kr_kv_tune(&pol->p)->on_pool_exhausted == KARA_POOL_PREEMPT    ? "preempt - the caller must free a sequence"
            : kr_kv_tune(&pol->p)->on_pool_exhausted == KARA_POOL_FAIL ? "fail"
                                                                       : "recompress_history found nothing to drop");
}
