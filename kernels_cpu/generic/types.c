/*
 * types.c - the tensor type table: names, block geometry and the activation
 * format each weight type's dot product consumes.
 */
#include "kernels_impl.h"

#define ENTRY(id, nm, bs, ts, sup, vdt) [id] = {nm, bs, ts, sup, vdt, false}

static const kr_type_info type_table[KR_TYPE_COUNT] = {
    ENTRY(KR_TYPE_F32, "F32", 1, 4, true, KR_TYPE_F32),
    ENTRY(KR_TYPE_F16, "F16", 1, 2, true, KR_TYPE_F16),
    ENTRY(KR_TYPE_BF16, "BF16", 1, 2, true, KR_TYPE_BF16),
    ENTRY(KR_TYPE_Q4_0, "Q4_0", KR_QK4_0, sizeof(kr_block_q4_0), true, KR_TYPE_Q8_0),
    ENTRY(KR_TYPE_Q4_1, "Q4_1", KR_QK4_1, sizeof(kr_block_q4_1), true, KR_TYPE_Q8_1),
    ENTRY(KR_TYPE_Q5_0, "Q5_0", KR_QK5_0, sizeof(kr_block_q5_0), true, KR_TYPE_Q8_0),
    ENTRY(KR_TYPE_Q5_1, "Q5_1", KR_QK5_1, sizeof(kr_block_q5_1), true, KR_TYPE_Q8_1),
    ENTRY(KR_TYPE_Q8_0, "Q8_0", KR_QK8_0, sizeof(kr_block_q8_0), true, KR_TYPE_Q8_0),
    /* Q8_1 and Q8_K are activation formats: quantize/dequantize only. */
    ENTRY(KR_TYPE_Q8_1, "Q8_1", KR_QK8_1, sizeof(kr_block_q8_1), false, KR_TYPE_Q8_1),
    ENTRY(KR_TYPE_Q8_K, "Q8_K", KR_QK_K, sizeof(kr_block_q8_K), false, KR_TYPE_Q8_K),
    /* Known so files can be described, but no kernels yet. */
    ENTRY(KR_TYPE_Q2_K, "Q2_K", KR_QK_K, 2 + 2 + KR_QK_K / 16 + KR_QK_K / 4, false, KR_TYPE_Q8_K),
    ENTRY(KR_TYPE_Q3_K, "Q3_K", KR_QK_K, 2 + KR_QK_K / 8 + KR_QK_K / 4 + 12, false, KR_TYPE_Q8_K),
    ENTRY(KR_TYPE_Q4_K, "Q4_K", KR_QK_K, sizeof(kr_block_q4_K), true, KR_TYPE_Q8_K),
    ENTRY(KR_TYPE_Q5_K, "Q5_K", KR_QK_K, sizeof(kr_block_q5_K), true, KR_TYPE_Q8_K),
    ENTRY(KR_TYPE_Q6_K, "Q6_K", KR_QK_K, sizeof(kr_block_q6_K), true, KR_TYPE_Q8_K),
    /* load-time layouts (kernels.h): rejected in files by the GGUF reader */
    [KR_TYPE_Q4_K_X16] = {"Q4_K_X16", KR_QK_K, sizeof(kr_block_q4_K), true, KR_TYPE_Q8_K, true},
    [KR_TYPE_Q6_K_X16] = {"Q6_K_X16", KR_QK_K, sizeof(kr_block_q6_K), true, KR_TYPE_Q8_K, true},
    [KR_TYPE_Q4_0_X16] = {"Q4_0_X16", KR_QK4_0, sizeof(kr_block_q4_0), true, KR_TYPE_Q8_0, true},
    [KR_TYPE_F32_X16] = {"F32_X16", 1, 4, true, KR_TYPE_F32, true},
};

/* The block structs must match GGUF byte for byte. */
_Static_assert(sizeof(kr_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(kr_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(kr_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(kr_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(kr_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(kr_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(kr_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(kr_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(kr_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(kr_block_q8_K) == 292, "q8_K block");

const kr_type_info *kr_type_get(uint32_t type) {
    if (type >= KR_TYPE_COUNT || type_table[type].name == NULL) {
        return NULL;
    }
    return &type_table[type];
}

size_t kr_type_row_size(kr_type type, int64_t n) {
    const kr_type_info *info = kr_type_get((uint32_t)type);
    if (info == NULL || n < 0) {
        return 0;
    }
    return (size_t)(n / info->block_size) * (size_t)info->type_size;
}
