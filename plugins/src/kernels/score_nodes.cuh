/*
 * Kernel 1 of both modes: per (row, vocabulary chunk) partial target argmax and partial judge dot
 * product, written to the workspace as NodePartial[num_rows, num_splits]; and the device-side
 * reduction of one row's partials, used by kernel 2 of both modes.
 */
#pragma once

#include "autojudge/accept_core.h"
#include "autojudge/accept_launch.h"

#include <cstdint>
#include <cuda_runtime_api.h>

namespace autojudge
{
namespace kernels
{

//! One block's share of a row: argmax over its vocabulary chunk, dot over its feature slice.
struct NodePartial
{
    float maxValue;
    int32_t argmax;
    float judgeDot;
};
static_assert(sizeof(NodePartial) == 12, "acceptWorkspaceBytes assumes 12-byte partials");

//! A whole row: the target argmax (first maximum), its value, and the judge dot product.
struct RowScore
{
    float maxValue;
    int32_t argmax;
    float judgeDot;
};

//! Reduce the num_splits partials of one row in a fixed order (deterministic sums).
__device__ __forceinline__ RowScore reduceRow(NodePartial const* partials, //!< [num_rows, num_splits]
    int64_t row, int32_t numSplits)
{
    RowScore score{-INFINITY, 0x7fffffff, 0.f};
    NodePartial const* rowPartials = partials + row * numSplits;
    for (int32_t split = 0; split < numSplits; ++split)
    {
        NodePartial const partial = rowPartials[split];
        if (argmaxPrefers(partial.maxValue, partial.argmax, score.maxValue, score.argmax))
        {
            score.maxValue = partial.maxValue;
            score.argmax = partial.argmax;
        }
        score.judgeDot += partial.judgeDot;
    }
    return score;
}

//! Sizes and pointers that kernel 1 needs are present and consistent (host-side check).
bool nodeRowsAreConsistent(NodeRows const& rows);

//! Launch kernel 1 over rows.numRows * vocabSplits(rows.vocabSize) blocks. When copyOut is not
//! nullptr (logits mode) every logits row is also copied there ([num_rows, vocab_size]).
cudaError_t launchScoreNodes(NodeRows const& rows, void* copyOut, NodePartial* partials, cudaStream_t stream);

} // namespace kernels
} // namespace autojudge
