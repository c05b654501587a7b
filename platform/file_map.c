/* file_map.c - POSIX mmap behind kara_file_map. An empty file maps to a
 * valid zero-length view (mmap of length 0 is an error on Linux). */
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int kara_file_map_open(const char *path, kara_file_map *m) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return EISDIR;
    }
    if (st.st_size == 0) {
        close(fd);
        static const uint8_t empty[1];
        m->data = empty;
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return e;
    m->data = p;
    m->size = (size_t)st.st_size;
    return 0;
}

void kara_file_map_close(kara_file_map *m) {
    if (m->data && m->size) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
