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

/* Kara's optional retention prior (docs/KARA_METHOD.md section 14): a small
 * MLP over what the KV cache holds for a slot of one layer, read from the
 * GGUF's kara_prior.* tensors (F32, pointing into the file) and kara.prior.*
 * keys. prior(x) = sigmoid(w2 . relu(W1 x + b1) + b2), x = the value row
 * (n_head_kv * head_dim) followed, with key_pairs, by the norms of the key's
 * RoPE pairs (n_head_kv * rope_dim / 2). */
typedef struct kr_prior {
    bool present;
    int32_t layer;    /* kara.prior.layer */
    bool key_pairs;   /* kara.prior.features: "v+kpair" (true) or "v" */
    int32_t n_in;     /* inputs: columns of w1 */
    int32_t n_hidden; /* rows of w1 */
    const float *w1;  /* n_hidden x n_in, row-major */
    const float *b1;  /* n_hidden */
    const float *w2;  /* n_hidden */
    const float *b2;  /* 1 */
} kr_prior;

/* Read the retention prior of the file, if it has one: m->prior.present
 * stays false when it has neither kara_prior.* tensors nor kara.prior.*
 * keys. KARA_ERR_FORMAT, naming the tensor or key, when the prior is
 * incomplete, of another type than F32, of a shape the model's cache rows
 * cannot feed, or not finite. Needs m->hp. */
kara_status kr_model_load_prior(kara_model *m, const char *path);

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
    kr_prior prior;   /* the retention prior; prior.present false when the file has none */
    char arch_name[16];
    char desc[128];
    uint64_t n_params;
    uint64_t weight_bytes;
    uint64_t repacked_bytes; /* weights rewritten into a kernel layout at load */
};

#endif /* KR_MODEL_H */
