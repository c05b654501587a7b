/* recent.c - the recent baseline (docs/KARA_METHOD.md section 11): Kara's windows,
 * unscored, keeping each window's newest slots. */
#include "kv_method.h"
#include "kv_tuning.h"

static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    (void)p;
    return kr_kv_select_recent(in->n_c, k, in->protect, keep, scratch, scratch_bytes);
}

const kr_kv_method kr_kvm_recent = {.name = "recent",
                                    .kind = kr_kv_kind_windows,
                                    .reserve = kr_kv_reserve_unscored_window,
                                    .keeps_prompt = kr_kv_keeps_prompt_always,
                                    .select_window = select_window};
