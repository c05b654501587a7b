#include "test_gguf.h"

#include <string.h>

static bool array_eq(const kara_gguf_array *a, const kara_gguf_array *b) {
    if (a->type != b->type || a->n != b->n) return false;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == KARA_GGUF_STRING) {
            if (a->strs[i].len != b->strs[i].len || memcmp(a->strs[i].ptr, b->strs[i].ptr, a->strs[i].len))
                return false;
        } else if (a->type == KARA_GGUF_ARRAY) {
            if (!kr_test_gguf_value_eq(&a->items[i], &b->items[i])) return false;
        }
    }
    if (a->type != KARA_GGUF_STRING && a->type != KARA_GGUF_ARRAY && a->n) {
        static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}; /* bytes per element, by GGUF type */
        return memcmp(a->data, b->data, a->n * (uint64_t)sz[a->type]) == 0;
    }
    return true;
}

bool kr_test_gguf_value_eq(const kara_gguf_value *a, const kara_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case KARA_GGUF_STRING: return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case KARA_GGUF_ARRAY: return array_eq(&a->v.arr, &b->v.arr);
    case KARA_GGUF_FLOAT32:
    case KARA_GGUF_FLOAT64: return memcmp(&a->v.f64, &b->v.f64, sizeof(double)) == 0;
    default: return a->v.u64 == b->v.u64;
    }
}
