/* file_map.h - read-only whole-file memory mapping. */
#ifndef KR_FILE_MAP_H
#define KR_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct kr_file_map {
    const uint8_t *data;
    size_t size;
    size_t map_len; /* bytes to unmap (0: nothing to unmap) */
    bool anon;      /* read into private memory (kr_file_read_anon) */
} kr_file_map;

/* Returned instead of an errno value when path names something other than
 * a regular file (a directory, FIFO, device or socket): reading a FIFO or a
 * terminal would block, and /dev/null or a directory has no contents to
 * parse. kr_file_error_str gives its message. */
#define KR_FILE_NOT_REGULAR 100000
/* The message of a kr_file_* error: strerror, or KR_FILE_NOT_REGULAR's. */
const char *kr_file_error_str(int e);
/* Open path for reading as a stdio stream, refusing what is not a regular
 * file without blocking on it (O_NONBLOCK until the check is done). NULL
 * with *err set (an errno value or KR_FILE_NOT_REGULAR) on failure. */
FILE *kr_file_open_regular(const char *path, int *err);

/* Map path read-only. Returns 0, or an errno value or KR_FILE_NOT_REGULAR
 * (message via kr_file_error_str). */
int kr_file_map_open(const char *path, kr_file_map *m);
/* Read path into private anonymous memory instead, advised for transparent
 * huge pages and then made read-only. Why: decode streams every weight once
 * per token, and on a 4 KiB-page file mapping each page costs a TLB miss
 * that also stops the hardware prefetcher at the page boundary; 2 MiB pages
 * take both off the weight stream. Costs a copy of the file at load
 * (docs/PERFORMANCE.md, "Load time and memory"; docs/history/PERFORMANCE-2026-12.md, "Figures behind the
 * kernels' design choices"). Same return values as kr_file_map_open. */
int kr_file_read_anon(const char *path, kr_file_map *m);
/* Let the memory of a kr_file_read_anon image be written (writable) or
 * make it read-only again; the loader rewrites weights into the kernels'
 * layouts in between. Returns 0, an errno value, or EINVAL for a file
 * mapping (its pages belong to the page cache). */
int kr_file_map_set_writable(kr_file_map *m, bool writable);
/* The same two loaders on an open descriptor (a regular file, read from
 * offset 0): fd stays open and its offset where it was. Same return values
 * (EBADF for a negative fd). */
int kr_file_map_fd(int fd, kr_file_map *m);
int kr_file_read_anon_fd(int fd, kr_file_map *m);
/* A copy of size bytes at data in anonymous memory, as kr_file_read_anon
 * makes of a file: the caller's buffer may be freed once this returns.
 * Returns 0, EINVAL (data NULL with size > 0) or an errno value of mmap. */
int kr_file_copy_anon(const void *data, size_t size, kr_file_map *m);
/* A view of the caller's memory: read in place, never written, nothing
 * unmapped at close; the memory must outlive the view. */
void kr_file_borrow(const void *data, size_t size, kr_file_map *m);
void kr_file_map_close(kr_file_map *m);

#endif
