/* prompt_cache.h - `kara run --prompt-cache FILE` (llama.cpp's flag): the
 * prompt's KV state kept in a file (kara_seq_state_save), loaded into
 * sequence 0 before the prompt is decoded so only what follows the cached
 * tokens is decoded, and written after the prompt when the file did not
 * already hold it. A missing, damaged or foreign file is a note, never an
 * error: the prompt is then decoded as without the flag. */
#ifndef KR_PROMPT_CACHE_H
#define KR_PROMPT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"

/* Load path into sequence 0 of ctx and tell gen. True when the file held
 * exactly this prompt (nothing to save afterwards). */
bool kr_prompt_cache_load(const char *cmd, const char *path, kara_context *ctx, kara_generator *gen,
                          const int32_t *prompt, int32_t n_prompt);
/* Write sequence 0 (holding exactly the prompt) to path, through a
 * temporary file renamed into place (safe_output.h). Only an absent path
 * or a regular file holding a prompt cache is replaced: never an input of
 * the run, a device, FIFO or directory. False, with a note, on failure or
 * refusal (the file is then untouched). */
bool kr_prompt_cache_save(const char *cmd, const char *path, const kara_context *ctx, const int32_t *prompt,
                          int32_t n_prompt);

#endif
