/* cmd_run.c - `kara run`: load a model, feed a prompt, stream the
 * continuation to stdout; speeds and memory go to stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli_args.h"
#include "cli_config.h"
#include "commands.h"
#include "draft_model.h"
#include "exit_codes.h"
#include "kara.h"
#include "kv_exact.h"
#include "prompt_cache.h"
#include "prompt_fit.h"
#include "safe_output.h"

typedef struct run_opts {
    kara_config cfg;
    const char *prompt;
    const char *prompt_file;
    const char *prompt_ids;
    bool ignore_eos;
    bool escape;              /* -e: the prompt's escapes are characters */
    char *prompt_buf;         /* the -e copy of the prompt */
    const char *prompt_cache; /* --prompt-cache FILE */
    bool prompt_cache_ro;     /* --prompt-cache-ro: load it, never write it */
    char last_char;           /* the last byte written to stdout, 0: none */
    long long gen_bytes;      /* bytes the generated tokens printed */
} run_opts;

static const kr_cli_flag run_flags[] = {
    {"-p|--prompt", true, "prompt text (default: empty, i.e. generate from BOS)"},
    {"-f|--file", true, "read the prompt from a file"},
    {"--prompt-ids", true, "prompt as comma-separated token ids (no BOS added)"},
    {"--ignore-eos", false, "keep generating past end-of-generation tokens"},
    {"--prompt-cache", true, "keep the prompt's KV state in FILE: loaded when it matches, written after the prompt"},
    {"--prompt-cache-ro", false, "with --prompt-cache: load the file but never write it"},
};
#define N_RUN_FLAGS (int)(sizeof run_flags / sizeof run_flags[0])

/* Parse flags; returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, run_opts *o) {
    kr_cli_parsed cli;
    int rc = kr_cli_parse("run", argc, argv, run_flags, N_RUN_FLAGS, &o->cfg, &cli);
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        if (!a->flag) {
            fprintf(stderr, "kara run: unexpected argument '%s'\n", a->value);
            rc = KR_EXIT_USAGE;
        } else if (kr_cli_flag_is(a->flag, "-p")) {
            o->prompt = a->value;
        } else if (kr_cli_flag_is(a->flag, "-f")) {
            o->prompt_file = a->value;
        } else if (kr_cli_flag_is(a->flag, "--prompt-ids")) {
            o->prompt_ids = a->value;
        } else if (kr_cli_flag_is(a->flag, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (kr_cli_flag_is(a->flag, "--prompt-cache")) {
            o->prompt_cache = a->value;
        } else if (kr_cli_flag_is(a->flag, "--prompt-cache-ro")) {
            o->prompt_cache_ro = true;
        }
    }
    o->escape = cli.escape;
    rc = kr_cli_finish("run",
                       "usage: kara run -m MODEL [-p PROMPT | -f FILE | --prompt-ids 1,2,3] [options]\n\n"
                       "Streams the continuation of the prompt to stdout; speeds and memory go to stderr.\n\n",
                       run_flags, N_RUN_FLAGS, &o->cfg, &cli, rc);
    if (rc >= 0) return rc;
    if (!!o->prompt + !!o->prompt_file + !!o->prompt_ids > 1) {
        fprintf(stderr, "kara run: give only one of -p, -f and --prompt-ids\n");
        return KR_EXIT_USAGE;
    }
    if (o->escape && o->prompt) {
        if (!(o->prompt_buf = strdup(o->prompt))) return KR_EXIT_SOFTWARE;
        kr_unescape(o->prompt_buf);
        o->prompt = o->prompt_buf;
    }
    return -1;
}

/* Tokens of the prompt as the user gave it: text (with BOS per the vocab's
 * rules), or raw ids. A text too long for n_ctx tokens whatever its tokens
 * (prompt_fit.h) is refused before it is read whole or tokenized. -1: a bad
 * prompt (message printed); -2: its file cannot be read. */
static int32_t prompt_tokens(const run_opts *o, const kara_model *m, int32_t n_ctx, int32_t **out) {
    *out = NULL;
    if (o->prompt_ids) return kr_arg_id_list("run", "--prompt-ids", o->prompt_ids, out);
    char *file_text = NULL;
    const char *text = o->prompt ? o->prompt : "";
    size_t len = strlen(text);
    kr_prompt_fit fit;
    kr_prompt_fit_init(&fit, m, n_ctx);
    if (o->prompt_file) {
        file_text = kr_read_text_file_max("run", o->prompt_file, fit.max_bytes, &len);
        if (!file_text && errno != ERANGE) return errno == EFBIG ? -1 : -2; /* over 64 MiB: 65; unreadable: 66 */
        text = file_text;
    }
    char why[400], what[300];
    snprintf(what, sizeof what, "the prompt%s%s", o->prompt_file ? " file " : "", o->prompt_file ? o->prompt_file : "");
    if (!text) /* a file read no further than the bound */
        kr_prompt_fit_message(&fit, what, fit.max_bytes, true, false, why, sizeof why);
    if (!text || !kr_prompt_fits(&fit, what, text, len, false, why, sizeof why)) {
        fprintf(stderr, "kara run: %s (raise -c)\n", why);
        free(file_text);
        return -1;
    }
    int32_t cap = (int32_t)len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int32_t n = 0;
    kara_status st = ids ? kara_tokenize(m, text, (int32_t)len, ids, cap, true, false, &n) : KARA_ERR_NOMEM;
    if (st == KARA_ERR_BUFFER && n > cap) { /* malformed UTF-8 reads as U+FFFD, several tokens a byte */
        int32_t *more = realloc(ids, (size_t)n * sizeof *ids);
        st = more ? kara_tokenize(m, text, (int32_t)len, (ids = more), n, true, false, &n) : KARA_ERR_NOMEM;
    }
    free(file_text);
    if (st) {
        fprintf(stderr, "kara run: cannot tokenize the prompt: %s\n", kara_last_error());
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

/* The continuation through the library's generator (raw text: thinking
 * is not split off), streamed to stdout as it comes. */
static int generate(run_opts *o, kara_context *ctx, kara_context *draft, const int32_t *prompt, int32_t n_prompt) {
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling = o->cfg.sampling;
    gp.max_tokens = o->cfg.max_tokens;
    gp.split_thinking = false;
    gp.ignore_eog = o->ignore_eos;
    gp.spec = o->cfg.spec;
    gp.draft_max = o->cfg.draft_max;
    gp.draft_ctx = draft;
    gp.draft_p_min = o->cfg.draft_p_min;
    kara_generator *gen;
    kara_status st = kara_generator_create(ctx, &gp, &gen);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        return kr_exit_for_status(st);
    }
    bool cached = o->prompt_cache && kr_prompt_cache_load("run", o->prompt_cache, ctx, gen, prompt, n_prompt);
    st = kara_generator_start(gen, 0, prompt, n_prompt);
    if (!st && o->prompt_cache && !cached && !o->prompt_cache_ro)
        kr_prompt_cache_save("run", o->prompt_cache, ctx, prompt, n_prompt);
    kara_piece piece;
    bool out_ok = kr_stdout_flush(); /* the prompt echo */
    while (!st && out_ok && (st = kara_generator_next(gen, &piece)) == KARA_OK) {
        fwrite(piece.text, 1, (size_t)piece.len, stdout);
        out_ok = kr_stdout_flush(); /* a failed stdout stops the generation: main reports it (exit 74) */
        o->gen_bytes += piece.len;
        if (piece.len > 0) o->last_char = piece.text[piece.len - 1];
    }
    /* end the text with a newline, as a shell prompt and `wc -l` expect */
    if (out_ok && o->last_char && o->last_char != '\n') fputc('\n', stdout);
    if (!kr_stdout_flush()) {
        kara_generator_free(gen);
        return KR_EXIT_IOERR; /* main prints "cannot write stdout" */
    }
    kara_generator_stats gs;
    kara_generator_get_stats(gen, &gs);
    kara_stop_reason why = kara_generator_stop_reason(gen);
    kara_generator_free(gen);
    if (st < 0) {
        fprintf(stderr, "\nkara run: %s\n", kara_last_error());
        return kr_exit_for_status(st);
    }
    if (why == KARA_STOP_CONTEXT_FULL)
        fprintf(stderr, "\nkara run: context of %d tokens is full, stopping\n", kara_context_n_ctx(ctx));
    if (gs.n_generated > 0 && o->gen_bytes == 0)
        fprintf(stderr,
                "\nkara run: note: the %d generated tokens print as nothing: they are unused or padding entries of "
                "the vocabulary (a random-weight model from `kara gen-model` picks them)\n",
                gs.n_generated);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "\nprompt: %d tokens (%d decoded) in %.3f s (%.2f tok/s)\n", n_prompt, gs.n_prompt_decoded,
            gs.t_prompt_s, gs.n_prompt_decoded / (gs.t_prompt_s > 0 ? gs.t_prompt_s : 1e-9));
    fprintf(stderr, "generation: %d tokens in %.3f s (%.2f tok/s)\n", gs.n_generated, gs.t_generate_s,
            gs.n_generated / (gs.t_generate_s > 0 ? gs.t_generate_s : 1e-9));
    if (o->cfg.spec != KARA_SPEC_NONE && !gs.spec_on)
        fprintf(stderr, "speculative: off (a context batch of %d entries holds no drafts: raise -b)\n",
                kara_context_n_batch(ctx));
    else if (gs.spec_on)
        fprintf(stderr, "speculative: %d steps drafted %d tokens, %d accepted (%.1f%%)", gs.n_verify, gs.n_drafted,
                gs.n_accepted, gs.n_drafted ? 100.0 * gs.n_accepted / gs.n_drafted : 0.0);
    if (gs.spec_on) fprintf(stderr, draft ? "; drafting took %.3f s of the generation\n" : "\n", gs.t_draft_s);
    kara_kv_stats ks;
    kara_context_kv_stats(ctx, &ks);
    char kv_mem[32], cache[32], scoring[32];
    kr_format_bytes((double)kara_context_kv_bytes_peak(ctx), kv_mem, sizeof kv_mem);
    kr_format_bytes((double)ks.cache_bytes_peak, cache, sizeof cache);
    kr_format_bytes((double)ks.reserved_bytes, scoring, sizeof scoring);
    int32_t n_cached = kara_seq_n_cached(ctx, 0), n_past = kara_seq_n_past(ctx, 0);
    fprintf(stderr, "memory: peak RSS %.1f MiB, KV memory %s (cache %s for %d tokens", ru.ru_maxrss / 1024.0, kv_mem,
            cache, n_cached);
    if (n_cached < n_past) fprintf(stderr, " of %d, the rest compressed away", n_past);
    if (ks.reserved_bytes) fprintf(stderr, ", scoring buffers %s", scoring);
    fprintf(stderr, ")\n");
    if (ks.events)
        fprintf(stderr, "kv compression: %llu events, %llu slots evicted, %.2f ms per event\n",
                (unsigned long long)ks.events, (unsigned long long)ks.slots_evicted,
                1e3 * ks.event_seconds / ks.events);
    return KR_EXIT_OK;
}

/* A model whose GGUF carries a chat template was trained on prompts in that
 * shape; run sends the text as it is, so a chat model may answer plain text
 * with noise. Say so, unless the prompt already holds template markers. */
static void template_note(const kara_model *m, const char *prompt) {
    char tmpl[8];
    if (!kara_model_meta_str(m, "tokenizer.chat_template", tmpl, sizeof tmpl, NULL)) return;
    if (prompt && (strstr(prompt, "<|") || strstr(prompt, "<\xef\xbd\x9c"))) return; /* <| or <｜ */
    fprintf(stderr,
            "kara run: note: this model carries a chat template and `run` sends the prompt as plain text, without "
            "it; a chat or reasoning model may answer with noise: `kara chat -m MODEL` applies the template\n");
}

static int run_body(int argc, char **argv, run_opts *op) {
    run_opts o = {0};
    int rc = parse(argc, argv, &o);
    op->prompt_buf = o.prompt_buf;
    if (rc >= 0) return rc;
    kara_model *m;
    kara_status st = kr_cli_load_model(&o.cfg, &m);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        return kr_exit_for_status(st);
    }
    kara_context_params cp = kr_cli_context_params(&o.cfg);
    int32_t n_ctx = cp.n_ctx ? cp.n_ctx : kara_model_n_ctx_train(m);
    int32_t *prompt = NULL;
    int32_t n_prompt = prompt_tokens(&o, m, n_ctx, &prompt);
    if (n_prompt < 0) {
        kara_model_free(m);
        return n_prompt == -2 ? KR_EXIT_NOINPUT : o.prompt_ids ? KR_EXIT_USAGE : KR_EXIT_DATAERR;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "kara run: the prompt is empty and the model adds no BOS token; give a prompt\n");
        kara_model_free(m);
        free(prompt);
        return KR_EXIT_USAGE;
    }
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] >= kara_model_n_vocab(m)) {
            fprintf(stderr, "kara run: prompt token %d is outside the vocabulary of %d\n", prompt[i],
                    kara_model_n_vocab(m));
            kara_model_free(m);
            free(prompt);
            return KR_EXIT_USAGE;
        }
    if (n_prompt > n_ctx) {
        fprintf(stderr, "kara run: the prompt has %d tokens but the context holds %d (raise -c)\n", n_prompt, n_ctx);
        kara_model_free(m);
        free(prompt);
        return KR_EXIT_DATAERR;
    }
    kara_context *ctx;
    st = kara_context_create(m, &cp, &ctx);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        kara_model_free(m);
        free(prompt);
        return kr_exit_for_context(cp.device, st);
    }
    st = kara_seq_admit(ctx, 0, n_prompt, o.cfg.max_tokens);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        kara_context_free(ctx);
        kara_model_free(m);
        free(prompt);
        return kr_exit_for_status(st);
    }
    char exact[256];
    if (kr_kv_exact_text(ctx, &cp.kv, exact, sizeof exact)) fprintf(stderr, "kara run: note: %s\n", exact);
    if (!o.prompt_ids) template_note(m, o.prompt_file ? NULL : o.prompt);
    kr_draft_model draft;
    st = kr_draft_model_open("run", &o.cfg, ctx, 1, &draft);
    if (!st && o.prompt && o.prompt[0]) {
        fputs(o.prompt, stdout);
        o.last_char = o.prompt[strlen(o.prompt) - 1];
    }
    rc = st ? kr_exit_for_status(st) : generate(&o, ctx, draft.ctx, prompt, n_prompt);
    kr_draft_model_close(&draft);
    free(prompt);
    kara_context_free(ctx);
    kara_model_free(m);
    return rc;
}

static int run_main(int argc, char **argv) {
    run_opts o = {0};
    int rc = run_body(argc, argv, &o);
    free(o.prompt_buf);
    return rc;
}

const kr_command kr_cmd_run = {"run", "generate text from a prompt", run_main};
