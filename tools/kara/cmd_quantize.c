/* cmd_quantize.c - `kara quantize IN OUT TYPE`: convert a GGUF model to
 * another weight type or llama.cpp mix (tools/common/quantize_file.c does
 * the work), writing files llama.cpp loads as it would its own. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exit_codes.h"
#include "console.h"
#include "progress.h"
#include "quantize_file.h"
#include "monotonic_clock.h"

static const char *cmd = "quantize";

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara quantize [--pure] [-q] IN.gguf OUT.gguf TYPE\n\n"
            "TYPE: %s.\n"
            "Weight matrices get TYPE (mixes as llama-quantize: the output matrix Q6_K, attn_v and\n"
            "ffn_down Q6_K on some layers for Q4_K_M/Q5_K_M); rows that do not divide into the type's\n"
            "blocks fall back as llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0, ... else F16). Norms, biases\n"
            "and other 1-D tensors are stored as F32. Metadata is copied; general.file_type is set.\n"
            "  --pure   every weight matrix in the base type (llama-quantize --pure)\n"
            "  -q       no per-tensor lines (a progress line with ETA instead)\n"
            "  --no-progress  no progress line either\n",
            kr_ftype_names());
}

typedef struct quantize_view {
    bool quiet;       /* -q: no per-tensor lines */
    kr_progress prog; /* bytes converted of all */
} quantize_view;

/* One line per tensor on stderr, like llama-quantize (unless -q), and the
 * overall progress line with its ETA by input bytes. */
static void show_tensor(uint64_t i, uint64_t n, uint64_t done, uint64_t total, const kara_gguf_tensor *t, kr_type to,
                        void *user) {
    quantize_view *v = user;
    if (i == 0) v->prog.total = (double)total;
    char what[64];
    snprintf(what, sizeof what, "tensor %" PRIu64 "/%" PRIu64, i + 1, n);
    if (v->quiet) {
        kr_progress_update(&v->prog, (double)done, NULL, what, false);
        return;
    }
    kr_progress_clear(&v->prog);
    char shape[64];
    int k = snprintf(shape, sizeof shape, "[");
    for (uint32_t d = 0; d < t->n_dims; d++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    snprintf(shape + k, sizeof shape - (size_t)k, "]");
    fprintf(stderr, "[%4" PRIu64 "/%4" PRIu64 "] %-36.*s %-22s %5s -> %s\n", i + 1, n, (int)t->name.len, t->name.ptr,
            shape, kara_gguf_type_name(t->type), kr_type_get(to)->name);
    if (v->prog.tty) kr_progress_update(&v->prog, (double)done, NULL, what, true);
}

static int quantize_main(int argc, char **argv) {
    const char *pos[3];
    int npos = 0;
    kr_quantize_params p = {0};
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return KR_EXIT_OK;
        } else if (!strcmp(argv[i], "--pure")) {
            p.pure = true;
        } else if (!strcmp(argv[i], "-q")) {
            quiet = true;
        } else if (!strcmp(argv[i], "--no-progress")) {
            kr_console_set_progress(false);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kara %s: unknown option '%s'\n", cmd, argv[i]);
            return KR_EXIT_USAGE;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            fprintf(stderr, "kara %s: too many arguments\n", cmd);
            return KR_EXIT_USAGE;
        }
    }
    if (npos != 3) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!kr_ftype_parse(pos[2], &p.ftype)) {
        fprintf(stderr, "kara %s: unknown type '%s' (%s)\n", cmd, pos[2], kr_ftype_names());
        return KR_EXIT_USAGE;
    }
    quantize_view view = {quiet, {0}};
    kr_progress_init(&view.prog, "kara quantize", 0);
    p.on_tensor = show_tensor;
    p.user = &view;

    double t0 = kr_monotonic_seconds();
    char err[700];
    kr_quantize_result r;
    kara_status st = kr_quantize_file(pos[0], pos[1], &p, &r, err, sizeof err);
    if (st != KARA_OK) {
        kr_progress_clear(&view.prog);
        fprintf(stderr, "kara %s: %s\n", cmd, err);
        switch (st) {
        case KARA_ERR_ARG: return KR_EXIT_USAGE;
        case KARA_ERR_IO: return r.output_failed ? KR_EXIT_CANTCREAT : KR_EXIT_NOINPUT;
        case KARA_ERR_FORMAT:
        case KARA_ERR_UNSUPPORTED: return KR_EXIT_DATAERR;
        default: return KR_EXIT_SOFTWARE;
        }
    }
    kr_progress_clear(&view.prog);
    double seconds = kr_monotonic_seconds() - t0;
    fprintf(stderr, "kara %s: %s -> %s (%s%s): %.2f MiB -> %.2f MiB of tensor data in %.1f s\n", cmd, pos[0], pos[1],
            kr_ftype_name(p.ftype), p.pure ? ", pure" : "", r.in_bytes / 1048576.0, r.out_bytes / 1048576.0, seconds);
    return KR_EXIT_OK;
}

const kr_command kr_cmd_quantize = {"quantize", "convert a GGUF model to another weight type or mix", quantize_main};
