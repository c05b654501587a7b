/* cmd_bench.c - `kara bench`: prefill and decode speed on a GGUF file, timed
 * the way ../shared/bench/llamacpp-ref times llama.cpp (same tests, same
 * random tokens, same JSON lines), so the two can be run side by side and
 * their ratio quoted.
 *
 *   pp: one prompt of P random tokens from an empty cache, in batches of 512.
 *   tg: N single-token steps after D tokens already in the cache (-d).
 * Each test runs once to warm up, then REPS times; tokens/s median/min/max.
 * A last line reports the load time, the ISA and the peak resident memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_kernels.h"
#include "cli_args.h"
#include "commands.h"
#include "exit_codes.h"
#include "kara.h"
#include "monotonic_clock.h"

typedef struct bench_opts {
    const char *model;
    long long threads, n_prompt, n_gen, depth, reps;
    kara_kv_dtype kv_dtype;
    bool membw, kernels, onednn; /* micro-benchmarks instead of a model */
    bool use_mmap;               /* --mmap: map the model instead of reading it */
    bool no_repack;              /* --no-repack: keep the file's weight layout */
    const char *kernel_types;
} bench_opts;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double peak_rss_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: kara bench -m MODEL.gguf [-t THREADS] [-p PROMPT] [-n GEN] [-d DEPTH] [-r REPS] [--kv-type f16|f32] "
        "[--mmap]\n"
        "                  [--no-repack]\n\n"
        "Times prefill (ppPROMPT: one prompt of random tokens from an empty cache, in batches of 512)\n"
        "and decode (tgGEN: single-token steps after DEPTH tokens already in the cache). Each test\n"
        "runs once to warm up, then REPS times; prints JSON lines with tokens/s median/min/max in the\n"
        "shape of ../shared/bench/llamacpp-ref, and a last line with load time and peak memory.\n\n"
        "  -m FILE    model (GGUF)\n"
        "  -t N       threads [2]\n"
        "  -p N       prompt tokens for the pp test, 0 = skip [512]\n"
        "  -n N       generated tokens for the tg test, 0 = skip [128]\n"
        "  -d N       tokens in the cache before the tg test [0]\n"
        "  -r N       repetitions, 1..100 [3]\n"
        "  --kv-type  KV cache element type [f16]\n"
        "  --mmap     map the model file instead of reading it into huge-page memory\n"
        "  --no-repack  keep the file's weight layout (no interleaving of rows at load)\n\n"
        "kara bench --membw [-t N]: streaming read bandwidth of a 1 GiB buffer.\n"
        "kara bench --kernels [TYPES] [-t N] [-p BATCH] [--no-repack]: matrix-vector and matrix-matrix (BATCH rows,\n"
        "default 64) products of the kernel table on Qwen3 weight shapes, per type (Q4_0,Q8_0,Q4_K,\n"
        "Q6_K,F16,F32 or a comma list), as weight GB/s and GOP/s, on the layout the loader would give\n"
        "the weights (--no-repack: the file's).\n"
        "kara bench --onednn [-t N] [-p BATCH]: the same prefill shapes through oneDNN's matmul (f32,\n"
        "bf16, u8 x s8; default batch 512), in builds configured with libdnnl.\n");
}

static int parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){0}; /* every flag off (use_mmap and no_repack were left unset) */
    o->model = NULL;
    o->threads = 2;
    o->n_prompt = 512;
    o->n_gen = 128;
    o->depth = 0;
    o->reps = 3;
    o->kv_dtype = KARA_KV_F16;
    o->membw = o->kernels = o->onednn = false;
    o->kernel_types = NULL;
    bool prompt_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return KR_EXIT_OK;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!v) {
                fprintf(stderr, "kara bench: %s needs a value\n", a);
                return KR_EXIT_USAGE;
            }
            o->model = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            ok = kr_arg_int("bench", a, v, 1, 1024, &o->threads);
        } else if (!strcmp(a, "-p")) {
            ok = kr_arg_int("bench", a, v, 0, 1 << 20, &o->n_prompt);
            prompt_set = true;
        } else if (!strcmp(a, "-n")) {
            ok = kr_arg_int("bench", a, v, 0, 1 << 20, &o->n_gen);
        } else if (!strcmp(a, "-d")) {
            ok = kr_arg_int("bench", a, v, 0, 1 << 20, &o->depth);
        } else if (!strcmp(a, "-r")) {
            ok = kr_arg_int("bench", a, v, 1, 100, &o->reps);
        } else if (!strcmp(a, "--membw")) {
            o->membw = true;
            continue;
        } else if (!strcmp(a, "--onednn")) {
            o->onednn = true;
            continue;
        } else if (!strcmp(a, "--kernels")) {
            o->kernels = true;
            if (v && v[0] != '-') {
                o->kernel_types = v;
                i++;
            }
            continue;
        } else if (!strcmp(a, "--mmap")) {
            o->use_mmap = true;
            continue;
        } else if (!strcmp(a, "--no-repack")) {
            o->no_repack = true;
            continue;
        } else if (!strcmp(a, "--kv-type")) {
            if (!v || kara_kv_dtype_parse(v, &o->kv_dtype) != KARA_OK) {
                fprintf(stderr, "kara bench: --kv-type: %s\n", v ? kara_last_error() : "needs a value");
                return KR_EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "kara bench: unknown option '%s'\n", a);
            usage(stderr);
            return KR_EXIT_USAGE;
        }
        if (!ok) return KR_EXIT_USAGE;
        i++;
    }
    if (o->membw) return kr_bench_membw((int)o->threads);
    if (o->onednn) return kr_bench_onednn((int)o->threads, prompt_set && o->n_prompt > 0 ? (int)o->n_prompt : 512);
    if (o->kernels)
        return kr_bench_kernels((int)o->threads, o->kernel_types, prompt_set && o->n_prompt > 0 ? (int)o->n_prompt : 64,
                                o->no_repack);
    if (!o->model) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    return -1;
}

/* Feed n random tokens of sequence 0 from position pos, in batches of at
 * most n_batch entries with logits for the last entry of each batch. */
static kara_status feed(kara_context *ctx, int32_t n_vocab, int32_t pos, int32_t n, int32_t n_batch, int32_t *tok,
                        int32_t *tpos, int32_t *seq) {
    for (int32_t done = 0; done < n;) {
        int32_t m = n - done < n_batch ? n - done : n_batch;
        for (int32_t i = 0; i < m; i++) {
            tok[i] = rand() % n_vocab;
            tpos[i] = pos + done + i;
            seq[i] = 0;
        }
        kara_batch b = {.n_tokens = m, .tokens = tok, .pos = tpos, .seq_id = seq, .logits = NULL};
        kara_status st = kara_decode(ctx, &b);
        if (st != KARA_OK) return st;
        done += m;
    }
    return KARA_OK;
}

static void report(const char *model, const char *test, int threads, int depth, double *tps, int reps) {
    qsort(tps, (size_t)reps, sizeof *tps, cmp_double);
    printf("{\"engine\":\"kara\",\"model\":\"%s\",\"test\":\"%s\",\"threads\":%d,"
           "\"depth\":%d,\"reps\":%d,\"tok_s_median\":%.2f,\"tok_s_min\":%.2f,\"tok_s_max\":%.2f}\n",
           model, test, threads, depth, reps, tps[reps / 2], tps[0], tps[reps - 1]);
    fflush(stdout);
}

static int bench_main(int argc, char **argv) {
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    srand(1234);

    double t0 = kr_monotonic_seconds();
    kara_model *model = NULL;
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = o.use_mmap;
    mp.no_repack = o.no_repack;
    if (kara_model_load(o.model, &mp, &model) != KARA_OK) {
        fprintf(stderr, "kara bench: %s\n", kara_last_error());
        return KR_EXIT_NOINPUT;
    }
    const int32_t n_batch = 512;
    kara_context_params cp;
    kara_context_params_init(&cp);
    long long need = (o.n_prompt > o.depth + o.n_gen ? o.n_prompt : o.depth + o.n_gen) + 16;
    cp.n_ctx = (int32_t)need;
    cp.n_batch = n_batch;
    cp.n_threads = (int32_t)o.threads;
    cp.kv.method = KARA_KV_METHOD_FULL;
    cp.kv.dtype = o.kv_dtype;
    cp.kv.budget = 0;
    kara_context *ctx = NULL;
    if (kara_context_create(model, &cp, &ctx) != KARA_OK) {
        fprintf(stderr, "kara bench: %s\n", kara_last_error());
        kara_model_free(model);
        return KR_EXIT_SOFTWARE;
    }
    const double load_s = kr_monotonic_seconds() - t0;
    fprintf(stderr, "kara bench: %s, %s, %d threads\n", kara_model_desc(model), kara_system_info(), (int)o.threads);

    const char *base = strrchr(o.model, '/') ? strrchr(o.model, '/') + 1 : o.model;
    const int32_t n_vocab = kara_model_n_vocab(model);
    int32_t *tok = malloc(sizeof(int32_t) * n_batch), *tpos = malloc(sizeof(int32_t) * n_batch),
            *seq = malloc(sizeof(int32_t) * n_batch);
    double tps[100];
    char name[64];
    kara_status st = (tok && tpos && seq) ? KARA_OK : KARA_ERR_NOMEM;

    if (st == KARA_OK && o.n_prompt > 0) {
        for (int r = -1; r < o.reps && st == KARA_OK; r++) { /* r = -1 warms up */
            kara_seq_clear(ctx, -1);
            double ts = kr_monotonic_seconds();
            st = feed(ctx, n_vocab, 0, (int32_t)o.n_prompt, n_batch, tok, tpos, seq);
            double dt = kr_monotonic_seconds() - ts;
            if (r >= 0) tps[r] = (double)o.n_prompt / dt;
        }
        snprintf(name, sizeof name, "pp%lld", o.n_prompt);
        if (st == KARA_OK) report(base, name, (int)o.threads, 0, tps, (int)o.reps);
    }
    if (st == KARA_OK && o.n_gen > 0) {
        for (int r = -1; r < o.reps && st == KARA_OK; r++) {
            kara_seq_clear(ctx, -1);
            if (o.depth > 0) st = feed(ctx, n_vocab, 0, (int32_t)o.depth, n_batch, tok, tpos, seq);
            if (st != KARA_OK) break;
            double ts = kr_monotonic_seconds();
            st = feed(ctx, n_vocab, (int32_t)o.depth, (int32_t)o.n_gen, 1, tok, tpos, seq);
            double dt = kr_monotonic_seconds() - ts;
            if (r >= 0) tps[r] = (double)o.n_gen / dt;
        }
        snprintf(name, sizeof name, "tg%lld", o.n_gen);
        if (st == KARA_OK) report(base, name, (int)o.threads, (int)o.depth, tps, (int)o.reps);
    }
    if (st == KARA_OK) {
        printf("{\"engine\":\"kara\",\"model\":\"%s\",\"test\":\"load\",\"threads\":%d,\"load_s\":%.3f,"
               "\"model_mib\":%.1f,\"repacked_mib\":%.1f,\"ctx_mib\":%.1f,\"peak_rss_mib\":%.1f,\"isa\":\"%s\"}\n",
               base, (int)o.threads, load_s, (double)kara_model_size_bytes(model) / (1024.0 * 1024.0),
               (double)kara_model_repacked_bytes(model) / (1024.0 * 1024.0),
               (double)kara_context_mem_bytes(ctx) / (1024.0 * 1024.0), peak_rss_mib(), kara_system_info());
    } else {
        fprintf(stderr, "kara bench: decode failed: %s\n", kara_last_error());
    }
    free(tok);
    free(tpos);
    free(seq);
    kara_context_free(ctx);
    kara_model_free(model);
    return st == KARA_OK ? KR_EXIT_OK : KR_EXIT_SOFTWARE;
}

const kr_command kr_cmd_bench = {"bench", "time prefill and decode (JSON lines, llamacpp-ref's shape)", bench_main};
