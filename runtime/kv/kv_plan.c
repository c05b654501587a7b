/* kv_plan.c - the capacity arithmetic of the KV cache (kv_plan.h): block
 * bytes, the policy's reservations, the pool, shares, token budgets and
 * request peaks. */
#include "kv_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kv_cache.h"
#include "kv_compact.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_quant.h"
#include "kv_redund.h"
#include "kv_score.h"
#include "kv_select.h"
#include "status.h"
#include "kv_tuning.h"

bool kr_kv_params_periodic(const kara_kv_params *p) { return kr_kv_method_kind(p) == KR_KV_WINDOWS; }

int32_t kr_kv_trigger_slack(const kara_kv_params *p) {
    const kr_kv_method *m = kr_kv_method_of(p);
    return m->trigger_slack ? m->trigger_slack(p) : 1;
}

int32_t kr_kv_window_slots(const kara_kv_params *p) {
    return p->interval + kr_kv_tune(p)->buffer + kr_kv_tune(p)->max_defer + 1;
}

bool kr_kv_plan_window_method(const kr_kv_plan *plan) { return kr_kv_params_periodic(&plan->p); }

uint64_t kr_kv_block_bytes(const kara_kv_params *p, const kr_kv_shape *shape) {
    return (uint64_t)shape->n_layer * 2 * (uint64_t)(p->block_size > 0 ? p->block_size : 1) *
        (uint64_t)kr_kv_row_bytes(p->dtype, (int64_t)shape->n_head_kv * shape->head_dim);
}

/* ---- the policy's reservations ---- */

void kr_kv_reserve_shape(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    const kr_kv_method *m = kr_kv_method_of(p);
    memset(s, 0, sizeof *s);
    if (m->reserve) m->reserve(s, p, n_layer, max_slots);
    if (s->score_n > max_slots) s->score_n = max_slots;
    if (s->score_q < 1 || s->score_q > s->score_n) s->score_q = s->score_n;
}

void kr_kv_reserve_sizes(kr_kv_reservation *s, const kara_kv_params *p, const kr_kv_shape *shape, int32_t n_seq_max,
                         int32_t max_slots) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    kr_kv_reserve_shape(s, p, shape->n_layer, max_slots);
    if (!kr_kv_method_of(p)->reserve) return; /* full */
    /* per_layer: every group after the first holds its own positions
     * (kv_cache.c) and stored scores; the scores, selection and moves of an
     * event are reused group after group */
    s->per_layer = (size_t)n_seq_max * (size_t)(kr_kv_n_groups(p, shape->n_layer) - 1) * (size_t)max_slots *
        (sizeof(int32_t) + sizeof(float));
    s->ring = (size_t)n_seq_max * (size_t)s->n_scored * (size_t)s->ring_cap *
        kr_kv_row_bytes(t->query_cache_dtype, (int64_t)shape->n_head * shape->head_dim);
    if (s->needs_h2o) s->h2o = (size_t)n_seq_max * (size_t)shape->n_head * (size_t)max_slots * sizeof(float);
    /* the method's own state of every slot (lazy: last attended step and longest recurrence interval) */
    s->slot_states = (size_t)n_seq_max * (size_t)max_slots * s->slot_state;
    if (s->needs_redund)
        s->redund_scratch =
            kr_kv_redund_scratch_bytes(max_slots, shape->n_head_kv, shape->head_dim, KR_KV_SCORE_WORKERS);
    if (s->needs_scores) {
        int32_t n_buf = s->score_buf;
        if (n_buf >= s->score_n) n_buf = s->score_n - 1;
        kr_kv_score_shape sh = {s->score_n, n_buf, shape->n_head, shape->n_head_kv, shape->head_dim, t->n_sink};
        s->score_scratch = kr_kv_score_scratch_bytes_q(&sh, s->score_q, KR_KV_SCORE_WORKERS);
    }
    s->select_scratch = kr_kv_select_scratch_bytes(max_slots);
    /* layer and aggregated scores, and a window's scores gathered at an eviction */
    s->floats = 3 * (size_t)max_slots * sizeof(float);
    /* the kept slots; a window's token ids and selection, and every
     * window's count, at an eviction */
    s->keep = 4 * (size_t)max_slots * sizeof(int32_t);
    /* t2c.mode lines/line_tails: the flags of a region's line ends (the vocabulary's table, n_vocab bytes, is not counted) */
    if (kr_kv_selection_reads_lines(p)) s->keep += (size_t)max_slots;
    s->moves = (size_t)max_slots * sizeof(kr_kv_move);
}

uint64_t kr_kv_reserve_total(const kr_kv_reservation *s) {
    return s->ring + s->h2o + s->score_scratch + s->select_scratch + s->floats + s->keep + s->moves + s->per_layer +
        s->slot_states + s->redund_scratch;
}

uint64_t kr_kv_policy_bytes(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                            int32_t head_dim, int32_t n_seq_max, int32_t max_slots) {
    kr_kv_shape shape = {n_layer, n_head, n_head_kv, head_dim};
    kr_kv_reservation s;
    kr_kv_reserve_sizes(&s, p, &shape, n_seq_max, max_slots);
    return kr_kv_reserve_total(&s);
}

/* ---- the plan ---- */

/* Slots freed below the share at each on-demand eviction: a quarter of
 * an interval, in whole blocks, so a sequence at its share evicts about
 * every interval / 4 tokens instead of every block; at most an eighth of a
 * small share, which must still hold the prompt and the buffer. */
static int32_t auto_margin(const kara_kv_params *p, int64_t share) {
    int32_t B = p->block_size, m = (p->interval / 4 + B - 1) / B * B;
    int64_t cap = share / 8 / B * B;
    if (m > cap) m = (int32_t)cap;
    return m > B ? m : B;
}

/* The policy's per-slot buffers (scores, selection, moves, per-slot state)
 * are indexed by a sequence's slots, and a sequence never holds more slots
 * than the budget has KV rows for; sizing them by that instead of n_ctx
 * keeps a method's reservation from growing with the context it never
 * fills. */
static int32_t slots_within(uint64_t budget, uint64_t block_bytes, int32_t B, int32_t n_ctx) {
    if (!budget || !block_bytes) return n_ctx;
    uint64_t cap = budget / block_bytes * (uint64_t)B;
    if (cap < (uint64_t)B) cap = (uint64_t)B;
    return cap < (uint64_t)n_ctx ? (int32_t)cap : n_ctx;
}

static uint64_t reserved_for(const kara_kv_params *p, const kr_kv_shape *shape, int32_t n_seq_max, int32_t slots) {
    return kr_kv_policy_bytes(p, shape->n_layer, shape->n_head, shape->n_head_kv, shape->head_dim, n_seq_max, slots);
}

/* The smallest budget whose own reservation (which grows with the slots
 * the budget can hold) plus n_blocks blocks fits in it: a fixed point
 * reached from below, since both sides grow with the budget. */
static uint64_t budget_for(const kara_kv_params *p, const kr_kv_shape *shape, int32_t n_ctx, int32_t n_seq_max,
                           uint64_t n_blocks, bool scoring) {
    const uint64_t bb = kr_kv_block_bytes(p, shape), need = n_blocks * bb;
    uint64_t b = need;
    for (int i = 0; i < 64; i++) {
        uint64_t r = scoring ? reserved_for(p, shape, n_seq_max, slots_within(b, bb, p->block_size, n_ctx)) : 0;
        if (r + need <= b) return b;
        b = r + need;
    }
    return b;
}

static uint64_t least_budget(const kr_kv_plan *plan, uint64_t min_blocks) {
    return budget_for(&plan->p, &plan->shape, plan->n_ctx, plan->n_seq_max, min_blocks, plan->scoring);
}

uint64_t kr_kv_budget_for_blocks(const kara_kv_params *p, int32_t n_layer, int32_t n_head, int32_t n_head_kv,
                                 int32_t head_dim, int32_t n_seq_max, int32_t n_ctx, int32_t n_blocks) {
    kr_kv_shape shape = {n_layer, n_head, n_head_kv, head_dim};
    return budget_for(p, &shape, n_ctx, n_seq_max, (uint64_t)n_blocks, kr_kv_method_of(p)->kind(p) != KR_KV_KEEPS_ALL);
}

kara_status kr_kv_plan_make(kr_kv_plan *plan, const kara_kv_params *p_in, const kr_kv_shape *shape, int32_t n_ctx,
                            int32_t n_seq_max) {
    kara_kv_params eff = *p_in; /* p_in, but for the query ring's type (below) */
    const kara_kv_params *p = &eff;
    const kr_kv_tuning *t = kr_kv_tune(p);
    memset(plan, 0, sizeof *plan);
    if (p->block_size < 1 || n_ctx < 1 || n_seq_max < 1)
        return kr_set_error(KARA_ERR_ARG, "KV plan: block_size, n_ctx and n_seq_max must be >= 1");
    if ((unsigned)p->dtype > KARA_KV_Q4_0 || (unsigned)t->query_cache_dtype > KARA_KV_Q8_0)
        return kr_set_error(KARA_ERR_CONFIG,
                            "kv_cache.dtype %d or kara.query_cache_dtype %d is not a type (f16, f32, "
                            "q8_0 or q4_0 for the cache; f16, f32 or q8_0 for the query cache)",
                            (int)p->dtype, (int)t->query_cache_dtype);
    /* q8_0 query rows need whole blocks; a model whose n_head x head_dim is
     * not a multiple of 32 keeps its queries in f16 */
    if (((int64_t)shape->n_head * shape->head_dim) % kr_kv_dtype_block(kr_kv_tune(&eff)->query_cache_dtype))
        kr_kv_tune(&eff)->query_cache_dtype = KARA_KV_F16;
    const int64_t row = (int64_t)shape->n_head_kv * shape->head_dim;
    if (row % kr_kv_dtype_block(p->dtype))
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "kv_cache.dtype %s stores each slot's K and V rows in blocks of %d values, but this "
                            "model's rows hold %lld (n_head_kv %d x head_dim %d), not a multiple of %d: use f16 or "
                            "f32",
                            kara_kv_dtype_name(p->dtype), kr_kv_dtype_block(p->dtype), (long long)row, shape->n_head_kv,
                            shape->head_dim, kr_kv_dtype_block(p->dtype));
    if (t->rerotate_keys)
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "kara.rerotate_keys: true is not implemented (survivors keep their original positions, "
                            "docs/KARA_METHOD.md); set it to false");
    const kr_kv_method *m = kr_kv_method_of(p);
    kara_status st = m->check ? m->check(p) : KARA_OK;
    if (st) return st;
    plan->p = *p;
    plan->shape = *shape;
    plan->n_ctx = n_ctx;
    plan->n_seq_max = n_seq_max;
    const int32_t B = p->block_size;
    plan->block_bytes = kr_kv_block_bytes(p, shape);
    plan->blocks_per_seq = (n_ctx + B - 1) / B;
    bool window = kr_kv_params_periodic(p), on_demand = window && t->evict == KARA_KV_EVICT_ON_DEMAND;
    /* admission keeps reserve_blocks free only where a request's peak is an
     * estimate (per_window); elsewhere the share or the request's length
     * bounds it exactly */
    plan->reserve_blocks = window && !on_demand ? t->reserve_blocks : 0;
    /* every sequence whole, plus the admission reserve */
    int64_t whole = (int64_t)n_seq_max * plan->blocks_per_seq + plan->reserve_blocks;
    bool whole_fits = !p->budget || p->budget / plan->block_bytes >= (uint64_t)whole;
    bool share_whole = p->seq_tokens <= 0 || p->seq_tokens >= n_ctx;
    plan->scoring = m->kind(p) != KR_KV_KEEPS_ALL && !(on_demand && whole_fits && share_whole);
    plan->max_slots = slots_within(p->budget, plan->block_bytes, B, n_ctx);
    plan->reserved_bytes = plan->scoring ? reserved_for(p, shape, n_seq_max, plan->max_slots) : 0;
    int64_t blocks = whole;
    if (p->budget) {
        /* the least that works: the reservation and one block, or for an
         * at-budget method with the share set by the budget, the blocks of
         * a share whose budget_tokens holds what it protects of an empty
         * prompt (kr_kv_plan_holds names the need of a real one) */
        uint64_t min_blocks = 1;
        if (m->kind(p) == KR_KV_AT_BUDGET && p->seq_tokens <= 0) {
            int64_t least = (int64_t)(m->protects ? m->protects(p, t->n_sink) : t->n_sink) + kr_kv_trigger_slack(p);
            if (least > n_ctx) least = n_ctx;
            min_blocks = (uint64_t)n_seq_max * (uint64_t)((least + B - 1) / B);
        }
        uint64_t min_budget = least_budget(plan, min_blocks);
        if (p->budget < plan->reserved_bytes + plan->block_bytes)
            return kr_set_error(KARA_ERR_KV_BUDGET,
                                "KV budget of %llu bytes is too small: the smallest budget that works here is %llu "
                                "bytes (%.2f MiB): method %s reserves %llu bytes for query rings and scoring scratch "
                                "at this budget (more at a larger one, whose blocks hold more slots) and one block of "
                                "%d slots needs %llu bytes",
                                (unsigned long long)p->budget, (unsigned long long)min_budget,
                                (double)min_budget / 1048576.0, kara_kv_method_name(p->method),
                                (unsigned long long)plan->reserved_bytes, B, (unsigned long long)plan->block_bytes);
        uint64_t fit = (p->budget - plan->reserved_bytes) / plan->block_bytes;
        if (fit < (uint64_t)blocks) blocks = (int64_t)fit;
    }
    if (blocks > INT32_MAX / B) blocks = INT32_MAX / B;
    plan->n_blocks = (int32_t)blocks;
    /* the share: the pool split evenly; per_window methods keep their
     * retention and are capped only by an explicit seq_tokens */
    int64_t share = blocks / n_seq_max * B;
    if (share < B) share = B;
    if (p->seq_tokens > 0)
        share = p->seq_tokens;
    else if (window && !on_demand)
        share = n_ctx;
    if (share > n_ctx || (on_demand && !plan->scoring)) share = n_ctx;
    plan->seq_tokens = (int32_t)share;
    int32_t slack = kr_kv_trigger_slack(p);
    plan->budget_tokens =
        t->budget_tokens > 0 ? t->budget_tokens : (plan->seq_tokens - slack > 8 ? plan->seq_tokens - slack : 8);
    plan->margin = t->evict_margin > 0 ? t->evict_margin : auto_margin(p, plan->seq_tokens);
    return KARA_OK;
}

bool kr_kv_plan_preempts(const kr_kv_plan *plan) {
    return kr_kv_tune(&plan->p)->on_pool_exhausted == KARA_POOL_PREEMPT;
}

int64_t kr_kv_plan_blocks(const kr_kv_plan *plan, int64_t slots) {
    int32_t B = plan->p.block_size;
    return (slots + B - 1) / B;
}

static int64_t request_total(const kr_kv_plan *plan, int32_t n_prompt, int32_t n_predict) {
    int64_t total = n_predict < 0 ? (int64_t)plan->n_ctx : (int64_t)n_prompt + n_predict;
    return total < plan->n_ctx ? total : plan->n_ctx;
}

/* Per-window eviction: the prompt, about retention x interval slots kept by
 * every event so far, the evict_lag windows still whole, and the largest
 * window. */
static int64_t per_window_peak(const kara_kv_params *p, int32_t n_prompt, int64_t generated) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    int64_t front = n_prompt > t->n_sink ? n_prompt : t->n_sink;
    int64_t window = kr_kv_window_slots(p);
    int64_t events = generated > t->buffer ? (generated - t->buffer) / p->interval : 0;
    int64_t keep = lround(p->retention * p->interval);
    if (keep < t->min_keep) keep = t->min_keep;
    if (keep > p->interval) keep = p->interval;
    int64_t lagged = events < t->evict_lag ? events : t->evict_lag;
    return front + events * keep + lagged * (p->interval - keep) + (generated < window ? generated : window);
}

int64_t kr_kv_plan_peak_slots(const kr_kv_plan *plan, int32_t n_prompt, int32_t n_predict) {
    const kara_kv_params *p = &plan->p;
    int64_t total = request_total(plan, n_prompt, n_predict);
    int64_t peak = total;
    if (kr_kv_params_periodic(p)) {
        peak = plan->seq_tokens;
        if (kr_kv_tune(p)->evict == KARA_KV_EVICT_PER_WINDOW) {
            int64_t eager = per_window_peak(p, n_prompt, total - n_prompt);
            if (eager < peak) peak = eager;
        }
    } else if (kr_kv_method_kind(p) == KR_KV_AT_BUDGET) {
        int64_t b = (int64_t)plan->budget_tokens + kr_kv_trigger_slack(p);
        peak = n_prompt + 1 > b ? n_prompt + 1 : b;
    }
    return peak < total ? peak : total;
}

bool kr_kv_plan_holds(const kr_kv_plan *plan, int32_t P, int32_t n_predict, char *why, size_t why_size) {
    const kara_kv_params *p = &plan->p;
    const kr_kv_tuning *t = kr_kv_tune(p);
    int64_t total = request_total(plan, P, n_predict);
    int32_t front = P > t->n_sink ? P : t->n_sink, budget = plan->budget_tokens;
    if (why_size) why[0] = 0;
    if (kr_kv_params_periodic(p)) {
        /* at its share a sequence keeps its prompt, the buffer (the open
         * window is scored early when history runs short) and the eviction
         * margin; only scored history can go */
        int64_t need = (int64_t)front + t->buffer + plan->margin + 2;
        if (total <= plan->seq_tokens || need <= plan->seq_tokens) return true;
        snprintf(why, why_size,
                 "a sequence may hold %d KV slots (kv_cache.seq_tokens%s), but %d prompt tokens, the protected "
                 "buffer (kara.buffer %d), the eviction margin of %d and 2 slots for the open window and the next "
                 "token need %lld; raise kv_cache.budget or kv_cache.seq_tokens, or lower batch.max_concurrency",
                 plan->seq_tokens, p->seq_tokens > 0 ? "" : ": the budget's share per sequence", P, t->buffer,
                 plan->margin, (long long)need);
        return false;
    }
    bool ok = true;
    int32_t protect = front;
    const bool fits = t->budget_tokens <= 0;
    /* an event keeps at most the budget; a request that never passes
     * budget + trigger_slack never has one (a budget set by hand must
     * hold what the method protects even when this request would never
     * reach it: otherwise it is silently ignored) */
    const kr_kv_method *m = kr_kv_method_of(p);
    if (m->kind(p) == KR_KV_AT_BUDGET) {
        protect = m->protects ? m->protects(p, front) : front;
        ok = (fits && total < (int64_t)budget + kr_kv_trigger_slack(p)) || budget >= protect;
    }
    if (!ok && !fits)
        snprintf(why, why_size,
                 "baselines.budget_tokens %d is below the %d slots method %s protects for this request (%d prompt "
                 "tokens, attention sinks and its observation or recent window): set at least %d",
                 budget, protect, kara_kv_method_name(p->method), P, protect);
    else if (!ok) {
        int n = snprintf(why, why_size,
                         "method %s keeps at most %d slots per sequence here (baselines.budget_tokens), too few for "
                         "the %d slots it protects for this request (the share per sequence shrinks as "
                         "max_concurrency grows); lower max_concurrency, raise kv_cache.budget or set "
                         "baselines.budget_tokens",
                         kara_kv_method_name(p->method), budget, protect);
        /* the share that makes budget_tokens (share - slack) hold what it
         * protects, when the budget sets the share and the context can hold it */
        int64_t share = (int64_t)protect + kr_kv_trigger_slack(p), B = p->block_size;
        if (p->budget && p->seq_tokens <= 0 && share <= plan->n_ctx && n > 0 && (size_t)n < why_size) {
            uint64_t blocks = (uint64_t)plan->n_seq_max * (uint64_t)((share + B - 1) / B);
            snprintf(why + n, why_size - (size_t)n, "; the smallest kv_cache.budget that holds it is %llu bytes",
                     (unsigned long long)(plan->reserved_bytes + blocks * plan->block_bytes));
        }
    }
    return ok;
}
