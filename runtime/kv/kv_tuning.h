/* kv_tuning.h - the research settings of the KV cache (internal).
 *
 * kara.h shows apps only the stable settings of kara_kv_params; everything
 * else (how Kara scores and selects, eviction details, each baseline's
 * knobs) lives in its private `tuning` bytes, laid out by kr_kv_tuning and
 * reached through kr_kv_tune(p). Apps set and read these by their YAML key
 * (kara_kv_params_set / _get, through the schema in config/config_schema.c),
 * so adding or dropping a knob changes neither the public header nor the
 * struct's size. Each comment gives the default (kara_kv_params_init) and
 * the YAML key where it is not the field's name. */
#ifndef KR_KV_TUNING_H
#define KR_KV_TUNING_H

#include <stdbool.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"

/* The baselines' knobs, declared here for the storage's layout and owned by
 * their method's file (methods/<name>.c: keys, bounds, defaults). */
typedef struct kr_streaming_knobs {
    int32_t n_sink;   /* sink slots always kept */
    float prior_frac; /* with a prior weight: share of the budget past the sinks the prior picks */
} kr_streaming_knobs;
typedef struct kr_snapkv_knobs {
    int32_t trigger_slack; /* growth past the budget that fires */
    int32_t obs_window;    /* observation queries */
    kr_reduce pool;        /* pooling of scores over the kernel: max or mean */
    int32_t kernel;        /* pooling width */
    bool protect_prompt;
} kr_snapkv_knobs;
typedef struct kr_h2o_knobs {
    float heavy_frac; /* share of the budget for heavy hitters */
} kr_h2o_knobs;
typedef struct kr_chunkkv_knobs {
    int32_t chunk_len; /* tokens per chunk */
} kr_chunkkv_knobs;
typedef struct kr_random_knobs {
    uint64_t seed;
} kr_random_knobs;
typedef struct kr_rkv_knobs {
    int32_t trigger_slack; /* the growth past the budget that fires (B_buffer) */
    int32_t obs_window;    /* observation queries */
    int32_t kernel;        /* max-pooling width of the attention */
    float lambda;          /* weight of attention against redundancy */
    float sim_threshold;   /* cosine above which keys count as near-duplicates */
    bool protect_prompt;
} kr_rkv_knobs;
typedef struct kr_lazy_knobs {
    int32_t window; /* W: slots between evictions and newest slots kept */
    float alpha;    /* mean attention at which a slot counts as attended */
    bool protect_prompt;
} kr_lazy_knobs;

typedef struct kr_kv_tuning {
    /* kv_cache: */
    int32_t reserve_blocks; /* 8; kept free at admission, per_window only */
    /* kara: */
    kara_kv_evict evict; /* on_demand */
    int32_t
        evict_margin;  /* on_demand: slots freed below the share; 0 = auto (interval / 4, <= share / 8, >= a block) */
    int32_t evict_lag; /* per_window: windows a scored window waits before it is compressed; 1 */
    float evict_decay; /* on_demand: keep fraction of a window one older, relative; 1 = every window alike */
    kr_evict_rank evict_rank;      /* on_demand: window (the default) or global (kv_modes.h) */
    int32_t buffer;                /* 128 */
    int32_t min_keep;              /* 4 */
    int32_t min_compressible;      /* 32 */
    int32_t max_compress_per_step; /* 0 = auto (ceil(running/interval)) */
    int32_t max_defer;             /* 32 */
    bool think_only;               /* compress_scope: think_only (false: all) */
    int32_t n_protect_token_ids;   /* protect_token_ids: none */
    int32_t protect_token_ids[KARA_MAX_PROTECT_TOKENS];
    kara_kv_dtype query_cache_dtype;      /* q8_0 (f16 for query rows not a multiple of 32); f16, f32 */
    bool per_layer_selection;             /* selection_scope: per_layer (ablation A5); false: shared */
    bool rerotate_keys;                   /* false; true is refused at context creation (KARA_ERR_UNSUPPORTED) */
    kara_pool_fallback on_pool_exhausted; /* preempt */
    kara_kv_trigger trigger;              /* periodic; threshold = ablation A8 (method kara only) */
    int32_t trigger_slack;                /* threshold: fire at budget_tokens + this; 0 = auto (interval) */
    /* kara.score (keys and defaults: methods/kara.c; the baselines that
     * score use them too): */
    kr_score_mode score_mode;     /* bidirectional */
    kr_softmax_over softmax_over; /* window */
    int32_t n_sink;               /* 4 */
    bool exclude_self;            /* true */
    kr_reduce gqa_reduce;         /* mean (or max) */
    kr_reduce layer_reduce;       /* mean (or normalized_mean) */
    int32_t layer_stride;         /* layers: 1 = all; N = stride:N */
    bool value_aware;             /* true: a slot's attention mass times the L1 norm of its value (VATP);
                                     * false: the attention mass alone */
    int32_t min_distance;         /* 16; score.mode online_max: reads from queries fewer positions later do not count */
    float reads_weight;           /* 0 = off (the default); > 0: on_demand, kara and chunkkv: attention a slot receives
                                     * after its window closed, added to its score at eviction (KARA_METHOD.md 7.4) */
    float prior_weight;           /* auto (< 0, the default): 16 when the model has a retention prior, else off;
                                     * 0 = off; kara: weight of the model's retention prior in its window scores
                                     * (KARA_METHOD.md 14); > 0 with a model without a prior: KARA_ERR_CONFIG */
    /* kara.t2c (methods/kara.c): */
    float candidate_frac; /* 0.5 */
    int32_t max_gap;      /* 16 */
    float len_penalty;    /* 1.0 */
    kr_t2c_mode t2c_mode; /* mode: line_tails (Token2Chunk, a candidate bringing the end of its line); chunks;
                             * pooled_topk = Top-K after max-pool 7 (ablation A4); lines */
    /* baselines: */
    int32_t budget_tokens; /* 0 = auto */
    /* each baseline's knobs, one sub-struct per method: its file under
     * methods/ registers their keys (baselines.<method>.<field>), bounds and
     * defaults in its kr_kv_method table */
    kr_streaming_knobs streaming;
    kr_snapkv_knobs snapkv;
    kr_h2o_knobs h2o;
    kr_chunkkv_knobs chunkkv;
    kr_random_knobs random;
    kr_rkv_knobs rkv;
    kr_lazy_knobs lazy;
} kr_kv_tuning;

_Static_assert(sizeof(kr_kv_tuning) <= KARA_KV_TUNING_BYTES, "kara_kv_params.tuning is too small for kr_kv_tuning");
_Static_assert(_Alignof(kr_kv_tuning) <= _Alignof(uint64_t), "kr_kv_tuning needs more alignment than the storage");

/* The research settings of a kara_kv_params (const in, const out). */
#define kr_kv_tune(p)                                                                                                  \
    _Generic((p),                                                                                                      \
        const kara_kv_params *: (const kr_kv_tuning *)(const void *)(p)->tuning.bytes,                               \
        kara_kv_params *: (kr_kv_tuning *)(void *)(p)->tuning.bytes)

/* The step between scored layers (kara.score.layers: all = 1, stride:N = N). */
static inline int32_t kr_kv_layer_stride(const kr_kv_tuning *t) { return t->layer_stride > 0 ? t->layer_stride : 1; }

#endif
