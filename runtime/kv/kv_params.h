/* kv_params.h - the name <-> value tables of the KV enums (internal).
 *
 * One table per enum, shared by kr_kv_*_name/parse and the YAML schema in
 * config/config_keys.c, so every spelling lives in exactly one place. */
#ifndef KR_KV_PARAMS_H
#define KR_KV_PARAMS_H

#include <stdbool.h>

#include "kara.h"
#include "kv_modes.h"

/* A name for an enum value. Tables end with {NULL, 0}; when a value has
 * several names (aliases), the first one is canonical (used for output). */
typedef struct kr_enum_name {
    const char *name;
    int value;
} kr_enum_name;

extern const kr_enum_name kr_kv_method_names[];
extern const kr_enum_name kr_kv_dtype_names[];
extern const kr_enum_name kr_query_dtype_names[];
extern const kr_enum_name kr_score_mode_names[];
extern const kr_enum_name kr_softmax_over_names[];
extern const kr_enum_name kr_gqa_reduce_names[];   /* mean | max */
extern const kr_enum_name kr_layer_reduce_names[]; /* mean | normalized_mean */
extern const kr_enum_name kr_pool_reduce_names[];  /* max | mean (snapkv pooling) */
extern const kr_enum_name kr_pool_fallback_names[];
extern const kr_enum_name kr_kv_trigger_names[];      /* periodic | threshold */
extern const kr_enum_name kr_kv_evict_names[];        /* on_demand | per_window */
extern const kr_enum_name kr_evict_rank_names[];      /* window | global */
extern const kr_enum_name kr_compress_scope_names[];  /* all | think_only -> bool */
extern const kr_enum_name kr_selection_scope_names[]; /* shared | per_layer -> bool */
extern const kr_enum_name kr_t2c_mode_names[];        /* chunks | pooled_topk | lines | line_tails */

/* Kara's selection reads where lines end (t2c.mode lines or line_tails):
 * the context builds the vocabulary's newline table, the policy flags a
 * region's line ends. */
bool kr_kv_selection_reads_lines(const kara_kv_params *p);

/* Canonical name of value, or NULL when the table has none. */
const char *kr_enum_to_name(const kr_enum_name *names, int value);
/* Exact, case-sensitive match; returns false when name is not in the table. */
bool kr_enum_from_name(const kr_enum_name *names, const char *name, int *value);
/* Write the canonical names as "a | b | c" into buf (for error messages). */
void kr_enum_list(const kr_enum_name *names, char *buf, size_t size);

/* kara.score.mode's name ("bidirectional"; "?" out of range) and its parse
 * (exactly these names, else KARA_ERR_ARG with a message listing them). */
const char *kr_score_mode_name(kr_score_mode m);
kara_status kr_score_mode_parse(const char *name, kr_score_mode *out);

#endif
