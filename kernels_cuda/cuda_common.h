/*
 * cuda_common.h - what the CUDA kernels and their host tests share: the
 * qualifier that makes a function callable from both sides, and the f16 /
 * bf16 bit decoders. Plain C when no CUDA compiler reads it, so the
 * per-element math of kernels_cuda/ is unit-tested on the CPU in every
 * build (tests/unit/test_cuda_math.c), with or without a toolkit.
 */
#ifndef KR_CUDA_COMMON_H
#define KR_CUDA_COMMON_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KR_CU_HD __host__ __device__ static inline
#else
#define KR_CU_HD static inline
#endif

/* Single products and sums, rounded to nearest each: nvcc contracts a * b + c
 * into one fused multiply-add by default, which rounds once and so changes
 * the bits; the CPU reference (x86-64 baseline, ISO C) rounds twice. */
#if defined(__CUDA_ARCH__)
#define KR_CU_MUL(a, b) __fmul_rn((a), (b))
#define KR_CU_ADD(a, b) __fadd_rn((a), (b))
#define KR_CU_SUB(a, b) __fsub_rn((a), (b))
#define KR_CU_DIV(a, b) __fdiv_rn((a), (b))
#else
#define KR_CU_MUL(a, b) ((a) * (b))
#define KR_CU_ADD(a, b) ((a) + (b))
#define KR_CU_SUB(a, b) ((a) - (b))
#define KR_CU_DIV(a, b) ((a) / (b))
#endif

/* f32 from its bits, and back, without aliasing tricks (memcpy compiles to a move on both sides) */
KR_CU_HD float kr_cu_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KR_CU_HD uint32_t kr_cu_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE half to float, exactly (subnormals, inf and NaN included): the same
 * values as kernels_cpu's kr_fp16_to_fp32. */
KR_CU_HD float kr_cu_f16_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu) return kr_cu_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return kr_cu_bits_f32(sign);
        /* subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return kr_cu_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* float to IEEE half, round to nearest even; the same bits as kernels_cpu's
 * kr_fp32_to_fp16 for every input (NaN stays a quiet NaN). */
KR_CU_HD uint16_t kr_cu_f32_f16(float f) {
    uint32_t x = kr_cu_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (uint16_t)(x == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (x >= 0x38800000u) {                                  /* normal half */
        uint32_t h = (x - 0x38000000u) >> 13;
        const uint32_t rem = x & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    const uint32_t e = x >> 23;
    if (e < 102) return sign; /* below 2^-25 */
    const uint32_t m = (x & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* bfloat16 to float: the high half of the float's bits. */
KR_CU_HD float kr_cu_bf16_f32(uint16_t h) { return kr_cu_bits_f32((uint32_t)h << 16); }

#endif /* KR_CUDA_COMMON_H */
