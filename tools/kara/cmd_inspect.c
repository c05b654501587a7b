/* cmd_inspect.c - `kara inspect MODEL.gguf`: the metadata and the tensor
 * table of a GGUF file, like gguf-dump. Reads the file through the public
 * GGUF API (kara.h), the same validating reader the runtime uses, so it also
 * reports why a file is bad. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exit_codes.h"
#include "kara.h"

static void print_str(kara_gguf_str s, size_t max) {
    putchar('"');
    for (uint64_t i = 0; i < s.len && i < max; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
    if (s.len > max) fputs("...", stdout);
    putchar('"');
}

static void print_value(const kara_gguf_value *v, bool full) {
    switch (v->type) {
    case KARA_GGUF_UINT8:
    case KARA_GGUF_UINT16:
    case KARA_GGUF_UINT32:
    case KARA_GGUF_UINT64: printf("%" PRIu64, v->v.u64); break;
    case KARA_GGUF_INT8:
    case KARA_GGUF_INT16:
    case KARA_GGUF_INT32:
    case KARA_GGUF_INT64: printf("%" PRId64, v->v.i64); break;
    case KARA_GGUF_FLOAT32:
    case KARA_GGUF_FLOAT64: printf("%g", v->v.f64); break;
    case KARA_GGUF_BOOL: fputs(v->v.u64 ? "true" : "false", stdout); break;
    case KARA_GGUF_STRING: print_str(v->v.str, full ? (size_t)-1 : 120); break;
    case KARA_GGUF_ARRAY: {
        const kara_gguf_array *a = &v->v.arr;
        uint64_t show = full ? a->n : (a->n < 8 ? a->n : 8);
        printf("[%s x %" PRIu64 "] [", kara_gguf_vtype_name(a->type), a->n);
        for (uint64_t i = 0; i < show; i++) {
            if (i) fputs(", ", stdout);
            if (a->type == KARA_GGUF_STRING)
                print_str(a->strs[i], 40);
            else if (a->type == KARA_GGUF_ARRAY)
                print_value(&a->items[i], full);
            else if (a->type == KARA_GGUF_FLOAT32 || a->type == KARA_GGUF_FLOAT64)
                printf("%g", kara_gguf_arr_float(a, i));
            else
                printf("%" PRId64, kara_gguf_arr_int(a, i));
        }
        if (show < a->n) fputs(", ...", stdout);
        putchar(']');
        break;
    }
    default: fputs("?", stdout);
    }
}

static int inspect_main(int argc, char **argv) {
    const char *path = NULL;
    bool full = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: kara inspect [--full] MODEL.gguf\n\n"
                   "Prints the GGUF header, every metadata key with its type and value (long arrays and strings\n"
                   "shortened unless --full), and the tensor table: name, type, shape, bytes, data offset.\n");
            return KR_EXIT_OK;
        } else if (!strcmp(argv[i], "--full")) {
            full = true;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "kara inspect: unknown option '%s'\n", argv[i]);
            return KR_EXIT_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "kara inspect: give one file\n");
            return KR_EXIT_USAGE;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: kara inspect [--full] MODEL.gguf\n");
        return KR_EXIT_USAGE;
    }
    kara_gguf *g;
    kara_status st = kara_gguf_open(path, &g);
    if (st) {
        fprintf(stderr, "kara inspect: %s\n", kara_last_error());
        return st == KARA_ERR_IO ? KR_EXIT_NOINPUT : KR_EXIT_DATAERR;
    }
    printf("file: %s\nGGUF version %u, %" PRIu64 " bytes, alignment %" PRIu64 ", data at offset %" PRIu64 "\n\n", path,
           kara_gguf_version(g), kara_gguf_size(g), kara_gguf_alignment(g), kara_gguf_data_offset(g));
    const uint64_t n_kv = kara_gguf_n_kv(g), n_tensors = kara_gguf_n_tensors(g);
    printf("metadata: %" PRIu64 " keys\n", n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        const kara_gguf_kv *kv = kara_gguf_kv_at(g, i);
        printf("  %-44.*s %-8s ", (int)kv->key.len, kv->key.ptr, kara_gguf_vtype_name(kv->value.type));
        print_value(&kv->value, full);
        putchar('\n');
    }
    printf("\ntensors: %" PRIu64 "\n", n_tensors);
    printf("  %-5s %-36s %-6s %-28s %12s %12s\n", "#", "name", "type", "shape", "bytes", "offset");
    uint64_t total = 0, elems = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const kara_gguf_tensor *t = kara_gguf_tensor_at(g, i);
        char shape[64];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-5" PRIu64 " %-36.*s %-6s %-28s %12" PRIu64 " %12" PRIu64 "\n", i, (int)t->name.len, t->name.ptr,
               kara_gguf_type_name(t->type), shape, t->nbytes, t->offset);
        total += t->nbytes;
        elems += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    printf("\ntotal: %" PRIu64 " elements, %" PRIu64 " bytes (%.2f MiB), %.2f bits per weight\n", elems, total,
           total / 1048576.0, elems ? 8.0 * (double)total / (double)elems : 0.0);
    kara_gguf_close(g);
    return KR_EXIT_OK;
}

const kr_command kr_cmd_inspect = {"inspect", "show a GGUF file's metadata and tensors", inspect_main};
