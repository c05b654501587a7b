/* kv_evict.c - eviction on demand (docs/KV_COMPRESSION.md, "Eviction on
 * demand"): windows are scored when they close and only tagged; when a
 * sequence must make room, every scored window gives up the same fraction
 * of the slots it had, its lowest-scored first (or, kara.evict_rank
 * global, the lowest-scored slots of all windows go). */
#include <math.h>
#include <string.h>

#include "kv_policy_impl.h"
#include "kv_select.h"
#include "status.h"
#include "kv_tuning.h"

kara_status kr_kvp_score_window(kr_kv_policy *pol, int32_t seq) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    const kara_kv_params *p = &pol->p;
    const kr_kv_tuning *t = kr_kv_tune(&pol->p);
    int32_t F = q->frontier, n = kv->seqs[seq].n, b = t->buffer;
    /* as it stood when due: `interval` compressible slots and the buffer;
     * a window closed early (kr_kv_policy_before_append) is what there is */
    int32_t n_c = n - F - b < p->interval ? n - F - b : p->interval, n_w = n_c + b;
    if (n_c < 1) return KARA_OK;
    const int32_t q_first_pos = kv->seqs[seq].pos[F], n_groups = kv->n_groups;
    for (int32_t g = 0; g < n_groups; g++) {
        float *store = q->scores + (size_t)g * (size_t)pol->max_slots + F;
        if (pol->needs_scores) {
            int32_t l0 = n_groups > 1 ? g * kv->layers_per_group : 0, l1 = n_groups > 1 ? l0 + 1 : pol->n_layer;
            kara_status st = kr_kvp_score_prior(pol, seq, F, n_w, b, n_w, q_first_pos, l0, l1, g == 0);
            if (st) return st;
            memcpy(store, pol->scores, (size_t)n_c * sizeof(float));
        } else {
            kara_status st = kr_kvp_unscored(pol, seq, F, n_c); /* zeros or online sums, with the prior */
            if (st) return st;
            memcpy(store, pol->scores, (size_t)n_c * sizeof(float));
        }
    }
    for (int32_t i = F; i < F + n_c; i++) q->win[i] = q->n_win;
    q->win_size[q->n_win++] = n_c;
    q->frontier = F + n_c;
    q->events++;
    q->due_steps = 0;
    return KARA_OK;
}

int32_t kr_kvp_evictable(const kr_kv_policy *pol, int32_t seq) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t n = 0;
    if (!q->win) return 0;
    for (int32_t i = q->n_prompt; i < q->frontier; i++) n += q->win[i] >= 0;
    return n;
}

/* Slots window w keeps at fraction f of its original size. */
static int32_t keep_at(double f, int32_t held, int32_t size) {
    int32_t k = (int32_t)floor((f < 1.0 ? f : 1.0) * size + 0.5);
    return k < held ? k : held;
}

/* The fraction: the largest f (to 2^-40 of its range) whose per-window
 * keeps (win_keep[w] = min(held, round(f x decay^age x size)), age 0 for
 * the newest window) total at most `target`. decay 1 gives every window
 * the same fraction; below 1 older windows give up more, which on natural
 * text keeps more of the recent past, as a sliding window does. held
 * counts come in win_keep and are replaced by the keeps. */
static void fit_fraction(int32_t *win_keep, const int32_t *win_size, int32_t n_win, int64_t target, double decay) {
    /* bisection on log2 f, so a long history's range (decay^-n_win) cannot overflow */
    const double step = log2(decay);
    double lo = -64.0, hi = -step * (double)(n_win - 1); /* at hi even the oldest window keeps all */
    for (int it = 0; it < 64; it++) {
        double mid = 0.5 * (lo + hi);
        int64_t total = 0;
        for (int32_t w = 0; w < n_win; w++)
            total += keep_at(exp2(mid + step * (double)(n_win - 1 - w)), win_keep[w], win_size[w]);
        if (total <= target)
            lo = mid;
        else
            hi = mid;
    }
    for (int32_t w = 0; w < n_win; w++)
        win_keep[w] = keep_at(exp2(lo + step * (double)(n_win - 1 - w)), win_keep[w], win_size[w]);
}

/* pol->gather = the scores of slots [i, i + held) of one window. With read
 * tracking, what the slots received since their window became due is added:
 * both terms divided by their maximum over the window (a term that is zero
 * throughout adds nothing), the reads times reads_weight
 * (docs/KARA_METHOD.md section 7.4). */
static void gather_scores(kr_kv_policy *pol, const kr_kv_policy_seq *q, const float *scores, int32_t i, int32_t held) {
    float *g = pol->gather;
    memcpy(g, scores + i, (size_t)held * sizeof(float));
    if (!q->h2o_acc || kr_kv_tune(&pol->p)->reads_weight <= 0.0f) return;
    const float *r = q->h2o_acc + i;
    float smax = 0.0f, rmax = 0.0f;
    for (int32_t t = 0; t < held; t++) {
        smax = g[t] > smax ? g[t] : smax;
        rmax = r[t] > rmax ? r[t] : rmax;
    }
    const float sw = smax > 0.0f ? 1.0f / smax : 0.0f,
                rw = rmax > 0.0f ? kr_kv_tune(&pol->p)->reads_weight / rmax : 0.0f;
    for (int32_t t = 0; t < held; t++) g[t] = g[t] * sw + r[t] * rw;
}

/* Build pol->keep (relative to P) for selection group g: every slot of
 * [P, F) kept whole, and the win_keep[w] best slots of each window w by
 * the method's selection on the group's stored scores. Returns the count. */
static kara_status select_group(kr_kv_policy *pol, int32_t seq, int32_t g, const int32_t *win_keep, int32_t *k_out) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    const float *scores = q->scores + (size_t)g * (size_t)pol->max_slots;
    int32_t P = q->n_prompt, F = q->frontier, k = 0;
    for (int32_t i = P; i < F;) {
        int32_t w = q->win[i], j = i + 1;
        while (j < F && q->win[j] == w) j++;
        int32_t held = j - i;
        if (w < 0 || win_keep[w] >= held) {
            for (int32_t t = i; t < j; t++) pol->keep[k++] = t - P;
        } else if (win_keep[w] > 0) {
            gather_scores(pol, q, scores, i, held);
            memcpy(pol->gather_tokens, q->tokens + i, (size_t)held * sizeof(int32_t));
            uint64_t seed = ((uint64_t)q->evictions << 32) ^ (uint64_t)w;
            const uint8_t *lines = kr_kvp_line_flags(pol, pol->gather_tokens, held);
            kara_status st =
                kr_kv_select_window_k(&pol->p, pol->gather, pol->gather_tokens, lines, held, win_keep[w], seed,
                                      pol->gather_keep, pol->select_scratch, pol->select_scratch_bytes);
            if (st) return st;
            for (int32_t t = 0; t < win_keep[w]; t++) pol->keep[k++] = i - P + pol->gather_keep[t];
        }
        i = j;
    }
    *k_out = k;
    return KARA_OK;
}

/* Keep win_keep[w] slots of every window w of seq's scored history (the
 * rest of [P, F) whole) and move the survivors and the open window down. */
static kara_status apply_keeps(kr_kv_policy *pol, int32_t seq, const int32_t *win_keep) {
    kr_kv_cache *kv = pol->kv;
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t P = q->n_prompt, F = q->frontier, n = kv->seqs[seq].n;
    /* groups last to first: group 0, whose moves the token ids and windows
     * follow, moves last, so every selection reads them unmoved */
    int32_t k = -1;
    kara_status st = KARA_OK;
    for (int32_t g = kv->n_groups - 1; g >= 0 && !st; g--) {
        int32_t k_g = 0;
        st = select_group(pol, seq, g, win_keep, &k_g);
        if (!st && k >= 0 && k_g != k)
            st = kr_set_error(KARA_ERR_INTERNAL, "kv eviction: group %d keeps %d slots, group %d kept %d", g, k_g,
                              g + 1, k);
        k = k_g;
        if (!st) st = kr_kvp_compact_group(pol, kv, seq, P, n - F, k, NULL, g);
    }
    if (st) return st;
    kr_kvp_compact_release(pol, kv, seq, P + k + (n - F));
    q->frontier = q->reads_grid = P + k;
    q->evictions++;
    return KARA_OK;
}

/* Count the slots each window of seq still holds into win_keep; returns
 * their total. */
static int64_t count_held(const kr_kv_policy_seq *q, int32_t *win_keep) {
    int64_t held = 0;
    memset(win_keep, 0, (size_t)q->n_win * sizeof(int32_t));
    for (int32_t i = q->n_prompt; i < q->frontier; i++)
        if (q->win[i] >= 0) {
            win_keep[q->win[i]]++;
            held++;
        }
    return held;
}

/* online_max: a slot's score is the largest read it has had, which goes
 * on growing after its window was scored; before an eviction the stored
 * scores of all scored history become the maxima as they are now (with
 * the prior added, as when a window is scored). */
static kara_status refresh_online_max(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t P = q->n_prompt, n = q->frontier - P;
    if (!pol->h2o_max || n < 1) return KARA_OK;
    kara_status st = kr_kvp_unscored(pol, seq, P, n);
    for (int32_t g = 0; g < pol->kv->n_groups && !st; g++)
        memcpy(q->scores + (size_t)g * (size_t)pol->max_slots + P, pol->scores, (size_t)n * sizeof(float));
    return st;
}

/* A float's bits as an unsigned key in the float's order. */
static uint32_t order_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* kara.evict_rank global: win_keep[w] = how many of window w's slots are
 * among the `target` best-scored of all scored history (group 0's stored
 * scores). The cut is found on the scores' order keys by bisection; slots
 * tied at the cut go to the newest windows first. */
static void rank_global(const kr_kv_policy_seq *q, int32_t *win_keep, int64_t target) {
    int32_t P = q->n_prompt, F = q->frontier;
    uint64_t lo = 0, hi = (uint64_t)UINT32_MAX + 1; /* the cut: the smallest key with at most target above it */
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        int64_t above = 0;
        for (int32_t i = P; i < F; i++) above += q->win[i] >= 0 && order_key(q->scores[i]) > mid;
        if (above <= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    int64_t kept = 0;
    memset(win_keep, 0, (size_t)q->n_win * sizeof(int32_t));
    for (int32_t i = P; i < F; i++)
        if (q->win[i] >= 0 && order_key(q->scores[i]) > lo) {
            win_keep[q->win[i]]++;
            kept++;
        }
    for (int32_t i = F - 1; i >= P && kept < target; i--)
        if (q->win[i] >= 0 && order_key(q->scores[i]) == lo) {
            win_keep[q->win[i]]++;
            kept++;
        }
}

kara_status kr_kvp_evict_even(kr_kv_policy *pol, int32_t seq, int32_t drop) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (drop <= 0 || q->n_win == 0) return KARA_OK;
    kara_status st = refresh_online_max(pol, seq);
    if (st) return st;
    int32_t *win_keep = pol->win_keep;
    int64_t held = count_held(q, win_keep);
    if (drop > held) drop = (int32_t)held;
    if (kr_kv_tune(&pol->p)->evict_rank == KR_EVICT_RANK_GLOBAL)
        rank_global(q, win_keep, held - drop);
    else
        fit_fraction(win_keep, q->win_size, q->n_win, held - drop, kr_kv_tune(&pol->p)->evict_decay);
    return apply_keeps(pol, seq, win_keep);
}

kara_status kr_kvp_compress_aged(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t last = q->n_win - kr_kv_tune(&pol->p)->evict_lag; /* windows [n_done, last) are due */
    if (last <= q->n_done) return KARA_OK;
    int32_t *win_keep = pol->win_keep;
    count_held(q, win_keep);
    bool any = false;
    for (int32_t w = q->n_done; w < last; w++) {
        int32_t k = kr_kv_keep_count(q->win_size[w], pol->p.retention, kr_kv_tune(&pol->p)->min_keep);
        if (k < win_keep[w]) {
            win_keep[w] = k;
            any = true;
        }
    }
    q->n_done = last;
    if (!any) return KARA_OK;
    kara_status st = refresh_online_max(pol, seq);
    return st ? st : apply_keeps(pol, seq, win_keep);
}

/* Are the queries of seq's open window [F, n) all in the ring (or not
 * needed by the method)? */
bool kr_kvp_queries_kept(const kr_kv_policy *pol, int32_t seq, int32_t n) {
    return !pol->needs_scores || n - pol->seqs[seq].frontier <= pol->ring_cap;
}

/* The on-demand plan of appending n_new slots to seq, changing nothing:
 * how many slots of scored history an eviction drops to keep the sequence
 * within its share (0: none), and whether the open window must be scored
 * first (a chat turn always closes it; an eviction when scored history
 * alone is too short). KARA_ERR_KV_BUDGET when even that is not enough. */
kara_status kr_kvp_on_demand_plan(const kr_kv_policy *pol, int32_t seq, int32_t n_new, int32_t *drop,
                                  bool *score_first) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    int32_t n = pol->kv->seqs[seq].n, share = pol->plan.seq_tokens,
            open = n - q->frontier - kr_kv_tune(&pol->p)->buffer;
    bool scorable =
        open >= 1 && kr_kvp_queries_kept(pol, seq, n) && !(kr_kv_tune(&pol->p)->think_only && q->think_done);
    int32_t need = n + n_new - share, evictable = kr_kvp_evictable(pol, seq);
    *drop = 0;
    *score_first = n_new > 1 && !q->generated; /* a chat turn; a verify batch is generation */
    if (need <= 0) return KARA_OK;
    if (evictable < need) *score_first = true;
    /* Scored history is not cut below kara.retention of what its windows
     * held when scored while the open window can share the cut: otherwise,
     * between two due windows, the only scored window is whittled to
     * nothing (and with it what later steps read) while the open window
     * grows to its due size. */
    if (!*score_first && scorable) {
        int64_t scored = 0;
        for (int32_t w = 0; w < q->n_win; w++) scored += q->win_size[w];
        int32_t cut = need + pol->plan.margin < evictable ? need + pol->plan.margin : evictable;
        if ((double)(evictable - cut) < (double)pol->p.retention * (double)scored) *score_first = true;
    }
    if (*score_first && scorable) evictable += open;
    if (evictable < need)
        return kr_set_error(KARA_ERR_KV_BUDGET,
                            "sequence %d cannot stay within its share of %d KV slots (kv_cache.seq_tokens): it "
                            "needs %d more, and only %d of its %d slots are scored history that may be evicted "
                            "(the prompt, text kept whole and the buffer hold the rest)",
                            seq, share, need, evictable, n);
    *drop = need + pol->plan.margin < evictable ? need + pol->plan.margin : evictable;
    return KARA_OK;
}
