/* kara.c - method kara (docs/KARA_METHOD.md): windows scored by their own
 * queries (kv_score.h, with the model's retention prior, kv_prior.h) and
 * kept by Token2Chunk or one of its ablations (t2c.mode); with
 * trigger: threshold (ablation A8) one event over the whole generated
 * cache at the token budget instead. */
#include <stdint.h>

#include "kv_method.h"
#include "kv_params.h"
#include "kv_policy_impl.h"
#include "kv_select.h"
#include "kv_tuning.h"
#include "status.h"

static bool threshold(const kara_kv_params *p) { return kr_kv_tune(p)->trigger == KARA_KV_TRIGGER_THRESHOLD; }

static kr_kv_kind kind(const kara_kv_params *p) { return threshold(p) ? KR_KV_AT_BUDGET : KR_KV_WINDOWS; }

static kara_status check(const kara_kv_params *p) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (t->t2c_mode != KR_T2C_POOLED_TOPK && (!(t->candidate_frac > 0) || t->max_gap < 1))
        return kr_set_error(KARA_ERR_CONFIG,
                            "kara.t2c.candidate_frac must be above 0 (got %g) and kara.t2c.max_gap at least 1 (got "
                            "%d)",
                            (double)t->candidate_frac, t->max_gap);
    if (kr_score_is_online(t->score_mode) && (threshold(p) || kr_kv_params_per_layer(p) || t->reads_weight > 0.0f))
        return kr_set_error(KARA_ERR_CONFIG,
                            "kara.score.mode: %s (the attention of the decode's own queries, over heads and layers) "
                            "does not combine with kara.trigger: threshold, kara.selection_scope: per_layer or "
                            "kara.score.reads_weight above 0",
                            kr_score_mode_name(t->score_mode));
    if (kr_kv_params_per_layer(p) && threshold(p))
        return kr_set_error(KARA_ERR_CONFIG,
                            "kara.selection_scope: per_layer does not combine with kara.trigger: threshold "
                            "(ablation A8 rescores the whole cache with one shared selection); use one of them");
    return KARA_OK;
}

static int32_t trigger_slack(const kara_kv_params *p) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (threshold(p)) return t->trigger_slack > 0 ? t->trigger_slack : p->interval;
    return 1;
}

static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    int32_t stride = kr_kv_layer_stride(t);
    if (kr_score_is_online(t->score_mode) && !threshold(p)) {
        /* no ring and no scorer: the forward pass's attention rows, summed
         * (online) or their maxima (online_max) */
        s->window_method = s->online_scores = s->needs_h2o = true;
        s->h2o_max = t->score_mode == KR_SCORE_ONLINE_MAX;
        s->score_n = kr_kv_window_slots(p);
        return;
    }
    s->needs_scores = true;
    s->score_buf = t->buffer;
    s->n_scored = (n_layer + stride - 1) / stride;
    if (threshold(p)) {
        /* ablation A8: the whole generated cache is scored, by the queries
         * of the newest slots: the last event's buffer and everything
         * generated since, at most slack + buffer of them at a steady
         * one-token-per-step pace */
        s->ring_cap = trigger_slack(p) + t->buffer + 1;
        s->score_n = max_slots;
        s->score_q = s->ring_cap;
        if (s->score_q > s->score_n) s->score_q = s->score_n;
        return;
    }
    s->window_method = true;
    s->ring_cap = kr_kv_window_slots(p);
    s->score_n = s->ring_cap;
    /* read tracking: every step's newest query's attention, summed like H2O's */
    s->needs_h2o = t->reads_weight > 0.0f;
}

/* trigger threshold keeps the prompt and the buffer */
static int32_t protects(const kara_kv_params *p, int32_t front) { return front + kr_kv_tune(p)->buffer; }

static bool reads_lines(const kara_kv_params *p) {
    return kr_kv_tune(p)->t2c_mode == KR_T2C_LINES || kr_kv_tune(p)->t2c_mode == KR_T2C_LINE_TAILS;
}

static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    if (t->t2c_mode == KR_T2C_POOLED_TOPK) /* ablation A4: Top-K after max-pool 7 instead of Token2Chunk */
        return kr_kv_select_pooled_topk(in->scores, in->n_c, k, 7, in->protect, keep, scratch, scratch_bytes);
    if (t->t2c_mode == KR_T2C_LINES)
        return kr_kv_select_lines(in->scores, in->n_c, k, t->max_gap, in->line_ends, in->protect, keep, scratch,
                                  scratch_bytes);
    const uint8_t *tails = t->t2c_mode == KR_T2C_LINE_TAILS ? in->line_ends : NULL;
    kr_kv_t2c_params c = {k, t->candidate_frac, t->max_gap, t->len_penalty, tails};
    return kr_kv_select_t2c(in->scores, in->n_c, &c, in->protect, keep, scratch, scratch_bytes);
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
static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    const int32_t *pos = kv->seqs[seq].pos;
    int32_t n = kv->seqs[seq].n, P = q->n_prompt, n_w = n - P;
    if (n_w < 2) return KARA_OK;
    int32_t b = kr_kv_tune(&pol->p)->buffer < n_w ? kr_kv_tune(&pol->p)->buffer : n_w - 1, n_c = n_w - b,
            k = pol->budget_tokens - P - b;
    if (k < 0) {
        /* the budget cannot hold the prompt and the buffer: keep everything
         * (the block pool still bounds memory), as snapkv does */
        kr_log(KARA_LOG_DEBUG,
               "kara (trigger threshold): budget of %d tokens below the prompt (%d) and buffer (%d) "
               "of sequence %d",
               pol->budget_tokens, P, b, seq);
        return KARA_OK;
    }
    if (k >= n_c) return KARA_OK;
    int32_t n_q = 1;
    while (n_q < n_w && n_q < pol->ring_cap && pos[n - 1 - n_q] == pos[n - 1] - n_q) n_q++;
    kara_status st = kr_kvp_score_prior(pol, seq, P, n_w, b, n_q, pos[n - 1] + 1 - n_w, 0, pol->n_layer, true);
    if (!st)
        st = kr_kv_select_window_k(&pol->p, pol->scores, q->tokens + P, kr_kvp_line_flags(pol, q->tokens + P, n_c), n_c,
                                   k, q->events, pol->keep, pol->select_scratch, pol->select_scratch_bytes);
    if (!st) st = kr_kvp_compact(pol, kv, seq, P, b, k, pol->scores);
    if (!st) q->events++;
    return st;
}

/* think_only stops the threshold events as it stops the periodic ones. */
static int32_t cache_limit(const kr_kv_policy *pol, int32_t seq) {
    return kr_kv_tune(&pol->p)->think_only && pol->seqs[seq].think_done
        ? INT32_MAX
        : pol->budget_tokens + kr_kv_trigger_slack(&pol->p) - 1;
}

/* Its settings, under kara.score and kara.t2c (configs/README.md): the
 * YAML keys with their bounds, and their defaults. The scorer's keys also
 * steer the baselines that score with it (kv_score.h). */
static const kr_enum_name auto_minus_one[] = {{"auto", -1}, {NULL, 0}};
static const key_spec keys[] = {
    {"kara.score.mode", K_ENUM, KR_TUNE(score_mode), 0, 0, kr_score_mode_names, 0,
     "which queries score a window's slots (online: the decode's own attention, no query ring)"},
    {"kara.score.softmax_over", K_ENUM, KR_TUNE(softmax_over), 0, 0, kr_softmax_over_names, 0,
     "the keys a query's softmax normalises over"},
    {"kara.score.n_sink", K_INT, KR_TUNE(n_sink), 0, 65536, NULL, 0, "sink keys for window_plus_sinks"},
    {"kara.score.exclude_self", K_BOOL, KR_TUNE(exclude_self), 0, 0, NULL, 0, "a slot's own query does not score it"},
    {"kara.score.gqa_reduce", K_ENUM, KR_TUNE(gqa_reduce), 0, 0, kr_gqa_reduce_names, 0,
     "reduction over the query heads of a group"},
    {"kara.score.layer_reduce", K_ENUM, KR_TUNE(layer_reduce), 0, 0, kr_layer_reduce_names, 0, "reduction over layers"},
    {"kara.score.layers", K_LAYERS, KR_TUNE(layer_stride), 1, 4096, NULL, 0, "which layers score: all, or every N-th"},
    {"kara.score.value_aware", K_BOOL, KR_TUNE(value_aware), 0, 0, NULL, 0,
     "scale a slot's attention by its value's L1 norm (VATP)"},
    {"kara.score.min_distance", K_INT, KR_TUNE(min_distance), 1, 1 << 20, NULL, 0,
     "online_max: reads from queries fewer positions after a slot do not count"},
    {"kara.score.reads_weight", K_FLOAT, KR_TUNE(reads_weight), 0, 100, NULL, 0,
     "weight of the attention a slot receives after its window; 0: off"},
    {"kara.score.prior_weight", K_FLOAT, KR_TUNE(prior_weight), 0, 100, auto_minus_one, 0,
     "weight of the model's retention prior; auto: 16 with a prior, else off"},
    {"kara.t2c.mode", K_ENUM, KR_TUNE(t2c_mode), 0, 0, kr_t2c_mode_names, 0,
     "selection after scoring (Token2Chunk or an ablation)"},
    {"kara.t2c.candidate_frac", K_FLOAT, KR_TUNE(candidate_frac), 0, 1, NULL, 0,
     "Top-K candidates as a share of the kept slots"},
    {"kara.t2c.max_gap", K_INT, KR_TUNE(max_gap), 0, 65536, NULL, 0, "longest gap a chunk may fill"},
    {"kara.t2c.len_penalty", K_FLOAT, KR_TUNE(len_penalty), 0, 100, NULL, 0, "beta in (1 + gap)^-beta"},
};

static void defaults(kr_kv_tuning *t) {
    t->score_mode = KR_SCORE_BIDIRECTIONAL;
    t->softmax_over = KR_SOFTMAX_WINDOW;
    t->n_sink = 4;
    t->exclude_self = true;
    t->gqa_reduce = KR_REDUCE_MEAN;
    t->layer_reduce = KR_REDUCE_MEAN;
    t->layer_stride = 1;
    t->value_aware = true;
    t->min_distance = 16;            /* every slot is read by its neighbours; oracle_text.py */
    t->reads_weight = 0.0f;          /* off: with the retention prior it lost answers (KV_COMPRESSION.md) */
    t->prior_weight = -1.0f;         /* auto: KR_PRIOR_WEIGHT_AUTO when the model has a retention prior, else off */
    t->t2c_mode = KR_T2C_LINE_TAILS; /* chunks lost the last digit of result lines (KV_COMPRESSION.md) */
    t->candidate_frac = 0.5f;
    t->max_gap = 16;
    t->len_penalty = 1.0f;
}

const kr_kv_method kr_kvm_kara = {.name = "kara",
                                  .kind = kind,
                                  .check = check,
                                  .reserve = reserve,
                                  .trigger_slack = trigger_slack,
                                  .protects = protects,
                                  .keeps_prompt = kr_kv_keeps_prompt_always,
                                  .select_window = select_window,
                                  .cache_event = cache_event,
                                  .cache_limit = cache_limit,
                                  .forced_events = threshold,
                                  .per_layer = true,
                                  .reads_lines = reads_lines,
                                  .uses_prior = true,
                                  .prior_by_default = true,
                                  .keys = keys,
                                  .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                  .defaults = defaults};
