/*
 * Logits mode, kernel 2: one block per request of the step. Request s owns the input tokens
 * (start_s, end_s] (1-based positions; end_s = tokens_per_request[0] + ... + tokens_per_request[s])
 * and the gathered rows whose last_token_ids fall there: its root row, then one row per draft
 * token. For every draft row whose token (input_ids[last_token_ids[row] - 1]) mismatches the
 * argmax of its parent row and passes the judge, the parent row's entry for that token becomes
 * the next value above the row's maximum: the draft token is then the row's strict argmax, and an
 * exact-match decoder accepts it. Kernel 1 has already copied every row to the output.
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

//! start_s: the input tokens of the requests before s.
__device__ int64_t requestTokenStart(int32_t const* tokensPerRequest, int32_t request)
{
    int64_t tokens = 0;
    for (int32_t s = threadIdx.x; s < request; s += kRewriteThreads)
    {
        tokens += max(tokensPerRequest[s], 0);
    }
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2)
    {
        tokens += __shfl_xor_sync(0xffffffffu, tokens, offset);
    }
    __shared__ int64_t warpTokens[kRewriteWarps];
    if (threadIdx.x % 32 == 0)
    {
        warpTokens[threadIdx.x / 32] = tokens;
    }
    __syncthreads();
    int64_t total = 0;
#pragma unroll
    for (int32_t w = 0; w < kRewriteWarps; ++w)
    {
        total += warpTokens[w];
    }
    return total;
}

template <typename T>
__global__ void __launch_bounds__(kRewriteThreads) rewriteLogitsKernel(
    RewriteLogitsArgs args, NodePartial const* partials, int32_t numSplits)
{
    int32_t const request = blockIdx.x;
    int64_t const tokenStart = requestTokenStart(args.tokensPerRequest, request);
    int64_t const tokenEnd = tokenStart + max(args.tokensPerRequest[request], 0);
    int32_t const numRows = args.rows.numRows;
    int32_t const firstRow = firstRowAfter(args.lastTokenIds, numRows, tokenStart);
    int32_t const endRow = firstRowAfter(args.lastTokenIds, numRows, tokenEnd);
    int64_t const vocabSize = args.rows.vocabSize;
    double const cut = thresholdLogit(args.threshold);
    FloatFormat const format = floatFormat(args.rows.logitsType);
    T const* logits = static_cast<T const*>(args.rows.targetLogits);
    T* rewritten = static_cast<T*>(args.rewrittenLogits);

    for (int32_t child = firstRow + 1 + threadIdx.x; child < endRow; child += kRewriteThreads)
    {
        int32_t const parent = child - 1;
        if (!isDraftChildRow(args.lastTokenIds, child))
        {
            continue;
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
        <<<args.numRequests, kRewriteThreads, 0, stream>>>(args, partials, vocabSplits(args.rows.vocabSize));
}

} // namespace
} // namespace kernels

cudaError_t launchRewriteLogits(
    RewriteLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream)
{
    bool const sizesOk = args.numRequests >= 0 && args.numTokens >= 0 && kernels::nodeRowsAreConsistent(args.rows)
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
    if (status != cudaSuccess || args.numRequests == 0)
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
