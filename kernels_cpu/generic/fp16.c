/*
 * fp16.c - exact IEEE half and bfloat16 conversions (round to nearest even),
 * written out bit by bit so results do not depend on compiler flags or
 * hardware F16C support.
 */
#include "kernels_impl.h"

float kr_fp16_to_fp32(kr_fp16 h) { return kr_half_to_float(h); }

kr_fp16 kr_fp32_to_fp16(float f) {
    uint32_t x = kr_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x >= 0x7f800000) { /* inf or NaN (NaN stays a quiet NaN) */
        if (x == 0x7f800000) {
            return sign | 0x7c00;
        }
        return (kr_fp16)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
    }
    if (x >= 0x477ff000) { /* >= 65520 rounds to infinity */
        return sign | 0x7c00;
    }
    if (x >= 0x38800000) { /* normal half range, >= 2^-14 */
        uint32_t h = (x - 0x38000000) >> 13;
        const uint32_t rem = x & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) {
            h++; /* a carry into the exponent is the correct result */
        }
        return (kr_fp16)(sign | h);
    }
    const uint32_t e = x >> 23;
    if (e < 102) { /* below 2^-25: rounds to zero */
        return sign;
    }
    /* subnormal half: value in units of 2^-24 */
    const uint32_t m = (x & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) {
        h++;
    }
    return (kr_fp16)(sign | h);
}

float kr_bf16_to_fp32(kr_bf16 h) { return kr_bf16_bits_to_float(h); }

kr_bf16 kr_fp32_to_bf16(float f) {
    uint32_t x = kr_f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) { /* NaN: keep it a quiet NaN */
        return (kr_bf16)((x >> 16) | 0x40);
    }
    x += 0x7fff + ((x >> 16) & 1);
    return (kr_bf16)(x >> 16);
}
