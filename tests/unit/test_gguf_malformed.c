/* test_gguf_malformed.c - the GGUF reader never trusts the file.
 *
 * (a) A valid file cut short at every offset of its header, metadata and
 *     tensor infos, and at a sample of offsets through the tensor data, is
 *     always rejected with a message naming a byte offset.
 * (b) Every header/metadata/tensor-info byte overwritten with 0x00, 0xFF, a
 *     flipped bit and a random value, plus random multi-byte damage: the
 *     parser either rejects the file with such a message or returns a result
 *     whose every pointer lies inside the image (checked by reading it all).
 *     Bytes of the magic and version must always be rejected.
 * (c) Hand-made hostile files (huge lengths and counts, bad ranks, dims that
 *     overflow, offsets beyond the file or misaligned, unknown type ids,
 *     duplicate keys, bad magic, versions 1 and 4, ...) are each rejected.
 *
 * Every image is parsed from a heap block of exactly its size, so under
 * AddressSanitizer (CI) a read one byte too far fails the test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "kernels.h"
#include "test_models.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Parse a copy of `size` bytes held in a block of exactly that size; err
 * gets the message the parse left in kara_last_error() ("" if none). */
static kara_status parse_exact(const uint8_t *bytes, size_t size, kara_gguf **g, char *err, size_t err_size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, bytes, size);
    kr_test_clear_error();
    kara_status st = kr_gguf_parse(copy, size, g);
    snprintf(err, err_size, "%s", kara_last_error());
    if (st != KARA_OK) {
        free(copy);
        return st;
    }
    return st; /* the caller frees g->base after closing */
}

static void close_exact(kara_gguf *g) {
    if (!g) return;
    void *base = (void *)g->base;
    kara_gguf_close(g);
    free(base);
}

static volatile uint64_t sink;

/* Touch every byte a parsed value points to, checking it lies in the image. */
static bool value_in_bounds(const kara_gguf *g, const kara_gguf_value *v);
static bool span_ok(const kara_gguf *g, const void *p, uint64_t n) {
    const uint8_t *b = p;
    if (n == 0) return true;
    if (!b || b < g->base || b > g->base + g->size || n > (uint64_t)(g->base + g->size - b)) return false;
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++) s += b[i];
    sink += s;
    return true;
}
static bool array_in_bounds(const kara_gguf *g, const kara_gguf_array *a) {
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if ((unsigned)a->type >= KARA_GGUF_VTYPE_COUNT) return false;
    if (a->type == KARA_GGUF_STRING) {
        for (uint64_t i = 0; i < a->n; i++)
            if (!span_ok(g, a->strs[i].ptr, a->strs[i].len)) return false;
        return true;
    }
    if (a->type == KARA_GGUF_ARRAY) {
        for (uint64_t i = 0; i < a->n; i++)
            if (!value_in_bounds(g, &a->items[i])) return false;
        return true;
    }
    return span_ok(g, a->data, a->n * (uint64_t)sz[a->type]);
}
static bool value_in_bounds(const kara_gguf *g, const kara_gguf_value *v) {
    if (v->type == KARA_GGUF_STRING) return span_ok(g, v->v.str.ptr, v->v.str.len);
    if (v->type == KARA_GGUF_ARRAY) return array_in_bounds(g, &v->v.arr);
    return (unsigned)v->type < KARA_GGUF_VTYPE_COUNT;
}

/* The promises a successful parse makes, checked on a damaged file that
 * still parsed. */
static bool result_sane(const kara_gguf *g, const char **why) {
    *why = "";
    if (g->alignment == 0 || (g->alignment & (g->alignment - 1))) return *why = "alignment", false;
    if (g->data_offset % g->alignment) return *why = "data offset alignment", false;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        if (g->kv[i].key.len == 0 || !span_ok(g, g->kv[i].key.ptr, g->kv[i].key.len)) return *why = "key", false;
        if (!value_in_bounds(g, &g->kv[i].value)) return *why = "value", false;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kara_gguf_tensor *t = &g->tensors[i];
        const kr_type_info *ti = kr_type_get(t->type);
        if (!ti) return *why = "tensor type", false;
        if (t->n_dims < 1 || t->n_dims > 4) return *why = "tensor rank", false;
        int64_t nel = 1;
        for (int d = 0; d < 4; d++) {
            if (t->ne[d] < 1) return *why = "tensor dim", false;
            if (nel > INT64_MAX / t->ne[d]) return *why = "tensor element count", false;
            nel *= t->ne[d];
        }
        if (t->ne[0] % ti->block_size) return *why = "row vs block", false;
        if ((uint64_t)(nel / ti->block_size) * (uint64_t)ti->type_size != t->nbytes) return *why = "nbytes", false;
        if ((const uint8_t *)t->data < g->base + g->data_offset) return *why = "tensor before data", false;
        if ((uint64_t)((const uint8_t *)t->data - g->base) % g->alignment) return *why = "tensor alignment", false;
        if (!span_ok(g, t->name.ptr, t->name.len) || !span_ok(g, t->data, t->nbytes))
            return *why = "tensor span", false;
    }
    return true;
}

static bool has_offset(const char *err) { return strstr(err, "offset") != NULL; }

/* ------------------------------------------------------------------------ */
/* The valid file the damage starts from                                     */
/* ------------------------------------------------------------------------ */

static uint8_t *make_valid(size_t *size) {
    kr_gguf_writer *w;
    kr_gguf_writer_create(&w);
    const char *toks[] = {"a", "bb", "<|im_end|>"};
    int32_t types[] = {1, 1, 3};
    kr_gguf_writer_set_str(w, "general.architecture", "llama");
    kr_gguf_writer_set_u32(w, "llama.block_count", 1);
    kr_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    kr_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    kr_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KARA_GGUF_INT32, types, 3);
    kr_gguf_writer_arr_begin(w, "test.nested", KARA_GGUF_ARRAY, 2);
    for (int k = 0; k < 2; k++) {
        kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_UINT16, 2);
        uint16_t v = (uint16_t)(k + 1);
        kr_gguf_writer_arr_push(w, &v);
        kr_gguf_writer_arr_push(w, &v);
        kr_gguf_writer_arr_end(w);
    }
    kr_gguf_writer_arr_end(w);
    kr_gguf_writer_set_u32(w, "general.alignment", 32);
    static float embd[64 * 16];
    static uint8_t q[2 * 34 * 4];
    static float norm[64];
    for (size_t i = 0; i < sizeof embd / sizeof embd[0]; i++) embd[i] = (float)i;
    for (size_t i = 0; i < sizeof q; i++) q[i] = (uint8_t)i;
    int64_t ne_e[2] = {64, 16}, ne_q[2] = {64, 4}, ne_n[1] = {64};
    kr_gguf_writer_add_tensor(w, "token_embd.weight", KR_TYPE_F32, 2, ne_e, embd);
    kr_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", KR_TYPE_Q8_0, 2, ne_q, q);
    kr_gguf_writer_add_tensor(w, "output_norm.weight", KR_TYPE_F32, 1, ne_n, norm);
    const char *path = kr_test_path(kr_test_tmpdir(), "valid.gguf");
    CHECK_MSG(kr_gguf_writer_save(w, path) == KARA_OK, "writing the valid file: %s", kr_gguf_writer_error(w));
    kr_gguf_writer_free(w);
    return (uint8_t *)kr_test_read_file(path, size);
}

/* ------------------------------------------------------------------------ */
/* (a) truncation                                                            */
/* ------------------------------------------------------------------------ */

static void test_truncation(const uint8_t *file, size_t size, uint64_t data_offset, uint64_t data_end) {
    char err[512];
    int tried = 0, bad = 0;
    for (size_t cut = 0; cut < data_end; cut += (cut < data_offset + 64 ? 1 : 61)) {
        kara_gguf *g = NULL;
        kara_status st = parse_exact(file, cut, &g, err, sizeof err);
        tried++;
        if (st == KARA_OK || !err[0] || !has_offset(err)) {
            if (bad++ < 5) CHECK_MSG(false, "cut at %zu of %zu: status %d, message '%s'", cut, size, (int)st, err);
        }
        close_exact(g);
    }
    /* the last tensor's bytes end the required part; what follows is padding */
    kara_gguf *g = NULL;
    CHECK_MSG(parse_exact(file, (size_t)data_end, &g, err, sizeof err) == KARA_OK, "cut after the data: %s", err);
    close_exact(g);
    printf("truncation: %d cut files (file of %zu bytes, data from %llu), all rejected: %s\n", tried, size,
           (unsigned long long)data_offset, bad ? "no" : "yes");
    CHECK_MSG(bad == 0, "%d of %d truncated files were not rejected properly", bad, tried);
    CHECK(tried > 500);
}

/* ------------------------------------------------------------------------ */
/* (b) overwritten bytes                                                     */
/* ------------------------------------------------------------------------ */

static void try_damaged(const uint8_t *img, size_t size, size_t at, bool must_fail, int *bad, int *rejected) {
    char err[512];
    kara_gguf *g = NULL;
    kara_status st = parse_exact(img, size, &g, err, sizeof err);
    if (st != KARA_OK) {
        (*rejected)++;
        if ((!err[0] || !has_offset(err)) && (*bad)++ < 5)
            CHECK_MSG(false, "damage at %zu: status %d with message '%s'", at, (int)st, err);
        return;
    }
    const char *why;
    if (must_fail && (*bad)++ < 5) CHECK_MSG(false, "damage at %zu (magic/version) was accepted", at);
    if (!result_sane(g, &why) && (*bad)++ < 5)
        CHECK_MSG(false, "damage at %zu parsed into an unsafe result: %s", at, why);
    close_exact(g);
}

static void test_overwrite(const uint8_t *file, size_t size, uint64_t data_offset) {
    uint8_t *img = malloc(size);
    int bad = 0, rejected = 0, tried = 0;
    for (size_t at = 0; at < data_offset; at++) {
        uint8_t orig = file[at];
        const uint8_t patterns[5] = {0x00, 0xFF, (uint8_t)(orig ^ 0x01), (uint8_t)(orig ^ 0x80), (uint8_t)rnd()};
        for (int p = 0; p < 5; p++) {
            if (patterns[p] == orig) continue;
            memcpy(img, file, size);
            img[at] = patterns[p];
            /* the magic must be exact; the version must stay 2 or 3 */
            uint32_t version =
                (uint32_t)img[4] | (uint32_t)img[5] << 8 | (uint32_t)img[6] << 16 | (uint32_t)img[7] << 24;
            bool must_fail = at < 4 || (at < 8 && version != 2 && version != 3);
            try_damaged(img, size, at, must_fail, &bad, &rejected);
            tried++;
        }
    }
    /* several bytes at once, anywhere before the data */
    for (int it = 0; it < 3000; it++) {
        memcpy(img, file, size);
        int n = 1 + (int)(rnd() % 4);
        size_t first = 0;
        for (int k = 0; k < n; k++) {
            size_t at = rnd() % data_offset;
            if (k == 0) first = at;
            img[at] = (uint8_t)rnd();
        }
        try_damaged(img, size, first, false, &bad, &rejected);
        tried++;
    }
    free(img);
    printf("overwrite: %d damaged files, %d rejected, the rest parsed into in-bounds results\n", tried, rejected);
    CHECK_MSG(bad == 0, "%d of %d damaged files misbehaved", bad, tried);
    /* most single-field damage must be caught (strings and floats may change
     * freely, so not all of it) */
    CHECK_MSG(rejected > tried / 4, "only %d of %d damaged files were rejected", rejected, tried);
}

/* ------------------------------------------------------------------------ */
/* (c) hand-made hostile files                                               */
/* ------------------------------------------------------------------------ */

typedef struct rb {
    uint8_t p[8192];
    size_t n;
} rb;

static void put(rb *b, const void *s, size_t n) {
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void u32(rb *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b->p[b->n++] = (uint8_t)(v >> (8 * i));
}
static void u64(rb *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b->p[b->n++] = (uint8_t)(v >> (8 * i));
}
static void str(rb *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(rb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(rb *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, KARA_GGUF_UINT32);
    u32(b, v);
}
static void tensor_info(rb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, off);
}
static void pad_and_data(rb *b, size_t align, size_t data_bytes) {
    while (b->n % align) b->p[b->n++] = 0;
    for (size_t i = 0; i < data_bytes; i++) b->p[b->n++] = (uint8_t)i;
}

/* Expect rejection with a message naming an offset (and, when want_at is
 * given, that exact "byte offset N"). */
static void expect_reject(const rb *b, const char *what, const char *want_in_msg, long want_at) {
    char err[512];
    kara_gguf *g = NULL;
    kara_status st = parse_exact(b->p, b->n, &g, err, sizeof err);
    CHECK_MSG(st != KARA_OK, "%s: accepted", what);
    if (st == KARA_OK) {
        close_exact(g);
        return;
    }
    CHECK_MSG(err[0] != 0 && has_offset(err), "%s: message '%s' names no offset", what, err);
    if (want_in_msg) CHECK_MSG(strstr(err, want_in_msg) != NULL, "%s: message '%s' lacks '%s'", what, err, want_in_msg);
    if (want_at >= 0) {
        char at[64];
        snprintf(at, sizeof at, "byte offset %ld", want_at);
        CHECK_MSG(strstr(err, at) != NULL, "%s: message '%s' should name %s", what, err, at);
    }
}

static void expect_accept(const rb *b, const char *what) {
    char err[512];
    kara_gguf *g = NULL;
    CHECK_MSG(parse_exact(b->p, b->n, &g, err, sizeof err) == KARA_OK, "%s: rejected: %s", what, err);
    close_exact(g);
}

/* A minimal valid file: 2 keys, one F32 [32 x 2] tensor. The variants below
 * change one thing each. */
static void minimal(rb *b, uint32_t version) {
    header(b, version, 1, 2);
    str(b, "general.architecture");
    u32(b, KARA_GGUF_STRING);
    str(b, "llama");
    kv_u32(b, "llama.block_count", 1);
    const uint64_t ne[2] = {32, 2};
    tensor_info(b, "t", 2, ne, KR_TYPE_F32, 0);
    pad_and_data(b, 32, 256);
}

static void test_hostile(void) {
    static rb b;
    const uint64_t huge = 0xFFFFFFFFFFFFFFF0ull;

    minimal(&b, 3);
    expect_accept(&b, "minimal v3 file");
    minimal(&b, 2);
    expect_accept(&b, "minimal v2 file");

    b.n = 0;
    expect_reject(&b, "empty file", NULL, 0);
    minimal(&b, 3);
    b.n = 3;
    expect_reject(&b, "3-byte file", NULL, 0);
    minimal(&b, 3);
    b.p[3] = 'X';
    expect_reject(&b, "bad magic", "magic", 0);
    minimal(&b, 1);
    expect_reject(&b, "version 1", "version 1", 4);
    minimal(&b, 4);
    expect_reject(&b, "version 4", "version 4", 4);
    minimal(&b, 0xFFFFFFFFu);
    expect_reject(&b, "version 2^32-1", NULL, 4);

    header(&b, 3, 0, UINT64_MAX);
    expect_reject(&b, "2^64-1 metadata keys", NULL, -1);
    header(&b, 3, 1ull << 62, 0);
    expect_reject(&b, "2^62 tensors", NULL, -1);

    /* strings */
    header(&b, 3, 0, 1);
    u64(&b, huge);
    pad_and_data(&b, 1, 64); /* enough bytes that the key count is plausible */
    expect_reject(&b, "huge key length", "length", 24);
    header(&b, 3, 0, 1);
    u64(&b, 0);
    u32(&b, KARA_GGUF_UINT32);
    u32(&b, 1);
    expect_reject(&b, "empty key", NULL, 24);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_STRING);
    u64(&b, huge);
    expect_reject(&b, "huge string value length", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_STRING);
    u64(&b, 100);
    put(&b, "short", 5);
    expect_reject(&b, "string value past the end", NULL, 37);

    /* value types */
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, 13);
    u32(&b, 0);
    expect_reject(&b, "value type 13", "type 13", 33);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, 0xFFFFFFFFu);
    u64(&b, 0);
    expect_reject(&b, "value type 2^32-1", NULL, 33);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_UINT64);
    u32(&b, 5); /* 4 of the 8 bytes */
    expect_reject(&b, "truncated uint64 value", NULL, -1);

    /* arrays */
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, 77);
    u64(&b, 1);
    expect_reject(&b, "array element type 77", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, KARA_GGUF_UINT32);
    u64(&b, 1ull << 62);
    expect_reject(&b, "2^62 uint32 elements", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, KARA_GGUF_UINT64);
    u64(&b, (UINT64_MAX / 8) + 2); /* n * 8 wraps around */
    expect_reject(&b, "uint64 array count that wraps", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, KARA_GGUF_STRING);
    u64(&b, 1ull << 61);
    expect_reject(&b, "2^61 strings", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, KARA_GGUF_STRING);
    u64(&b, 10);
    for (int i = 0; i < 3; i++) str(&b, "tok");
    expect_reject(&b, "10 strings of which 3 exist", NULL, -1);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    u32(&b, KARA_GGUF_ARRAY);
    u64(&b, 1ull << 60);
    expect_reject(&b, "2^60 nested arrays", NULL, 37);
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, KARA_GGUF_ARRAY);
    for (int d = 0; d < 40; d++) { /* arrays of arrays, 40 levels */
        u32(&b, KARA_GGUF_ARRAY);
        u64(&b, 1);
    }
    u32(&b, KARA_GGUF_UINT8);
    u64(&b, 0);
    expect_reject(&b, "arrays nested 40 deep", "nested", -1);

    header(&b, 3, 0, 2);
    kv_u32(&b, "dup", 1);
    kv_u32(&b, "dup", 2);
    expect_reject(&b, "duplicate key", "duplicate", 43);

    /* general.alignment */
    static const struct {
        uint32_t type;
        uint64_t v;
        const char *what;
    } al[] = {
        {KARA_GGUF_UINT32, 0, "alignment 0"},
        {KARA_GGUF_UINT32, 48, "alignment 48"},
        {KARA_GGUF_UINT64, 32, "uint64 alignment"},
        {KARA_GGUF_INT32, 32, "int32 alignment"},
    };
    for (size_t i = 0; i < sizeof al / sizeof al[0]; i++) {
        header(&b, 3, 1, 1);
        str(&b, "general.alignment");
        u32(&b, al[i].type);
        if (al[i].type == KARA_GGUF_UINT64)
            u64(&b, al[i].v);
        else
            u32(&b, (uint32_t)al[i].v);
        const uint64_t ne[1] = {8};
        tensor_info(&b, "t", 1, ne, KR_TYPE_F32, 0);
        pad_and_data(&b, 64, 32);
        expect_reject(&b, al[i].what, "alignment", 24);
    }

    /* tensor infos: the tensor info starts at byte 24 (no metadata) */
    const uint64_t ne2[2] = {32, 2};
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 256);
    expect_accept(&b, "single tensor");

    const uint64_t ne5[5] = {32, 1, 1, 1, 1};
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 5, ne5, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "rank 5", "rank 5", 33);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 0, ne5, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "rank 0", "rank 0", 33);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, (const uint64_t[]){1ull << 32, 1ull << 32}, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "dims 2^32 x 2^32 (element count overflows int64)", "overflow", 45);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 4, (const uint64_t[]){1ull << 20, 1ull << 20, 1ull << 20, 1ull << 4}, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "4 dims multiplying past int64", "overflow", 61);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 1, (const uint64_t[]){1ull << 63}, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "dimension 2^63", NULL, 37);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, (const uint64_t[]){1ull << 61, 1}, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "2^61 F32 elements (bytes overflow or exceed file)", NULL, -1);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, (const uint64_t[]){32, 0}, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 128);
    expect_reject(&b, "a zero dimension", NULL, 45);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 1ull << 40);
    pad_and_data(&b, 32, 256);
    expect_reject(&b, "offset 2^40", "past the end", 24);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, UINT64_MAX - 31); /* aligned, offset + size wraps */
    pad_and_data(&b, 32, 256);
    expect_reject(&b, "offset 2^64-32", NULL, 24);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 32); /* aligned, 32 bytes short */
    pad_and_data(&b, 32, 256);
    expect_reject(&b, "data ending past the file", "past the end", 24);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 4);
    pad_and_data(&b, 32, 512);
    expect_reject(&b, "misaligned offset 4", "aligned", 24);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 0);
    pad_and_data(&b, 32, 100);
    expect_reject(&b, "data section truncated", NULL, 24);
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 0); /* header ends mid-padding */
    b.n -= 2;
    expect_reject(&b, "file ending inside the tensor info", NULL, -1);

    /* 40: Kara's own load-time layout (KR_TYPE_Q4_K_X16), never a file type */
    static const uint32_t bad_types[] = {4, 5, KR_TYPE_Q4_K_X16, 99, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        header(&b, 3, 1, 0);
        tensor_info(&b, "t", 2, ne2, bad_types[i], 0);
        pad_and_data(&b, 32, 256);
        char what[64];
        snprintf(what, sizeof what, "tensor type id %u", bad_types[i]);
        expect_reject(&b, what, "type", 53);
    }
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", 2, (const uint64_t[]){33, 2}, KR_TYPE_Q8_0, 0);
    pad_and_data(&b, 32, 256);
    expect_reject(&b, "Q8_0 row of 33", "block", 53);

    header(&b, 3, 2, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 0);
    tensor_info(&b, "t", 2, ne2, KR_TYPE_F32, 256);
    pad_and_data(&b, 32, 512);
    expect_reject(&b, "duplicate tensor name", "duplicate", 65);
    header(&b, 3, 1, 0);
    u64(&b, 0);
    u32(&b, 1);
    u64(&b, 8);
    u32(&b, 0);
    u64(&b, 0);
    pad_and_data(&b, 32, 32);
    expect_reject(&b, "empty tensor name", NULL, 24);
    header(&b, 3, 1, 0);
    u64(&b, huge);
    pad_and_data(&b, 1, 64);
    expect_reject(&b, "huge tensor name length", "length", 24);
}

/* kara_gguf_open: missing files and files damaged on disk. */
static void test_open(const uint8_t *file, size_t size) {
    const char *err = kara_last_error();
    kara_gguf *g = NULL;
    kr_test_clear_error();
    CHECK(kara_gguf_open("/nonexistent/model.gguf", &g) == KARA_ERR_IO);
    CHECK_MSG(strstr(err, "/nonexistent/model.gguf") != NULL, "message '%s' should name the path", err);
    CHECK(g == NULL);

    const char *path = kr_test_path(kr_test_tmpdir(), "cut.gguf");
    FILE *f = fopen(path, "wb");
    fwrite(file, 1, size / 2, f);
    fclose(f);
    kr_test_clear_error();
    kara_status st = kara_gguf_open(path, &g);
    CHECK(st == KARA_ERR_FORMAT);
    CHECK_MSG(strstr(err, path) && has_offset(err), "message '%s' should name the file and an offset", err);

    path = kr_test_path(kr_test_tmpdir(), "zero.gguf");
    f = fopen(path, "wb");
    fclose(f);
    kr_test_clear_error();
    st = kara_gguf_open(path, &g);
    CHECK_MSG(st != KARA_OK && err[0], "a 0-byte file: status %d, '%s'", (int)st, err);
    CHECK(g == NULL);
}

/* ------------------------------------------------------------------------ */
/* Metadata a model load refuses, with a message naming what is wrong       */
/* ------------------------------------------------------------------------ */

/* Load a file built by w (freed) and expect st with exactly "<path>: want"
 * (want NULL: just st). */
static void expect_load(kr_gguf_writer *w, const char *name, bool vocab_only, kara_status st, const char *want) {
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    CHECK_MSG(kr_gguf_writer_save(w, path) == KARA_OK, "%s: %s", name, kr_gguf_writer_error(w));
    kr_gguf_writer_free(w);
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.vocab_only = vocab_only;
    kara_model *m = NULL;
    kara_status got = kara_model_load(path, &mp, &m);
    CHECK_MSG(got == st, "%s: status %d, want %d (%s)", name, (int)got, (int)st, got ? kara_last_error() : "");
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", path, want);
    CHECK_MSG(!strcmp(kara_last_error(), full), "%s:\n   got  '%s'\n   want '%s'", name, kara_last_error(), full);
    kara_model_free(m);
}

static void test_model_metadata(void) {
    kr_gguf_writer *w;
    /* a NUL inside the architecture is shown, not a place the name ends */
    kr_gguf_writer_create(&w);
    kr_gguf_writer_set_strn(w, "general.architecture", "qwen3\0evil", 10);
    expect_load(w, "arch-nul.gguf", false, KARA_ERR_UNSUPPORTED,
                "architecture 'qwen3\\0evil' is not supported (llama, qwen2, qwen3); the name holds a NUL byte, shown "
                "as \\0");
    /* present with the wrong type is not "missing" */
    kr_gguf_writer_create(&w);
    kr_gguf_writer_set_u32(w, "general.architecture", 3);
    expect_load(w, "arch-u32.gguf", false, KARA_ERR_FORMAT,
                "metadata key 'general.architecture' has the wrong type (uint32, expected string)");
    kr_gguf_writer_create(&w);
    expect_load(w, "arch-none.gguf", false, KARA_ERR_FORMAT, "metadata key 'general.architecture' is missing");
    /* BPE merges: at most 4 per vocabulary token */
    const char *toks[] = {"a", "b", "ab"};
    const char *merges[13];
    for (int i = 0; i < 13; i++) merges[i] = "a b";
    for (int n = 12; n <= 13; n++) {
        kr_gguf_writer_create(&w);
        kr_gguf_writer_set_str(w, "general.architecture", "qwen3");
        kr_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        kr_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
        kr_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
        kr_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)n);
        if (n == 12) {
            const char *path = kr_test_path(kr_test_tmpdir(), "merges-12.gguf");
            CHECK(kr_gguf_writer_save(w, path) == KARA_OK);
            kr_gguf_writer_free(w);
            kara_model_params mp;
            kara_model_params_init(&mp);
            mp.vocab_only = true;
            kara_model *m = NULL;
            CHECK_MSG(kara_model_load(path, &mp, &m) == KARA_OK, "12 merges for 3 tokens: %s", kara_last_error());
            kara_model_free(m);
        } else {
            expect_load(w, "merges-13.gguf", true, KARA_ERR_FORMAT,
                        "tokenizer.ggml.merges: 13 merges for 3 tokens; at most 12 (4 per token) are plausible");
        }
    }
}

int main(void) {
    test_model_metadata();
    size_t size = 0;
    uint8_t *file = make_valid(&size);
    if (!file) return kr_test_finish();
    char err[512];
    kara_gguf *g = NULL;
    CHECK_MSG(parse_exact(file, size, &g, err, sizeof err) == KARA_OK, "the valid file: %s", err);
    if (!g) return kr_test_finish();
    uint64_t data_offset = g->data_offset, data_end = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].offset + g->tensors[i].nbytes > data_end)
            data_end = g->tensors[i].offset + g->tensors[i].nbytes;
    data_end += data_offset;
    close_exact(g);

    test_truncation(file, size, data_offset, data_end);
    test_overwrite(file, size, data_offset);
    test_hostile();
    test_open(file, size);
    free(file);
    return kr_test_finish();
}
