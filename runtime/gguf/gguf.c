/* gguf.c - GGUF v2/v3 parser that trusts nothing in the file.
 *
 * Reading goes through a cursor that checks every read against the end of
 * the image, and every count is checked against the bytes that remain
 * before anything is allocated for it, so a hostile header cannot make us
 * allocate gigabytes or read past the mapping. Errors carry the byte offset
 * where the bad field starts and are reported through kr_set_error. */
#include "gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_map.h"
#include "kernels.h"
#include "status.h"

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NESTING 8
#define GGUF_DEFAULT_ALIGNMENT 32

/* ---- parser allocations: one list, freed together ---- */
typedef struct arena_block {
    struct arena_block *next;
    max_align_t align[];
} arena_block;

static void *arena_alloc(kara_gguf *g, size_t bytes) {
    arena_block *b = calloc(1, sizeof(arena_block) + bytes);
    if (!b) return NULL;
    b->next = g->arena;
    g->arena = b;
    return b->align;
}

static void arena_free(kara_gguf *g) {
    arena_block *b = g->arena;
    while (b) {
        arena_block *n = b->next;
        free(b);
        b = n;
    }
    g->arena = NULL;
}

/* ---- bounds-checked cursor ---- */
typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
} cursor;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static kara_status
fail(uint64_t offset, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kr_set_error(KARA_ERR_FORMAT, "%s at byte offset %llu", msg, (unsigned long long)offset);
}

static bool have(const cursor *c, uint64_t n) { return n <= c->size - c->pos; }

static kara_status read_bytes(cursor *c, void *dst, uint64_t n, const char *what) {
    if (!have(c, n))
        return fail(c->pos, "file truncated: %s needs %llu bytes, %llu left", what, (unsigned long long)n,
                    (unsigned long long)(c->size - c->pos));
    memcpy(dst, c->base + c->pos, n);
    c->pos += n;
    return KARA_OK;
}

static kara_status read_u32(cursor *c, uint32_t *v, const char *what) { return read_bytes(c, v, 4, what); }
static kara_status read_u64(cursor *c, uint64_t *v, const char *what) { return read_bytes(c, v, 8, what); }

static kara_status read_str(cursor *c, kara_gguf_str *s, const char *what) {
    uint64_t at = c->pos, len = 0;
    kara_status st = read_u64(c, &len, what);
    if (st) return st;
    if (!have(c, len))
        return fail(at, "%s length %llu exceeds the %llu bytes left in the file", what, (unsigned long long)len,
                    (unsigned long long)(c->size - c->pos));
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return KARA_OK;
}

static uint64_t fixed_size(kara_gguf_vtype t) {
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

/* Decode one little-endian scalar of a fixed-size type into a value. */
static void decode_scalar(kara_gguf_vtype t, const uint8_t *p, kara_gguf_value *v) {
    v->type = t;
    switch (t) {
    case KARA_GGUF_UINT8: v->v.u64 = p[0]; break;
    case KARA_GGUF_BOOL: v->v.u64 = p[0] != 0; break;
    case KARA_GGUF_INT8: v->v.i64 = (int8_t)p[0]; break;
    case KARA_GGUF_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->v.u64 = x;
        break;
    }
    case KARA_GGUF_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->v.i64 = x;
        break;
    }
    case KARA_GGUF_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->v.u64 = x;
        break;
    }
    case KARA_GGUF_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->v.i64 = x;
        break;
    }
    case KARA_GGUF_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->v.f64 = x;
        break;
    }
    case KARA_GGUF_UINT64: {
        uint64_t x;
        memcpy(&x, p, 8);
        v->v.u64 = x;
        break;
    }
    case KARA_GGUF_INT64: {
        int64_t x;
        memcpy(&x, p, 8);
        v->v.i64 = x;
        break;
    }
    case KARA_GGUF_FLOAT64: {
        double x;
        memcpy(&x, p, 8);
        v->v.f64 = x;
        break;
    }
    default: break;
    }
}

static kara_status read_value(kara_gguf *g, cursor *c, kara_gguf_vtype t, kara_gguf_value *v, int depth);

static kara_status read_array(kara_gguf *g, cursor *c, kara_gguf_array *a, int depth) {
    uint64_t at = c->pos;
    uint32_t et = 0;
    uint64_t n = 0;
    kara_status st = read_u32(c, &et, "array element type");
    if (st) return st;
    if (et >= KARA_GGUF_VTYPE_COUNT) return fail(at, "array has unknown element type %u", et);
    st = read_u64(c, &n, "array length");
    if (st) return st;
    a->type = (kara_gguf_vtype)et;
    a->n = n;
    uint64_t left = c->size - c->pos;
    uint64_t es = fixed_size(a->type);
    if (es) {
        if (n > left / es)
            return fail(at, "array of %llu %s elements exceeds the %llu bytes left in the file", (unsigned long long)n,
                        kara_gguf_vtype_name(a->type), (unsigned long long)left);
        a->data = c->base + c->pos;
        c->pos += n * es;
        return KARA_OK;
    }
    if (a->type == KARA_GGUF_STRING) {
        if (n > left / 8)
            return fail(at, "array of %llu strings exceeds the %llu bytes left in the file", (unsigned long long)n,
                        (unsigned long long)left);
        kara_gguf_str *strs = arena_alloc(g, (size_t)(n ? n : 1) * sizeof(kara_gguf_str));
        if (!strs) /* out of memory is not a malformed file (issue 19: was KARA_ERR_FORMAT) */
            return kr_set_error(KARA_ERR_NOMEM, "out of memory for an array of %llu strings at byte offset %llu",
                                (unsigned long long)n, (unsigned long long)at);
        a->strs = strs;
        for (uint64_t i = 0; i < n; i++) {
            st = read_str(c, &strs[i], "array string");
            if (st) return st;
        }
        return KARA_OK;
    }
    /* nested arrays: each element needs at least a 12-byte header */
    if (depth >= GGUF_MAX_NESTING) return fail(at, "arrays nested deeper than %d levels", GGUF_MAX_NESTING);
    if (n > left / 12)
        return fail(at, "array of %llu arrays exceeds the %llu bytes left in the file", (unsigned long long)n,
                    (unsigned long long)left);
    kara_gguf_value *items = arena_alloc(g, (size_t)(n ? n : 1) * sizeof(kara_gguf_value));
    if (!items) /* out of memory is not a malformed file (issue 19: was KARA_ERR_FORMAT) */
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for an array of %llu arrays at byte offset %llu",
                            (unsigned long long)n, (unsigned long long)at);
    a->items = items;
    for (uint64_t i = 0; i < n; i++) {
        st = read_value(g, c, KARA_GGUF_ARRAY, &items[i], depth + 1);
        if (st) return st;
    }
    return KARA_OK;
}

static kara_status read_value(kara_gguf *g, cursor *c, kara_gguf_vtype t, kara_gguf_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->type = t;
    uint64_t es = fixed_size(t);
    if (es) {
        if (!have(c, es)) return fail(c->pos, "file truncated inside a %s value", kara_gguf_vtype_name(t));
        decode_scalar(t, c->base + c->pos, v);
        c->pos += es;
        return KARA_OK;
    }
    if (t == KARA_GGUF_STRING) return read_str(c, &v->v.str, "string value");
    return read_array(g, c, &v->v.arr, depth);
}

static bool str_eq_str(kara_gguf_str a, kara_gguf_str b) { return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0; }

static kara_status read_kvs(kara_gguf *g, cursor *c) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        kara_gguf_kv *kv = &g->kv[i];
        kv->offset = c->pos;
        kara_status st = read_str(c, &kv->key, "metadata key");
        if (st) return st;
        if (kv->key.len == 0) return fail(kv->offset, "metadata key %llu is empty", (unsigned long long)i);
        for (uint64_t j = 0; j < i; j++)
            if (str_eq_str(g->kv[j].key, kv->key))
                return fail(kv->offset, "duplicate metadata key '%.*s'", (int)kv->key.len, kv->key.ptr);
        uint64_t tat = c->pos;
        uint32_t t = 0;
        st = read_u32(c, &t, "metadata value type");
        if (st) return st;
        if (t >= KARA_GGUF_VTYPE_COUNT)
            return fail(tat, "metadata key '%.*s' has unknown value type %u", (int)kv->key.len, kv->key.ptr, t);
        st = read_value(g, c, (kara_gguf_vtype)t, &kv->value, 0);
        if (st) return st;
    }
    return KARA_OK;
}

static kara_status read_tensor_infos(kara_gguf *g, cursor *c) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        kara_gguf_tensor *t = &g->tensors[i];
        t->info_offset = c->pos;
        kara_status st = read_str(c, &t->name, "tensor name");
        if (st) return st;
        int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
        if (t->name.len == 0) return fail(t->info_offset, "tensor %llu has an empty name", (unsigned long long)i);
        uint64_t at = c->pos;
        st = read_u32(c, &t->n_dims, "tensor rank");
        if (st) return st;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return fail(at, "tensor '%.*s' has rank %u (must be 1..%d)", nl, t->name.ptr, t->n_dims, GGUF_MAX_DIMS);
        uint64_t nelem = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t dat = c->pos, ne = 0;
            st = read_u64(c, &ne, "tensor dimension");
            if (st) return st;
            if (ne == 0 || ne > (uint64_t)INT64_MAX)
                return fail(dat, "tensor '%.*s' dimension %u is %llu", nl, t->name.ptr, d, (unsigned long long)ne);
            if (nelem > (uint64_t)INT64_MAX / ne)
                return fail(dat, "tensor '%.*s' element count overflows", nl, t->name.ptr);
            nelem *= ne;
            t->ne[d] = (int64_t)ne;
        }
        at = c->pos;
        st = read_u32(c, &t->type, "tensor type");
        if (st) return st;
        const kr_type_info *ti = kr_type_get(t->type);
        if (!ti || ti->internal) return fail(at, "tensor '%.*s' has unknown type id %u", nl, t->name.ptr, t->type);
        if (t->ne[0] % ti->block_size != 0)
            return fail(at, "tensor '%.*s' row length %lld is not a multiple of the %s block size %d", nl, t->name.ptr,
                        (long long)t->ne[0], ti->name, ti->block_size);
        uint64_t nblocks = nelem / (uint64_t)ti->block_size;
        if (nblocks > UINT64_MAX / (uint64_t)ti->type_size)
            return fail(at, "tensor '%.*s' byte size overflows", nl, t->name.ptr);
        t->nbytes = nblocks * (uint64_t)ti->type_size;
        at = c->pos;
        st = read_u64(c, &t->offset, "tensor data offset");
        if (st) return st;
        for (uint64_t j = 0; j < i; j++)
            if (str_eq_str(g->tensors[j].name, t->name))
                return fail(t->info_offset, "duplicate tensor name '%.*s'", nl, t->name.ptr);
    }
    return KARA_OK;
}

/* Apply general.alignment and check each tensor lies inside the data
 * section, aligned, without overlapping the header. */
static kara_status place_tensors(kara_gguf *g, cursor *c) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const kara_gguf_kv *al = kara_gguf_find(g, "general.alignment");
    if (al) {
        if (al->value.type != KARA_GGUF_UINT32)
            return fail(al->offset, "general.alignment has type %s (must be uint32)",
                        kara_gguf_vtype_name(al->value.type));
        uint64_t a = al->value.v.u64;
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(al->offset, "general.alignment %llu is not a power of two", (unsigned long long)a);
        g->alignment = a;
    }
    uint64_t data = c->pos;
    if (data % g->alignment) data += g->alignment - data % g->alignment;
    if (g->n_tensors && data > c->size)
        return fail(c->pos, "file truncated before the tensor data section (needs %llu bytes, has %llu)",
                    (unsigned long long)data, (unsigned long long)c->size);
    g->data_offset = data;
    uint64_t avail = c->size >= data ? c->size - data : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        kara_gguf_tensor *t = &g->tensors[i];
        int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
        if (t->offset % g->alignment)
            return fail(t->info_offset, "tensor '%.*s' data offset %llu is not aligned to %llu", nl, t->name.ptr,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return fail(t->info_offset,
                        "tensor '%.*s' data (%llu bytes at data offset %llu) extends past the end of the file "
                        "(%llu data bytes)",
                        nl, t->name.ptr, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                        (unsigned long long)avail);
        t->data = c->base + data + t->offset;
    }
    return KARA_OK;
}

kara_status kr_gguf_parse(const void *data, size_t size, kara_gguf **out) {
    *out = NULL;
    cursor c = {data, size, 0};
    kara_gguf *g = calloc(1, sizeof *g);
    if (!g) return kr_set_error(KARA_ERR_NOMEM, "out of memory while parsing GGUF");
    g->base = data;
    g->size = size;
    char magic[4];
    kara_status st = read_bytes(&c, magic, 4, "magic");
    if (!st && memcmp(magic, "GGUF", 4) != 0) st = fail(0, "not a GGUF file (bad magic)");
    if (!st) st = read_u32(&c, &g->version, "version");
    if (!st && (g->version < 2 || g->version > 3))
        st = fail(4, "unsupported GGUF version %u (this reader supports 2 and 3)", g->version);
    if (!st) st = read_u64(&c, &g->n_tensors, "tensor count");
    if (!st) st = read_u64(&c, &g->n_kv, "metadata count");
    /* each key-value needs >= 13 bytes, each tensor info >= 29 */
    if (!st && g->n_kv > (c.size - c.pos) / 13)
        st = fail(16, "metadata count %llu is impossible for a file of %llu bytes", (unsigned long long)g->n_kv,
                  (unsigned long long)c.size);
    if (!st && g->n_tensors > (c.size - c.pos) / 29)
        st = fail(8, "tensor count %llu is impossible for a file of %llu bytes", (unsigned long long)g->n_tensors,
                  (unsigned long long)c.size);
    if (!st) {
        g->kv = arena_alloc(g, (size_t)(g->n_kv ? g->n_kv : 1) * sizeof(kara_gguf_kv));
        g->tensors = arena_alloc(g, (size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof(kara_gguf_tensor));
        if (!g->kv || !g->tensors) st = KARA_ERR_NOMEM;
    }
    if (!st) st = read_kvs(g, &c);
    if (!st) st = read_tensor_infos(g, &c);
    if (!st) st = place_tensors(g, &c);
    if (st) {
        if (st == KARA_ERR_NOMEM) kr_set_error(st, "out of memory while parsing GGUF");
        kara_gguf_close(g);
        return st;
    }
    *out = g;
    return KARA_OK;
}

kara_status kara_gguf_open(const char *path, kara_gguf **out) { return kr_gguf_open_mode(path, false, out); }

kara_status kr_gguf_open_mode(const char *path, bool in_ram, kara_gguf **out) {
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return kr_set_error(KARA_ERR_ARG, "kara_gguf_open: path is NULL");
    kr_gguf_source src = {.kind = KR_GGUF_FROM_PATH, .path = path, .name = path};
    return kr_gguf_open_source(&src, in_ram, out);
}

/* Bring the source's bytes into *m: 0 or an errno value (or
 * KR_FILE_NOT_REGULAR). */
static int load_source(const kr_gguf_source *src, bool in_ram, kr_file_map *m) {
    switch (src->kind) {
    case KR_GGUF_FROM_PATH: return in_ram ? kr_file_read_anon(src->path, m) : kr_file_map_open(src->path, m);
    case KR_GGUF_FROM_FD: return in_ram ? kr_file_read_anon_fd(src->fd, m) : kr_file_map_fd(src->fd, m);
    case KR_GGUF_FROM_BUFFER:
        if (in_ram) return kr_file_copy_anon(src->data, src->size, m);
        kr_file_borrow(src->data, src->size, m);
        return 0;
    }
    return EINVAL;
}

kara_status kr_gguf_open_source(const kr_gguf_source *src, bool in_ram, kara_gguf **out) {
    *out = NULL;
    const char *name = src->name ? src->name : "GGUF";
    kr_file_map *m = calloc(1, sizeof *m);
    if (!m) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory while parsing GGUF", name);
    int e = load_source(src, in_ram, m);
    if (e) {
        free(m);
        return kr_set_error(KARA_ERR_IO, "cannot open '%s': %s", name, kr_file_error_str(e));
    }
    kara_status st = kr_gguf_parse(m->data, m->size, out);
    if (st) {
        kr_error_prefix(st, "%s", name);
        kr_file_map_close(m);
        free(m);
        return st;
    }
    (*out)->map = m;
    return KARA_OK;
}

bool kr_gguf_set_writable(kara_gguf *g, bool writable) {
    return g && g->map && kr_file_map_set_writable(g->map, writable) == 0;
}

void kara_gguf_close(kara_gguf *g) {
    if (!g) return;
    arena_free(g);
    if (g->map) {
        kr_file_map_close(g->map);
        free(g->map);
    }
    free(g);
}

uint32_t kara_gguf_version(const kara_gguf *g) { return g->version; }
uint64_t kara_gguf_size(const kara_gguf *g) { return g->size; }
uint64_t kara_gguf_alignment(const kara_gguf *g) { return g->alignment; }
uint64_t kara_gguf_data_offset(const kara_gguf *g) { return g->data_offset; }
uint64_t kara_gguf_n_kv(const kara_gguf *g) { return g->n_kv; }
uint64_t kara_gguf_n_tensors(const kara_gguf *g) { return g->n_tensors; }

const kara_gguf_kv *kara_gguf_kv_at(const kara_gguf *g, uint64_t i) { return i < g->n_kv ? &g->kv[i] : NULL; }

const kara_gguf_tensor *kara_gguf_tensor_at(const kara_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

bool kara_gguf_str_eq(kara_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const kara_gguf_kv *kara_gguf_find(const kara_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (kara_gguf_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const kara_gguf_tensor *kara_gguf_find_tensor(const kara_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (kara_gguf_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static bool is_unsigned(kara_gguf_vtype t) {
    return t == KARA_GGUF_UINT8 || t == KARA_GGUF_UINT16 || t == KARA_GGUF_UINT32 || t == KARA_GGUF_UINT64 ||
        t == KARA_GGUF_BOOL;
}
static bool is_signed(kara_gguf_vtype t) {
    return t == KARA_GGUF_INT8 || t == KARA_GGUF_INT16 || t == KARA_GGUF_INT32 || t == KARA_GGUF_INT64;
}

bool kara_gguf_get_u64(const kara_gguf *g, const char *key, uint64_t *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) return false;
    if (is_unsigned(kv->value.type)) {
        *out = kv->value.v.u64;
        return true;
    }
    if (is_signed(kv->value.type) && kv->value.v.i64 >= 0) {
        *out = (uint64_t)kv->value.v.i64;
        return true;
    }
    return false;
}

bool kara_gguf_get_i64(const kara_gguf *g, const char *key, int64_t *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) return false;
    if (is_signed(kv->value.type)) {
        *out = kv->value.v.i64;
        return true;
    }
    if (is_unsigned(kv->value.type) && kv->value.v.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)kv->value.v.u64;
        return true;
    }
    return false;
}

bool kara_gguf_get_f64(const kara_gguf *g, const char *key, double *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv) return false;
    switch (kv->value.type) {
    case KARA_GGUF_FLOAT32:
    case KARA_GGUF_FLOAT64: *out = kv->value.v.f64; return true;
    default:
        if (is_unsigned(kv->value.type)) {
            *out = (double)kv->value.v.u64;
            return true;
        }
        if (is_signed(kv->value.type)) {
            *out = (double)kv->value.v.i64;
            return true;
        }
        return false;
    }
}

bool kara_gguf_get_bool(const kara_gguf *g, const char *key, bool *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv || kv->value.type != KARA_GGUF_BOOL) return false;
    *out = kv->value.v.u64 != 0;
    return true;
}

bool kara_gguf_get_str(const kara_gguf *g, const char *key, kara_gguf_str *out) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv || kv->value.type != KARA_GGUF_STRING) return false;
    *out = kv->value.v.str;
    return true;
}

const kara_gguf_array *kara_gguf_get_arr(const kara_gguf *g, const char *key) {
    const kara_gguf_kv *kv = kara_gguf_find(g, key);
    if (!kv || kv->value.type != KARA_GGUF_ARRAY) return NULL;
    return &kv->value.v.arr;
}

int64_t kara_gguf_arr_int(const kara_gguf_array *arr, uint64_t i) {
    if (i >= arr->n || !(is_unsigned(arr->type) || is_signed(arr->type))) return 0;
    kara_gguf_value v = {0};
    decode_scalar(arr->type, arr->data + i * fixed_size(arr->type), &v);
    return is_signed(arr->type) ? v.v.i64 : (int64_t)v.v.u64;
}

double kara_gguf_arr_float(const kara_gguf_array *arr, uint64_t i) {
    if (i >= arr->n || !fixed_size(arr->type)) return 0;
    kara_gguf_value v = {0};
    decode_scalar(arr->type, arr->data + i * fixed_size(arr->type), &v);
    if (arr->type == KARA_GGUF_FLOAT32 || arr->type == KARA_GGUF_FLOAT64) return v.v.f64;
    return is_signed(arr->type) ? (double)v.v.i64 : (double)v.v.u64;
}

const char *kara_gguf_vtype_name(kara_gguf_vtype t) {
    static const char *names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                  "bool",  "string", "array",  "uint64", "int64",  "float64"};
    return (unsigned)t < KARA_GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

const char *kara_gguf_type_name(uint32_t type) {
    const kr_type_info *ti = kr_type_get(type);
    return ti && !ti->internal ? ti->name : "?";
}
