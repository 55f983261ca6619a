/*
 * Kernel 1: streaming argmax over a vocabulary chunk of one logits row (16-byte loads, 4 vectors
 * in flight per thread) fused with the judge dot product over a slice of the row's features.
 */
#include "kernels/element_load.cuh"
#include "kernels/score_nodes.cuh"

#include <cstdint>

namespace autojudge
{
namespace kernels
{
namespace
{

constexpr int32_t kScoreThreads = 256;
constexpr int32_t kWarps = kScoreThreads / 32;
constexpr int32_t kVectorsInFlight = 4;

struct ArgmaxState
{
    float value;
    int32_t index;
    bool sawNan;

    //! Exact argmax order (argmaxPrefers), any visiting order.
    __device__ void offer(float candidate, int32_t candidateIndex)
    {
        if (argmaxPrefers(candidate, candidateIndex, value, index))
        {
            value = candidate;
            index = candidateIndex;
        }
    }

    //! Fast path for one thread's elements visited in ascending index order: a strictly greater
    //! value replaces, so the first maximum stays. NaN is only noted; a thread that saw one rescans
    //! its elements in the exact order.
    __device__ void offerAscending(float candidate, int32_t candidateIndex)
    {
        bool const greater = candidate > value;
        value = greater ? candidate : value;
        index = greater ? candidateIndex : index;
        sawNan |= candidate != candidate;
    }
};

template <bool kExact>
__device__ __forceinline__ void offerElement(ArgmaxState& state, float value, int64_t index)
{
    if constexpr (kExact)
    {
        state.offer(value, static_cast<int32_t>(index));
    }
    else
    {
        state.offerAscending(value, static_cast<int32_t>(index));
    }
}

//! Elements of one 16-byte vector starting at vocabulary index `first`.
template <typename T, bool kExact>
__device__ __forceinline__ void offerVector(ArgmaxState& state, uint4 const& vector, int64_t first)
{
#pragma unroll
    for (int32_t k = 0; k < ElementTraits<T>::kPerVector; ++k)
    {
        offerElement<kExact>(state, ElementTraits<T>::toFloat(vectorBits<T>(vector, k)), first + k);
    }
}

//! This thread's elements of [begin, end) of one row, in ascending index order, optionally copied
//! to `out`: whole 16-byte vectors (kVectorsInFlight loads in flight), then the elements after the
//! last whole vector (all of them when the row is not 16-byte aligned).
template <typename T, bool kCopyRow, bool kExact>
__device__ void scanChunk(ArgmaxState& state, T const* row, T* out, int64_t begin, int64_t numVectors, int64_t end)
{
    constexpr int32_t kPer = ElementTraits<T>::kPerVector;
    uint4 const* vectors = reinterpret_cast<uint4 const*>(row + begin);
    uint4* outVectors = reinterpret_cast<uint4*>(out + begin);
    int64_t v = threadIdx.x;
    for (; v + (kVectorsInFlight - 1) * kScoreThreads < numVectors; v += kVectorsInFlight * kScoreThreads)
    {
        uint4 loaded[kVectorsInFlight];
#pragma unroll
        for (int32_t u = 0; u < kVectorsInFlight; ++u)
        {
            loaded[u] = __ldcs(vectors + v + u * kScoreThreads);
        }
#pragma unroll
        for (int32_t u = 0; u < kVectorsInFlight; ++u)
        {
            if constexpr (kCopyRow)
            {
                __stcs(outVectors + v + u * kScoreThreads, loaded[u]);
            }
            offerVector<T, kExact>(state, loaded[u], begin + (v + u * kScoreThreads) * kPer);
        }
    }
    for (; v < numVectors; v += kScoreThreads)
    {
        uint4 const loaded = __ldcs(vectors + v);
        if constexpr (kCopyRow)
        {
            __stcs(outVectors + v, loaded);
        }
        offerVector<T, kExact>(state, loaded, begin + v * kPer);
    }
    for (int64_t i = begin + numVectors * kPer + threadIdx.x; i < end; i += kScoreThreads)
    {
        uint32_t const bits = loadBits(row, i);
        if constexpr (kCopyRow)
        {
            storeBits(out, i, bits);
        }
        offerElement<kExact>(state, ElementTraits<T>::toFloat(bits), i);
    }
}

//! This thread's share of the argmax of [begin, end): the maximum of its elements in the argmax
//! order (first maximum, NaN above numbers).
template <typename T, bool kCopyRow>
__device__ ArgmaxState argmaxChunk(T const* row, T* out, int64_t begin, int64_t end)
{
    constexpr int32_t kPer = ElementTraits<T>::kPerVector;
    bool const aligned = (reinterpret_cast<uintptr_t>(row + begin) % 16 == 0)
        && (!kCopyRow || reinterpret_cast<uintptr_t>(out + begin) % 16 == 0);
    int64_t const numVectors = aligned ? (end - begin) / kPer : 0;
    int64_t const tailBegin = begin + numVectors * kPer;
    // The first element this thread visits; the fast path keeps it for a row of -inf.
    int64_t const first = threadIdx.x < numVectors ? begin + threadIdx.x * kPer : tailBegin + threadIdx.x;
    ArgmaxState state{-INFINITY, first < end ? static_cast<int32_t>(first) : 0x7fffffff, false};
    scanChunk<T, kCopyRow, false>(state, row, out, begin, numVectors, end);
    if (state.sawNan)
    {
        state = ArgmaxState{-INFINITY, 0x7fffffff, true};
        scanChunk<T, false, true>(state, row, nullptr, begin, numVectors, end);
    }
    return state;
}

//! Partial dot product of hidden[begin, end) with weight[begin, end) (thread-strided, coalesced).
template <typename T>
__device__ float dotRange(void const* hidden, float const* weight, int64_t begin, int64_t end)
{
    T const* values = static_cast<T const*>(hidden);
    float sum = 0.f;
    for (int64_t i = begin + threadIdx.x; i < end; i += kScoreThreads)
    {
        sum = fmaf(loadFloat(values, i), __ldg(weight + i), sum);
    }
    return sum;
}

__device__ float dotRangeOf(ElementType type, void const* hidden, float const* weight, int64_t begin, int64_t end)
{
    switch (type)
    {
    case ElementType::kFLOAT16: return dotRange<__half>(hidden, weight, begin, end);
    case ElementType::kBFLOAT16: return dotRange<__nv_bfloat16>(hidden, weight, begin, end);
    default: return dotRange<float>(hidden, weight, begin, end);
    }
}

//! This block's slice of the judge dot product of `row`: features [draft hidden | target hidden].
__device__ float judgeDotSlice(NodeRows const& rows, int64_t row, int32_t split, int32_t numSplits)
{
    JudgeHeadView const& judge = rows.judge;
    int64_t const draftSize = judge.setup == FeatureSetup::kDD_DT ? judge.draftHidden : 0;
    int64_t const featureSize = draftSize + judge.targetHidden;
    int64_t const sliceSize = (featureSize + numSplits - 1) / numSplits;
    int64_t const sliceBegin = split * sliceSize;
    int64_t const sliceEnd = min(featureSize, sliceBegin + sliceSize);
    int64_t const bytes = elementBytes(rows.hiddenType);
    float sum = 0.f;
    if (sliceBegin < draftSize)
    {
        char const* draftRow = static_cast<char const*>(rows.draftHidden) + row * draftSize * bytes;
        sum += dotRangeOf(rows.hiddenType, draftRow, judge.weight, sliceBegin, min(sliceEnd, draftSize));
    }
    if (sliceEnd > draftSize)
    {
        char const* targetRow = static_cast<char const*>(rows.targetHidden) + row * int64_t{judge.targetHidden} * bytes;
        sum += dotRangeOf(rows.hiddenType, targetRow, judge.weight + draftSize, max(sliceBegin, draftSize) - draftSize,
            sliceEnd - draftSize);
    }
    return sum;
}

template <typename T, bool kCopyRow>
__global__ void __launch_bounds__(kScoreThreads) scoreNodesKernel(
    NodeRows rows, int32_t numSplits, NodePartial* partials, T* copyOut)
{
    int64_t const row = blockIdx.x / numSplits;
    int32_t const split = static_cast<int32_t>(blockIdx.x - row * numSplits);
    int64_t const vocabSize = rows.vocabSize;
    int64_t const begin = int64_t{split} * kVocabChunk;
    int64_t const end = min(vocabSize, begin + kVocabChunk);
    T const* rowLogits = static_cast<T const*>(rows.targetLogits) + row * vocabSize;
    T* rowOut = kCopyRow ? copyOut + row * vocabSize : nullptr;

    ArgmaxState state = argmaxChunk<T, kCopyRow>(rowLogits, rowOut, begin, end);
    float dot = judgeDotSlice(rows, row, split, numSplits);

    // Block reduction: warps by shuffles, then warp 0 over the warp results. The argmax order is a
    // total order, so the result is the row chunk's first maximum whatever the reduction order.
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2)
    {
        state.offer(__shfl_xor_sync(0xffffffffu, state.value, offset), __shfl_xor_sync(0xffffffffu, state.index, offset));
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    }
    __shared__ NodePartial warpResults[kWarps];
    int32_t const lane = threadIdx.x % 32;
    int32_t const warp = threadIdx.x / 32;
    if (lane == 0)
    {
        warpResults[warp] = NodePartial{state.value, state.index, dot};
    }
    __syncthreads();
    if (warp == 0)
    {
        NodePartial const mine = lane < kWarps ? warpResults[lane] : NodePartial{-INFINITY, 0x7fffffff, 0.f};
        state = ArgmaxState{mine.maxValue, mine.argmax, false};
        dot = mine.judgeDot;
#pragma unroll
        for (int32_t offset = 16; offset > 0; offset /= 2)
        {
            state.offer(
                __shfl_xor_sync(0xffffffffu, state.value, offset), __shfl_xor_sync(0xffffffffu, state.index, offset));
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        if (lane == 0)
        {
            partials[blockIdx.x] = NodePartial{state.value, state.index, dot};
        }
    }
}

template <typename T>
cudaError_t launchTyped(NodeRows const& rows, void* copyOut, NodePartial* partials, cudaStream_t stream)
{
    int32_t const numSplits = vocabSplits(rows.vocabSize);
    int64_t const numBlocks = int64_t{rows.numRows} * numSplits;
    if (numBlocks > 0x7fffffff)
    {
        return cudaErrorInvalidValue;
    }
    if (copyOut != nullptr)
    {
        scoreNodesKernel<T, true><<<static_cast<uint32_t>(numBlocks), kScoreThreads, 0, stream>>>(
            rows, numSplits, partials, static_cast<T*>(copyOut));
    }
    else
    {
        scoreNodesKernel<T, false>
            <<<static_cast<uint32_t>(numBlocks), kScoreThreads, 0, stream>>>(rows, numSplits, partials, nullptr);
    }
    return cudaGetLastError();
}

} // namespace

bool nodeRowsAreConsistent(NodeRows const& rows)
{
    JudgeHeadView const& judge = rows.judge;
    bool const judgeOk = judge.weight != nullptr && judge.targetHidden > 0
        && (judge.setup == FeatureSetup::kDD_DT ? judge.draftHidden > 0 : judge.setup == FeatureSetup::kDT);
    bool const rowsOk = rows.numRows == 0
        || (rows.targetLogits != nullptr && rows.targetHidden != nullptr
            && (judge.setup != FeatureSetup::kDD_DT || rows.draftHidden != nullptr));
    return rows.numRows >= 0 && rows.vocabSize > 0 && judgeOk && rowsOk;
}

cudaError_t launchScoreNodes(NodeRows const& rows, void* copyOut, NodePartial* partials, cudaStream_t stream)
{
    if (rows.numRows == 0)
    {
        return cudaSuccess;
    }
    switch (rows.logitsType)
    {
    case ElementType::kFLOAT32: return launchTyped<float>(rows, copyOut, partials, stream);
    case ElementType::kFLOAT16: return launchTyped<__half>(rows, copyOut, partials, stream);
    case ElementType::kBFLOAT16: return launchTyped<__nv_bfloat16>(rows, copyOut, partials, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace kernels
} // namespace autojudge
