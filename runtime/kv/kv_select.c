/* kv_select.c - slot selection for Kara and its baselines
 * (docs/KARA_METHOD.md sections 6 and 11); see kv_select.h for the rules
 * every method shares. */
#include "kv_select.h"
#include "kv_select_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_method.h"
#include "status.h"
#include "kv_tuning.h"

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

size_t kr_kv_select_scratch_bytes(int32_t n) {
    size_t m = n > 0 ? (size_t)n : 1;
    return 64 + align64(m * sizeof(kr_rank_entry)) + align64(m * sizeof(kr_chunk_entry)) + align64(m * sizeof(float)) +
        align64(m);
}

kara_status kr_kvs_scratch_split(const char *who, int32_t n, void *scratch, size_t bytes, kr_select_scratch *out) {
    size_t need = kr_kv_select_scratch_bytes(n);
    if (!scratch || bytes < need)
        return kr_set_error(KARA_ERR_ARG, "%s: scratch of %zu bytes, need %zu for %d slots", who, scratch ? bytes : 0,
                            need, n);
    size_t m = n > 0 ? (size_t)n : 1;
    uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    out->rank = (kr_rank_entry *)p;
    p += align64(m * sizeof(kr_rank_entry));
    out->chunk = (kr_chunk_entry *)p;
    p += align64(m * sizeof(kr_chunk_entry));
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

/* Descending score, ties to the lower slot: a strict total order, so qsort's
 * instability cannot change the result. */
static int cmp_rank(const void *pa, const void *pb) {
    const kr_rank_entry *a = pa, *b = pb;
    if (a->s > b->s) return -1;
    if (a->s < b->s) return 1;
    return (a->slot > b->slot) - (a->slot < b->slot);
}

void kr_kvs_rank_by(const float *s, int32_t n, kr_rank_entry *r) {
    for (int32_t j = 0; j < n; j++) {
        r[j].s = kr_kvs_score_key(s[j]);
        r[j].slot = j;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_rank);
}

/* Flag the first `count` unflagged slots of the ranking; returns how many. */
int32_t kr_kvs_take_ranked(const kr_rank_entry *r, int32_t n, uint8_t *flag, int32_t count) {
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
int32_t kr_kvs_keep_front_best_tail(const float *s_mid, int32_t lo, int32_t n_mid, int32_t take, int32_t hi, int32_t n,
                                    const kr_select_scratch *w, int32_t *keep) {
    kr_kvs_rank_by(s_mid, n_mid, w->rank);
    kr_kvs_take_ranked(w->rank, n_mid, w->flag, take);
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
int32_t kr_kvs_flag_protected(const kr_kv_protect *pr, int32_t n, int32_t k, const kr_rank_entry *r, uint8_t *flag) {
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

kara_status kr_kvs_check_window(const char *who, int32_t n_c, int32_t k, const int32_t *keep) {
    if (n_c < 0 || k < 0 || k > n_c) return kr_set_error(KARA_ERR_ARG, "%s: keep %d of %d slots", who, k, n_c);
    if (!keep && k > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL output", who);
    return KARA_OK;
}

kara_status kr_kvs_start_ranked(const char *who, const float *s, int32_t n_c, int32_t k, int32_t *keep,
                                const char *len_name, int32_t len, const kr_kv_protect *protect, void *scratch,
                                size_t scratch_bytes, kr_select_scratch *w, int32_t *left) {
    *left = 0;
    kara_status st = kr_kvs_check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    if (!s && n_c > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores", who);
    if (len < 1) return kr_set_error(KARA_ERR_ARG, "%s: %s %d < 1", who, len_name, len);
    if ((st = kr_kvs_scratch_split(who, n_c, scratch, scratch_bytes, w)) != KARA_OK) return st;
    if (k == 0) return KARA_OK;
    kr_kvs_rank_by(s, n_c, w->rank);
    *left = k - kr_kvs_flag_protected(protect, n_c, k, w->rank, w->flag);
    return KARA_OK;
}

/* Emit and verify the count: a mismatch is a bug in this file. */
kara_status kr_kvs_finish_window(const char *who, const uint8_t *flag, int32_t n_c, int32_t k, int32_t *keep) {
    int32_t c = emit(flag, n_c, keep);
    if (c != k) return kr_set_error(KARA_ERR_INTERNAL, "%s: selected %d slots instead of %d", who, c, k);
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Token2Chunk                                                               */
/* ------------------------------------------------------------------------ */

/* phi descending, then the shorter gap, then the lower slot. */
static int cmp_chunk_t2c(const void *pa, const void *pb) {
    const kr_chunk_entry *a = pa, *b = pb;
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
static int32_t take_line_tails(kr_select_scratch *w, int32_t n_c, const uint8_t *line_ends, int32_t left) {
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
    kara_status st = kr_kvs_check_window(who, n_c, p->k, keep);
    if (st != KARA_OK) return st;
    if (!(p->candidate_frac > 0.0f && p->candidate_frac <= 1.0f) || p->max_gap < 1 || !(p->len_penalty >= 0.0f) ||
        isinf(p->len_penalty))
        return kr_set_error(KARA_ERR_ARG, "%s: candidate_frac %g (0, 1], max_gap %d (>= 1), len_penalty %g (>= 0)", who,
                            (double)p->candidate_frac, p->max_gap, (double)p->len_penalty);
    kr_select_scratch w;
    if ((st = kr_kvs_scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    const int32_t k = p->k;
    if (k == 0) return KARA_OK;

    kr_kvs_rank_by(s, n_c, w.rank);
    int32_t n_prot = kr_kvs_flag_protected(protect, n_c, k, w.rank, w.flag);
    int32_t m = kr_kv_candidate_count(k, p->candidate_frac);
    if (m < n_prot) m = n_prot;
    m = n_prot + kr_kvs_take_ranked(w.rank, n_c, w.flag, m - n_prot);
    int32_t left = k - m;
    if (p->line_ends) left = take_line_tails(&w, n_c, p->line_ends, left);

    /* chunks between consecutive candidates, scored by endpoint importance
     * per token spent */
    float smax = -INFINITY;
    for (int32_t j = 0; j < n_c; j++) smax = kr_kvs_score_key(s[j]) > smax ? kr_kvs_score_key(s[j]) : smax;
    const double dmax = (double)smax; /* u = s / max over C; all u = 0 when max <= 0 */
    int32_t n_chunk = 0, prev = -1;
    for (int32_t j = 0; j < n_c; j++) {
        if (!w.flag[j]) continue;
        if (prev >= 0) {
            int32_t g = j - prev - 1;
            if (g >= 1 && g <= p->max_gap) {
                double u0 = dmax > 0 ? (double)kr_kvs_score_key(s[prev]) / dmax : 0.0;
                double u1 = dmax > 0 ? (double)kr_kvs_score_key(s[j]) / dmax : 0.0;
                kr_chunk_entry *c = &w.chunk[n_chunk++];
                c->score = ((u0 + u1) / 2.0) * pow(1.0 + (double)g, -(double)p->len_penalty);
                c->len = g;
                c->lo = prev;
            }
        }
        prev = j;
    }
    qsort(w.chunk, (size_t)n_chunk, sizeof *w.chunk, cmp_chunk_t2c);

    for (int32_t t = 0; t < n_chunk && left > 0; t++) {
        const kr_chunk_entry *c = &w.chunk[t];
        if (c->len > left) continue;
        for (int32_t j = c->lo + 1; j <= c->lo + c->len; j++) w.flag[j] = 1;
        left -= c->len;
    }
    if (left > 0) kr_kvs_take_ranked(w.rank, n_c, w.flag, left);
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
}

/* ------------------------------------------------------------------------ */
/* Other window methods                                                      */
/* ------------------------------------------------------------------------ */

/* out[j] = max (or mean) of s over [j - kernel/2, j + kernel/2] clipped to [0, n). */
void kr_kvs_pool_scores(const float *s, int32_t n, int32_t kernel, kr_reduce how, float *out) {
    const int32_t half = kernel / 2;
    for (int32_t j = 0; j < n; j++) {
        int32_t a = j - half < 0 ? 0 : j - half, b = j + half >= n ? n - 1 : j + half;
        if (how == KR_REDUCE_MEAN) {
            float sum = 0.0f;
            for (int32_t t = a; t <= b; t++) sum += kr_kvs_score_key(s[t]);
            out[j] = sum / (float)(b - a + 1);
        } else {
            float m = -INFINITY;
            for (int32_t t = a; t <= b; t++) m = kr_kvs_score_key(s[t]) > m ? kr_kvs_score_key(s[t]) : m;
            out[j] = m;
        }
    }
}

kara_status kr_kv_select_pooled_topk(const float *s, int32_t n_c, int32_t k, int32_t kernel,
                                     const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "pooled top-k";
    kara_status st = kr_kvs_check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    if (!s && n_c > 0) return kr_set_error(KARA_ERR_ARG, "%s: NULL scores", who);
    if (kernel < 1 || kernel % 2 == 0)
        return kr_set_error(KARA_ERR_ARG, "%s: kernel %d must be odd and >= 1", who, kernel);
    kr_select_scratch w;
    if ((st = kr_kvs_scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    if (k == 0) return KARA_OK;
    kr_kvs_pool_scores(s, n_c, kernel, KR_REDUCE_MAX, w.pooled);
    kr_kvs_rank_by(w.pooled, n_c, w.rank);
    int32_t got = kr_kvs_flag_protected(protect, n_c, k, w.rank, w.flag);
    kr_kvs_take_ranked(w.rank, n_c, w.flag, k - got);
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
}

/* mean descending, then the lower chunk */
static int cmp_chunk_mean(const void *pa, const void *pb) {
    const kr_chunk_entry *a = pa, *b = pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Sort the chunks by score (ties to the lower chunk), take each whole while
 * its unkept slots fit in `left`, then the best-ranked single slots. */
void kr_kvs_take_chunks(kr_select_scratch *w, int32_t n_chunk, int32_t n_c, int32_t left) {
    qsort(w->chunk, (size_t)n_chunk, sizeof *w->chunk, cmp_chunk_mean);
    for (int32_t t = 0; t < n_chunk && left > 0; t++) {
        const kr_chunk_entry *c = &w->chunk[t];
        int32_t unkept = 0;
        for (int32_t j = c->lo; j < c->lo + c->len; j++) unkept += !w->flag[j];
        if (unkept == 0 || unkept > left) continue;
        for (int32_t j = c->lo; j < c->lo + c->len; j++) w->flag[j] = 1;
        left -= unkept;
    }
    if (left > 0) kr_kvs_take_ranked(w->rank, n_c, w->flag, left);
}

kara_status kr_kv_select_lines(const float *s, int32_t n_c, int32_t k, int32_t max_len, const uint8_t *line_ends,
                               const kr_kv_protect *protect, int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "token2chunk (lines)";
    kr_select_scratch w;
    int32_t left;
    kara_status st =
        kr_kvs_start_ranked(who, s, n_c, k, keep, "max_gap", max_len, protect, scratch, scratch_bytes, &w, &left);
    if (st != KARA_OK || k == 0) return st;
    int32_t n_chunk = 0;
    for (int32_t lo = 0; lo < n_c;) {
        int32_t hi = lo; /* the line (or piece) is [lo, hi] */
        while (hi + 1 < n_c && hi - lo + 1 < max_len && !(line_ends && line_ends[hi])) hi++;
        float best = -INFINITY;
        for (int32_t j = lo; j <= hi; j++) best = kr_kvs_score_key(s[j]) > best ? kr_kvs_score_key(s[j]) : best;
        kr_chunk_entry *c = &w.chunk[n_chunk++];
        c->score = (double)best;
        c->len = hi - lo + 1;
        c->lo = lo;
        lo = hi + 1;
    }
    kr_kvs_take_chunks(&w, n_chunk, n_c, left);
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
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
/* What the decode-time baselines share (their selections: methods/)         */
/* ------------------------------------------------------------------------ */

int32_t kr_kvs_keep_all(int32_t n, int32_t *keep) {
    for (int32_t j = 0; j < n; j++) keep[j] = j;
    return n;
}

void kr_kv_h2o_accumulate(float *acc, const float *probs, int32_t n) {
    for (int32_t j = 0; j < n; j++) acc[j] += probs[j];
}

void kr_kv_h2o_maximum(float *acc, const float *probs, int32_t n) {
    for (int32_t j = 0; j < n; j++) acc[j] = probs[j] > acc[j] ? probs[j] : acc[j];
}
