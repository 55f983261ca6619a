/*
 * Logits mode, kernel 2: one block per sequence of the step. Sequence s owns the gathered rows
 * [offset_s, offset_s + 1 + draft_lens[s]) (offset_s = s + sum of the earlier draft_lens): row
 * offset_s + j is node j of a chain, node 0 the root. For every draft node j whose token
 * (input_ids[last_token_ids[row] - 1]) mismatches the argmax of its parent row and passes the
 * judge, the parent row's entry for that token becomes the next value above the row's maximum:
 * the draft token is then the row's strict argmax, and an exact-match decoder accepts it. Kernel 1
 * has already copied every row to the output.
 */
#include "autojudge/accept_launch.h"
#include "kernels/element_load.cuh"
#include "kernels/score_nodes.cuh"

#include <cstdint>

namespace autojudge
{
namespace kernels
{
namespace
{

constexpr int32_t kRewriteThreads = 128;
constexpr int32_t kRewriteWarps = kRewriteThreads / 32;

//! offset_s: rows of the sequences before s (each owns 1 + max(draft_lens, 0) rows).
__device__ int64_t sequenceRowOffset(int32_t const* draftLens, int32_t sequence)
{
    int64_t rows = 0;
    for (int32_t s = threadIdx.x; s < sequence; s += kRewriteThreads)
    {
        rows += 1 + max(draftLens[s], 0);
    }
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2)
    {
        rows += __shfl_xor_sync(0xffffffffu, rows, offset);
    }
    __shared__ int64_t warpRows[kRewriteWarps];
    if (threadIdx.x % 32 == 0)
    {
        warpRows[threadIdx.x / 32] = rows;
    }
    __syncthreads();
    int64_t total = 0;
#pragma unroll
    for (int32_t w = 0; w < kRewriteWarps; ++w)
    {
        total += warpRows[w];
    }
    return total;
}

template <typename T>
__global__ void __launch_bounds__(kRewriteThreads) rewriteLogitsKernel(
    RewriteLogitsArgs args, NodePartial const* partials, int32_t numSplits)
{
    int32_t const sequence = blockIdx.x;
    int64_t const rowOffset = sequenceRowOffset(args.draftLens, sequence);
    int32_t const numDraft = max(args.draftLens[sequence], 0);
    int64_t const numRows = args.rows.numRows;
    int64_t const vocabSize = args.rows.vocabSize;
    double const cut = thresholdLogit(args.threshold);
    FloatFormat const format = floatFormat(args.rows.logitsType);
    T const* logits = static_cast<T const*>(args.rows.targetLogits);
    T* rewritten = static_cast<T*>(args.rewrittenLogits);

    for (int32_t j = 1 + threadIdx.x; j <= numDraft; j += kRewriteThreads)
    {
        int64_t const child = rowOffset + j;
        int64_t const parent = child - 1;
        if (child >= numRows)
        {
            break;
        }
        int64_t const position = int64_t{args.lastTokenIds[child]} - 1;
        if (position < 0 || position >= args.numTokens)
        {
            continue;
        }
        int32_t const draftToken = args.inputIds[position];
        RowScore const parentScore = reduceRow(partials, parent, numSplits);
        RowScore const childScore = reduceRow(partials, child, numSplits);
        float const judgeLogit = args.rows.judge.bias + childScore.judgeDot;
        if (!judgeRewritesRow(draftToken, parentScore.argmax, args.rows.vocabSize, judgeLogit, cut))
        {
            continue;
        }
        uint32_t next;
        if (nextFiniteAbove(loadBits(logits, parent * vocabSize + parentScore.argmax), format, next))
        {
            storeBits(rewritten, parent * vocabSize + draftToken, next);
        }
    }
}

template <typename T>
void launchRewriteTyped(RewriteLogitsArgs const& args, NodePartial const* partials, cudaStream_t stream)
{
    rewriteLogitsKernel<T>
        <<<args.numSequences, kRewriteThreads, 0, stream>>>(args, partials, vocabSplits(args.rows.vocabSize));
}

} // namespace
} // namespace kernels

cudaError_t launchRewriteLogits(
    RewriteLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream)
{
    bool const sizesOk = args.numSequences >= 0 && args.numTokens >= 0 && kernels::nodeRowsAreConsistent(args.rows)
        && (args.rows.numRows == 0 || args.rewrittenLogits != nullptr)
        && workspaceBytes >= acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    if (!sizesOk)
    {
        return cudaErrorInvalidValue;
    }
    if (args.rows.numRows == 0)
    {
        return cudaSuccess;
    }
    auto* partials = static_cast<kernels::NodePartial*>(workspace);
    cudaError_t const status = kernels::launchScoreNodes(args.rows, args.rewrittenLogits, partials, stream);
    if (status != cudaSuccess || args.numSequences == 0)
    {
        return status;
    }
    switch (args.rows.logitsType)
    {
    case ElementType::kFLOAT32: kernels::launchRewriteTyped<float>(args, partials, stream); break;
    case ElementType::kFLOAT16: kernels::launchRewriteTyped<__half>(args, partials, stream); break;
    case ElementType::kBFLOAT16: kernels::launchRewriteTyped<__nv_bfloat16>(args, partials, stream); break;
    }
    return cudaGetLastError();
}

} // namespace autojudge
