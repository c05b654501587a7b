/*
 * test_quant_golden.c - our reference quantizers against llama.cpp's output.
 * The quantized models in ../shared were made by llama.cpp's quantizer from
 * the F32 files beside them (no importance matrix, so its reference
 * round-to-nearest path, including the K-quant scale searches); requantizing
 * every source row with kr_quantize_row must give the same bytes for
 * Q4_0, Q8_0, Q4_K and Q6_K.
 */
#include "gguf.h"
#include "kernels.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *src;
    const char *quant;
} golden_pair;

static const golden_pair pairs[] = {
    {"models/stories260K.gguf", "models/derived-stories260K-Q8_0.gguf"},
    {"models/stories260K.gguf", "models/derived-stories260K-Q4_0.gguf"},
    {"models/synth/tiny-random-qwen3-d256.gguf", "models/synth/tiny-random-qwen3-d256-Q8_0.gguf"},
    {"models/synth/tiny-random-qwen3-d256.gguf", "models/synth/tiny-random-qwen3-d256-Q6_K.gguf"},
    {"models/synth/tiny-random-qwen3-d256.gguf", "models/synth/tiny-random-qwen3-d256-Q4_K_M.gguf"},
};

static int types_seen[KR_TYPE_COUNT];

static void check_pair(const char *shared, const golden_pair *p) {
    kara_gguf *src = NULL, *q = NULL;
    if (!CHECK_MSG(kara_gguf_open(kr_test_path(shared, p->src), &src) == KARA_OK, "open %s: %s", p->src,
                   kara_last_error()) ||
        !CHECK_MSG(kara_gguf_open(kr_test_path(shared, p->quant), &q) == KARA_OK, "open %s: %s", p->quant,
                   kara_last_error())) {
        kara_gguf_close(src);
        return;
    }
    int compared = 0;
    for (uint64_t t = 0; t < q->n_tensors; t++) {
        const kara_gguf_tensor *qt = &q->tensors[t];
        const kr_type_info *qi = kr_type_get(qt->type);
        if (qi == NULL || qi->block_size == 1) {
            continue; /* float tensors are copied, not quantized */
        }
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)qt->name.len, qt->name.ptr);
        const kara_gguf_tensor *st = kara_gguf_find_tensor(src, name);
        if (!CHECK_MSG(st != NULL, "%s: tensor %s missing from the source", p->quant, name)) {
            continue;
        }
        const int64_t ncols = qt->ne[0];
        const int64_t nrows = (int64_t)(qt->nbytes / kr_type_row_size((kr_type)qt->type, ncols));
        const size_t src_row = kr_type_row_size((kr_type)st->type, ncols);
        const size_t q_row = kr_type_row_size((kr_type)qt->type, ncols);
        float *row = malloc(sizeof(float) * ncols);
        unsigned char *mine = malloc(q_row);
        int64_t bad_rows = 0;
        for (int64_t r = 0; r < nrows; r++) {
            kr_dequantize_row((kr_type)st->type, (const char *)st->data + r * src_row, row, ncols);
            kr_quantize_row((kr_type)qt->type, row, mine, ncols);
            if (memcmp(mine, (const char *)qt->data + r * q_row, q_row) != 0) {
                bad_rows++;
            }
        }
        CHECK_MSG(bad_rows == 0, "%s: %s (%s): %lld of %lld rows differ from llama.cpp's bytes", p->quant, name,
                  qi->name, (long long)bad_rows, (long long)nrows);
        types_seen[qt->type]++;
        compared++;
        free(row);
        free(mine);
    }
    CHECK_MSG(compared > 0, "%s: no quantized tensors compared", p->quant);
    kara_gguf_close(src);
    kara_gguf_close(q);
}

int main(void) {
    const char *shared = kr_test_require_shared("test_quant_golden");
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        check_pair(shared, &pairs[i]);
    }
    for (int t = 0; t < KR_TYPE_COUNT; t++) {
        if (types_seen[t]) {
            printf("  %s: %d tensors requantized and compared\n", kr_type_get(t)->name, types_seen[t]);
        }
    }
    CHECK(types_seen[KR_TYPE_Q8_0] > 0);
    CHECK(types_seen[KR_TYPE_Q4_0] > 0);
    CHECK(types_seen[KR_TYPE_Q4_K] > 0);
    CHECK(types_seen[KR_TYPE_Q6_K] > 0);
    return kr_test_finish();
}
