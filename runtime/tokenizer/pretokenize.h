/*
 * pretokenize.h - the pre-split rules of byte-level BPE vocabularies: the
 * text is cut into words (by the regexes the model's tokenizer was trained
 * with) before merges run inside each word.
 *
 * Each rule is named by tokenizer.ggml.pre and implemented as hand-written
 * matchers over Unicode classes (unicode.h) that reproduce what llama.cpp's
 * regexes split, including the order of alternatives, greedy backtracking
 * and the pieces left between matches.
 */
#ifndef KR_PRETOKENIZE_H
#define KR_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kr_pretok {
    KR_PRETOK_DEFAULT = 0,     /* "default" or no tokenizer.ggml.pre */
    KR_PRETOK_GPT2,            /* gpt-2 and friends */
    KR_PRETOK_LLAMA3,          /* llama-bpe (Llama 3, R1-Distill-Llama) */
    KR_PRETOK_QWEN2,           /* qwen2 (Qwen2, Qwen3), deepseek-r1-qwen */
    KR_PRETOK_QWEN35,          /* qwen35: qwen2 with combining marks kept in words */
    KR_PRETOK_DEEPSEEK_LLM,    /* deepseek-llm */
    KARA_PRETOK_DEEPSEEK_CODER /* deepseek-coder */
} kr_pretok;

/* What a tokenizer.ggml.pre name selects, with the vocabulary defaults that
 * llama.cpp ties to it. */
typedef struct kr_pretok_info {
    kr_pretok kind;
    bool ignore_merges; /* a word that is itself a token is taken whole */
    bool add_bos;       /* default of tokenizer.ggml.add_bos_token */
} kr_pretok_info;

/* Look up a pre-tokenizer name (len bytes, not NUL-terminated). False when
 * the name is unknown. */
bool kr_pretok_lookup(const char *name, size_t len, kr_pretok_info *out);
const char *kr_pretok_name(kr_pretok kind);

/* Split cpts[0..n) into words. cls[i] holds kr_unicode_class(cpts[i]).
 * Word i spans [ends[i-1], ends[i]) (ends[-1] = 0). ends and tmp must each
 * hold n entries. Returns the number of words (0 when n is 0). */
size_t kr_pretokenize(kr_pretok kind, const uint32_t *cpts, const uint8_t *cls, size_t n, uint32_t *ends,
                      uint32_t *tmp);

#endif /* KR_PRETOKENIZE_H */
