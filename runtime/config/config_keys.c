/* config_keys.c - the parsing and storing of one value of the job
 * configuration, and kara_config_init/set/get/origin.
 *
 * Every key of the schema is one row of the table (config_schema.c): its
 * dotted name, its type, where it lives in kara_config, its range, its
 * names and its help. The YAML loader, kara_config_set and
 * kara_config_format all go through that row, so a setting has one name,
 * one check and one way of being printed. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#include "config_impl.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_tuning.h"
#include "status.h"

#define N_KEYS kr_config_table_size()
#define keys kr_config_table()
_Static_assert(sizeof(kara_kv_method) == sizeof(int), "enums are stored as int");

int kr_config_find_key(const char *key) {
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].key, key)) return i;
    return -1;
}

/* True when `path` names a section: some key starts with "path.". */
bool kr_config_is_section(const char *path) {
    size_t n = strlen(path);
    for (int i = 0; i < N_KEYS; i++)
        if (!strncmp(keys[i].key, path, n) && keys[i].key[n] == '.') return true;
    return false;
}

const char *kara_config_key(int i) { return i >= 0 && i < N_KEYS ? keys[i].key : NULL; }

/* ------------------------------------------------------------------------ */
/* Defaults                                                                  */
/* ------------------------------------------------------------------------ */

void kara_config_init(kara_config *c) {
    memset(c, 0, sizeof *c);
    kara_context_params_init(&c->context); /* also fills context.kv */
    kara_sampler_params_init(&c->sampling);
    c->max_tokens = -1;
    snprintf(c->chat_template, sizeof c->chat_template, "auto");
    c->think = KARA_THINK_AUTO;
    c->reasoning_budget = -1;
    c->spec = KARA_SPEC_NONE;
    c->draft_max = 8;
    c->draft_p_min = 0.75f;
    c->batch_resume = false;
    c->batch_ordered = false;
    c->shard_index = 0;
    c->shard_count = 1;
    for (int i = 0; i < N_KEYS; i++) snprintf(c->origin[i], KARA_CONFIG_ORIGIN_MAX, "default");
}

/* ------------------------------------------------------------------------ */
/* Parsing one value from text                                               */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    uint64_t mult;
} size_units[] = {
    {"B", 1},
    {"KB", 1000ULL},
    {"KiB", 1ULL << 10},
    {"MB", 1000000ULL},
    {"MiB", 1ULL << 20},
    {"GB", 1000000000ULL},
    {"GiB", 1ULL << 30},
};
#define N_SIZE_UNITS (sizeof size_units / sizeof size_units[0])

bool kr_config_is_null_text(const char *s) { return !*s || !strcmp(s, "~") || !strcmp(s, "null"); }

static bool parse_bool_text(const char *s, bool *out) {
    static const char *yes[] = {"true", "yes", "on"}, *no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(s, yes[i])) return *out = true, true;
        if (!strcasecmp(s, no[i])) return *out = false, true;
    }
    return false;
}

/* Decimal integer, the whole text. Returns false for anything else. */
static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    if (!*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!*s || *s == '-' || isspace((unsigned char)*s)) return false;
    errno = 0;
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    unsigned long long v = strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10);
    if (*end || errno == ERANGE || (hex && !s[2])) return false;
    *out = v;
    return true;
}

/* A seed for "-1"/"random": the kernel's entropy, or the clock and the
 * process id where /dev/urandom cannot be read. Kept below 2^32 so it can
 * be typed back as llama.cpp's --seed takes it. */
static uint64_t random_seed(void) {
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&v, sizeof v, 1, f) != 1) {
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        v = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 20);
    }
    if (f) fclose(f);
    return v & 0xffffffffu;
}

static void fmt_bound(const key_spec *k, double v, char *buf, size_t size) {
    if (k->type == K_FLOAT)
        snprintf(buf, size, "%g", v);
    else
        snprintf(buf, size, "%.0f", v);
}

static bool out_of_range(const key_spec *k, double v, const char *text, char *err, size_t esz) {
    if (v >= k->min && v <= k->max) return false;
    char lo[32], hi[32];
    fmt_bound(k, k->min, lo, sizeof lo);
    fmt_bound(k, k->max, hi, sizeof hi);
    snprintf(err, esz, "%s is out of range [%s, %s]", text, lo, hi);
    return true;
}

/* "12", "1.5GiB", "256 MiB", "1.5e6": number (a decimal fraction and an
 * exponent allowed), optional spaces, optional unit. A fraction of a byte
 * rounds up; 0 bytes is refused, as a size of nothing is no setting (a key
 * with a name for 0, such as auto, takes that name instead). */
static bool parse_size(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
    const char *p = s;
    while (isdigit((unsigned char)*p)) p++;
    if (p == s) {
        snprintf(err, esz, "expected a size such as 256MiB, got '%s'", s);
        return false;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) p++;
    }
    bool exponent = false;
    if (*p == 'e' || *p == 'E') { /* an exponent, not the unit EB: digits follow */
        const char *q = p + 1 + (p[1] == '+' || p[1] == '-');
        if (isdigit((unsigned char)*q)) {
            exponent = true;
            for (p = q; isdigit((unsigned char)*p);) p++;
        }
    }
    const char *num_end = p;
    while (*p == ' ') p++;
    uint64_t mult = 1;
    if (*p) {
        size_t u = 0;
        while (u < N_SIZE_UNITS && strcasecmp(p, size_units[u].name)) u++;
        if (u == N_SIZE_UNITS) {
            snprintf(err, esz, "unknown size unit '%s' in '%s' (expected B, KB, KiB, MB, MiB, GB or GiB)", p, s);
            return false;
        }
        mult = size_units[u].mult;
    }
    char num[64];
    size_t n = (size_t)(num_end - s);
    if (n >= sizeof num) {
        snprintf(err, esz, "%s is out of range", s);
        return false;
    }
    memcpy(num, s, n);
    num[n] = 0;
    uint64_t bytes;
    if (exponent) {
        double d = strtod(num, NULL) * (double)mult;
        if (!isfinite(d) || d > k->max) {
            char hi[32];
            fmt_bound(k, k->max, hi, sizeof hi);
            snprintf(err, esz, "%s is out of range (at most %s bytes)", s, hi);
            return false;
        }
        bytes = (uint64_t)ceil(d);
    } else {
        /* Integer part exactly, fraction (if any) through double. */
        uint64_t whole;
        const char *dot = strchr(num, '.');
        char ipart[64];
        snprintf(ipart, sizeof ipart, "%.*s", (int)(dot ? dot - num : (ptrdiff_t)n), num);
        if (!parse_u64(ipart, &whole) || (mult > 1 && whole > UINT64_MAX / mult)) {
            snprintf(err, esz, "%s is out of range", s);
            return false;
        }
        bytes = whole * mult;
        if (dot) bytes += (uint64_t)ceil(strtod(dot, NULL) * (double)mult);
    }
    if (bytes == 0) {
        char alt[64] = "";
        if (k->names) snprintf(alt, sizeof alt, " (%s: no limit)", k->names[0].name);
        snprintf(err, esz, "'%s' is 0 bytes, which holds nothing; give a size%s", s, alt);
        return false;
    }
    if (out_of_range(k, (double)bytes, s, err, esz)) return false;
    v->u = bytes;
    return true;
}

void kr_config_type_desc(const key_spec *k, char *buf, size_t size) {
    switch (k->type) {
    case K_INT: snprintf(buf, size, "an integer"); break;
    case K_U64: snprintf(buf, size, "a non-negative integer%s", k->names ? " or -1 (random)" : ""); break;
    case K_SIZE: snprintf(buf, size, "a size such as 256MiB"); break;
    case K_FLOAT: snprintf(buf, size, "a number"); break;
    case K_BOOL: snprintf(buf, size, "true or false"); break;
    case K_ENUM: {
        char list[256];
        kr_enum_list(k->names, list, sizeof list);
        snprintf(buf, size, "one of %s", list);
        break;
    }
    case K_STRING: snprintf(buf, size, "a string"); break;
    case K_INT_LIST: snprintf(buf, size, "a list of integers such as [1, 2]"); break;
    case K_LAYERS: snprintf(buf, size, "all or stride:N"); break;
    case K_SHARD: snprintf(buf, size, "K/N such as 1/4"); break;
    }
}

bool kr_config_parse_list_item(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
    int64_t x;
    if (!parse_i64(s, &x)) {
        snprintf(err, esz, "expected an integer in the list, got '%s'", s);
        return false;
    }
    if (out_of_range(k, (double)x, s, err, esz)) return false;
    if (v->n_list >= KARA_MAX_PROTECT_TOKENS) {
        snprintf(err, esz, "too many entries (at most %d)", KARA_MAX_PROTECT_TOKENS);
        return false;
    }
    v->list[v->n_list++] = (int32_t)x;
    return true;
}

/* "1, 2, 3" or "[1, 2, 3]" or "[]" (the flag form of a list). */
static bool parse_list_text(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        snprintf(err, esz, "list too long");
        return false;
    }
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf, *end = buf + strlen(buf);
    while (isspace((unsigned char)*p)) p++;
    while (end > p && isspace((unsigned char)end[-1])) *--end = 0;
    if (*p == '[') {
        if (end == p + 1 || end[-1] != ']') {
            snprintf(err, esz, "unbalanced brackets in '%s'", s);
            return false;
        }
        p++;
        *--end = 0;
    }
    v->n_list = 0;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return true;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        char *q = p, *qe = p + strlen(p);
        while (isspace((unsigned char)*q)) q++;
        while (qe > q && isspace((unsigned char)qe[-1])) *--qe = 0;
        if (!kr_config_parse_list_item(k, q, v, err, esz)) return false;
        if (!comma) return true;
        p = comma + 1;
    }
}

/* Parse text as the value of key k into *v; on failure err gets the
 * problem (without location or key). */
bool kr_config_parse_value(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
    char want[300];
    memset(v, 0, sizeof *v);
    int special;
    if (k->type != K_ENUM && k->type != K_STRING && k->type != K_U64 && k->names &&
        kr_enum_from_name(k->names, s, &special)) {
        v->i = special;
        v->u = (uint64_t)special;
        v->f = special;
        return true;
    }
    if (k->type != K_STRING && k->type != K_INT_LIST && kr_config_is_null_text(s)) {
        kr_config_type_desc(k, want, sizeof want);
        snprintf(err, esz, "missing value (expected %s)", want);
        return false;
    }
    switch (k->type) {
    case K_INT:
        if (!parse_i64(s, &v->i)) {
            snprintf(err, esz, "expected an integer%s, got '%s'", k->names ? " or auto" : "", s);
            return false;
        }
        return !out_of_range(k, (double)v->i, s, err, esz);
    case K_U64:
        if (k->names && (!strcmp(s, "-1") || !strcasecmp(s, "random"))) {
            v->u = random_seed();
            return true;
        }
        if (!parse_u64(s, &v->u)) {
            snprintf(err, esz, "expected a non-negative integer%s, got '%s'", k->names ? " or -1 (random)" : "", s);
            return false;
        }
        return true;
    case K_SIZE: return parse_size(k, s, v, err, esz);
    case K_FLOAT: {
        char *end;
        v->f = strtod(s, &end);
        if (end == s || *end || isspace((unsigned char)*s) || !isfinite(v->f)) {
            snprintf(err, esz, "expected a number%s, got '%s'", k->names ? " or auto" : "", s);
            return false;
        }
        return !out_of_range(k, v->f, s, err, esz);
    }
    case K_BOOL: {
        bool b;
        if (!parse_bool_text(s, &b)) {
            snprintf(err, esz, "expected true or false, got '%s'", s);
            return false;
        }
        v->i = b;
        return true;
    }
    case K_ENUM: {
        int e;
        if (!kr_enum_from_name(k->names, s, &e)) {
            char list[256];
            kr_enum_list(k->names, list, sizeof list);
            snprintf(err, esz, "unknown value '%s' (expected %s)", s, list);
            return false;
        }
        v->i = e;
        return true;
    }
    case K_STRING:
        if (strlen(s) >= k->size) {
            snprintf(err, esz, "value is too long (%zu bytes, at most %zu)", strlen(s), k->size - 1);
            return false;
        }
        v->s = s;
        return true;
    case K_INT_LIST: return parse_list_text(k, s, v, err, esz);
    case K_LAYERS:
        if (!strcmp(s, "all")) {
            v->i = 1;
            return true;
        }
        if (strncmp(s, "stride:", 7) || !parse_i64(s + 7, &v->i)) {
            snprintf(err, esz, "expected all or stride:N, got '%s'", s);
            return false;
        }
        return !out_of_range(k, (double)v->i, s + 7, err, esz);
    case K_SHARD: {
        const char *slash = strchr(s, '/');
        char a[32];
        int64_t n;
        if (!slash || slash - s >= (ptrdiff_t)sizeof a) {
            snprintf(err, esz, "expected K/N such as 1/4, got '%s'", s);
            return false;
        }
        snprintf(a, sizeof a, "%.*s", (int)(slash - s), s);
        if (!parse_i64(a, &v->i) || !parse_i64(slash + 1, &n)) {
            snprintf(err, esz, "expected K/N such as 1/4, got '%s'", s);
            return false;
        }
        if (out_of_range(k, (double)n, slash + 1, err, esz)) return false;
        if (v->i < 1 || v->i > n) {
            snprintf(err, esz, "shard %lld of %lld does not exist (K must be 1..N)", (long long)v->i, (long long)n);
            return false;
        }
        v->shard_count = (int32_t)n;
        return true;
    }
    }
    return false;
}

static void store_int(void *p, size_t size, int64_t v) {
    if (size == sizeof(bool))
        *(bool *)p = v != 0;
    else
        *(int32_t *)p = (int32_t)v;
}

static int64_t load_int(const void *p, size_t size) {
    if (size == sizeof(bool)) return *(const bool *)p;
    return *(const int32_t *)p;
}

/* Write a parsed value into its field; the string buffer is zero-filled
 * past the text so equal configs compare equal byte for byte. */
void kr_config_store(const key_spec *k, kara_config *c, const value *v) {
    char *base = (char *)c;
    void *p = base + k->off;
    switch (k->type) {
    case K_INT:
    case K_BOOL:
    case K_ENUM:
    case K_LAYERS: store_int(p, k->size, v->i); break;
    case K_U64:
    case K_SIZE: *(uint64_t *)p = v->u; break;
    case K_FLOAT: *(float *)p = (float)v->f; break;
    case K_STRING: strncpy((char *)p, v->s, k->size); break;
    case K_INT_LIST:
        memcpy(p, v->list, sizeof v->list);
        *(int32_t *)(base + k->aux) = v->n_list;
        break;
    case K_SHARD:
        *(int32_t *)p = (int32_t)(v->i - 1);
        *(int32_t *)(base + k->aux) = v->shard_count;
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Rendering one value                                                       */
/* ------------------------------------------------------------------------ */

/* The shortest %g text that reads back as the same float. */
static void fmt_float(float f, char *buf, size_t size) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, size, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    if (!strpbrk(buf, ".en")) strncat(buf, ".0", size - strlen(buf) - 1); /* keep it a float to the eye */
}

static void fmt_size(uint64_t b, char *buf, size_t size) {
    static const int order[] = {6, 4, 2, 5, 3, 1}; /* GiB MiB KiB GB MB KB */
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        uint64_t m = size_units[order[i]].mult;
        if (b >= m && b % m == 0) {
            snprintf(buf, size, "%llu%s", (unsigned long long)(b / m), size_units[order[i]].name);
            return;
        }
    }
    snprintf(buf, size, "%lluB", (unsigned long long)b);
}

/* Text that parse_text accepts; strings are raw (unquoted). */
void kr_config_fmt_value(const key_spec *k, const kara_config *c, char *buf, size_t size) {
    const char *base = (const char *)c;
    const void *p = base + k->off;
    const char *name;
    switch (k->type) {
    case K_INT: {
        int64_t v = load_int(p, k->size);
        if (k->names && (name = kr_enum_to_name(k->names, (int)v)))
            snprintf(buf, size, "%s", name);
        else
            snprintf(buf, size, "%lld", (long long)v);
        break;
    }
    case K_U64: snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_SIZE: {
        uint64_t v = *(const uint64_t *)p;
        if (k->names && v == 0)
            snprintf(buf, size, "%s", kr_enum_to_name(k->names, 0));
        else
            fmt_size(v, buf, size);
        break;
    }
    case K_FLOAT: {
        float f = *(const float *)p;
        if (k->names && f == (float)(int)f && (name = kr_enum_to_name(k->names, (int)f)))
            snprintf(buf, size, "%s", name);
        else
            fmt_float(f, buf, size);
        break;
    }
    case K_BOOL: snprintf(buf, size, "%s", *(const bool *)p ? "true" : "false"); break;
    case K_ENUM:
        name = kr_enum_to_name(k->names, (int)load_int(p, k->size));
        snprintf(buf, size, "%s", name ? name : "?");
        break;
    case K_STRING: snprintf(buf, size, "%.*s", (int)k->size, (const char *)p); break;
    case K_INT_LIST: {
        int32_t n = *(const int32_t *)(base + k->aux);
        const int32_t *a = (const int32_t *)p;
        size_t len = (size_t)snprintf(buf, size, "[");
        for (int32_t i = 0; i < n && i < KARA_MAX_PROTECT_TOKENS && len < size; i++)
            len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? ", " : "", a[i]);
        if (len < size) snprintf(buf + len, size - len, "]");
        break;
    }
    case K_LAYERS: {
        int32_t v = *(const int32_t *)p;
        if (v <= 1)
            snprintf(buf, size, "all");
        else
            snprintf(buf, size, "stride:%d", v);
        break;
    }
    case K_SHARD: snprintf(buf, size, "%d/%d", *(const int32_t *)p + 1, *(const int32_t *)(base + k->aux)); break;
    }
}

/* ------------------------------------------------------------------------ */
/* Keys by name: set, get, origin                                            */
/* ------------------------------------------------------------------------ */

static kara_status unknown_key(const char *where, const char *key) {
    char hint[160];
    kr_config_suggest(key, hint, sizeof hint);
    if (kr_config_is_section(key)) return kr_set_error(KARA_ERR_CONFIG, "%s: '%s' is a section, not a key", where, key);
    return kr_set_error(KARA_ERR_CONFIG, "%s: unknown key '%s'%s", where, key, hint);
}

kara_status kara_config_set(kara_config *c, const char *key, const char *text, const char *origin) {
    if (!c || !key || !text) return kr_set_error(KARA_ERR_ARG, "kara_config_set: NULL argument");
    if (!origin) origin = "api";
    int i = kr_config_find_key(key);
    if (i < 0) return unknown_key(origin, key);
    value v;
    char err[512];
    if (!kr_config_parse_value(&keys[i], text, &v, err, sizeof err))
        return kr_set_error(KARA_ERR_CONFIG, "%s: %s: %s", origin, key, err);
    kr_config_store(&keys[i], c, &v);
    snprintf(c->origin[i], KARA_CONFIG_ORIGIN_MAX, "%s", origin);
    return KARA_OK;
}

/* The key of the schema named `key` when it lives inside [lo, hi) of
 * kara_config, else -1 with the error set. */
static int key_in_part(const char *fn, size_t lo, size_t hi, const char *key, const char *what) {
    int i = kr_config_find_key(key);
    if (i < 0) {
        unknown_key(fn, key);
        return -1;
    }
    if (keys[i].off < lo || keys[i].off + keys[i].size > hi ||
        (keys[i].type == K_INT_LIST && (keys[i].aux < lo || keys[i].aux >= hi))) {
        kr_set_error(KARA_ERR_CONFIG, "%s: '%s' is not %s", fn, key, what);
        return -1;
    }
    return i;
}

/* Set a key of the schema that lives inside one part of kara_config (the
 * KV settings, the context's), through the same parse and range check as a
 * YAML value: the research knobs need not be struct fields an app spells. */
static kara_status set_in_part(const char *fn, size_t lo, size_t hi, void *part, const char *key, const char *text,
                               const char *what) {
    if (!part || !key || !text) return kr_set_error(KARA_ERR_ARG, "%s: NULL argument", fn);
    int i = key_in_part(fn, lo, hi, key, what);
    if (i < 0) return KARA_ERR_CONFIG;
    value v;
    char err[512];
    if (!kr_config_parse_value(&keys[i], text, &v, err, sizeof err))
        return kr_set_error(KARA_ERR_CONFIG, "%s: %s: %s", fn, key, err);
    kara_config *tmp = malloc(sizeof *tmp); /* a whole config only to reuse the stores by offset */
    if (!tmp) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", fn);
    memcpy((char *)tmp + lo, part, hi - lo);
    kr_config_store(&keys[i], tmp, &v);
    memcpy(part, (char *)tmp + lo, hi - lo);
    free(tmp);
    return KARA_OK;
}

#define KV_LO offsetof(kara_config, context.kv)
#define KV_HI (KV_LO + sizeof(kara_kv_params))
#define KV_WHAT "a KV cache setting (kv_cache.*, kara.*, baselines.*)"

kara_status kara_kv_params_set(kara_kv_params *p, const char *key, const char *value) {
    return set_in_part("kara_kv_params_set", KV_LO, KV_HI, p, key, value, KV_WHAT);
}

kara_status kara_kv_params_get(const kara_kv_params *p, const char *key, char *buf, size_t size) {
    static const char fn[] = "kara_kv_params_get";
    if (!p || !key || !buf) return kr_set_error(KARA_ERR_ARG, "%s: NULL argument", fn);
    int i = key_in_part(fn, KV_LO, KV_HI, key, KV_WHAT);
    if (i < 0) return KARA_ERR_CONFIG;
    kara_config *tmp = calloc(1, sizeof *tmp); /* the renderer reads by offset into a whole config */
    if (!tmp) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", fn);
    memcpy((char *)tmp + KV_LO, p, sizeof *p);
    char text[KARA_CONFIG_PATH_MAX + 16];
    kr_config_fmt_value(&keys[i], tmp, text, sizeof text);
    free(tmp);
    size_t n = strlen(text);
    if (n >= size) return kr_set_error(KARA_ERR_BUFFER, "%s: buffer too small for '%s' (%zu bytes)", fn, key, n + 1);
    memcpy(buf, text, n + 1);
    return KARA_OK;
}

kara_status kara_kv_params_get_number(const kara_kv_params *p, const char *key, double *out) {
    static const char fn[] = "kara_kv_params_get_number";
    if (!p || !key || !out) return kr_set_error(KARA_ERR_ARG, "%s: NULL argument", fn);
    int i = key_in_part(fn, KV_LO, KV_HI, key, KV_WHAT);
    if (i < 0) return KARA_ERR_CONFIG;
    const key_spec *k = &keys[i];
    const char *v = (const char *)p + (k->off - KV_LO);
    switch (k->type) {
    case K_INT:
    case K_BOOL:
    case K_ENUM:
    case K_LAYERS: *out = (double)load_int(v, k->size); return KARA_OK;
    case K_U64:
    case K_SIZE: {
        uint64_t u;
        memcpy(&u, v, sizeof u);
        *out = (double)u;
        return KARA_OK;
    }
    case K_FLOAT: {
        float f;
        memcpy(&f, v, sizeof f);
        *out = f;
        return KARA_OK;
    }
    default:
        return kr_set_error(KARA_ERR_CONFIG, "%s: '%s' is not a number (read it with kara_kv_params_get)", fn, key);
    }
}

kara_status kara_context_params_set(kara_context_params *p, const char *key, const char *value) {
    size_t lo = offsetof(kara_config, context);
    return set_in_part("kara_context_params_set", lo, lo + sizeof(kara_context_params), p, key, value,
                       "a context setting (context.*, runtime.threads, batch.max_concurrency, kv_cache.*, kara.*, "
                       "baselines.*)");
}

kara_status kara_config_get(const kara_config *c, const char *key, char *buf, size_t size) {
    int i = kr_config_find_key(key);
    if (i < 0) return unknown_key("kara_config_get", key);
    char tmp[KARA_CONFIG_PATH_MAX + 16];
    kr_config_fmt_value(&keys[i], c, tmp, sizeof tmp);
    if (strlen(tmp) >= size) return kr_set_error(KARA_ERR_BUFFER, "kara_config_get: buffer too small for '%s'", key);
    memcpy(buf, tmp, strlen(tmp) + 1);
    return KARA_OK;
}

const char *kara_config_origin(const kara_config *c, const char *key) {
    int i = kr_config_find_key(key);
    return i < 0 ? NULL : c->origin[i];
}
