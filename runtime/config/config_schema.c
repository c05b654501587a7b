/* config_schema.c - the job configuration's one table of keys: the core
 * rows below and, beside them, the rows each KV method declares in its own
 * file (kv_method.h), with kara_config_key_info for listings.
 *
 * A row gives the key's dotted name, type, place in kara_config, range,
 * value names and a one-line help; configs/README.md has the details. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config_impl.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_tuning.h"
#include "status.h"

#define FIELD(m) offsetof(kara_config, m), sizeof(((kara_config *)0)->m)
#define KV(m) FIELD(context.kv.m)
/* a research setting: inside kara_kv_params' private tuning bytes (kv_tuning.h) */
#define TUNE_OFF(m) KR_TUNE_OFF(m)
#define TUNE(m) KR_TUNE(m)

static const kr_enum_name auto_zero[] = {{"auto", 0}, {NULL, 0}};
#define seed_words kr_seed_words /* kv_keys.h */
static const kr_enum_name think_names[] = {
    {"auto", KARA_THINK_AUTO}, {"on", KARA_THINK_ON},  {"off", KARA_THINK_OFF}, {"true", KARA_THINK_ON},
    {"false", KARA_THINK_OFF}, {"yes", KARA_THINK_ON}, {"no", KARA_THINK_OFF},  {NULL, 0}};
static const kr_enum_name device_names[] = {{"cpu", KARA_DEVICE_CPU}, {"cuda", KARA_DEVICE_CUDA}, {NULL, 0}};
static const kr_enum_name spec_names[] = {
    {"none", KARA_SPEC_NONE}, {"ngram", KARA_SPEC_NGRAM}, {"draft", KARA_SPEC_DRAFT}, {NULL, 0}};
/* batch.on_changed: what a resume does with a request edited since its answer (kara batch --on-changed) */
static const kr_enum_name on_changed_names[] = {{"rerun", 0}, {"refuse", 1}, {"keep", 2}, {NULL, 0}};

#define MAX_SLOTS KR_KEY_MAX_SLOTS
#define MAX_TOKENS KR_KEY_MAX_TOKENS

/* The stable core. Output order: keys of one section stay together,
 * sections nest by prefix; a method's rows join their section (below). */
static const key_spec core_head[] = {
    {"model.path", K_STRING, FIELD(model_path), 0, 0, NULL, 0, "the GGUF model file (-m)"},
    {"model.preset", K_STRING, FIELD(preset), 0, 0, NULL, 0, "preset name, recorded for logs"},
    {"model.mmap", K_BOOL, FIELD(use_mmap), 0, 0, NULL, 0, "map the GGUF file instead of reading it into memory"},
    {"runtime.threads", K_INT, FIELD(context.n_threads), -1, 4096, auto_zero, 0,
     "worker threads; 0 or -1: one per core"},
    {"runtime.device", K_ENUM, FIELD(context.device), 0, 0, device_names, 0, "where the forward pass runs"},
    {"context.size", K_INT, FIELD(context.n_ctx), 0, MAX_TOKENS, auto_zero, 0,
     "positions per sequence; auto: the model's training context"},
    {"context.batch", K_INT, FIELD(context.n_batch), 1, MAX_SLOTS, NULL, 0, "most tokens per forward pass"},
    {"sampling.temperature", K_FLOAT, FIELD(sampling.temperature), 0, 100, NULL, 0, "0: greedy"},
    {"sampling.top_k", K_INT, FIELD(sampling.top_k), -1, MAX_TOKENS, NULL, 0, "0 or -1: off"},
    {"sampling.top_p", K_FLOAT, FIELD(sampling.top_p), 0, 1, NULL, 0, "1: off"},
    {"sampling.min_p", K_FLOAT, FIELD(sampling.min_p), 0, 1, NULL, 0, "0: off"},
    {"sampling.repeat_penalty", K_FLOAT, FIELD(sampling.repeat_penalty), 0.01, 100, NULL, 0, "1: off"},
    {"sampling.repeat_last_n", K_INT, FIELD(sampling.repeat_last_n), 0, MAX_TOKENS, NULL, 0,
     "tokens the penalty looks back over"},
    {"sampling.seed", K_U64, FIELD(sampling.seed), 0, 0, seed_words, 0, "random seed; -1 or random draws one"},
    {"sampling.max_tokens", K_INT, FIELD(max_tokens), -1, MAX_TOKENS, NULL, 0,
     "tokens to generate; -1: until the end of generation"},
    {"kv_cache.block_size", K_INT, KV(block_size), 1, 4096, NULL, 0, "slots per block"},
    {"kv_cache.dtype", K_ENUM, KV(dtype), 0, 0, kr_kv_dtype_names, 0, "KV element type"},
    {"kv_cache.budget", K_SIZE, KV(budget), 0, 1125899906842624.0 /* 1 PiB */, auto_zero, 0,
     "hard cap on KV bytes (pool, query rings, scratch); auto: no cap"},
    {"kv_cache.reserve_blocks", K_INT, TUNE(reserve_blocks), 0, MAX_SLOTS, NULL, 0,
     "free blocks kept back at admission (kara.evict: per_window)"},
    {"kv_cache.method", K_ENUM, KV(method), 0, 0, kr_kv_method_names, 0, "KV policy (docs/KARA_METHOD.md section 11)"},
    {"kv_cache.seq_tokens", K_INT, KV(seq_tokens), 1, MAX_TOKENS, auto_zero, 0,
     "most KV slots one sequence holds; auto: its share of the pool"},
    {"kara.evict", K_ENUM, TUNE(evict), 0, 0, kr_kv_evict_names, 0,
     "window methods: evict at the share (on_demand) or at every window"},
    {"kara.evict_margin", K_INT, TUNE(evict_margin), 1, MAX_SLOTS, auto_zero, 0,
     "on_demand: slots freed below the share at each eviction"},
    {"kara.evict_lag", K_INT, TUNE(evict_lag), 0, 64, NULL, 0,
     "per_window: newer windows scored before a window is compressed"},
    {"kara.evict_decay", K_FLOAT, TUNE(evict_decay), 0.01, 1, NULL, 0,
     "on_demand: a window's keep fraction over that of the window after it; 1: every window alike"},
    {"kara.evict_rank", K_ENUM, TUNE(evict_rank), 0, 0, kr_evict_rank_names, 0,
     "on_demand: drop the same fraction of every window (window) or the lowest-scored slots of all (global)"},
    {"kara.interval", K_INT, KV(interval), 1, MAX_SLOTS, NULL, 0, "compressible slots that close a window"},
    {"kara.trigger", K_ENUM, TUNE(trigger), 0, 0, kr_kv_trigger_names, 0,
     "method kara: events per window, or one at the token budget (A8)"},
    {"kara.trigger_slack", K_INT, TUNE(trigger_slack), 1, MAX_SLOTS, auto_zero, 0,
     "threshold: slots past budget_tokens before an event; auto: interval"},
    {"kara.buffer", K_INT, TUNE(buffer), 0, MAX_SLOTS, NULL, 0, "newest slots protected at each event"},
    {"kara.retention", K_FLOAT, KV(retention), 0, 1, NULL, 0,
     "per_window: share of each window's compressible slots kept"},
    {"kara.min_keep", K_INT, TUNE(min_keep), 0, MAX_SLOTS, NULL, 0, "per_window: least slots kept per event"},
    {"kara.min_compressible", K_INT, TUNE(min_compressible), 0, MAX_SLOTS, NULL, 0,
     "skip events with fewer compressible slots"},
    {"kara.max_compress_per_step", K_INT, TUNE(max_compress_per_step), 0, MAX_SLOTS, auto_zero, 0,
     "on_demand: windows scored per decode step"},
    {"kara.max_defer", K_INT, TUNE(max_defer), 0, MAX_SLOTS, NULL, 0,
     "on_demand: steps a due window's scoring may wait"},
    {"kara.compress_scope", K_ENUM, TUNE(think_only), 0, 0, kr_compress_scope_names, 0,
     "think_only: stop compressing after the end of thinking"},
    {"kara.protect_token_ids", K_INT_LIST, TUNE(protect_token_ids), 0, INT32_MAX, NULL, TUNE_OFF(n_protect_token_ids),
     "tokens always kept"},
    {"kara.query_cache_dtype", K_ENUM, TUNE(query_cache_dtype), 0, 0, kr_query_dtype_names, 0,
     "element type of the query ring"},
    {"kara.selection_scope", K_ENUM, TUNE(per_layer_selection), 0, 0, kr_selection_scope_names, 0,
     "one selection for all layers, or one per scored layer (A5)"},
    {"kara.rerotate_keys", K_BOOL, TUNE(rerotate_keys), 0, 0, NULL, 0,
     "contiguous positions after compaction (not implemented: true is refused)"},
    {"kara.on_pool_exhausted", K_ENUM, TUNE(on_pool_exhausted), 0, 0, kr_pool_fallback_names, 0,
     "what a decode that finds no free block does"},
    {"baselines.budget_tokens", K_INT, TUNE(budget_tokens), 0, MAX_TOKENS, auto_zero, 0,
     "slots per sequence of the methods that compress at a token budget"},
};
static const key_spec core_tail[] = {
    {"chat.template", K_STRING, FIELD(chat_template), 0, 0, NULL, 0, "chat template; auto: from the GGUF metadata"},
    {"chat.think", K_ENUM, FIELD(think), 0, 0, think_names, 0, "thinking mode"},
    {"chat.reasoning_budget", K_INT, FIELD(reasoning_budget), -1, MAX_TOKENS, NULL, 0,
     "most thinking tokens; -1: unlimited, 0: none"},
    {"speculative.mode", K_ENUM, FIELD(spec), 0, 0, spec_names, 0,
     "speculative decoding: drafts from the text itself or a draft model"},
    {"speculative.draft_max", K_INT, FIELD(draft_max), 1, KARA_MAX_DRAFT, NULL, 0, "most tokens drafted per step"},
    {"speculative.draft_model", K_STRING, FIELD(draft_model), 0, 0, NULL, 0,
     "mode draft: the draft model's GGUF (-md)"},
    {"speculative.draft_p_min", K_FLOAT, FIELD(draft_p_min), 0, 1, NULL, 0,
     "mode draft: a draft stops below this probability"},
    {"batch.input", K_STRING, FIELD(batch_input), 0, 0, NULL, 0, "requests, JSONL (OpenAI Batch API)"},
    {"batch.output", K_STRING, FIELD(batch_output), 0, 0, NULL, 0, "results, JSONL"},
    {"batch.resume", K_BOOL, FIELD(batch_resume), 0, 0, NULL, 0, "skip requests already answered in the output"},
    {"batch.ordered", K_BOOL, FIELD(batch_ordered), 0, 0, NULL, 0, "write results in input order"},
    {"batch.on_changed", K_ENUM, FIELD(batch_on_changed), 0, 0, on_changed_names, 0,
     "on resume, what to do with a request edited since its answer"},
    {"batch.max_concurrency", K_INT, FIELD(context.n_seq_max), 1, 4096, NULL, 0, "sequences decoded together"},
    {"batch.shard", K_SHARD, FIELD(shard_index), 1, 65536, NULL, offsetof(kara_config, shard_count),
     "take input line L when (L-1) % N == K-1"},
};
static key_spec table[KARA_CONFIG_MAX_KEYS];
static int n_table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Whether two keys share their first section ("kara.score.mode" and "kara.buffer"). */
static bool same_section(const char *a, const char *b) {
    size_t n = strcspn(a, ".");
    return !strncmp(a, b, n) && b[n] == '.';
}

static void table_add(const key_spec *rows, int n) {
    for (int i = 0; i < n && n_table < KARA_CONFIG_MAX_KEYS; i++) table[n_table++] = rows[i];
}

/* A method's row goes after the last row of its section so far (kara's
 * kara.score.* after the core's kara.*, a baseline's after
 * baselines.budget_tokens and the baselines before it), else after the
 * core's head. */
static void table_insert(const key_spec *row) {
    if (n_table >= KARA_CONFIG_MAX_KEYS) return;
    int at = n_table;
    for (int i = n_table - 1; i >= 0; i--)
        if (same_section(table[i].key, row->key)) {
            at = i + 1;
            break;
        }
    memmove(&table[at + 1], &table[at], (size_t)(n_table - at) * sizeof table[0]);
    table[at] = *row;
    n_table++;
}

/* The core rows around the methods' own, in registry order; a row past
 * KARA_CONFIG_MAX_KEYS is left out (test_config counts the rows, so
 * raising the limit is caught). */
static void table_build(void) {
    table_add(core_head, (int)(sizeof core_head / sizeof core_head[0]));
    for (int m = 0; kr_kv_method_get(m); m++)
        for (int i = 0; i < kr_kv_method_get(m)->n_keys; i++) table_insert(&kr_kv_method_get(m)->keys[i]);
    table_add(core_tail, (int)(sizeof core_tail / sizeof core_tail[0]));
}

const key_spec *kr_config_table(void) {
    pthread_once(&table_once, table_build);
    return table;
}

int kr_config_table_size(void) {
    pthread_once(&table_once, table_build);
    return n_table;
}

/* The binary unit a bound is a whole number of (1PiB), else bytes. */
static void fmt_bytes(double v, char *buf, size_t size) {
    static const char *const units[] = {"PiB", "TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 5; i++) {
        double m = (double)(1ULL << (10 * (5 - i)));
        if (v >= m && v / m == (double)(long long)(v / m)) {
            snprintf(buf, size, "%.0f%s", v / m, units[i]);
            return;
        }
    }
    snprintf(buf, size, "%.0fB", v);
}

/* "lo..hi" and, for a key with special words, " or auto". */
static void fmt_range(const key_spec *k, char *buf, size_t size) {
    char words[128] = "";
    if (k->names) {
        char list[112];
        kr_enum_list(k->names, list, sizeof list);
        snprintf(words, sizeof words, " or %s", list);
    }
    if (k->type == K_SIZE) {
        char hi[32];
        fmt_bytes(k->max, hi, sizeof hi);
        snprintf(buf, size, "1B..%s%s", hi, words);
    } else {
        snprintf(buf, size, k->type == K_FLOAT ? "%g..%g%s" : "%.0f..%.0f%s", k->min, k->max, words);
    }
}

kara_status kara_config_key_info_get(int i, kara_config_key_info *out) {
    static const char *const types[] = {
        [K_INT] = "integer", [K_U64] = "u64",       [K_SIZE] = "size",     [K_FLOAT] = "number",  [K_BOOL] = "bool",
        [K_ENUM] = "name",   [K_STRING] = "string", [K_INT_LIST] = "list", [K_LAYERS] = "layers", [K_SHARD] = "shard"};
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_config_key_info_get: NULL argument");
    if (i < 0 || i >= kr_config_table_size())
        return kr_set_error(KARA_ERR_ARG, "kara_config_key_info_get: no key %d (the schema has %d)", i,
                            kr_config_table_size());
    const key_spec *k = &kr_config_table()[i];
    memset(out, 0, sizeof *out);
    out->key = k->key;
    out->type = types[k->type];
    out->help = k->help ? k->help : "";
    char *b = out->bounds;
    size_t n = sizeof out->bounds;
    switch (k->type) {
    case K_INT:
    case K_FLOAT:
    case K_SIZE: fmt_range(k, b, n); break;
    case K_U64: snprintf(b, n, "0..2^64-1%s", k->names ? " or -1 (random)" : ""); break;
    case K_BOOL: snprintf(b, n, "true | false"); break;
    case K_ENUM: kr_enum_list(k->names, b, n); break;
    case K_STRING: snprintf(b, n, "up to %zu bytes", k->size - 1); break;
    case K_INT_LIST: snprintf(b, n, "at most %d of %.0f..%.0f", KARA_MAX_PROTECT_TOKENS, k->min, k->max); break;
    case K_LAYERS: snprintf(b, n, "all or stride:N, N in %.0f..%.0f", k->min, k->max); break;
    case K_SHARD: snprintf(b, n, "K/N, 1 <= K <= N <= %.0f", k->max); break;
    }
    return KARA_OK;
}
