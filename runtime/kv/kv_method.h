/*
 * kv_method.h - the table a KV method fills (runtime/kv/methods/, one file
 * each) and the registry that finds it. The cache (kv_cache, kv_quant,
 * kv_compact, kv_plan) and the policy's machinery (kv_policy: windows,
 * shares, speculation, pool pressure) ask a method through this table and
 * never by its name, so adding a baseline touches its own file and one
 * line of methods/registry.c.
 *
 * A token's path through the hooks (docs/ARCHITECTURE.md): the plan asks
 * `kind`, `check`, `reserve`, `trigger_slack` and `protects`; each append
 * reaches the policy's generic bookkeeping; after the pass the attention
 * rows the method asked for (reservation.needs_h2o) are folded in; after
 * the step a due window is selected by `select_window`, and a cache past
 * its limit (`cache_limit`) runs `cache_event`.
 */
#ifndef KR_KV_METHOD_H
#define KR_KV_METHOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_keys.h"
#include "kv_plan.h"
#include "kv_select.h"
#include "kv_tuning.h"

struct kr_kv_policy;

/* When a method compresses. */
typedef enum kr_kv_kind {
    KR_KV_KEEPS_ALL = 0, /* full: never */
    KR_KV_WINDOWS,       /* periodic events over the newest window (kv_policy.h) */
    KR_KV_AT_BUDGET      /* an event over the whole cache once it passes budget_tokens + trigger_slack */
} kr_kv_kind;

/* What a window method's selection sees: n_c candidates' scores (zeros
 * for methods that score nothing), their line ends (NULL: none known),
 * the protected token ids, and a seed that changes with every event. */
typedef struct kr_kv_window_in {
    const float *scores;
    const uint8_t *line_ends;
    const kr_kv_protect *protect;
    int32_t n_c;
    uint64_t seed;
} kr_kv_window_in;

typedef struct kr_kv_method {
    const char *name;
    kr_kv_kind (*kind)(const kara_kv_params *p);
    /* Its settings' bounds (KARA_ERR_CONFIG with the key); NULL: none. */
    kara_status (*check)(const kara_kv_params *p);
    /* What it holds at once beside the pool: ring, span scored, query
     * rows, per-slot state (kv_plan.h); NULL: nothing. */
    void (*reserve)(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots);
    /* How far past budget_tokens its cache grows before an event; NULL: 1. */
    int32_t (*trigger_slack)(const kara_kv_params *p);
    /* Slots it never evicts of a request whose protected front (prompt or
     * sinks) is `front` (KR_KV_AT_BUDGET only); NULL: front. */
    int32_t (*protects)(const kara_kv_params *p, int32_t front);
    /* Whether no event ever rewrites a slot of the prompt (shared blocks);
     * NULL: some may. */
    bool (*keeps_prompt)(const kara_kv_params *p);
    /* KR_KV_WINDOWS: keep k of the window's candidates (keep, sorted). */
    kara_status (*select_window)(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes);
    /* KR_KV_AT_BUDGET: the event over seq's cache (kv_policy_impl.h's
     * kr_kvp_cache_keep finishes a selection). */
    kara_status (*cache_event)(struct kr_kv_policy *pol, int32_t seq);
    /* The most slots seq holds before cache_event; NULL: budget_tokens +
     * trigger_slack - 1 for KR_KV_AT_BUDGET. */
    int32_t (*cache_limit)(const struct kr_kv_policy *pol, int32_t seq);
    /* Whether pool pressure may force cache_event early
     * (on_pool_exhausted: recompress_history); NULL: no. */
    bool (*forced_events)(const kara_kv_params *p);
    /* Whether selection_scope per_layer applies. */
    bool per_layer;
    /* Whether its selection reads line ends (the vocabulary's table); NULL: no. */
    bool (*reads_lines)(const kara_kv_params *p);
    /* Whether the model's retention prior is added to its scores when
     * kara.score.prior_weight is above 0 (issue 47's attribution: the
     * baselines take it through the same key). */
    bool uses_prior;
    /* Whether kara.score.prior_weight auto turns the prior on (Kara and
     * prior_recent) on a model that has one; for the others auto is off, so
     * a baseline stays the published method unless a weight is given. */
    bool prior_by_default;
    /* Whether it cannot run without one (a model without kara_prior.*
     * tensors is refused when the context is created). */
    bool needs_prior;
    /* Why a device that holds the pool cannot run it when it must evict;
     * NULL: it can. */
    const char *host_only;
    /* Its own settings: the rows of their YAML keys (type, place in the
     * tuning, bounds, value names; the configuration lists them in registry
     * order) and their defaults (kara_kv_params_init); NULL, 0: none. */
    const key_spec *keys;
    int32_t n_keys;
    void (*defaults)(kr_kv_tuning *t);
    /* KR_KV_AT_BUDGET: the keys of its slack (slots past budget_tokens
     * before an event) and of the newest slots it always keeps, which the
     * tools fit to a small budget (kara_kv_method_info); NULL: none. */
    const char *slack_key;
    const char *tail_key;
    /* A method whose reservation has slot_state bytes (kv_plan.h) keeps
     * that many of its own per slot: slot_state / 4 arrays of max_slots
     * int32 each per sequence (at most KR_KV_SLOT_ARRAYS_MAX), claimed up
     * front by the policy, compacted and saved for speculation with the
     * cache; only its file reads them. slot_init gives a slot appended at
     * observed step `step` its state; observe folds one step's attention
     * (the mean over heads and layers of the newest query's, n_slots
     * entries) in at step `step`. */
    void (*slot_init)(int32_t *state, int32_t max_slots, int32_t slot, int32_t step);
    void (*observe)(const kara_kv_params *p, int32_t *state, int32_t max_slots, const float *attn, int32_t n_slots,
                    int32_t step);
} kr_kv_method;

/* The most per-slot arrays a method keeps (speculation's save holds that many). */
#define KR_KV_SLOT_ARRAYS_MAX 2

/* The method of id m (kara_kv_method, or an id kr_kv_method_register
 * gave); NULL when none is registered there. */
const kr_kv_method *kr_kv_method_get(int m);
/* The method p names; never NULL for a parsed configuration (an unknown
 * id gets full's table, which compresses nothing). */
const kr_kv_method *kr_kv_method_of(const kara_kv_params *p);
/* Register a method under a new id (tests): the id, or -1 when the
 * registry is full. */
int kr_kv_method_register(const kr_kv_method *m);
/* The names of the registered methods a device that holds the pool can
 * run with their default settings (no attention summed on the CPU, no
 * host-only scorer), ", "-separated into buf (kr_kv_policy_host_only says
 * why the others cannot). */
void kr_kv_methods_on_device(char *buf, size_t size);
/* How p's method compresses. */
kr_kv_kind kr_kv_method_kind(const kara_kv_params *p);

/* Hooks many methods share (registry.c): a fixed kind, a prompt always
 * kept, and the reservation of a window method that scores nothing. */
kr_kv_kind kr_kv_kind_windows(const kara_kv_params *p);
kr_kv_kind kr_kv_kind_at_budget(const kara_kv_params *p);
bool kr_kv_keeps_prompt_always(const kara_kv_params *p);
void kr_kv_reserve_unscored_window(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots);

#endif /* KR_KV_METHOD_H */
