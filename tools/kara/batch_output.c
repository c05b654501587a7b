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

static void on_result(void *user, const char *custom_id, int input_line, bool failed) {
    kr_batch_output *o = user;
    if (custom_id) {
        kr_strset_add(&o->answered, custom_id, input_line, NULL);
    } else {
        char key[24];
        snprintf(key, sizeof key, "%d", input_line);
        kr_strset_add(&o->answered_lines, key, input_line, NULL);
    }
    if (failed)
        o->n_failed++;
    else
        o->n_ok++;
}

/* The whole file, read through the descriptor we hold the lock on. */
static char *read_all(int fd, size_t *len) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    if (lseek(fd, 0, SEEK_SET) < 0) {
        free(buf);
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
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
    o->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        fprintf(stderr, "kara batch: cannot create the output %s: %s\n", path, strerror(errno));
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
    char *data = read_all(o->fd, &len);
    if (!data) {
        fprintf(stderr, "kara batch: cannot read the output %s: %s\n", path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    long keep = 0;
    if (resume) {
        char err[256];
        keep = kr_batch_scan_output(data, len, on_result, o, err, sizeof err);
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
    if (custom_id) return kr_strset_get(&o->answered, custom_id, NULL);
    char key[24];
    snprintf(key, sizeof key, "%d", line);
    return kr_strset_get(&o->answered_lines, key, NULL);
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
    kr_strset_free(&o->answered);
    kr_strset_free(&o->answered_lines);
}
