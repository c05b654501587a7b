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

/* Index one result line: its key (custom_id, or the input line of an
 * error line without one) and the request hash of the last line for it. */
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
    int idx = o->n_keys, old;
    int added = kr_strset_add(set, k, idx, &old);
    if (added < 0) return;
    if (added == 0) {
        idx = old;
    } else {
        if (o->n_keys == o->cap_keys) {
            int cap = o->cap_keys ? 2 * o->cap_keys : 256;
            uint64_t *h = realloc(o->hash, (size_t)cap * sizeof *h);
            if (h) o->hash = h;
            bool *hh = realloc(o->has_hash, (size_t)cap * sizeof *hh);
            if (hh) o->has_hash = hh;
            if (!h || !hh) return; /* a missing hash reads as an old line: trusted */
            o->cap_keys = cap;
        }
        o->n_keys++;
    }
    if (idx < o->cap_keys) {
        o->hash[idx] = r->hash;
        o->has_hash[idx] = r->has_hash;
    }
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
    char *data = kr_batch_read_fd(o->fd, &len);
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
    if ((size_t)keep < len) {
        if (resume) o->truncated = (long)len - keep; /* a torn last line; else the file was emptied on purpose */
        if (ftruncate(o->fd, keep) != 0 || fsync(o->fd) != 0) {
            fprintf(stderr, "kara batch: cannot cut the output %s: %s\n", path, strerror(errno));
            return KR_EXIT_IOERR;
        }
    }
    return -1;
}

bool kr_batch_output_has(const kr_batch_output *o, const char *custom_id, int line) {
    uint64_t h;
    return kr_batch_output_lookup(o, custom_id, line, &h) != 0;
}

int kr_batch_output_lookup(const kr_batch_output *o, const char *custom_id, int line, uint64_t *hash) {
    int idx;
    bool found;
    if (custom_id) {
        found = kr_strset_get(&o->answered, custom_id, &idx);
    } else {
        char key[24];
        snprintf(key, sizeof key, "%d", line);
        found = kr_strset_get(&o->answered_lines, key, &idx);
    }
    if (!found) return 0;
    if (idx >= o->cap_keys || !o->has_hash[idx]) return 1;
    *hash = o->hash[idx];
    return 2;
}

/* Write all of buf to fd (opened O_APPEND) and make it durable. */
static int write_durable(int fd, const char *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, buf + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        done += (size_t)k;
    }
    if (fsync(fd) != 0 && errno != EINVAL) return errno;
    return 0;
}

/* Append buf to the file at path (created if need be), durably. */
static int append_file(const char *path, const kr_jbuf *buf) {
    if (!buf->len) return 0;
    if (buf->failed) return ENOMEM;
    char why[512];
    if (kr_out_check(path, NULL, why, sizeof why) != 0) { /* a side file is as safe as the output */
        fprintf(stderr, "kara batch: %s\n", why);
        return EINVAL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int e = write_durable(fd, buf->p, buf->len);
    close(fd);
    return e;
}

typedef struct rewrite_ctx {
    int (*classify)(void *user, const kr_batch_scanned *r);
    void *user;
    kr_jbuf keep, drop, hold;
} rewrite_ctx;

static void on_rewrite(void *user, const kr_batch_scanned *r) {
    rewrite_ctx *c = user;
    int what = c->classify(c->user, r);
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
    if (c->keep.failed || c->drop.failed || c->hold.failed) return ENOMEM;
    size_t plen = strlen(o->path) + sizeof ".superseded";
    char *sup = malloc(plen);
    if (!sup) return ENOMEM;
    snprintf(sup, plen, "%s.superseded", o->path);
    /* the removed lines are safe elsewhere before the output loses them */
    int e = append_file(sup, &c->drop);
    if (!e) e = append_file(hold_path, &c->hold);
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
    if (!e) e = write_durable(tmp.fd, c->keep.p ? c->keep.p : "", c->keep.len);
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
    free(o->hash);
    free(o->has_hash);
    o->hash = NULL;
    o->has_hash = NULL;
    o->cap_keys = 0;
}
