/* recent.c - the recent baseline (docs/KARA_METHOD.md section 11): Kara's windows,
 * unscored, keeping each window's newest slots. */
#include "kv_method.h"
#include "kv_tuning.h"
#include "kv_baselines.h"
#include "kv_select_impl.h"

kara_status kr_kv_select_recent(int32_t n_c, int32_t k, const kr_kv_protect *protect, int32_t *keep, void *scratch,
                                size_t scratch_bytes) {
    const char *who = "recent";
    kara_status st = kr_kvs_check_window(who, n_c, k, keep);
    if (st != KARA_OK) return st;
    kr_select_scratch w;
    if ((st = kr_kvs_scratch_split(who, n_c, scratch, scratch_bytes, &w)) != KARA_OK) return st;
    int32_t got = kr_kvs_flag_protected(protect, n_c, k, NULL, w.flag);
    for (int32_t j = n_c - 1; j >= 0 && got < k; j--)
        if (!w.flag[j]) {
            w.flag[j] = 1;
            got++;
        }
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
}

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
