/* kv_score.c - the window scorer of Kara (docs/KARA_METHOD.md section 5);
 * see kv_score.h for the definitions and the determinism contract. */
#include "kv_score.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kv_quant.h"
#include "status.h"
#include "kv_tuning.h"

#define ALIGN_FLOATS 16 /* 64 bytes */

static size_t round_floats(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

kr_kv_rows kr_kv_rows_plain(kara_kv_dtype type, const void *base, size_t stride) {
    kr_kv_rows r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.base = base;
    r.stride = stride;
    return r;
}

void kr_kv_score_opts_init(kr_kv_score_opts *o) {
    o->mode = KR_SCORE_BIDIRECTIONAL;
    o->softmax_over = KR_SOFTMAX_WINDOW;
    o->exclude_self = true;
    o->gqa_reduce = KR_REDUCE_MEAN;
    o->value_aware = false;
}

void kr_kv_score_opts_from_params(kr_kv_score_opts *o, const kara_kv_params *p) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    o->mode = t->score_mode;
    o->softmax_over = t->softmax_over;
    o->exclude_self = t->exclude_self;
    o->gqa_reduce = t->gqa_reduce;
    o->value_aware = t->value_aware;
}

/* ------------------------------------------------------------------------ */
/* Scratch layout                                                            */
/* ------------------------------------------------------------------------ */

static bool shape_ok(const kr_kv_score_shape *s) {
    return s && s->n_w >= 1 && s->n_buf >= 0 && s->n_buf < s->n_w && s->n_head >= 1 && s->n_head_kv >= 1 &&
        s->n_head % s->n_head_kv == 0 && s->head_dim >= 1 && s->n_sink >= 0;
}

/* Rows of a tile: never more than the query rows, so that a job with few
 * queries over a long span (snapkv's observation window) holds a tile of
 * its own size, not KR_KV_SCORE_TILE rows of the whole span. */
static size_t tile_rows(int32_t n_q) { return n_q < KR_KV_SCORE_TILE ? (size_t)n_q : KR_KV_SCORE_TILE; }

/* Floats of one thread's area: a tile of f32 queries, the tile's logit
 * rows (sinks first, then the window) and one spare row (two_sided's
 * non-causal softmax). */
static size_t thread_floats(const kr_kv_score_shape *s, int32_t n_q) {
    size_t d = (size_t)s->head_dim, zs = (size_t)s->n_sink + (size_t)s->n_w, rows = tile_rows(n_q);
    return round_floats(rows * d) + round_floats(rows * zs) + round_floats(zs);
}

/* Tiles are laid over all n_q rows that may hold queries (the buffer_only
 * job uses fewer); the scratch size then does not depend on the mode. */
static size_t partial_floats(const kr_kv_score_shape *s, int32_t n_q) {
    size_t n_c = (size_t)(s->n_w - s->n_buf);
    size_t tiles = ((size_t)n_q + KR_KV_SCORE_TILE - 1) / KR_KV_SCORE_TILE;
    return round_floats((size_t)s->n_head * tiles * n_c);
}

size_t kr_kv_score_scratch_bytes_q(const kr_kv_score_shape *shape, int32_t n_q, int32_t n_threads) {
    if (!shape_ok(shape) || n_threads < 1 || n_q < 1 || n_q > shape->n_w) return 0;
    size_t n_c = (size_t)(shape->n_w - shape->n_buf);
    size_t floats = partial_floats(shape, n_q) + round_floats(n_c) + (size_t)n_threads * thread_floats(shape, n_q);
    return floats * sizeof(float) + 64;
}

size_t kr_kv_score_scratch_bytes(const kr_kv_score_shape *shape, int32_t n_threads) {
    return shape ? kr_kv_score_scratch_bytes_q(shape, shape->n_w, n_threads) : 0;
}

static bool rows_ok(const kr_kv_rows *r) {
    if (!r || !r->base || (unsigned)r->type > KARA_KV_Q4_0) return false;
    if (kr_kv_dtype_blocked(r->type) && r->head_stride) return false; /* heads of a blocked row are not bytes apart */
    if (r->table && r->block_rows < 1) return false;
    if (!r->table && r->ring_cap < 0) return false;
    return true;
}

kara_status kr_kv_score_prepare(kr_kv_score_job *job, const kr_kv_score_shape *shape, const kr_kv_score_opts *opts,
                                const kr_kv_rows *q, const kr_kv_rows *k, const kr_kv_rows *sink, void *scratch,
                                size_t scratch_bytes, int32_t n_threads) {
    return kr_kv_score_prepare_q(job, shape, shape ? shape->n_w : 0, opts, q, k, sink, scratch, scratch_bytes,
                                 n_threads);
}

kara_status kr_kv_score_prepare_q(kr_kv_score_job *job, const kr_kv_score_shape *shape, int32_t n_q,
                                  const kr_kv_score_opts *opts, const kr_kv_rows *q, const kr_kv_rows *k,
                                  const kr_kv_rows *sink, void *scratch, size_t scratch_bytes, int32_t n_threads) {
    if (!job || !opts) return kr_set_error(KARA_ERR_ARG, "kv_score: NULL job or options");
    if (!shape_ok(shape))
        return kr_set_error(KARA_ERR_ARG,
                            "kv_score: bad shape (n_w %d, n_buf %d, n_head %d, n_head_kv %d, head_dim %d, n_sink %d)",
                            shape ? shape->n_w : 0, shape ? shape->n_buf : 0, shape ? shape->n_head : 0,
                            shape ? shape->n_head_kv : 0, shape ? shape->head_dim : 0, shape ? shape->n_sink : 0);
    if (n_q < 1 || n_q > shape->n_w)
        return kr_set_error(KARA_ERR_ARG, "kv_score: %d query rows for a window of %d", n_q, shape->n_w);
    if ((unsigned)opts->mode > KR_SCORE_BUFFER_ONLY)
        return kr_set_error(KARA_ERR_ARG, "kv_score: unknown score mode %d", (int)opts->mode);
    if ((unsigned)opts->softmax_over > KR_SOFTMAX_WINDOW_PLUS_SINKS)
        return kr_set_error(KARA_ERR_ARG, "kv_score: unknown softmax_over %d", (int)opts->softmax_over);
    if (opts->gqa_reduce != KR_REDUCE_MEAN && opts->gqa_reduce != KR_REDUCE_MAX)
        return kr_set_error(KARA_ERR_ARG, "kv_score: gqa_reduce must be mean or max (got %d)", (int)opts->gqa_reduce);
    if (opts->mode == KR_SCORE_BUFFER_ONLY && shape->n_buf < 1)
        return kr_set_error(KARA_ERR_ARG, "kv_score: mode buffer_only needs a buffer (n_buf is 0)");
    if (!rows_ok(q) || !rows_ok(k))
        return kr_set_error(KARA_ERR_ARG, "kv_score: bad %s rows (NULL base, dtype or block geometry)",
                            rows_ok(q) ? "key" : "query");
    bool sinks = opts->softmax_over == KR_SOFTMAX_WINDOW_PLUS_SINKS && shape->n_sink > 0;
    if (sinks && !rows_ok(sink)) return kr_set_error(KARA_ERR_ARG, "kv_score: window_plus_sinks needs sink rows");
    if (n_threads < 1) return kr_set_error(KARA_ERR_ARG, "kv_score: n_threads %d < 1", n_threads);
    size_t need = kr_kv_score_scratch_bytes_q(shape, n_q, n_threads);
    if (!scratch || scratch_bytes < need)
        return kr_set_error(KARA_ERR_ARG, "kv_score: scratch of %zu bytes, need %zu", scratch ? scratch_bytes : 0,
                            need);

    memset(job, 0, sizeof *job);
    job->shape = *shape;
    job->opts = *opts;
    job->q = *q;
    job->k = *k;
    if (sinks)
        job->sink = *sink;
    else
        job->shape.n_sink = 0;
    job->n_c = shape->n_w - shape->n_buf;
    job->q_lo = opts->mode == KR_SCORE_BUFFER_ONLY ? job->n_c : 0;
    if (job->q_lo < shape->n_w - n_q) job->q_lo = shape->n_w - n_q;
    job->n_tiles = (shape->n_w - job->q_lo + KR_KV_SCORE_TILE - 1) / KR_KV_SCORE_TILE;
    job->n_units = shape->n_head * job->n_tiles;
    job->n_threads = n_threads;
    job->kernels = kr_kernels_get();

    uintptr_t p = ((uintptr_t)scratch + 63) & ~(uintptr_t)63;
    job->partial = (float *)p;
    job->layer = job->partial + partial_floats(shape, n_q);
    job->thread_base = (uint8_t *)(job->layer + round_floats((size_t)job->n_c));
    job->tile_rows = (int32_t)tile_rows(n_q);
    job->thread_bytes = thread_floats(shape, n_q) * sizeof(float); /* with the caller's n_sink: a multiple of 64 */
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Compute                                                                   */
/* ------------------------------------------------------------------------ */

static const uint8_t *row_ptr(const kr_kv_rows *r, int64_t i) {
    int64_t idx = r->first + i;
    const uint8_t *b = (const uint8_t *)r->base;
    if (r->table)
        return b + (size_t)r->table[idx / r->block_rows] * r->block_bytes + (size_t)(idx % r->block_rows) * r->stride;
    if (r->ring_cap > 0) {
        int64_t m = idx % r->ring_cap;
        if (m < 0) m += r->ring_cap;
        return b + (size_t)m * r->stride;
    }
    return b + (size_t)idx * r->stride;
}

static const uint8_t *head_ptr(const kr_kv_rows *r, int64_t i, int32_t e, int32_t d) {
    size_t esz = r->type == KARA_KV_F32 ? sizeof(float) : sizeof(kr_fp16);
    return row_ptr(r, i) + (size_t)e * (r->head_stride ? r->head_stride : (size_t)d * esz);
}

/* Head e of rows [i0, i0 + n) as packed f32 rows of d floats, each times
 * scale (the tile's queries, converted once per unit). The conversion goes
 * through the kernel table's axpy (SIMD per ISA): y = 0 + scale * x rounds
 * once, exactly as x * scale would. */
void kr_kv_rows_load_heads(const kr_kernels *kt, const kr_kv_rows *r, int64_t i0, int32_t n, int32_t e, int32_t d,
                           float scale, float *out) {
    memset(out, 0, (size_t)n * (size_t)d * sizeof(float));
    for (int32_t i = 0; i < n; i++) {
        float *y = out + (size_t)i * d;
        if (kr_kv_dtype_blocked(r->type)) { /* q8_0/q4_0: the head's values, then the scale */
            kr_kv_row_load(r->type, row_ptr(r, i0 + i), (int64_t)e * d, d, y);
            for (int32_t t = 0; t < d; t++) y[t] *= scale;
            continue;
        }
        const uint8_t *p = head_ptr(r, i0 + i, e, d);
        if (r->type == KARA_KV_F32)
            kt->axpy_f32(y, scale, (const float *)p, d);
        else
            kt->axpy_f16(y, scale, (const kr_fp16 *)p, d);
    }
}

/* Rows of `r` from i on that lie at a fixed stride (up to max): to the end
 * of the block when paged, to the wrap when a ring. */
static int32_t run_len(const kr_kv_rows *r, int64_t i, int32_t max) {
    int64_t idx = r->first + i, left = max;
    if (r->table) {
        left = r->block_rows - idx % r->block_rows;
    } else if (r->ring_cap > 0) {
        int64_t m = idx % r->ring_cap;
        left = r->ring_cap - (m < 0 ? m + r->ring_cap : m);
    }
    return left < max ? (int32_t)left : max;
}

/* kr_kv_rows_logits for q8_0/q4_0 rows (kv_score.h): the run length is
 * fixed, so the thread count never changes an entry. */
static void logits_blocked(const kr_kernels *kt, const kr_kv_rows *keys, int32_t e, int32_t n_keys, int32_t d,
                           const float *qf, int32_t n_rows, float *z, size_t zs) {
    if (d <= KR_KV_DEQ_MAX_DIM) { /* runs of KR_KV_DEQ_ROWS keys dequantised on the stack, then gemm_nt */
        float kb[KR_KV_DEQ_ROWS * KR_KV_DEQ_MAX_DIM];
        for (int32_t j0 = 0, nk; j0 < n_keys; j0 += nk) {
            nk = n_keys - j0 < KR_KV_DEQ_ROWS ? n_keys - j0 : KR_KV_DEQ_ROWS;
            for (int32_t j = 0; j < nk; j++)
                kr_kv_row_load(keys->type, row_ptr(keys, j0 + j), (int64_t)e * d, d, kb + (size_t)j * (size_t)d);
            kt->gemm_nt(z + j0, (int64_t)zs, qf, d, kb, (size_t)d * sizeof(float), false, n_rows, nk, d);
        }
        return;
    }
    for (int32_t j = 0; j < n_keys; j++) { /* longer heads: each key read in place, block by block */
        const void *row = row_ptr(keys, j);
        for (int32_t r = 0; r < n_rows; r++)
            z[(size_t)r * zs + (size_t)j] =
                kr_kv_row_dot(keys->type, row, (int64_t)e * d, d, qf + (size_t)r * (size_t)d);
    }
}

/* The runs of f16/f32 keys follow the block and ring geometry, which the
 * thread count never changes, so neither does any entry's arithmetic. */
void kr_kv_rows_logits(const kr_kernels *kt, const kr_kv_rows *keys, int32_t e, int32_t n_keys, int32_t d,
                       const float *qf, int32_t n_rows, float *z, size_t zs) {
    if (kr_kv_dtype_blocked(keys->type)) {
        logits_blocked(kt, keys, e, n_keys, d, qf, n_rows, z, zs);
        return;
    }
    const bool f16 = keys->type == KARA_KV_F16;
    for (int32_t j0 = 0, nk; j0 < n_keys; j0 += nk) {
        nk = run_len(keys, j0, n_keys - j0);
        kt->gemm_nt(z + j0, (int64_t)zs, qf, d, head_ptr(keys, j0, e, d), keys->stride, f16, n_rows, nk, d);
    }
}

/* In-place softmax of the first n entries of a logit row (sinks, then
 * window keys) with entry `skip` (-1: none) left out; the kernel table's
 * max-subtracted softmax, the skipped entry entering as -inf (its
 * probability is then 0, or ~1e-38 where the SIMD exp clamps). Returns
 * false when the set is empty. */
static bool softmax_row(const kr_kernels *kt, float *zr, int32_t n, int32_t skip) {
    if (n - (skip >= 0 && skip < n) < 1) return false;
    if (skip >= 0 && skip < n) zr[skip] = -INFINITY;
    kt->softmax(zr, n);
    return true;
}

/* part[j] += p[j] for j in [0, n) except `skip`. */
static void add_probs(float *part, const float *p, int32_t n, int32_t skip) {
    int32_t lo = skip >= 0 && skip < n ? skip : n;
    for (int32_t j = 0; j < lo; j++) part[j] += p[j];
    for (int32_t j = lo + 1; j < n; j++) part[j] += p[j];
}

/* One unit: query head a, rows [r0, r1) of the window; adds into part (n_c). */
static void score_unit(const kr_kv_score_job *job, int32_t a, int32_t r0, int32_t r1, float *part, uint8_t *area) {
    const kr_kv_score_shape *s = &job->shape;
    const int32_t d = s->head_dim, ns = s->n_sink, n_c = job->n_c, nr = r1 - r0;
    const int32_t h = a / (s->n_head / s->n_head_kv);
    const kr_score_mode mode = job->opts.mode;
    const bool excl = job->opts.exclude_self;
    const bool causal_only = mode == KR_SCORE_CAUSAL || mode == KR_SCORE_BUFFER_ONLY;
    const int32_t key_hi = job->opts.softmax_over == KR_SOFTMAX_COMPRESSIBLE ? n_c : s->n_w;
    const size_t zs = (size_t)ns + (size_t)s->n_w;
    const kr_kernels *kt = (const kr_kernels *)job->kernels;

    float *qf = (float *)area;
    float *z = qf + round_floats((size_t)job->tile_rows * d);
    float *tmp = z + round_floats((size_t)job->tile_rows * zs);

    kr_kv_rows_load_heads(kt, &job->q, r0, nr, a, d, 1.0f / sqrtf((float)d), qf);
    /* a causal row i needs keys below i + 1 only */
    int32_t n_keys = causal_only ? (r1 < key_hi ? r1 : key_hi) : key_hi;
    kr_kv_rows_logits(kt, &job->k, h, n_keys, d, qf, nr, z + ns, zs);
    if (ns > 0) kr_kv_rows_logits(kt, &job->sink, h, ns, d, qf, nr, z, zs);

    for (int32_t r = 0; r < nr; r++) {
        const int32_t i = r0 + r;
        float *zr = z + (size_t)r * zs;
        if (mode == KR_SCORE_BIDIRECTIONAL) {
            int32_t skip = excl && i < key_hi ? i : -1;
            if (!softmax_row(kt, zr, ns + key_hi, skip < 0 ? -1 : ns + skip)) continue;
            add_probs(part, zr + ns, n_c, skip);
        } else if (causal_only) {
            int32_t jend = excl ? (i < key_hi ? i : key_hi) : (i + 1 < key_hi ? i + 1 : key_hi);
            if (!softmax_row(kt, zr, ns + jend, -1)) continue;
            add_probs(part, zr + ns, jend < n_c ? jend : n_c, -1);
        } else { /* two_sided */
            /* anti-causal half first, on a copy: j's own non-causal row,
             * mass on strictly later keys */
            if (i < n_c) {
                memcpy(tmp, zr, (size_t)(ns + key_hi) * sizeof(float));
                if (softmax_row(kt, tmp, ns + key_hi, excl ? ns + i : -1)) {
                    float later = 0.0f;
                    for (int32_t j = i + 1; j < key_hi; j++) later += tmp[ns + j];
                    part[i] += later;
                }
            }
            int32_t jend = excl ? (i < key_hi ? i : key_hi) : (i + 1 < key_hi ? i + 1 : key_hi);
            if (!softmax_row(kt, zr, ns + jend, -1)) continue;
            int32_t jc = i < n_c ? i : n_c; /* strictly earlier keys j < i */
            if (jc > jend) jc = jend;
            add_probs(part, zr + ns, jc, -1);
        }
    }
}

kara_status kr_kv_score_compute(const kr_kv_score_job *job, int32_t ith, int32_t nth) {
    if (!job || nth < 1 || ith < 0 || ith >= nth || nth > job->n_threads)
        return kr_set_error(KARA_ERR_ARG, "kv_score: thread %d of %d, scratch prepared for %d", ith, nth,
                            job ? job->n_threads : 0);
    const int64_t u0 = (int64_t)job->n_units * ith / nth, u1 = (int64_t)job->n_units * (ith + 1) / nth;
    uint8_t *area = job->thread_base + (size_t)ith * job->thread_bytes;
    const int32_t n_active = job->shape.n_w - job->q_lo;
    for (int64_t u = u0; u < u1; u++) {
        int32_t a = (int32_t)(u / job->n_tiles), t = (int32_t)(u % job->n_tiles);
        int32_t r0 = job->q_lo + t * KR_KV_SCORE_TILE;
        int32_t r1 = r0 + KR_KV_SCORE_TILE;
        if (r1 > job->q_lo + n_active) r1 = job->q_lo + n_active;
        float *part = job->partial + (size_t)u * job->n_c;
        memset(part, 0, (size_t)job->n_c * sizeof(float));
        score_unit(job, a, r0, r1, part, area);
    }
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Reduction and aggregation                                                 */
/* ------------------------------------------------------------------------ */

/* ||v||_1 of KV head h of value row j (value-aware scores: a token whose
 * value is small changes the output little, however much attention it
 * draws; attention sinks are the typical case). */
static float value_l1(const kr_kv_rows *v, int32_t j, int32_t h, int32_t d) {
    float s = 0.0f;
    if (kr_kv_dtype_blocked(v->type)) {
        const void *row = row_ptr(v, j);
        for (int32_t t = 0; t < d; t++) s += fabsf(kr_kv_row_value(v->type, row, (int64_t)h * d + t));
        return s;
    }
    const uint8_t *p = head_ptr(v, j, h, d);
    for (int32_t t = 0; t < d; t++)
        s += fabsf(v->type == KARA_KV_F32 ? ((const float *)p)[t] : kr_fp16_to_fp32(((const kr_fp16 *)p)[t]));
    return s;
}

void kr_kv_score_finish(const kr_kv_score_job *job, float *layer_out, kr_kv_score_acc *acc) {
    const int32_t n_c = job->n_c, hkv = job->shape.n_head_kv, g = job->shape.n_head / hkv, nt = job->n_tiles;
    const bool use_max = job->opts.gqa_reduce == KR_REDUCE_MAX;
    const bool vw = job->opts.value_aware && job->v.base;
    float *out = layer_out ? layer_out : job->layer;
    for (int32_t j = 0; j < n_c; j++) {
        float total = 0.0f;
        for (int32_t h = 0; h < hkv; h++) {
            const float vn = vw ? value_l1(&job->v, j, h, job->shape.head_dim) : 1.0f;
            float red = use_max ? -INFINITY : 0.0f;
            for (int32_t e = 0; e < g; e++) {
                const float *p = job->partial + (size_t)(h * g + e) * nt * n_c + j;
                float sa = 0.0f;
                for (int32_t t = 0; t < nt; t++) sa += p[(size_t)t * n_c];
                red = use_max ? (sa > red ? sa : red) : red + sa;
            }
            total += (use_max ? red : red / (float)g) * vn;
        }
        out[j] = total / (float)hkv;
    }
    if (acc) kr_kv_score_acc_add(acc, out);
}

void kr_kv_score_run(const kr_kv_score_job *job, float *layer_out, kr_kv_score_acc *acc) {
    kr_kv_score_compute(job, 0, 1);
    kr_kv_score_finish(job, layer_out, acc);
}

kara_status kr_kv_score_acc_init(kr_kv_score_acc *acc, float *buf, int32_t n_c, kr_reduce layer_reduce) {
    if (!acc || n_c < 0 || (n_c > 0 && !buf))
        return kr_set_error(KARA_ERR_ARG, "kv_score: bad accumulator (n_c %d)", n_c);
    if (layer_reduce != KR_REDUCE_MEAN && layer_reduce != KR_REDUCE_NORMALIZED_MEAN)
        return kr_set_error(KARA_ERR_ARG, "kv_score: layer_reduce must be mean or normalized_mean (got %d)",
                            (int)layer_reduce);
    acc->sum = buf;
    acc->n_c = n_c;
    acc->n_layers = 0;
    acc->layer_reduce = layer_reduce;
    if (n_c > 0) memset(buf, 0, (size_t)n_c * sizeof(float));
    return KARA_OK;
}

void kr_kv_score_acc_add(kr_kv_score_acc *acc, const float *layer) {
    float w = 1.0f;
    if (acc->layer_reduce == KR_REDUCE_NORMALIZED_MEAN) {
        float tot = 0.0f;
        for (int32_t j = 0; j < acc->n_c; j++) tot += layer[j];
        w = tot > 0.0f ? 1.0f / tot : 0.0f;
    }
    for (int32_t j = 0; j < acc->n_c; j++) acc->sum[j] += layer[j] * w;
    acc->n_layers++;
}

void kr_kv_score_acc_finalize(const kr_kv_score_acc *acc, float *out) {
    float inv = acc->n_layers > 0 ? 1.0f / (float)acc->n_layers : 0.0f;
    for (int32_t j = 0; j < acc->n_c; j++) out[j] = acc->sum[j] * inv;
}
