/* kv_prior.c - Kara's retention prior over the cache's rows (kv_prior.h,
 * docs/KARA_METHOD.md section 14). */
#include "kv_prior.h"

#include <math.h>

#include "kernels.h"
#include "kv_quant.h"
#include "status.h"

kara_status kr_kv_prior_check(const kr_kv_prior *p, const kr_kv_cache *kv) {
    if (!p || !p->w1 || !p->b1 || !p->w2 || p->n_hidden < 1)
        return kr_set_error(KARA_ERR_ARG, "retention prior: missing weights");
    if (p->layer < 0 || p->layer >= kv->n_layer)
        return kr_set_error(KARA_ERR_ARG, "retention prior: layer %d outside [0, %d)", p->layer, kv->n_layer);
    if (p->rope_dim < 0 || p->rope_dim % 2 || p->rope_dim > kv->head_dim)
        return kr_set_error(KARA_ERR_ARG, "retention prior: rope_dim %d for heads of %d", p->rope_dim, kv->head_dim);
    int32_t want = kv->n_head_kv * kv->head_dim + (p->key_pairs ? kv->n_head_kv * (p->rope_dim / 2) : 0);
    if (p->n_in != want)
        return kr_set_error(KARA_ERR_ARG, "retention prior: %d inputs, the cache's rows give %d", p->n_in, want);
    return KARA_OK;
}

float kr_kv_prior_weight_resolve(float w, bool model_has_prior) {
    if (w >= 0.0f) return w;
    return model_has_prior ? KR_PRIOR_WEIGHT_AUTO : 0.0f;
}

int32_t kr_kv_prior_scratch_floats(const kr_kv_prior *p) { return p->n_in + p->n_hidden; }

static float elem(const kr_kv_cache *kv, const void *row, int32_t i) {
    if (kr_kv_dtype_blocked(kv->dtype)) return kr_kv_row_value(kv->dtype, row, i);
    return kv->dtype == KARA_KV_F32 ? ((const float *)row)[i] : kr_fp16_to_fp32(((const kr_fp16 *)row)[i]);
}

float kr_kv_prior_slot(const kr_kv_prior *p, const kr_kv_cache *kv, int32_t seq, int32_t slot, float *scratch) {
    const int32_t nv = kv->n_head_kv * kv->head_dim, half = p->rope_dim / 2, d = kv->head_dim;
    float *x = scratch, *h = scratch + p->n_in;
    const void *v = kr_kv_v(kv, p->layer, seq, slot);
    for (int32_t i = 0; i < nv; i++) x[i] = elem(kv, v, i);
    if (p->key_pairs) {
        const void *k = kr_kv_k(kv, p->layer, seq, slot);
        float *o = x + nv;
        for (int32_t e = 0; e < kv->n_head_kv; e++)
            for (int32_t i = 0; i < half; i++) {
                int32_t i0 = e * d + (p->rope_neox ? i : 2 * i), i1 = i0 + (p->rope_neox ? half : 1);
                float a = elem(kv, k, i0), b = elem(kv, k, i1);
                *o++ = sqrtf(a * a + b * b);
            }
    }
    float z = p->b2;
    for (int32_t u = 0; u < p->n_hidden; u++) {
        const float *w = p->w1 + (size_t)u * (size_t)p->n_in;
        float a = p->b1[u];
        for (int32_t i = 0; i < p->n_in; i++) a += w[i] * x[i];
        h[u] = a > 0.0f ? a : 0.0f;
        z += p->w2[u] * h[u];
    }
    float y = 1.0f / (1.0f + expf(-z));
    return isfinite(y) ? y : 0.0f;
}

void kr_kv_prior_eval(const kr_kv_prior *p, const kr_kv_cache *kv, int32_t seq, int32_t first, int32_t n, float *out,
                      float *scratch) {
    for (int32_t j = 0; j < n; j++) out[j] = kr_kv_prior_slot(p, kv, seq, first + j, scratch);
}

void kr_kv_prior_combine(float *scores, const float *prior, int32_t n, float weight) {
    float mx = 0.0f;
    for (int32_t j = 0; j < n; j++)
        if (scores[j] > mx) mx = scores[j]; /* NaN compares false */
    const float inv = mx > 0.0f && isfinite(mx) ? 1.0f / mx : 0.0f;
    for (int32_t j = 0; j < n; j++) scores[j] = (inv > 0.0f ? scores[j] * inv : 0.0f) + weight * prior[j];
}
