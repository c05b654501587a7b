/*
 * avx512_gemv_x16_impl.h - what the kernels of the interleaved layouts
 * (avx512_gemv_x16_{q4k,q6k,q40,f32}.c) share: the 512-bit broadcast of 4
 * activation bytes, and (x86_x16_impl.h) the group loop, prefetch and pass
 * sizes they share with the AVX2 kernels.
 */
#ifndef KR_AVX512_GEMV_X16_IMPL_H
#define KR_AVX512_GEMV_X16_IMPL_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "x86_x16_impl.h"

static inline __m512i x16_bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

#endif /* KR_AVX512_GEMV_X16_IMPL_H */
