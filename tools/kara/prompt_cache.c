/* prompt_cache.c - see prompt_cache.h. */
#include "prompt_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "safe_output.h"

#define CACHE_MAX_BYTES (16ull << 30) /* a file larger than this is not a prompt cache */
/* The start of every kara_seq_state_save image ("KARASEQ" and a version
 * digit): the only kind of file a save replaces. */
#define CACHE_MAGIC "KARASEQ"

bool kr_prompt_cache_load(const char *cmd, const char *path, kara_context *ctx, kara_generator *gen,
                          const int32_t *prompt, int32_t n_prompt) {
    struct stat sb;
    if (stat(path, &sb) != 0) return false; /* the first run: nothing cached yet */
    if (!S_ISREG(sb.st_mode) || (unsigned long long)sb.st_size > CACHE_MAX_BYTES) {
        fprintf(stderr, "kara %s: note: --prompt-cache %s is not a regular file of a sane size; not used\n", cmd, path);
        return false;
    }
    size_t size = (size_t)sb.st_size;
    void *buf = malloc(size ? size : 1);
    int32_t *toks = malloc((size_t)kara_context_n_ctx(ctx) * sizeof *toks);
    FILE *f = fopen(path, "rb");
    bool read_ok = buf && toks && f && fread(buf, 1, size, f) == size;
    if (f) fclose(f);
    int32_t n = 0;
    bool same = false;
    if (!read_ok) {
        fprintf(stderr, "kara %s: note: cannot read --prompt-cache %s; decoding the prompt\n", cmd, path);
    } else if (kara_seq_state_load(ctx, 0, buf, size, toks, kara_context_n_ctx(ctx), &n) != KARA_OK) {
        fprintf(stderr, "kara %s: note: --prompt-cache %s not used: %s\n", cmd, path, kara_last_error());
    } else if (kara_generator_adopt(gen, 0, toks, n) != KARA_OK) {
        fprintf(stderr, "kara %s: note: --prompt-cache %s not used: %s\n", cmd, path, kara_last_error());
        kara_seq_clear(ctx, 0);
    } else {
        same = n == n_prompt && !memcmp(toks, prompt, (size_t)n * sizeof *toks);
    }
    free(buf);
    free(toks);
    return same;
}

bool kr_prompt_cache_save(const char *cmd, const char *path, const kara_context *ctx, const int32_t *prompt,
                          int32_t n_prompt) {
    /* checked before the state is built: a refused path costs nothing */
    kr_out_file out;
    if (kr_out_begin(&out, path, CACHE_MAGIC) != 0) {
        fprintf(stderr, "kara %s: note: --prompt-cache: %s; the prompt is not cached\n", cmd, out.why);
        return false;
    }
    size_t size = kara_seq_state_size(ctx, 0);
    void *buf = malloc(size ? size : 1);
    kara_status st = buf ? kara_seq_state_save(ctx, 0, prompt, n_prompt, buf, size, NULL) : KARA_ERR_NOMEM;
    bool ok = false;
    if (st)
        fprintf(stderr, "kara %s: note: prompt not cached: %s\n", cmd, kara_last_error());
    else if (kr_out_write(&out, buf, size) != 0 || kr_out_commit(&out) != 0)
        fprintf(stderr, "kara %s: note: --prompt-cache: %s; the prompt is not cached\n", cmd, out.why);
    else
        ok = true;
    kr_out_discard(&out);
    free(buf);
    return ok;
}
