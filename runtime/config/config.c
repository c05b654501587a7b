/* config.c - the job configuration: one table of keys, read from YAML
 * (libyaml), set from flags, rendered back as YAML.
 *
 * Every key of the schema is one row of `keys` below: its dotted name, its
 * type, where it lives in kara_config, its range and its names. The YAML
 * loader, kara_config_set and kara_config_format all go through that row,
 * so a setting has one name, one check and one way of being printed. */
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

#include <yaml.h>

#include "kv_params.h"
#include "status.h"

/* ------------------------------------------------------------------------ */
/* The schema                                                                */
/* ------------------------------------------------------------------------ */

typedef enum key_type {
    K_INT,      /* int32_t; range checked */
    K_U64,      /* uint64_t, decimal or 0x hex */
    K_SIZE,     /* uint64_t bytes, with units */
    K_FLOAT,    /* float; range checked */
    K_BOOL,     /* bool: true/false, yes/no, on/off */
    K_ENUM,     /* a name from `names`, stored as an enum (int) or a bool */
    K_STRING,   /* char[size] */
    K_INT_LIST, /* int32_t[]; count at `aux` */
    K_LAYERS,   /* "all" | "stride:N" -> int32_t N */
    K_SHARD     /* "K/N" -> int32_t K-1 at off, int32_t N at aux */
} key_type;

typedef struct key_spec {
    const char *key;
    key_type type;
    size_t off;                   /* offset of the field in kara_config */
    size_t size;                  /* sizeof the field */
    double min, max;              /* inclusive range (list elements, N of stride:N and K/N) */
    const kara_enum_name *names;  /* K_ENUM: the names; numbers: special words such as auto */
    size_t aux;                   /* K_INT_LIST: offset of the count; K_SHARD: of shard_count */
} key_spec;

#define FIELD(m) offsetof(kara_config, m), sizeof(((kara_config *)0)->m)
#define KV(m) FIELD(context.kv.m)

static const kara_enum_name auto_zero[] = {{"auto", 0}, {NULL, 0}};
static const kara_enum_name think_names[] = {
    {"auto", KARA_THINK_AUTO}, {"on", KARA_THINK_ON},   {"off", KARA_THINK_OFF}, {"true", KARA_THINK_ON},
    {"false", KARA_THINK_OFF}, {"yes", KARA_THINK_ON}, {"no", KARA_THINK_OFF},  {NULL, 0}};

#define MAX_SLOTS (1 << 20)   /* upper bound of slot and step counts */
#define MAX_TOKENS (1 << 24)  /* upper bound of token counts and positions */

/* Output order: keys of one section stay together, sections nest by prefix. */
static const key_spec keys[] = {
    {"model.path", K_STRING, FIELD(model_path), 0, 0, NULL, 0},
    {"model.preset", K_STRING, FIELD(preset), 0, 0, NULL, 0},
    {"model.mmap", K_BOOL, FIELD(use_mmap), 0, 0, NULL, 0},
    {"runtime.threads", K_INT, FIELD(context.n_threads), -1, 4096, auto_zero, 0},
    {"context.size", K_INT, FIELD(context.n_ctx), 0, MAX_TOKENS, auto_zero, 0},
    {"context.batch", K_INT, FIELD(context.n_batch), 1, MAX_SLOTS, NULL, 0},
    {"sampling.temperature", K_FLOAT, FIELD(sampling.temperature), 0, 100, NULL, 0},
    {"sampling.top_k", K_INT, FIELD(sampling.top_k), 0, MAX_TOKENS, NULL, 0},
    {"sampling.top_p", K_FLOAT, FIELD(sampling.top_p), 0, 1, NULL, 0},
    {"sampling.min_p", K_FLOAT, FIELD(sampling.min_p), 0, 1, NULL, 0},
    {"sampling.repeat_penalty", K_FLOAT, FIELD(sampling.repeat_penalty), 0.01, 100, NULL, 0},
    {"sampling.repeat_last_n", K_INT, FIELD(sampling.repeat_last_n), 0, MAX_TOKENS, NULL, 0},
    {"sampling.seed", K_U64, FIELD(sampling.seed), 0, 0, NULL, 0},
    {"sampling.max_tokens", K_INT, FIELD(max_tokens), -1, MAX_TOKENS, NULL, 0},
    {"kv_cache.block_size", K_INT, KV(block_size), 1, 4096, NULL, 0},
    {"kv_cache.dtype", K_ENUM, KV(dtype), 0, 0, kara_kv_dtype_names, 0},
    {"kv_cache.budget", K_SIZE, KV(budget), 0, 1125899906842624.0 /* 1 PiB */, auto_zero, 0},
    {"kv_cache.reserve_blocks", K_INT, KV(reserve_blocks), 0, MAX_SLOTS, NULL, 0},
    {"kv_cache.method", K_ENUM, KV(method), 0, 0, kara_kv_method_names, 0},
    {"kv_cache.seq_tokens", K_INT, KV(seq_tokens), 1, MAX_TOKENS, auto_zero, 0},
    {"kara.evict", K_ENUM, KV(evict), 0, 0, kara_kv_evict_names, 0},
    {"kara.evict_margin", K_INT, KV(evict_margin), 1, MAX_SLOTS, auto_zero, 0},
    {"kara.interval", K_INT, KV(interval), 1, MAX_SLOTS, NULL, 0},
    {"kara.trigger", K_ENUM, KV(trigger), 0, 0, kara_kv_trigger_names, 0},
    {"kara.trigger_slack", K_INT, KV(trigger_slack), 1, MAX_SLOTS, auto_zero, 0},
    {"kara.buffer", K_INT, KV(buffer), 0, MAX_SLOTS, NULL, 0},
    {"kara.retention", K_FLOAT, KV(retention), 0, 1, NULL, 0},
    {"kara.min_keep", K_INT, KV(min_keep), 0, MAX_SLOTS, NULL, 0},
    {"kara.min_compressible", K_INT, KV(min_compressible), 0, MAX_SLOTS, NULL, 0},
    {"kara.max_compress_per_step", K_INT, KV(max_compress_per_step), 0, MAX_SLOTS, auto_zero, 0},
    {"kara.max_defer", K_INT, KV(max_defer), 0, MAX_SLOTS, NULL, 0},
    {"kara.compress_scope", K_ENUM, KV(think_only), 0, 0, kara_compress_scope_names, 0},
    {"kara.protect_token_ids", K_INT_LIST, KV(protect_token_ids), 0, INT32_MAX, NULL,
     offsetof(kara_config, context.kv.n_protect_token_ids)},
    {"kara.query_cache_dtype", K_ENUM, KV(query_cache_dtype), 0, 0, kara_kv_dtype_names, 0},
    {"kara.selection_scope", K_ENUM, KV(per_layer_selection), 0, 0, kara_selection_scope_names, 0},
    {"kara.rerotate_keys", K_BOOL, KV(rerotate_keys), 0, 0, NULL, 0},
    {"kara.on_pool_exhausted", K_ENUM, KV(on_pool_exhausted), 0, 0, kara_pool_fallback_names, 0},
    {"kara.score.mode", K_ENUM, KV(score_mode), 0, 0, kara_score_mode_names, 0},
    {"kara.score.softmax_over", K_ENUM, KV(softmax_over), 0, 0, kara_softmax_over_names, 0},
    {"kara.score.n_sink", K_INT, KV(n_sink), 0, 65536, NULL, 0},
    {"kara.score.exclude_self", K_BOOL, KV(exclude_self), 0, 0, NULL, 0},
    {"kara.score.gqa_reduce", K_ENUM, KV(gqa_reduce), 0, 0, kara_gqa_reduce_names, 0},
    {"kara.score.layer_reduce", K_ENUM, KV(layer_reduce), 0, 0, kara_layer_reduce_names, 0},
    {"kara.score.layers", K_LAYERS, KV(layer_stride), 1, 4096, NULL, 0},
    {"kara.t2c.mode", K_ENUM, KV(t2c_pooled_topk), 0, 0, kara_t2c_mode_names, 0},
    {"kara.t2c.candidate_frac", K_FLOAT, KV(candidate_frac), 0, 1, NULL, 0},
    {"kara.t2c.max_gap", K_INT, KV(max_gap), 0, 65536, NULL, 0},
    {"kara.t2c.len_penalty", K_FLOAT, KV(len_penalty), 0, 100, NULL, 0},
    {"baselines.budget_tokens", K_INT, KV(budget_tokens), 0, MAX_TOKENS, auto_zero, 0},
    {"baselines.streaming.n_sink", K_INT, KV(streaming_n_sink), 0, 65536, NULL, 0},
    {"baselines.snapkv.trigger_slack", K_INT, KV(snapkv_trigger_slack), 0, MAX_SLOTS, NULL, 0},
    {"baselines.snapkv.obs_window", K_INT, KV(snapkv_obs_window), 1, 65536, NULL, 0},
    {"baselines.snapkv.pool", K_ENUM, KV(snapkv_pool), 0, 0, kara_pool_reduce_names, 0},
    {"baselines.snapkv.kernel", K_INT, KV(snapkv_kernel), 1, 255, NULL, 0},
    {"baselines.snapkv.protect_prompt", K_BOOL, KV(snapkv_protect_prompt), 0, 0, NULL, 0},
    {"baselines.h2o.heavy_frac", K_FLOAT, KV(h2o_heavy_frac), 0, 1, NULL, 0},
    {"baselines.chunkkv.chunk_len", K_INT, KV(chunkkv_chunk_len), 1, 4096, NULL, 0},
    {"baselines.random.seed", K_U64, KV(random_seed), 0, 0, NULL, 0},
    {"chat.template", K_STRING, FIELD(chat_template), 0, 0, NULL, 0},
    {"chat.think", K_ENUM, FIELD(think), 0, 0, think_names, 0},
    {"chat.reasoning_budget", K_INT, FIELD(reasoning_budget), -1, MAX_TOKENS, NULL, 0},
    {"batch.input", K_STRING, FIELD(batch_input), 0, 0, NULL, 0},
    {"batch.output", K_STRING, FIELD(batch_output), 0, 0, NULL, 0},
    {"batch.resume", K_BOOL, FIELD(batch_resume), 0, 0, NULL, 0},
    {"batch.max_concurrency", K_INT, FIELD(context.n_seq_max), 1, 4096, NULL, 0},
    {"batch.shard", K_SHARD, FIELD(shard_index), 1, 65536, NULL, offsetof(kara_config, shard_count)},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))
_Static_assert(sizeof keys / sizeof keys[0] <= KARA_CONFIG_MAX_KEYS, "raise KARA_CONFIG_MAX_KEYS");
_Static_assert(sizeof(kara_kv_method) == sizeof(int), "enums are stored as int");

static int find_key(const char *key) {
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].key, key)) return i;
    return -1;
}

/* True when `path` names a section: some key starts with "path.". */
static bool is_section(const char *path) {
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
    c->batch_resume = false;
    c->shard_index = 0;
    c->shard_count = 1;
    for (int i = 0; i < N_KEYS; i++) snprintf(c->origin[i], KARA_CONFIG_ORIGIN_MAX, "default");
}

/* ------------------------------------------------------------------------ */
/* Parsing one value from text                                               */
/* ------------------------------------------------------------------------ */

/* A parsed value, held until the whole value is known to be good, so a bad
 * value never leaves a field half-written. */
typedef struct value {
    int64_t i;
    uint64_t u;
    double f;
    const char *s;
    int32_t list[KARA_MAX_PROTECT_TOKENS];
    int n_list;
    int32_t shard_count;
} value;

static const struct {
    const char *name;
    uint64_t mult;
} size_units[] = {
    {"B", 1},
    {"KB", 1000ULL},       {"KiB", 1ULL << 10},
    {"MB", 1000000ULL},    {"MiB", 1ULL << 20},
    {"GB", 1000000000ULL}, {"GiB", 1ULL << 30},
};
#define N_SIZE_UNITS (sizeof size_units / sizeof size_units[0])

static bool is_null_text(const char *s) { return !*s || !strcmp(s, "~") || !strcmp(s, "null"); }

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

static void fmt_bound(const key_spec *k, double v, char *buf, size_t size) {
    if (k->type == K_FLOAT) snprintf(buf, size, "%g", v);
    else snprintf(buf, size, "%.0f", v);
}

static bool out_of_range(const key_spec *k, double v, const char *text, char *err, size_t esz) {
    if (v >= k->min && v <= k->max) return false;
    char lo[32], hi[32];
    fmt_bound(k, k->min, lo, sizeof lo);
    fmt_bound(k, k->max, hi, sizeof hi);
    snprintf(err, esz, "%s is out of range [%s, %s]", text, lo, hi);
    return true;
}

/* "12", "1.5GiB", "256 MiB": number, optional spaces, optional unit. */
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
    /* Integer part exactly, fraction (if any) through double. */
    uint64_t whole;
    const char *dot = strchr(num, '.');
    char ipart[64];
    snprintf(ipart, sizeof ipart, "%.*s", (int)(dot ? dot - num : (ptrdiff_t)n), num);
    if (!parse_u64(ipart, &whole) || (mult > 1 && whole > UINT64_MAX / mult)) {
        snprintf(err, esz, "%s is out of range", s);
        return false;
    }
    uint64_t bytes = whole * mult;
    if (dot) bytes += (uint64_t)(strtod(dot, NULL) * (double)mult);
    if (out_of_range(k, (double)bytes, s, err, esz)) return false;
    v->u = bytes;
    return true;
}

static void type_desc(const key_spec *k, char *buf, size_t size) {
    switch (k->type) {
    case K_INT: snprintf(buf, size, "an integer"); break;
    case K_U64: snprintf(buf, size, "a non-negative integer"); break;
    case K_SIZE: snprintf(buf, size, "a size such as 256MiB"); break;
    case K_FLOAT: snprintf(buf, size, "a number"); break;
    case K_BOOL: snprintf(buf, size, "true or false"); break;
    case K_ENUM: {
        char list[256];
        kara_enum_list(k->names, list, sizeof list);
        snprintf(buf, size, "one of %s", list);
        break;
    }
    case K_STRING: snprintf(buf, size, "a string"); break;
    case K_INT_LIST: snprintf(buf, size, "a list of integers such as [1, 2]"); break;
    case K_LAYERS: snprintf(buf, size, "all or stride:N"); break;
    case K_SHARD: snprintf(buf, size, "K/N such as 1/4"); break;
    }
}

static bool parse_list_item(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
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
        if (!parse_list_item(k, q, v, err, esz)) return false;
        if (!comma) return true;
        p = comma + 1;
    }
}

/* Parse text as the value of key k into *v; on failure err gets the
 * problem (without location or key). */
static bool parse_text(const key_spec *k, const char *s, value *v, char *err, size_t esz) {
    char want[300];
    memset(v, 0, sizeof *v);
    int special;
    if (k->type != K_ENUM && k->type != K_STRING && k->names && kara_enum_from_name(k->names, s, &special)) {
        v->i = special;
        v->u = (uint64_t)special;
        return true;
    }
    if (k->type != K_STRING && k->type != K_INT_LIST && is_null_text(s)) {
        type_desc(k, want, sizeof want);
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
        if (!parse_u64(s, &v->u)) {
            snprintf(err, esz, "expected a non-negative integer, got '%s'", s);
            return false;
        }
        return true;
    case K_SIZE: return parse_size(k, s, v, err, esz);
    case K_FLOAT: {
        char *end;
        v->f = strtod(s, &end);
        if (end == s || *end || isspace((unsigned char)*s) || !isfinite(v->f)) {
            snprintf(err, esz, "expected a number, got '%s'", s);
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
        if (!kara_enum_from_name(k->names, s, &e)) {
            char list[256];
            kara_enum_list(k->names, list, sizeof list);
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
    if (size == sizeof(bool)) *(bool *)p = v != 0;
    else *(int32_t *)p = (int32_t)v;
}

static int64_t load_int(const void *p, size_t size) {
    if (size == sizeof(bool)) return *(const bool *)p;
    return *(const int32_t *)p;
}

/* Write a parsed value into its field; the string buffer is zero-filled
 * past the text so equal configs compare equal byte for byte. */
static void store(const key_spec *k, kara_config *c, const value *v) {
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
static void fmt_value(const key_spec *k, const kara_config *c, char *buf, size_t size) {
    const char *base = (const char *)c;
    const void *p = base + k->off;
    const char *name;
    switch (k->type) {
    case K_INT: {
        int64_t v = load_int(p, k->size);
        if (k->names && (name = kara_enum_to_name(k->names, (int)v))) snprintf(buf, size, "%s", name);
        else snprintf(buf, size, "%lld", (long long)v);
        break;
    }
    case K_U64: snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_SIZE: {
        uint64_t v = *(const uint64_t *)p;
        if (k->names && v == 0) snprintf(buf, size, "%s", kara_enum_to_name(k->names, 0));
        else fmt_size(v, buf, size);
        break;
    }
    case K_FLOAT: fmt_float(*(const float *)p, buf, size); break;
    case K_BOOL: snprintf(buf, size, "%s", *(const bool *)p ? "true" : "false"); break;
    case K_ENUM:
        name = kara_enum_to_name(k->names, (int)load_int(p, k->size));
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
        if (v <= 1) snprintf(buf, size, "all");
        else snprintf(buf, size, "stride:%d", v);
        break;
    }
    case K_SHARD:
        snprintf(buf, size, "%d/%d", *(const int32_t *)p + 1, *(const int32_t *)(base + k->aux));
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Keys by name: set, get, origin                                            */
/* ------------------------------------------------------------------------ */

/* Levenshtein distance, for "did you mean" hints on unknown keys. */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 127 || lb > 127) return 1000;
    int row[128];
    for (int j = 0; j <= lb; j++) row[j] = j;
    for (int i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* " (did you mean 'x'?)" for the closest name: a key with the same last
 * component in another section, else a key or section within a few edits;
 * "" when nothing is close. */
static void suggest(const char *key, char *buf, size_t size) {
    buf[0] = 0;
    const char *leaf = strrchr(key, '.');
    leaf = leaf ? leaf + 1 : key;
    char best[128] = "";
    int best_d = 4;
    for (int i = 0; i < N_KEYS; i++) {
        const char *k = keys[i].key;
        if (!strcmp(strrchr(k, '.') + 1, leaf)) {
            snprintf(best, sizeof best, "%s", k);
            break;
        }
        /* the key itself and each of its sections: "kara.score.mode", "kara.score", "kara" */
        for (const char *end = k + strlen(k); end > k;) {
            char cand[128];
            snprintf(cand, sizeof cand, "%.*s", (int)(end - k), k);
            int d = edit_distance(key, cand);
            if (d < best_d) best_d = d, snprintf(best, sizeof best, "%s", cand);
            do end--;
            while (end > k && *end != '.');
        }
    }
    if (best[0]) snprintf(buf, size, " (did you mean '%s'?)", best);
}

static kara_status unknown_key(const char *where, const char *key) {
    char hint[160];
    suggest(key, hint, sizeof hint);
    if (is_section(key)) return kara_set_error(KARA_ERR_CONFIG, "%s: '%s' is a section, not a key", where, key);
    return kara_set_error(KARA_ERR_CONFIG, "%s: unknown key '%s'%s", where, key, hint);
}

kara_status kara_config_set(kara_config *c, const char *key, const char *text, const char *origin) {
    if (!c || !key || !text) return kara_set_error(KARA_ERR_ARG, "kara_config_set: NULL argument");
    if (!origin) origin = "api";
    int i = find_key(key);
    if (i < 0) return unknown_key(origin, key);
    value v;
    char err[512];
    if (!parse_text(&keys[i], text, &v, err, sizeof err))
        return kara_set_error(KARA_ERR_CONFIG, "%s: %s: %s", origin, key, err);
    store(&keys[i], c, &v);
    snprintf(c->origin[i], KARA_CONFIG_ORIGIN_MAX, "%s", origin);
    return KARA_OK;
}

kara_status kara_config_get(const kara_config *c, const char *key, char *buf, size_t size) {
    int i = find_key(key);
    if (i < 0) return unknown_key("kara_config_get", key);
    char tmp[KARA_CONFIG_PATH_MAX + 16];
    fmt_value(&keys[i], c, tmp, sizeof tmp);
    if (strlen(tmp) >= size) return kara_set_error(KARA_ERR_ARG, "kara_config_get: buffer too small for '%s'", key);
    memcpy(buf, tmp, strlen(tmp) + 1);
    return KARA_OK;
}

const char *kara_config_origin(const kara_config *c, const char *key) {
    int i = find_key(key);
    return i < 0 ? NULL : c->origin[i];
}

/* ------------------------------------------------------------------------ */
/* YAML                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct loader {
    kara_config *cfg;
    yaml_document_t *doc;
    const char *name;
} loader;

static kara_status at_error(const loader *ld, yaml_mark_t m, const char *key, const char *msg) {
    if (key)
        return kara_set_error(KARA_ERR_CONFIG, "%s:%zu:%zu: %s: %s", ld->name, m.line + 1, m.column + 1, key, msg);
    return kara_set_error(KARA_ERR_CONFIG, "%s:%zu:%zu: %s", ld->name, m.line + 1, m.column + 1, msg);
}

/* "NAME:LINE:COL", shortening a long NAME from the left so the position
 * always fits. */
static void set_file_origin(const loader *ld, int i, yaml_mark_t m) {
    char pos[48];
    snprintf(pos, sizeof pos, ":%zu:%zu", m.line + 1, m.column + 1);
    size_t lp = strlen(pos), room = KARA_CONFIG_ORIGIN_MAX - 1 - lp, n = strlen(ld->name);
    char *o = ld->cfg->origin[i];
    if (n <= room) {
        memcpy(o, ld->name, n);
    } else {
        memcpy(o, "...", 3);
        memcpy(o + 3, ld->name + n - (room - 3), room - 3);
        n = room;
    }
    memcpy(o + n, pos, lp + 1);
}

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a value";
}

static const char *scalar_text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* An empty plain scalar (`key:`), `~` or `null`: nothing given. Quoted
 * "" is a real empty string. */
static bool is_null_node(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           is_null_text(scalar_text(n));
}

static kara_status apply_node(loader *ld, int ki, yaml_node_t *n) {
    const key_spec *k = &keys[ki];
    value v;
    char err[512];
    if (k->type == K_INT_LIST && n->type == YAML_SEQUENCE_NODE) {
        memset(&v, 0, sizeof v);
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(ld->doc, *it);
            if (e->type != YAML_SCALAR_NODE) {
                snprintf(err, sizeof err, "expected an integer in the list, got %s", node_kind(e));
                return at_error(ld, e->start_mark, k->key, err);
            }
            if (!parse_list_item(k, scalar_text(e), &v, err, sizeof err))
                return at_error(ld, e->start_mark, k->key, err);
        }
    } else if (n->type != YAML_SCALAR_NODE) {
        char want[300];
        type_desc(k, want, sizeof want);
        snprintf(err, sizeof err, "expected %s, got %s", want, node_kind(n));
        return at_error(ld, n->start_mark, k->key, err);
    } else {
        const char *text = is_null_node(n) ? "" : scalar_text(n);
        if (!parse_text(k, text, &v, err, sizeof err)) return at_error(ld, n->start_mark, k->key, err);
    }
    store(k, ld->cfg, &v);
    set_file_origin(ld, ki, n->start_mark);
    return KARA_OK;
}

/* Walk one mapping whose keys extend `prefix` ("" at the top). */
static kara_status walk_mapping(loader *ld, yaml_node_t *map, const char *prefix) {
    yaml_node_pair_t *first = map->data.mapping.pairs.start;
    for (yaml_node_pair_t *pr = first; pr < map->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(ld->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(ld->doc, pr->value);
        if (kn->type != YAML_SCALAR_NODE) return at_error(ld, kn->start_mark, NULL, "keys must be plain names");
        const char *name = scalar_text(kn);
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        for (yaml_node_pair_t *q = first; q < pr; q++) {
            yaml_node_t *qk = yaml_document_get_node(ld->doc, q->key);
            if (qk->type == YAML_SCALAR_NODE && !strcmp(scalar_text(qk), name)) {
                char msg[400];
                snprintf(msg, sizeof msg, "duplicate key '%s' (first given at line %zu, column %zu)", path,
                         qk->start_mark.line + 1, qk->start_mark.column + 1);
                return at_error(ld, kn->start_mark, NULL, msg);
            }
        }
        int ki = find_key(path);
        kara_status st;
        if (ki >= 0) {
            st = apply_node(ld, ki, vn);
        } else if (is_section(path)) {
            if (vn->type == YAML_MAPPING_NODE) st = walk_mapping(ld, vn, path);
            else if (is_null_node(vn)) st = KARA_OK; /* a section with every key commented out */
            else {
                char msg[400];
                snprintf(msg, sizeof msg, "'%s' is a section and needs keys below it, got %s", path, node_kind(vn));
                st = at_error(ld, vn->start_mark, NULL, msg);
            }
        } else {
            char hint[160], msg[512];
            suggest(path, hint, sizeof hint);
            snprintf(msg, sizeof msg, "unknown key '%s'%s", path, hint);
            st = at_error(ld, kn->start_mark, NULL, msg);
        }
        if (st != KARA_OK) return st;
    }
    return KARA_OK;
}

/* libyaml marks scanner and parser errors with a position; reader errors
 * (bad encoding) only with a byte offset, turned into line:column here. */
static kara_status syntax_error(const loader *ld, const yaml_parser_t *p, const char *text, size_t len) {
    char msg[400];
    if (p->error == YAML_MEMORY_ERROR) return kara_set_error(KARA_ERR_NOMEM, "%s: out of memory reading YAML", ld->name);
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR) {
        m.line = m.column = 0;
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (text[i] == '\n') m.line++, m.column = 0;
            else m.column++;
        }
    }
    snprintf(msg, sizeof msg, "invalid YAML: %s%s%s", p->problem ? p->problem : "syntax error",
             p->context ? " " : "", p->context ? p->context : "");
    return at_error(ld, m, NULL, msg);
}

kara_status kara_config_load_text(kara_config *c, const char *text, long len, const char *name) {
    if (!c || !text) return kara_set_error(KARA_ERR_ARG, "kara_config_load_text: NULL argument");
    if (!name) name = "<config>";
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return kara_set_error(KARA_ERR_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);

    /* Work on a copy: a file with an error anywhere changes nothing. */
    kara_config *work = malloc(sizeof *work);
    if (!work) {
        yaml_parser_delete(&parser);
        return kara_set_error(KARA_ERR_NOMEM, "%s: out of memory", name);
    }
    *work = *c;
    loader ld = {work, NULL, name};
    yaml_document_t doc;
    kara_status st = KARA_OK;
    if (!yaml_parser_load(&parser, &doc)) {
        st = syntax_error(&ld, &parser, text, n);
    } else {
        ld.doc = &doc;
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root || is_null_node(root)) st = KARA_OK; /* empty file: nothing to change */
        else if (root->type != YAML_MAPPING_NODE)
            st = at_error(&ld, root->start_mark, NULL, "the top level must be a mapping of sections (model:, sampling:, ...)");
        else st = walk_mapping(&ld, root, "");
        if (st == KARA_OK) {
            /* A second document ("---") would be silently ignored: refuse it. */
            yaml_document_t next;
            if (!yaml_parser_load(&parser, &next)) {
                st = syntax_error(&ld, &parser, text, n);
            } else {
                yaml_node_t *r2 = yaml_document_get_root_node(&next);
                if (r2) st = at_error(&ld, r2->start_mark, NULL, "only one YAML document is allowed");
                yaml_document_delete(&next);
            }
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    if (st == KARA_OK) *c = *work;
    free(work);
    return st;
}

kara_status kara_config_load(kara_config *c, const char *path) {
    if (!c || !path) return kara_set_error(KARA_ERR_ARG, "kara_config_load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return kara_set_error(KARA_ERR_IO, "%s: cannot open config: %s", path, strerror(errno));
    enum { MAX_CONFIG = 4 << 20 };
    char *buf = malloc(MAX_CONFIG + 1);
    if (!buf) {
        fclose(f);
        return kara_set_error(KARA_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, MAX_CONFIG + 1, f);
    bool bad = ferror(f);
    fclose(f);
    kara_status st;
    if (bad) st = kara_set_error(KARA_ERR_IO, "%s: read error", path);
    else if (n > MAX_CONFIG) st = kara_set_error(KARA_ERR_CONFIG, "%s: larger than %d bytes; not a config file", path, MAX_CONFIG);
    else st = kara_config_load_text(c, buf, (long)n, path);
    free(buf);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Rendering the whole configuration                                         */
/* ------------------------------------------------------------------------ */

typedef struct out_buf {
    char *buf;
    size_t size, len;
} out_buf;

static void out(out_buf *o, const char *fmt, ...) KARA_PRINTF(2, 3);
static void out(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int w = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) o->len += (size_t)w;
}

/* A YAML double-quoted string: every byte that YAML treats specially is
 * escaped, so any path reads back unchanged. */
static void quote(const char *s, char *buf, size_t size) {
    size_t n = 0;
    if (size < 3) return;
    buf[n++] = '"';
    for (; *s && n + 6 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') n += (size_t)snprintf(buf + n, size - n, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) n += (size_t)snprintf(buf + n, size - n, "\\x%02x", ch);
        else buf[n++] = (char)ch;
    }
    buf[n++] = '"';
    buf[n] = 0;
}

/* Sections are opened as the key paths change: going from "kara.t2c.x" to
 * "baselines.budget_tokens" closes kara.t2c and opens baselines. */
size_t kara_config_format(const kara_config *c, char *buf, size_t size) {
    out_buf o = {buf, size, 0};
    if (size) buf[0] = 0;
    out(&o, "# Kara configuration as resolved; each comment names where the value came from.\n");
    const char *prev = "";
    for (int i = 0; i < N_KEYS; i++) {
        const char *key = keys[i].key;
        /* Length of the section prefix shared with the previous key, in whole components. */
        size_t common = 0;
        for (size_t j = 0; key[j] && key[j] == prev[j]; j++)
            if (key[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += key[j] == '.';
        const char *p = key + common;
        const char *dot;
        while ((dot = strchr(p, '.'))) {
            out(&o, "%s%*s%.*s:\n", depth == 0 && i ? "\n" : "", depth * 2, "", (int)(dot - p), p);
            depth++;
            p = dot + 1;
        }
        char val[KARA_CONFIG_PATH_MAX + 16], text[2 * KARA_CONFIG_PATH_MAX + 64];
        fmt_value(&keys[i], c, val, sizeof val);
        if (keys[i].type == K_STRING) quote(val, text, sizeof text);
        else snprintf(text, sizeof text, "%s", val);
        int w = depth * 2 + (int)strlen(p) + 2 + (int)strlen(text);
        out(&o, "%*s%s: %s%*s  # %s\n", depth * 2, "", p, text, w < 40 ? 40 - w : 0, "", c->origin[i]);
        prev = key;
    }
    return o.len;
}
