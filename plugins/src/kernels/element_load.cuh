/*
 * Device loads of fp32 / fp16 / bf16 elements as float: 16-byte vectors for the streaming argmax,
 * scalars for tails and hidden states. Logits are read once, so loads use the streaming cache
 * hint (__ldcs) and the logits-mode copy uses streaming stores (__stcs).
 */
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace autojudge
{
namespace kernels
{

template <typename T>
struct ElementTraits;

template <>
struct ElementTraits<float>
{
    static constexpr int32_t kPerVector = 4;

    __device__ static float toFloat(uint32_t bits)
    {
        return __uint_as_float(bits);
    }
};

template <>
struct ElementTraits<__half>
{
    static constexpr int32_t kPerVector = 8;

    __device__ static float toFloat(uint32_t bits)
    {
        return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    }
};

template <>
struct ElementTraits<__nv_bfloat16>
{
    static constexpr int32_t kPerVector = 8;

    __device__ static float toFloat(uint32_t bits)
    {
        return __uint_as_float(bits << 16);
    }
};

//! Raw bits of element i of an array of T.
template <typename T>
__device__ __forceinline__ uint32_t loadBits(T const* data, int64_t i)
{
    if constexpr (sizeof(T) == 4)
    {
        return __ldcs(reinterpret_cast<unsigned int const*>(data) + i);
    }
    else
    {
        return __ldcs(reinterpret_cast<unsigned short const*>(data) + i);
    }
}

template <typename T>
__device__ __forceinline__ void storeBits(T* data, int64_t i, uint32_t bits)
{
    if constexpr (sizeof(T) == 4)
    {
        __stcs(reinterpret_cast<unsigned int*>(data) + i, bits);
    }
    else
    {
        __stcs(reinterpret_cast<unsigned short*>(data) + i, static_cast<unsigned short>(bits));
    }
}

template <typename T>
__device__ __forceinline__ float loadFloat(T const* data, int64_t i)
{
    return ElementTraits<T>::toFloat(loadBits(data, i));
}

//! Word w of a 16-byte vector; w is a compile-time constant after unrolling, so this is a register.
__device__ __forceinline__ uint32_t vectorWord(uint4 const& vector, int32_t w)
{
    return w == 0 ? vector.x : (w == 1 ? vector.y : (w == 2 ? vector.z : vector.w));
}

//! Raw bits of element k of a 16-byte vector of T (k < ElementTraits<T>::kPerVector).
template <typename T>
__device__ __forceinline__ uint32_t vectorBits(uint4 const& vector, int32_t k)
{
    if constexpr (sizeof(T) == 4)
    {
        return vectorWord(vector, k);
    }
    else
    {
        uint32_t const word = vectorWord(vector, k >> 1);
        return (k & 1) ? word >> 16 : word & 0xffffu;
    }
}

} // namespace kernels
} // namespace autojudge
