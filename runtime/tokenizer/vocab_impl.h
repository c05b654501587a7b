/*
 * vocab_impl.h - the private side of vocab.h, shared by vocab.c (loading,
 * lookups, pieces), vocab_special.c (special-token partition) and the two
 * tokenizers (tokenizer_spm.c, tokenizer_bpe.c).
 */
#ifndef KR_VOCAB_IMPL_H
#define KR_VOCAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pretokenize.h"
#include "vocab.h"

/* Per-token attribute bits (besides the token type). */
#define KR_TOKEN_ATTR_EOG 0x01u    /* ends generation */
#define KR_TOKEN_ATTR_RSTRIP 0x02u /* white space after it is dropped when it is matched in text */

/* The most BPE merges a file may carry per vocabulary token (the load
 * refuses more): converted files hold up to about 2.2. */
#define KR_BPE_MERGES_PER_TOKEN 4

/* A string that is not NUL-terminated. */
typedef struct kr_strref {
    const char *ptr;
    uint32_t len;
} kr_strref;

/* A bump allocator for the few strings the vocabulary owns. */
typedef struct kr_str_arena_block kr_str_arena_block;

struct kr_vocab_impl {
    /* strs[0..n_tokens) are the token texts; strs[n_tokens..n_strs) are
     * strings that appear in BPE merges without being tokens. The string
     * table maps any of them to its index (its "symbol id"). */
    kr_strref *strs;
    uint32_t n_strs, cap_strs;
    uint32_t *slots; /* open addressing: index + 1, 0 = empty */
    uint32_t slot_mask;
    kr_str_arena_block *arena;

    float *scores;  /* tokenizer.ggml.scores, NULL when absent (all 0) */
    uint8_t *types; /* kr_token_type per token */
    uint8_t *attrs; /* KARA_TOKEN_ATTR_* per token */

    /* The token of each byte: SPM "<0xXX>" (else the one-byte text, else
     * unk), BPE the byte's GPT-2 character; -1 when the vocabulary has none. */
    int32_t byte_token[256];

    /* Tokens matched as whole tokens in text (CONTROL, USER_DEFINED and
     * UNKNOWN types), longest text first, and a trie over their texts. */
    int32_t *special;
    uint32_t n_special;
    struct kr_special_trie *trie;
    uint32_t n_trie;
    uint8_t special_first_byte[256]; /* 1 when some special text starts with it */

    /* SPM: true when no token has a U+2581 right after another character
     * than U+2581, so text can be merged word by word (tokenizer_spm.c) */
    bool spm_word_split;

    /* byte-level BPE */
    kr_pretok_info pre;
    int32_t byte_sym[256]; /* symbol id of each byte's GPT-2 character, -1 if none */
    uint64_t *merge_keys;  /* (left << 32 | right) + 1, 0 = empty */
    uint32_t *merge_rank;
    uint32_t *merge_result; /* symbol id of left+right */
    uint32_t merge_mask;
    uint32_t n_merges;
};

typedef struct kr_special_trie {
    int32_t first_child, next_sibling;
    int32_t special; /* index into impl->special ending here, -1 */
    uint8_t byte;
} kr_special_trie;

/* ------------------------------------------------------------------------ */
/* String table (vocab_strings.c)                                                    */
/* ------------------------------------------------------------------------ */

/* Make room for n_strs strings (the table stays at most half full). */
bool kr_vocab_table_reserve(kr_vocab_impl *im, uint32_t n_strs);
/* Enter strs[id] into the table (its text must not be there yet). */
void kr_vocab_sym_insert(kr_vocab_impl *im, uint32_t id);
/* Copy a+b into the vocabulary's arena (NULL when out of memory). */
char *kr_vocab_arena_copy(kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen);
void kr_vocab_arena_free(kr_vocab_impl *im);
/* Symbol id of a string, -1 if absent. */
int32_t kr_vocab_sym_find(const kr_vocab_impl *im, const char *s, size_t len);
/* Symbol id of the concatenation a+b without building it, -1 if absent. */
int32_t kr_vocab_sym_find2(const kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen);
/* Add a string that is not a token (copied into the vocab's arena); returns
 * its symbol id, or -1 when out of memory. */
int32_t kr_vocab_sym_add(kr_vocab_impl *im, const char *a, size_t alen, const char *b, size_t blen);

/* ------------------------------------------------------------------------ */
/* Tokenization scratch and output                                           */
/* ------------------------------------------------------------------------ */

/* Where token ids go: written while they fit, always counted. */
typedef struct kr_tok_out {
    int32_t *ids;
    int64_t max;
    int64_t n;
} kr_tok_out;

static inline void kr_tok_emit(kr_tok_out *o, int32_t id) {
    if (o->n < o->max) o->ids[o->n] = id;
    o->n++;
}

/* A piece of the input after special-token matching: raw text, or a token. */
typedef struct kr_fragment {
    size_t off, len;
    int32_t token; /* -1 for raw text */
} kr_fragment;

/* One tokenize call's scratch memory; grows as needed, freed at the end of
 * the call (the vocabulary itself is read-only and shared across threads). */
typedef struct kr_tok_work {
    kr_fragment *frags, *frags2;
    size_t cap_frags, cap_frags2;
    uint8_t *found; /* which special tokens occur in the text */
    char *text;     /* SPM: escaped fragment; BPE: word bytes */
    size_t cap_text;
    char *text2; /* BPE: GPT-2-encoded word */
    size_t cap_text2;
    uint32_t *cpts, *ends, *tmp;
    uint8_t *cls;
    size_t cap_cpts;
    void *syms; /* tokenizer symbols */
    size_t cap_syms;
    void *heap; /* tokenizer merge queue */
    size_t cap_heap;
} kr_tok_work;

/* Make *p hold at least n elements of elem bytes (contents kept). */
bool kr_work_reserve(void **p, size_t *cap, size_t n, size_t elem);
void kr_work_free(kr_tok_work *w);

/* vocab_special.c: build the matcher at load time (errors, here and in
 * kr_bpe_build, through kr_set_error), and split text into fragments
 * (control and unknown tokens only when parse_special; user-defined ones
 * always, as Hugging Face and llama.cpp do). */
kara_status kr_vocab_special_build(kr_vocab *v);
kara_status kr_vocab_partition(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, bool parse_special,
                               size_t *n_frags);

/* tokenizer_spm.c: load-time checks, and one raw fragment (already escaped:
 * spaces as U+2581). */
void kr_spm_prepare(kr_vocab *v);
kara_status kr_spm_tokenize(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out);

/* tokenizer_bpe.c */
kara_status kr_bpe_build(kr_vocab *v, const kara_gguf_array *merges);
kara_status kr_bpe_tokenize(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, kr_tok_out *out);
/* GPT-2's reversible byte <-> printable-character mapping. */
uint32_t kr_bpe_byte_to_cpt(uint8_t b);
/* The byte of a mapped character, -1 for characters outside the mapping. */
int kr_bpe_cpt_to_byte(uint32_t cpt);

#endif /* KR_VOCAB_IMPL_H */
