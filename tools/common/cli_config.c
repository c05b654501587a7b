/* cli_config.c - the one option table of the model-running commands (see
 * cli_config.h): shared flags that are kara_config keys, the terminal and
 * compatibility flags the parser handles itself, and each command's own. */
#include "cli_config.h"

#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "exit_codes.h"
#include "safe_output.h"
#include "kv_exact.h"

typedef struct shared_flag {
    const char *names;
    const char *key; /* kara_config key */
    const char *help;
    bool everyday; /* listed by --help; the rest (research and tuning knobs) by --help-all */
} shared_flag;

/* Flags that set a kara_config key: the flag and the YAML key go through
 * the same check. llama.cpp's spellings are aliases where they mean the
 * same (-ctk/-ctv are handled apart: Kara stores K and V in one type). */
static const shared_flag shared_flags[] = {
    {"-m|--model", "model.path", "GGUF model file", true},
    {"-c|--ctx-size", "context.size", "context size in tokens (auto = the model's)", true},
    {"-b|--batch-size", "context.batch", "tokens per forward pass (prompt chunks)", false},
    {"-t|--threads", "runtime.threads", "threads (auto = all cores)", true},
    {"--device", "runtime.device", "cpu|cuda (cuda: a build with the CUDA backend and an NVIDIA GPU; docs/CUDA.md)",
     true},
    {"-n|--predict|--n-predict", "sampling.max_tokens", "tokens to generate (-1 = until end of generation)", true},
    {"--temp", "sampling.temperature", "temperature (0 = greedy)", true},
    {"--top-k", "sampling.top_k", "top-k (0 or -1 = off)", true},
    {"--top-p", "sampling.top_p", "top-p (1 = off)", true},
    {"--min-p", "sampling.min_p", "min-p (0 = off)", false},
    {"--repeat-penalty", "sampling.repeat_penalty", "repetition penalty (1 = off)", false},
    {"--repeat-last-n", "sampling.repeat_last_n", "tokens the penalty looks back over", false},
    {"-s|--seed", "sampling.seed", "sampling seed (-1 = random, shown by --print-config)", true},
    {"--kv-method", "kv_cache.method", "full|streaming|snapkv|h2o|chunkkv|random|recent|kara|rkv|lazy|prior_recent",
     true},
    {"--kv-budget", "kv_cache.budget", "bytes for all KV memory, e.g. 64MiB (auto = enough for the context)", true},
    {"--kv-dtype", "kv_cache.dtype", "f16|f32|q8_0|q4_0 (also -ctk/-ctv, llama.cpp's names; q8_0/q4_0: blocks of 32)",
     false},
    {"--kv-block-size", "kv_cache.block_size", "slots per KV block", false},
    {"--kv-seq-tokens", "kv_cache.seq_tokens", "most KV slots one sequence holds (auto = its share of the budget)",
     false},
    {"--kv-evict", "kara.evict", "on_demand|per_window (per_window: keep --kv-retention of every window)", false},
    {"--kv-evict-lag", "kara.evict_lag", "per_window: windows a scored window waits before it is compressed", false},
    {"--kv-retention", "kara.retention", "fraction of each window kept with --kv-evict per_window", false},
    {"--kv-interval", "kara.interval", "generated tokens between compressions", false},
    {"--kv-buffer", "kara.buffer", "newest tokens protected from each compression", false},
    {"--kv-reads-weight", "kara.score.reads_weight",
     "weight of the attention a slot receives after its window closed (on_demand; 0 = off)", false},
    {"--kv-trigger", "kara.trigger", "periodic|threshold (threshold: ablation A8, whole cache at the token budget)",
     false},
    {"--kv-selection-scope", "kara.selection_scope", "shared|per_layer (per_layer: ablation A5, a selection per layer)",
     false},
    {"--kv-prior-weight", "kara.score.prior_weight",
     "weight of the model's retention prior in kara's window scores; snapkv, h2o and streaming use it too when it "
     "is given (0 = off; needs a model with a prior)",
     false},
    {"--kv-budget-tokens", "baselines.budget_tokens",
     "per-sequence token budget of streaming/snapkv/h2o/rkv/lazy/kara threshold", false},
    {"--chat-template", "chat.template", "auto|qwen3|deepseek-r1|llama3|llama3.1|chatml", false},
    {"--reasoning-budget", "chat.reasoning_budget", "max thinking tokens (-1 = unlimited)", false},
    {"--spec", "speculative.mode",
     "none|ngram|draft: speculative decoding, drafts from the text itself (ngram) or a draft model (draft); the same "
     "output, under every KV method",
     false},
    {"--draft-max", "speculative.draft_max", "most tokens drafted per speculative step (1..14)", false},
    {"-md|--model-draft", "speculative.draft_model", "GGUF of the draft model (--spec draft; the same vocabulary)",
     false},
    {"--draft-p-min", "speculative.draft_p_min", "a draft stops at a token the draft model gives a lower probability",
     false},
};
#define N_SHARED (int)(sizeof shared_flags / sizeof shared_flags[0])

/* Flags the parser itself handles. */
typedef enum pf_kind {
    PF_CONFIG,      /* --config FILE (read in the first pass) */
    PF_PRINT,       /* --print-config */
    PF_HELP,        /* -h, --help */
    PF_HELP_ALL,    /* --help-all */
    PF_COLOR,       /* --color [auto|on|off] */
    PF_NO_PROGRESS, /* --no-progress */
    PF_MMAP,        /* --mmap [on|off] */
    PF_NO_MMAP,     /* --no-mmap */
    PF_CTK,         /* -ctk TYPE */
    PF_CTV,         /* -ctv TYPE */
    PF_ESCAPE,      /* -e */
    PF_NO_ESCAPE,   /* --no-escape */
    PF_CNV,         /* -cnv: conversation mode, which is `kara chat` */
    PF_QUIET_OK,    /* accepted, nothing to do (-no-cnv, --no-warmup) */
    PF_GPU,         /* a GPU flag with a value: ignored with a note */
    PF_GPU_OPT,     /* a GPU flag with an optional on|off|auto */
    PF_GPU_BARE,    /* a GPU flag without a value */
    PF_MLOCK,       /* --mlock: ignored with a note */
} pf_kind;

typedef struct parser_flag {
    const char *names;
    pf_kind kind;
    const char *arg;  /* how --help shows its value, NULL: none */
    const char *help; /* NULL: not listed one by one */
    const char *def;
    bool everyday; /* listed by --help, not only by --help-all */
} parser_flag;

static const parser_flag parser_flags[] = {
    {"--config", PF_CONFIG, "FILE", "YAML configuration file (repeatable; later files win, flags win over files)", NULL,
     true},
    {"--print-config", PF_PRINT, NULL, "print the resolved configuration and where each value came from", NULL, true},
    {"-h|--help", PF_HELP, NULL, "the everyday options", NULL, true},
    {"--help-all", PF_HELP_ALL, NULL, "every option, research and compatibility ones too", NULL, true},
    {"--mmap", PF_MMAP, "[on|off]",
     "on: map the model file; off: read it into huge-page memory (faster decode) [model.mmap]", "off", false},
    {"--no-mmap", PF_NO_MMAP, NULL, "same as --mmap off (llama.cpp's name)", NULL, false},
    {"-ctk|--cache-type-k", PF_CTK, "TYPE", "KV cache type (llama.cpp's name; K and V share one type here)", NULL,
     false},
    {"-ctv|--cache-type-v", PF_CTV, "TYPE", "KV cache type (the same as -ctk; a different one is refused)", NULL,
     false},
    {"-e|--escape", PF_ESCAPE, NULL, "turn \\n, \\t, \\\\, \\\", \\' and \\xHH in the prompt into characters", "off",
     false},
    {"--no-escape", PF_NO_ESCAPE, NULL, "take the prompt as typed", NULL, false},
    {"--color|-co", PF_COLOR, "[auto|on|off]",
     "colours on a terminal; auto: never into a file or a pipe, nor with NO_COLOR set", "auto", false},
    {"--no-progress", PF_NO_PROGRESS, NULL, "no progress line on stderr", NULL, false},
    {"-cnv|--conversation", PF_CNV, NULL, NULL, NULL, false},
    {"-no-cnv|--no-conversation|--no-warmup|--no-display-prompt", PF_QUIET_OK, NULL, NULL, NULL, false},
    {"-ngl|--gpu-layers|--n-gpu-layers|-mg|--main-gpu|-sm|--split-mode|-ts|--tensor-split", PF_GPU, NULL, NULL, NULL,
     false},
    {"-fa|--flash-attn", PF_GPU_OPT, NULL, NULL, NULL, false},
    {"-nkvo|--no-kv-offload", PF_GPU_BARE, NULL, NULL, NULL, false},
    {"--mlock", PF_MLOCK, NULL, NULL, NULL, false},
};
#define N_PARSER (int)(sizeof parser_flags / sizeof parser_flags[0])

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

/* Edit distance with transpositions (optimal string alignment), capped at
 * 9: enough to rank near misses of flag names. */
int kr_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 40 || m > 40) return 9;
    int d[41][41];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[n][m] < 9 ? d[n][m] : 9;
}

typedef struct suggestion {
    const char *best;
    size_t best_len;
    int dist;
} suggestion;

/* Consider every name of a "|" list; a flag that starts with the typed
 * text (a prefix, "--thread" for "--threads") counts as distance 1. */
static void consider(suggestion *s, const char *names, const char *typed) {
    size_t tn = strlen(typed);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        char name[64];
        if (len < sizeof name) {
            memcpy(name, p, len);
            name[len] = '\0';
            int d = kr_edit_distance(typed, name);
            if (tn >= 4 && len > tn && !strncmp(name, typed, tn) && d > 1) d = 1;
            if (d < s->dist) *s = (suggestion){p, len, d};
        }
        if (!bar) break;
        p = bar + 1;
    }
}

/* "unknown option" with the nearest flag name when one is close enough
 * (at most 2 edits, or a third of the name). */
static void unknown_option(const char *cmd, const char *a, const kr_cli_flag *own, int n_own) {
    suggestion s = {NULL, 0, 99};
    for (int k = 0; k < N_SHARED; k++) consider(&s, shared_flags[k].names, a);
    for (int k = 0; k < N_PARSER; k++)
        if (parser_flags[k].help) consider(&s, parser_flags[k].names, a);
    for (int k = 0; k < n_own; k++) consider(&s, own[k].names, a);
    int limit = (int)strlen(a) / 3 > 2 ? (int)strlen(a) / 3 : 2;
    if (s.best && s.dist <= limit)
        fprintf(stderr, "kara %s: unknown option '%s'; did you mean '%.*s'? (see kara %s --help)\n", cmd, a,
                (int)s.best_len, s.best, cmd);
    else
        fprintf(stderr, "kara %s: unknown option '%s' (see kara %s --help)\n", cmd, a, cmd);
}

/* The value after argv[*i] if it is one of the words (NULL-terminated);
 * consumed then. Lets `--color` and `-fa` stand alone as llama.cpp's do. */
static const char *optional_word(int argc, char **argv, int *i, const char *const *words) {
    if (*i + 1 >= argc) return NULL;
    for (const char *const *w = words; *w; w++)
        if (!strcmp(argv[*i + 1], *w)) return argv[++*i];
    return NULL;
}

/* llama.cpp's GPU flags, told truthfully: a build without the CUDA backend
 * runs on the CPU whatever they say; in a CUDA build, -ngl N > 0 is
 * --device cuda (Kara offloads the whole model or nothing) and -ngl 0 is
 * --device cpu, and the others have nothing to choose. */
static int gpu_flag(const char *cmd, const char *a, const char *v, kara_config *cfg) {
    const char *sp = v ? " " : "", *val = v ? v : "";
    if (!kara_device_built(KARA_DEVICE_CUDA)) {
        fprintf(stderr,
                "kara %s: note: %s%s%s ignored: this build has no GPU backend and runs on the CPU (a build with "
                "-DKARA_CUDA=ON has one: docs/CUDA.md)\n",
                cmd, a, sp, val);
        return -1;
    }
    if (!names_match("-ngl|--gpu-layers|--n-gpu-layers", a)) {
        fprintf(stderr,
                "kara %s: note: %s%s%s ignored: Kara's GPU backend runs on the first GPU and chooses its own "
                "kernels (--device cuda)\n",
                cmd, a, sp, val);
        return -1;
    }
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end) {
        fprintf(stderr, "kara %s: %s: expected a number of layers, got '%s'\n", cmd, a, v);
        return KR_EXIT_USAGE;
    }
    if (n > 0 && !kara_device_available(KARA_DEVICE_CUDA)) { /* llama.cpp runs on the CPU then too */
        fprintf(stderr, "kara %s: note: %s %s: no usable GPU here, so it runs on the CPU (--device cuda would stop)\n",
                cmd, a, v);
        return -1;
    }
    if (kara_config_set(cfg, "runtime.device", n > 0 ? "cuda" : "cpu", a) != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
        return KR_EXIT_USAGE;
    }
    fprintf(stderr, "kara %s: note: %s %s means --device %s: %s\n", cmd, a, v, n > 0 ? "cuda" : "cpu",
            n > 0 ? "Kara runs every layer on the GPU (it does not split a model)" : "every layer runs on the CPU");
    return -1;
}

/* One parser flag at argv[*i] (name a, value v if given as --flag=v).
 * Returns -1 to go on, else an exit code. */
static int parser_flag_apply(const char *cmd, const parser_flag *pf, const char *a, const char *v, int argc,
                             char **argv, int *i, kara_config *cfg, kr_cli_parsed *out, const char **ctk,
                             const char **ctv) {
    static const char *const on_off[] = {"on", "off", "true", "false", "yes", "no", NULL};
    static const char *const color_words[] = {"auto", "on", "off", "always", "never", NULL};
    static const char *const fa_words[] = {"on", "off", "auto", NULL};
    bool needs_value = pf->kind == PF_CONFIG || pf->kind == PF_CTK || pf->kind == PF_CTV || pf->kind == PF_GPU;
    if (needs_value && !v) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "kara %s: %s needs a value\n", cmd, a);
            return KR_EXIT_USAGE;
        }
        v = argv[++*i];
    }
    switch (pf->kind) {
    case PF_CONFIG: break; /* read in the first pass */
    case PF_PRINT: out->print_config = true; break;
    case PF_HELP: out->help = true; break;
    case PF_HELP_ALL: out->help = out->help_all = true; break;
    case PF_COLOR: {
        if (!v) v = optional_word(argc, argv, i, color_words);
        if (!v || !strcmp(v, "on") || !strcmp(v, "always"))
            kr_console_set_color(KR_COLOR_ON);
        else if (!strcmp(v, "off") || !strcmp(v, "never"))
            kr_console_set_color(KR_COLOR_OFF);
        else if (!strcmp(v, "auto"))
            kr_console_set_color(KR_COLOR_AUTO);
        else {
            fprintf(stderr, "kara %s: %s: expected auto, on or off, got '%s'\n", cmd, a, v);
            return KR_EXIT_USAGE;
        }
        break;
    }
    case PF_NO_PROGRESS: kr_console_set_progress(false); break;
    case PF_MMAP:
    case PF_NO_MMAP:
        if (pf->kind == PF_MMAP && !v) v = optional_word(argc, argv, i, on_off);
        if (kara_config_set(cfg, "model.mmap", pf->kind == PF_NO_MMAP ? "off" : v ? v : "on", a) != KARA_OK) {
            fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
            return KR_EXIT_USAGE;
        }
        break;
    case PF_CTK:
    case PF_CTV:
        if (kara_config_set(cfg, "kv_cache.dtype", v, a) != KARA_OK) {
            fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
            return KR_EXIT_USAGE;
        }
        *(pf->kind == PF_CTK ? ctk : ctv) = v;
        break;
    case PF_ESCAPE: out->escape = true; break;
    case PF_NO_ESCAPE: out->escape = false; break;
    case PF_CNV:
        if (strcmp(cmd, "chat") != 0) {
            fprintf(stderr, "kara %s: %s: conversation mode is its own command: kara chat (it takes the same flags)\n",
                    cmd, a);
            return KR_EXIT_USAGE;
        }
        break;
    case PF_QUIET_OK: break;
    case PF_GPU:
    case PF_GPU_OPT:
    case PF_GPU_BARE:
        if (pf->kind == PF_GPU_OPT && !v) v = optional_word(argc, argv, i, fa_words);
        return gpu_flag(cmd, a, v, cfg);
    case PF_MLOCK:
        fprintf(stderr,
                "kara %s: note: --mlock ignored: the model is read into memory (--mmap off) unless --mmap on maps "
                "it\n",
                cmd);
        break;
    }
    return -1;
}

int kr_cli_parse(const char *cmd, int argc, char **argv, const kr_cli_flag *own, int n_own, kara_config *cfg,
                 kr_cli_parsed *out) {
    memset(out, 0, sizeof *out);
    out->args = calloc((size_t)argc + 1, sizeof *out->args);
    if (!out->args) return KR_EXIT_SOFTWARE;
    kara_config_init(cfg);
    /* pass 1: configuration files, in order */
    for (int i = 1; i < argc; i++) {
        const char *file = NULL;
        if (!strncmp(argv[i], "--config=", 9)) {
            file = argv[i] + 9;
        } else if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kara %s: --config needs a file\n", cmd);
                return KR_EXIT_USAGE;
            }
            file = argv[++i];
        } else {
            continue;
        }
        kara_status st = kara_config_load(cfg, file);
        if (st) {
            fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
            return st == KARA_ERR_IO ? KR_EXIT_NOINPUT : KR_EXIT_CONFIG;
        }
        kr_out_add_input(file, "the config file");
    }
    /* pass 2: flags over the files */
    const char *ctk = NULL, *ctv = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* --name=value, as GNU tools take it */
        char name[64];
        const char *v = NULL, *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            a = name;
            v = eq + 1;
        }
        const parser_flag *pf = NULL;
        for (int k = 0; k < N_PARSER && !pf; k++)
            if (names_match(parser_flags[k].names, a)) pf = &parser_flags[k];
        if (pf) {
            int rc = parser_flag_apply(cmd, pf, a, v, argc, argv, &i, cfg, out, &ctk, &ctv);
            if (rc >= 0) return rc;
            continue;
        }
        const shared_flag *sf = NULL;
        for (int k = 0; k < N_SHARED && !sf; k++)
            if (names_match(shared_flags[k].names, a)) sf = &shared_flags[k];
        if (sf) {
            if (!v && i + 1 >= argc) {
                fprintf(stderr, "kara %s: %s needs a value\n", cmd, a);
                return KR_EXIT_USAGE;
            }
            if (kara_config_set(cfg, sf->key, v ? v : argv[++i], a) != KARA_OK) {
                fprintf(stderr, "kara %s: %s\n", cmd, kara_last_error());
                return KR_EXIT_USAGE;
            }
            continue;
        }
        const kr_cli_flag *of = NULL;
        for (int k = 0; k < n_own && !of; k++)
            if (names_match(own[k].names, a)) of = &own[k];
        if (of) {
            if (of->has_value && !v) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "kara %s: %s needs a value\n", cmd, a);
                    return KR_EXIT_USAGE;
                }
                v = argv[++i];
            } else if (!of->has_value && v) {
                fprintf(stderr, "kara %s: %s takes no value\n", cmd, a);
                return KR_EXIT_USAGE;
            }
            out->args[out->n_args++] = (kr_cli_arg){of, v};
            continue;
        }
        if (a[0] == '-' && a[1]) {
            unknown_option(cmd, a, own, n_own);
            return KR_EXIT_USAGE;
        }
        out->args[out->n_args++] = (kr_cli_arg){NULL, a};
    }
    if (ctk && ctv && strcmp(ctk, ctv) != 0) {
        fprintf(stderr, "kara %s: -ctk %s and -ctv %s differ: Kara keeps K and V in one type (--kv-dtype)\n", cmd, ctk,
                ctv);
        return KR_EXIT_USAGE;
    }
    return -1;
}

void kr_cli_parsed_free(kr_cli_parsed *p) {
    free(p->args);
    p->args = NULL;
}

static void print_flag(FILE *f, const char *names, const char *arg, const char *help, const char *def) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *c = buf; *c; c++)
        if (*c == '|') *c = ',';
    if (arg) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), " %s", arg);
    if (def && def[0])
        fprintf(f, "  %-30s %s (default: %s)\n", buf, help, def);
    else
        fprintf(f, "  %-30s %s\n", buf, help);
}

/* The shared keys a command lists in its help (NULL: every shared flag),
 * each "key" or "key=default" where the command's default differs. */
static const char *const *help_keys;

void kr_cli_help_keys(const char *const *keys) { help_keys = keys; }

/* Whether the shared flag of key is listed, and the command's own default. */
static bool help_lists(const char *key, const char **def) {
    *def = NULL;
    if (!help_keys) return true;
    size_t n = strlen(key);
    for (const char *const *k = help_keys; *k; k++)
        if (!strncmp(*k, key, n) && ((*k)[n] == '\0' || (*k)[n] == '=')) {
            if ((*k)[n] == '=') *def = *k + n + 1;
            return true;
        }
    return false;
}

void kr_cli_usage(FILE *f, const kr_cli_flag *own, int n_own, bool all) {
    for (int k = 0; k < n_own; k++)
        if (own[k].help) print_flag(f, own[k].names, own[k].has_value ? "X" : NULL, own[k].help, NULL);
    kara_config defaults;
    kara_config_init(&defaults);
    fprintf(f,
            all ? "\nshared options (each also a key of the YAML configuration, see configs/README.md):\n"
                : "\ncommon options ([key]: the same setting in a YAML file, configs/README.md):\n");
    for (int k = 0; k < N_SHARED; k++) {
        const char *own_def;
        if (!help_lists(shared_flags[k].key, &own_def) || (!all && !help_keys && !shared_flags[k].everyday)) continue;
        char help[200], def[64] = "";
        snprintf(help, sizeof help, "%s [%s]", shared_flags[k].help, shared_flags[k].key);
        if (own_def)
            snprintf(def, sizeof def, "%s", own_def);
        else if (!strcmp(shared_flags[k].key, "sampling.seed")) /* drawn at start-up: no number to show */
            snprintf(def, sizeof def, "random");
        else if (kara_config_get(&defaults, shared_flags[k].key, def, sizeof def) != KARA_OK)
            def[0] = '\0';
        print_flag(f, shared_flags[k].names, "X", help, def[0] ? def : "none");
    }
    if (all) fprintf(f, "\nterminal, configuration and llama.cpp-compatible options:\n");
    for (int k = 0; k < N_PARSER; k++)
        if (parser_flags[k].help && (all || parser_flags[k].everyday))
            print_flag(f, parser_flags[k].names, parser_flags[k].arg, parser_flags[k].help, parser_flags[k].def);
    if (!all) {
        fprintf(f, "more: --help-all (every option: KV-cache tuning, speculative decoding, llama.cpp's flags)\n");
        return;
    }
    fprintf(
        f,
        "%s"
        "  --mlock is accepted and ignored with a note; -no-cnv and --no-warmup are accepted; -cnv is `kara chat`.\n"
        "  --flag=value works for long names.\n",
        kara_device_built(KARA_DEVICE_CUDA)
            ? "  llama.cpp's GPU flags: -ngl N is --device cuda (N > 0) or cpu (N = 0), whole model; -fa, -mg, -sm,\n"
              "  -ts and -nkvo are accepted and ignored with a note.\n"
            : "  llama.cpp's GPU flags (-ngl, -fa, -mg, -sm, -ts, -nkvo) are accepted and ignored with a note: this\n"
              "  build has no GPU backend (-DKARA_CUDA=ON builds one).\n");
}

void kr_cli_print_config(FILE *f, const kara_config *cfg) {
    size_t n = kara_config_format(cfg, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf) return;
    kara_config_format(cfg, buf, n + 1);
    fputs(buf, f);
    free(buf);
}

void kr_cli_note_inputs(const kara_config *cfg) {
    kr_out_add_input(cfg->model_path, "the model (-m)");
    kr_out_add_input(cfg->draft_model, "the draft model (-md)");
    kr_out_add_input(cfg->batch_input, "the batch input (-i)");
}

/* --print-config with a model: whether the KV budget holds the context
 * exactly, found the way a run finds it (the model loaded, a context made);
 * nothing when either fails, as the run would then say why. */
static void print_kv_exact(const kara_config *cfg) {
    kara_model *m;
    if (!cfg->model_path[0] || kr_cli_load_model(cfg, &m) != KARA_OK) return;
    kara_context_params cp = kr_cli_context_params(cfg);
    kara_context *ctx;
    if (kara_context_create(m, &cp, &ctx) == KARA_OK) {
        char text[256];
        if (kr_kv_exact_text(ctx, &cp.kv, text, sizeof text)) printf("# %s\n", text);
        kara_context_free(ctx);
    }
    kara_model_free(m);
}

int kr_cli_finish(const char *cmd, const char *synopsis, const kr_cli_flag *own, int n_own, const kara_config *cfg,
                  kr_cli_parsed *cli, int rc) {
    if (rc < 0 && cli->help) {
        fputs(synopsis, stdout);
        kr_cli_usage(stdout, own, n_own, cli->help_all);
        rc = KR_EXIT_OK;
    } else if (rc < 0 && cli->print_config) {
        kr_cli_print_config(stdout, cfg);
        print_kv_exact(cfg);
        rc = KR_EXIT_OK;
    }
    kr_cli_parsed_free(cli);
    if (rc < 0 && !cfg->model_path[0]) {
        fprintf(stderr, "kara %s: no model given (-m MODEL.gguf or model.path in --config)\n", cmd);
        rc = KR_EXIT_USAGE;
    }
    if (rc < 0) kr_cli_note_inputs(cfg);
    return rc;
}

kara_status kr_cli_load_model_at(const kara_config *cfg, const char *path, kara_model **out) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = cfg->use_mmap;
    /* the CUDA backend uploads the file's layouts: repacking for the CPU kernels would be undone */
    mp.no_repack = cfg->context.device == KARA_DEVICE_CUDA;
    return kara_model_load(path, &mp, out);
}

kara_context_params kr_cli_context_params(const kara_config *cfg) {
    kara_context_params cp = cfg->context;
    if (cfg->spec != KARA_SPEC_NONE) cp.verify_max = cfg->draft_max + 1;
    return cp;
}

kara_status kr_cli_load_model(const kara_config *cfg, kara_model **out) {
    return kr_cli_load_model_at(cfg, cfg->model_path, out);
}
