/*
 * gguf_writer.c - GGUF v3 writer: metadata is encoded into one byte buffer
 * per key as it is set; tensor infos are kept until kr_gguf_writer_begin
 * lays out the file; tensor data is streamed straight to the file.
 */
#include "gguf_writer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safe_output.h"

#define GGUF_VERSION 3
#define MAX_NEST 16

/* ------------------------------------------------------------------------ */
/* Growable byte buffer with little-endian encoders                          */
/* ------------------------------------------------------------------------ */

typedef struct bytebuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytebuf;

static void bb_reserve(bytebuf *b, size_t extra) {
    if (b->oom) return;
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void bb_put(bytebuf *b, const void *src, size_t n) {
    bb_reserve(b, n);
    if (b->oom) return;
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* Encode an unsigned integer of `size` bytes little-endian, whatever the
 * host's byte order. */
static void bb_put_le(bytebuf *b, uint64_t v, int size) {
    uint8_t tmp[8];
    for (int i = 0; i < size; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    bb_put(b, tmp, (size_t)size);
}

static void bb_put_u32(bytebuf *b, uint32_t v) { bb_put_le(b, v, 4); }
static void bb_put_u64(bytebuf *b, uint64_t v) { bb_put_le(b, v, 8); }

static void bb_put_str(bytebuf *b, const char *s, uint64_t len) {
    bb_put_u64(b, len);
    bb_put(b, s, (size_t)len);
}

/* Bytes of one element of a fixed-size value type, 0 for STRING/ARRAY or an
 * unknown type. */
static int vtype_size(kara_gguf_vtype t) {
    switch (t) {
    case KARA_GGUF_UINT8:
    case KARA_GGUF_INT8:
    case KARA_GGUF_BOOL: return 1;
    case KARA_GGUF_UINT16:
    case KARA_GGUF_INT16: return 2;
    case KARA_GGUF_UINT32:
    case KARA_GGUF_INT32:
    case KARA_GGUF_FLOAT32: return 4;
    case KARA_GGUF_UINT64:
    case KARA_GGUF_INT64:
    case KARA_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Encode one fixed-size element given in host order. */
static void bb_put_elem(bytebuf *b, kara_gguf_vtype t, const void *src) {
    int size = vtype_size(t);
    uint64_t v = 0;
    switch (size) {
    case 1: {
        uint8_t x;
        memcpy(&x, src, 1);
        v = x;
        break;
    }
    case 2: {
        uint16_t x;
        memcpy(&x, src, 2);
        v = x;
        break;
    }
    case 4: {
        uint32_t x;
        memcpy(&x, src, 4);
        v = x;
        break;
    }
    case 8: {
        uint64_t x;
        memcpy(&x, src, 8);
        v = x;
        break;
    }
    default: return;
    }
    if (t == KARA_GGUF_BOOL) v = v ? 1 : 0;
    bb_put_le(b, v, size);
}

/* ------------------------------------------------------------------------ */
/* Writer state                                                              */
/* ------------------------------------------------------------------------ */

typedef struct kv_entry {
    char *key;
    bytebuf blob; /* encoded key, type and value */
} kv_entry;

typedef struct tensor_entry {
    char *name;
    kr_type type;
    int n_dims;
    int64_t ne[4];
    const void *data;
    uint64_t nbytes;
    uint64_t offset; /* relative to the data section */
} tensor_entry;

typedef struct nest_level {
    kara_gguf_vtype elem;
    uint64_t n, pushed;
} nest_level;

struct kr_gguf_writer {
    kv_entry *kv;
    size_t n_kv, cap_kv;
    tensor_entry *t;
    size_t n_t, cap_t;

    /* an array being built element by element */
    char *pending_key;
    bytebuf pending;
    nest_level nest[MAX_NEST];
    int depth;

    /* file output */
    FILE *f; /* on out's temporary file (safe_output.h) */
    kr_out_file out;
    bool out_begun; /* out holds a temporary file or names to release */
    char *path;
    uint64_t alignment;
    uint64_t pos; /* bytes written so far */
    uint64_t data_offset;
    size_t cur;        /* tensor being filled */
    uint64_t cur_done; /* bytes of it written */

    bool failed;
    char err[512];
};

static kara_status fail(kr_gguf_writer *w, kara_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    w->failed = true;
    return st;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

kara_status kr_gguf_writer_create(kr_gguf_writer **out) {
    if (!out) return KARA_ERR_ARG;
    *out = calloc(1, sizeof **out);
    if (!*out) return KARA_ERR_NOMEM;
    (*out)->alignment = KR_GGUF_DEFAULT_ALIGNMENT;
    return KARA_OK;
}

void kr_gguf_writer_free(kr_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].blob.p);
    }
    free(w->kv);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->pending_key);
    free(w->pending.p);
    if (w->out_begun) kr_out_discard(&w->out); /* an unfinished file: its temporary goes, the path is untouched */
    free(w->path);
    free(w);
}

const char *kr_gguf_writer_error(const kr_gguf_writer *w) { return w ? w->err : "no writer"; }

uint64_t kr_gguf_writer_n_kv(const kr_gguf_writer *w) { return w ? w->n_kv : 0; }
uint64_t kr_gguf_writer_n_tensors(const kr_gguf_writer *w) { return w ? w->n_t : 0; }

uint64_t kr_gguf_writer_tensor_nbytes(const kr_gguf_writer *w, uint64_t i) {
    return (w && i < w->n_t) ? w->t[i].nbytes : 0;
}

/* Common checks before any metadata change. */
static kara_status check_meta(kr_gguf_writer *w, const char *key, bool nested_ok) {
    if (!w) return KARA_ERR_ARG;
    if (w->failed) return KARA_ERR_ARG;
    if (w->f) return fail(w, KARA_ERR_ARG, "metadata cannot change after kr_gguf_writer_begin");
    if (!nested_ok && w->depth > 0)
        return fail(w, KARA_ERR_ARG, "array '%s' is still open", w->pending_key ? w->pending_key : "?");
    if (key) {
        size_t len = strlen(key);
        if (len == 0 || len > 65535) return fail(w, KARA_ERR_ARG, "metadata key of length %zu", len);
    }
    return KARA_OK;
}

static ptrdiff_t find_kv(const kr_gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return (ptrdiff_t)i;
    return -1;
}

/* Read general.alignment back from its encoded value so the layout follows
 * whatever was set last. */
static kara_status note_alignment(kr_gguf_writer *w, const char *key, const bytebuf *blob) {
    if (strcmp(key, "general.alignment") != 0) return KARA_OK;
    size_t at = 8 + strlen(key); /* past the key's length and bytes */
    uint32_t type = 0, v = 0;
    for (int i = 0; i < 4; i++) type |= (uint32_t)blob->p[at + i] << (8 * i);
    if (type != KARA_GGUF_UINT32)
        return fail(w, KARA_ERR_ARG, "general.alignment must be a UINT32 (got %s)",
                    kara_gguf_vtype_name((kara_gguf_vtype)type));
    for (int i = 0; i < 4; i++) v |= (uint32_t)blob->p[at + 4 + i] << (8 * i);
    if (v == 0 || (v & (v - 1)) != 0) return fail(w, KARA_ERR_ARG, "general.alignment %u is not a power of two", v);
    w->alignment = v;
    return KARA_OK;
}

/* Store an encoded key/value: replace the key's value in place, or append. */
static kara_status commit_kv(kr_gguf_writer *w, const char *key, bytebuf *blob) {
    if (blob->oom) {
        free(blob->p);
        return fail(w, KARA_ERR_NOMEM, "out of memory encoding '%s'", key);
    }
    kara_status st = note_alignment(w, key, blob);
    if (st != KARA_OK) {
        free(blob->p);
        return st;
    }
    ptrdiff_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kv[i].blob.p);
        w->kv[i].blob = *blob;
        return KARA_OK;
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        kv_entry *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            free(blob->p);
            return fail(w, KARA_ERR_NOMEM, "out of memory adding '%s'", key);
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = dup_str(key);
    if (!k) {
        free(blob->p);
        return fail(w, KARA_ERR_NOMEM, "out of memory adding '%s'", key);
    }
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].blob = *blob;
    w->n_kv++;
    return KARA_OK;
}

static void start_kv(bytebuf *b, const char *key, kara_gguf_vtype type) {
    bb_put_str(b, key, strlen(key));
    bb_put_u32(b, (uint32_t)type);
}

static kara_status set_scalar(kr_gguf_writer *w, const char *key, kara_gguf_vtype type, const void *v) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    if (!key) return fail(w, KARA_ERR_ARG, "NULL metadata key");
    bytebuf b = {0};
    start_kv(&b, key, type);
    bb_put_elem(&b, type, v);
    return commit_kv(w, key, &b);
}

kara_status kr_gguf_writer_set_u8(kr_gguf_writer *w, const char *key, uint8_t v) {
    return set_scalar(w, key, KARA_GGUF_UINT8, &v);
}
kara_status kr_gguf_writer_set_i8(kr_gguf_writer *w, const char *key, int8_t v) {
    return set_scalar(w, key, KARA_GGUF_INT8, &v);
}
kara_status kr_gguf_writer_set_u16(kr_gguf_writer *w, const char *key, uint16_t v) {
    return set_scalar(w, key, KARA_GGUF_UINT16, &v);
}
kara_status kr_gguf_writer_set_i16(kr_gguf_writer *w, const char *key, int16_t v) {
    return set_scalar(w, key, KARA_GGUF_INT16, &v);
}
kara_status kr_gguf_writer_set_u32(kr_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, KARA_GGUF_UINT32, &v);
}
kara_status kr_gguf_writer_set_i32(kr_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, KARA_GGUF_INT32, &v);
}
kara_status kr_gguf_writer_set_u64(kr_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, KARA_GGUF_UINT64, &v);
}
kara_status kr_gguf_writer_set_i64(kr_gguf_writer *w, const char *key, int64_t v) {
    return set_scalar(w, key, KARA_GGUF_INT64, &v);
}
kara_status kr_gguf_writer_set_f32(kr_gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, KARA_GGUF_FLOAT32, &v);
}
kara_status kr_gguf_writer_set_f64(kr_gguf_writer *w, const char *key, double v) {
    return set_scalar(w, key, KARA_GGUF_FLOAT64, &v);
}

kara_status kr_gguf_writer_set_bool(kr_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, KARA_GGUF_BOOL, &b);
}

kara_status kr_gguf_writer_set_strn(kr_gguf_writer *w, const char *key, const char *s, uint64_t len) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    if (!key || (!s && len)) return fail(w, KARA_ERR_ARG, "NULL key or string");
    bytebuf b = {0};
    start_kv(&b, key, KARA_GGUF_STRING);
    bb_put_str(&b, s, len);
    return commit_kv(w, key, &b);
}

kara_status kr_gguf_writer_set_str(kr_gguf_writer *w, const char *key, const char *s) {
    if (!s) return kr_gguf_writer_set_strn(w, key, NULL, 1); /* reports the NULL */
    return kr_gguf_writer_set_strn(w, key, s, strlen(s));
}

kara_status kr_gguf_writer_set_arr(kr_gguf_writer *w, const char *key, kara_gguf_vtype elem, const void *data,
                                   uint64_t n) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    int size = vtype_size(elem);
    if (!key) return fail(w, KARA_ERR_ARG, "NULL metadata key");
    if (size == 0) return fail(w, KARA_ERR_ARG, "'%s': set_arr needs a fixed-size element type", key);
    if (n && !data) return fail(w, KARA_ERR_ARG, "'%s': NULL array data", key);
    bytebuf b = {0};
    start_kv(&b, key, KARA_GGUF_ARRAY);
    bb_put_u32(&b, (uint32_t)elem);
    bb_put_u64(&b, n);
    bb_reserve(&b, (size_t)(n * (uint64_t)size));
    for (uint64_t i = 0; i < n && !b.oom; i++) bb_put_elem(&b, elem, (const uint8_t *)data + i * (uint64_t)size);
    return commit_kv(w, key, &b);
}

kara_status kr_gguf_writer_set_arr_str(kr_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    if (!key) return fail(w, KARA_ERR_ARG, "NULL metadata key");
    if (n && !strs) return fail(w, KARA_ERR_ARG, "'%s': NULL string array", key);
    bytebuf b = {0};
    start_kv(&b, key, KARA_GGUF_ARRAY);
    bb_put_u32(&b, KARA_GGUF_STRING);
    bb_put_u64(&b, n);
    for (uint64_t i = 0; i < n && !b.oom; i++) {
        if (!strs[i]) {
            free(b.p);
            return fail(w, KARA_ERR_ARG, "'%s': string %llu is NULL", key, (unsigned long long)i);
        }
        bb_put_str(&b, strs[i], strlen(strs[i]));
    }
    return commit_kv(w, key, &b);
}

/* ---- arrays element by element ---- */

/* Count one element pushed into the innermost open array, checking its type. */
static kara_status count_push(kr_gguf_writer *w, kara_gguf_vtype type) {
    if (w->depth == 0) return fail(w, KARA_ERR_ARG, "no array is open");
    nest_level *lv = &w->nest[w->depth - 1];
    if (lv->elem != type)
        return fail(w, KARA_ERR_ARG, "'%s': pushing a %s into an array of %s", w->pending_key,
                    kara_gguf_vtype_name(type), kara_gguf_vtype_name(lv->elem));
    if (lv->pushed >= lv->n)
        return fail(w, KARA_ERR_ARG, "'%s': more than the %llu elements declared", w->pending_key,
                    (unsigned long long)lv->n);
    lv->pushed++;
    return KARA_OK;
}

kara_status kr_gguf_writer_arr_begin(kr_gguf_writer *w, const char *key, kara_gguf_vtype elem, uint64_t n) {
    kara_status st = check_meta(w, NULL, true);
    if (st != KARA_OK) return st;
    if ((int)elem < 0 || elem >= KARA_GGUF_VTYPE_COUNT)
        return fail(w, KARA_ERR_ARG, "unknown element type %d", (int)elem);
    if (w->depth == 0) {
        if (!key) return fail(w, KARA_ERR_ARG, "the outermost array needs a key");
        st = check_meta(w, key, false);
        if (st != KARA_OK) return st;
        w->pending_key = dup_str(key);
        if (!w->pending_key) return fail(w, KARA_ERR_NOMEM, "out of memory");
        memset(&w->pending, 0, sizeof w->pending);
        start_kv(&w->pending, key, KARA_GGUF_ARRAY);
    } else {
        if (key) return fail(w, KARA_ERR_ARG, "a nested array takes no key ('%s')", key);
        if (w->depth >= MAX_NEST) return fail(w, KARA_ERR_ARG, "arrays nested deeper than %d", MAX_NEST);
        st = count_push(w, KARA_GGUF_ARRAY);
        if (st != KARA_OK) return st;
    }
    bb_put_u32(&w->pending, (uint32_t)elem);
    bb_put_u64(&w->pending, n);
    w->nest[w->depth].elem = elem;
    w->nest[w->depth].n = n;
    w->nest[w->depth].pushed = 0;
    w->depth++;
    return KARA_OK;
}

kara_status kr_gguf_writer_arr_push(kr_gguf_writer *w, const void *elem) {
    kara_status st = check_meta(w, NULL, true);
    if (st != KARA_OK) return st;
    if (w->depth == 0) return fail(w, KARA_ERR_ARG, "no array is open");
    kara_gguf_vtype t = w->nest[w->depth - 1].elem;
    if (vtype_size(t) == 0)
        return fail(w, KARA_ERR_ARG, "'%s': arr_push into an array of %s", w->pending_key, kara_gguf_vtype_name(t));
    if (!elem) return fail(w, KARA_ERR_ARG, "NULL element");
    st = count_push(w, t);
    if (st != KARA_OK) return st;
    bb_put_elem(&w->pending, t, elem);
    return KARA_OK;
}

kara_status kr_gguf_writer_arr_push_str(kr_gguf_writer *w, const char *s, uint64_t len) {
    kara_status st = check_meta(w, NULL, true);
    if (st != KARA_OK) return st;
    if (!s && len) return fail(w, KARA_ERR_ARG, "NULL string");
    st = count_push(w, KARA_GGUF_STRING);
    if (st != KARA_OK) return st;
    bb_put_str(&w->pending, s, len);
    return KARA_OK;
}

kara_status kr_gguf_writer_arr_end(kr_gguf_writer *w) {
    kara_status st = check_meta(w, NULL, true);
    if (st != KARA_OK) return st;
    if (w->depth == 0) return fail(w, KARA_ERR_ARG, "arr_end without an open array");
    nest_level *lv = &w->nest[w->depth - 1];
    if (lv->pushed != lv->n)
        return fail(w, KARA_ERR_ARG, "'%s': %llu of %llu elements pushed", w->pending_key,
                    (unsigned long long)lv->pushed, (unsigned long long)lv->n);
    w->depth--;
    if (w->depth > 0) return KARA_OK;
    char *key = w->pending_key;
    w->pending_key = NULL;
    st = commit_kv(w, key, &w->pending);
    memset(&w->pending, 0, sizeof w->pending);
    free(key);
    return st;
}

/* ---- values from the reader ---- */

/* Encode an array value from the reader: fixed-size elements are already
 * little-endian in the file image and are copied as they are. */
static bool enc_array(bytebuf *b, const kara_gguf_array *a, int depth) {
    if (depth > MAX_NEST) return false;
    bb_put_u32(b, (uint32_t)a->type);
    bb_put_u64(b, a->n);
    if (a->type == KARA_GGUF_STRING) {
        for (uint64_t i = 0; i < a->n; i++) bb_put_str(b, a->strs[i].ptr, a->strs[i].len);
    } else if (a->type == KARA_GGUF_ARRAY) {
        for (uint64_t i = 0; i < a->n; i++) {
            if (a->items[i].type != KARA_GGUF_ARRAY || !enc_array(b, &a->items[i].v.arr, depth + 1)) return false;
        }
    } else {
        int size = vtype_size(a->type);
        if (size == 0) return false;
        bb_put(b, a->data, (size_t)(a->n * (uint64_t)size));
    }
    return true;
}

kara_status kr_gguf_writer_set_value(kr_gguf_writer *w, const char *key, const kara_gguf_value *v) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    if (!key || !v) return fail(w, KARA_ERR_ARG, "NULL key or value");
    bytebuf b = {0};
    start_kv(&b, key, v->type);
    switch (v->type) {
    case KARA_GGUF_UINT8:
    case KARA_GGUF_UINT16:
    case KARA_GGUF_UINT32:
    case KARA_GGUF_UINT64:
    case KARA_GGUF_BOOL: bb_put_le(&b, v->v.u64, vtype_size(v->type)); break;
    case KARA_GGUF_INT8:
    case KARA_GGUF_INT16:
    case KARA_GGUF_INT32:
    case KARA_GGUF_INT64: bb_put_le(&b, (uint64_t)v->v.i64, vtype_size(v->type)); break;
    case KARA_GGUF_FLOAT32: {
        float f = (float)v->v.f64;
        uint32_t u;
        memcpy(&u, &f, 4);
        bb_put_u32(&b, u);
        break;
    }
    case KARA_GGUF_FLOAT64: {
        uint64_t u;
        memcpy(&u, &v->v.f64, 8);
        bb_put_u64(&b, u);
        break;
    }
    case KARA_GGUF_STRING: bb_put_str(&b, v->v.str.ptr, v->v.str.len); break;
    case KARA_GGUF_ARRAY:
        if (!enc_array(&b, &v->v.arr, 0)) {
            free(b.p);
            return fail(w, KARA_ERR_ARG, "'%s': malformed array value", key);
        }
        break;
    default: free(b.p); return fail(w, KARA_ERR_ARG, "'%s': unknown value type %d", key, (int)v->type);
    }
    return commit_kv(w, key, &b);
}

kara_status kr_gguf_writer_remove(kr_gguf_writer *w, const char *key) {
    kara_status st = check_meta(w, key, false);
    if (st != KARA_OK) return st;
    if (!key) return fail(w, KARA_ERR_ARG, "NULL metadata key");
    ptrdiff_t i = find_kv(w, key);
    if (i < 0) return KARA_OK;
    free(w->kv[i].key);
    free(w->kv[i].blob.p);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!strcmp(key, "general.alignment")) w->alignment = KR_GGUF_DEFAULT_ALIGNMENT;
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Tensors and the file                                                      */
/* ------------------------------------------------------------------------ */

kara_status kr_gguf_writer_add_tensor(kr_gguf_writer *w, const char *name, kr_type type, int n_dims, const int64_t *ne,
                                      const void *data) {
    kara_status st = check_meta(w, NULL, false);
    if (st != KARA_OK) return st;
    if (!name || !*name || strlen(name) > 65535) return fail(w, KARA_ERR_ARG, "bad tensor name");
    if (n_dims < 1 || n_dims > 4 || !ne) return fail(w, KARA_ERR_ARG, "tensor '%s': %d dims", name, n_dims);
    const kr_type_info *ti = kr_type_get((uint32_t)type);
    if (!ti || ti->internal) return fail(w, KARA_ERR_ARG, "tensor '%s': unknown type %d", name, (int)type);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return fail(w, KARA_ERR_ARG, "duplicate tensor '%s'", name);
    int64_t dims[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1) return fail(w, KARA_ERR_ARG, "tensor '%s': ne[%d] = %lld", name, i, (long long)ne[i]);
        dims[i] = ne[i];
    }
    if (dims[0] % ti->block_size != 0)
        return fail(w, KARA_ERR_ARG, "tensor '%s': row length %lld is not a multiple of the %s block size %d", name,
                    (long long)dims[0], ti->name, ti->block_size);
    uint64_t nbytes = (uint64_t)(dims[0] / ti->block_size) * (uint64_t)ti->type_size;
    for (int i = 1; i < 4; i++) {
        if (nbytes > UINT64_MAX / 2 / (uint64_t)dims[i])
            return fail(w, KARA_ERR_ARG, "tensor '%s': size overflows", name);
        nbytes *= (uint64_t)dims[i];
    }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        tensor_entry *t = realloc(w->t, cap * sizeof *t);
        if (!t) return fail(w, KARA_ERR_NOMEM, "out of memory adding tensor '%s'", name);
        w->t = t;
        w->cap_t = cap;
    }
    tensor_entry *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = dup_str(name);
    if (!t->name) return fail(w, KARA_ERR_NOMEM, "out of memory adding tensor '%s'", name);
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, dims, sizeof dims);
    t->data = data;
    t->nbytes = nbytes;
    w->n_t++;
    return KARA_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static kara_status write_bytes(kr_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return fail(w, KARA_ERR_IO, "%s: write failed at byte %llu: %s", w->path, (unsigned long long)w->pos,
                    strerror(errno));
    w->pos += n;
    return KARA_OK;
}

static kara_status write_zeros(kr_gguf_writer *w, uint64_t n) {
    static const uint8_t zeros[256];
    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        kara_status st = write_bytes(w, zeros, k);
        if (st != KARA_OK) return st;
        n -= k;
    }
    return KARA_OK;
}

kara_status kr_gguf_writer_begin(kr_gguf_writer *w, const char *path) {
    kara_status st = check_meta(w, NULL, false);
    if (st != KARA_OK) return st;
    if (!path) return fail(w, KARA_ERR_ARG, "NULL path");
    w->path = dup_str(path);
    if (!w->path) return fail(w, KARA_ERR_NOMEM, "out of memory");

    /* The header, metadata and tensor infos go into one buffer first so the
     * data section's start is known before anything is written. */
    bytebuf h = {0};
    bb_put(&h, "GGUF", 4);
    bb_put_u32(&h, GGUF_VERSION);
    bb_put_u64(&h, w->n_t);
    bb_put_u64(&h, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) bb_put(&h, w->kv[i].blob.p, w->kv[i].blob.n);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        tensor_entry *t = &w->t[i];
        t->offset = off;
        bb_put_str(&h, t->name, strlen(t->name));
        bb_put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) bb_put_u64(&h, (uint64_t)t->ne[d]);
        bb_put_u32(&h, (uint32_t)t->type);
        bb_put_u64(&h, t->offset);
        off = align_up(off + t->nbytes, w->alignment);
    }
    if (h.oom) {
        free(h.p);
        return fail(w, KARA_ERR_NOMEM, "out of memory building the header");
    }
    /* written beside the destination and renamed over it at the end:
     * never over an input or a non-regular file, never half-written */
    w->out_begun = true;
    if (kr_out_begin(&w->out, path, NULL) != 0 || !(w->f = kr_out_stream(&w->out))) {
        free(h.p);
        return fail(w, KARA_ERR_IO, "cannot create %s: %s", path, w->out.why);
    }
    w->pos = 0;
    st = write_bytes(w, h.p, h.n);
    free(h.p);
    if (st != KARA_OK) return st;
    w->data_offset = align_up(w->pos, w->alignment);
    st = write_zeros(w, w->data_offset - w->pos);
    if (st != KARA_OK) return st;
    w->cur = 0;
    w->cur_done = 0;
    return KARA_OK;
}

kara_status kr_gguf_writer_write(kr_gguf_writer *w, const void *data, size_t n) {
    if (!w || w->failed) return KARA_ERR_ARG;
    if (!w->f) return fail(w, KARA_ERR_ARG, "kr_gguf_writer_write before kr_gguf_writer_begin");
    const uint8_t *p = data;
    while (n > 0) {
        if (w->cur >= w->n_t) return fail(w, KARA_ERR_ARG, "%s: more tensor data than declared", w->path);
        tensor_entry *t = &w->t[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = left < n ? (size_t)left : n;
        kara_status st = write_bytes(w, p, k);
        if (st != KARA_OK) return st;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            st = write_zeros(w, align_up(w->pos, w->alignment) - w->pos);
            if (st != KARA_OK) return st;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return KARA_OK;
}

kara_status kr_gguf_writer_end(kr_gguf_writer *w) {
    if (!w || w->failed) return KARA_ERR_ARG;
    if (!w->f) return fail(w, KARA_ERR_ARG, "kr_gguf_writer_end before kr_gguf_writer_begin");
    /* tensors of zero bytes cannot exist (every ne >= 1), so cur counts all */
    if (w->cur < w->n_t)
        return fail(w, KARA_ERR_ARG, "%s: tensor '%s' got %llu of %llu bytes", w->path, w->t[w->cur].name,
                    (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    w->f = NULL; /* kr_out_commit flushes and closes it */
    if (kr_out_commit(&w->out) != 0) return fail(w, KARA_ERR_IO, "%s", w->out.why);
    return KARA_OK;
}

kara_status kr_gguf_writer_save(kr_gguf_writer *w, const char *path) {
    if (!w || w->failed) return KARA_ERR_ARG;
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data) return fail(w, KARA_ERR_ARG, "tensor '%s' has no data", w->t[i].name);
    kara_status st = kr_gguf_writer_begin(w, path);
    for (size_t i = 0; i < w->n_t && st == KARA_OK; i++) st = kr_gguf_writer_write(w, w->t[i].data, w->t[i].nbytes);
    if (st == KARA_OK) st = kr_gguf_writer_end(w);
    return st;
}
