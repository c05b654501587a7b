/*
 * kv_quant.h - the element types of the KV cache's rows (kara_kv_dtype).
 *
 * A slot holds, per layer, one K row and one V row of n_head_kv * head_dim
 * values. f16 and f32 store the values as they are; q8_0 and q4_0 store a
 * row in blocks of 32 consecutive values, GGML's layouts (kernels.h
 * kr_block_q8_0: an f16 scale d and 32 int8, value q * d, 34 bytes;
 * kr_block_q4_0: d and 16 bytes of nibbles, value (nibble - 8) * d, low
 * nibbles elements 0..15, high ones 16..31, 18 bytes). A row's length must
 * then be a multiple of 32 (kr_kv_plan_make refuses the others); a block
 * may span two heads when head_dim is not a multiple of 32, so readers ask
 * for a range of a row's values, not for a head's bytes. Rows are written
 * with the reference quantizers (kr_quantize_row): the same bytes on every
 * ISA and as llama.cpp writes them.
 */
#ifndef KR_KV_QUANT_H
#define KR_KV_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"

/* Values per block of a blocked type (32), 1 for f16 and f32. */
int32_t kr_kv_dtype_block(kara_kv_dtype t);
/* True for q8_0 and q4_0: rows are not arrays of one value type. */
bool kr_kv_dtype_blocked(kara_kv_dtype t);
/* True for a q8_0 cache whose heads are whole blocks (head_dim a multiple
 * of 32): the CPU attention then reads its keys and values in place, with
 * the queries quantised to Q8_0 (kernels.h gemm_nt_q8). */
bool kr_kv_q8_in_place(kara_kv_dtype t, int32_t head_dim);
/* Bytes of a row of n values (n a multiple of kr_kv_dtype_block); 0 for an
 * unknown type. */
size_t kr_kv_row_bytes(kara_kv_dtype t, int64_t n);
/* Store n values (a multiple of kr_kv_dtype_block) of x as a row of type t. */
void kr_kv_row_store(kara_kv_dtype t, const float *x, void *row, int64_t n);
/* out[0, n) = values [v0, v0 + n) of a row of type t, as f32 (any range). */
void kr_kv_row_load(kara_kv_dtype t, const void *row, int64_t v0, int64_t n, float *out);
/* kr_kv_row_load of n_rows rows `stride` bytes apart from base, into
 * consecutive rows of n floats at out. */
void kr_kv_rows_load(kara_kv_dtype t, const void *base, size_t stride, int32_t n_rows, int64_t v0, int64_t n,
                     float *out);
/* Value i of a row of type t. */
float kr_kv_row_value(kara_kv_dtype t, const void *row, int64_t i);
/* sum over j < n of x[j] * value (v0 + j) of a row of type t: the dot
 * product of f32 values with a range of a row, read in place (the blocked
 * types' scorer and redundancy products). */
float kr_kv_row_dot(kara_kv_dtype t, const void *row, int64_t v0, int64_t n, const float *x);

#endif /* KR_KV_QUANT_H */
