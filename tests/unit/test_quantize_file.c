/* test_quantize_file.c - `kara quantize`'s core: converting an F32 model
 * gives byte for byte the model the generator writes in that type directly;
 * metadata is carried over unchanged except the file type; with ../shared,
 * stories260K converted to Q8_0 (and to Q4_0 with --pure) has exactly the
 * tensor types, tensor bytes and metadata of llama.cpp's own conversions;
 * errors are reported with the right status. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftype.h"
#include "gguf.h"
#include "kernels.h"
#include "quantize_file.h"
#include "synth_model.h"
#include "test_gguf.h"
#include "test_util.h"

static bool files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = kr_test_read_file(a, &na), *db = kr_test_read_file(b, &nb);
    bool eq = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return eq;
}

static const char *tmp(const char *name) { return kr_test_path(kr_test_tmpdir(), name); }

/* Convert the generator's F32 model; the result must equal the model
 * generated in that type: same values, same quantizer, same metadata. */
static void test_against_generator(void) {
    kr_synth_params p;
    kr_synth_params_init(&p);
    kr_synth_preset(&p, "tiny-k");
    snprintf(p.arch, sizeof p.arch, "qwen2");
    p.n_layer = 3;
    p.seed = 5;
    char err[700];
    CHECK_MSG(kr_synth_write(&p, tmp("src-f32.gguf"), NULL, NULL, err, sizeof err) == KARA_OK, "%s", err);
    static const struct {
        kr_ftype ft;
        bool pure;
    } cases[] = {
        {KR_FTYPE_MOSTLY_Q4_K_M, false}, {KR_FTYPE_MOSTLY_Q5_K_M, false}, {KR_FTYPE_MOSTLY_Q8_0, false},
        {KR_FTYPE_MOSTLY_Q4_0, false},   {KR_FTYPE_MOSTLY_Q4_K_M, true},  {KR_FTYPE_MOSTLY_BF16, false},
        {KR_FTYPE_MOSTLY_F16, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kr_synth_params q = p;
        q.ftype = cases[i].ft;
        q.pure = cases[i].pure;
        char direct[64], conv[64];
        snprintf(direct, sizeof direct, "direct-%s%s.gguf", kr_ftype_name(q.ftype), q.pure ? "-pure" : "");
        snprintf(conv, sizeof conv, "conv-%s%s.gguf", kr_ftype_name(q.ftype), q.pure ? "-pure" : "");
        char direct_path[512];
        snprintf(direct_path, sizeof direct_path, "%s", tmp(direct));
        CHECK_MSG(kr_synth_write(&q, direct_path, NULL, NULL, err, sizeof err) == KARA_OK, "%s", err);
        kr_quantize_params qp = {q.ftype, q.pure, NULL, NULL};
        kr_quantize_result r;
        CHECK_MSG(kr_quantize_file(tmp("src-f32.gguf"), tmp(conv), &qp, &r, err, sizeof err) == KARA_OK, "%s: %s", conv,
                  err);
        CHECK_MSG(files_equal(direct_path, tmp(conv)), "%s differs from %s", conv, direct);
        CHECK(r.in_bytes > r.out_bytes && r.out_bytes > 0);
    }
    /* metadata survives a conversion from another type, tensor order too */
    kr_quantize_params qp = {KR_FTYPE_MOSTLY_Q8_0, false, NULL, NULL};
    CHECK(kr_quantize_file(tmp("direct-F16.gguf"), tmp("f16-to-q8.gguf"), &qp, NULL, err, sizeof err) == KARA_OK);
    kara_gguf *a = NULL, *b = NULL;
    CHECK(kara_gguf_open(tmp("direct-F16.gguf"), &a) == KARA_OK);
    CHECK(kara_gguf_open(tmp("f16-to-q8.gguf"), &b) == KARA_OK);
    if (a && b) {
        CHECK_EQ_INT(a->n_kv, b->n_kv);
        for (uint64_t i = 0; i < a->n_kv && i < b->n_kv; i++) {
            CHECK(a->kv[i].key.len == b->kv[i].key.len &&
                  !memcmp(a->kv[i].key.ptr, b->kv[i].key.ptr, a->kv[i].key.len));
            if (kara_gguf_str_eq(a->kv[i].key, "general.file_type")) {
                CHECK_EQ_INT(b->kv[i].value.v.u64, KR_FTYPE_MOSTLY_Q8_0);
                continue;
            }
            CHECK_MSG(kr_test_gguf_value_eq(&a->kv[i].value, &b->kv[i].value), "key %.*s changed",
                      (int)a->kv[i].key.len, a->kv[i].key.ptr);
        }
        CHECK_EQ_INT(a->n_tensors, b->n_tensors);
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            const kara_gguf_tensor *ta = &a->tensors[i], *tb = &b->tensors[i];
            CHECK(ta->name.len == tb->name.len && !memcmp(ta->name.ptr, tb->name.ptr, ta->name.len));
            CHECK(tb->type == (ta->n_dims >= 2 ? KR_TYPE_Q8_0 : KR_TYPE_F32));
            /* Q8_0 of F16 values: within Q8_0's error of the F16 weights */
            if (ta->n_dims == 2) {
                int64_t n = ta->ne[0];
                float x[1024], y[1024];
                kr_dequantize_row(KR_TYPE_F16, ta->data, x, n);
                kr_dequantize_row(KR_TYPE_Q8_0, tb->data, y, n);
                double amax = 0, emax = 0;
                for (int64_t k = 0; k < n; k++) {
                    if (fabsf(x[k]) > amax) amax = fabsf(x[k]);
                    if (fabsf(x[k] - y[k]) > emax) emax = fabsf(x[k] - y[k]);
                }
                /* round to nearest: at most half a step of max|x|/127, plus the scale's F16 rounding */
                CHECK_MSG(emax <= amax / 127.0 * 0.51 + 1e-3 * amax, "%.*s: error %g with max %g", (int)ta->name.len,
                          ta->name.ptr, emax, amax);
            }
        }
    }
    kara_gguf_close(a);
    kara_gguf_close(b);
}

/* llama.cpp's own conversions of stories260K (../shared/models): the same
 * types and bytes for every tensor, the same metadata values. */
static void compare_with_llamacpp(const char *shared, const char *derived, kr_ftype ft, bool pure) {
    char src[1024], ref[1024], out[64], err[700];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", shared);
    snprintf(ref, sizeof ref, "%s/models/%s", shared, derived);
    snprintf(out, sizeof out, "ours-%s", derived);
    kr_quantize_params qp = {ft, pure, NULL, NULL};
    CHECK_MSG(kr_quantize_file(src, tmp(out), &qp, NULL, err, sizeof err) == KARA_OK, "%s", err);
    kara_gguf *a = NULL, *b = NULL;
    CHECK_MSG(kara_gguf_open(ref, &a) == KARA_OK, "%s", kara_last_error());
    CHECK_MSG(kara_gguf_open(tmp(out), &b) == KARA_OK, "%s", kara_last_error());
    if (a && b) {
        CHECK_EQ_INT(a->n_kv, b->n_kv);
        for (uint64_t i = 0; i < a->n_kv; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)a->kv[i].key.len, a->kv[i].key.ptr);
            const kara_gguf_kv *kb = kara_gguf_find(b, key);
            CHECK_MSG(kb && kr_test_gguf_value_eq(&a->kv[i].value, &kb->value), "%s: key %s differs", derived, key);
        }
        CHECK_EQ_INT(a->n_tensors, b->n_tensors);
        int same = 0;
        for (uint64_t i = 0; i < a->n_tensors; i++) {
            char name[256];
            const kara_gguf_tensor *ta = &a->tensors[i];
            snprintf(name, sizeof name, "%.*s", (int)ta->name.len, ta->name.ptr);
            const kara_gguf_tensor *tb = kara_gguf_find_tensor(b, name);
            CHECK_MSG(tb != NULL, "%s: tensor %s missing", derived, name);
            if (!tb) continue;
            CHECK_MSG(ta->type == tb->type, "%s: %s is %s in llama.cpp's file, %s in ours", derived, name,
                      kr_type_get(ta->type)->name, kr_type_get(tb->type)->name);
            if (ta->type == tb->type && ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, ta->nbytes))
                same++;
            else
                CHECK_MSG(false, "%s: %s bytes differ", derived, name);
        }
        printf("%s: %d of %llu tensors byte-identical to llama.cpp's\n", derived, same,
               (unsigned long long)a->n_tensors);
    }
    kara_gguf_close(a);
    kara_gguf_close(b);
}

static void test_errors(void) {
    char err[700];
    kr_quantize_result r;
    kr_quantize_params qp = {KR_FTYPE_MOSTLY_Q8_0, false, NULL, NULL};
    CHECK(kr_quantize_file(tmp("none.gguf"), tmp("x.gguf"), &qp, &r, err, sizeof err) == KARA_ERR_IO);
    CHECK(!r.output_failed && strstr(err, "none.gguf"));
    /* a damaged input: the reader's message, with its offset */
    size_t n = 0;
    char *bytes = kr_test_read_file(tmp("src-f32.gguf"), &n);
    if (bytes) {
        FILE *f = fopen(tmp("cut.gguf"), "wb");
        fwrite(bytes, 1, n / 3, f);
        fclose(f);
        free(bytes);
        CHECK(kr_quantize_file(tmp("cut.gguf"), tmp("x.gguf"), &qp, &r, err, sizeof err) == KARA_ERR_FORMAT);
        CHECK_MSG(strstr(err, "offset") != NULL, "message '%s' names no offset", err);
    }
    CHECK(kr_quantize_file(tmp("src-f32.gguf"), "/nonexistent-dir/x.gguf", &qp, &r, err, sizeof err) == KARA_ERR_IO);
    CHECK(r.output_failed);
    CHECK(kr_quantize_file(tmp("src-f32.gguf"), tmp("src-f32.gguf"), &qp, &r, err, sizeof err) == KARA_ERR_ARG);
    FILE *f = fopen(tmp("x.gguf"), "rb");
    CHECK_MSG(f == NULL, "a failed conversion left x.gguf behind");
    if (f) fclose(f);
    /* requantizing an already quantized file works (Q8_0 -> Q4_0) */
    qp.ftype = KR_FTYPE_MOSTLY_Q4_0;
    CHECK_MSG(kr_quantize_file(tmp("direct-Q8_0.gguf"), tmp("q8-to-q4.gguf"), &qp, &r, err, sizeof err) == KARA_OK,
              "%s", err);
}

int main(void) {
    test_against_generator();
    test_errors();
    const char *shared = kr_test_shared_dir();
    if (shared) {
        compare_with_llamacpp(shared, "derived-stories260K-Q8_0.gguf", KR_FTYPE_MOSTLY_Q8_0, false);
        /* llama.cpp's Q4_0 copy keeps output.weight in Q4_0: made with --pure */
        compare_with_llamacpp(shared, "derived-stories260K-Q4_0.gguf", KR_FTYPE_MOSTLY_Q4_0, true);
    } else {
        printf("note: ../shared not found; the comparison with llama.cpp's files was skipped\n");
    }
    return kr_test_finish();
}
