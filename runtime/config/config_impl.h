/* config_impl.h - what the configuration's files share: the key table
 * (config_keys.c), used by the YAML loader (config_yaml.c) and the renderer
 * (config_format.c). */
#ifndef KR_CONFIG_IMPL_H
#define KR_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_keys.h"
#include "kv_params.h"

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

/* The schema's rows: config_keys.c's own with, where the baselines' section
 * stands, each registered KV method's (kv_method.h), in registry order.
 * Built on first use. */
const key_spec *kr_config_table(void);
int kr_config_table_size(void);

/* Index of a key in the table, -1 when unknown. */
int kr_config_find_key(const char *key);
/* Is path a section of the schema ("kara", "kara.score")? */
bool kr_config_is_section(const char *path);
/* "", "~" and "null" mean "none". */
bool kr_config_is_null_text(const char *s);
/* Parse text as key k's value into v; false with a message in err. */
bool kr_config_parse_value(const key_spec *k, const char *s, value *v, char *err, size_t esz);
/* Write a parsed value into its field of c. */
void kr_config_store(const key_spec *k, kara_config *c, const value *v);
/* Key k's value in c as text that kara_config_set accepts. */
void kr_config_fmt_value(const key_spec *k, const kara_config *c, char *buf, size_t size);

/* One element of a list value (K_INT_LIST). */
bool kr_config_parse_list_item(const key_spec *k, const char *s, value *v, char *err, size_t esz);
/* "an integer", "a size", ... for messages. */
void kr_config_type_desc(const key_spec *k, char *buf, size_t size);
/* " (did you mean 'kara.retention'?)" for a key close to a real one, else "". */
void kr_config_suggest(const char *key, char *buf, size_t size);

#endif
