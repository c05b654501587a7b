/*
 * ftype.c - file types and llama.cpp's per-tensor type mix (as described in
 * its src/llama-quant.cpp: llama_tensor_get_type and its shape fallback).
 */
#include "ftype.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ftype_entry {
    const char *name;
    kr_ftype ftype;
    kr_type base;
} ftype_entry;

static const ftype_entry k_ftypes[] = {
    {"F32", KR_FTYPE_ALL_F32, KR_TYPE_F32},           {"F16", KR_FTYPE_MOSTLY_F16, KR_TYPE_F16},
    {"BF16", KR_FTYPE_MOSTLY_BF16, KR_TYPE_BF16},     {"Q8_0", KR_FTYPE_MOSTLY_Q8_0, KR_TYPE_Q8_0},
    {"Q4_0", KR_FTYPE_MOSTLY_Q4_0, KR_TYPE_Q4_0},     {"Q4_1", KR_FTYPE_MOSTLY_Q4_1, KR_TYPE_Q4_1},
    {"Q5_0", KR_FTYPE_MOSTLY_Q5_0, KR_TYPE_Q5_0},     {"Q5_1", KR_FTYPE_MOSTLY_Q5_1, KR_TYPE_Q5_1},
    {"Q4_K_S", KR_FTYPE_MOSTLY_Q4_K_S, KR_TYPE_Q4_K}, {"Q4_K_M", KR_FTYPE_MOSTLY_Q4_K_M, KR_TYPE_Q4_K},
    {"Q5_K_S", KR_FTYPE_MOSTLY_Q5_K_S, KR_TYPE_Q5_K}, {"Q5_K_M", KR_FTYPE_MOSTLY_Q5_K_M, KR_TYPE_Q5_K},
    {"Q6_K", KR_FTYPE_MOSTLY_Q6_K, KR_TYPE_Q6_K},
};
#define N_FTYPES (sizeof k_ftypes / sizeof k_ftypes[0])

static bool eq_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (toupper((unsigned char)*a) != toupper((unsigned char)*b)) return false;
    return *a == *b;
}

bool kr_ftype_parse(const char *name, kr_ftype *out) {
    if (!name) return false;
    if (eq_nocase(name, "Q4_K")) name = "Q4_K_M";
    if (eq_nocase(name, "Q5_K")) name = "Q5_K_M";
    for (size_t i = 0; i < N_FTYPES; i++) {
        if (eq_nocase(name, k_ftypes[i].name)) {
            *out = k_ftypes[i].ftype;
            return true;
        }
    }
    return false;
}

static const ftype_entry *find(kr_ftype f) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (k_ftypes[i].ftype == f) return &k_ftypes[i];
    return NULL;
}

const char *kr_ftype_name(kr_ftype ftype) {
    const ftype_entry *e = find(ftype);
    return e ? e->name : "?";
}

kr_type kr_ftype_base_type(kr_ftype ftype) {
    const ftype_entry *e = find(ftype);
    return e ? e->base : KR_TYPE_F32;
}

const char *kr_ftype_names(void) {
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M (= Q4_K), Q5_K_S, Q5_K_M (= Q5_K), Q6_K";
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

bool kr_ftype_tensor_is_quantizable(const char *name, int n_dims) {
    return n_dims >= 2 && ends_with(name, "weight") && !strstr(name, "_norm.weight");
}

int kr_ftype_layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || v < 0 || v > 1000000) return -1;
    return (int)v;
}

static bool is_quantized(kr_type t) { return t != KR_TYPE_F32 && t != KR_TYPE_F16 && t != KR_TYPE_BF16; }

static int block_of(kr_type t) {
    const kr_type_info *ti = kr_type_get((uint32_t)t);
    return ti ? ti->block_size : 1;
}

/* llama.cpp spends more bits on the first and last eighth of the layers and
 * on every third layer in between. */
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

/* The mix: which type a tensor gets for a file type before shape checks. */
static kr_type mix_type(kr_ftype ftype, kr_type t, const char *name, int64_t ne0, int n_layer, bool tied) {
    bool is_output = !strcmp(name, "output.weight");
    bool is_embd = !strcmp(name, "token_embd.weight");
    int il = kr_ftype_layer_of(name);
    if (is_output || (tied && is_embd)) {
        /* the output matrix (or the tied embedding serving as it) is
         * sensitive: Q6_K unless the file is Q8_0, Q8_0 if rows don't fit */
        if (ne0 % block_of(t) != 0) return KR_TYPE_Q8_0;
        if (t != KR_TYPE_Q8_0) return KR_TYPE_Q6_K;
        return t;
    }
    if (is_embd) return t;
    if (strstr(name, "attn_v.weight")) {
        if ((ftype == KR_FTYPE_MOSTLY_Q4_K_M || ftype == KR_FTYPE_MOSTLY_Q5_K_M) && il >= 0 &&
            use_more_bits(il, n_layer))
            return KR_TYPE_Q6_K;
        if (ftype == KR_FTYPE_MOSTLY_Q4_K_S && il >= 0 && il < 4) return KR_TYPE_Q5_K;
        return t;
    }
    if (strstr(name, "ffn_down")) {
        if ((ftype == KR_FTYPE_MOSTLY_Q4_K_M || ftype == KR_FTYPE_MOSTLY_Q5_K_M) && il >= 0 &&
            use_more_bits(il, n_layer))
            return KR_TYPE_Q6_K;
        if (ftype == KR_FTYPE_MOSTLY_Q4_K_S && il >= 0 && il < n_layer / 8) return KR_TYPE_Q5_K;
        return t;
    }
    return t;
}

kr_type kr_ftype_tensor_type(kr_ftype ftype, bool pure, const char *name, int n_dims, int64_t ne0, int n_layer,
                             bool tied) {
    if (!kr_ftype_tensor_is_quantizable(name, n_dims)) return KR_TYPE_F32;
    kr_type t = kr_ftype_base_type(ftype);
    if (!is_quantized(t)) return t;
    if (!pure) t = mix_type(ftype, t, name, ne0, n_layer, tied);
    if (ne0 % block_of(t) != 0) {
        switch (t) {
        case KR_TYPE_Q4_K: t = KR_TYPE_Q5_0; break;
        case KR_TYPE_Q5_K: t = KR_TYPE_Q5_1; break;
        case KR_TYPE_Q6_K: t = KR_TYPE_Q8_0; break;
        default: t = KR_TYPE_F16; break;
        }
        if (ne0 % block_of(t) != 0) t = KR_TYPE_F16;
    }
    return t;
}
