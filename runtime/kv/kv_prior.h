/*
 * kv_prior.h - Kara's retention prior (docs/KARA_METHOD.md section 14): a
 * small MLP, trained per model by tools/train/retention_prior.py, that
 * predicts from what the cache holds for a slot whether queries far later
 * will read it. The model loader reads it from the GGUF; decode hands it
 * to the policy as plain arrays (kr_kv_policy_set_prior), so kv knows no
 * model.
 *
 * For slot j of a sequence, x_j is the value row of layer `layer` (all KV
 * heads, converted to f32) followed, with key_pairs, by the norms of the
 * pairs RoPE rotates together in its key row, per KV head: (i, i + rope_dim
 * / 2) when rope_neox, else (2i, 2i + 1), i < rope_dim / 2. Values carry no
 * RoPE and a rotation keeps a pair's norm, so x_j does not depend on the
 * slot's position. prior(j) = sigmoid(w2 . relu(W1 x_j + b1) + b2) in (0, 1).
 *
 * Combination with a window's attention scores s over its n candidates:
 *   s'(j) = s(j) / max_C s + weight * prior(j)     (s(j) / max = 0 when max <= 0)
 * so weight 1 makes the prior as strong as the whole range of the window's
 * normalised attention scores. Every selection of Kara ranks within one
 * window (Token2Chunk divides by the window's maximum itself), so the
 * normalisation alone changes no selection.
 *
 * Cost: 2 * n_in * n_hidden flops per candidate, single-threaded, in a fixed
 * order (the same bits for any thread count); no allocation.
 */
#ifndef KR_KV_PRIOR_H
#define KR_KV_PRIOR_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"
#include "kv_cache.h"

typedef struct kr_kv_prior {
    int32_t layer;    /* the layer whose cache rows feed it */
    bool key_pairs;   /* x also holds the key-pair norms */
    bool rope_neox;   /* pairs (i, i + rope_dim / 2); false: (2i, 2i + 1) */
    int32_t rope_dim; /* rotated dimensions of a head (even, <= head_dim) */
    int32_t n_in;     /* n_head_kv * head_dim (+ n_head_kv * rope_dim / 2 with key_pairs) */
    int32_t n_hidden;
    const float *w1; /* n_hidden x n_in, row-major */
    const float *b1; /* n_hidden */
    const float *w2; /* n_hidden */
    float b2;
} kr_kv_prior;

/* kara.score.prior_weight: auto (any negative value, the default) means
 * this weight when the model has a prior (measured on both task families
 * of the project's reasoning model: docs/KV_COMPRESSION.md, "The retention
 * prior as the default"), else off. */
#define KR_PRIOR_WEIGHT_AUTO 16.0f

/* The weight kara uses: w itself when >= 0, else the auto choice above. */
float kr_kv_prior_weight_resolve(float w, bool model_has_prior);

/* Does the prior fit the cache's rows (layer, n_in, rope_dim)? KARA_ERR_ARG with a message otherwise. */
kara_status kr_kv_prior_check(const kr_kv_prior *p, const kr_kv_cache *kv);
/* Floats of scratch kr_kv_prior_eval and kr_kv_prior_slot need. */
int32_t kr_kv_prior_scratch_floats(const kr_kv_prior *p);
/* The prior of one slot of seq (0 when the MLP's output is not finite). */
float kr_kv_prior_slot(const kr_kv_prior *p, const kr_kv_cache *kv, int32_t seq, int32_t slot, float *scratch);
/* out[j] = the prior of slot first + j of seq, j < n. */
void kr_kv_prior_eval(const kr_kv_prior *p, const kr_kv_cache *kv, int32_t seq, int32_t first, int32_t n, float *out,
                      float *scratch);
/* scores[j] = scores[j] / max + weight * prior[j] for j < n, as above. */
void kr_kv_prior_combine(float *scores, const float *prior, int32_t n, float weight);

#endif /* KR_KV_PRIOR_H */
