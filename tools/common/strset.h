/* strset.h - a set of strings (open addressing, FNV-1a), each with an int
 * value: custom_ids seen in a batch input (value: line number) or already
 * answered in its output. */
#ifndef KARA_STRSET_H
#define KARA_STRSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kara_strset {
    char **keys;     /* NULL = empty slot; keys are copies */
    int *values;
    size_t cap, n;
} kara_strset;

/* 64-bit FNV-1a of s[0..n). */
uint64_t kara_fnv1a(const char *s, size_t n);

/* Insert key with value unless present. Returns 1 when inserted, 0 when it
 * was there (*old, if given, gets its value), -1 when out of memory. */
int kara_strset_add(kara_strset *set, const char *key, int value, int *old);
/* True when present (*value, if given, gets its value). */
bool kara_strset_get(const kara_strset *set, const char *key, int *value);
void kara_strset_free(kara_strset *set);

#endif
