/* kv_redund.c - the key redundancy of the rkv baseline (R-KV); see
 * kv_redund.h for the definition and the determinism contract. */
#include "kv_redund.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "kv_quant.h"
#include "status.h"

static size_t round_floats(size_t n) { return (n + 15) / 16 * 16; }

/* One thread's area: a tile of normalised rows and their products with
 * every key of the span. */
static size_t thread_floats(int32_t m, int32_t d) {
    return round_floats((size_t)KR_KV_REDUND_TILE * (size_t)d) + round_floats((size_t)KR_KV_REDUND_TILE * (size_t)m);
}

static size_t per_head_floats(int32_t m, int32_t hkv) { return round_floats((size_t)hkv * (size_t)m); }

size_t kr_kv_redund_scratch_bytes(int32_t m, int32_t n_head_kv, int32_t head_dim, int32_t n_threads) {
    if (m < 1 || n_head_kv < 1 || head_dim < 1 || n_threads < 1) return 0;
    /* inv_norm, rowsum, slast, last, then col, then the thread areas */
    size_t floats =
        4 * per_head_floats(m, n_head_kv) + round_floats((size_t)m) + (size_t)n_threads * thread_floats(m, head_dim);
    return floats * sizeof(float) + 64;
}

kara_status kr_kv_redund_prepare(kr_kv_redund_job *job, const kr_kv_rows *keys, int32_t m, int32_t n_head_kv,
                                 int32_t head_dim, float threshold, void *scratch, size_t scratch_bytes,
                                 int32_t n_threads) {
    if (!job || !keys || !keys->base || (unsigned)keys->type > KARA_KV_Q4_0 ||
        (kr_kv_dtype_blocked(keys->type) && keys->head_stride))
        return kr_set_error(KARA_ERR_ARG, "kv_redund: NULL job or bad key rows");
    if (m < 1 || n_head_kv < 1 || head_dim < 1 || n_threads < 1)
        return kr_set_error(KARA_ERR_ARG, "kv_redund: bad shape (m %d, n_head_kv %d, head_dim %d, threads %d)", m,
                            n_head_kv, head_dim, n_threads);
    if (!(threshold >= -1.0f && threshold <= 1.0f))
        return kr_set_error(KARA_ERR_ARG, "kv_redund: threshold %g is outside [-1, 1]", (double)threshold);
    size_t need = kr_kv_redund_scratch_bytes(m, n_head_kv, head_dim, n_threads);
    if (!scratch || scratch_bytes < need)
        return kr_set_error(KARA_ERR_ARG, "kv_redund: scratch of %zu bytes, need %zu for %d keys",
                            scratch ? scratch_bytes : 0, need, m);
    memset(job, 0, sizeof *job);
    job->k = *keys;
    job->m = m;
    job->n_head_kv = n_head_kv;
    job->head_dim = head_dim;
    job->threshold = threshold;
    job->n_tiles = (m + KR_KV_REDUND_TILE - 1) / KR_KV_REDUND_TILE;
    job->n_units = n_head_kv * job->n_tiles;
    job->n_threads = n_threads;
    const kr_kernels *kt = kr_kernels_get();
    job->kernels = kt;
    float *p = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const size_t ph = per_head_floats(m, n_head_kv);
    job->inv_norm = p;
    job->rowsum = p + ph;
    job->slast = p + 2 * ph;
    job->last = (int32_t *)(p + 3 * ph);
    job->col = p + 4 * ph;
    job->thread_base = (uint8_t *)(job->col + round_floats((size_t)m));
    job->thread_bytes = thread_floats(m, head_dim) * sizeof(float);
    float *tmp = (float *)job->thread_base;
    for (int32_t h = 0; h < n_head_kv; h++)
        for (int32_t j = 0; j < m; j++) {
            kr_kv_rows_load_heads(kt, keys, j, 1, h, head_dim, 1.0f, tmp);
            job->inv_norm[(size_t)h * m + j] = 1.0f / (sqrtf(kt->dot_f32(tmp, tmp, head_dim)) + 1e-8f);
        }
    return KARA_OK;
}

/* One unit: KV head h, rows [r0, r1). */
static void redund_unit(const kr_kv_redund_job *job, int32_t h, int32_t r0, int32_t r1, uint8_t *area) {
    const kr_kernels *kt = (const kr_kernels *)job->kernels;
    const int32_t m = job->m, d = job->head_dim, nr = r1 - r0;
    const float *inv = job->inv_norm + (size_t)h * m;
    float *qf = (float *)area;
    float *z = qf + round_floats((size_t)KR_KV_REDUND_TILE * (size_t)d);
    for (int32_t r = 0; r < nr; r++)
        kr_kv_rows_load_heads(kt, &job->k, r0 + r, 1, h, d, inv[r0 + r], qf + (size_t)r * d);
    kr_kv_rows_logits(kt, &job->k, h, m, d, qf, nr, z, (size_t)m);
    for (int32_t r = 0; r < nr; r++) {
        const int32_t i = r0 + r;
        float *zr = z + (size_t)r * m, sum = 0.0f;
        int32_t last = -1;
        for (int32_t j = 0; j < m; j++) {
            if (j == i) continue;
            float s = zr[j] * inv[j];
            zr[j] = s;
            sum += s;
            if (s > job->threshold) last = j;
        }
        size_t o = (size_t)h * m + (size_t)i;
        job->rowsum[o] = sum;
        job->last[o] = last;
        job->slast[o] = last >= 0 ? zr[last] : 0.0f;
    }
}

kara_status kr_kv_redund_compute(const kr_kv_redund_job *job, int32_t ith, int32_t nth) {
    if (!job || nth < 1 || ith < 0 || ith >= nth || nth > job->n_threads)
        return kr_set_error(KARA_ERR_ARG, "kv_redund: thread %d of %d, scratch prepared for %d", ith, nth,
                            job ? job->n_threads : 0);
    const int64_t u0 = (int64_t)job->n_units * ith / nth, u1 = (int64_t)job->n_units * (ith + 1) / nth;
    uint8_t *area = job->thread_base + (size_t)ith * job->thread_bytes;
    for (int64_t u = u0; u < u1; u++) {
        int32_t h = (int32_t)(u / job->n_tiles), t = (int32_t)(u % job->n_tiles);
        int32_t r0 = t * KR_KV_REDUND_TILE, r1 = r0 + KR_KV_REDUND_TILE < job->m ? r0 + KR_KV_REDUND_TILE : job->m;
        redund_unit(job, h, r0, r1, area);
    }
    return KARA_OK;
}

void kr_kv_redund_finish(const kr_kv_redund_job *job, float *acc) {
    const kr_kernels *kt = (const kr_kernels *)job->kernels;
    const int32_t m = job->m;
    const float inv_m = 1.0f / (float)m, inv_h = 1.0f / (float)job->n_head_kv;
    for (int32_t h = 0; h < job->n_head_kv; h++) {
        const size_t o = (size_t)h * m;
        float *c = job->col;
        memcpy(c, job->rowsum + o, (size_t)m * sizeof(float));
        for (int32_t i = 0; i < m; i++)
            if (job->last[o + i] >= 0) c[job->last[o + i]] -= job->slast[o + i];
        for (int32_t j = 0; j < m; j++) c[j] *= inv_m;
        kt->softmax(c, m);
        for (int32_t j = 0; j < m; j++) acc[j] += c[j] * inv_h;
    }
}

void kr_kv_redund_run(const kr_kv_redund_job *job, float *acc) {
    kr_kv_redund_compute(job, 0, 1);
    kr_kv_redund_finish(job, acc);
}
