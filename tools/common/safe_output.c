/* safe_output.c - see safe_output.h. */
#include "safe_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exit_codes.h"

#define MAX_INPUTS 32

/* The inputs of this run. A process-wide list: every writer of every
 * command must check against all of them, and threading a list through each
 * writer's signature would miss the writers nobody remembered. */
static struct {
    dev_t dev;
    ino_t ino;
    char what[48];
    char path[256];
} g_inputs[MAX_INPUTS];
static int g_n_inputs;
static int g_stdout_err; /* the errno of the first failed flush of stdout */

static int fail(char *why, size_t n, int e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && n) vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return e ? e : EIO;
}

void kr_out_add_input(const char *path, const char *what) {
    struct stat st;
    if (!path || !path[0] || stat(path, &st) != 0 || g_n_inputs == MAX_INPUTS) return;
    for (int i = 0; i < g_n_inputs; i++)
        if (g_inputs[i].dev == st.st_dev && g_inputs[i].ino == st.st_ino) return;
    g_inputs[g_n_inputs].dev = st.st_dev;
    g_inputs[g_n_inputs].ino = st.st_ino;
    snprintf(g_inputs[g_n_inputs].what, sizeof g_inputs[0].what, "%s", what);
    snprintf(g_inputs[g_n_inputs].path, sizeof g_inputs[0].path, "%s", path);
    g_n_inputs++;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory"
        : S_ISFIFO(m) ? "a FIFO"
        : S_ISCHR(m)  ? "a character device"
        : S_ISBLK(m)  ? "a block device"
        : S_ISSOCK(m) ? "a socket"
                      : "not a regular file";
}

/* The checks on what is there (links already followed into st). */
static int check_stat(const struct stat *st, const char *path, char *why, size_t n) {
    if (!S_ISREG(st->st_mode))
        return fail(why, n, EINVAL, "'%s' is %s, not a regular file: not written", path, kind_of(st->st_mode));
    for (int i = 0; i < g_n_inputs; i++)
        if (g_inputs[i].dev == st->st_dev && g_inputs[i].ino == st->st_ino)
            return fail(why, n, EINVAL, "'%s' is the same file as %s '%s', an input of this run: not written", path,
                        g_inputs[i].what, g_inputs[i].path);
    return 0;
}

/* Does the regular file at path start with magic? */
static int check_magic(const char *path, const char *magic, char *why, size_t n) {
    size_t len = strlen(magic);
    char head[64];
    if (len > sizeof head) len = sizeof head;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail(why, n, errno, "cannot read '%s': %s", path, strerror(errno));
    ssize_t got = read(fd, head, len);
    close(fd);
    if (got != (ssize_t)len || memcmp(head, magic, len) != 0)
        return fail(why, n, EINVAL,
                    "'%s' exists and does not start with \"%.*s\" (not a file this command writes): "
                    "not replaced",
                    path, (int)len, magic);
    return 0;
}

int kr_out_check(const char *path, const char *magic, char *why, size_t why_size) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0; /* created; a missing folder fails at the creation */
        return fail(why, why_size, errno, "cannot examine '%s': %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode) && stat(path, &st) != 0)
        return fail(why, why_size, errno, "'%s' is a symlink whose target cannot be reached (%s): not written", path,
                    strerror(errno));
    int e = check_stat(&st, path, why, why_size);
    if (!e && magic) e = check_magic(path, magic, why, why_size);
    return e;
}

int kr_out_check_fd(int fd, const char *path, char *why, size_t why_size) {
    struct stat st;
    if (fstat(fd, &st) != 0) return fail(why, why_size, errno, "cannot examine '%s': %s", path, strerror(errno));
    return check_stat(&st, path, why, why_size);
}

int kr_out_begin(kr_out_file *o, const char *path, const char *magic) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    int e = kr_out_check(path, magic, o->why, sizeof o->why);
    if (e) return e;
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (exists && S_ISLNK(st.st_mode)) {
        o->target = realpath(path, NULL); /* write beside what the link names: the link stays */
        if (!o->target || stat(o->target, &st) != 0) {
            e = errno ? errno : ENOENT;
            kr_out_discard(o);
            return fail(o->why, sizeof o->why, e, "cannot resolve the symlink '%s': %s", path, strerror(e));
        }
    } else {
        o->target = strdup(path);
    }
    size_t len = o->target ? strlen(o->target) + 48 : 0;
    o->tmp = len ? malloc(len) : NULL;
    if (!o->tmp) {
        kr_out_discard(o);
        return fail(o->why, sizeof o->why, ENOMEM, "out of memory");
    }
    /* a name of ours alone: never an existing file, so nothing stale is truncated */
    e = EEXIST;
    for (int k = 0; k < 100 && e == EEXIST; k++) {
        snprintf(o->tmp, len, "%s.tmp.%ld.%d", o->target, (long)getpid(), k);
        o->fd = open(o->tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = o->fd < 0 ? errno : 0;
    }
    if (e) {
        free(o->tmp);
        o->tmp = NULL; /* not ours: never removed */
        fail(o->why, sizeof o->why, e, "cannot create a temporary file beside '%s': %s", o->target, strerror(e));
        kr_out_discard(o);
        return e;
    }
    if (exists) (void)fchmod(o->fd, st.st_mode & 07777); /* the replacement keeps the file's permissions */
    return 0;
}

FILE *kr_out_stream(kr_out_file *o) {
    if (!o->f && o->fd >= 0) o->f = fdopen(o->fd, "w");
    if (!o->f) fail(o->why, sizeof o->why, errno, "cannot write '%s': %s", o->target, strerror(errno));
    return o->f;
}

int kr_out_write(kr_out_file *o, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t k = write(o->fd, p, len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return fail(o->why, sizeof o->why, errno, "cannot write '%s': %s", o->target, strerror(errno));
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* fsync the folder holding path, so that a rename in it is durable. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int kr_out_commit(kr_out_file *o) {
    int e = 0;
    if (o->f && (fflush(o->f) != 0 || ferror(o->f))) e = errno ? errno : EIO;
    if (!e && fsync(o->fd) != 0 && errno != EINVAL) e = errno;
    if (o->f) {
        if (fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
        o->f = NULL;
        o->fd = -1;
    }
    if (!e && rename(o->tmp, o->target) != 0) e = errno;
    if (e) {
        fail(o->why, sizeof o->why, e, "cannot write '%s': %s", o->target, strerror(e));
        kr_out_discard(o);
        return e;
    }
    sync_dir(o->target);
    free(o->tmp);
    o->tmp = NULL; /* it is the target now */
    return 0;
}

void kr_out_discard(kr_out_file *o) {
    if (o->f)
        fclose(o->f);
    else if (o->fd >= 0)
        close(o->fd);
    o->f = NULL;
    o->fd = -1;
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    o->tmp = o->target = NULL;
}

FILE *kr_out_fopen(kr_out_file *o, const char *cmd, const char *path) {
    if (kr_out_begin(o, path, NULL) == 0 && kr_out_stream(o)) return o->f;
    fprintf(stderr, "kara %s: %s\n", cmd, o->why);
    kr_out_discard(o);
    return NULL;
}

int kr_out_fclose(kr_out_file *o, const char *cmd) {
    int rc = kr_out_commit(o) ? KR_EXIT_IOERR : KR_EXIT_OK;
    if (rc) fprintf(stderr, "kara %s: %s\n", cmd, o->why);
    kr_out_discard(o);
    return rc;
}

int kr_out_write_file(const char *cmd, const char *path, void (*fn)(FILE *f, void *user), void *user) {
    kr_out_file o;
    FILE *f = kr_out_fopen(&o, cmd, path);
    if (!f) return KR_EXIT_CANTCREAT;
    fn(f, user);
    return kr_out_fclose(&o, cmd);
}

bool kr_stdout_flush(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !g_stdout_err) g_stdout_err = errno ? errno : EIO;
    return !ferror(stdout) && !g_stdout_err;
}

int kr_stdout_finish(const char *cmd, int rc) {
    if (kr_stdout_flush()) return rc;
    if (!g_stdout_err) {
        /* the write that failed was inside a printf whose buffer filled, and
         * its errno is gone: one more byte, to a stream that has already
         * lost output, asks the same file again (ENOSPC, EIO ...) */
        clearerr(stdout);
        fputc('\n', stdout);
        (void)kr_stdout_flush();
    }
    fprintf(stderr, "kara %s: cannot write stdout: %s\n", cmd,
            g_stdout_err ? strerror(g_stdout_err) : "a write failed, then one succeeded");
    return rc == KR_EXIT_OK || rc == KR_EXIT_PARTIAL ? KR_EXIT_IOERR : rc;
}
