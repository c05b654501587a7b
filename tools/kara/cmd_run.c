/* cmd_run.c - `kara run`: load a model, feed a prompt, stream the
 * continuation to stdout; speeds and memory go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli_args.h"
#include "commands.h"
#include "exit_codes.h"
#include "kara.h"

typedef struct run_opts {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    const char *prompt_ids;
    long long n_predict, n_ctx, n_threads, n_batch;
    bool ignore_eos;
    kara_sampler_params sp;
} run_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara run -m MODEL [-p PROMPT | -f FILE | --prompt-ids 1,2,3] [options]\n"
            "\n"
            "  -m, --model FILE        GGUF model\n"
            "  -p, --prompt TEXT       prompt (default: empty, i.e. generate from BOS)\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "      --prompt-ids LIST   prompt as comma-separated token ids (no BOS added)\n"
            "  -n, --predict N         tokens to generate (default 128, -1 = until end of generation)\n"
            "  -c, --ctx-size N        context size (default 0 = the model's)\n"
            "  -t, --threads N         threads (default 0 = all cores)\n"
            "  -b, --batch-size N      prompt tokens per forward pass (default 512)\n"
            "      --temp T            temperature (default 0.8; 0 = greedy)\n"
            "      --top-k N           top-k (default 40, 0 = off)\n"
            "      --top-p P           top-p (default 0.95, 1 = off)\n"
            "      --min-p P           min-p (default 0.05, 0 = off)\n"
            "      --repeat-penalty F  repetition penalty (default 1.0 = off)\n"
            "      --repeat-last-n N   tokens the penalty looks back over (default 64)\n"
            "  -s, --seed N            sampling seed\n"
            "      --ignore-eos        keep generating past end-of-generation tokens\n");
}

/* Parse flags; returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, run_opts *o) {
    kara_sampler_params_init(&o->sp);
    o->n_predict = 128;
    o->n_batch = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long iv;
        double fv;
#define IS(s) (!strcmp(a, s))
#define NEXT() (i++, v)
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            return KARA_EXIT_OK;
        } else if (IS("-m") || IS("--model")) {
            if (!(o->model = NEXT())) goto missing;
        } else if (IS("-p") || IS("--prompt")) {
            if (!(o->prompt = NEXT())) goto missing;
        } else if (IS("-f") || IS("--file")) {
            if (!(o->prompt_file = NEXT())) goto missing;
        } else if (IS("--prompt-ids")) {
            if (!(o->prompt_ids = NEXT())) goto missing;
        } else if (IS("-n") || IS("--predict") || IS("--n-predict")) {
            if (!kara_arg_int("run", a, NEXT(), -1, 1 << 30, &o->n_predict)) return KARA_EXIT_USAGE;
        } else if (IS("-c") || IS("--ctx-size")) {
            if (!kara_arg_int("run", a, NEXT(), 0, 1 << 24, &o->n_ctx)) return KARA_EXIT_USAGE;
        } else if (IS("-t") || IS("--threads")) {
            if (!kara_arg_int("run", a, NEXT(), -1, 1024, &o->n_threads)) return KARA_EXIT_USAGE;
        } else if (IS("-b") || IS("--batch-size")) {
            if (!kara_arg_int("run", a, NEXT(), 1, 1 << 16, &o->n_batch)) return KARA_EXIT_USAGE;
        } else if (IS("--temp")) {
            if (!kara_arg_float("run", a, NEXT(), 0, 100, &fv)) return KARA_EXIT_USAGE;
            o->sp.temperature = (float)fv;
        } else if (IS("--top-k")) {
            if (!kara_arg_int("run", a, NEXT(), 0, 1 << 24, &iv)) return KARA_EXIT_USAGE;
            o->sp.top_k = (int32_t)iv;
        } else if (IS("--top-p")) {
            if (!kara_arg_float("run", a, NEXT(), 0.0001, 1, &fv)) return KARA_EXIT_USAGE;
            o->sp.top_p = (float)fv;
        } else if (IS("--min-p")) {
            if (!kara_arg_float("run", a, NEXT(), 0, 1, &fv)) return KARA_EXIT_USAGE;
            o->sp.min_p = (float)fv;
        } else if (IS("--repeat-penalty")) {
            if (!kara_arg_float("run", a, NEXT(), 0.0001, 100, &fv)) return KARA_EXIT_USAGE;
            o->sp.repeat_penalty = (float)fv;
        } else if (IS("--repeat-last-n")) {
            if (!kara_arg_int("run", a, NEXT(), 0, 1 << 20, &iv)) return KARA_EXIT_USAGE;
            o->sp.repeat_last_n = (int32_t)iv;
        } else if (IS("-s") || IS("--seed")) {
            if (!kara_arg_int("run", a, NEXT(), -1, INT64_MAX, &iv)) return KARA_EXIT_USAGE;
            o->sp.seed = iv < 0 ? (uint64_t)time(NULL) : (uint64_t)iv;
        } else if (IS("--ignore-eos")) {
            o->ignore_eos = true;
        } else {
            fprintf(stderr, "kara run: unknown option '%s' (see kara run --help)\n", a);
            return KARA_EXIT_USAGE;
        }
#undef IS
#undef NEXT
        continue;
    missing:
        fprintf(stderr, "kara run: %s needs a value\n", a);
        return KARA_EXIT_USAGE;
    }
    if (!o->model) {
        fprintf(stderr, "kara run: no model given (-m MODEL.gguf)\n");
        return KARA_EXIT_USAGE;
    }
    if (!!o->prompt + !!o->prompt_file + !!o->prompt_ids > 1) {
        fprintf(stderr, "kara run: give only one of -p, -f and --prompt-ids\n");
        return KARA_EXIT_USAGE;
    }
    return -1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int status_exit(kara_status st) {
    switch (st) {
    case KARA_ERR_IO: return KARA_EXIT_NOINPUT;
    case KARA_ERR_FORMAT: case KARA_ERR_UNSUPPORTED: case KARA_ERR_TOKEN: case KARA_ERR_CONTEXT_FULL:
    case KARA_ERR_KV_BUDGET: return KARA_EXIT_DATAERR;
    case KARA_ERR_CONFIG: case KARA_ERR_ARG: return KARA_EXIT_CONFIG;
    default: return KARA_EXIT_SOFTWARE;
    }
}

/* Tokens of the prompt as the user gave it: text (with BOS per the vocab's
 * rules), or raw ids. */
static int32_t prompt_tokens(const run_opts *o, const kara_model *m, int32_t **out) {
    *out = NULL;
    if (o->prompt_ids) return kara_arg_id_list("run", "--prompt-ids", o->prompt_ids, out);
    char *file_text = NULL;
    const char *text = o->prompt ? o->prompt : "";
    size_t len = strlen(text);
    if (o->prompt_file) {
        file_text = kara_read_text_file("run", o->prompt_file, &len);
        if (!file_text) return -1;
        text = file_text;
    }
    int32_t cap = (int32_t)len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int32_t n = ids ? kara_tokenize(m, text, (int32_t)len, ids, cap, true, false) : INT32_MIN;
    free(file_text);
    if (n < 0) {
        fprintf(stderr, "kara run: cannot tokenize the prompt: %s\n", kara_last_error());
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

static int generate(const run_opts *o, kara_model *m, kara_context *ctx, const int32_t *prompt, int32_t n_prompt) {
    kara_sampler *smp;
    if (kara_sampler_create(&o->sp, &smp)) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        return KARA_EXIT_USAGE;
    }
    for (int32_t i = 0; i < n_prompt; i++) kara_sampler_accept(smp, prompt[i]);
    double t0 = now_s();
    kara_status st = KARA_OK;
    for (int32_t i = 0; i < n_prompt && !st; i += (int32_t)o->n_batch) {
        int32_t n = n_prompt - i < o->n_batch ? n_prompt - i : (int32_t)o->n_batch;
        kara_batch b = kara_batch_one_sequence(prompt + i, n, i, 0);
        st = kara_decode(ctx, &b);
    }
    double t1 = now_s();
    int32_t n_vocab = kara_model_n_vocab(m), n_gen = 0, pos = n_prompt, prev = prompt[n_prompt - 1];
    while (!st && (o->n_predict < 0 || n_gen < o->n_predict)) {
        int32_t tok = kara_sampler_sample(smp, kara_get_logits(ctx, -1), n_vocab);
        if (!o->ignore_eos && kara_token_is_eog(m, tok)) break;
        char piece[256];
        int32_t len = kara_token_to_piece(m, tok, piece, sizeof piece, false);
        const char *p = piece;
        /* the first word after BOS carries SPM's space prefix: drop it, as llama.cpp does */
        if (len > 0 && prev == kara_token_bos(m) && piece[0] == ' ') {
            p++;
            len--;
        }
        if (len > 0) fwrite(p, 1, (size_t)len, stdout);
        fflush(stdout);
        n_gen++;
        prev = tok;
        if (o->n_predict >= 0 && n_gen >= o->n_predict) break;
        if (pos >= kara_context_n_ctx(ctx)) {
            fprintf(stderr, "\nkara run: context of %d tokens is full, stopping\n", kara_context_n_ctx(ctx));
            break;
        }
        kara_batch b = kara_batch_one_sequence(&tok, 1, pos++, 0);
        st = kara_decode(ctx, &b);
    }
    double t2 = now_s();
    kara_sampler_free(smp);
    if (st) {
        fprintf(stderr, "\nkara run: %s\n", kara_context_last_error(ctx));
        return status_exit(st);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "\n\nprompt: %d tokens in %.3f s (%.2f tok/s)\n", n_prompt, t1 - t0,
            n_prompt / (t1 - t0 > 0 ? t1 - t0 : 1e-9));
    fprintf(stderr, "generation: %d tokens in %.3f s (%.2f tok/s)\n", n_gen, t2 - t1,
            n_gen / (t2 - t1 > 0 ? t2 - t1 : 1e-9));
    fprintf(stderr, "memory: peak RSS %.1f MiB, KV peak %.2f MiB\n", ru.ru_maxrss / 1024.0,
            kara_context_kv_bytes_peak(ctx) / 1048576.0);
    return KARA_EXIT_OK;
}

static int run_main(int argc, char **argv) {
    run_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    kara_model *m;
    kara_status st = kara_model_load(o.model, NULL, &m);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        return status_exit(st);
    }
    int32_t *prompt = NULL;
    int32_t n_prompt = prompt_tokens(&o, m, &prompt);
    if (n_prompt < 0) {
        kara_model_free(m);
        return o.prompt_ids ? KARA_EXIT_USAGE : KARA_EXIT_DATAERR;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "kara run: the prompt is empty and the model adds no BOS token; give a prompt\n");
        kara_model_free(m);
        free(prompt);
        return KARA_EXIT_USAGE;
    }
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] >= kara_model_n_vocab(m)) {
            fprintf(stderr, "kara run: prompt token %d is outside the vocabulary of %d\n", prompt[i],
                    kara_model_n_vocab(m));
            kara_model_free(m);
            free(prompt);
            return KARA_EXIT_USAGE;
        }
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = (int32_t)o.n_ctx;
    cp.n_threads = (int32_t)o.n_threads;
    cp.n_batch = (int32_t)o.n_batch;
    cp.kv.method = KARA_KV_METHOD_FULL;
    int32_t n_ctx = cp.n_ctx ? cp.n_ctx : kara_model_n_ctx_train(m);
    if (n_prompt > n_ctx) {
        fprintf(stderr, "kara run: the prompt has %d tokens but the context holds %d (raise -c)\n", n_prompt, n_ctx);
        kara_model_free(m);
        free(prompt);
        return KARA_EXIT_DATAERR;
    }
    kara_context *ctx;
    st = kara_context_create(m, &cp, &ctx);
    if (st) {
        fprintf(stderr, "kara run: %s\n", kara_last_error());
        kara_model_free(m);
        free(prompt);
        return status_exit(st);
    }
    if (o.prompt) fputs(o.prompt, stdout);
    rc = generate(&o, m, ctx, prompt, n_prompt);
    free(prompt);
    kara_context_free(ctx);
    kara_model_free(m);
    return rc;
}

const kara_command kara_cmd_run = {"run", "generate text from a prompt", run_main};
