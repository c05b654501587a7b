/* registry.c - every KV method, one line each (kv_method.h). The line
 * gives the method's id in kara.h and the name of its file here; the
 * configuration's names and the tables come from this one list. */
#include <stddef.h>
#include <stdio.h>

#include "kv_method.h"
#include "kv_params.h"
#include "status.h"

#define KR_KV_METHODS(X)                                                                                               \
    X(FULL, full)                                                                                                      \
    X(STREAMING, streaming)                                                                                            \
    X(SNAPKV, snapkv)                                                                                                  \
    X(H2O, h2o)                                                                                                        \
    X(CHUNKKV, chunkkv)                                                                                                \
    X(RANDOM, random)                                                                                                  \
    X(RECENT, recent)                                                                                                  \
    X(KARA, kara)                                                                                                      \
    X(RKV, rkv)                                                                                                        \
    X(LAZY, lazy)                                                                                                      \
    X(PRIOR_RECENT, prior_recent)

#define DECLARE(id, name) extern const kr_kv_method kr_kvm_##name;
KR_KV_METHODS(DECLARE)
#undef DECLARE

/* Built-in methods, then the ones kr_kv_method_register adds. */
#define KR_KV_MAX_METHODS 16
#define ENTRY(id, name) [KARA_KV_METHOD_##id] = &kr_kvm_##name,
static const kr_kv_method *methods[KR_KV_MAX_METHODS] = {KR_KV_METHODS(ENTRY)};
#undef ENTRY

#define NAME(id, name) {#name, KARA_KV_METHOD_##id},
const kr_enum_name kr_kv_method_names[] = {KR_KV_METHODS(NAME){NULL, 0}};
#undef NAME

const kr_kv_method *kr_kv_method_get(int m) { return m >= 0 && m < KR_KV_MAX_METHODS ? methods[m] : NULL; }

const kr_kv_method *kr_kv_method_of(const kara_kv_params *p) {
    const kr_kv_method *m = kr_kv_method_get((int)p->method);
    return m ? m : methods[KARA_KV_METHOD_FULL];
}

int kr_kv_method_register(const kr_kv_method *m) {
    for (int i = 0; i < KR_KV_MAX_METHODS; i++)
        if (!methods[i]) {
            methods[i] = m;
            return i;
        }
    return -1;
}

kr_kv_kind kr_kv_method_kind(const kara_kv_params *p) { return kr_kv_method_of(p)->kind(p); }

kara_status kara_kv_method_info_get(kara_kv_method m, kara_kv_method_info *out) {
    const kr_kv_method *t = kr_kv_method_get((int)m);
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_kv_method_info_get: NULL argument");
    if (!t) return kr_set_error(KARA_ERR_ARG, "kara_kv_method_info_get: no KV method has id %d", (int)m);
    kara_kv_params p;
    kara_kv_params_init(&p);
    p.method = m;
    kr_kv_kind kind = t->kind(&p);
    *out = (kara_kv_method_info){t->name,     kind != KR_KV_KEEPS_ALL, kind == KR_KV_AT_BUDGET, t->slack_key,
                                 t->tail_key, t->needs_prior};
    return KARA_OK;
}

void kr_kv_methods_on_device(char *buf, size_t size) {
    size_t used = 0;
    if (size) buf[0] = 0;
    for (int i = 0; i < KR_KV_MAX_METHODS; i++) {
        if (!methods[i] || methods[i]->host_only) continue;
        kara_kv_params p;
        kara_kv_params_init(&p);
        p.method = (kara_kv_method)i;
        kr_kv_reservation s;
        kr_kv_reserve_shape(&s, &p, 1, 1);
        if (s.needs_h2o) continue; /* its attention rows are summed by the CPU's attention */
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", methods[i]->name);
        if (n < 0 || (size_t)n >= size - used) return;
        used += (size_t)n;
    }
}

kr_kv_kind kr_kv_kind_windows(const kara_kv_params *p) {
    (void)p;
    return KR_KV_WINDOWS;
}

kr_kv_kind kr_kv_kind_at_budget(const kara_kv_params *p) {
    (void)p;
    return KR_KV_AT_BUDGET;
}

bool kr_kv_keeps_prompt_always(const kara_kv_params *p) {
    (void)p;
    return true;
}

/* recent and random: windows like kara's, no queries, only the selection's span. */
void kr_kv_reserve_unscored_window(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)n_layer;
    (void)max_slots;
    s->window_method = true;
    s->score_n = kr_kv_window_slots(p);
}
