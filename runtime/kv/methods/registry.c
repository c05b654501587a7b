/* registry.c - every KV method, one line each (kv_method.h). The line
 * gives the method's id in kara.h and the name of its file here; the
 * configuration's names and the tables come from this one list. */
#include <stddef.h>

#include "kv_method.h"
#include "kv_params.h"

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
    X(LAZY, lazy)

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
