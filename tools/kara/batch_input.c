/* batch_input.c - reading and indexing the requests of `kara batch`
 * (batch_input.h). */
#include "batch_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_map.h"

#include "batch_jsonl.h"
#include "exit_codes.h"
#include "strset.h"

void kr_batch_input_free(kr_batch_input *in) {
    for (int i = 0; i < in->n_lines; i++) free(in->lines[i].custom_id);
    free(in->lines);
    free(in->data);
}

/* Read the file, split it into lines, record each custom_id and refuse
 * duplicates (over the whole file, so every shard agrees). */
int kr_batch_input_load(kr_batch_input *in, const char *path) {
    memset(in, 0, sizeof *in);
    int err = 0;
    FILE *f = kr_file_open_regular(path, &err);
    if (!f) {
        fprintf(stderr, "kara batch: cannot open the input %s: %s\n", path, kr_file_error_str(err));
        return KR_EXIT_NOINPUT;
    }
    size_t cap = 1 << 16;
    in->data = malloc(cap);
    for (;;) {
        if (!in->data) break;
        if (in->size + 1 >= cap) {
            char *d = realloc(in->data, cap * 2);
            if (!d) {
                free(in->data);
                in->data = NULL;
                break;
            }
            in->data = d;
            cap *= 2;
        }
        size_t k = fread(in->data + in->size, 1, cap - 1 - in->size, f);
        in->size += k;
        if (k == 0) break;
    }
    bool bad = ferror(f) != 0 || !in->data;
    fclose(f);
    if (bad) {
        fprintf(stderr, "kara batch: cannot read the input %s\n", path);
        return KR_EXIT_IOERR;
    }
    in->data[in->size] = '\0';
    int n = 0;
    for (size_t i = 0; i < in->size; i++) n += in->data[i] == '\n';
    in->lines = calloc((size_t)n + 1, sizeof *in->lines);
    if (!in->lines) return KR_EXIT_SOFTWARE;
    size_t start = 0;
    while (start < in->size) {
        char *nl = memchr(in->data + start, '\n', in->size - start);
        size_t end = nl ? (size_t)(nl - in->data) : in->size;
        size_t len = end - start;
        if (len > 0 && in->data[start + len - 1] == '\r') len--;
        in->lines[in->n_lines] = (kr_batch_line){start, len, in->n_lines + 1, NULL};
        in->n_lines++;
        start = end + 1;
    }
    kr_strset ids = {0};
    int dups = 0;
    for (int i = 0; i < in->n_lines; i++) {
        kr_batch_line *l = &in->lines[i];
        kr_json_doc doc;
        const char *id;
        if (kr_batch_request_id(in->data + l->off, l->len, l->no, &doc, &id) == 1) {
            l->custom_id = strdup(id);
            int first;
            int added = kr_strset_add(&ids, id, l->no, &first);
            if (added == 0) {
                if (dups < 20)
                    fprintf(stderr, "kara batch: %s:%d: duplicate custom_id \"%s\" (first on line %d)\n", path, l->no,
                            id, first);
                dups++;
            }
        }
        kr_json_doc_free(&doc);
    }
    kr_strset_free(&ids);
    if (dups) {
        fprintf(stderr, "kara batch: %d duplicate custom_id%s in %s; nothing was run\n", dups, dups > 1 ? "s" : "",
                path);
        return KR_EXIT_DATAERR;
    }
    return -1;
}

bool kr_batch_line_blank(const kr_batch_input *in, const kr_batch_line *l) {
    for (size_t i = 0; i < l->len; i++) {
        char c = in->data[l->off + i];
        if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
}
