/*
 * vocab.h - the tokenizer behind one interface: the vocabulary read from a
 * GGUF's tokenizer.* keys, and tokenize / token-to-piece for each model kind
 * (SPM `llama`, byte-level BPE `gpt2` with the pre-tokenizer named by
 * tokenizer.ggml.pre).
 */
#ifndef KR_VOCAB_H
#define KR_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "kara.h"

typedef enum kr_vocab_kind {
    KR_VOCAB_NONE = 0, /* no tokenizer in the file: ids only */
    KR_VOCAB_SPM = 1,  /* tokenizer.ggml.model = "llama" */
    KR_VOCAB_BPE = 2   /* tokenizer.ggml.model = "gpt2" */
} kr_vocab_kind;

/* GGUF token types (tokenizer.ggml.token_type). */
typedef enum kr_token_type {
    KR_TOKEN_UNDEFINED = 0,
    KR_TOKEN_NORMAL = 1,
    KR_TOKEN_UNKNOWN = 2,
    KR_TOKEN_CONTROL = 3,
    KR_TOKEN_USER_DEFINED = 4,
    KR_TOKEN_UNUSED = 5,
    KR_TOKEN_BYTE = 6
} kr_token_type;

typedef struct kr_vocab_impl kr_vocab_impl;

typedef struct kr_vocab {
    kr_vocab_kind kind;
    int32_t n_tokens;
    char pre[64]; /* tokenizer.ggml.pre ("" when absent) */
    /* special ids, -1 when absent */
    int32_t bos, eos, eot, eom, unk, pad, sep, nl;
    bool add_bos, add_eos, add_space_prefix;
    kr_vocab_impl *impl; /* tokenizer-private tables */
} kr_vocab;

/* Read tokenizer.* from a parsed GGUF and build the lookup tables. The GGUF
 * must outlive the vocab (token texts point into it). Errors (KARA_ERR_FORMAT,
 * KARA_ERR_UNSUPPORTED, KARA_ERR_NOMEM) set kara_last_error() to a message
 * naming the key and problem (e.g. an unknown pre-tokenizer). */
kara_status kr_vocab_load(kr_vocab *v, const kara_gguf *g);
void kr_vocab_free(kr_vocab *v);

/* Tokenize len bytes of text (malformed UTF-8 is read as U+FFFD, as in
 * llama.cpp). add_special adds BOS/EOS where the vocabulary asks for them;
 * parse_special matches CONTROL tokens written in the text (USER_DEFINED
 * tokens such as <think> are always matched, as Hugging Face and llama.cpp
 * do). Returns the count, -(needed) when max_tokens is too small (the ids
 * that fit are written), INT32_MIN when the vocabulary has no tokenizer or
 * memory runs out. Thread-safe: the vocabulary is only read. */
int32_t kr_vocab_tokenize(const kr_vocab *v, const char *text, size_t len, int32_t *tokens, int32_t max_tokens,
                          bool add_special, bool parse_special);
/* See kara_token_to_piece in kara.h; 0 for an id outside the vocabulary. */
int32_t kr_vocab_token_to_piece(const kr_vocab *v, int32_t token, char *buf, int32_t size, bool special);
/* The text of a token sequence: the pieces concatenated, without the space
 * the SPM rules put in front of the text (add_space_prefix). Returns the
 * length, -(needed) when size is too small (buf untouched beyond size). */
int32_t kr_vocab_detokenize(const kr_vocab *v, const int32_t *tokens, int32_t n_tokens, char *buf, int32_t size,
                            bool special);
bool kr_vocab_is_eog(const kr_vocab *v, int32_t token);
kr_token_type kr_vocab_token_type(const kr_vocab *v, int32_t token);
/* The raw token text as stored in the vocabulary (not NUL-terminated). */
kara_gguf_str kr_vocab_token_text(const kr_vocab *v, int32_t token);
/* Id of an exact token text, -1 if absent. */
int32_t kr_vocab_find(const kr_vocab *v, const char *text, size_t len);

#endif /* KR_VOCAB_H */
