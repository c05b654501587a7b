/*
 * dispatch.c - builds one kernel table per ISA this build and CPU support,
 * once, and hands out the best one (capped by KARA_CPU_ISA).
 *
 * SIMD table builders are only referenced when their sources are compiled
 * (CMake defines KARA_HAVE_AVX2 / KARA_HAVE_AVX512 / KARA_HAVE_NEON), so a
 * build for another architecture links without them.
 */
#include "kernels_impl.h"

#include "cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static kr_kernels tables[KR_ISA_COUNT];
static bool table_ok[KR_ISA_COUNT];
static kr_isa best_isa = KR_ISA_SCALAR;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static const char *const isa_names[KR_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};

const char *kr_isa_name(kr_isa isa) {
    if ((unsigned)isa >= KR_ISA_COUNT) {
        return "unknown";
    }
    return isa_names[isa];
}

/* KARA_CPU_ISA caps the choice; "generic" is accepted for scalar. An unset or
 * unrecognised value means no cap (the library never prints). */
static bool isa_cap_from_env(kr_isa *cap) {
    const char *v = getenv("KARA_CPU_ISA");
    if (v == NULL || *v == '\0') {
        return false;
    }
    if (strcmp(v, "generic") == 0) {
        *cap = KR_ISA_SCALAR;
        return true;
    }
    for (int i = 0; i < KR_ISA_COUNT; i++) {
        if (strcmp(v, isa_names[i]) == 0) {
            *cap = (kr_isa)i;
            return true;
        }
    }
    return false;
}

/* Whether isa may run under a cap: scalar always; an x86 ISA under an equal
 * or wider x86 cap; NEON only under the NEON cap. */
static bool isa_within_cap(kr_isa isa, kr_isa cap) {
    if (isa == KR_ISA_SCALAR || isa == cap) {
        return true;
    }
    return isa == KR_ISA_AVX2 && cap == KR_ISA_AVX512;
}

static void build_tables(void) {
    kr_cpu_features f;
    kr_cpu_detect(&f);
    (void)f;

    kr_kernels_init_scalar(&tables[KR_ISA_SCALAR]);
    table_ok[KR_ISA_SCALAR] = true;

#if defined(KARA_HAVE_AVX2)
    if (f.avx2 && f.fma && f.f16c) {
        kr_kernels_init_avx2(&tables[KR_ISA_AVX2]);
        table_ok[KR_ISA_AVX2] = true;
    }
#endif
#if defined(KARA_HAVE_AVX512)
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16 && f.avx2 && f.fma &&
        f.f16c) {
        kr_kernels_init_avx512(&tables[KR_ISA_AVX512]);
        table_ok[KR_ISA_AVX512] = true;
    }
#endif
#if defined(KARA_HAVE_NEON)
    if (f.asimd) {
        kr_kernels_init_neon(&tables[KR_ISA_NEON]);
        table_ok[KR_ISA_NEON] = true;
    }
#endif

    /* Best available: AVX-512 > AVX2 > scalar on x86, NEON > scalar on ARM. */
    static const kr_isa preference[] = {KR_ISA_AVX512, KR_ISA_AVX2, KR_ISA_NEON, KR_ISA_SCALAR};
    kr_isa cap;
    const bool capped = isa_cap_from_env(&cap);
    for (size_t i = 0; i < sizeof(preference) / sizeof(preference[0]); i++) {
        const kr_isa isa = preference[i];
        if (!table_ok[isa]) {
            continue;
        }
        if (capped && !isa_within_cap(isa, cap)) {
            continue;
        }
        best_isa = isa;
        break;
    }
}

const kr_kernels *kr_kernels_get(void) {
    pthread_once(&tables_once, build_tables);
    return &tables[best_isa];
}

const kr_kernels *kr_kernels_for_isa(kr_isa isa) {
    if ((unsigned)isa >= KR_ISA_COUNT) {
        return NULL;
    }
    pthread_once(&tables_once, build_tables);
    return table_ok[isa] ? &tables[isa] : NULL;
}
