/*
 * types.c - the tensor type table: names, block geometry and the activation
 * format each weight type's dot product consumes.
 */
#include "kernels_impl.h"

#define ENTRY(id, nm, bs, ts, sup, vdt) [id] = { nm, bs, ts, sup, vdt, false }

static const kara_type_info type_table[KARA_TYPE_COUNT] = {
    ENTRY(KARA_TYPE_F32, "F32", 1, 4, true, KARA_TYPE_F32),
    ENTRY(KARA_TYPE_F16, "F16", 1, 2, true, KARA_TYPE_F16),
    ENTRY(KARA_TYPE_BF16, "BF16", 1, 2, true, KARA_TYPE_BF16),
    ENTRY(KARA_TYPE_Q4_0, "Q4_0", KARA_QK4_0, sizeof(kara_block_q4_0), true, KARA_TYPE_Q8_0),
    ENTRY(KARA_TYPE_Q4_1, "Q4_1", KARA_QK4_1, sizeof(kara_block_q4_1), true, KARA_TYPE_Q8_1),
    ENTRY(KARA_TYPE_Q5_0, "Q5_0", KARA_QK5_0, sizeof(kara_block_q5_0), true, KARA_TYPE_Q8_0),
    ENTRY(KARA_TYPE_Q5_1, "Q5_1", KARA_QK5_1, sizeof(kara_block_q5_1), true, KARA_TYPE_Q8_1),
    ENTRY(KARA_TYPE_Q8_0, "Q8_0", KARA_QK8_0, sizeof(kara_block_q8_0), true, KARA_TYPE_Q8_0),
    /* Q8_1 and Q8_K are activation formats: quantize/dequantize only. */
    ENTRY(KARA_TYPE_Q8_1, "Q8_1", KARA_QK8_1, sizeof(kara_block_q8_1), false, KARA_TYPE_Q8_1),
    ENTRY(KARA_TYPE_Q8_K, "Q8_K", KARA_QK_K, sizeof(kara_block_q8_K), false, KARA_TYPE_Q8_K),
    /* Known so files can be described, but no kernels yet. */
    ENTRY(KARA_TYPE_Q2_K, "Q2_K", KARA_QK_K, 2 + 2 + KARA_QK_K / 16 + KARA_QK_K / 4, false, KARA_TYPE_Q8_K),
    ENTRY(KARA_TYPE_Q3_K, "Q3_K", KARA_QK_K, 2 + KARA_QK_K / 8 + KARA_QK_K / 4 + 12, false, KARA_TYPE_Q8_K),
    ENTRY(KARA_TYPE_Q4_K, "Q4_K", KARA_QK_K, sizeof(kara_block_q4_K), true, KARA_TYPE_Q8_K),
    ENTRY(KARA_TYPE_Q5_K, "Q5_K", KARA_QK_K, sizeof(kara_block_q5_K), true, KARA_TYPE_Q8_K),
    ENTRY(KARA_TYPE_Q6_K, "Q6_K", KARA_QK_K, sizeof(kara_block_q6_K), true, KARA_TYPE_Q8_K),
    /* load-time layouts (kernels.h): rejected in files by the GGUF reader */
    [KARA_TYPE_Q4_K_X16] = { "Q4_K_X16", KARA_QK_K, sizeof(kara_block_q4_K), true, KARA_TYPE_Q8_K, true },
    [KARA_TYPE_Q6_K_X16] = { "Q6_K_X16", KARA_QK_K, sizeof(kara_block_q6_K), true, KARA_TYPE_Q8_K, true },
    [KARA_TYPE_Q4_0_X16] = { "Q4_0_X16", KARA_QK4_0, sizeof(kara_block_q4_0), true, KARA_TYPE_Q8_0, true },
    [KARA_TYPE_F32_X16] = { "F32_X16", 1, 4, true, KARA_TYPE_F32, true },
};

/* The block structs must match GGUF byte for byte. */
_Static_assert(sizeof(kara_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(kara_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(kara_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(kara_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(kara_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(kara_block_q8_1) == 36, "q8_1 block");
_Static_assert(sizeof(kara_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(kara_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(kara_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(kara_block_q8_K) == 292, "q8_K block");

const kara_type_info *kara_type_get(uint32_t type)
{
    if (type >= KARA_TYPE_COUNT || type_table[type].name == NULL) {
        return NULL;
    }
    return &type_table[type];
}

size_t kara_type_row_size(kara_type type, int64_t n)
{
    const kara_type_info *info = kara_type_get((uint32_t)type);
    if (info == NULL || n < 0) {
        return 0;
    }
    return (size_t)(n / info->block_size) * (size_t)info->type_size;
}
