/*
 * The best path of one sequence across a block (accept mode's acceptTree and tree logits mode's
 * rewriteTreeLogits): each thread offers the path rows it walked, then a warp shuffle and a
 * shared-memory pass over the warps pick the best with accept_core.h pathPrefers (longest accepted
 * prefix, then fewer judged nodes, then the lower path index).
 */
#pragma once

#include "autojudge/accept_core.h"

#include <cstdint>

namespace autojudge
{
namespace kernels
{

struct PathCandidate
{
    PathWalk walk;
    int32_t index;

    __device__ void offer(PathWalk otherWalk, int32_t otherIndex)
    {
        if (pathPrefers(otherWalk, otherIndex, walk, index))
        {
            walk = otherWalk;
            index = otherIndex;
        }
    }

    __device__ void offerLane(int32_t offset)
    {
        PathWalk const other{__shfl_xor_sync(0xffffffffu, walk.acceptedLen, offset),
            __shfl_xor_sync(0xffffffffu, walk.judgedCount, offset)};
        offer(other, __shfl_xor_sync(0xffffffffu, index, offset));
    }
};

//! Walk every path row of one sequence (threads stride over rows) and return, to every thread, the
//! block's best; index kNoPathIndex when the sequence has no path row. Called by all Threads threads.
template <int32_t Threads>
__device__ PathCandidate bestPathOfBlock(int32_t const* sequencePaths, //!< [P, D + 1]
    int32_t numPaths, int32_t maxPathLen, int32_t numValidNodes,
    int32_t const* draftTokens,  //!< [num_draft_nodes]
    int32_t const* targetArgmax, //!< [num_draft_nodes + 1]
    uint8_t const* relaxed)      //!< [num_draft_nodes + 1]
{
    constexpr int32_t kWarps = Threads / 32;
    PathCandidate best{noPathYet(), kNoPathIndex};
    for (int32_t p = threadIdx.x; p < numPaths; p += Threads)
    {
        int32_t const* path = sequencePaths + int64_t{p} * maxPathLen;
        if (isPathRow(path))
        {
            best.offer(walkPath(path, maxPathLen, numValidNodes, draftTokens, targetArgmax, relaxed), p);
        }
    }
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2)
    {
        best.offerLane(offset);
    }
    __shared__ PathCandidate warpBest[kWarps];
    __shared__ PathCandidate sequenceBest;
    if (threadIdx.x % 32 == 0)
    {
        warpBest[threadIdx.x / 32] = best;
    }
    __syncthreads();
    if (threadIdx.x == 0)
    {
        for (int32_t w = 1; w < kWarps; ++w)
        {
            best.offer(warpBest[w].walk, warpBest[w].index);
        }
        sequenceBest = best;
    }
    __syncthreads();
    return sequenceBest;
}

} // namespace kernels
} // namespace autojudge
