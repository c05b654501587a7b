/* file_map.c - POSIX mmap behind kr_file_map: a file mapping, a copy of
 * the file (or of a caller's buffer) in anonymous memory, or a view of a
 * caller's buffer. An empty file maps to a valid zero-length view (mmap of
 * length 0 is an error on Linux). */
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

/* The start every fd loader shares: clear *m, check that fd is a regular
 * file and take its size. Returns an errno value or KR_FILE_NOT_REGULAR,
 * or 0 with *size > 0, or 0 with *size = 0 and *m already its (valid,
 * empty) view. */
static int fd_view(int fd, kr_file_map *m, size_t *size) {
    memset(m, 0, sizeof *m);
    *size = 0;
    struct stat st;
    if (fd < 0) return EBADF;
    if (fstat(fd, &st) != 0) return errno;
    if (!S_ISREG(st.st_mode)) return KR_FILE_NOT_REGULAR;
    *size = (size_t)st.st_size;
    if (*size == 0) set_empty(m);
    return 0;
}

int kr_file_map_fd(int fd, kr_file_map *m) {
    size_t size;
    int e0 = fd_view(fd, m, &size);
    if (e0 || size == 0) return e0;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return errno;
    m->data = p;
    m->size = size;
    m->map_len = size;
    return 0;
}

/* Anonymous memory for a copy of size bytes, writable until anon_seal. NULL
 * with *err. A copy of a huge page or more is rounded up to whole huge pages
 * and advised for them (fewer TLB misses on the weights); a smaller one
 * (a tokenizer file, a tiny model) keeps to whole pages, since a huge page
 * would be faulted in and zeroed whole for a few kilobytes. */
static uint8_t *anon_alloc(size_t size, size_t *len, int *err) {
    const size_t huge = (size_t)2 << 20;
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    bool use_huge = size >= huge;
    size_t unit = use_huge ? huge : page;
    *len = (size + unit - 1) & ~(unit - 1);
    uint8_t *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (use_huge) (void)madvise(p, *len, MADV_HUGEPAGE); /* advice only: without THP this is a plain copy */
#endif
    return p;
}

/* Make a filled copy read-only and hand it to *m. */
static int anon_seal(uint8_t *p, size_t size, size_t len, kr_file_map *m) {
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

int kr_file_read_anon_fd(int fd, kr_file_map *m) {
    size_t size, len;
    int e0 = fd_view(fd, m, &size);
    if (e0 || size == 0) return e0;
    int e = 0;
    uint8_t *p = anon_alloc(size, &len, &e);
    if (!p) return e;
    /* pread: the caller's file offset stays where it was */
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            e = r < 0 ? errno : EIO; /* r == 0: the file shrank while being read */
            munmap(p, len);
            return e;
        }
        got += (size_t)r;
    }
    return anon_seal(p, size, len, m);
}

int kr_file_copy_anon(const void *data, size_t size, kr_file_map *m) {
    memset(m, 0, sizeof *m);
    if (size == 0) {
        set_empty(m);
        return 0;
    }
    if (!data) return EINVAL;
    size_t len;
    int e = 0;
    uint8_t *p = anon_alloc(size, &len, &e);
    if (!p) return e;
    memcpy(p, data, size);
    return anon_seal(p, size, len, m);
}

void kr_file_borrow(const void *data, size_t size, kr_file_map *m) {
    memset(m, 0, sizeof *m);
    if (size == 0 || !data) {
        set_empty(m);
        return;
    }
    m->data = data;
    m->size = size;
}

/* Open path as a regular file (open_regular), then run one of the fd
 * loaders on it and close it again. */
static int with_path(const char *path, kr_file_map *m, int (*load)(int fd, kr_file_map *m)) {
    memset(m, 0, sizeof *m);
    size_t size;
    int fd = open_regular(path, &size);
    if (fd < 0) return -fd;
    int e = load(fd, m);
    close(fd);
    return e;
}

int kr_file_map_open(const char *path, kr_file_map *m) { return with_path(path, m, kr_file_map_fd); }

int kr_file_read_anon(const char *path, kr_file_map *m) { return with_path(path, m, kr_file_read_anon_fd); }

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
