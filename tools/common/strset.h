/* strset.h - a set of strings (open addressing, FNV-1a), each with an int
 * value: custom_ids seen in a batch input (value: line number) or already
 * answered in its output. */
#ifndef KR_STRSET_H
#define KR_STRSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kr_strset {
    char **keys; /* NULL = empty slot; keys are copies */
    int *values;
    size_t cap, n;
} kr_strset;

/* 64-bit FNV-1a of s[0..n). */
uint64_t kr_fnv1a(const char *s, size_t n);

/* Insert key with value unless present. Returns 1 when inserted, 0 when it
 * was there (*old, if given, gets its value), -1 when out of memory. */
int kr_strset_add(kr_strset *set, const char *key, int value, int *old);
/* True when present (*value, if given, gets its value). */
bool kr_strset_get(const kr_strset *set, const char *key, int *value);
void kr_strset_free(kr_strset *set);

#endif
