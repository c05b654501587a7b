/* full.c - method full: every slot kept, nothing reserved or scored. */
#include "kv_method.h"

static kr_kv_kind kind(const kara_kv_params *p) {
    (void)p;
    return KR_KV_KEEPS_ALL;
}

const kr_kv_method kr_kvm_full = {.name = "full", .kind = kind, .keeps_prompt = kr_kv_keeps_prompt_always};
