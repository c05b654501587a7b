/*
 * gen_seq.h - one generation's token loop body, the only place a next token
 * is chosen: the rest of a forced "</think>" close or a sample, the
 * end-of-generation and length checks, and the token's text through the
 * stream (UTF-8 hold, think splitter, stop strings). The single-sequence
 * generator (generate.c) owns one; the batch engine owns one per slot
 * (engine/batch_engine.c). Each owner only decodes the tokens this hands
 * back and releases the text it produced.
 *
 * Everything is allocated by kr_gen_seq_init; a step allocates nothing.
 */
#ifndef KR_GEN_SEQ_H
#define KR_GEN_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "text_pipeline.h"

/* What the generations of one model share: the forced-close tokens, the
 * piece scratch, and the model's rule for the first piece after BOS. */
typedef struct kr_gen_model {
    const kara_model *model;
    int32_t n_vocab;
    int32_t piece_cap; /* longest token text */
    char *piece;       /* [UTF-8 hold (<= 3)][token text], piece_cap + 8 bytes */
    uint8_t *line_end; /* [n_vocab]: the token's text holds a newline (n-gram drafts' aligned contexts) */
    int32_t bos;
    bool strip_bos_space; /* SentencePiece vocabularies: the word after BOS loses its space prefix */
    kr_think_close close;
} kr_gen_model;

kara_status kr_gen_model_init(kr_gen_model *gm, const kara_model *m);
void kr_gen_model_free(kr_gen_model *gm);

/* What one generation is asked for (kara_generator_params and
 * kara_engine_request both map onto it). */
typedef struct kr_gen_request {
    int32_t max_tokens;       /* -1: no limit */
    kara_stop_reason at_max;  /* reason reported when max_tokens is reached */
    int32_t reasoning_budget; /* -1: unlimited */
    bool ignore_eog;
    bool in_think; /* output starts inside a think block */
    bool split_thinking;
} kr_gen_request;

typedef struct kr_gen_seq {
    kara_sampler *smp;
    kr_think_force force;
    kr_text_stream ts;
    kr_gen_request req;
    int32_t prev; /* the last token fed or chosen */
    int32_t n_generated, n_think, n_forced;
    kara_status final; /* KARA_OK while running; DONE, STOPPED or an error */
    kara_stop_reason reason;
    bool flushed;
} kr_gen_seq;

/* Allocate the sampler (sp, repeat_last_n up to its history) and text
 * buffers for stop strings up to KR_STOP_MAX_LEN bytes. */
kara_status kr_gen_seq_init(kr_gen_seq *s, const kr_gen_model *gm, const kara_sampler_params *sp);
void kr_gen_seq_free(kr_gen_seq *s);

/* A new generation after the prompt (its last token is prev). The sampler
 * is reconfigured when sp is given (a new request: its seed restarts),
 * else keeps its random state; the prompt goes into its repetition
 * history. Stop strings are checked by the caller (1..KR_STOP_MAX_LEN). */
kara_status kr_gen_seq_start(kr_gen_seq *s, const kara_sampler_params *sp, const kr_gen_request *req,
                             const char *const *stop, int n_stop, const int32_t *prompt, int32_t n_prompt);

/* The next token from logits: true with *tok set when it is to be decoded;
 * false when the generation has ended (s->final and s->reason say why: an
 * end-of-generation token, a stop string, max_tokens). Text up to `from`
 * has been handed out (stop strings are searched after it). */
bool kr_gen_seq_next(kr_gen_seq *s, kr_gen_model *gm, const float *logits, size_t from, int32_t *tok);

/* Record how the generation ends (the first reason wins). */
void kr_gen_seq_finish(kr_gen_seq *s, kara_status st, kara_stop_reason reason);

/* After the end: release what the stream still holds (a partial tag is
 * text), unless a stop string ended it. Once. */
void kr_gen_seq_flush(kr_gen_seq *s, kr_gen_model *gm, size_t from);

/* End of the text that may be handed out now: all of it once the
 * generation has ended, else all but what could still become a stop
 * string. */
size_t kr_gen_seq_releasable(const kr_gen_seq *s, size_t from);

#endif /* KR_GEN_SEQ_H */
