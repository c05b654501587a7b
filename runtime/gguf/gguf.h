/*
 * gguf.h - validated, zero-copy reader for GGUF v2/v3 files.
 *
 * The whole file is mapped read-only (platform/file_map.h); strings, arrays
 * and tensor data point into the mapping. kara_gguf_parse checks every
 * length, count, offset and size against the file before anything uses it,
 * so a malformed or truncated file yields KARA_ERR_FORMAT and a message with
 * the byte offset of the problem, never an out-of-bounds read.
 */
#ifndef KARA_GGUF_H
#define KARA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"

typedef enum kara_gguf_vtype {
    KARA_GGUF_UINT8 = 0,
    KARA_GGUF_INT8 = 1,
    KARA_GGUF_UINT16 = 2,
    KARA_GGUF_INT16 = 3,
    KARA_GGUF_UINT32 = 4,
    KARA_GGUF_INT32 = 5,
    KARA_GGUF_FLOAT32 = 6,
    KARA_GGUF_BOOL = 7,
    KARA_GGUF_STRING = 8,
    KARA_GGUF_ARRAY = 9,
    KARA_GGUF_UINT64 = 10,
    KARA_GGUF_INT64 = 11,
    KARA_GGUF_FLOAT64 = 12,
    KARA_GGUF_VTYPE_COUNT = 13
} kara_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct kara_gguf_str {
    const char *ptr;
    uint64_t len;
} kara_gguf_str;

typedef struct kara_gguf_value kara_gguf_value;

/* An array value. Fixed-size element types are read from `data` (little-
 * endian, n * element size bytes); strings from `strs`; nested arrays from
 * `items`. */
typedef struct kara_gguf_array {
    kara_gguf_vtype type;
    uint64_t n;
    const uint8_t *data;      /* fixed-size elements */
    kara_gguf_str *strs;      /* type == STRING */
    kara_gguf_value *items;   /* type == ARRAY */
} kara_gguf_array;

struct kara_gguf_value {
    kara_gguf_vtype type;
    union {
        uint64_t u64;    /* UINT8..UINT64 and BOOL */
        int64_t i64;     /* INT8..INT64 */
        double f64;      /* FLOAT32, FLOAT64 */
        kara_gguf_str str;
        kara_gguf_array arr;
    } v;
};

typedef struct kara_gguf_kv {
    kara_gguf_str key;
    kara_gguf_value value;
    uint64_t offset;          /* byte offset of the key in the file */
} kara_gguf_kv;

typedef struct kara_gguf_tensor {
    kara_gguf_str name;
    uint32_t n_dims;
    int64_t ne[4];            /* ne[0] is the row length (innermost) */
    uint32_t type;            /* kara_type id, validated to be known */
    uint64_t offset;          /* relative to the data section */
    const void *data;         /* points into the mapping */
    uint64_t nbytes;
    uint64_t info_offset;     /* byte offset of the tensor info in the file */
} kara_gguf_tensor;

typedef struct kara_gguf {
    const uint8_t *base;      /* start of the file image */
    uint64_t size;
    uint32_t version;
    uint64_t n_kv;
    kara_gguf_kv *kv;
    uint64_t n_tensors;
    kara_gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;     /* start of the tensor data section */
    void *map;                /* platform mapping, NULL for kara_gguf_parse */
    void *arena;              /* parser allocations */
} kara_gguf;

/* Map and parse a file. On error returns a status and sets the message
 * (kara_last_error) naming the file, the problem and its byte offset. */
kara_status kara_gguf_open(const char *path, kara_gguf **out);
/* The same, with the file read into (huge-page) memory when in_ram instead
 * of mapped (kara_file_read_anon). */
kara_status kara_gguf_open_mode(const char *path, bool in_ram, kara_gguf **out);
/* Parse an image already in memory (not copied; must outlive the result).
 * Errors as kara_gguf_open, without the file name. */
kara_status kara_gguf_parse(const void *data, size_t size, kara_gguf **out);
void kara_gguf_close(kara_gguf *g);
/* Make the tensor data of a file read into memory (in_ram) writable, or
 * read-only again: false if it cannot be (a mapped file). */
bool kara_gguf_set_writable(kara_gguf *g, bool writable);

const kara_gguf_kv *kara_gguf_find(const kara_gguf *g, const char *key);
const kara_gguf_tensor *kara_gguf_find_tensor(const kara_gguf *g, const char *name);

/* Typed getters: true when the key exists with a compatible type (any
 * integer type for ints, any number for floats); out unchanged otherwise. */
bool kara_gguf_get_u64(const kara_gguf *g, const char *key, uint64_t *out);
bool kara_gguf_get_i64(const kara_gguf *g, const char *key, int64_t *out);
bool kara_gguf_get_f64(const kara_gguf *g, const char *key, double *out);
bool kara_gguf_get_bool(const kara_gguf *g, const char *key, bool *out);
bool kara_gguf_get_str(const kara_gguf *g, const char *key, kara_gguf_str *out);
const kara_gguf_array *kara_gguf_get_arr(const kara_gguf *g, const char *key);

/* Array element readers (index must be < arr->n; element type as noted). */
int64_t kara_gguf_arr_int(const kara_gguf_array *arr, uint64_t i);   /* any integer or bool type */
double kara_gguf_arr_float(const kara_gguf_array *arr, uint64_t i);  /* FLOAT32/FLOAT64 */

bool kara_gguf_str_eq(kara_gguf_str s, const char *c);
const char *kara_gguf_vtype_name(kara_gguf_vtype t);

#endif /* KARA_GGUF_H */
