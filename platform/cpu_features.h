/*
 * cpu_features.h - what the CPU we run on can execute, probed once.
 *
 * x86: CPUID leaves 1 and 7 plus XCR0 (via XGETBV), because a CPU flag alone
 * is not enough - the OS must also save the wider register state (YMM for
 * AVX2, opmask/ZMM for AVX-512) or the instructions fault.
 * aarch64: getauxval(AT_HWCAP/AT_HWCAP2) on Linux.
 * Other targets report no SIMD features.
 */
#ifndef KR_CPU_FEATURES_H
#define KR_CPU_FEATURES_H

#include <stdbool.h>

typedef struct kr_cpu_features {
    /* x86 */
    bool avx;
    bool avx2;
    bool fma;
    bool f16c;
    bool avx512f;
    bool avx512bw;
    bool avx512vl;
    bool avx512dq;
    bool avx512vnni;
    bool avx512bf16;
    bool avx_vnni; /* 256-bit VEX VNNI (Alder Lake and later) */
    /* aarch64 */
    bool asimd;   /* NEON */
    bool asimddp; /* SDOT/UDOT (dotprod) */
    bool fphp;    /* half-precision scalar arithmetic */
    bool asimdhp; /* half-precision vector arithmetic */
    bool i8mm;    /* int8 matrix multiply (SMMLA) */
} kr_cpu_features;

/* Probe the CPU; cheap enough to call more than once, but callers usually
 * cache the result. Never fails: features it cannot confirm are false. */
void kr_cpu_detect(kr_cpu_features *f);

/* Number of CPU cores this process may run on (online cores, narrowed by
 * the affinity mask where the OS reports one); at least 1. */
int kr_cpu_count(void);

#endif /* KR_CPU_FEATURES_H */
