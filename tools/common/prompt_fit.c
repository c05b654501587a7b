/* prompt_fit.c - the byte bound of a prompt (prompt_fit.h). */
#include "prompt_fit.h"

#include <stdio.h>

void kr_prompt_fit_init(kr_prompt_fit *f, const kara_model *m, int32_t n_ctx) {
    int32_t longest = 8, n = kara_model_n_vocab(m);
    char buf[256];
    for (int32_t t = 0; t < n; t++) {
        int32_t len = 0;
        /* a piece longer than buf fails with the size it needs in len */
        kara_token_to_piece(m, t, buf, (int32_t)sizeof buf, true, &len);
        if (len > longest) longest = len;
    }
    f->n_ctx = n_ctx;
    f->longest = longest;
    f->max_bytes = n_ctx > 0 ? (size_t)n_ctx * (size_t)longest : SIZE_MAX;
}

void kr_prompt_fit_message(const kr_prompt_fit *f, const char *what, size_t bytes, bool more_than, bool parse_special,
                           char *err, size_t size) {
    snprintf(err, size,
             "%s has %s%zu bytes%s: a context of %d tokens holds at most %zu bytes of text (%d tokens x %d bytes, the "
             "model's longest token)",
             what, more_than ? "more than " : "", bytes, parse_special ? " besides white space" : "", f->n_ctx,
             f->max_bytes, f->n_ctx, f->longest);
}

bool kr_prompt_fits(const kr_prompt_fit *f, const char *what, const char *text, size_t len, bool parse_special,
                    char *err, size_t size) {
    size_t n = len;
    if (parse_special) {
        n = 0;
        for (size_t i = 0; i < len; i++) {
            char c = text[i];
            n += !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f');
        }
    }
    if (n <= f->max_bytes) return true;
    kr_prompt_fit_message(f, what, n, false, parse_special, err, size);
    return false;
}
