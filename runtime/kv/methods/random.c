/* random.c - the random baseline (docs/KARA_METHOD.md section 11): Kara's windows,
 * unscored, keeping a seeded random choice of each window's slots. */
#include "kv_method.h"
#include "kv_tuning.h"
#include "kv_baselines.h"
#include "kv_select_impl.h"

/* splitmix64: a small, well-mixed generator; reproducible across platforms. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, range) by rejection (no modulo bias). */
static uint64_t uniform_below(uint64_t *state, uint64_t range) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do x = splitmix64(state);
    while (x >= limit);
    return x % range;
}
kara_status kr_kv_select_random(int32_t n_c, int32_t k, uint64_t seed, const kr_kv_protect *protect, int32_t *keep,
                                void *scratch, size_t scratch_bytes) {
    const char *who = "random";
    kara_status st = kr_kvs_check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    kr_select_scratch w;
    if ((st = kr_kvs_scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    int32_t left = k - kr_kvs_flag_protected(protect, n_c, k, NULL, w.flag);
    /* partial Fisher-Yates over the unprotected slots */
    int32_t *pool = (int32_t *)w.pooled, n_pool = 0;
    for (int32_t j = 0; j < n_c; j++)
        if (!w.flag[j]) pool[n_pool++] = j;
    uint64_t state = seed;
    for (int32_t t = 0; t < left; t++) {
        int32_t r = t + (int32_t)uniform_below(&state, (uint64_t)(n_pool - t));
        int32_t tmp = pool[t];
        pool[t] = pool[r];
        pool[r] = tmp;
        w.flag[pool[t]] = 1;
    }
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
}

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
