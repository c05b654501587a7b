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

/* Append n bytes to in->data (room for a NUL kept). */
static bool put(kr_batch_input *in, size_t *cap, const char *p, size_t n) {
    if (in->size + n + 1 > *cap) {
        size_t c = *cap;
        while (in->size + n + 1 > c) c *= 2;
        char *d = realloc(in->data, c);
        if (!d) return false;
        in->data = d;
        *cap = c;
    }
    memcpy(in->data + in->size, p, n);
    in->size += n;
    return true;
}

/* Read f whole, except that of a line longer than KR_BATCH_LINE_MAX only
 * the first KR_BATCH_LINE_MAX + 1 bytes are kept (enough to refuse it): a
 * huge line costs its reading, not its memory. The true lengths of such
 * lines go to *longs (line number, bytes), in line order. */
static bool read_input(FILE *f, kr_batch_input *in, kr_batch_long **longs, int *n_longs) {
    size_t cap = 1 << 16, cur = 0; /* cur: bytes of the current line so far */
    int line = 1, longs_cap = 0;
    in->data = malloc(cap);
    static char chunk[1 << 16];
    size_t k;
    bool ok = in->data != NULL;
    while (ok && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        for (size_t i = 0; ok && i < k;) {
            const char *nl = memchr(chunk + i, '\n', k - i);
            size_t seg = nl ? (size_t)(nl - (chunk + i)) : k - i;
            size_t room = cur > KR_BATCH_LINE_MAX ? 0 : KR_BATCH_LINE_MAX + 1 - cur;
            ok = put(in, &cap, chunk + i, seg < room ? seg : room);
            cur += seg;
            i += seg;
            if (!nl || !ok) continue;
            ok = put(in, &cap, "\n", 1);
            i++;
            if (ok && cur > KR_BATCH_LINE_MAX) {
                if (*n_longs == longs_cap) {
                    longs_cap = longs_cap ? 2 * longs_cap : 8;
                    kr_batch_long *l = realloc(*longs, (size_t)longs_cap * sizeof *l);
                    if (!l) return false;
                    *longs = l;
                }
                (*longs)[(*n_longs)++] = (kr_batch_long){line, cur};
            }
            line++;
            cur = 0;
        }
    if (ok && cur > KR_BATCH_LINE_MAX) { /* a last line without its newline */
        kr_batch_long *l = realloc(*longs, ((size_t)*n_longs + 1) * sizeof *l);
        if (!l) return false;
        *longs = l;
        (*longs)[(*n_longs)++] = (kr_batch_long){line, cur};
    }
    return ok;
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
    kr_batch_long *longs = NULL;
    int n_longs = 0;
    bool bad = !read_input(f, in, &longs, &n_longs) || ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(longs);
        fprintf(stderr, "kara batch: cannot read the input %s\n", path);
        return KR_EXIT_IOERR;
    }
    in->data[in->size] = '\0';
    int n = 0;
    for (size_t i = 0; i < in->size; i++) n += in->data[i] == '\n';
    in->lines = calloc((size_t)n + 1, sizeof *in->lines);
    if (!in->lines) {
        free(longs);
        return KR_EXIT_SOFTWARE;
    }
    size_t start = 0;
    int next_long = 0;
    while (start < in->size) {
        char *nl = memchr(in->data + start, '\n', in->size - start);
        size_t end = nl ? (size_t)(nl - in->data) : in->size;
        size_t len = end - start, full = 0;
        if (next_long < n_longs && longs[next_long].no == in->n_lines + 1)
            full = longs[next_long++].len; /* kept: KR_BATCH_LINE_MAX + 1 bytes, '\r' or not */
        else if (len > 0 && in->data[start + len - 1] == '\r')
            len--;
        if (start == 0 && len >= 3 && !memcmp(in->data, "\xEF\xBB\xBF", 3)) { /* a UTF-8 byte order mark */
            fprintf(stderr, "kara batch: %s: skipping the UTF-8 byte order mark at its start\n", path);
            start += 3;
            len -= 3;
        }
        in->lines[in->n_lines] = (kr_batch_line){start, len, in->n_lines + 1, NULL, full};
        in->n_lines++;
        start = end + 1;
    }
    if (n_longs) /* each becomes an error line; the job goes on */
        fprintf(stderr,
                "kara batch: %s: %d line%s longer than %u bytes (16 MiB), the limit of a request line (line %d%s)\n",
                path, n_longs, n_longs > 1 ? "s" : "", KR_BATCH_LINE_MAX, longs[0].no, n_longs > 1 ? ", ..." : "");
    free(longs);
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
                char shown[160] = "";
                if (!kr_batch_id_plain(id)) { /* name what cannot be seen: "caf\u00e9", a control character */
                    char q[144];
                    kr_batch_show_id(id, strlen(id), q, sizeof q);
                    snprintf(shown, sizeof shown, ", non-ASCII: %s", q);
                }
                if (dups < 20)
                    fprintf(stderr, "kara batch: %s:%d: duplicate custom_id \"%s\" (first on line %d%s)\n", path, l->no,
                            id, first, shown);
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
    if (l->too_long) return false; /* an error line, not a blank one */
    for (size_t i = 0; i < l->len; i++) {
        char c = in->data[l->off + i];
        if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
}

/* A line cut at KR_BATCH_LINE_MAX + 1 bytes: its length stands for the
 * rest (the line is refused whatever that holds, with the same message). */
static uint64_t mix_cut(const kr_batch_line *l, uint64_t h) {
    return l->too_long ? h ^ ((uint64_t)l->too_long * 0x9e3779b97f4a7c15ull) : h;
}

uint64_t kr_batch_line_hash(const kr_batch_input *in, const kr_batch_line *l) {
    return mix_cut(l,
                   l->too_long ? kr_batch_request_hash_raw(in->data + l->off, l->len)
                               : kr_batch_request_hash(in->data + l->off, l->len));
}

uint64_t kr_batch_line_hash_raw(const kr_batch_input *in, const kr_batch_line *l) {
    return mix_cut(l, kr_batch_request_hash_raw(in->data + l->off, l->len));
}
