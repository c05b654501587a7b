/* cmd_gen_model.c - `kara gen-model`: write a random-weight GGUF model of a
 * preset or custom shape (llama, qwen2, qwen3) in any supported weight type,
 * for tests and speed measurements (speed does not depend on weight values). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "exit_codes.h"
#include "synth_model.h"
#include "monotonic_clock.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara gen-model [options] -o FILE.gguf\n\n"
            "Writes a model with random weights (deterministic in --seed), the tensor names and metadata\n"
            "llama.cpp expects, and a tiny byte-level BPE vocabulary padded to the vocabulary size.\n\n"
            "  --arch A          llama | qwen2 (Q/K/V biases) | qwen3 (Q/K norms)   [llama]\n"
            "  --preset P        %s   [tiny]\n"
            "  --layers N, --hidden N, --heads N, --kv-heads N, --head-dim N, --ffn N, --vocab N, --ctx N\n"
            "                    override the preset's shape\n"
            "  --rope-base F     RoPE frequency base\n"
            "  --eps F           RMSNorm epsilon (default 1e-5 for llama, 1e-6 for qwen)\n"
            "  --tied | --untied output matrix shared with token_embd (no output.weight) or separate\n"
            "  --type T          %s   [F32]\n"
            "                    mixes follow llama-quantize's rules (output matrix Q6_K, ...)\n"
            "  --pure            every weight matrix in the base type of T (llama-quantize --pure)\n"
            "  --seed S          random seed [1]\n"
            "  --alignment A     general.alignment, a power of two [32]\n"
            "  --name S          general.name\n"
            "  -o, --output F    output file\n",
            kr_synth_preset_names(), kr_ftype_names());
}

/* A percentage on one \r line, on a terminal only and only when it moves. */
static void show_progress(float frac, void *user) {
    int *last = user;
    int pct = (int)(frac * 100.0f);
    if (pct == *last) return;
    *last = pct;
    fprintf(stderr, "\rkara gen-model: %3d%%", pct);
}

static int gen_model_main(int argc, char **argv) {
    static const char *cmd = "gen-model";
    kr_synth_params p;
    kr_synth_params_init(&p);
    /* the preset first, so explicit shape flags override it in any order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return KR_EXIT_OK;
        }
        if (!strcmp(argv[i], "--preset")) {
            if (i + 1 >= argc || !kr_synth_preset(&p, argv[i + 1])) {
                fprintf(stderr, "kara %s: --preset: unknown preset '%s' (%s)\n", cmd, i + 1 < argc ? argv[i + 1] : "",
                        kr_synth_preset_names());
                return KR_EXIT_USAGE;
            }
        }
    }
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long v = 0;
        double d = 0;
        struct {
            const char *flag;
            int32_t *dst;
            long long lo, hi;
        } ints[] = {
            {"--layers", &p.n_layer, 1, 4096},       {"--hidden", &p.n_embd, 1, 1 << 20},
            {"--heads", &p.n_head, 1, 4096},         {"--kv-heads", &p.n_head_kv, 1, 4096},
            {"--head-dim", &p.head_dim, 2, 1 << 16}, {"--ffn", &p.n_ff, 1, 1 << 22},
            {"--vocab", &p.n_vocab, 1, 1 << 24},     {"--ctx", &p.n_ctx, 1, 1 << 30},
        };
        bool matched = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
            if (strcmp(a, ints[k].flag) != 0) continue;
            if (!kr_arg_int(cmd, a, val, ints[k].lo, ints[k].hi, &v)) return KR_EXIT_USAGE;
            *ints[k].dst = (int32_t)v;
            i++;
            matched = true;
        }
        if (matched) continue;
        if (!strcmp(a, "--preset")) {
            i++;
        } else if (!strcmp(a, "--arch")) {
            if (!val || (strcmp(val, "llama") && strcmp(val, "qwen2") && strcmp(val, "qwen3"))) {
                fprintf(stderr, "kara %s: --arch: '%s' is not llama, qwen2 or qwen3\n", cmd, val ? val : "");
                return KR_EXIT_USAGE;
            }
            snprintf(p.arch, sizeof p.arch, "%s", val);
            i++;
        } else if (!strcmp(a, "--rope-base")) {
            if (!kr_arg_float(cmd, a, val, 1e-3, 1e12, &d)) return KR_EXIT_USAGE;
            p.rope_freq_base = (float)d;
            i++;
        } else if (!strcmp(a, "--eps")) {
            if (!kr_arg_float(cmd, a, val, 1e-12, 1.0, &d)) return KR_EXIT_USAGE;
            p.rms_eps = (float)d;
            i++;
        } else if (!strcmp(a, "--tied")) {
            p.tied = true;
        } else if (!strcmp(a, "--untied")) {
            p.tied = false;
        } else if (!strcmp(a, "--type")) {
            if (!val || !kr_ftype_parse(val, &p.ftype)) {
                fprintf(stderr, "kara %s: --type: unknown type '%s' (%s)\n", cmd, val ? val : "", kr_ftype_names());
                return KR_EXIT_USAGE;
            }
            i++;
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if (!strcmp(a, "--seed")) {
            if (!kr_arg_int(cmd, a, val, 0, (long long)(~0ull >> 1), &v)) return KR_EXIT_USAGE;
            p.seed = (uint64_t)v;
            i++;
        } else if (!strcmp(a, "--alignment")) {
            if (!kr_arg_int(cmd, a, val, 1, 1 << 20, &v)) return KR_EXIT_USAGE;
            p.alignment = (uint32_t)v;
            i++;
        } else if (!strcmp(a, "--name")) {
            if (!val) {
                fprintf(stderr, "kara %s: --name needs a value\n", cmd);
                return KR_EXIT_USAGE;
            }
            snprintf(p.name, sizeof p.name, "%s", val);
            i++;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!val) {
                fprintf(stderr, "kara %s: %s needs a file name\n", cmd, a);
                return KR_EXIT_USAGE;
            }
            out = val;
            i++;
        } else {
            fprintf(stderr, "kara %s: unknown option '%s' (see --help)\n", cmd, a);
            return KR_EXIT_USAGE;
        }
    }
    if (!out) {
        fprintf(stderr, "kara %s: no output file (-o FILE.gguf)\n", cmd);
        return KR_EXIT_USAGE;
    }
    char err[512];
    if (kr_synth_validate(&p, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, err);
        return KR_EXIT_USAGE;
    }
    double t0 = kr_monotonic_seconds();
    int last_pct = -1;
    bool tty = isatty(fileno(stderr));
    kara_status st = kr_synth_write(&p, out, tty ? show_progress : NULL, &last_pct, err, sizeof err);
    if (tty) fputc('\n', stderr);
    if (st != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, err);
        return st == KARA_ERR_IO ? KR_EXIT_CANTCREAT : KR_EXIT_SOFTWARE;
    }
    double seconds = kr_monotonic_seconds() - t0;
    fprintf(stderr, "kara %s: wrote %s: %s %dL d%d %d/%d heads of %d, ffn %d, vocab %d, %s%s%s, seed %llu (%.1f s)\n",
            cmd, out, p.arch, p.n_layer, p.n_embd, p.n_head, p.n_head_kv,
            p.head_dim > 0 ? p.head_dim : p.n_embd / p.n_head, p.n_ff, p.n_vocab, kr_ftype_name(p.ftype),
            p.pure ? " pure" : "", p.tied ? ", tied" : "", (unsigned long long)p.seed, seconds);
    return KR_EXIT_OK;
}

const kr_command kr_cmd_gen_model = {"gen-model", "write a random-weight model (tests, speed runs)", gen_model_main};
