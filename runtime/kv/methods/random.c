/* random.c - the random baseline (docs/KARA_METHOD.md section 11): Kara's windows,
 * unscored, keeping a seeded random choice of each window's slots. */
#include "kv_method.h"
#include "kv_tuning.h"

/* The event count seeds each window's choice apart. */
static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    uint64_t mix = kr_kv_tune(p)->random.seed ^ (in->seed * 0x9E3779B97F4A7C15ull);
    return kr_kv_select_random(in->n_c, k, mix, in->protect, keep, scratch, scratch_bytes);
}

/* Its settings, under baselines.random (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.random.seed", K_U64, KR_TUNE(random.seed), 0, 0, kr_seed_words, 0, "seed of the random floor"},
};

static void defaults(kr_kv_tuning *t) { t->random.seed = 0x4b415241; /* "KARA", like the sampler's default seed */ }

const kr_kv_method kr_kvm_random = {.name = "random",
                                    .kind = kr_kv_kind_windows,
                                    .reserve = kr_kv_reserve_unscored_window,
                                    .keeps_prompt = kr_kv_keeps_prompt_always,
                                    .select_window = select_window,
                                    .keys = keys,
                                    .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                    .defaults = defaults};
