/*
 * cpu_features.c - CPU feature probes (see cpu_features.h).
 */
#include "cpu_features.h"

#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#define KR_CPU_X86 1
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#define KR_CPU_ARM_LINUX 1
#include <sys/auxv.h>
#endif

#if KR_CPU_X86
/* XGETBV through its opcode bytes, so this file needs no -mxsave flag. */
static unsigned long long read_xcr0(void) {
    unsigned int eax, edx;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect_x86(kr_cpu_features *f) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return;
    }
    const bool osxsave = (ecx >> 27) & 1;
    const bool cpu_avx = (ecx >> 28) & 1;
    const bool cpu_fma = (ecx >> 12) & 1;
    const bool cpu_f16c = (ecx >> 29) & 1;
    if (!osxsave || !cpu_avx) {
        return;
    }
    const unsigned long long xcr0 = read_xcr0();
    /* bit 1 SSE state, bit 2 AVX (upper YMM) state */
    const bool os_ymm = (xcr0 & 0x6) == 0x6;
    /* bits 5,6,7: opmask, upper halves of ZMM0-15, ZMM16-31 */
    const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
    if (!os_ymm) {
        return;
    }
    f->avx = true;
    f->fma = cpu_fma;
    f->f16c = cpu_f16c;

    unsigned int max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) {
        return;
    }
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const unsigned int sub_leaves = eax;
    f->avx2 = (ebx >> 5) & 1;
    if (os_zmm) {
        f->avx512f = (ebx >> 16) & 1;
        f->avx512dq = f->avx512f && ((ebx >> 17) & 1);
        f->avx512bw = f->avx512f && ((ebx >> 30) & 1);
        f->avx512vl = f->avx512f && ((ebx >> 31) & 1);
        f->avx512vnni = f->avx512f && ((ecx >> 11) & 1);
    }
    if (sub_leaves >= 1) {
        __cpuid_count(7, 1, eax, ebx, ecx, edx);
        f->avx_vnni = f->avx2 && ((eax >> 4) & 1);
        f->avx512bf16 = f->avx512f && ((eax >> 5) & 1);
    }
}
#endif

#if KR_CPU_ARM_LINUX
/* Bit numbers from the Linux arm64 hwcap ABI, spelled out so older libc
 * headers without the newer names still build. */
#define KR_HWCAP_ASIMD (1UL << 1)
#define KR_HWCAP_FPHP (1UL << 9)
#define KR_HWCAP_ASIMDHP (1UL << 10)
#define KR_HWCAP_ASIMDDP (1UL << 20)
#define KR_HWCAP2_I8MM (1UL << 13)

static void detect_arm(kr_cpu_features *f) {
    const unsigned long hw = getauxval(AT_HWCAP);
    const unsigned long hw2 = getauxval(AT_HWCAP2);
    f->asimd = (hw & KR_HWCAP_ASIMD) != 0;
    f->fphp = (hw & KR_HWCAP_FPHP) != 0;
    f->asimdhp = (hw & KR_HWCAP_ASIMDHP) != 0;
    f->asimddp = (hw & KR_HWCAP_ASIMDDP) != 0;
    f->i8mm = (hw2 & KR_HWCAP2_I8MM) != 0;
}
#endif

void kr_cpu_detect(kr_cpu_features *f) {
    memset(f, 0, sizeof(*f));
#if KR_CPU_X86
    detect_x86(f);
#elif KR_CPU_ARM_LINUX
    detect_arm(f);
#elif defined(__aarch64__)
    f->asimd = true; /* NEON is part of the AArch64 base ISA */
#endif
}

int kr_cpu_count(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)online : 1;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int allowed = CPU_COUNT(&set);
        if (allowed > 0 && allowed < n) {
            n = allowed;
        }
    }
#endif
    return n;
}
