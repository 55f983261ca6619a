/*
 * Kernel 1: streaming argmax over a vocabulary chunk of one logits row (16-byte loads, 4 vectors
 * in flight per thread), with the chunk's softmax statistics when the judge has LS, fused with the
 * dot products of the row's hidden states with each hidden block's weights over a slice of the
 * features: the chunk's RowScore (accept_core.h).
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
// With LS, at least 4 resident blocks per SM (at most 64 registers): without a bound, ptxas for sm_100
// holds the fp32 row-copying LS kernel to 32 registers and spills. 0: no bound (ptxas' choice).
constexpr int32_t kScoreBlocksPerSM(bool softmax)
{
    return softmax ? 4 : 0;
}
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

//! One element for the argmax (exact order, or the ascending fast path) and, with kSoftmax, the
//! softmax statistics.
template <bool kExact, bool kSoftmax>
__device__ __forceinline__ void offerElement(ArgmaxState& state, SoftmaxState& softmax, float value, int64_t index)
{
    if constexpr (kExact)
    {
        state.offer(value, static_cast<int32_t>(index));
    }
    else
    {
        state.offerAscending(value, static_cast<int32_t>(index));
    }
    if constexpr (kSoftmax)
    {
        softmax.add(value);
    }
}

//! Elements of one 16-byte vector starting at vocabulary index `first`. With kSoftmax (fast path
//! only: state.value is then the running maximum of the non-NaN elements), the softmax statistics
//! are rebased once per vector and take its elements with no branch.
template <typename T, bool kExact, bool kSoftmax>
__device__ __forceinline__ void offerVector(ArgmaxState& state, SoftmaxState& softmax, uint4 const& vector,
    int64_t first)
{
    static_assert(!(kExact && kSoftmax), "the exact rescan leaves the softmax statistics alone");
    float values[ElementTraits<T>::kPerVector];
#pragma unroll
    for (int32_t k = 0; k < ElementTraits<T>::kPerVector; ++k)
    {
        values[k] = ElementTraits<T>::toFloat(vectorBits<T>(vector, k));
        offerElement<kExact, false>(state, softmax, values[k], first + k);
    }
    if constexpr (kSoftmax)
    {
        if (state.value > softmax.max)
        {
            softmax.rebase(state.value);
        }
#pragma unroll
        for (int32_t k = 0; k < ElementTraits<T>::kPerVector; ++k)
        {
            softmax.addBelowMax(values[k]);
        }
    }
}

//! This thread's elements of [begin, end) of one row, in ascending index order, optionally copied
//! to `out`: whole 16-byte vectors (kVectorsInFlight loads in flight), then the elements after the
//! last whole vector (all of them when the row is not 16-byte aligned).
template <typename T, bool kCopyRow, bool kExact, bool kSoftmax>
__device__ __forceinline__ void scanChunk(ArgmaxState& state, SoftmaxState& softmax, T const* row, T* out, int64_t begin,
    int64_t numVectors, int64_t end)
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
            offerVector<T, kExact, kSoftmax>(state, softmax, loaded[u], begin + (v + u * kScoreThreads) * kPer);
        }
    }
    for (; v < numVectors; v += kScoreThreads)
    {
        uint4 const loaded = __ldcs(vectors + v);
        if constexpr (kCopyRow)
        {
            __stcs(outVectors + v, loaded);
        }
        offerVector<T, kExact, kSoftmax>(state, softmax, loaded, begin + v * kPer);
    }
    for (int64_t i = begin + numVectors * kPer + threadIdx.x; i < end; i += kScoreThreads)
    {
        uint32_t const bits = loadBits(row, i);
        if constexpr (kCopyRow)
        {
            storeBits(out, i, bits);
        }
        offerElement<kExact, kSoftmax>(state, softmax, ElementTraits<T>::toFloat(bits), i);
    }
}

//! This thread's share of [begin, end): the maximum of its elements in the argmax order (first
//! maximum, NaN above numbers) and, with kSoftmax, their softmax statistics. A thread that saw a NaN
//! rescans in the exact order; its softmax statistics then do not matter (the row's maximum is NaN).
template <typename T, bool kCopyRow, bool kSoftmax>
__device__ __forceinline__ ArgmaxState argmaxChunk(SoftmaxState& softmax, T const* row, T* out, int64_t begin, int64_t end)
{
    constexpr int32_t kPer = ElementTraits<T>::kPerVector;
    bool const aligned = (reinterpret_cast<uintptr_t>(row + begin) % 16 == 0)
        && (!kCopyRow || reinterpret_cast<uintptr_t>(out + begin) % 16 == 0);
    int64_t const numVectors = aligned ? (end - begin) / kPer : 0;
    int64_t const tailBegin = begin + numVectors * kPer;
    // The first element this thread visits; the fast path keeps it for a row of -inf.
    int64_t const first = threadIdx.x < numVectors ? begin + threadIdx.x * kPer : tailBegin + threadIdx.x;
    ArgmaxState state{-INFINITY, first < end ? static_cast<int32_t>(first) : 0x7fffffff, false};
    scanChunk<T, kCopyRow, false, kSoftmax>(state, softmax, row, out, begin, numVectors, end);
    if (state.sawNan)
    {
        state = ArgmaxState{-INFINITY, 0x7fffffff, true};
        scanChunk<T, false, true, false>(state, softmax, row, nullptr, begin, numVectors, end);
    }
    return state;
}

//! Partial dot products of hidden[begin, end) with each given weight block's [begin, end) (a
//! nullptr weight: the judge lacks that block), thread-strided and coalesced; the hidden state is
//! read once for every block.
template <typename T>
__device__ __forceinline__ void dotRange(void const* hidden, float const* const (&weights)[kNumHiddenBlocks], int64_t begin,
    int64_t end, float (&sums)[kNumHiddenBlocks])
{
    T const* values = static_cast<T const*>(hidden);
    for (int64_t i = begin + threadIdx.x; i < end; i += kScoreThreads)
    {
        float const x = loadFloat(values, i);
#pragma unroll
        for (int32_t code = 0; code < kNumHiddenBlocks; ++code)
        {
            if (weights[code] != nullptr)
            {
                sums[code] = fmaf(x, __ldg(weights[code] + i), sums[code]);
            }
        }
    }
}

__device__ __forceinline__ void dotRangeOf(ElementType type, void const* hidden, float const* const (&weights)[kNumHiddenBlocks],
    int64_t begin, int64_t end, float (&sums)[kNumHiddenBlocks])
{
    switch (type)
    {
    case ElementType::kFLOAT16: dotRange<__half>(hidden, weights, begin, end, sums); break;
    case ElementType::kBFLOAT16: dotRange<__nv_bfloat16>(hidden, weights, begin, end, sums); break;
    default: dotRange<float>(hidden, weights, begin, end, sums); break;
    }
}

//! This block's slice of the hidden-block dot products of `row`: the features [draft hidden | target
//! hidden] (the draft part only when a block reads the draft) are split evenly over the row's blocks.
__device__ __forceinline__ void judgeDotsSlice(NodeRows const& rows, int64_t row, int32_t split, int32_t numSplits,
    float (&dots)[kNumHiddenBlocks])
{
    JudgeHeadView const& judge = rows.judge;
    int64_t const draftSize = readsDraft(judge.layout) ? judge.layout.draftHidden : 0;
    int64_t const featureSize = draftSize + judge.layout.targetHidden;
    // in 32 bits: a 64-bit division is a subroutine call, whose saved registers spill on sm_100
    int64_t const sliceSize = (static_cast<int32_t>(featureSize) + numSplits - 1) / numSplits;
    int64_t const sliceBegin = split * sliceSize;
    int64_t const sliceEnd = min(featureSize, sliceBegin + sliceSize);
    int64_t const bytes = elementBytes(rows.hiddenType);
    float const* draftWeights[kNumHiddenBlocks];
    float const* targetWeights[kNumHiddenBlocks];
#pragma unroll
    for (int32_t code = 0; code < kNumHiddenBlocks; ++code)
    {
        auto const block = static_cast<FeatureBlock>(code);
        float const* weights = blockWeights(judge, block);
        draftWeights[code] = blockReadsDraft(block) ? weights : nullptr;
        targetWeights[code] = blockReadsDraft(block) ? nullptr : weights;
    }
    if (sliceBegin < draftSize)
    {
        char const* draftRow = static_cast<char const*>(rows.draftHidden) + row * draftSize * bytes;
        dotRangeOf(rows.hiddenType, draftRow, draftWeights, sliceBegin, min(sliceEnd, draftSize), dots);
    }
    if (sliceEnd > draftSize)
    {
        char const* targetRow
            = static_cast<char const*>(rows.targetHidden) + row * int64_t{judge.layout.targetHidden} * bytes;
        dotRangeOf(rows.hiddenType, targetRow, targetWeights, max(sliceBegin, draftSize) - draftSize,
            sliceEnd - draftSize, dots);
    }
}

//! Merge the RowScore of the lane `offset` away into `score` (a butterfly step of a warp reduction).
__device__ __forceinline__ void mergeLane(RowScore& score, int32_t offset)
{
    RowScore other;
    other.maxValue = __shfl_xor_sync(0xffffffffu, score.maxValue, offset);
    other.argmax = __shfl_xor_sync(0xffffffffu, score.argmax, offset);
    other.softmax.max = __shfl_xor_sync(0xffffffffu, score.softmax.max, offset);
    other.softmax.sum = __shfl_xor_sync(0xffffffffu, score.softmax.sum, offset);
    other.softmax.shifted = __shfl_xor_sync(0xffffffffu, score.softmax.shifted, offset);
#pragma unroll
    for (int32_t code = 0; code < kNumHiddenBlocks; ++code)
    {
        other.dot[code] = __shfl_xor_sync(0xffffffffu, score.dot[code], offset);
    }
    mergeRowScore(score, other);
}

template <typename T, bool kCopyRow, bool kSoftmax>
__global__ void __launch_bounds__(kScoreThreads, kScoreBlocksPerSM(kSoftmax)) scoreNodesKernel(
    NodeRows rows, int32_t numSplits, RowScore* partials, T* copyOut)
{
    int64_t const row = blockIdx.x / numSplits;
    int32_t const split = static_cast<int32_t>(blockIdx.x - row * numSplits);
    int64_t const vocabSize = rows.vocabSize;
    int64_t const begin = int64_t{split} * kVocabChunk;
    int64_t const end = min(vocabSize, begin + kVocabChunk);
    T const* rowLogits = static_cast<T const*>(rows.targetLogits) + row * vocabSize;
    T* rowOut = kCopyRow ? copyOut + row * vocabSize : nullptr;

    RowScore score = emptyRowScore();
    ArgmaxState const state = argmaxChunk<T, kCopyRow, kSoftmax>(score.softmax, rowLogits, rowOut, begin, end);
    score.maxValue = state.value;
    score.argmax = state.index;
    judgeDotsSlice(rows, row, split, numSplits, score.dot);

    // Block reduction: warps by shuffles, then warp 0 over the warp results. The argmax order is a
    // total order, so the argmax is the row chunk's first maximum whatever the reduction order.
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2)
    {
        mergeLane(score, offset);
    }
    __shared__ RowScore warpResults[kWarps];
    int32_t const lane = threadIdx.x % 32;
    int32_t const warp = threadIdx.x / 32;
    if (lane == 0)
    {
        warpResults[warp] = score;
    }
    __syncthreads();
    if (warp == 0)
    {
        score = lane < kWarps ? warpResults[lane] : emptyRowScore();
#pragma unroll
        for (int32_t offset = 16; offset > 0; offset /= 2)
        {
            mergeLane(score, offset);
        }
        if (lane == 0)
        {
            partials[blockIdx.x] = score;
        }
    }
}

template <typename T, bool kCopyRow>
void launchCopying(uint32_t numBlocks, NodeRows const& rows, int32_t numSplits, RowScore* partials, T* copyOut,
    cudaStream_t stream)
{
    if (hasBlock(rows.judge.layout, FeatureBlock::kLS))
    {
        scoreNodesKernel<T, kCopyRow, true><<<numBlocks, kScoreThreads, 0, stream>>>(rows, numSplits, partials, copyOut);
    }
    else
    {
        scoreNodesKernel<T, kCopyRow, false><<<numBlocks, kScoreThreads, 0, stream>>>(rows, numSplits, partials, copyOut);
    }
}

template <typename T>
cudaError_t launchTyped(NodeRows const& rows, void* copyOut, RowScore* partials, cudaStream_t stream)
{
    int32_t const numSplits = vocabSplits(rows.vocabSize);
    int64_t const numBlocks = int64_t{rows.numRows} * numSplits;
    if (numBlocks > 0x7fffffff)
    {
        return cudaErrorInvalidValue;
    }
    if (copyOut != nullptr)
    {
        launchCopying<T, true>(static_cast<uint32_t>(numBlocks), rows, numSplits, partials, static_cast<T*>(copyOut),
            stream);
    }
    else
    {
        launchCopying<T, false>(static_cast<uint32_t>(numBlocks), rows, numSplits, partials, nullptr, stream);
    }
    return cudaGetLastError();
}

} // namespace

bool nodeRowsAreConsistent(NodeRows const& rows)
{
    JudgeHeadView const& judge = rows.judge;
    bool const judgeOk = judge.weight != nullptr && judge.layout.targetHidden > 0
        && (!readsDraft(judge.layout) || judge.layout.draftHidden > 0);
    bool const rowsOk = rows.numRows == 0
        || (rows.targetLogits != nullptr && rows.targetHidden != nullptr
            && (!readsDraft(judge.layout) || rows.draftHidden != nullptr));
    return rows.numRows >= 0 && rows.vocabSize > 0 && judgeOk && rowsOk;
}

cudaError_t launchScoreNodes(NodeRows const& rows, void* copyOut, RowScore* partials, cudaStream_t stream)
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
