#include "cli_config.h"

#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"

typedef struct shared_flag {
    const char *names;
    const char *key; /* kara_config key */
    const char *help;
} shared_flag;

static const shared_flag shared_flags[] = {
    {"-m|--model", "model.path", "GGUF model file"},
    {"--mmap", "model.mmap", "on: map the model file; off: read it into huge-page memory (faster decode)"},
    {"-c|--ctx-size", "context.size", "context size in tokens (0 = the model's)"},
    {"-b|--batch-size", "context.batch", "tokens per forward pass (prompt chunks)"},
    {"-t|--threads", "runtime.threads", "threads (0 = all cores)"},
    {"-n|--predict|--n-predict", "sampling.max_tokens", "tokens to generate (-1 = until end of generation)"},
    {"--temp", "sampling.temperature", "temperature (0 = greedy)"},
    {"--top-k", "sampling.top_k", "top-k (0 = off)"},
    {"--top-p", "sampling.top_p", "top-p (1 = off)"},
    {"--min-p", "sampling.min_p", "min-p (0 = off)"},
    {"--repeat-penalty", "sampling.repeat_penalty", "repetition penalty (1 = off)"},
    {"--repeat-last-n", "sampling.repeat_last_n", "tokens the penalty looks back over"},
    {"-s|--seed", "sampling.seed", "sampling seed"},
    {"--kv-method", "kv_cache.method", "full|streaming|snapkv|h2o|chunkkv|random|recent|kara|rkv|lazy"},
    {"--kv-budget", "kv_cache.budget", "bytes for all KV memory, e.g. 64MiB (auto = enough for the context)"},
    {"--kv-dtype", "kv_cache.dtype", "f16|f32"},
    {"--kv-block-size", "kv_cache.block_size", "slots per KV block"},
    {"--kv-seq-tokens", "kv_cache.seq_tokens", "most KV slots one sequence holds (auto = its share of the budget)"},
    {"--kv-evict", "kara.evict", "on_demand|per_window (per_window: keep --kv-retention of every window)"},
    {"--kv-evict-lag", "kara.evict_lag", "per_window: windows a scored window waits before it is compressed"},
    {"--kv-retention", "kara.retention", "fraction of each window kept with --kv-evict per_window"},
    {"--kv-interval", "kara.interval", "generated tokens between compressions"},
    {"--kv-buffer", "kara.buffer", "newest tokens protected from each compression"},
    {"--kv-reads-weight", "kara.score.reads_weight",
     "weight of the attention a slot receives after its window closed (on_demand; 0 = off)"},
    {"--kv-trigger", "kara.trigger", "periodic|threshold (threshold: ablation A8, whole cache at the token budget)"},
    {"--kv-selection-scope", "kara.selection_scope",
     "shared|per_layer (per_layer: ablation A5, a selection per layer)"},
    {"--kv-prior-weight", "kara.score.prior_weight",
     "weight of the model's retention prior in kara's window scores (0 = off; needs a model with a prior)"},
    {"--kv-budget-tokens", "baselines.budget_tokens",
     "per-sequence token budget of streaming/snapkv/h2o/rkv/lazy/kara threshold"},
    {"--chat-template", "chat.template", "auto|qwen3|deepseek-r1|llama3|llama3.1|chatml"},
    {"--reasoning-budget", "chat.reasoning_budget", "max thinking tokens (-1 = unlimited)"},
};
#define N_SHARED (int)(sizeof shared_flags / sizeof shared_flags[0])

static bool names_match(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

bool kr_cli_flag_is(const kr_cli_flag *f, const char *name) { return f && names_match(f->names, name); }

int kr_cli_parse(const char *cmd, int argc, char **argv, const kr_cli_flag *own, int n_own, kara_config *cfg,
                 kr_cli_parsed *out) {
    memset(out, 0, sizeof *out);
    out->args = calloc((size_t)argc + 1, sizeof *out->args);
    if (!out->args) return KR_EXIT_SOFTWARE;
    kara_config_init(cfg);
    /* pass 1: configuration files, in order */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config")) continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "kara %s: --config needs a file\n", cmd);
            return KR_EXIT_USAGE;
        }
        kara_status st = kara_config_load(cfg, argv[++i]);
        if (st) {
            fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
            return st == KARA_ERR_IO ? KR_EXIT_NOINPUT : KR_EXIT_CONFIG;
        }
    }
    /* pass 2: flags over the files */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        if (!strcmp(a, "--print-config")) {
            out->print_config = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            out->help = true;
            continue;
        }
        const shared_flag *sf = NULL;
        for (int k = 0; k < N_SHARED && !sf; k++)
            if (names_match(shared_flags[k].names, a)) sf = &shared_flags[k];
        if (sf) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kara %s: %s needs a value\n", cmd, a);
                return KR_EXIT_USAGE;
            }
            if (kara_config_set(cfg, sf->key, argv[++i], a) != KARA_OK) {
                fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
                return KR_EXIT_USAGE;
            }
            continue;
        }
        const kr_cli_flag *of = NULL;
        for (int k = 0; k < n_own && !of; k++)
            if (names_match(own[k].names, a)) of = &own[k];
        if (of) {
            const char *v = NULL;
            if (of->has_value) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "kara %s: %s needs a value\n", cmd, a);
                    return KR_EXIT_USAGE;
                }
                v = argv[++i];
            }
            out->args[out->n_args++] = (kr_cli_arg){of, v};
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kara %s: unknown option '%s' (see kara %s --help)\n", cmd, a, cmd);
            return KR_EXIT_USAGE;
        }
        out->args[out->n_args++] = (kr_cli_arg){NULL, a};
    }
    return -1;
}

void kr_cli_parsed_free(kr_cli_parsed *p) {
    free(p->args);
    p->args = NULL;
}

static void print_flag(FILE *f, const char *names, bool has_value, const char *help) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s%s", names, has_value ? " X" : "");
    for (char *c = buf; *c; c++)
        if (*c == '|') *c = ',';
    fprintf(f, "  %-30s %s\n", buf, help);
}

void kr_cli_usage(FILE *f, const kr_cli_flag *own, int n_own) {
    for (int k = 0; k < n_own; k++)
        if (own[k].help) print_flag(f, own[k].names, own[k].has_value, own[k].help);
    fprintf(f, "\nshared options (each also a key of the YAML configuration, see configs/README.md):\n");
    for (int k = 0; k < N_SHARED; k++) {
        char help[160];
        snprintf(help, sizeof help, "%s [%s]", shared_flags[k].help, shared_flags[k].key);
        print_flag(f, shared_flags[k].names, true, help);
    }
    print_flag(f, "--config", true, "YAML configuration file (repeatable; later files win, flags win over files)");
    print_flag(f, "--print-config", false, "print the resolved configuration and where each value came from");
}

void kr_cli_print_config(FILE *f, const kara_config *cfg) {
    size_t n = kara_config_format(cfg, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf) return;
    kara_config_format(cfg, buf, n + 1);
    fputs(buf, f);
    free(buf);
}

int kr_cli_finish(const char *cmd, const char *synopsis, const kr_cli_flag *own, int n_own, const kara_config *cfg,
                  kr_cli_parsed *cli, int rc) {
    if (rc < 0 && cli->help) {
        fputs(synopsis, stdout);
        kr_cli_usage(stdout, own, n_own);
        rc = KR_EXIT_OK;
    } else if (rc < 0 && cli->print_config) {
        kr_cli_print_config(stdout, cfg);
        rc = KR_EXIT_OK;
    }
    kr_cli_parsed_free(cli);
    if (rc < 0 && !cfg->model_path[0]) {
        fprintf(stderr, "kara %s: no model given (-m MODEL.gguf or model.path in --config)\n", cmd);
        rc = KR_EXIT_USAGE;
    }
    return rc;
}

kara_status kr_cli_load_model(const kara_config *cfg, kara_model **out) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = cfg->use_mmap;
    return kara_model_load(cfg->model_path, &mp, out);
}
