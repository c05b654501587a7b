/* file_map.c - POSIX mmap behind kr_file_map: a file mapping, or a copy
 * of the file in anonymous memory. An empty file maps to a valid
 * zero-length view (mmap of length 0 is an error on Linux). */
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

const char *kr_file_error_str(int e) {
    if (e == KR_FILE_NOT_REGULAR) return "not a regular file (a directory, FIFO, device or socket)";
    return strerror(e);
}

/* Open path as a regular file; *size its length. Returns an fd or -errno
 * (-KR_FILE_NOT_REGULAR); an empty file is returned as fd with *size 0.
 * O_NONBLOCK makes opening a FIFO return at once; it is cleared again for
 * the regular file that remains. */
static int open_regular(const char *path, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -KR_FILE_NOT_REGULAR;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *size = (size_t)st.st_size;
    return fd;
}

FILE *kr_file_open_regular(const char *path, int *err) {
    size_t size;
    int fd = open_regular(path, &size);
    if (fd < 0) {
        *err = -fd;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *err = errno;
        close(fd);
    }
    return f;
}

static void set_empty(kr_file_map *m) {
    static const uint8_t empty[1];
    m->data = empty;
    m->size = 0;
    m->map_len = 0;
    m->anon = false;
}

/* The start both loaders share: clear *m, open path. Returns an errno
 * value, or 0 with *fd open and *size > 0, or 0 with *fd = -1 when the
 * file is empty and *m is already its (valid, empty) view. */
static int begin_view(const char *path, kr_file_map *m, int *fd, size_t *size) {
    memset(m, 0, sizeof *m);
    *size = 0;
    *fd = open_regular(path, size);
    if (*fd < 0) {
        int e = -*fd;
        *fd = -1;
        return e;
    }
    if (*size == 0) {
        close(*fd);
        *fd = -1;
        set_empty(m);
    }
    return 0;
}

int kr_file_map_open(const char *path, kr_file_map *m) {
    int fd;
    size_t size;
    int e0 = begin_view(path, m, &fd, &size);
    if (e0 || fd < 0) return e0;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return e;
    m->data = p;
    m->size = size;
    m->map_len = size;
    return 0;
}

int kr_file_read_anon(const char *path, kr_file_map *m) {
    int fd;
    size_t size;
    int e0 = begin_view(path, m, &fd, &size);
    if (e0 || fd < 0) return e0;
    const size_t huge = (size_t)2 << 20;
    size_t len = (size + huge - 1) & ~(huge - 1);
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return e;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: without THP this is a plain copy */
#endif
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO; /* r == 0: the file shrank while being read */
            close(fd);
            munmap(p, len);
            return e;
        }
        got += (size_t)r;
    }
    close(fd);
    if (mprotect(p, len, PROT_READ) != 0) {
        int e = errno;
        munmap(p, len);
        return e;
    }
    m->data = p;
    m->size = size;
    m->map_len = len;
    m->anon = true;
    return 0;
}

int kr_file_map_set_writable(kr_file_map *m, bool writable) {
    if (!m->anon || !m->data) return EINVAL;
    return mprotect((void *)m->data, m->map_len, writable ? PROT_READ | PROT_WRITE : PROT_READ) != 0 ? errno : 0;
}

void kr_file_map_close(kr_file_map *m) {
    if (m->data && m->map_len) munmap((void *)m->data, m->map_len);
    m->data = NULL;
    m->size = 0;
    m->map_len = 0;
}
