/* kv_select.c - slot selection for Kara and its baselines
 * (docs/KARA_METHOD.md sections 6 and 11); see kv_select.h for the rules
 * every method shares. */
#include "kv_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_method.h"
#include "status.h"
#include "kv_tuning.h"

/* A slot and its ranking key. */
typedef struct rank_entry {
    float s;
    int32_t slot;
} rank_entry;

/* A run of slots [lo, lo + len) with a score (Token2Chunk chunk or chunkkv chunk). */
typedef struct chunk_entry {
    double score;
    int32_t len;
    int32_t lo;
} chunk_entry;

typedef struct select_scratch {
    rank_entry *rank;
    chunk_entry *chunk;
    float *pooled;
    uint8_t *flag;
} select_scratch;

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t kr_kv_select_scratch_bytes(int32_t n) {
    size_t m = n > 0 ? (size_t)n : 1;
    return 64 + align64(m * sizeof(rank_entry)) + align64(m * sizeof(chunk_entry)) + align64(m * sizeof(float)) +
        align64(m);
}

static kara_status scratch_split(const char *who, int32_t n, void *scratch, size_t bytes, select_scratch *out) {
    size_t need = kr_kv_select_scratch_bytes(n);
    if (!scratch || bytes < need)
        return kr_set_error(KARA_ERR_ARG, "%s: scratch of %zu bytes, need %zu for %d slots", who, scratch ? bytes : 0,
                            need, n);
    size_t m = n > 0 ? (size_t)n : 1;
    uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    out->rank = (rank_entry *)p;
    p += align64(m * sizeof(rank_entry));
    out->chunk = (chunk_entry *)p;
    p += align64(m * sizeof(chunk_entry));
    out->pooled = (float *)p;
    p += align64(m * sizeof(float));
    out->flag = p;
    memset(out->flag, 0, m);
    return KARA_OK;
}

int32_t kr_kv_keep_count(int32_t n_c, float retention, int32_t min_keep) {
    if (n_c <= 0) return 0;
    double k = round((double)retention * (double)n_c);
    if (!(k >= 0)) k = 0; /* NaN or negative retention */
    if (k < min_keep) k = min_keep;
    if (k > n_c) k = n_c;
    return (int32_t)k;
}

int32_t kr_kv_candidate_count(int32_t k, float candidate_frac) {
    double m = round((double)candidate_frac * (double)k);
    if (!(m >= 2)) m = 2;
    if (m > k) m = k;
    return (int32_t)m;
}

/* ------------------------------------------------------------------------ */
/* Ranking helpers                                                           */
/* ------------------------------------------------------------------------ */

static float score_key(float x) { return isnan(x) ? -INFINITY : x; }

/* Descending score, ties to the lower slot: a strict total order, so qsort's
 * instability cannot change the result. */
static int cmp_rank(const void *pa, const void *pb) {
    const rank_entry *a = pa, *b = pb;
    if (a->s > b->s) return -1;
    if (a->s < b->s) return 1;
    return (a->slot > b->slot) - (a->slot < b->slot);
}

static void rank_by(const float *s, int32_t n, rank_entry *r) {
    for (int32_t j = 0; j < n; j++) {
        r[j].s = score_key(s[j]);
        r[j].slot = j;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_rank);
}

/* Flag the first `count` unflagged slots of the ranking; returns how many. */
static int32_t take_ranked(const rank_entry *r, int32_t n, uint8_t *flag, int32_t count) {
    int32_t got = 0;
    for (int32_t t = 0; t < n && got < count; t++) {
        if (flag[r[t].slot]) continue;
        flag[r[t].slot] = 1;
        got++;
    }
    return got;
}

/* The kept slots of the threshold baselines in order: the protected front [0, lo), the `take` best of the middle
 * [lo, lo + n_mid) by s_mid (its scores, from lo), and the tail [hi, n). Returns how many. */
static int32_t keep_front_best_tail(const float *s_mid, int32_t lo, int32_t n_mid, int32_t take, int32_t hi, int32_t n,
                                    const select_scratch *w, int32_t *keep) {
    rank_by(s_mid, n_mid, w->rank);
    take_ranked(w->rank, n_mid, w->flag, take);
    int32_t c = 0;
    for (int32_t j = 0; j < lo; j++) keep[c++] = j;
    for (int32_t j = 0; j < n_mid; j++)
        if (w->flag[j]) keep[c++] = lo + j;
    for (int32_t j = hi; j < n; j++) keep[c++] = j;
    return c;
}

static bool is_protected(const kr_kv_protect *pr, int32_t j) {
    if (!pr || !pr->tokens || pr->n_ids <= 0) return false;
    for (int32_t t = 0; t < pr->n_ids; t++)
        if (pr->tokens[j] == pr->ids[t]) return true;
    return false;
}

/* Flag the protected slots, at most k of them: by rank when a ranking is
 * given, else the most recent. Returns the count flagged. */
static int32_t flag_protected(const kr_kv_protect *pr, int32_t n, int32_t k, const rank_entry *r, uint8_t *flag) {
    int32_t got = 0;
    if (r) {
        for (int32_t t = 0; t < n && got < k; t++)
            if (is_protected(pr, r[t].slot)) {
                flag[r[t].slot] = 1;
                got++;
            }
    } else {
        for (int32_t j = n - 1; j >= 0 && got < k; j--)
            if (is_protected(pr, j)) {
                flag[j] = 1;
                got++;
            }
    }
    return got;
}

/* Write the flagged slots in ascending order; returns their count. */
static int32_t emit(const uint8_t *flag, int32_t n, int32_t *keep) {
    int32_t c = 0;
    for (int32_t j = 0; j < n; j++)
        if (flag[j]) keep[c++] = j;
    return c;
}

static kara_status check_window(const char *who, int32_t n_c, int32_t k, const int32_t *keep) {
    if (n_c < 0 || k < 0 || k > n_c) return kr_set_error(KARA_ERR_ARG, "%s: keep %d of %d slots", who, k, n_c);
    if (!keep && k > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL output", who);
    return KARA_OK;
}

/* Emit and verify the count: a mismatch is a bug in this file. */
static kara_status finish_window(const char *who, const uint8_t *flag, int32_t n_c, int32_t k, int32_t *keep) {
    int32_t c = emit(flag, n_c, keep);
    if (c != k) return kr_set_error(KARA_ERR_INTERNAL, "%s: selected %d slots instead of %d", who, c, k);
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Token2Chunk                                                               */
/* ------------------------------------------------------------------------ */

/* phi descending, then the shorter gap, then the lower slot. */
static int cmp_chunk_t2c(const void *pa, const void *pb) {
    const chunk_entry *a = pa, *b = pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* line_tails: the value a later step copies is a whole run of digits up to
 * the newline, but a chunk ends at its last strong candidate, and the digit
 * after it went (c5+p1=4830 for p1=4836, KV_COMPRESSION.md). Each flagged
 * candidate, in rank order, whose line ends within KR_T2C_LINE_TAIL slots
 * brings the unflagged rest of it while that fits in `left`; returns what
 * is left. */
static int32_t take_line_tails(select_scratch *w, int32_t n_c, const uint8_t *line_ends, int32_t left) {
    for (int32_t t = 0; t < n_c && left > 0; t++) {
        const int32_t j = w->rank[t].slot;
        if (!w->flag[j] || line_ends[j]) continue;
        int32_t e = j + 1, add = 0;
        while (e < n_c && e - j <= KR_T2C_LINE_TAIL && !line_ends[e]) e++;
        if (e >= n_c || e - j > KR_T2C_LINE_TAIL) continue; /* no line end near enough */
        for (int32_t i = j + 1; i <= e; i++) add += !w->flag[i];
        if (add > left) continue;
        for (int32_t i = j + 1; i <= e; i++) w->flag[i] = 1;
        left -= add;
    }
    return left;
}

kara_status kr_kv_select_t2c(const float *s, int32_t n_c, const kr_kv_t2c_params *p, const kr_kv_protect *protect,
                             int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "token2chunk";
    if (!p || (!s && n_c > 0)) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores or parameters", who);
    kara_status st = check_window(who, n_c, p->k, keep);
    if (st != KARA_OK) return st;
    if (!(p->candidate_frac > 0.0f && p->candidate_frac <= 1.0f) || p->max_gap < 1 || !(p->len_penalty >= 0.0f) ||
        isinf(p->len_penalty))
        return kr_set_error(KARA_ERR_ARG, "%s: candidate_frac %g (0, 1], max_gap %d (>= 1), len_penalty %g (>= 0)", who,
                            (double)p->candidate_frac, p->max_gap, (double)p->len_penalty);
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    const int32_t k = p->k;
    if (k == 0) return KARA_OK;

    rank_by(s, n_c, w.rank);
    int32_t n_prot = flag_protected(protect, n_c, k, w.rank, w.flag);
    int32_t m = kr_kv_candidate_count(k, p->candidate_frac);
    if (m < n_prot) m = n_prot;
    m = n_prot + take_ranked(w.rank, n_c, w.flag, m - n_prot);
    int32_t left = k - m;
    if (p->line_ends) left = take_line_tails(&w, n_c, p->line_ends, left);

    /* chunks between consecutive candidates, scored by endpoint importance
     * per token spent */
    float smax = -INFINITY;
    for (int32_t j = 0; j < n_c; j++) smax = score_key(s[j]) > smax ? score_key(s[j]) : smax;
    const double dmax = (double)smax; /* u = s / max over C; all u = 0 when max <= 0 */
    int32_t n_chunk = 0, prev = -1;
    for (int32_t j = 0; j < n_c; j++) {
        if (!w.flag[j]) continue;
        if (prev >= 0) {
            int32_t g = j - prev - 1;
            if (g >= 1 && g <= p->max_gap) {
                double u0 = dmax > 0 ? (double)score_key(s[prev]) / dmax : 0.0;
                double u1 = dmax > 0 ? (double)score_key(s[j]) / dmax : 0.0;
                chunk_entry *c = &w.chunk[n_chunk++];
                c->score = ((u0 + u1) / 2.0) * pow(1.0 + (double)g, -(double)p->len_penalty);
                c->len = g;
                c->lo = prev;
            }
        }
        prev = j;
    }
    qsort(w.chunk, (size_t)n_chunk, sizeof *w.chunk, cmp_chunk_t2c);

    for (int32_t t = 0; t < n_chunk && left > 0; t++) {
        const chunk_entry *c = &w.chunk[t];
        if (c->len > left) continue;
        for (int32_t j = c->lo + 1; j <= c->lo + c->len; j++) w.flag[j] = 1;
        left -= c->len;
    }
    if (left > 0) take_ranked(w.rank, n_c, w.flag, left);
    return finish_window(who, w.flag, n_c, k, keep);
}

/* ------------------------------------------------------------------------ */
/* Other window methods                                                      */
/* ------------------------------------------------------------------------ */

/* out[j] = max (or mean) of s over [j - kernel/2, j + kernel/2] clipped to [0, n). */
static void pool_scores(const float *s, int32_t n, int32_t kernel, kr_reduce how, float *out) {
    const int32_t half = kernel / 2;
    for (int32_t j = 0; j < n; j++) {
        int32_t a = j - half < 0 ? 0 : j - half, b = j + half >= n ? n - 1 : j + half;
        if (how == KR_REDUCE_MEAN) {
            float sum = 0.0f;
            for (int32_t t = a; t <= b; t++) sum += score_key(s[t]);
            out[j] = sum / (float)(b - a + 1);
        } else {
            float m = -INFINITY;
            for (int32_t t = a; t <= b; t++) m = score_key(s[t]) > m ? score_key(s[t]) : m;
            out[j] = m;
        }
    }
}

kara_status kr_kv_select_pooled_topk(const float *s, int32_t n_c, int32_t k, int32_t kernel,
                                     const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "pooled top-k";
    kara_status st = check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    if (!s && n_c > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores", who);
    if (kernel < 1 || kernel % 2 == 0)
        return kr_set_error(KARA_ERR_ARG, "%s: kernel %d must be odd and >= 1", who, kernel);
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    if (k == 0) return KARA_OK;
    pool_scores(s, n_c, kernel, KR_REDUCE_MAX, w.pooled);
    rank_by(w.pooled, n_c, w.rank);
    int32_t got = flag_protected(protect, n_c, k, w.rank, w.flag);
    take_ranked(w.rank, n_c, w.flag, k - got);
    return finish_window(who, w.flag, n_c, k, keep);
}

/* mean descending, then the lower chunk */
static int cmp_chunk_mean(const void *pa, const void *pb) {
    const chunk_entry *a = pa, *b = pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Sort the chunks by score (ties to the lower chunk), take each whole while
 * its unkept slots fit in `left`, then the best-ranked single slots. */
static void take_chunks(select_scratch *w, int32_t n_chunk, int32_t n_c, int32_t left) {
    qsort(w->chunk, (size_t)n_chunk, sizeof *w->chunk, cmp_chunk_mean);
    for (int32_t t = 0; t < n_chunk && left > 0; t++) {
        const chunk_entry *c = &w->chunk[t];
        int32_t unkept = 0;
        for (int32_t j = c->lo; j < c->lo + c->len; j++) unkept += !w->flag[j];
        if (unkept == 0 || unkept > left) continue;
        for (int32_t j = c->lo; j < c->lo + c->len; j++) w->flag[j] = 1;
        left -= unkept;
    }
    if (left > 0) take_ranked(w->rank, n_c, w->flag, left);
}

kara_status kr_kv_select_chunks(const float *s, int32_t n_c, int32_t k, int32_t chunk_len, const kr_kv_protect *protect,
                                int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "chunkkv";
    kara_status st = check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    if (!s && n_c > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores", who);
    if (chunk_len < 1) return kr_set_error(KARA_ERR_ARG, "%s: chunk_len %d < 1", who, chunk_len);
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    if (k == 0) return KARA_OK;
    rank_by(s, n_c, w.rank);
    int32_t left = k - flag_protected(protect, n_c, k, w.rank, w.flag);

    int32_t n_chunk = 0;
    for (int32_t lo = 0; lo < n_c; lo += chunk_len) {
        int32_t len = lo + chunk_len <= n_c ? chunk_len : n_c - lo;
        double sum = 0.0;
        for (int32_t j = lo; j < lo + len; j++) sum += (double)score_key(s[j]);
        chunk_entry *c = &w.chunk[n_chunk++];
        c->score = sum / (double)len;
        c->len = len;
        c->lo = lo;
    }
    take_chunks(&w, n_chunk, n_c, left);
    return finish_window(who, w.flag, n_c, k, keep);
}

kara_status kr_kv_select_lines(const float *s, int32_t n_c, int32_t k, int32_t max_len, const uint8_t *line_ends,
                               const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "token2chunk (lines)";
    kara_status st = check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    if (!s && n_c > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores", who);
    if (max_len < 1) return kr_set_error(KARA_ERR_ARG, "%s: max_gap %d < 1", who, max_len);
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    if (k == 0) return KARA_OK;
    rank_by(s, n_c, w.rank);
    int32_t left = k - flag_protected(protect, n_c, k, w.rank, w.flag);
    int32_t n_chunk = 0;
    for (int32_t lo = 0; lo < n_c;) {
        int32_t hi = lo; /* the line (or piece) is [lo, hi] */
        while (hi + 1 < n_c && hi - lo + 1 < max_len && !(line_ends && line_ends[hi])) hi++;
        float best = -INFINITY;
        for (int32_t j = lo; j <= hi; j++) best = score_key(s[j]) > best ? score_key(s[j]) : best;
        chunk_entry *c = &w.chunk[n_chunk++];
        c->score = (double)best;
        c->len = hi - lo + 1;
        c->lo = lo;
        lo = hi + 1;
    }
    take_chunks(&w, n_chunk, n_c, left);
    return finish_window(who, w.flag, n_c, k, keep);
}

kara_status kr_kv_select_recent(int32_t n_c, int32_t k, const kr_kv_protect *protect, int32_t *keep, void *scratch,
                                size_t scratch_bytes) {
    const char *who = "recent";
    kara_status st = check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    int32_t got = flag_protected(protect, n_c, k, NULL, w.flag);
    for (int32_t j = n_c - 1; j >= 0 && got < k; j--)
        if (!w.flag[j]) {
            w.flag[j] = 1;
            got++;
        }
    return finish_window(who, w.flag, n_c, k, keep);
}

/* splitmix64: a small, well-mixed generator; reproducible across platforms. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, range) by rejection (no modulo bias). */
static uint64_t uniform_below(uint64_t *state, uint64_t range) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do x = splitmix64(state);
    while (x >= limit);
    return x % range;
}

kara_status kr_kv_select_random(int32_t n_c, int32_t k, uint64_t seed, const kr_kv_protect *protect, int32_t *keep,
                                void *scratch, size_t scratch_bytes) {
    const char *who = "random";
    kara_status st = check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    select_scratch w;
    if ((st = scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    int32_t left = k - flag_protected(protect, n_c, k, NULL, w.flag);
    /* partial Fisher-Yates over the unprotected slots */
    int32_t *pool = (int32_t *)w.pooled, n_pool = 0;
    for (int32_t j = 0; j < n_c; j++)
        if (!w.flag[j]) pool[n_pool++] = j;
    uint64_t state = seed;
    for (int32_t t = 0; t < left; t++) {
        int32_t r = t + (int32_t)uniform_below(&state, (uint64_t)(n_pool - t));
        int32_t tmp = pool[t];
        pool[t] = pool[r];
        pool[r] = tmp;
        w.flag[pool[t]] = 1;
    }
    return finish_window(who, w.flag, n_c, k, keep);
}

kara_status kr_kv_select_window(const kara_kv_params *p, const float *s, const int32_t *tokens,
                                const uint8_t *line_ends, int32_t n_c, uint64_t seed, int32_t *keep, int32_t *n_keep,
                                void *scratch, size_t scratch_bytes) {
    if (!p || !n_keep) return kr_set_error(KARA_ERR_ARG, "select: NULL parameters or count");
    int32_t k = kr_kv_keep_count(n_c, p->retention, kr_kv_tune(p)->min_keep);
    kara_status st = kr_kv_select_window_k(p, s, tokens, line_ends, n_c, k, seed, keep, scratch, scratch_bytes);
    *n_keep = st == KARA_OK ? k : 0;
    return st;
}

kara_status kr_kv_select_window_k(const kara_kv_params *p, const float *s, const int32_t *tokens,
                                  const uint8_t *line_ends, int32_t n_c, int32_t k, uint64_t seed, int32_t *keep,
                                  void *scratch, size_t scratch_bytes) {
    if (!p) return kr_set_error(KARA_ERR_ARG, "select: NULL parameters");
    const kr_kv_method *m = kr_kv_method_get((int)p->method);
    if (!m || !m->select_window)
        return kr_set_error(KARA_ERR_ARG, "select: method %d is not a window method", (int)p->method);
    kr_kv_protect pr = {tokens, kr_kv_tune(p)->protect_token_ids, kr_kv_tune(p)->n_protect_token_ids};
    kr_kv_window_in in = {s, line_ends, &pr, n_c, seed};
    return m->select_window(p, &in, k, keep, scratch, scratch_bytes);
}

/* ------------------------------------------------------------------------ */
/* Decode-time baselines                                                     */
/* ------------------------------------------------------------------------ */

static int32_t keep_all(int32_t n, int32_t *keep) {
    for (int32_t j = 0; j < n; j++) keep[j] = j;
    return n;
}

kara_status kr_kv_select_streaming(int32_t n, int32_t n_sink, int32_t budget, int32_t *keep, int32_t *n_keep) {
    if (n < 0 || n_sink < 0 || budget < 1 || !keep || !n_keep)
        return kr_set_error(KARA_ERR_ARG, "streaming: n %d, n_sink %d, budget %d", n, n_sink, budget);
    if (n <= budget) {
        *n_keep = keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_sink)
        return kr_set_error(KARA_ERR_KV_BUDGET, "streaming: budget of %d slots is below its %d sink slots", budget,
                            n_sink);
    int32_t c = 0;
    for (int32_t j = 0; j < n_sink; j++) keep[c++] = j;
    for (int32_t j = n - (budget - n_sink); j < n; j++) keep[c++] = j;
    *n_keep = c;
    return KARA_OK;
}

/* snapkv and rkv: the protected front, the newest obs_window slots, and the
 * best of the middle by the observation scores s pooled over `kernel`; rkv
 * (red non-NULL) then ranks lambda * pooled - (1 - lambda) * redundancy. */
static kara_status select_observed(const char *who, const float *s, const float *red, float lambda, int32_t n,
                                   int32_t n_front, int32_t obs_window, int32_t kernel, kr_reduce pool, int32_t budget,
                                   int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes) {
    if (n < 0 || n_front < 0 || obs_window < 0 || budget < 1 || !keep || !n_keep || (!s && n > 0))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, obs_window %d, budget %d", who, n, n_front, obs_window,
                            budget);
    if (kernel < 1 || kernel % 2 == 0 || (pool != KR_REDUCE_MAX && pool != KR_REDUCE_MEAN))
        return kr_set_error(KARA_ERR_ARG, "%s: kernel %d must be odd and >= 1, pool max or mean", who, kernel);
    if (n <= budget) {
        *n_keep = keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front + obs_window)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots cannot hold %d protected + %d observed", who,
                            budget, n_front, obs_window);
    select_scratch w;
    kara_status st = scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t lo = n_front, hi = n - obs_window, n_mid = hi - lo; /* n_mid > 0 since n > budget */
    pool_scores(s + lo, n_mid, kernel, pool, w.pooled);
    if (red)
        for (int32_t j = 0; j < n_mid; j++)
            w.pooled[j] = lambda * w.pooled[j] - (1.0f - lambda) * score_key(red[lo + j]);
    *n_keep = keep_front_best_tail(w.pooled, lo, n_mid, budget - n_front - obs_window, hi, n, &w, keep);
    return KARA_OK;
}

kara_status kr_kv_select_snapkv(const float *s, int32_t n, int32_t n_front, int32_t obs_window, int32_t kernel,
                                kr_reduce pool, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                                size_t scratch_bytes) {
    return select_observed("snapkv", s, NULL, 0.0f, n, n_front, obs_window, kernel, pool, budget, keep, n_keep, scratch,
                           scratch_bytes);
}

kara_status kr_kv_select_h2o(const float *acc, int32_t n, int32_t n_front, int32_t budget, float heavy_frac,
                             int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes) {
    const char *who = "h2o";
    if (n < 0 || n_front < 0 || budget < 1 || !keep || !n_keep || (!acc && n > 0) ||
        !(heavy_frac >= 0.0f && heavy_frac <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, budget %d, heavy_frac %g", who, n, n_front, budget,
                            (double)heavy_frac);
    if (n <= budget) {
        *n_keep = keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots is below its %d protected slots", who, budget,
                            n_front);
    select_scratch w;
    kara_status st = scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t rest = budget - n_front;
    const int32_t n_heavy = (int32_t)round((double)heavy_frac * rest), n_recent = rest - n_heavy;
    const int32_t lo = n_front, hi = n - n_recent, n_mid = hi - lo; /* n_mid > n_heavy since n > budget */
    *n_keep = keep_front_best_tail(acc + lo, lo, n_mid, n_heavy, hi, n, &w, keep);
    return KARA_OK;
}

void kr_kv_h2o_accumulate(float *acc, const float *probs, int32_t n) {
    for (int32_t j = 0; j < n; j++) acc[j] += probs[j];
}

kara_status kr_kv_select_rkv(const float *imp, const float *red, int32_t n, int32_t n_front, int32_t obs_window,
                             int32_t kernel, float lambda, int32_t budget, int32_t *keep, int32_t *n_keep,
                             void *scratch, size_t scratch_bytes) {
    if (n > 0 && !red) return kr_set_error(KARA_ERR_ARG, "rkv: no redundancy scores for %d slots", n);
    if (!(lambda >= 0.0f && lambda <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "rkv: lambda %g must be in [0, 1]", (double)lambda);
    return select_observed("rkv", imp, red, lambda, n, n_front, obs_window, kernel, KR_REDUCE_MAX, budget, keep, n_keep,
                           scratch, scratch_bytes);
}

void kr_kv_lazy_observe(int32_t *last, int32_t *mri, const float *attn, int32_t n, int32_t t, float alpha) {
    for (int32_t j = 0; j < n; j++)
        if (attn[j] >= alpha) {
            int32_t interval = t - last[j];
            if (interval > mri[j]) mri[j] = interval;
            last[j] = t;
        }
}

float kr_kv_lazy_score(int32_t last, int32_t mri, int32_t t) {
    double since = (double)t - (double)last, m = (double)mri;
    double s = 2.0 / (1.0 + exp(1.0 + since / (m + 1e-5)));
    if (mri > 0) s += 2.0 / (1.0 + exp(m - 1.0));
    return (float)s;
}

kara_status kr_kv_select_lazy(const int32_t *last, const int32_t *mri, int32_t t, int32_t n, int32_t n_front,
                              int32_t window, int32_t budget, int32_t *keep, int32_t *n_keep, void *scratch,
                              size_t scratch_bytes) {
    const char *who = "lazy";
    if (n < 0 || n_front < 0 || window < 0 || budget < 1 || !keep || !n_keep || (n > 0 && (!last || !mri)))
        return kr_set_error(KARA_ERR_ARG, "%s: n %d, n_front %d, window %d, budget %d", who, n, n_front, window,
                            budget);
    if (n <= budget) {
        *n_keep = keep_all(n, keep);
        return KARA_OK;
    }
    if (budget < n_front + window)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: budget of %d slots cannot hold %d protected + a window of %d", who,
                            budget, n_front, window);
    select_scratch w;
    kara_status st = scratch_split(who, n, scratch, scratch_bytes, &w);
    if (st != KARA_OK) return st;
    const int32_t lo = n_front, hi = n - window, n_mid = hi - lo; /* n_mid > 0 since n > budget */
    for (int32_t j = 0; j < n_mid; j++) w.pooled[j] = kr_kv_lazy_score(last[lo + j], mri[lo + j], t);
    *n_keep = keep_front_best_tail(w.pooled, lo, n_mid, budget - n_front - window, hi, n, &w, keep);
    return KARA_OK;
}
