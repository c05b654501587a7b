/*
 * model.h - a loaded model: hyper-parameters, weights (pointing into the
 * mapped GGUF), and the vocabulary. Immutable after kara_model_load.
 */
#ifndef KR_MODEL_H
#define KR_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "kara.h"
#include "kernels.h"
#include "vocab.h"

typedef enum kr_arch { KR_ARCH_LLAMA = 0, KR_ARCH_QWEN2, KR_ARCH_QWEN3 } kr_arch;

/* What distinguishes the architectures in the forward pass. */
typedef struct kr_hparams {
    kr_arch arch;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;   /* attention.key_length (qwen3 can differ from n_embd / n_head) */
    int32_t head_dim_v; /* attention.value_length */
    int32_t n_ff;
    int32_t rope_dim; /* dimensions rotated per head */
    float rope_freq_base;
    float rms_eps;
    bool rope_neox; /* rotate pairs (i, i + rope_dim/2) instead of (2i, 2i+1) */
    bool qkv_bias;  /* qwen2 */
    bool qk_norm;   /* qwen3: RMSNorm per head on Q and K before RoPE */
} kr_hparams;

/* A 2-D weight matrix: n_rows rows of n_cols elements (GGUF ne[1] x ne[0]). */
typedef struct kr_weight {
    const void *data;
    kr_type type;
    int64_t n_cols;
    int64_t n_rows;
    size_t row_bytes;
} kr_weight;

typedef struct kr_layer {
    const float *attn_norm;
    kr_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv;    /* qwen2, else NULL */
    const float *q_norm, *k_norm; /* qwen3, else NULL (head_dim floats) */
    const float *ffn_norm;
    kr_weight w_gate, w_up, w_down;
} kr_layer;

struct kara_model {
    kara_gguf *gguf;
    kr_hparams hp;
    kr_vocab vocab;
    bool vocab_only;
    kr_weight tok_embd;
    kr_weight output; /* = tok_embd when tied */
    const float *output_norm;
    kr_layer *layers;
    float *f32_store; /* norms and biases converted to f32 at load */
    char arch_name[16];
    char desc[128];
    uint64_t n_params;
    uint64_t weight_bytes;
    uint64_t repacked_bytes; /* weights rewritten into a kernel layout at load */
};

#endif /* KR_MODEL_H */
