/* pair_heap.h - a binary heap over a caller's array, generated for one
 * element type and one order. Both tokenizers merge the best adjacent pair
 * first (BPE by merge rank, SPM by score) and queue candidate pairs here. */
#ifndef KR_PAIR_HEAP_H
#define KR_PAIR_HEAP_H

#include <stddef.h>

/* Defines `static void NAME_push(T *h, size_t *n, T item)` and
 * `static T NAME_pop(T *h, size_t *n)` (n > 0), where before(&a, &b) is true
 * when a must come out first. */
#define KR_DEFINE_PAIR_HEAP(NAME, T, before)                                                                           \
    static void NAME##_push(T *h, size_t *n, T item) {                                                                 \
        size_t i = (*n)++;                                                                                             \
        while (i > 0) {                                                                                                \
            size_t parent = (i - 1) / 2;                                                                               \
            if (!before(&item, &h[parent])) break;                                                                     \
            h[i] = h[parent];                                                                                          \
            i = parent;                                                                                                \
        }                                                                                                              \
        h[i] = item;                                                                                                   \
    }                                                                                                                  \
    static T NAME##_pop(T *h, size_t *n) {                                                                             \
        T top = h[0];                                                                                                  \
        T last = h[--(*n)];                                                                                            \
        size_t i = 0;                                                                                                  \
        for (;;) {                                                                                                     \
            size_t c = 2 * i + 1;                                                                                      \
            if (c >= *n) break;                                                                                        \
            if (c + 1 < *n && before(&h[c + 1], &h[c])) c++;                                                           \
            if (!before(&h[c], &last)) break;                                                                          \
            h[i] = h[c];                                                                                               \
            i = c;                                                                                                     \
        }                                                                                                              \
        if (*n) h[i] = last;                                                                                           \
        return top;                                                                                                    \
    }

#endif /* KR_PAIR_HEAP_H */
