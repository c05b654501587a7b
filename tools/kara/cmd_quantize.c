/* cmd_quantize.c - `kara quantize IN OUT TYPE`: convert a GGUF model to
 * another weight type or llama.cpp mix. Every tensor is read through the
 * validating reader, dequantized to f32 a chunk of rows at a time, and
 * re-encoded with the reference quantizers; all metadata is copied and
 * general.file_type set, so llama.cpp loads the result as it would its own. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "exit_codes.h"
#include "ftype.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "kernels.h"

static const char *cmd = "quantize";

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara quantize [--pure] [-q] IN.gguf OUT.gguf TYPE\n\n"
            "TYPE: %s.\n"
            "Weight matrices get TYPE (mixes as llama-quantize: the output matrix Q6_K, attn_v and\n"
            "ffn_down Q6_K on some layers for Q4_K_M/Q5_K_M); rows that do not divide into the type's\n"
            "blocks fall back as llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0, ... else F16). Norms, biases\n"
            "and other 1-D tensors are stored as F32. Metadata is copied; general.file_type is set.\n"
            "  --pure   every weight matrix in the base type (no mix)\n"
            "  -q       no per-tensor lines\n",
            kara_ftype_names());
}

/* Number of blocks: {arch}.block_count, else one more than the highest
 * blk.N in the tensor names. */
static int count_layers(const kara_gguf *g) {
    kara_gguf_str arch;
    if (kara_gguf_get_str(g, "general.architecture", &arch) && arch.len < 64) {
        char key[128];
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        uint64_t n;
        if (kara_gguf_get_u64(g, key, &n) && n < 100000) return (int)n;
    }
    int n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(g->tensors[i].name.len < 255 ? g->tensors[i].name.len : 255),
                 g->tensors[i].name.ptr);
        int il = kara_ftype_layer_of(name);
        if (il + 1 > n) n = il + 1;
    }
    return n;
}

/* Convert one tensor: rows of ne[0] elements, chunk by chunk. */
static bool convert_tensor(kara_gguf_writer *w, const kara_gguf_tensor *t, kara_type dst, float *xbuf,
                           uint8_t *ybuf, int64_t chunk_elems, char *err, size_t err_size) {
    const kara_type src = (kara_type)t->type;
    const int64_t ne0 = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t src_row = kara_type_row_size(src, ne0), dst_row = kara_type_row_size(dst, ne0);
    int64_t per_chunk = chunk_elems / ne0;
    if (per_chunk < 1) per_chunk = 1;
    for (int64_t r0 = 0; r0 < nrows; r0 += per_chunk) {
        int64_t nr = nrows - r0 < per_chunk ? nrows - r0 : per_chunk;
        const uint8_t *in = (const uint8_t *)t->data + (size_t)r0 * src_row;
        bool ok = true;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(&& : ok)
#endif
        for (int64_t i = 0; i < nr; i++) {
            float *x = xbuf + i * ne0;
            if (src == KARA_TYPE_F32) memcpy(x, in + (size_t)i * src_row, (size_t)ne0 * sizeof(float));
            else kara_dequantize_row(src, in + (size_t)i * src_row, x, ne0);
            ok = kara_quantize_row(dst, x, ybuf + (size_t)i * dst_row, ne0) && ok;
        }
        if (!ok) {
            snprintf(err, err_size, "tensor '%.*s': no quantizer for %s", (int)t->name.len, t->name.ptr,
                     kara_type_get(dst)->name);
            return false;
        }
        if (kara_gguf_writer_write(w, ybuf, (size_t)nr * dst_row) != KARA_OK) {
            snprintf(err, err_size, "%s", kara_gguf_writer_error(w));
            return false;
        }
    }
    return true;
}

static int quantize_main(int argc, char **argv) {
    const char *pos[3];
    int npos = 0;
    bool pure = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return KARA_EXIT_OK;
        } else if (!strcmp(argv[i], "--pure")) {
            pure = true;
        } else if (!strcmp(argv[i], "-q")) {
            quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kara %s: unknown option '%s'\n", cmd, argv[i]);
            return KARA_EXIT_USAGE;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            fprintf(stderr, "kara %s: too many arguments\n", cmd);
            return KARA_EXIT_USAGE;
        }
    }
    if (npos != 3) {
        usage(stderr);
        return KARA_EXIT_USAGE;
    }
    kara_ftype ftype;
    if (!kara_ftype_parse(pos[2], &ftype)) {
        fprintf(stderr, "kara %s: unknown type '%s' (%s)\n", cmd, pos[2], kara_ftype_names());
        return KARA_EXIT_USAGE;
    }
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "kara %s: input and output are the same file\n", cmd);
        return KARA_EXIT_USAGE;
    }

    char err[600];
    kara_gguf *g = NULL;
    kara_status st = kara_gguf_open(pos[0], &g, err, sizeof err);
    if (st != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, err);
        return st == KARA_ERR_IO ? KARA_EXIT_NOINPUT : KARA_EXIT_DATAERR;
    }
    int rc = KARA_EXIT_OK;
    kara_gguf_writer *w = NULL;
    kara_type *types = NULL;
    float *xbuf = NULL;
    uint8_t *ybuf = NULL;
    bool begun = false;
    const int n_layer = count_layers(g);
    const bool tied = kara_gguf_find_tensor(g, "output.weight") == NULL;

    if (kara_gguf_writer_create(&w) != KARA_OK || !(types = calloc(g->n_tensors + 1, sizeof *types))) {
        fprintf(stderr, "kara %s: out of memory\n", cmd);
        rc = KARA_EXIT_SOFTWARE;
        goto done;
    }
    /* metadata: everything as it was, then the new file type */
    for (uint64_t i = 0; i < g->n_kv && st == KARA_OK; i++) {
        char key[512];
        const kara_gguf_kv *kv = &g->kv[i];
        if (kv->key.len >= sizeof key) continue;
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        st = kara_gguf_writer_set_value(w, key, &kv->value);
    }
    if (st == KARA_OK) st = kara_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    if (st == KARA_OK) st = kara_gguf_writer_set_u32(w, "general.quantization_version", 2);
    int64_t max_row = 0;
    uint64_t in_bytes = 0, out_bytes = 0;
    for (uint64_t i = 0; i < g->n_tensors && st == KARA_OK; i++) {
        const kara_gguf_tensor *t = &g->tensors[i];
        char name[256];
        if (t->name.len >= sizeof name) {
            fprintf(stderr, "kara %s: tensor name of %" PRIu64 " bytes is too long\n", cmd, t->name.len);
            rc = KARA_EXIT_DATAERR;
            goto done;
        }
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const kara_type_info *ti = kara_type_get(t->type);
        if (!ti || !ti->supported) {
            fprintf(stderr, "kara %s: tensor '%s' has type %s, which cannot be dequantized\n", cmd, name,
                    ti ? ti->name : "?");
            rc = KARA_EXIT_DATAERR;
            goto done;
        }
        types[i] = kara_ftype_tensor_type(ftype, pure, name, (int)t->n_dims, t->ne[0], n_layer, tied);
        if (t->ne[0] > max_row) max_row = t->ne[0];
        st = kara_gguf_writer_add_tensor(w, name, types[i], (int)t->n_dims, t->ne, NULL);
        in_bytes += t->nbytes;
        out_bytes += kara_gguf_writer_tensor_nbytes(w, i);
    }
    if (st != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, kara_gguf_writer_error(w));
        rc = KARA_EXIT_DATAERR;
        goto done;
    }
    int64_t chunk = max_row > (1 << 20) ? max_row : (1 << 20);
    xbuf = malloc((size_t)chunk * sizeof(float));
    ybuf = malloc((size_t)chunk * sizeof(float));
    if (!xbuf || !ybuf) {
        fprintf(stderr, "kara %s: out of memory\n", cmd);
        rc = KARA_EXIT_SOFTWARE;
        goto done;
    }
    if (kara_gguf_writer_begin(w, pos[1]) != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, kara_gguf_writer_error(w));
        rc = KARA_EXIT_CANTCREAT;
        goto done;
    }
    begun = true;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kara_gguf_tensor *t = &g->tensors[i];
        if (!quiet) {
            char shape[64];
            int n = snprintf(shape, sizeof shape, "[");
            for (uint32_t d = 0; d < t->n_dims; d++)
                n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
            snprintf(shape + n, sizeof shape - (size_t)n, "]");
            fprintf(stderr, "[%4" PRIu64 "/%4" PRIu64 "] %-36.*s %-22s %5s -> %s\n", i + 1, g->n_tensors,
                    (int)t->name.len, t->name.ptr, shape, kara_type_get(t->type)->name, kara_type_get(types[i])->name);
        }
        if (!convert_tensor(w, t, types[i], xbuf, ybuf, chunk, err, sizeof err)) {
            fprintf(stderr, "kara %s: %s\n", cmd, err);
            rc = KARA_EXIT_IOERR;
            goto done;
        }
    }
    if (kara_gguf_writer_end(w) != KARA_OK) {
        fprintf(stderr, "kara %s: %s\n", cmd, kara_gguf_writer_error(w));
        rc = KARA_EXIT_IOERR;
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "kara %s: %s -> %s (%s%s): %.2f MiB -> %.2f MiB of tensor data in %.1f s\n", cmd, pos[0], pos[1],
            kara_ftype_name(ftype), pure ? ", pure" : "", in_bytes / 1048576.0, out_bytes / 1048576.0,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
done:
    kara_gguf_writer_free(w);
    if (rc != KARA_EXIT_OK && begun) remove(pos[1]);   /* no half-written model */
    free(types);
    free(xbuf);
    free(ybuf);
    kara_gguf_close(g);
    return rc;
}

const kara_command kara_cmd_quantize = {"quantize", "convert a GGUF model to another weight type or mix",
                                        quantize_main};
