/* kv_params.c - defaults of the KV cache and compression settings
 * (docs/KARA_METHOD.md section 12) and the names of their enum values. */
#include "kv_params.h"

#include <stdio.h>
#include <string.h>

#include "kv_method.h"
#include "status.h"
#include "kv_tuning.h"

/* kr_kv_method_names: methods/registry.c, from the list of methods. */

const kr_enum_name kr_kv_dtype_names[] = {
    {"f16", KARA_KV_F16}, {"f32", KARA_KV_F32}, {"q8_0", KARA_KV_Q8_0}, {"q4_0", KARA_KV_Q4_0}, {NULL, 0}};

/* The query cache holds f16, f32 or q8_0 rows (the scorer's queries), never q4_0. */
const kr_enum_name kr_query_dtype_names[] = {
    {"f16", KARA_KV_F16}, {"f32", KARA_KV_F32}, {"q8_0", KARA_KV_Q8_0}, {NULL, 0}};

const kr_enum_name kr_score_mode_names[] = {{"bidirectional", KR_SCORE_BIDIRECTIONAL},
                                            {"two_sided", KR_SCORE_TWO_SIDED},
                                            {"causal", KR_SCORE_CAUSAL},
                                            {"buffer_only", KR_SCORE_BUFFER_ONLY},
                                            {"online", KR_SCORE_ONLINE},
                                            {"online_max", KR_SCORE_ONLINE_MAX},
                                            {NULL, 0}};

const kr_enum_name kr_softmax_over_names[] = {{"window", KR_SOFTMAX_WINDOW},
                                              {"compressible", KR_SOFTMAX_COMPRESSIBLE},
                                              {"window_plus_sinks", KR_SOFTMAX_WINDOW_PLUS_SINKS},
                                              {NULL, 0}};

const kr_enum_name kr_gqa_reduce_names[] = {{"mean", KR_REDUCE_MEAN}, {"max", KR_REDUCE_MAX}, {NULL, 0}};

const kr_enum_name kr_layer_reduce_names[] = {
    {"mean", KR_REDUCE_MEAN}, {"normalized_mean", KR_REDUCE_NORMALIZED_MEAN}, {NULL, 0}};

/* SnapKV pools scores over neighbouring slots; "avg" is accepted as the
 * name its reference code uses. */
const kr_enum_name kr_pool_reduce_names[] = {
    {"max", KR_REDUCE_MAX}, {"mean", KR_REDUCE_MEAN}, {"avg", KR_REDUCE_MEAN}, {NULL, 0}};

const kr_enum_name kr_pool_fallback_names[] = {{"preempt", KARA_POOL_PREEMPT},
                                               {"recompress_history", KARA_POOL_RECOMPRESS_HISTORY},
                                               {"fail", KARA_POOL_FAIL},
                                               {NULL, 0}};

const kr_enum_name kr_kv_trigger_names[] = {
    {"periodic", KARA_KV_TRIGGER_PERIODIC}, {"threshold", KARA_KV_TRIGGER_THRESHOLD}, {NULL, 0}};

const kr_enum_name kr_kv_evict_names[] = {
    {"on_demand", KARA_KV_EVICT_ON_DEMAND}, {"per_window", KARA_KV_EVICT_PER_WINDOW}, {NULL, 0}};

const kr_enum_name kr_evict_rank_names[] = {
    {"window", KR_EVICT_RANK_WINDOW}, {"global", KR_EVICT_RANK_GLOBAL}, {NULL, 0}};

const kr_enum_name kr_compress_scope_names[] = {{"all", 0}, {"think_only", 1}, {NULL, 0}};
const kr_enum_name kr_selection_scope_names[] = {{"shared", 0}, {"per_layer", 1}, {NULL, 0}};
const kr_enum_name kr_t2c_mode_names[] = {{"chunks", KR_T2C_CHUNKS},
                                          {"pooled_topk", KR_T2C_POOLED_TOPK},
                                          {"lines", KR_T2C_LINES},
                                          {"line_tails", KR_T2C_LINE_TAILS},
                                          {NULL, 0}};

bool kr_kv_selection_reads_lines(const kara_kv_params *p) {
    const kr_kv_method *m = kr_kv_method_of(p);
    return m->reads_lines && m->reads_lines(p);
}

const char *kr_enum_to_name(const kr_enum_name *names, int value) {
    for (; names->name; names++)
        if (names->value == value) return names->name;
    return NULL;
}

bool kr_enum_from_name(const kr_enum_name *names, const char *name, int *value) {
    for (; names->name; names++) {
        if (!strcmp(names->name, name)) {
            *value = names->value;
            return true;
        }
    }
    return false;
}

/* Lists only canonical names: an alias repeats an earlier value. */
void kr_enum_list(const kr_enum_name *names, char *buf, size_t size) {
    size_t len = 0;
    if (size) buf[0] = 0;
    for (const kr_enum_name *n = names; n->name; n++) {
        if (kr_enum_to_name(names, n->value) != n->name) continue;
        int w = snprintf(buf + len, size - len, "%s%s", len ? " | " : "", n->name);
        if (w < 0 || (size_t)w >= size - len) return;
        len += (size_t)w;
    }
}

const kr_enum_name kr_seed_words[] = {{"random", -1}, {"-1", -1}, {NULL, 0}};

void kara_kv_params_init(kara_kv_params *p) {
    kr_kv_tuning *t = kr_kv_tune(p);
    memset(p, 0, sizeof *p);
    /* kv_cache: */
    p->block_size = 16;
    p->dtype = KARA_KV_F16;
    p->budget = (uint64_t)1 << 30; /* 1 GiB; the pool never needs more than n_ctx x n_seq_max */
    t->reserve_blocks = 8;
    p->method = KARA_KV_METHOD_KARA;
    p->seq_tokens = 0; /* auto: the pool's share per sequence */
    /* kara: */
    t->evict = KARA_KV_EVICT_ON_DEMAND;
    t->evict_margin = 0;   /* auto: interval / 4, at least one block */
    t->evict_lag = 1;      /* the near reads just past the buffer (KV_COMPRESSION.md, "Line tails") */
    t->evict_decay = 1.0f; /* every scored window gives up the same fraction */
    t->evict_rank = KR_EVICT_RANK_WINDOW;
    p->interval = 128;
    t->buffer = 128; /* measured: docs/KV_COMPRESSION.md, "Defaults by measurement" */
    p->retention = 0.2f;
    t->min_keep = 4;
    t->min_compressible = 32;
    t->max_compress_per_step = 0; /* auto */
    t->max_defer = 32;
    t->think_only = false;
    t->n_protect_token_ids = 0;
    t->query_cache_dtype = KARA_KV_Q8_0; /* half the ring of f16, the same selections (KV_COMPRESSION.md) */
    t->per_layer_selection = false;
    t->rerotate_keys = false;
    t->on_pool_exhausted = KARA_POOL_PREEMPT;
    t->trigger = KARA_KV_TRIGGER_PERIODIC;
    t->trigger_slack = 0; /* auto: kara.interval */
    /* baselines: */
    t->budget_tokens = 0; /* auto */
    /* each method's own knobs (kara.score, kara.t2c, baselines.<method>): its file under methods/ */
    for (int m = 0; kr_kv_method_get(m); m++)
        if (kr_kv_method_get(m)->defaults) kr_kv_method_get(m)->defaults(t);
}

/* Shared by the *_parse functions: the message lists every accepted name. */
static kara_status parse_enum(const kr_enum_name *names, const char *what, const char *name, int *out) {
    if (name && kr_enum_from_name(names, name, out)) return KARA_OK;
    char list[256];
    kr_enum_list(names, list, sizeof list);
    return kr_set_error(KARA_ERR_ARG, "unknown %s '%s' (expected %s)", what, name ? name : "(null)", list);
}

const char *kara_kv_method_name(kara_kv_method m) {
    const kr_kv_method *t = kr_kv_method_get((int)m);
    return t ? t->name : "?";
}

kara_status kara_kv_method_parse(const char *name, kara_kv_method *out) {
    int v;
    kara_status st = parse_enum(kr_kv_method_names, "KV method", name, &v);
    if (st == KARA_OK) *out = (kara_kv_method)v;
    return st;
}

const char *kara_kv_dtype_name(kara_kv_dtype t) {
    const char *n = kr_enum_to_name(kr_kv_dtype_names, (int)t);
    return n ? n : "?";
}

kara_status kara_kv_dtype_parse(const char *name, kara_kv_dtype *out) {
    int v;
    kara_status st = parse_enum(kr_kv_dtype_names, "KV dtype", name, &v);
    if (st == KARA_OK) *out = (kara_kv_dtype)v;
    return st;
}

const char *kr_score_mode_name(kr_score_mode m) {
    const char *n = kr_enum_to_name(kr_score_mode_names, (int)m);
    return n ? n : "?";
}

kara_status kr_score_mode_parse(const char *name, kr_score_mode *out) {
    int v;
    kara_status st = parse_enum(kr_score_mode_names, "score mode", name, &v);
    if (st == KARA_OK) *out = (kr_score_mode)v;
    return st;
}
