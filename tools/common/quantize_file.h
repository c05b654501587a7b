/*
 * quantize_file.h - convert a GGUF model to another weight type or llama.cpp
 * mix (the core of `kara quantize`, here so tests can call it).
 *
 * Every tensor is read through the validating reader (kara_gguf_open),
 * dequantized to f32 a
 * chunk of rows at a time and re-encoded with the reference quantizers; the
 * type of each tensor follows kr_ftype_tensor_type (llama-quantize's rule
 * and shape fallbacks; norms, biases and 1-D tensors become F32). All
 * metadata is copied in order, with general.quantization_version and
 * general.file_type set as llama-quantize sets them. Tensor order is kept.
 */
#ifndef KR_QUANTIZE_FILE_H
#define KR_QUANTIZE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftype.h"
#include "kara.h"

typedef struct kr_quantize_params {
    kr_ftype ftype;
    bool pure; /* every weight matrix in the base type (no mix) */
    /* optional: called before each tensor is converted, with the input
     * bytes converted so far and in all (for a progress line) */
    void (*on_tensor)(uint64_t index, uint64_t count, uint64_t bytes_done, uint64_t bytes_total,
                      const kara_gguf_tensor *t, kr_type to, void *user);
    void *user;
} kr_quantize_params;

typedef struct kr_quantize_result {
    uint64_t in_bytes, out_bytes; /* tensor data before and after */
    bool output_failed;           /* the error concerns the output file */
} kr_quantize_result;

/* Convert in_path into out_path. Errors: KARA_ERR_IO (cannot open the input
 * or write the output: see result->output_failed), KARA_ERR_FORMAT (malformed
 * input), KARA_ERR_UNSUPPORTED (a tensor type that cannot be dequantized),
 * with a message in err. A failed conversion leaves no output file. */
kara_status kr_quantize_file(const char *in_path, const char *out_path, const kr_quantize_params *p,
                             kr_quantize_result *result, char *err, size_t err_size);

#endif /* KR_QUANTIZE_FILE_H */
