/*
 * Element types of logits and hidden states (fp32, fp16, bf16), their bit patterns, and the
 * "next representable value above" used by logits mode to make a draft token the strict argmax of
 * a row. Host code reads fp16/bf16 through these bit conversions; device code uses cuda_fp16 /
 * cuda_bf16 intrinsics for the same values.
 */
#pragma once

#include "autojudge/accept_core.h"

#include <cstdint>

namespace autojudge
{

//! Element type of target_logits, target_hidden and draft_hidden. The values are the dtype codes
//! of the host library's C ABI (host_api.h).
enum class ElementType : int32_t
{
    kFLOAT32 = 0,
    kFLOAT16 = 1,
    kBFLOAT16 = 2,
};

inline bool isElementType(int32_t code)
{
    return code >= 0 && code <= 2;
}

AUTOJUDGE_HD int32_t elementBytes(ElementType type)
{
    return type == ElementType::kFLOAT32 ? 4 : 2;
}

AUTOJUDGE_HD float bitsToFloat(uint32_t bits)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float value;
    __builtin_memcpy(&value, &bits, sizeof(value));
    return value;
#endif
}

//! IEEE binary16 bits to float (exact: every fp16 value is a float).
AUTOJUDGE_HD float halfBitsToFloat(uint16_t bits)
{
    uint32_t const sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    uint32_t const exponent = (bits >> 10) & 0x1fu;
    uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1fu)
    {
        return bitsToFloat(sign | 0x7f800000u | (mantissa << 13)); // inf or NaN
    }
    if (exponent != 0)
    {
        return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    }
    if (mantissa == 0)
    {
        return bitsToFloat(sign); // +-0
    }
    // Subnormal: mantissa * 2^-24, normalised into a float.
    uint32_t shift = 0;
    while ((mantissa & 0x400u) == 0)
    {
        mantissa <<= 1;
        ++shift;
    }
    return bitsToFloat(sign | ((113u - shift) << 23) | ((mantissa & 0x3ffu) << 13));
}

//! bfloat16 bits to float (exact: the top half of a float).
AUTOJUDGE_HD float bfloat16BitsToFloat(uint16_t bits)
{
    return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

//! Bit layout of a sign-magnitude float format: sign bit and all-ones exponent (inf/NaN).
struct FloatFormat
{
    uint32_t signMask;
    uint32_t exponentMask;
};

AUTOJUDGE_HD FloatFormat floatFormat(ElementType type)
{
    return type == ElementType::kFLOAT32 ? FloatFormat{0x80000000u, 0x7f800000u}
        : type == ElementType::kFLOAT16  ? FloatFormat{0x8000u, 0x7c00u}
                                         : FloatFormat{0x8000u, 0x7f80u};
}

//! Smallest value of the format strictly above the value with bits `bits`. Returns false (and
//! leaves `next` alone) when there is no finite one: NaN, +inf, or the largest finite value.
AUTOJUDGE_HD bool nextFiniteAbove(uint32_t bits, FloatFormat format, uint32_t& next)
{
    if ((bits & format.exponentMask) == format.exponentMask)
    {
        return false;
    }
    uint32_t candidate;
    if ((bits & ~format.signMask) == 0)
    {
        candidate = 1; // +-0 -> smallest positive subnormal
    }
    else
    {
        candidate = (bits & format.signMask) ? bits - 1 : bits + 1;
    }
    if ((candidate & format.exponentMask) == format.exponentMask)
    {
        return false;
    }
    next = candidate;
    return true;
}

} // namespace autojudge
