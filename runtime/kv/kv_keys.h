/* kv_keys.h - the row that declares one setting of the job configuration:
 * its YAML key, type, place in kara_config, range, value names and help.
 *
 * The configuration's table (config/config_keys.c) holds the core rows;
 * each KV method's file declares the rows of its own knobs in its
 * kr_kv_method table (kv_method.h), and the configuration takes them from
 * the registry, so a baseline's settings live beside its code. */
#ifndef KR_KV_KEYS_H
#define KR_KV_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_params.h"
#include "kv_tuning.h"

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
    size_t off;                /* offset of the field in kara_config */
    size_t size;               /* sizeof the field */
    double min, max;           /* inclusive range (list elements, N of stride:N and K/N) */
    const kr_enum_name *names; /* K_ENUM: the names; numbers: special words such as auto */
    size_t aux;                /* K_INT_LIST: offset of the count; K_SHARD: of shard_count */
    const char *help;          /* one line for listings (kara config keys); details: configs/README.md */
} key_spec;

/* A research setting's place: inside the private tuning bytes of
 * kara_config's kara_kv_params (kv_tuning.h). */
#define KR_TUNE_OFF(m) (offsetof(kara_config, context.kv.tuning) + offsetof(kr_kv_tuning, m))
#define KR_TUNE(m) KR_TUNE_OFF(m), sizeof(((kr_kv_tuning *)0)->m)

#define KR_KEY_MAX_SLOTS (1 << 20)  /* upper bound of slot and step counts */
#define KR_KEY_MAX_TOKENS (1 << 24) /* upper bound of token counts and positions */

/* A seed's words: -1 (llama.cpp's spelling) or "random" draws one at parse
 * time, so --print-config shows the seed a run actually used. */
extern const kr_enum_name kr_seed_words[];

#endif
