/* batch_output.c - resume scan, lock and durable appends for `kara batch`
 * results (see batch_output.h). */
#include "batch_output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch_jsonl.h"
#include "exit_codes.h"
#include "safe_output.h"

/* Index one result line under its key (custom_id, or the input line of an
 * error line without one). The first line for a key is its answer; a later
 * one is a duplicate, counted for the report (a rewrite moves it out). */
static void on_result(void *user, const kr_batch_scanned *r) {
    kr_batch_output *o = user;
    char key[24];
    kr_strset *set = &o->answered;
    const char *k = r->custom_id;
    if (!k) {
        snprintf(key, sizeof key, "%d", r->input_line);
        set = &o->answered_lines;
        k = key;
    }
    if (o->n_keys == o->cap_keys) {
        int cap = o->cap_keys ? 2 * o->cap_keys : 256;
        kr_batch_answer *a = realloc(o->ans, (size_t)cap * sizeof *a);
        if (!a) return; /* not indexed: its request runs again */
        o->ans = a;
        o->cap_keys = cap;
    }
    int old;
    int added = kr_strset_add(set, k, o->n_keys, &old);
    if (added < 0) return;
    if (added == 0) {
        if (!o->n_dup++)
            snprintf(o->dup_example, sizeof o->dup_example, "%s%.60s%s at output lines %d and %d",
                     r->custom_id ? "\"" : "input line ", k, r->custom_id ? "\"" : "", o->ans[old].out_line,
                     r->out_line);
        return;
    }
    bool limit =
        r->failed && r->code && (!strcmp(r->code, KR_BATCH_ERR_BUDGET) || !strcmp(r->code, KR_BATCH_ERR_CONTEXT));
    o->ans[o->n_keys++] = (kr_batch_answer){r->hash, r->has_hash, r->failed, limit, r->out_line};
    if (r->failed)
        o->n_failed++;
    else
        o->n_ok++;
}

static void index_reset(kr_batch_output *o) {
    kr_strset_free(&o->answered);
    kr_strset_free(&o->answered_lines);
    memset(&o->answered, 0, sizeof o->answered);
    memset(&o->answered_lines, 0, sizeof o->answered_lines);
    o->n_keys = o->n_ok = o->n_failed = 0;
}

void kr_batch_output_report_dups(const kr_batch_output *o) {
    if (o->n_dup)
        fprintf(stderr,
                "kara batch: %s answers %d request%s more than once (first: %s): the first answer of each is "
                "kept, the later line%s moved to %s.superseded\n",
                o->path, o->n_dup, o->n_dup == 1 ? "" : "s", o->dup_example, o->n_dup == 1 ? "" : "s", o->path);
}

/* The whole file, read through a descriptor we hold (pread from offset 0:
 * our descriptors are O_APPEND, so where the offset stands never matters). */
char *kr_batch_read_fd(int fd, size_t *len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) return NULL;
    size_t n = 0;
    while (n < (size_t)st.st_size) {
        ssize_t k = pread(fd, buf + n, (size_t)st.st_size - n, (off_t)n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(buf);
            return NULL;
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void count_result(void *user, const kr_batch_scanned *r) {
    (void)r;
    ++*(int *)user;
}

char *kr_batch_read_results(int fd, size_t *len, bool *added) {
    *added = false;
    char *data = kr_batch_read_fd(fd, len);
    if (!data || *len == 0 || data[*len - 1] == '\n') return data;
    size_t start = *len;
    while (start > 0 && data[start - 1] != '\n') start--;
    kr_json_doc doc;
    char err[160];
    bool parsed = kr_json_parse(data + start, *len - start, 1, &doc, err, sizeof err);
    kr_json_doc_free(&doc);
    if (!parsed) return data; /* torn: the scan cuts it */
    char *grown = realloc(data, *len + 2);
    if (!grown) {
        free(data);
        return NULL;
    }
    data = grown;
    data[(*len)++] = '\n';
    data[*len] = '\0';
    /* a result gets its newline in the file too; other data is refused by
     * the scan as it stands, the file untouched */
    int results = 0;
    kr_batch_scan_results(data + start, *len - start, count_result, &results, err, sizeof err);
    if (results != 1) return data;
    ssize_t k;
    do k = write(fd, "\n", 1);
    while (k < 0 && errno == EINTR);
    if (k != 1 || (fsync(fd) != 0 && errno != EINVAL)) {
        if (k >= 0) errno = EIO;
        free(data);
        return NULL;
    }
    *added = true;
    return data;
}

int kr_batch_output_open(kr_batch_output *o, const char *path, bool resume) {
    memset(o, 0, sizeof *o);
    o->path = path;
    /* refused before the open: --no-resume must never empty an input or a device */
    char why[512];
    if (kr_out_check(path, NULL, why, sizeof why) != 0) {
        fprintf(stderr, "kara batch: the output: %s\n", why);
        return KR_EXIT_CANTCREAT;
    }
    o->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        fprintf(stderr, "kara batch: cannot create the output %s: %s\n", path, strerror(errno));
        return KR_EXIT_CANTCREAT;
    }
    if (kr_out_check_fd(o->fd, path, why, sizeof why) != 0) { /* swapped since the check */
        fprintf(stderr, "kara batch: the output: %s\n", why);
        close(o->fd);
        o->fd = -1;
        return KR_EXIT_CANTCREAT;
    }
    if (flock(o->fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "kara batch: the output %s is being written by another job (%s)\n", path,
                errno == EWOULDBLOCK ? "locked" : strerror(errno));
        close(o->fd);
        o->fd = -1;
        return KR_EXIT_CANTCREAT;
    }
    size_t len = 0;
    char *data = resume ? kr_batch_read_results(o->fd, &len, &o->newline_added) : kr_batch_read_fd(o->fd, &len);
    if (!data) {
        fprintf(stderr, "kara batch: cannot read the output %s: %s\n", path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    long keep = 0;
    if (resume) {
        char err[256];
        keep = kr_batch_scan_results(data, len, on_result, o, err, sizeof err);
        if (keep < 0) {
            fprintf(stderr, "kara batch: %s: %s; fix or move the file, or start over with --no-resume\n", path, err);
            free(data);
            return KR_EXIT_DATAERR;
        }
    } else if (len > 0) {
        fprintf(stderr, "kara batch: starting over: emptied %s (resume is off)\n", path);
    }
    free(data);
    if (o->newline_added)
        fprintf(stderr, "kara batch: the last line of %s lacked its newline (a complete line): added\n", path);
    kr_batch_output_report_dups(o);
    if ((size_t)keep < len) {
        if (resume) { /* a torn last line; else the file was emptied on purpose */
            o->truncated = (long)len - keep;
            fprintf(stderr, "kara batch: cut a torn last line (%ld bytes) from %s; its request runs again\n",
                    o->truncated, path);
        }
        if (ftruncate(o->fd, keep) != 0 || fsync(o->fd) != 0) {
            fprintf(stderr, "kara batch: cannot cut the output %s: %s\n", path, strerror(errno));
            return KR_EXIT_IOERR;
        }
    }
    return -1;
}

bool kr_batch_output_has(const kr_batch_output *o, const char *custom_id, int line) {
    return kr_batch_output_lookup(o, custom_id, line) != NULL;
}

const kr_batch_answer *kr_batch_output_lookup(const kr_batch_output *o, const char *custom_id, int line) {
    int idx;
    bool found;
    if (custom_id) {
        found = kr_strset_get(&o->answered, custom_id, &idx);
    } else {
        char key[24];
        snprintf(key, sizeof key, "%d", line);
        found = kr_strset_get(&o->answered_lines, key, &idx);
    }
    return found && idx < o->n_keys ? &o->ans[idx] : NULL;
}

int kr_batch_write_atomic(const char *path, const char *buf, size_t len) {
    /* through the CLI's one writer: only a regular file that is no input,
     * a temporary of our own beside it (beside a symlink's target) */
    kr_out_file tmp;
    int e = kr_out_begin(&tmp, path, NULL);
    if (!e) e = kr_out_write(&tmp, buf, len);
    if (!e) e = kr_out_commit(&tmp);
    if (e) fprintf(stderr, "kara batch: %s\n", tmp.why[0] ? tmp.why : strerror(e));
    kr_out_discard(&tmp);
    return e;
}

/* Add a line's key (FNV-1a of its text, '\n' left out) to set; false
 * when it was there. */
static bool line_new(kr_strset *set, const char *line, size_t len, bool *oom) {
    char key[24];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)kr_fnv1a(line, len));
    int added = kr_strset_add(set, key, 0, NULL);
    if (added < 0) *oom = true;
    return added != 0;
}

/* The complete lines of a side file, for merging: a last line that does
 * not parse (or has no '\n' and does not parse) is torn and left out; one
 * without its '\n' that parses is kept with one. Lines go to out, their
 * keys to set. */
static void side_lines(const char *data, size_t len, kr_jbuf *out, kr_strset *set, bool *oom) {
    size_t start = 0;
    while (start < len) {
        const char *nl = memchr(data + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - data) : len;
        bool last = !nl || !memchr(nl + 1, '\n', len - end - 1);
        bool keep = true;
        if (last) {
            kr_json_doc doc;
            char err[160];
            keep = end == start || kr_json_parse(data + start, end - start, 1, &doc, err, sizeof err);
            kr_json_doc_free(&doc);
        }
        if (keep && end > start) {
            line_new(set, data + start, end - start, oom);
            kr_jbuf_raw(out, data + start, end - start);
            kr_jbuf_raw(out, "\n", 1);
        }
        start = end + 1;
    }
}

/* Merge the lines of add into the side file at path (see
 * kr_batch_output_rewrite): old complete lines, then new ones it does not
 * hold, through a temporary file renamed over it. 0 or an errno value. */
static int merge_side_file(const char *path, const kr_jbuf *add) {
    if (!add->len) return 0;
    if (add->failed) return ENOMEM;
    kr_jbuf text = {0};
    kr_strset set = {0};
    bool oom = false;
    char why[512];
    if (kr_out_check(path, NULL, why, sizeof why) != 0) { /* a side file is as safe as the output */
        fprintf(stderr, "kara batch: %s\n", why);
        return EINVAL;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) return errno;
    if (fd >= 0) {
        size_t len = 0;
        char *data = kr_batch_read_fd(fd, &len);
        int e = data ? 0 : errno ? errno : ENOMEM;
        close(fd);
        if (e) return e;
        side_lines(data, len, &text, &set, &oom);
        free(data);
    }
    for (size_t start = 0; start < add->len;) {
        const char *nl = memchr(add->p + start, '\n', add->len - start);
        size_t end = nl ? (size_t)(nl - add->p) : add->len;
        if (end > start && line_new(&set, add->p + start, end - start, &oom)) {
            kr_jbuf_raw(&text, add->p + start, end - start);
            kr_jbuf_raw(&text, "\n", 1);
        }
        start = end + 1;
    }
    kr_strset_free(&set);
    int e = oom || text.failed ? ENOMEM : kr_batch_write_atomic(path, text.p ? text.p : "", text.len);
    kr_jbuf_free(&text);
    return e;
}

typedef struct rewrite_ctx {
    int (*classify)(void *user, const kr_batch_scanned *r);
    void *user;
    kr_jbuf keep, drop, hold;
    kr_strset seen, seen_lines; /* keys met so far: a later line for one is a duplicate */
    bool oom;
} rewrite_ctx;

static void on_rewrite(void *user, const kr_batch_scanned *r) {
    rewrite_ctx *c = user;
    char key[24];
    if (!r->custom_id) snprintf(key, sizeof key, "%d", r->input_line);
    int added = kr_strset_add(r->custom_id ? &c->seen : &c->seen_lines, r->custom_id ? r->custom_id : key, 0, NULL);
    if (added < 0) c->oom = true;
    int what = added == 0 ? KR_REWRITE_DROP : c->classify(c->user, r);
    kr_jbuf_raw(what == KR_REWRITE_DROP ? &c->drop : what == KR_REWRITE_HOLD ? &c->hold : &c->keep, r->text, r->len);
}

static int rewrite(kr_batch_output *o, rewrite_ctx *c, const char *hold_path, int *n_dropped, int *n_held) {
    size_t len = 0;
    char *data = kr_batch_read_fd(o->fd, &len);
    if (!data) return errno ? errno : ENOMEM;
    char err[256];
    long whole = kr_batch_scan_results(data, len, on_rewrite, c, err, sizeof err);
    free(data);
    if (whole < 0) return EINVAL; /* cannot happen: open scanned it */
    if (c->oom || c->keep.failed || c->drop.failed || c->hold.failed) return ENOMEM;
    size_t plen = strlen(o->path) + sizeof ".superseded";
    char *sup = malloc(plen);
    if (!sup) return ENOMEM;
    snprintf(sup, plen, "%s.superseded", o->path);
    /* the removed lines are safe elsewhere before the output loses them */
    int e = merge_side_file(sup, &c->drop);
    if (!e) e = merge_side_file(hold_path, &c->hold);
    /* a temporary file of ours beside the output (beside a symlink's
     * target: the link stays and names the new content), renamed over it */
    kr_out_file tmp;
    bool begun = false;
    if (!e) {
        e = kr_out_begin(&tmp, o->path, NULL);
        begun = true;
        if (e) fprintf(stderr, "kara batch: %s\n", tmp.why);
    }
    if (!e && flock(tmp.fd, LOCK_EX | LOCK_NB) != 0) e = errno;
    if (!e) e = kr_out_write(&tmp, c->keep.p ? c->keep.p : "", c->keep.len); /* kr_out_commit syncs */
    if (!e) e = kr_out_commit(&tmp);
    if (!e) {
        close(o->fd); /* the old file's lock goes with it; the new one is locked */
        o->fd = tmp.fd;
        tmp.fd = -1;
        *n_dropped = 0;
        *n_held = 0;
        for (size_t i = 0; i < c->drop.len; i++) *n_dropped += c->drop.p[i] == '\n';
        for (size_t i = 0; i < c->hold.len; i++) *n_held += c->hold.p[i] == '\n';
        index_reset(o);
        kr_batch_scan_results(c->keep.p ? c->keep.p : "", c->keep.len, on_result, o, err, sizeof err);
    }
    if (begun) kr_out_discard(&tmp);
    free(sup);
    return e;
}

int kr_batch_output_rewrite(kr_batch_output *o, int (*classify)(void *user, const kr_batch_scanned *r), void *user,
                            const char *hold_path, int *n_dropped, int *n_held) {
    rewrite_ctx c;
    memset(&c, 0, sizeof c);
    c.classify = classify;
    c.user = user;
    int e = rewrite(o, &c, hold_path, n_dropped, n_held);
    kr_jbuf_free(&c.keep);
    kr_jbuf_free(&c.drop);
    kr_jbuf_free(&c.hold);
    kr_strset_free(&c.seen);
    kr_strset_free(&c.seen_lines);
    return e;
}

int kr_batch_output_append(kr_batch_output *o, const char *line, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(o->fd, line + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        done += (size_t)k;
    }
    if (fdatasync(o->fd) != 0 && errno != EINVAL) return errno;
    return 0;
}

void kr_batch_output_close(kr_batch_output *o) {
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    index_reset(o);
    free(o->ans);
    o->ans = NULL;
    o->cap_keys = 0;
}
