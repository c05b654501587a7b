/* cmd_bench.c - `kara bench`: prefill and decode speed on a GGUF file, timed
 * the way ../shared/bench/llamacpp-ref times llama.cpp (same tests, same
 * random tokens, same JSON lines), so the two can be run side by side and
 * their ratio quoted.
 *
 *   pp: one prompt of P random tokens from an empty cache, in batches of 512.
 *   tg: N single-token steps after D tokens already in the cache (-d).
 *   verifyK (--verify K): steps of K+1 tokens with logits for every entry
 *     after D tokens, the shape of a speculative-decoding verify step, and
 *     its cost against a tg step's.
 * Each test runs once to warm up, then REPS times; tokens/s median/min/max.
 * A last line reports the load time, the ISA and the peak resident memory.
 * Flags and defaults are those of every command (cli_config.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_compete.h"
#include "bench_kernels.h"
#include "cli_args.h"
#include "cli_config.h"
#include "cpu_features.h"
#include "commands.h"
#include "exit_codes.h"
#include "kara.h"
#include "monotonic_clock.h"

#define MAX_VERIFY 64 /* most drafted tokens a --verify step takes */

typedef struct bench_opts {
    kara_config cfg; /* -m, -t, -b, -n, --mmap, --kv-dtype (-ctk/-ctv): the shared flags */
    const char *model;
    long long threads, n_prompt, n_gen, depth, reps;
    long long verify[4]; /* --verify K (repeatable): drafted tokens per verify step */
    int n_verify;
    bool membw, kernels, onednn; /* micro-benchmarks instead of a model */
    bool no_repack;              /* --no-repack: keep the file's weight layout */
    bool compete;                /* --compete: a busy process pinned to CPU 0 meanwhile */
    const char *kernel_types;
    bool table; /* a markdown table (a terminal, -o md) instead of JSON lines */
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

/* llama-bench's names for its own flags; -t, -n, -b, --mmap/--no-mmap and
 * --kv-dtype (-ctk/-ctv) are the shared ones, with the same defaults as in
 * every other command. */
static const kr_cli_flag bench_flags[] = {
    {"-p|--n-prompt", true, "prompt tokens for the pp test, 0 = skip (default: 512)"},
    {"-d|--n-depth", true, "tokens in the cache before the tg test (default: 0)"},
    {"-r|--repetitions", true, "repetitions, 1..100 (default: 3)"},
    {"-o|--output", true, "md|jsonl: a markdown table or JSON lines (default: md on a terminal, else jsonl)"},
    {"--no-repack", false, "keep the file's weight layout (no interleaving of rows at load)"},
    {"--verify", true,
     "also time verify steps of K+1 tokens with every entry's logits after -d tokens (repeatable, up to 4 "
     "values of K, 1..64): a speculative-decoding verify step's cost against a tg step"},
    {"--compete", false, "run a CPU-bound process pinned to CPU 0 meanwhile (a busy device); JSON lines say so"},
    {"--membw", false, "streaming read bandwidth of a 1 GiB buffer instead of a model"},
    {"--kernels", false,
     "kernel-table products on Qwen3 shapes instead of a model; then TYPES (Q4_0,Q8_0,Q4_K,Q6_K,F16,F32 or a "
     "list) and -p BATCH (default: all types, 64)"},
    {"--onednn", false, "the prefill shapes through oneDNN's matmul (builds with libdnnl; -p BATCH, default: 512)"},
};
#define N_BENCH_FLAGS (int)(sizeof bench_flags / sizeof bench_flags[0])

static const char *k_synopsis =
    "usage: kara bench -m MODEL.gguf [-t THREADS] [-p PROMPT] [-n GEN] [-d DEPTH] [-r REPS]\n"
    "                  [--kv-dtype f16|f32|q8_0|q4_0] [--mmap on|off] [--no-repack]\n"
    "                  [--verify K]...\n"
    "       kara bench --membw | --kernels [TYPES] | --onednn  [-t N] [-p BATCH]\n\n"
    "Times prefill (ppPROMPT: one prompt of random tokens from an empty cache, in batches of -b)\n"
    "and decode (tgGEN: single-token steps after DEPTH tokens already in the cache). Each test\n"
    "runs once to warm up, then REPS times. On a terminal: a table of tokens/s (mean +- sd);\n"
    "into a pipe or a file, or with -o jsonl: JSON lines with tokens/s median/min/max in the shape\n"
    "of ../shared/bench/llamacpp-ref, and a last line with load time and peak memory. The KV cache\n"
    "is always `full`; --mmap and -ctk/-ctv (see --help-all) apply. With --device cuda (a build with\n"
    "-DKARA_CUDA=ON and a GPU; else exit 69) every line adds \"device\":\"cuda\", and the tg lines\n"
    "the GPU, the weight bytes a decode step reads, their GB/s and its share of the card's peak.\n\n";

/* The shared options bench reads, with its own default for -n. */
static const char *const bench_keys[] = {
    "model.path", "runtime.threads", "runtime.device", "context.batch", "sampling.max_tokens=128", "kv_cache.dtype",
    NULL};

static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_prompt = 512;
    o->n_gen = 128;
    o->reps = 3;
    bool prompt_set = false;
    o->table = isatty(STDOUT_FILENO);
    kr_cli_parsed cli;
    kr_cli_help_keys(bench_keys);
    int rc = kr_cli_parse("bench", argc, argv, bench_flags, N_BENCH_FLAGS, &o->cfg, &cli);
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        bool ok = true;
        if (!a->flag) {
            if (o->kernels && !o->kernel_types) {
                o->kernel_types = a->value;
            } else {
                fprintf(stderr, "kara bench: unexpected argument '%s'\n", a->value);
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "-p")) {
            ok = kr_arg_int("bench", "-p", a->value, 0, 1 << 20, &o->n_prompt);
            prompt_set = true;
        } else if (kr_cli_flag_is(a->flag, "-d")) {
            ok = kr_arg_int("bench", "-d", a->value, 0, 1 << 20, &o->depth);
        } else if (kr_cli_flag_is(a->flag, "-r")) {
            ok = kr_arg_int("bench", "-r", a->value, 1, 100, &o->reps);
        } else if (kr_cli_flag_is(a->flag, "-o")) {
            if (!strcmp(a->value, "md") || !strcmp(a->value, "jsonl")) {
                o->table = !strcmp(a->value, "md");
            } else {
                fprintf(stderr, "kara bench: -o: expected md or jsonl, got '%s'\n", a->value);
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "--verify")) {
            if (o->n_verify == 4) {
                fprintf(stderr, "kara bench: --verify: at most 4 values\n");
                rc = KR_EXIT_USAGE;
            } else {
                ok = kr_arg_int("bench", "--verify", a->value, 1, MAX_VERIFY, &o->verify[o->n_verify++]);
            }
        } else if (kr_cli_flag_is(a->flag, "--no-repack")) {
            o->no_repack = true;
        } else if (kr_cli_flag_is(a->flag, "--compete")) {
            o->compete = true;
        } else if (kr_cli_flag_is(a->flag, "--membw")) {
            o->membw = true;
        } else if (kr_cli_flag_is(a->flag, "--kernels")) {
            o->kernels = true;
        } else if (kr_cli_flag_is(a->flag, "--onednn")) {
            o->onednn = true;
        }
        if (!ok) rc = KR_EXIT_USAGE;
    }
    bool micro = o->membw || o->kernels || o->onednn;
    if (rc < 0 && micro) { /* no model needed: finish here, as kr_cli_finish would */
        if (cli.help) rc = kr_cli_finish("bench", k_synopsis, bench_flags, N_BENCH_FLAGS, &o->cfg, &cli, rc);
        kr_cli_parsed_free(&cli);
    } else {
        rc = kr_cli_finish("bench", k_synopsis, bench_flags, N_BENCH_FLAGS, &o->cfg, &cli, rc);
    }
    if (rc >= 0) return rc;
    o->model = o->cfg.model_path;
    o->threads = o->cfg.context.n_threads > 0 ? o->cfg.context.n_threads : kr_cpu_count();
    const char *n_from = kara_config_origin(&o->cfg, "sampling.max_tokens");
    if (n_from && strcmp(n_from, "default") != 0) {
        if (o->cfg.max_tokens < 0) {
            fprintf(stderr, "kara bench: -n: the number of generated tokens must be >= 0 (0 = skip tg)\n");
            return KR_EXIT_USAGE;
        }
        o->n_gen = o->cfg.max_tokens;
    }
    if (o->membw) return kr_bench_membw((int)o->threads);
    if (o->onednn) return kr_bench_onednn((int)o->threads, prompt_set && o->n_prompt > 0 ? (int)o->n_prompt : 512);
    if (o->kernels)
        return kr_bench_kernels((int)o->threads, o->kernel_types, prompt_set && o->n_prompt > 0 ? (int)o->n_prompt : 64,
                                o->no_repack);
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

/* Time `steps` verify steps of k drafted tokens (k+1 entries, logits for
 * each), each at depth (the sequence is cut back to depth after each, as
 * if every draft were rejected), so k = 0 and k > 0 read the same cache;
 * seconds per step into sec. */
static kara_status verify_steps(kara_context *ctx, int32_t n_vocab, int32_t depth, int32_t k, int32_t steps,
                                int32_t *tok, int32_t *tpos, int32_t *seq, int8_t *want, double *sec) {
    double ts = kr_monotonic_seconds();
    for (int32_t s = 0; s < steps; s++) {
        for (int32_t i = 0; i <= k; i++) {
            tok[i] = rand() % n_vocab;
            tpos[i] = depth + i;
            seq[i] = 0;
            want[i] = 1;
        }
        kara_batch b = {.n_tokens = k + 1, .tokens = tok, .pos = tpos, .seq_id = seq, .logits = want};
        kara_status st = kara_decode(ctx, &b);
        if (st == KARA_OK) st = kara_seq_truncate(ctx, 0, depth);
        if (st != KARA_OK) return st;
    }
    *sec = (kr_monotonic_seconds() - ts) / steps;
    return KARA_OK;
}

/* With --device cuda every line ends in "device":"cuda" (CPU lines keep llamacpp-ref's shape). */
static const char *device_field = "";
/* --device cuda: the GPU, and the weight bytes a decode step reads, for
 * the tg lines' effective bandwidth against the card's peak. */
static kara_device_props gpu;
static uint64_t decode_bytes;

/* What the table's first columns say of the model and the run. */
typedef struct bench_row {
    const char *desc; /* kara_model_desc */
    double size_mib;  /* weight bytes */
    double params_m;  /* millions of parameters */
    const char *backend;
    int threads;
    bool header_done;
    char spread[1024]; /* the spread warnings, printed after the results so a table stays whole */
} bench_row;

/* One test's repetitions (tokens/s): a JSON line in llamacpp-ref's shape,
 * or a table row with mean +- sd as llama-bench prints it; a spread of
 * more than 10% between repetitions is worth a warning either way, since
 * the median then hides a busy or throttled machine. */
static void report(const bench_opts *o, bench_row *row, const char *model, const char *test, int depth, double *tps,
                   bool compete) {
    const int reps = (int)o->reps;
    qsort(tps, (size_t)reps, sizeof *tps, cmp_double);
    double mean = 0, var = 0;
    for (int r = 0; r < reps; r++) mean += tps[r] / reps;
    for (int r = 0; r < reps; r++) var += (tps[r] - mean) * (tps[r] - mean);
    double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0, med = tps[reps / 2];
    if (o->table) {
        if (!row->header_done) {
            printf("| model | size | params | backend | threads | test | t/s |\n"
                   "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
            row->header_done = true;
        }
        char name[48];
        if (depth > 0)
            snprintf(name, sizeof name, "%s @ d%d", test, depth);
        else
            snprintf(name, sizeof name, "%s", test);
        printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %.2f ± %.2f |\n", row->desc, row->size_mib, row->params_m,
               row->backend, row->threads, name, mean, sd);
    } else {
        printf("{\"engine\":\"kara\",\"model\":\"%s\",\"test\":\"%s\",\"threads\":%d,"
               "\"depth\":%d,\"reps\":%d,\"tok_s_median\":%.2f,\"tok_s_min\":%.2f,\"tok_s_max\":%.2f%s%s",
               model, test, row->threads, depth, reps, med, tps[0], tps[reps - 1], compete ? ",\"compete\":true" : "",
               device_field);
    }
    /* decode on the GPU: weight bytes a token over its time, against the card's peak */
    if (gpu.name[0] && test[0] == 't') {
        const double gbs = (double)decode_bytes * med / 1e9, peak = gpu.mem_bandwidth / 1e9;
        if (o->table)
            printf("|  |  |  |  |  | %s: %.1f GB/s of weights | %.1f%% of %.0f GB/s (%s) |\n", test, gbs,
                   peak > 0 ? 100.0 * gbs / peak : 0.0, peak, gpu.name);
        else
            printf(",\"gpu\":\"%s\",\"weight_bytes\":%llu,\"gb_s\":%.2f,\"peak_gb_s\":%.1f,\"bw_frac\":%.4f", gpu.name,
                   (unsigned long long)decode_bytes, gbs, peak, peak > 0 ? gbs / peak : 0.0);
    }
    if (!o->table) printf("}\n");
    fflush(stdout);
    if (reps > 1 && med > 0 && (tps[reps - 1] - tps[0]) / med > 0.10) {
        size_t used = strlen(row->spread);
        snprintf(row->spread + used, sizeof row->spread - used,
                 "kara bench: warning: %s varies by %.0f%% between repetitions (min %.2f, median %.2f, max %.2f t/s): "
                 "something else is using the CPU, or its clock changes; compare runs with care (more -r helps)\n",
                 test, 100.0 * (tps[reps - 1] - tps[0]) / med, tps[0], med, tps[reps - 1]);
    }
}

static int bench_main(int argc, char **argv) {
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    srand(1234);
    /* --device cuda needs the backend and a GPU: say which is missing before loading anything */
    if (o.cfg.context.device == KARA_DEVICE_CUDA && kara_device_props_get(KARA_DEVICE_CUDA, &gpu) != KARA_OK) {
        fprintf(stderr, "kara bench: --device cuda: %s\n", kara_last_error());
        return KR_EXIT_UNAVAILABLE;
    }

    double t0 = kr_monotonic_seconds();
    kara_model *model = NULL;
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = o.cfg.use_mmap;
    mp.no_repack = o.no_repack || o.cfg.context.device == KARA_DEVICE_CUDA; /* the device uploads file layouts */
    if (kara_model_load(o.model, &mp, &model) != KARA_OK) {
        fprintf(stderr, "kara bench: %s\n", kara_last_error());
        return KR_EXIT_NOINPUT;
    }
    const int32_t n_batch = o.cfg.context.n_batch > 0 ? o.cfg.context.n_batch : 512;
    kara_context_params cp;
    kara_context_params_init(&cp);
    long long need = (o.n_prompt > o.depth + o.n_gen ? o.n_prompt : o.depth + o.n_gen) + 16;
    for (int v = 0; v < o.n_verify; v++)
        if (o.depth + o.verify[v] + 17 > need) need = o.depth + o.verify[v] + 17;
    cp.n_ctx = (int32_t)need;
    cp.n_batch = n_batch;
    cp.n_threads = (int32_t)o.threads;
    cp.kv.method = KARA_KV_METHOD_FULL;
    cp.kv.dtype = o.cfg.context.kv.dtype;
    cp.kv.budget = 0;
    kara_context *ctx = NULL;
    cp.device = o.cfg.context.device;
    if (cp.device == KARA_DEVICE_CUDA) {
        /* KARA_CUDA_GRAPHS=1 (docs/CUDA.md) replays decode as a graph: the lines say so */
        const char *graphs = getenv("KARA_CUDA_GRAPHS");
        device_field =
            graphs && !strcmp(graphs, "1") ? ",\"device\":\"cuda\",\"cuda_graphs\":true" : ",\"device\":\"cuda\"";
    }
    kara_status cst = kara_context_create(model, &cp, &ctx);
    if (cst != KARA_OK) {
        fprintf(stderr, "kara bench: %s\n", kara_last_error());
        kara_model_free(model);
        return kr_exit_for_context(cp.device, cst);
    }
    const double load_s = kr_monotonic_seconds() - t0;
    fprintf(stderr, "kara bench: %s, %s, %d threads%s\n", kara_model_desc(model), kara_system_info(), (int)o.threads,
            o.compete ? ", a busy process pinned to CPU 0" : "");
    if (gpu.name[0]) {
        decode_bytes = kara_model_decode_bytes(model);
        fprintf(stderr, "kara bench: on %s (%d SMs, %.0f GB/s peak); a decode step reads %.1f MiB of weights\n",
                gpu.name, (int)gpu.n_sm, gpu.mem_bandwidth / 1e9, (double)decode_bytes / (1024.0 * 1024.0));
    }
    pid_t rival = o.compete ? kr_compete_start(0) : 0;
    if (rival < 0) {
        kara_context_free(ctx);
        kara_model_free(model);
        return KR_EXIT_SOFTWARE;
    }

    const char *base = strrchr(o.model, '/') ? strrchr(o.model, '/') + 1 : o.model;
    bench_row row = {kara_model_desc(model),
                     (double)kara_model_size_bytes(model) / (1024.0 * 1024.0),
                     (double)kara_model_n_params(model) / 1e6,
                     cp.device == KARA_DEVICE_CUDA ? "CUDA" : "CPU",
                     (int)o.threads,
                     false,
                     ""};
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
        if (st == KARA_OK) report(&o, &row, base, name, 0, tps, o.compete);
    }
    if (st == KARA_OK && o.n_gen > 0) {
        /* the depth is fed once and each rep cut back to it (fed again only
         * where the cache cannot be cut back), so reps at depth 4096 do not
         * each pay a 4096-token prompt */
        bool at_depth = false;
        for (int r = -1; r < o.reps && st == KARA_OK; r++) {
            if (!at_depth || kara_seq_truncate(ctx, 0, (int32_t)o.depth) != KARA_OK) {
                kara_seq_clear(ctx, -1);
                if (o.depth > 0) st = feed(ctx, n_vocab, 0, (int32_t)o.depth, n_batch, tok, tpos, seq);
                at_depth = true;
            }
            if (st != KARA_OK) break;
            double ts = kr_monotonic_seconds();
            st = feed(ctx, n_vocab, (int32_t)o.depth, (int32_t)o.n_gen, 1, tok, tpos, seq);
            double dt = kr_monotonic_seconds() - ts;
            if (r >= 0) tps[r] = (double)o.n_gen / dt;
        }
        snprintf(name, sizeof name, "tg%lld", o.n_gen);
        if (st == KARA_OK) report(&o, &row, base, name, (int)o.depth, tps, o.compete);
    }
    int8_t *want = malloc(MAX_VERIFY + 1);
    if (!want) st = KARA_ERR_NOMEM;
    /* the depth is fed once: every verify step is cut back to it, so each
     * step (k = 0 or k > 0, any rep) reads the same cache, and a profile of
     * the run is mostly verify steps */
    if (o.n_verify > 0 && st == KARA_OK) {
        kara_seq_clear(ctx, -1);
        if (o.depth > 0) st = feed(ctx, n_vocab, 0, (int32_t)o.depth, n_batch, tok, tpos, seq);
    }
    for (int v = 0; v < o.n_verify && st == KARA_OK; v++) {
        const int32_t k = (int32_t)o.verify[v], steps = o.n_gen > 8 ? (int32_t)o.n_gen : 8;
        double one[100], many[100];
        for (int r = -1; r < o.reps && st == KARA_OK; r++) { /* r = -1 warms up */
            double a = 0, b = 0;
            st = verify_steps(ctx, n_vocab, (int32_t)o.depth, 0, steps, tok, tpos, seq, want, &a);
            if (!st) st = verify_steps(ctx, n_vocab, (int32_t)o.depth, k, steps, tok, tpos, seq, want, &b);
            if (r >= 0) one[r] = a, many[r] = b;
        }
        if (st != KARA_OK) break;
        qsort(one, (size_t)o.reps, sizeof one[0], cmp_double);
        qsort(many, (size_t)o.reps, sizeof many[0], cmp_double);
        double m1 = one[o.reps / 2], mk = many[o.reps / 2];
        if (o.table) {
            printf("| %s | %.2f MiB | %.2f M | %s | %d | verify%d @ d%d | %.3f ms a step, %.2fx a one-token step |\n",
                   row.desc, row.size_mib, row.params_m, row.backend, row.threads, k, (int)o.depth, mk * 1e3, mk / m1);
            fflush(stdout);
            continue;
        }
        printf("{\"engine\":\"kara\",\"model\":\"%s\",\"test\":\"verify%d\",\"threads\":%d,\"depth\":%d,\"reps\":%d,"
               "\"step_ms_median\":%.3f,\"one_token_step_ms_median\":%.3f,\"cost_vs_one_token\":%.3f%s}\n",
               base, k, (int)o.threads, (int)o.depth, (int)o.reps, mk * 1e3, m1 * 1e3, mk / m1,
               o.compete ? ",\"compete\":true" : "");
        fflush(stdout);
    }
    free(want);
    if (st == KARA_OK && o.table) {
        printf("\nload %.3f s, peak RSS %.1f MiB, %s\n", load_s, peak_rss_mib(), kara_system_info());
    } else if (st == KARA_OK) {
        printf("{\"engine\":\"kara\",\"model\":\"%s\",\"test\":\"load\",\"threads\":%d,\"load_s\":%.3f,"
               "\"model_mib\":%.1f,\"repacked_mib\":%.1f,\"ctx_mib\":%.1f,\"peak_rss_mib\":%.1f,\"isa\":\"%s\"}\n",
               base, (int)o.threads, load_s, (double)kara_model_size_bytes(model) / (1024.0 * 1024.0),
               (double)kara_model_repacked_bytes(model) / (1024.0 * 1024.0),
               (double)kara_context_mem_bytes(ctx) / (1024.0 * 1024.0), peak_rss_mib(), kara_system_info());
    } else {
        fprintf(stderr, "kara bench: decode failed: %s\n", kara_last_error());
    }
    fputs(row.spread, stderr);
    kr_compete_stop(rival);
    free(tok);
    free(tpos);
    free(seq);
    kara_context_free(ctx);
    kara_model_free(model);
    return st == KARA_OK ? KR_EXIT_OK : KR_EXIT_SOFTWARE;
}

const kr_command kr_cmd_bench = {"bench", "time prefill and decode (JSON lines, llamacpp-ref's shape)", bench_main};
