/*
 * gguf.h - validated, zero-copy reader for GGUF v2/v3 files: the runtime's
 * side of the public "GGUF files" API in kara.h (kara_gguf_open, the value
 * and tensor structs, the getters), plus what only the runtime and its tests
 * use: the handle's fields, reading a file into memory instead of mapping
 * it, parsing an image already in memory, and making tensor data writable
 * for the repacking at load.
 *
 * The whole file is mapped read-only (platform/file_map.h); strings, arrays
 * and tensor data point into the mapping. kr_gguf_parse checks every
 * length, count, offset and size against the file before anything uses it,
 * so a malformed or truncated file yields KARA_ERR_FORMAT and a message
 * (kara_last_error) with the byte offset of the problem, never an
 * out-of-bounds read.
 */
#ifndef KR_GGUF_H
#define KR_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"

struct kara_gguf {
    const uint8_t *base; /* start of the file image */
    uint64_t size;
    uint32_t version;
    uint64_t n_kv;
    kara_gguf_kv *kv;
    uint64_t n_tensors;
    kara_gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* start of the tensor data section */
    void *map;            /* platform mapping, NULL for kr_gguf_parse */
    void *arena;          /* parser allocations */
};

/* kara_gguf_open, with the file read into (huge-page) memory when in_ram
 * instead of mapped (kr_file_read_anon). Errors as kara_gguf_open. */
kara_status kr_gguf_open_mode(const char *path, bool in_ram, kara_gguf **out);

/* Where a GGUF image comes from: a path, an open descriptor, or a buffer
 * of the caller's. name is what error messages call it. */
typedef enum { KR_GGUF_FROM_PATH, KR_GGUF_FROM_FD, KR_GGUF_FROM_BUFFER } kr_gguf_source_kind;
typedef struct kr_gguf_source {
    kr_gguf_source_kind kind;
    const char *path; /* FROM_PATH */
    int fd;           /* FROM_FD: a regular file, read from offset 0, left open */
    const void *data; /* FROM_BUFFER */
    size_t size;
    const char *name;
} kr_gguf_source;
/* Open from any source. in_ram: copy the image into (huge-page) memory of
 * the handle's own; otherwise map the file or descriptor, or read the
 * caller's buffer in place (it must outlive the handle). */
kara_status kr_gguf_open_source(const kr_gguf_source *src, bool in_ram, kara_gguf **out);
/* Parse an image already in memory (not copied; must outlive the result).
 * Errors as kara_gguf_open, without the file name. */
kara_status kr_gguf_parse(const void *data, size_t size, kara_gguf **out);
/* Make the tensor data of a file read into memory (in_ram) writable, or
 * read-only again: false if it cannot be (a mapped file). */
bool kr_gguf_set_writable(kara_gguf *g, bool writable);

#endif /* KR_GGUF_H */
