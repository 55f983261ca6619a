/*
 * Tree logits mode, kernel 2: one block per request of a TensorRT-LLM EAGLE engine step
 * (trtllm_autojudge/spec/tree_step.py is the reference, the host core runs the same accept_core.h
 * functions). Request b owns draft_lens[b] + 1 rows after those of the requests before it. Thread 0
 * checks that the step's rows add up (treeStepRowsAddUp) and that the request's paths are one tree
 * with distinct sibling tokens (recordTreeRow, treeSiblingsDistinct); otherwise the request keeps the
 * rows kernel 1 copied. Then the block merges its rows' partials (target argmax), marks the mismatching
 * nodes of its path rows whose exact run reaches the judge's minimum run (markJudgeable), scores them (judgeNode), keeps those the judge lets through and whose parent
 * row can be rewritten (treeNodeJudged), picks the best path (best_path.cuh) and, for every judged
 * node on its accepted prefix, makes the node's token the strict argmax of its parent row.
 */
#include "autojudge/accept_launch.h"
#include "kernels/best_path.cuh"
#include "kernels/element_load.cuh"
#include "kernels/score_nodes.cuh"

#include <cstdint>

namespace autojudge
{
namespace kernels
{
namespace
{

constexpr int32_t kTreeThreads = 128;
//! At least 8 resident blocks per SM: lets ptxas use up to 64 registers (it otherwise held the kernel to
//! 40 and spilled around the inlined judge on sm_100).
constexpr int32_t kTreeBlocksPerSM = 8;

size_t treeSharedBytes(int32_t numDraftNodes)
{
    // parents, targetArgmax, above [N + 1] 4-byte words each, draftTokens [N] int32, judged [N + 1] bytes
    size_t const nodes = static_cast<size_t>(numDraftNodes) + 1;
    return (3 * nodes + numDraftNodes) * sizeof(int32_t) + nodes;
}

template <typename T>
__global__ void __launch_bounds__(kTreeThreads, kTreeBlocksPerSM) rewriteTreeLogitsKernel(
    RewriteTreeLogitsArgs args, RowScore const* partials, int32_t numSplits)
{
    extern __shared__ int32_t shared[];
    int32_t const numNodes = args.numDraftNodes + 1;
    int32_t* parents = shared;                                                    // [N + 1]
    int32_t* targetArgmax = parents + numNodes;                                   // [N + 1]
    uint32_t* above = reinterpret_cast<uint32_t*>(targetArgmax + numNodes);       // [N + 1]
    int32_t* draftTokens = reinterpret_cast<int32_t*>(above + numNodes);          // [N]
    uint8_t* judged = reinterpret_cast<uint8_t*>(draftTokens + args.numDraftNodes); // [N + 1] judgeable, then judged
    __shared__ bool wellFormed;
    __shared__ int64_t firstRowShared;

    int32_t const b = blockIdx.x;
    double const cut = thresholdLogit(args.threshold[b]); // first: few registers are live across its log calls
    for (int32_t n = threadIdx.x; n < numNodes; n += kTreeThreads)
    {
        parents[n] = kPad;
        judged[n] = 0;
    }
    __syncthreads();
    if (threadIdx.x == 0)
    {
        bool ok = treeStepRowsAddUp(args.draftLens, args.batchSize, args.numDraftNodes, args.rows.numRows);
        int32_t const numValid = ok ? args.draftLens[b] : 0;
        int32_t const* requestPaths = args.paths + int64_t{b} * args.numPaths * args.maxPathLen;
        for (int32_t p = 0; ok && p < args.numPaths; ++p)
        {
            ok = recordTreeRow(requestPaths + int64_t{p} * args.maxPathLen, args.maxPathLen, numValid, parents);
        }
        wellFormed = ok && treeSiblingsDistinct(parents, numValid, args.draftTokens + int64_t{b} * args.numDraftNodes);
        firstRowShared = ok ? treeRequestFirstRow(args.draftLens, b) : 0;
    }
    __syncthreads();
    if (!wellFormed)
    {
        return; // refused: its rows stay as kernel 1 copied them
    }
    int64_t const firstRow = firstRowShared;
    int32_t const numValidNodes = args.draftLens[b]; // in [0, N]: the rows add up
    for (int32_t n = threadIdx.x; n <= numValidNodes; n += kTreeThreads)
    {
        targetArgmax[n] = reduceRow(partials, firstRow + n, numSplits).argmax;
    }
    for (int32_t n = threadIdx.x; n < args.numDraftNodes; n += kTreeThreads)
    {
        draftTokens[n] = args.draftTokens[int64_t{b} * args.numDraftNodes + n];
    }
    __syncthreads();

    int32_t const* requestPaths = args.paths + int64_t{b} * args.numPaths * args.maxPathLen;
    for (int32_t p = threadIdx.x; p < args.numPaths; p += kTreeThreads)
    {
        int32_t const* path = requestPaths + int64_t{p} * args.maxPathLen;
        if (isPathRow(path))
        {
            markJudgeable(path, args.maxPathLen, numValidNodes, draftTokens, targetArgmax, args.minRun,
                judged); // writes 1s only
        }
    }
    __syncthreads();
    {
        // the judgeable nodes whose parent row has a finite value above its maximum (it can be rewritten)
        FloatFormat const format = floatFormat(args.rows.logitsType);
        T const* logits = static_cast<T const*>(args.rows.targetLogits);
        for (int32_t n = 1 + threadIdx.x; n <= numValidNodes; n += kTreeThreads)
        {
            int32_t const parent = parents[n];
            int32_t const parentArgmax = parent == kPad ? kPad : targetArgmax[parent];
            judged[n] = judged[n] && tokenInVocab(parentArgmax, args.rows.vocabSize)
                && nextFiniteAbove(loadBits(logits, (firstRow + parent) * args.rows.vocabSize + parentArgmax), format,
                    above[n]);
        }
    }
    __syncthreads();
    int32_t const* greedyChild = args.greedyChild != nullptr ? args.greedyChild + int64_t{b} * numNodes : nullptr;
    for (int32_t n = 1 + threadIdx.x; n <= numValidNodes; n += kTreeThreads)
    {
        if (!judged[n])
        {
            continue;
        }
        Lookahead ahead{kPad, kPad};
        if (greedyChild != nullptr)
        {
            Lookahead const nodes = treeLookahead(greedyChild, n, numValidNodes);
            ahead = Lookahead{nodes.child >= 0 ? static_cast<int32_t>(firstRow + nodes.child) : kPad,
                nodes.grandchild >= 0 ? static_cast<int32_t>(firstRow + nodes.grandchild) : kPad};
        }
        int32_t const c1Token = ahead.child >= 0 ? draftTokens[ahead.child - firstRow - 1] : kPad;
        int32_t const c2Token = ahead.grandchild >= 0 ? draftTokens[ahead.grandchild - firstRow - 1] : kPad;
        float const judgeLogit = judgeNode(args.rows, partials, numSplits, static_cast<int32_t>(firstRow + n), ahead,
            c1Token, c2Token);
        judged[n] = treeNodeJudged(draftTokens[n - 1], targetArgmax[parents[n]], args.rows.vocabSize, judgeLogit, cut,
            true); // rewritable: checked above
    }
    __syncthreads();

    PathCandidate const best = bestPathOfBlock<kTreeThreads>(requestPaths, args.numPaths, args.maxPathLen,
        numValidNodes, draftTokens, targetArgmax, judged);
    if (best.index == kNoPathIndex)
    {
        return;
    }
    int32_t const* bestRow = requestPaths + int64_t{best.index} * args.maxPathLen;
    T* rewritten = static_cast<T*>(args.rewrittenLogits);
    for (int32_t j = 1 + threadIdx.x; j <= best.walk.acceptedLen; j += kTreeThreads)
    {
        int32_t const node = bestRow[j];
        if (judged[node])
        {
            storeBits(rewritten, (firstRow + bestRow[j - 1]) * args.rows.vocabSize + draftTokens[node - 1], above[node]);
        }
    }
}

} // namespace
} // namespace kernels

cudaError_t launchRewriteTreeLogits(
    RewriteTreeLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream)
{
    bool const sizesOk = args.batchSize >= 0 && args.numDraftNodes >= 0 && args.numDraftNodes < kMaxTreeNodes
        && args.numPaths >= 0 && args.maxPathLen >= 1 && args.minRun >= 1 && kernels::nodeRowsAreConsistent(args.rows)
        && !readsDraft(args.rows.judge.layout)
        && (args.rows.numRows == 0 || args.rewrittenLogits != nullptr)
        && (args.batchSize == 0
            || (args.draftLens != nullptr && args.threshold != nullptr && args.paths != nullptr
                && (args.numDraftNodes == 0 || args.draftTokens != nullptr)))
        && (args.rows.judge.layout.windowTokens == 0 || args.greedyChild != nullptr)
        && workspaceBytes >= acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    if (!sizesOk)
    {
        return cudaErrorInvalidValue;
    }
    return kernels::scoreThenRewrite(args.rows, args.rewrittenLogits, workspace, args.batchSize > 0, stream,
        [&](auto tag, RowScore const* partials)
        {
            kernels::rewriteTreeLogitsKernel<typename decltype(tag)::type>
                <<<args.batchSize, kernels::kTreeThreads, kernels::treeSharedBytes(args.numDraftNodes), stream>>>(
                    args, partials, vocabSplits(args.rows.vocabSize));
        });
}

} // namespace autojudge
