/* prompt_fit.h - refusing a prompt that cannot fit the context before it is
 * tokenized whole.
 *
 * No token covers more bytes of text than its own piece (the bytes
 * kara_token_to_piece renders, special tokens included), so a text of B
 * bytes needs at least B / L tokens, L the longest piece of the
 * vocabulary. A text longer than n_ctx x L bytes cannot fit n_ctx tokens:
 * it is refused from its length alone, and its tokens, several times the
 * text's size in memory, are never made. With special tokens parsed only
 * the bytes that are not white space count, as a special token may swallow
 * the white space beside it. */
#ifndef KR_PROMPT_FIT_H
#define KR_PROMPT_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"

typedef struct kr_prompt_fit {
    int32_t n_ctx;    /* tokens of the context */
    int32_t longest;  /* the vocabulary's longest piece in bytes, at least 8 (an unknown character: up to 4) */
    size_t max_bytes; /* n_ctx x longest: the most bytes of text n_ctx tokens can cover */
} kr_prompt_fit;

void kr_prompt_fit_init(kr_prompt_fit *f, const kara_model *m, int32_t n_ctx);
/* False when text cannot fit, with err = "WHAT has N bytes[ besides white
 * space]: a context of C tokens holds at most X bytes of text (C tokens x L
 * bytes, the model's longest token)", what such as "the prompt". */
bool kr_prompt_fits(const kr_prompt_fit *f, const char *what, const char *text, size_t len, bool parse_special,
                    char *err, size_t size);
/* That message for a text of bytes bytes (more_than: more than that, as a
 * file read no further than the bound). */
void kr_prompt_fit_message(const kr_prompt_fit *f, const char *what, size_t bytes, bool more_than, bool parse_special,
                           char *err, size_t size);

#endif
