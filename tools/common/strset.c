/* strset.c - open-addressing string set (see strset.h). */
#include "strset.h"

#include <stdlib.h>
#include <string.h>

uint64_t kr_fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static size_t find_slot(char *const *keys, size_t cap, const char *key) {
    size_t i = (size_t)kr_fnv1a(key, strlen(key)) & (cap - 1);
    while (keys[i] && strcmp(keys[i], key)) i = (i + 1) & (cap - 1);
    return i;
}

/* Double the table (load stays below 1/2, so probes stay short). */
static bool grow(kr_strset *set) {
    size_t cap = set->cap ? set->cap * 2 : 64;
    char **keys = calloc(cap, sizeof *keys);
    int *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return false;
    }
    for (size_t i = 0; i < set->cap; i++)
        if (set->keys[i]) {
            size_t j = find_slot(keys, cap, set->keys[i]);
            keys[j] = set->keys[i];
            values[j] = set->values[i];
        }
    free(set->keys);
    free(set->values);
    set->keys = keys;
    set->values = values;
    set->cap = cap;
    return true;
}

int kr_strset_add(kr_strset *set, const char *key, int value, int *old) {
    if ((set->n + 1) * 2 > set->cap && !grow(set)) return -1;
    size_t i = find_slot(set->keys, set->cap, key);
    if (set->keys[i]) {
        if (old) *old = set->values[i];
        return 0;
    }
    size_t n = strlen(key);
    char *copy = malloc(n + 1);
    if (!copy) return -1;
    memcpy(copy, key, n + 1);
    set->keys[i] = copy;
    set->values[i] = value;
    set->n++;
    return 1;
}

bool kr_strset_get(const kr_strset *set, const char *key, int *value) {
    if (!set->cap) return false;
    size_t i = find_slot(set->keys, set->cap, key);
    if (!set->keys[i]) return false;
    if (value) *value = set->values[i];
    return true;
}

void kr_strset_free(kr_strset *set) {
    for (size_t i = 0; i < set->cap; i++) free(set->keys[i]);
    free(set->keys);
    free(set->values);
    memset(set, 0, sizeof *set);
}
