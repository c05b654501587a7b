/*
 * gguf_writer.h - a small GGUF v3 writer (little-endian) for the tools and
 * tests: synthetic models, `kara quantize`, round-trip and robustness tests.
 *
 * Usage:
 *
 *     kr_gguf_writer *w;
 *     kr_gguf_writer_create(&w);
 *     kr_gguf_writer_set_str(w, "general.architecture", "llama");
 *     kr_gguf_writer_set_u32(w, "llama.block_count", 4);
 *     int64_t ne[2] = {128, 256};                 // ne[0] is the row length
 *     kr_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", KR_TYPE_Q8_0, 2, ne, NULL);
 *     kr_gguf_writer_begin(w, "out.gguf");      // header, metadata, tensor infos
 *     kr_gguf_writer_write(w, bytes, n);        // tensor data in declaration order,
 *     ...                                         // in as many pieces as convenient
 *     kr_gguf_writer_end(w);                    // checks every tensor is complete
 *     kr_gguf_writer_free(w);
 *
 * Metadata is kept in insertion order; setting a key again replaces its
 * value in place. Tensor data is streamed to the file, so a model never has
 * to sit in memory whole. `general.alignment` (a UINT32 key, default 32,
 * a power of two) is honoured for the data section and every tensor offset.
 * Every function returns KARA_OK or an error status; kr_gguf_writer_error
 * then names the problem. After an error the writer only accepts _free.
 */
#ifndef KR_GGUF_WRITER_H
#define KR_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kernels.h"

#define KR_GGUF_DEFAULT_ALIGNMENT 32

typedef struct kr_gguf_writer kr_gguf_writer;

kara_status kr_gguf_writer_create(kr_gguf_writer **out);
/* Closes (and leaves incomplete) a file still open. NULL is a no-op. */
void kr_gguf_writer_free(kr_gguf_writer *w);
/* The message of the last error ("" when none). Never NULL. */
const char *kr_gguf_writer_error(const kr_gguf_writer *w);

/* ---- scalar metadata ---- */
kara_status kr_gguf_writer_set_u8(kr_gguf_writer *w, const char *key, uint8_t v);
kara_status kr_gguf_writer_set_i8(kr_gguf_writer *w, const char *key, int8_t v);
kara_status kr_gguf_writer_set_u16(kr_gguf_writer *w, const char *key, uint16_t v);
kara_status kr_gguf_writer_set_i16(kr_gguf_writer *w, const char *key, int16_t v);
kara_status kr_gguf_writer_set_u32(kr_gguf_writer *w, const char *key, uint32_t v);
kara_status kr_gguf_writer_set_i32(kr_gguf_writer *w, const char *key, int32_t v);
kara_status kr_gguf_writer_set_u64(kr_gguf_writer *w, const char *key, uint64_t v);
kara_status kr_gguf_writer_set_i64(kr_gguf_writer *w, const char *key, int64_t v);
kara_status kr_gguf_writer_set_f32(kr_gguf_writer *w, const char *key, float v);
kara_status kr_gguf_writer_set_f64(kr_gguf_writer *w, const char *key, double v);
kara_status kr_gguf_writer_set_bool(kr_gguf_writer *w, const char *key, bool v);
kara_status kr_gguf_writer_set_str(kr_gguf_writer *w, const char *key, const char *s);
kara_status kr_gguf_writer_set_strn(kr_gguf_writer *w, const char *key, const char *s, uint64_t len);

/* ---- array metadata ---- */
/* An array of n fixed-size elements (any type but STRING and ARRAY) given in
 * host order: uint8_t[], int32_t[], float[], double[], bool as uint8_t[]... */
kara_status kr_gguf_writer_set_arr(kr_gguf_writer *w, const char *key, kara_gguf_vtype elem, const void *data,
                                   uint64_t n);
/* An array of n NUL-terminated strings. */
kara_status kr_gguf_writer_set_arr_str(kr_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);

/* Arrays built element by element, nested arrays included:
 *     arr_begin(w, "k", KARA_GGUF_ARRAY, 2)       // key "k": array of 2 arrays
 *       arr_begin(w, NULL, KARA_GGUF_INT32, 3)    // element 0: array of 3 int32
 *         arr_push(w, &a); arr_push(w, &b); arr_push(w, &c);
 *       arr_end(w)
 *       arr_begin(w, NULL, KARA_GGUF_STRING, 1)   // element 1: array of 1 string
 *         arr_push_str(w, "x", 1);
 *       arr_end(w)
 *     arr_end(w)
 * key is given for the outermost array only (NULL for a nested one); each
 * arr_end checks that exactly n elements were pushed. */
kara_status kr_gguf_writer_arr_begin(kr_gguf_writer *w, const char *key, kara_gguf_vtype elem, uint64_t n);
/* One fixed-size element of the innermost open array, in host order. */
kara_status kr_gguf_writer_arr_push(kr_gguf_writer *w, const void *elem);
kara_status kr_gguf_writer_arr_push_str(kr_gguf_writer *w, const char *s, uint64_t len);
kara_status kr_gguf_writer_arr_end(kr_gguf_writer *w);

/* Copy a value read by the GGUF reader (kr_gguf_* in kara.h; any type,
 * nested arrays included), e.g. to carry metadata from one file into
 * another. */
kara_status kr_gguf_writer_set_value(kr_gguf_writer *w, const char *key, const kara_gguf_value *v);

/* Remove a key if present (returns KARA_OK either way). */
kara_status kr_gguf_writer_remove(kr_gguf_writer *w, const char *key);
uint64_t kr_gguf_writer_n_kv(const kr_gguf_writer *w);

/* ---- tensors ---- */
/* Declare a tensor (1 to 4 dims, ne[0] the row length, a multiple of the
 * type's block size). data may be NULL when the bytes are streamed later
 * with kr_gguf_writer_write; otherwise it is referenced (not copied) and
 * must stay valid until kr_gguf_writer_save returns. Names are unique. */
kara_status kr_gguf_writer_add_tensor(kr_gguf_writer *w, const char *name, kr_type type, int n_dims, const int64_t *ne,
                                      const void *data);
uint64_t kr_gguf_writer_n_tensors(const kr_gguf_writer *w);
/* Bytes of tensor i's data (0 for an unknown index). */
uint64_t kr_gguf_writer_tensor_nbytes(const kr_gguf_writer *w, uint64_t i);

/* ---- output ---- */
/* Create the file and write the header, metadata and tensor infos. */
kara_status kr_gguf_writer_begin(kr_gguf_writer *w, const char *path);
/* Append n bytes of tensor data: they fill the tensors in declaration order
 * (a call may span several tensors); alignment padding is inserted. */
kara_status kr_gguf_writer_write(kr_gguf_writer *w, const void *data, size_t n);
/* Check that every tensor got all its bytes, flush and close the file. */
kara_status kr_gguf_writer_end(kr_gguf_writer *w);
/* begin + the data pointers given to add_tensor + end (every tensor must
 * have data). */
kara_status kr_gguf_writer_save(kr_gguf_writer *w, const char *path);

#endif /* KR_GGUF_WRITER_H */
