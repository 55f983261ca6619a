/*
 * Accept mode, kernel 2: one block per sequence. Merges the partials of the sequence's N + 1 node
 * rows (target argmax, into shared memory), marks the mismatching nodes of every path row whose
 * exact run reaches the judge's minimum run (markJudgeable), scores them (judgeNode: the rows of the node and of its greedy child and
 * grandchild, from greedy_child), walks every path row with the core's walkPath, picks the best
 * path with pathPrefers (best_path.cuh), and writes the accepted tokens.
 */
#include "autojudge/accept_launch.h"
#include "kernels/best_path.cuh"
#include "kernels/score_nodes.cuh"

#include <cstdint>

namespace autojudge
{
namespace kernels
{
namespace
{

constexpr int32_t kAcceptThreads = 128;

size_t sharedBytes(int32_t numDraftNodes)
{
    // targetArgmax [N + 1] int32, draftTokens [N] int32, relaxed [N + 1] bytes
    return (2 * static_cast<size_t>(numDraftNodes) + 1) * sizeof(int32_t) + static_cast<size_t>(numDraftNodes) + 1;
}

__global__ void __launch_bounds__(kAcceptThreads) acceptTreeKernel(
    AcceptTreeArgs args, RowScore const* partials, int32_t numSplits)
{
    extern __shared__ int32_t shared[];
    int32_t const numNodes = args.numDraftNodes + 1;
    int32_t* targetArgmax = shared;                                                  // [N + 1]
    int32_t* draftTokens = shared + numNodes;                                        // [N]
    uint8_t* relaxed = reinterpret_cast<uint8_t*>(draftTokens + args.numDraftNodes); // [N + 1] judgeable, then judged

    int64_t const b = blockIdx.x;
    int32_t const firstRow = static_cast<int32_t>(b * numNodes);
    for (int32_t n = threadIdx.x; n < numNodes; n += kAcceptThreads)
    {
        targetArgmax[n] = reduceRow(partials, firstRow + n, numSplits).argmax;
        relaxed[n] = 0;
    }
    for (int32_t n = threadIdx.x; n < args.numDraftNodes; n += kAcceptThreads)
    {
        draftTokens[n] = args.draftTokens[b * args.numDraftNodes + n];
    }
    __syncthreads();

    int32_t const numValidNodes = validNodeCount(args.draftLens[b], args.numDraftNodes);
    int32_t const* sequencePaths = args.paths + b * args.numPaths * int64_t{args.maxPathLen};
    for (int32_t p = threadIdx.x; p < args.numPaths; p += kAcceptThreads)
    {
        int32_t const* path = sequencePaths + int64_t{p} * args.maxPathLen;
        if (isPathRow(path))
        {
            markJudgeable(path, args.maxPathLen, numValidNodes, draftTokens, targetArgmax, args.minRun,
                relaxed); // writes 1s only
        }
    }
    __syncthreads();
    double const cut = thresholdLogit(args.threshold[b]);
    int32_t const* greedyChild = args.greedyChild != nullptr ? args.greedyChild + b * numNodes : nullptr;
    for (int32_t n = threadIdx.x; n < numNodes; n += kAcceptThreads)
    {
        if (relaxed[n])
        {
            Lookahead ahead{kPad, kPad};
            if (greedyChild != nullptr)
            {
                Lookahead const nodes = treeLookahead(greedyChild, n, numValidNodes);
                ahead = Lookahead{nodes.child >= 0 ? firstRow + nodes.child : kPad,
                    nodes.grandchild >= 0 ? firstRow + nodes.grandchild : kPad};
            }
            int32_t const c1Token = ahead.child >= 0 ? draftTokens[ahead.child - firstRow - 1] : kPad;
            int32_t const c2Token = ahead.grandchild >= 0 ? draftTokens[ahead.grandchild - firstRow - 1] : kPad;
            relaxed[n] = judgeRelaxes(judgeNode(args.rows, partials, numSplits, firstRow + n, ahead, c1Token, c2Token), cut);
        }
    }
    __syncthreads();

    PathCandidate const sequenceBest = bestPathOfBlock<kAcceptThreads>(sequencePaths, args.numPaths, args.maxPathLen,
        numValidNodes, draftTokens, targetArgmax, relaxed);
    bool const hasPath = sequenceBest.index != kNoPathIndex;
    int32_t const acceptedLen = hasPath ? sequenceBest.walk.acceptedLen : 0;
    int32_t const* bestRow = hasPath ? sequencePaths + int64_t{sequenceBest.index} * args.maxPathLen : nullptr;
    for (int32_t j = threadIdx.x; j < args.maxPathLen; j += kAcceptThreads)
    {
        args.acceptedTokens[b * args.maxPathLen + j] = acceptedTokenAt(j, bestRow, acceptedLen, draftTokens, targetArgmax);
    }
    if (threadIdx.x == 0)
    {
        args.acceptedLens[b] = acceptedLen;
        args.bestPath[b] = hasPath ? sequenceBest.index : 0;
        args.judgedCount[b] = hasPath ? sequenceBest.walk.judgedCount : 0;
    }
}

} // namespace

} // namespace kernels

cudaError_t launchAcceptTree(AcceptTreeArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream)
{
    bool const sizesOk = args.batchSize >= 0 && args.numDraftNodes >= 0 && args.numDraftNodes < kMaxTreeNodes
        && args.numPaths >= 0 && args.maxPathLen >= 1 && args.minRun >= 1
        && int64_t{args.rows.numRows} == int64_t{args.batchSize} * (args.numDraftNodes + 1)
        && kernels::nodeRowsAreConsistent(args.rows)
        && (args.rows.judge.layout.windowTokens == 0 || args.greedyChild != nullptr)
        && workspaceBytes >= acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    if (!sizesOk)
    {
        return cudaErrorInvalidValue;
    }
    if (args.batchSize == 0)
    {
        return cudaSuccess;
    }
    auto* partials = static_cast<RowScore*>(workspace);
    cudaError_t const status = kernels::launchScoreNodes(args.rows, nullptr, partials, stream);
    if (status != cudaSuccess)
    {
        return status;
    }
    kernels::acceptTreeKernel<<<args.batchSize, kernels::kAcceptThreads, kernels::sharedBytes(args.numDraftNodes),
        stream>>>(args, partials, vocabSplits(args.rows.vocabSize));
    return cudaGetLastError();
}

} // namespace autojudge
