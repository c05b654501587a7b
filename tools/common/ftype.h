/*
 * ftype.h - model file types (llama.cpp's general.file_type enum) and the
 * per-tensor type rule that `kara quantize` and `kara gen-model` share, so a
 * synthetic model and a quantized one get the same mix llama-quantize would
 * choose (Q4_K_M: most weights Q4_K, attn_v and ffn_down Q6_K on a subset of
 * layers, the output matrix Q6_K, ...).
 */
#ifndef KR_FTYPE_H
#define KR_FTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

/* Values of general.file_type (llama.cpp's llama_ftype). */
typedef enum kr_ftype {
    KR_FTYPE_ALL_F32 = 0,
    KR_FTYPE_MOSTLY_F16 = 1,
    KR_FTYPE_MOSTLY_Q4_0 = 2,
    KR_FTYPE_MOSTLY_Q4_1 = 3,
    KR_FTYPE_MOSTLY_Q8_0 = 7,
    KR_FTYPE_MOSTLY_Q5_0 = 8,
    KR_FTYPE_MOSTLY_Q5_1 = 9,
    KR_FTYPE_MOSTLY_Q4_K_S = 14,
    KR_FTYPE_MOSTLY_Q4_K_M = 15,
    KR_FTYPE_MOSTLY_Q5_K_S = 16,
    KR_FTYPE_MOSTLY_Q5_K_M = 17,
    KR_FTYPE_MOSTLY_Q6_K = 18,
    KR_FTYPE_MOSTLY_BF16 = 32
} kr_ftype;

/* Parse a type name as llama-quantize spells it, case-insensitive: F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K;
 * Q4_K and Q5_K are aliases of Q4_K_M and Q5_K_M (as in llama-quantize). */
bool kr_ftype_parse(const char *name, kr_ftype *out);
/* "Q4_K_M", ...; "?" for a value not in the enum above. */
const char *kr_ftype_name(kr_ftype ftype);
/* The type most weights get ("base" type): Q4_K for Q4_K_M, F16 for F16... */
kr_type kr_ftype_base_type(kr_ftype ftype);
/* A comma-separated list of the accepted names, for usage messages. */
const char *kr_ftype_names(void);

/* Whether a tensor is a weight matrix that gets the file type (llama.cpp's
 * rule: 2 dims or more, name ends in "weight", not a norm). Other tensors
 * (norms, biases) are stored as F32. */
bool kr_ftype_tensor_is_quantizable(const char *name, int n_dims);

/* The type of one tensor of a file converted to ftype: llama.cpp's mix
 * (unless pure), then its fallback for rows that do not divide into the
 * type's blocks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, else F16).
 * name: GGUF tensor name ("blk.3.attn_v.weight"); ne0: row length; n_layer:
 * number of blocks; tied: the file has no output.weight, so token_embd.weight
 * also serves as the output matrix. Non-quantizable tensors give F32. */
kr_type kr_ftype_tensor_type(kr_ftype ftype, bool pure, const char *name, int n_dims, int64_t ne0, int n_layer,
                             bool tied);

/* Block index of a "blk.N.*" tensor name, -1 for other names. */
int kr_ftype_layer_of(const char *name);

#endif /* KR_FTYPE_H */
