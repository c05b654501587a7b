/* recent.c - the recent baseline (docs/KARA_METHOD.md section 11): Kara's windows,
 * unscored, keeping each window's newest slots. */
#include "kv_method.h"
#include "kv_tuning.h"

static kr_kv_kind kind(const kara_kv_params *p) {
    (void)p;
    return KR_KV_WINDOWS;
}

/* No queries: only the selection's span. */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)n_layer;
    (void)max_slots;
    s->window_method = true;
    s->score_n = kr_kv_window_slots(p);
}

static bool keeps_prompt(const kara_kv_params *p) {
    (void)p;
    return true;
}

static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    (void)p;
    return kr_kv_select_recent(in->n_c, k, in->protect, keep, scratch, scratch_bytes);
}

const kr_kv_method kr_kvm_recent = {
    .name = "recent", .kind = kind, .reserve = reserve, .keeps_prompt = keeps_prompt, .select_window = select_window};
