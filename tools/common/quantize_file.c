/* quantize_file.c - GGUF to GGUF type conversion, streamed tensor by tensor. */
#include "quantize_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "kernels.h"
#include "safe_output.h"

static kara_status seterr(char *err, size_t size, kara_status st, const char *fmt, ...) {
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Number of blocks: {arch}.block_count, else one more than the highest
 * blk.N in the tensor names. */
static int count_layers(const kara_gguf *g) {
    kara_gguf_str arch;
    if (kara_gguf_get_str(g, "general.architecture", &arch) && arch.len < 64) {
        char key[128];
        snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
        uint64_t n;
        if (kara_gguf_get_u64(g, key, &n) && n < 100000) return (int)n;
    }
    int n = 0;
    for (uint64_t i = 0; i < kara_gguf_n_tensors(g); i++) {
        kara_gguf_str tn = kara_gguf_tensor_at(g, i)->name;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(tn.len < 255 ? tn.len : 255), tn.ptr);
        int il = kr_ftype_layer_of(name);
        if (il + 1 > n) n = il + 1;
    }
    return n;
}

/* Convert one tensor: rows of ne[0] elements, a chunk of rows at a time;
 * the rows of a chunk are converted on all threads. */
static kara_status convert_tensor(kr_gguf_writer *w, const kara_gguf_tensor *t, kr_type dst, float *xbuf, uint8_t *ybuf,
                                  int64_t chunk_elems, char *err, size_t err_size) {
    const kr_type src = (kr_type)t->type;
    const int64_t ne0 = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t src_row = kr_type_row_size(src, ne0), dst_row = kr_type_row_size(dst, ne0);
    int64_t per_chunk = chunk_elems / ne0;
    if (per_chunk < 1) per_chunk = 1;
    for (int64_t r0 = 0; r0 < nrows; r0 += per_chunk) {
        int64_t nr = nrows - r0 < per_chunk ? nrows - r0 : per_chunk;
        const uint8_t *in = (const uint8_t *)t->data + (size_t)r0 * src_row;
        bool ok = true;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(&& : ok)
#endif
        for (int64_t i = 0; i < nr; i++) {
            float *x = xbuf + i * ne0;
            if (src == KR_TYPE_F32)
                memcpy(x, in + (size_t)i * src_row, (size_t)ne0 * sizeof(float));
            else
                kr_dequantize_row(src, in + (size_t)i * src_row, x, ne0);
            ok = kr_quantize_row(dst, x, ybuf + (size_t)i * dst_row, ne0) && ok;
        }
        if (!ok)
            return seterr(err, err_size, KARA_ERR_UNSUPPORTED, "tensor '%.*s': no quantizer for %s", (int)t->name.len,
                          t->name.ptr, kr_type_get(dst)->name);
        if (kr_gguf_writer_write(w, ybuf, (size_t)nr * dst_row) != KARA_OK)
            return seterr(err, err_size, KARA_ERR_IO, "%s", kr_gguf_writer_error(w));
    }
    return KARA_OK;
}

kara_status kr_quantize_file(const char *in_path, const char *out_path, const kr_quantize_params *p,
                             kr_quantize_result *result, char *err, size_t err_size) {
    kr_quantize_result dummy;
    kr_quantize_result *r = result ? result : &dummy;
    memset(r, 0, sizeof *r);
    if (!in_path || !out_path || !p) return seterr(err, err_size, KARA_ERR_ARG, "NULL argument");
    if (!strcmp(kr_ftype_name(p->ftype), "?"))
        return seterr(err, err_size, KARA_ERR_ARG, "unknown file type %d", (int)p->ftype);
    if (!strcmp(in_path, out_path))
        return seterr(err, err_size, KARA_ERR_ARG, "input and output are the same file (%s)", in_path);
    kr_out_add_input(in_path, "the input model"); /* refused as the output, however spelled or linked */

    kara_gguf *g = NULL;
    kara_status st = kara_gguf_open(in_path, &g);
    if (st != KARA_OK) return seterr(err, err_size, st, "%s", kara_last_error());
    kr_gguf_writer *w = NULL;
    kr_type *types = NULL;
    float *xbuf = NULL;
    uint8_t *ybuf = NULL;
    const int n_layer = count_layers(g);
    const bool tied = kara_gguf_find_tensor(g, "output.weight") == NULL;
    const uint64_t n_kv = kara_gguf_n_kv(g), n_tensors = kara_gguf_n_tensors(g);

    if (kr_gguf_writer_create(&w) != KARA_OK || !(types = calloc(n_tensors + 1, sizeof *types))) {
        st = seterr(err, err_size, KARA_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* metadata: everything as it was, then what llama-quantize sets */
    for (uint64_t i = 0; i < n_kv && st == KARA_OK; i++) {
        char key[1024];
        const kara_gguf_kv *kv = kara_gguf_kv_at(g, i);
        if (kv->key.len >= sizeof key) {
            st = seterr(err, err_size, KARA_ERR_UNSUPPORTED, "%s: metadata key of %llu bytes at byte offset %llu",
                        in_path, (unsigned long long)kv->key.len, (unsigned long long)kv->offset);
            goto done;
        }
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        st = kr_gguf_writer_set_value(w, key, &kv->value);
    }
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == KARA_OK) st = kr_gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype);
    int64_t max_row = 0;
    for (uint64_t i = 0; i < n_tensors && st == KARA_OK; i++) {
        const kara_gguf_tensor *t = kara_gguf_tensor_at(g, i);
        char name[1024];
        if (t->name.len >= sizeof name) {
            st = seterr(err, err_size, KARA_ERR_UNSUPPORTED, "%s: tensor name of %llu bytes at byte offset %llu",
                        in_path, (unsigned long long)t->name.len, (unsigned long long)t->info_offset);
            goto done;
        }
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const kr_type_info *ti = kr_type_get(t->type);
        if (!ti || !ti->supported) {
            st = seterr(err, err_size, KARA_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be dequantized",
                        in_path, name, ti ? ti->name : "?");
            goto done;
        }
        types[i] = kr_ftype_tensor_type(p->ftype, p->pure, name, (int)t->n_dims, t->ne[0], n_layer, tied);
        if (t->ne[0] > max_row) max_row = t->ne[0];
        st = kr_gguf_writer_add_tensor(w, name, types[i], (int)t->n_dims, t->ne, NULL);
        r->in_bytes += t->nbytes;
        r->out_bytes += kr_gguf_writer_tensor_nbytes(w, i);
    }
    if (st != KARA_OK) {
        seterr(err, err_size, st, "%s", kr_gguf_writer_error(w));
        goto done;
    }
    int64_t chunk = max_row > (1 << 20) ? max_row : (1 << 20);
    xbuf = malloc((size_t)chunk * sizeof(float));
    ybuf = malloc((size_t)chunk * sizeof(float)); /* no type is wider than F32 */
    if (!xbuf || !ybuf) {
        st = seterr(err, err_size, KARA_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = kr_gguf_writer_begin(w, out_path);
    if (st != KARA_OK) {
        r->output_failed = true;
        seterr(err, err_size, st, "%s", kr_gguf_writer_error(w));
        goto done;
    }
    uint64_t bytes_done = 0;
    for (uint64_t i = 0; i < n_tensors && st == KARA_OK; i++) {
        const kara_gguf_tensor *t = kara_gguf_tensor_at(g, i);
        if (p->on_tensor) p->on_tensor(i, n_tensors, bytes_done, r->in_bytes, t, types[i], p->user);
        bytes_done += t->nbytes;
        st = convert_tensor(w, t, types[i], xbuf, ybuf, chunk, err, err_size);
        if (st == KARA_ERR_IO) r->output_failed = true;
    }
    if (st == KARA_OK) {
        st = kr_gguf_writer_end(w);
        if (st != KARA_OK) {
            r->output_failed = true;
            seterr(err, err_size, st, "%s", kr_gguf_writer_error(w));
        }
    }
done:
    kr_gguf_writer_free(w); /* on failure its temporary file goes: out_path is untouched */
    free(types);
    free(xbuf);
    free(ybuf);
    kara_gguf_close(g);
    return st;
}
