/* test_gguf_roundtrip.c - what the GGUF writer writes, the reader reads back
 * identically: metadata of every value type (nested arrays included),
 * tensors of several types and ranks, alignment of the data section and of
 * every tensor; streamed and one-shot writes give the same bytes; metadata
 * copied value by value from a parsed file survives a second round trip; the
 * public accessors of kara.h agree with the handle; the writer refuses misuse
 * with a message. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "kernels.h"
#include "test_gguf.h"
#include "test_util.h"

static uint64_t rng_state = 0x1234567;
static uint8_t rnd8(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(rng_state >> 56);
}

/* ---- the metadata written, and its check ---- */

static const uint8_t a_u8[] = {0, 1, 255};
static const int8_t a_i8[] = {-128, 0, 127};
static const uint16_t a_u16[] = {0, 65535, 1234};
static const int16_t a_i16[] = {-32768, 32767};
static const uint32_t a_u32[] = {0, 4000000000u, 7};
static const int32_t a_i32[] = {INT32_MIN, -1, INT32_MAX};
static const uint64_t a_u64[] = {UINT64_MAX, 1ull << 60};
static const int64_t a_i64[] = {INT64_MIN, INT64_MAX, -5};
static const float a_f32[] = {0.1f, -1e30f, 3.5f};
static const double a_f64[] = {1.0 / 3.0, -2.5e300};
static const uint8_t a_bool[] = {1, 0, 1, 1};
static const char *const a_str[] = {"alpha", "", "\xc4\xa0the", "<|im_end|>"};

static void write_metadata(kr_gguf_writer *w) {
    CHECK(kr_gguf_writer_set_str(w, "general.architecture", "test") == KARA_OK);
    CHECK(kr_gguf_writer_set_u8(w, "t.u8", 200) == KARA_OK);
    CHECK(kr_gguf_writer_set_i8(w, "t.i8", -100) == KARA_OK);
    CHECK(kr_gguf_writer_set_u16(w, "t.u16", 60000) == KARA_OK);
    CHECK(kr_gguf_writer_set_i16(w, "t.i16", -30000) == KARA_OK);
    CHECK(kr_gguf_writer_set_u32(w, "t.u32", 4000000000u) == KARA_OK);
    CHECK(kr_gguf_writer_set_i32(w, "t.i32", -2000000000) == KARA_OK);
    CHECK(kr_gguf_writer_set_u64(w, "t.u64", (1ull << 60) + 5) == KARA_OK);
    CHECK(kr_gguf_writer_set_i64(w, "t.i64", -(1ll << 60)) == KARA_OK);
    CHECK(kr_gguf_writer_set_f32(w, "t.f32", 0.1f) == KARA_OK);
    CHECK(kr_gguf_writer_set_f64(w, "t.f64", -1.0 / 3.0) == KARA_OK);
    CHECK(kr_gguf_writer_set_bool(w, "t.true", true) == KARA_OK);
    CHECK(kr_gguf_writer_set_bool(w, "t.false", false) == KARA_OK);
    CHECK(kr_gguf_writer_set_str(w, "t.str", "hello, world") == KARA_OK);
    CHECK(kr_gguf_writer_set_str(w, "t.empty", "") == KARA_OK);
    CHECK(kr_gguf_writer_set_strn(w, "t.nul", "a\0b", 3) == KARA_OK);
    /* replaced in place: keeps its position, takes the new value and type */
    CHECK(kr_gguf_writer_set_u32(w, "t.replaced", 1) == KARA_OK);
    CHECK(kr_gguf_writer_set_str(w, "t.removed", "gone") == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.u8", KARA_GGUF_UINT8, a_u8, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.i8", KARA_GGUF_INT8, a_i8, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.u16", KARA_GGUF_UINT16, a_u16, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.i16", KARA_GGUF_INT16, a_i16, 2) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.u32", KARA_GGUF_UINT32, a_u32, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.i32", KARA_GGUF_INT32, a_i32, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.u64", KARA_GGUF_UINT64, a_u64, 2) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.i64", KARA_GGUF_INT64, a_i64, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.f32", KARA_GGUF_FLOAT32, a_f32, 3) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.f64", KARA_GGUF_FLOAT64, a_f64, 2) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.bool", KARA_GGUF_BOOL, a_bool, 4) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr(w, "a.empty", KARA_GGUF_INT32, NULL, 0) == KARA_OK);
    CHECK(kr_gguf_writer_set_arr_str(w, "a.str", a_str, 4) == KARA_OK);
    CHECK(kr_gguf_writer_set_str(w, "t.replaced", "second") == KARA_OK);
    CHECK(kr_gguf_writer_remove(w, "t.removed") == KARA_OK);
    CHECK(kr_gguf_writer_remove(w, "t.not-there") == KARA_OK);

    /* nested: [[1,2,3], [], [-7]] of int32 */
    CHECK(kr_gguf_writer_arr_begin(w, "n.ints", KARA_GGUF_ARRAY, 3) == KARA_OK);
    int32_t v;
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_INT32, 3) == KARA_OK);
    for (v = 1; v <= 3; v++) CHECK(kr_gguf_writer_arr_push(w, &v) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_INT32, 0) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_INT32, 1) == KARA_OK);
    v = -7;
    CHECK(kr_gguf_writer_arr_push(w, &v) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    /* nested strings and three levels: [[["x"], ["", "yz"]], [[3.0 as f64]]] */
    CHECK(kr_gguf_writer_arr_begin(w, "n.deep", KARA_GGUF_ARRAY, 2) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_ARRAY, 2) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_STRING, 1) == KARA_OK);
    CHECK(kr_gguf_writer_arr_push_str(w, "x", 1) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_STRING, 2) == KARA_OK);
    CHECK(kr_gguf_writer_arr_push_str(w, "", 0) == KARA_OK);
    CHECK(kr_gguf_writer_arr_push_str(w, "yz", 2) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_ARRAY, 1) == KARA_OK);
    CHECK(kr_gguf_writer_arr_begin(w, NULL, KARA_GGUF_FLOAT64, 1) == KARA_OK);
    double three = 3.0;
    CHECK(kr_gguf_writer_arr_push(w, &three) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
    CHECK(kr_gguf_writer_arr_end(w) == KARA_OK);
}

static bool key_is(const kara_gguf *g, uint64_t i, const char *key) {
    return i < g->n_kv && kara_gguf_str_eq(g->kv[i].key, key);
}

static const kara_gguf_value *val(const kara_gguf *g, const char *key, kara_gguf_vtype type) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    CHECK_MSG(kv != NULL, "key %s missing", key);
    if (!kv) return NULL;
    CHECK_MSG(kv->value.type == type, "key %s: type %s, expected %s", key, kara_gguf_vtype_name(kv->value.type),
              kara_gguf_vtype_name(type));
    return kv->value.type == type ? &kv->value : NULL;
}

static void check_fixed_arr(const kara_gguf *g, const char *key, kara_gguf_vtype et, const void *expect, uint64_t n,
                            size_t es) {
    const kara_gguf_value *v = val(g, key, KARA_GGUF_ARRAY);
    if (!v) return;
    CHECK_MSG(v->v.arr.type == et && v->v.arr.n == n, "array %s: %s x %llu", key, kara_gguf_vtype_name(v->v.arr.type),
              (unsigned long long)v->v.arr.n);
    if (v->v.arr.n == n && n) CHECK_MSG(memcmp(v->v.arr.data, expect, n * es) == 0, "array %s contents", key);
}

static void check_metadata(const kara_gguf *g) {
    const kara_gguf_value *v;
    CHECK(key_is(g, 0, "general.architecture"));
    if ((v = val(g, "t.u8", KARA_GGUF_UINT8))) CHECK_EQ_INT(v->v.u64, 200);
    if ((v = val(g, "t.i8", KARA_GGUF_INT8))) CHECK_EQ_INT(v->v.i64, -100);
    if ((v = val(g, "t.u16", KARA_GGUF_UINT16))) CHECK_EQ_INT(v->v.u64, 60000);
    if ((v = val(g, "t.i16", KARA_GGUF_INT16))) CHECK_EQ_INT(v->v.i64, -30000);
    if ((v = val(g, "t.u32", KARA_GGUF_UINT32))) CHECK_EQ_INT(v->v.u64, 4000000000u);
    if ((v = val(g, "t.i32", KARA_GGUF_INT32))) CHECK_EQ_INT(v->v.i64, -2000000000);
    if ((v = val(g, "t.u64", KARA_GGUF_UINT64))) CHECK(v->v.u64 == (1ull << 60) + 5);
    if ((v = val(g, "t.i64", KARA_GGUF_INT64))) CHECK(v->v.i64 == -(1ll << 60));
    if ((v = val(g, "t.f32", KARA_GGUF_FLOAT32))) CHECK((float)v->v.f64 == 0.1f);
    if ((v = val(g, "t.f64", KARA_GGUF_FLOAT64))) CHECK(v->v.f64 == -1.0 / 3.0);
    if ((v = val(g, "t.true", KARA_GGUF_BOOL))) CHECK(v->v.u64 == 1);
    if ((v = val(g, "t.false", KARA_GGUF_BOOL))) CHECK(v->v.u64 == 0);
    if ((v = val(g, "t.str", KARA_GGUF_STRING))) CHECK(kara_gguf_str_eq(v->v.str, "hello, world"));
    if ((v = val(g, "t.empty", KARA_GGUF_STRING))) CHECK(v->v.str.len == 0);
    if ((v = val(g, "t.nul", KARA_GGUF_STRING))) CHECK(v->v.str.len == 3 && memcmp(v->v.str.ptr, "a\0b", 3) == 0);
    if ((v = val(g, "t.replaced", KARA_GGUF_STRING))) CHECK(kara_gguf_str_eq(v->v.str, "second"));
    CHECK(key_is(g, 16, "t.replaced")); /* kept its first position */
    CHECK(kara_gguf_find(g, "t.removed") == NULL);

    /* the file is little-endian, like the hosts these tests run on */
    check_fixed_arr(g, "a.u8", KARA_GGUF_UINT8, a_u8, 3, 1);
    check_fixed_arr(g, "a.i8", KARA_GGUF_INT8, a_i8, 3, 1);
    check_fixed_arr(g, "a.u16", KARA_GGUF_UINT16, a_u16, 3, 2);
    check_fixed_arr(g, "a.i16", KARA_GGUF_INT16, a_i16, 2, 2);
    check_fixed_arr(g, "a.u32", KARA_GGUF_UINT32, a_u32, 3, 4);
    check_fixed_arr(g, "a.i32", KARA_GGUF_INT32, a_i32, 3, 4);
    check_fixed_arr(g, "a.u64", KARA_GGUF_UINT64, a_u64, 2, 8);
    check_fixed_arr(g, "a.i64", KARA_GGUF_INT64, a_i64, 3, 8);
    check_fixed_arr(g, "a.f32", KARA_GGUF_FLOAT32, a_f32, 3, 4);
    check_fixed_arr(g, "a.f64", KARA_GGUF_FLOAT64, a_f64, 2, 8);
    check_fixed_arr(g, "a.bool", KARA_GGUF_BOOL, a_bool, 4, 1);
    check_fixed_arr(g, "a.empty", KARA_GGUF_INT32, NULL, 0, 4);
    const kara_gguf_array *a = kara_gguf_get_arr(g, "a.i32");
    if (a) CHECK(kara_gguf_arr_int(a, 0) == INT32_MIN && kara_gguf_arr_int(a, 2) == INT32_MAX);
    a = kara_gguf_get_arr(g, "a.f32");
    if (a) CHECK((float)kara_gguf_arr_float(a, 1) == -1e30f);
    a = kara_gguf_get_arr(g, "a.str");
    CHECK(a && a->type == KARA_GGUF_STRING && a->n == 4);
    if (a && a->n == 4)
        for (int i = 0; i < 4; i++) CHECK_MSG(kara_gguf_str_eq(a->strs[i], a_str[i]), "a.str[%d]", i);

    a = kara_gguf_get_arr(g, "n.ints");
    CHECK(a && a->type == KARA_GGUF_ARRAY && a->n == 3);
    if (a && a->type == KARA_GGUF_ARRAY && a->n == 3) {
        const kara_gguf_array *e0 = &a->items[0].v.arr, *e1 = &a->items[1].v.arr, *e2 = &a->items[2].v.arr;
        CHECK(a->items[0].type == KARA_GGUF_ARRAY && e0->type == KARA_GGUF_INT32 && e0->n == 3);
        if (e0->n == 3) CHECK(kara_gguf_arr_int(e0, 0) == 1 && kara_gguf_arr_int(e0, 2) == 3);
        CHECK(e1->type == KARA_GGUF_INT32 && e1->n == 0);
        CHECK(e2->n == 1 && kara_gguf_arr_int(e2, 0) == -7);
    }
    a = kara_gguf_get_arr(g, "n.deep");
    CHECK(a && a->type == KARA_GGUF_ARRAY && a->n == 2);
    if (a && a->type == KARA_GGUF_ARRAY && a->n == 2) {
        const kara_gguf_array *l1 = &a->items[0].v.arr;
        CHECK(l1->type == KARA_GGUF_ARRAY && l1->n == 2);
        if (l1->type == KARA_GGUF_ARRAY && l1->n == 2) {
            const kara_gguf_array *s0 = &l1->items[0].v.arr, *s1 = &l1->items[1].v.arr;
            CHECK(s0->type == KARA_GGUF_STRING && s0->n == 1 && kara_gguf_str_eq(s0->strs[0], "x"));
            CHECK(s1->type == KARA_GGUF_STRING && s1->n == 2 && s1->strs[0].len == 0 &&
                  kara_gguf_str_eq(s1->strs[1], "yz"));
        }
        const kara_gguf_array *l2 = &a->items[1].v.arr;
        CHECK(l2->type == KARA_GGUF_ARRAY && l2->n == 1);
        if (l2->type == KARA_GGUF_ARRAY && l2->n == 1) {
            const kara_gguf_array *f = &l2->items[0].v.arr;
            CHECK(f->type == KARA_GGUF_FLOAT64 && f->n == 1 && kara_gguf_arr_float(f, 0) == 3.0);
        }
    }
}

/* ---- tensors ---- */

typedef struct tspec {
    const char *name;
    kr_type type;
    int n_dims;
    int64_t ne[4];
    uint8_t *data;
    size_t nbytes;
} tspec;

static tspec k_tensors[] = {
    {"odd.f32", KR_TYPE_F32, 2, {5, 3, 1, 1}, NULL, 0},
    {"vec.f16", KR_TYPE_F16, 1, {7, 1, 1, 1}, NULL, 0},
    {"m.bf16", KR_TYPE_BF16, 2, {32, 2, 1, 1}, NULL, 0},
    {"blk.0.attn_q.weight", KR_TYPE_Q8_0, 2, {64, 3, 1, 1}, NULL, 0},
    {"q4_0.3d", KR_TYPE_Q4_0, 3, {32, 1, 2, 1}, NULL, 0},
    {"q4_1", KR_TYPE_Q4_1, 2, {64, 2, 1, 1}, NULL, 0},
    {"q5_0", KR_TYPE_Q5_0, 2, {32, 3, 1, 1}, NULL, 0},
    {"q5_1", KR_TYPE_Q5_1, 1, {96, 1, 1, 1}, NULL, 0},
    {"q4_k", KR_TYPE_Q4_K, 2, {256, 2, 1, 1}, NULL, 0},
    {"q5_k", KR_TYPE_Q5_K, 2, {512, 1, 1, 1}, NULL, 0},
    {"q6_k", KR_TYPE_Q6_K, 1, {256, 1, 1, 1}, NULL, 0},
    {"four.d", KR_TYPE_F32, 4, {2, 3, 4, 5}, NULL, 0},
};
#define N_TENSORS (sizeof k_tensors / sizeof k_tensors[0])

static void make_tensor_data(void) {
    for (size_t i = 0; i < N_TENSORS; i++) {
        tspec *t = &k_tensors[i];
        const kr_type_info *ti = kr_type_get(t->type);
        t->nbytes =
            (size_t)(t->ne[0] / ti->block_size) * (size_t)ti->type_size * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        t->data = malloc(t->nbytes);
        for (size_t b = 0; b < t->nbytes; b++) t->data[b] = rnd8();
    }
}

static void add_tensors(kr_gguf_writer *w, bool with_data) {
    for (size_t i = 0; i < N_TENSORS; i++) {
        tspec *t = &k_tensors[i];
        CHECK_MSG(kr_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, with_data ? t->data : NULL) ==
                      KARA_OK,
                  "add %s: %s", t->name, kr_gguf_writer_error(w));
        CHECK_EQ_INT(kr_gguf_writer_tensor_nbytes(w, i), t->nbytes);
    }
}

static void check_tensors(const kara_gguf *g, uint64_t alignment) {
    CHECK_EQ_INT(g->n_tensors, N_TENSORS);
    CHECK_EQ_INT(g->alignment, alignment);
    CHECK_MSG(g->data_offset % alignment == 0, "data offset %llu not aligned to %llu",
              (unsigned long long)g->data_offset, (unsigned long long)alignment);
    uint64_t expect_off = 0;
    for (size_t i = 0; i < N_TENSORS && i < g->n_tensors; i++) {
        const tspec *s = &k_tensors[i];
        const kara_gguf_tensor *t = &g->tensors[i];
        CHECK_MSG(kara_gguf_str_eq(t->name, s->name), "tensor %zu name", i);
        CHECK(kara_gguf_find_tensor(g, s->name) == t);
        CHECK_EQ_INT(t->n_dims, s->n_dims);
        for (int d = 0; d < 4; d++) CHECK_EQ_INT(t->ne[d], s->ne[d]);
        CHECK_EQ_INT(t->type, s->type);
        CHECK_EQ_INT(t->nbytes, s->nbytes);
        CHECK_EQ_INT(t->offset, expect_off);
        CHECK_MSG(t->offset % alignment == 0, "%s offset %llu", s->name, (unsigned long long)t->offset);
        CHECK_MSG((uint64_t)((const uint8_t *)t->data - g->base) % alignment == 0, "%s data not aligned", s->name);
        CHECK_MSG(memcmp(t->data, s->data, s->nbytes) == 0, "%s data differs", s->name);
        expect_off = (t->offset + t->nbytes + alignment - 1) / alignment * alignment;
    }
    /* every tensor is padded, the last one included */
    CHECK_EQ_INT(g->size, g->data_offset + expect_off);
}

/* The public accessors (kara.h, "GGUF files") agree with the handle, stop
 * at the ends of the tables, and the array readers refuse what they cannot
 * read. */
static void check_public_api(const kara_gguf *g) {
    CHECK_EQ_INT(kara_gguf_version(g), g->version);
    CHECK_EQ_INT(kara_gguf_size(g), g->size);
    CHECK_EQ_INT(kara_gguf_alignment(g), g->alignment);
    CHECK_EQ_INT(kara_gguf_data_offset(g), g->data_offset);
    CHECK_EQ_INT(kara_gguf_n_kv(g), g->n_kv);
    CHECK_EQ_INT(kara_gguf_n_tensors(g), g->n_tensors);
    for (uint64_t i = 0; i < g->n_kv; i++) CHECK(kara_gguf_kv_at(g, i) == &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors; i++) CHECK(kara_gguf_tensor_at(g, i) == &g->tensors[i]);
    CHECK(kara_gguf_kv_at(g, g->n_kv) == NULL && kara_gguf_kv_at(g, UINT64_MAX) == NULL);
    CHECK(kara_gguf_tensor_at(g, g->n_tensors) == NULL && kara_gguf_tensor_at(g, UINT64_MAX) == NULL);
    CHECK(kara_gguf_find(g, "t.missing") == NULL && kara_gguf_find_tensor(g, "missing") == NULL);
    CHECK(!strcmp(kara_gguf_type_name(KR_TYPE_Q4_K), "Q4_K") && !strcmp(kara_gguf_type_name(KR_TYPE_F32), "F32"));
    CHECK(!strcmp(kara_gguf_type_name(KR_TYPE_Q4_K_X16), "?") && !strcmp(kara_gguf_type_name(1000), "?"));
    CHECK(!strcmp(kara_gguf_vtype_name(KARA_GGUF_FLOAT64), "float64") &&
          !strcmp(kara_gguf_vtype_name(KARA_GGUF_VTYPE_COUNT), "unknown"));
    uint64_t u = 77;
    int64_t i64 = 77;
    CHECK(!kara_gguf_get_u64(g, "t.i64", &u) && u == 77); /* negative */
    CHECK(!kara_gguf_get_i64(g, "t.str", &i64) && i64 == 77);
    CHECK(kara_gguf_get_u64(g, "t.true", &u) && u == 1);
    const kara_gguf_array *a = kara_gguf_get_arr(g, "a.i32");
    CHECK(a && kara_gguf_arr_int(a, a->n) == 0 && kara_gguf_arr_float(a, 1) == -1.0);
    a = kara_gguf_get_arr(g, "a.f32");
    CHECK(a && kara_gguf_arr_int(a, 0) == 0 && kara_gguf_arr_float(a, a->n) == 0.0);
    a = kara_gguf_get_arr(g, "a.str");
    CHECK(a && kara_gguf_arr_int(a, 0) == 0 && kara_gguf_arr_float(a, 0) == 0.0);
    CHECK(kara_gguf_get_arr(g, "t.u8") == NULL);
}

static char *write_file(const char *name, uint32_t alignment, bool streamed, size_t piece, size_t *size) {
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    kr_gguf_writer *w;
    CHECK(kr_gguf_writer_create(&w) == KARA_OK);
    write_metadata(w);
    if (alignment) CHECK(kr_gguf_writer_set_u32(w, "general.alignment", alignment) == KARA_OK);
    add_tensors(w, !streamed);
    if (!streamed) {
        CHECK_MSG(kr_gguf_writer_save(w, path) == KARA_OK, "save: %s", kr_gguf_writer_error(w));
    } else {
        CHECK(kr_gguf_writer_begin(w, path) == KARA_OK);
        /* all tensors' bytes back to back, in pieces that straddle tensors */
        size_t total = 0;
        for (size_t i = 0; i < N_TENSORS; i++) total += k_tensors[i].nbytes;
        uint8_t *all = malloc(total);
        size_t at = 0;
        for (size_t i = 0; i < N_TENSORS; i++) {
            memcpy(all + at, k_tensors[i].data, k_tensors[i].nbytes);
            at += k_tensors[i].nbytes;
        }
        for (size_t o = 0; o < total; o += piece) {
            size_t k = total - o < piece ? total - o : piece;
            CHECK(kr_gguf_writer_write(w, all + o, k) == KARA_OK);
        }
        free(all);
        CHECK_MSG(kr_gguf_writer_end(w) == KARA_OK, "end: %s", kr_gguf_writer_error(w));
    }
    kr_gguf_writer_free(w);
    char *bytes = kr_test_read_file(path, size);
    CHECK_MSG(bytes != NULL, "cannot read back %s", path);
    return bytes;
}

static void test_roundtrip(void) {
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *one_shot = write_file("rt-default.gguf", 0, false, 0, &n1);
    char *streamed = write_file("rt-stream.gguf", 0, true, 7, &n2);
    char *aligned = write_file("rt-align64.gguf", 64, true, 1000, &n3);
    if (!one_shot || !streamed || !aligned) return;
    CHECK_MSG(n1 == n2 && memcmp(one_shot, streamed, n1) == 0, "streamed and one-shot files differ");

    kara_gguf *g = NULL;
    CHECK_MSG(kr_gguf_parse(one_shot, n1, &g) == KARA_OK, "parse: %s", kara_last_error());
    if (g) {
        CHECK_EQ_INT(g->version, 3);
        check_metadata(g);
        check_tensors(g, KR_GGUF_DEFAULT_ALIGNMENT);
        CHECK(kara_gguf_find(g, "general.alignment") == NULL);
    }

    /* the same through the file mapping, with alignment 64 */
    kara_gguf *g64 = NULL;
    CHECK_MSG(kara_gguf_open(kr_test_path(kr_test_tmpdir(), "rt-align64.gguf"), &g64) == KARA_OK, "open: %s",
              kara_last_error());
    if (g64) {
        check_metadata(g64);
        check_tensors(g64, 64);
        check_public_api(g64);
    }

    /* copy every value from the parsed file into a new writer: the second
     * file holds identical metadata (type for type, byte for byte) */
    if (g) {
        kr_gguf_writer *w;
        CHECK(kr_gguf_writer_create(&w) == KARA_OK);
        for (uint64_t i = 0; i < g->n_kv; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
            CHECK_MSG(kr_gguf_writer_set_value(w, key, &g->kv[i].value) == KARA_OK, "set_value %s: %s", key,
                      kr_gguf_writer_error(w));
        }
        add_tensors(w, true);
        const char *path = kr_test_path(kr_test_tmpdir(), "rt-copy.gguf");
        CHECK(kr_gguf_writer_save(w, path) == KARA_OK);
        kr_gguf_writer_free(w);
        size_t nc = 0;
        char *copy = kr_test_read_file(path, &nc);
        CHECK_MSG(copy && nc == n1 && memcmp(copy, one_shot, n1) == 0, "copied file differs from the original");
        kara_gguf *gc = NULL;
        if (copy && kr_gguf_parse(copy, nc, &gc) == KARA_OK) {
            CHECK_EQ_INT(gc->n_kv, g->n_kv);
            for (uint64_t i = 0; i < g->n_kv && i < gc->n_kv; i++)
                CHECK_MSG(kr_test_gguf_value_eq(&g->kv[i].value, &gc->kv[i].value), "value %llu differs after copy",
                          (unsigned long long)i);
            kara_gguf_close(gc);
        } else {
            CHECK_MSG(false, "copied file does not parse: %s", kara_last_error());
        }
        free(copy);
    }
    kara_gguf_close(g);
    kara_gguf_close(g64);
    free(one_shot);
    free(streamed);
    free(aligned);
}

/* A file with no tensors and no metadata is valid; so is one with large
 * alignment. */
static void test_edge_files(void) {
    kr_gguf_writer *w;
    CHECK(kr_gguf_writer_create(&w) == KARA_OK);
    const char *path = kr_test_path(kr_test_tmpdir(), "empty.gguf");
    CHECK(kr_gguf_writer_save(w, path) == KARA_OK);
    kr_gguf_writer_free(w);
    kara_gguf *g = NULL;
    CHECK_MSG(kara_gguf_open(path, &g) == KARA_OK, "empty file: %s", kara_last_error());
    if (g) {
        CHECK_EQ_INT(g->n_kv, 0);
        CHECK_EQ_INT(g->n_tensors, 0);
        CHECK_EQ_INT(g->size, 32); /* 24-byte header padded to 32 */
        kara_gguf_close(g);
    }

    CHECK(kr_gguf_writer_create(&w) == KARA_OK);
    CHECK(kr_gguf_writer_set_u32(w, "general.alignment", 4096) == KARA_OK);
    float x[3] = {1, 2, 3};
    int64_t ne[1] = {3};
    CHECK(kr_gguf_writer_add_tensor(w, "a", KR_TYPE_F32, 1, ne, x) == KARA_OK);
    CHECK(kr_gguf_writer_add_tensor(w, "b", KR_TYPE_F32, 1, ne, x) == KARA_OK);
    path = kr_test_path(kr_test_tmpdir(), "page.gguf");
    CHECK(kr_gguf_writer_save(w, path) == KARA_OK);
    kr_gguf_writer_free(w);
    g = NULL;
    CHECK_MSG(kara_gguf_open(path, &g) == KARA_OK, "page-aligned file: %s", kara_last_error());
    if (g) {
        CHECK_EQ_INT(g->data_offset, 4096);
        CHECK_EQ_INT(g->tensors[1].offset, 4096);
        CHECK(memcmp(g->tensors[1].data, x, sizeof x) == 0);
        CHECK_EQ_INT(g->size, 3 * 4096);
        kara_gguf_close(g);
    }
}

/* Misuse is refused with a status and a message, never a bad file. */
static void expect_fail(kr_gguf_writer *w, kara_status st, const char *what) {
    CHECK_MSG(st != KARA_OK, "%s was accepted", what);
    CHECK_MSG(kr_gguf_writer_error(w)[0] != 0, "%s: empty error message", what);
}

static void test_writer_errors(void) {
    kr_gguf_writer *w;
    int32_t i32 = 1;
    int64_t ne[2] = {33, 2};

#define FRESH() (kr_gguf_writer_free(w), kr_gguf_writer_create(&w))
    kr_gguf_writer_create(&w);
    CHECK(kr_gguf_writer_arr_begin(w, "k", KARA_GGUF_INT32, 2) == KARA_OK);
    CHECK(kr_gguf_writer_arr_push(w, &i32) == KARA_OK);
    expect_fail(w, kr_gguf_writer_arr_end(w), "arr_end after 1 of 2 elements");

    FRESH();
    CHECK(kr_gguf_writer_arr_begin(w, "k", KARA_GGUF_INT32, 1) == KARA_OK);
    expect_fail(w, kr_gguf_writer_arr_push_str(w, "x", 1), "a string pushed into an int32 array");

    FRESH();
    CHECK(kr_gguf_writer_arr_begin(w, "k", KARA_GGUF_INT32, 1) == KARA_OK);
    CHECK(kr_gguf_writer_arr_push(w, &i32) == KARA_OK);
    expect_fail(w, kr_gguf_writer_arr_push(w, &i32), "more elements than declared");

    FRESH();
    CHECK(kr_gguf_writer_arr_begin(w, "k", KARA_GGUF_ARRAY, 1) == KARA_OK);
    expect_fail(w, kr_gguf_writer_arr_begin(w, "nested", KARA_GGUF_INT32, 1), "a key on a nested array");

    FRESH();
    CHECK(kr_gguf_writer_arr_begin(w, "k", KARA_GGUF_INT32, 1) == KARA_OK);
    expect_fail(w, kr_gguf_writer_set_u32(w, "other", 1), "a key set while an array is open");

    FRESH();
    expect_fail(w, kr_gguf_writer_set_arr(w, "k", KARA_GGUF_STRING, a_str, 1), "set_arr of strings");

    FRESH();
    expect_fail(w, kr_gguf_writer_set_u32(w, "", 1), "an empty key");

    FRESH();
    expect_fail(w, kr_gguf_writer_set_u32(w, "general.alignment", 48), "alignment 48");

    FRESH();
    expect_fail(w, kr_gguf_writer_set_u64(w, "general.alignment", 64), "a uint64 alignment");

    FRESH();
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", KR_TYPE_Q8_0, 2, ne, NULL), "a Q8_0 row of 33");

    FRESH();
    ne[0] = 32;
    CHECK(kr_gguf_writer_add_tensor(w, "t", KR_TYPE_Q8_0, 2, ne, NULL) == KARA_OK);
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 2, ne, NULL), "a duplicate tensor name");

    FRESH();
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 5, ne, NULL), "5 dims");

    FRESH();
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", (kr_type)4, 2, ne, NULL), "type id 4");

    FRESH();
    ne[0] = 0;
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 2, ne, NULL), "a zero dimension");
    ne[0] = 32;

    FRESH();
    ne[0] = INT64_MAX / 2;
    ne[1] = INT64_MAX / 2;
    expect_fail(w, kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 2, ne, NULL), "an overflowing size");
    ne[0] = 32;
    ne[1] = 2;

    FRESH();
    expect_fail(w, kr_gguf_writer_save(w, "/nonexistent-dir/x.gguf"), "an uncreatable path");

    /* data: too much, too little, before begin, metadata after begin */
    const char *path = kr_test_path(kr_test_tmpdir(), "misuse.gguf");
    uint8_t buf[300] = {0};
    FRESH();
    CHECK(kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 1, ne, NULL) == KARA_OK);
    expect_fail(w, kr_gguf_writer_write(w, buf, 4), "data before begin");
    FRESH();
    CHECK(kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 1, ne, NULL) == KARA_OK);
    CHECK(kr_gguf_writer_begin(w, path) == KARA_OK);
    expect_fail(w, kr_gguf_writer_write(w, buf, 129), "129 bytes for a 128-byte tensor");
    FRESH();
    CHECK(kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 1, ne, NULL) == KARA_OK);
    CHECK(kr_gguf_writer_begin(w, path) == KARA_OK);
    CHECK(kr_gguf_writer_write(w, buf, 100) == KARA_OK);
    expect_fail(w, kr_gguf_writer_end(w), "end after 100 of 128 bytes");
    FRESH();
    CHECK(kr_gguf_writer_begin(w, path) == KARA_OK);
    expect_fail(w, kr_gguf_writer_set_u32(w, "late", 1), "metadata after begin");
    FRESH();
    CHECK(kr_gguf_writer_add_tensor(w, "t", KR_TYPE_F32, 1, ne, NULL) == KARA_OK);
    expect_fail(w, kr_gguf_writer_save(w, path), "save without tensor data");
#undef FRESH
    kr_gguf_writer_free(w);
}

int main(void) {
    make_tensor_data();
    test_roundtrip();
    test_edge_files();
    test_writer_errors();
    for (size_t i = 0; i < N_TENSORS; i++) free(k_tensors[i].data);
    return kr_test_finish();
}
