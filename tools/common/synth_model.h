/*
 * synth_model.h - random-weight GGUF models with the tensor names, shapes and
 * metadata llama.cpp expects for the llama, qwen2 (Q/K/V biases) and qwen3
 * (per-head Q/K RMSNorm, explicit head_dim) architectures, plus a tiny
 * byte-level BPE vocabulary ("gpt2" model, "qwen2" pre-tokenizer) padded to
 * the requested vocabulary size. Used by tests (tiny shapes, every type) and
 * speed tests (real Qwen3 shapes: only the shapes matter for speed).
 *
 * Weights are deterministic in (seed, tensor name, element index) alone, so
 * the F32 file and a quantized file made with the same seed hold the same
 * values up to quantization error. Weight matrices are ~N(0, 1/row_length),
 * which keeps activations of order 1 through the layers; norm weights are
 * ~1 + N(0, 0.1^2) and biases ~N(0, 0.2^2). Data is generated, converted and
 * written a few rows at a time.
 */
#ifndef KR_SYNTH_MODEL_H
#define KR_SYNTH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftype.h"
#include "kara.h"

typedef struct kr_synth_params {
    char arch[16]; /* "llama", "qwen2" or "qwen3" */
    char name[64]; /* general.name ("" = "kara-synth-<arch>") */
    int32_t n_layer;
    int32_t n_embd;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim; /* 0 = n_embd / n_head */
    int32_t n_ff;
    int32_t n_vocab; /* >= kr_synth_min_vocab(); padded with unused tokens */
    int32_t n_ctx;   /* {arch}.context_length */
    float rope_freq_base;
    float rms_eps;  /* 0 = the architecture's usual (1e-5 llama, 1e-6 qwen) */
    bool tied;      /* no output.weight: token_embd.weight is the output matrix */
    kr_ftype ftype; /* weight type or llama.cpp mix */
    bool pure;      /* every weight matrix in the base type (llama-quantize --pure) */
    uint64_t seed;
    uint32_t alignment; /* general.alignment (32) */
} kr_synth_params;

/* Defaults: the `tiny` preset, arch llama, F32, seed 1. */
void kr_synth_params_init(kr_synth_params *p);
/* Fill the shape fields from a preset: "tiny" (4 layers, hidden 128, 4/2
 * heads of 32, FFN 256, vocab 512, untied), "tiny-k" (the same with hidden
 * 256, heads of 64, FFN 512: rows fit K-quant blocks), "qwen3-0.6b",
 * "qwen3-1.7b" (tied, vocab 151936; these two also set arch qwen3). Returns
 * false for an unknown name. */
bool kr_synth_preset(kr_synth_params *p, const char *preset);
/* Names of the presets, for usage messages. */
const char *kr_synth_preset_names(void);
/* Smallest vocabulary the built-in tokenizer needs (bytes, merges, specials). */
int32_t kr_synth_min_vocab(void);

/* Check the parameters; on error writes a message naming the field. */
kara_status kr_synth_validate(const kr_synth_params *p, char *err, size_t err_size);
/* Write the model. progress (optional) is called after each tensor with the
 * fraction done. */
kara_status kr_synth_write(const kr_synth_params *p, const char *path, void (*progress)(float frac, void *user),
                           void *user, char *err, size_t err_size);

/* The F32 values the generator puts into a tensor: row-major, n elements
 * starting at element 0 (the first rows). For tests that compare a file
 * against its source values. Returns false for a name the model does not
 * have. */
bool kr_synth_tensor_values(const kr_synth_params *p, const char *name, float *out, int64_t n);

/* Special token texts of the built-in vocabulary. */
#define KR_SYNTH_TOK_ENDOFTEXT "<|endoftext|>"
#define KR_SYNTH_TOK_IM_START "<|im_start|>"
#define KR_SYNTH_TOK_IM_END "<|im_end|>"
#define KR_SYNTH_TOK_THINK "<think>"
#define KR_SYNTH_TOK_THINK_END "</think>"

#endif /* KR_SYNTH_MODEL_H */
