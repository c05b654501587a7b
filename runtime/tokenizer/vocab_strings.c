/*
 * vocab_strings.c - the vocabulary's string table: token texts (and the few
 * BPE merge strings that are not tokens) by their bytes, in an
 * open-addressing hash table, plus the small arena for strings the
 * vocabulary owns.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Owned strings                                                             */
/* ------------------------------------------------------------------------ */

struct kr_str_arena_block {
    kr_str_arena_block *next;
    size_t used, size;
    char data[];
};

/* Copy a+b into the arena; the few strings the vocabulary owns ("[EMPTY_n]",
 * merge results that are not tokens) live there until kr_vocab_free. */
char *kr_vocab_arena_copy(kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    size_t n = alen + blen;
    kr_str_arena_block *blk = im->arena;
    if (!blk || blk->size - blk->used < n) {
        size_t size = n > 65536 ? n : 65536;
        blk = malloc(sizeof *blk + size);
        if (!blk) return NULL;
        blk->next = im->arena;
        blk->used = 0;
        blk->size = size;
        im->arena = blk;
    }
    char *p = blk->data + blk->used;
    if (alen) memcpy(p, a, alen);
    if (blen) memcpy(p + alen, b, blen);
    blk->used += n;
    return p;
}

/* ------------------------------------------------------------------------ */
/* String table: text -> symbol id                                           */
/* ------------------------------------------------------------------------ */

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define HASH_SEED 0xcbf29ce484222325ULL

static uint32_t slot_of(uint64_t h, uint32_t mask) { return (uint32_t)((h ^ (h >> 29)) & mask); }

int32_t kr_vocab_sym_find2(const kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    if (!im->slots) return -1;
    uint64_t h = hash_bytes(hash_bytes(HASH_SEED, a, alen), b, blen);
    size_t n = alen + blen;
    for (uint32_t i = slot_of(h, im->slot_mask);; i = (i + 1) & im->slot_mask) {
        uint32_t e = im->slots[i];
        if (!e) return -1;
        const kr_strref *s = &im->strs[e - 1];
        if (s->len == n && memcmp(s->ptr, a, alen) == 0 && memcmp(s->ptr + alen, b, blen) == 0) return (int32_t)(e - 1);
    }
}

int32_t kr_vocab_sym_find(const kr_vocab_impl *im, const char *s, size_t len) {
    return kr_vocab_sym_find2(im, s, len, "", 0);
}

void kr_vocab_sym_insert(kr_vocab_impl *im, uint32_t id) {
    const kr_strref *s = &im->strs[id];
    uint32_t i = slot_of(hash_bytes(HASH_SEED, s->ptr, s->len), im->slot_mask);
    while (im->slots[i]) i = (i + 1) & im->slot_mask;
    im->slots[i] = id + 1;
}

/* Keep the table at most half full. */
bool kr_vocab_table_reserve(kr_vocab_impl *im, uint32_t n_strs) {
    uint64_t want = 16;
    while (want < 2ULL * n_strs) want <<= 1;
    if (want > UINT32_MAX) return false;
    if (im->slots && want <= (uint64_t)im->slot_mask + 1) return true;
    uint32_t *slots = calloc((size_t)want, sizeof *slots);
    if (!slots) return false;
    free(im->slots);
    im->slots = slots;
    im->slot_mask = (uint32_t)(want - 1);
    for (uint32_t id = 0; id < im->n_strs; id++) kr_vocab_sym_insert(im, id);
    return true;
}

int32_t kr_vocab_sym_add(kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen) {
    if (alen + blen > UINT32_MAX || im->n_strs >= (uint32_t)INT32_MAX) return -1;
    if (im->n_strs == im->cap_strs) {
        uint32_t cap = im->cap_strs ? im->cap_strs * 2 : 1024;
        kr_strref *strs = realloc(im->strs, (size_t)cap * sizeof *strs);
        if (!strs) return -1;
        im->strs = strs;
        im->cap_strs = cap;
    }
    if (!kr_vocab_table_reserve(im, im->n_strs + 1)) return -1;
    char *p = kr_vocab_arena_copy(im, a, alen, b, blen);
    if (!p) return -1;
    uint32_t id = im->n_strs++;
    im->strs[id] = (kr_strref){p, (uint32_t)(alen + blen)};
    kr_vocab_sym_insert(im, id);
    return (int32_t)id;
}

void kr_vocab_arena_free(kr_vocab_impl *im) {
    while (im->arena) {
        kr_str_arena_block *next = im->arena->next;
        free(im->arena);
        im->arena = next;
    }
}
