/*
 * vocab.h - the tokenizer behind one interface: the vocabulary read from a
 * GGUF's tokenizer.* keys, and tokenize / token-to-piece for each model kind
 * (SPM `llama`, byte-level BPE `gpt2` with the pre-tokenizer named by
 * tokenizer.ggml.pre).
 */
#ifndef KARA_VOCAB_H
#define KARA_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "kara.h"

typedef enum kara_vocab_kind {
    KARA_VOCAB_NONE = 0,   /* no tokenizer in the file: ids only */
    KARA_VOCAB_SPM = 1,    /* tokenizer.ggml.model = "llama" */
    KARA_VOCAB_BPE = 2     /* tokenizer.ggml.model = "gpt2" */
} kara_vocab_kind;

/* GGUF token types (tokenizer.ggml.token_type). */
typedef enum kara_token_type {
    KARA_TOKEN_UNDEFINED = 0,
    KARA_TOKEN_NORMAL = 1,
    KARA_TOKEN_UNKNOWN = 2,
    KARA_TOKEN_CONTROL = 3,
    KARA_TOKEN_USER_DEFINED = 4,
    KARA_TOKEN_UNUSED = 5,
    KARA_TOKEN_BYTE = 6
} kara_token_type;

typedef struct kara_vocab_impl kara_vocab_impl;

typedef struct kara_vocab {
    kara_vocab_kind kind;
    int32_t n_tokens;
    char pre[64];              /* tokenizer.ggml.pre ("" when absent) */
    /* special ids, -1 when absent */
    int32_t bos, eos, eot, eom, unk, pad, sep, nl;
    bool add_bos, add_eos, add_space_prefix;
    kara_vocab_impl *impl;     /* tokenizer-private tables */
} kara_vocab;

/* Read tokenizer.* from a parsed GGUF and build the lookup tables. The GGUF
 * must outlive the vocab (token texts point into it). Errors (KARA_ERR_FORMAT,
 * KARA_ERR_UNSUPPORTED, KARA_ERR_NOMEM) set kara_last_error() to a message
 * naming the key and problem (e.g. an unknown pre-tokenizer). */
kara_status kara_vocab_load(kara_vocab *v, const kara_gguf *g);
void kara_vocab_free(kara_vocab *v);

/* Tokenize len bytes of text (malformed UTF-8 is read as U+FFFD, as in
 * llama.cpp). add_special adds BOS/EOS where the vocabulary asks for them;
 * parse_special matches CONTROL tokens written in the text (USER_DEFINED
 * tokens such as <think> are always matched, as Hugging Face and llama.cpp
 * do). Returns the count, -(needed) when max_tokens is too small (the ids
 * that fit are written), INT32_MIN when the vocabulary has no tokenizer or
 * memory runs out. Thread-safe: the vocabulary is only read. */
int32_t kara_vocab_tokenize(const kara_vocab *v, const char *text, size_t len, int32_t *tokens,
                            int32_t max_tokens, bool add_special, bool parse_special);
/* See kara_token_to_piece in kara.h; 0 for an id outside the vocabulary. */
int32_t kara_vocab_token_to_piece(const kara_vocab *v, int32_t token, char *buf, int32_t size, bool special);
/* The text of a token sequence: the pieces concatenated, without the space
 * the SPM rules put in front of the text (add_space_prefix). Returns the
 * length, -(needed) when size is too small (buf untouched beyond size). */
int32_t kara_vocab_detokenize(const kara_vocab *v, const int32_t *tokens, int32_t n_tokens, char *buf, int32_t size,
                              bool special);
bool kara_vocab_is_eog(const kara_vocab *v, int32_t token);
kara_token_type kara_vocab_token_type(const kara_vocab *v, int32_t token);
/* The raw token text as stored in the vocabulary (not NUL-terminated). */
kara_gguf_str kara_vocab_token_text(const kara_vocab *v, int32_t token);
/* Id of an exact token text, -1 if absent. */
int32_t kara_vocab_find(const kara_vocab *v, const char *text, size_t len);

#endif /* KARA_VOCAB_H */
