/*
 * Kernel 1 of both modes: per (row, vocabulary chunk) the chunk's RowScore (accept_core.h: partial
 * target argmax, partial softmax statistics, partial dot products over a slice of the features),
 * written to the workspace as RowScore[num_rows, num_splits]; and the device-side merge of one row's
 * partials, and the judge of one node from them, used by kernel 2 of both modes.
 */
#pragma once

#include "autojudge/accept_core.h"
#include "autojudge/accept_launch.h"
#include "kernels/element_load.cuh"

#include <cstdint>
#include <cuda_runtime_api.h>

namespace autojudge
{
namespace kernels
{

//! Merge the num_splits partials of one row in a fixed order (deterministic sums).
__device__ __forceinline__ RowScore reduceRow(RowScore const* partials, //!< [num_rows, num_splits]
    int64_t row, int32_t numSplits)
{
    RowScore score = emptyRowScore();
    RowScore const* rowPartials = partials + row * numSplits;
    for (int32_t split = 0; split < numSplits; ++split)
    {
        mergeRowScore(score, rowPartials[split]);
    }
    return score;
}

//! target_logits[row, token] as float, NaN for a token outside the vocabulary.
__device__ inline float logitAt(NodeRows const& rows, int64_t row, int32_t token)
{
    if (!tokenInVocab(token, rows.vocabSize))
    {
        return NAN;
    }
    int64_t const i = row * rows.vocabSize + token;
    switch (rows.logitsType)
    {
    case ElementType::kFLOAT16: return loadFloat(static_cast<__half const*>(rows.targetLogits), i);
    case ElementType::kBFLOAT16: return loadFloat(static_cast<__nv_bfloat16 const*>(rows.targetLogits), i);
    default: return loadFloat(static_cast<float const*>(rows.targetLogits), i);
    }
}

//! judge_logit of the node at row `node` whose c1 and c2 are the rows of `ahead` (-1: none) and
//! carry the tokens c1Token and c2Token; +inf when it has no verdict (accept_core.h hasVerdict).
//! The host core's judgeNode takes the same steps.
__device__ inline float judgeNode(NodeRows const& rows, RowScore const* partials, //!< [num_rows, num_splits]
    int32_t numSplits, int32_t node, Lookahead ahead, int32_t c1Token, int32_t c2Token)
{
    JudgeLayout const& layout = rows.judge.layout;
    if (!hasVerdict(layout, ahead))
    {
        return INFINITY;
    }
    RowScore const nodeScore = reduceRow(partials, node, numSplits);
    int32_t const child = ahead.child >= 0 ? ahead.child : node;
    RowScore const childScore = ahead.child >= 0 ? reduceRow(partials, child, numSplits) : nodeScore;
    RowScore const grandchildScore
        = ahead.grandchild >= 0 && layout.windowTokens == 2 ? reduceRow(partials, ahead.grandchild, numSplits) : nodeScore;
    bool const scores = hasBlock(layout, FeatureBlock::kLS); // the token logits are read only for LS
    return nodeJudgeLogit(rows.judge, nodeScore, childScore, grandchildScore,
        scores ? logitAt(rows, node, c1Token) : 0.f, c1Token, scores ? logitAt(rows, child, c2Token) : 0.f, c2Token);
}

//! Sizes and pointers that kernel 1 needs are present and consistent (host-side check).
bool nodeRowsAreConsistent(NodeRows const& rows);

//! Launch kernel 1 over rows.numRows * vocabSplits(rows.vocabSize) blocks. When copyOut is not
//! nullptr (logits mode) every logits row is also copied there ([num_rows, vocab_size]).
cudaError_t launchScoreNodes(NodeRows const& rows, void* copyOut, RowScore* partials, cudaStream_t stream);

template <typename T>
struct ElementTag
{
    using type = T;
};

//! Both logits modes: kernel 1 over every row (copying the logits to rewrittenLogits), then, when
//! there is anything to rewrite, kernel 2 for the logits' type: launchTyped(ElementTag<T>{}, partials)
//! with T = float, __half or __nv_bfloat16. The workspace holds the partials.
template <typename LaunchTyped>
cudaError_t scoreThenRewrite(NodeRows const& rows, void* rewrittenLogits, void* workspace, bool anyToRewrite,
    cudaStream_t stream, LaunchTyped&& launchTyped)
{
    if (rows.numRows == 0)
    {
        return cudaSuccess;
    }
    auto* partials = static_cast<RowScore*>(workspace);
    cudaError_t const status = launchScoreNodes(rows, rewrittenLogits, partials, stream);
    if (status != cudaSuccess || !anyToRewrite)
    {
        return status;
    }
    switch (rows.logitsType)
    {
    case ElementType::kFLOAT32: launchTyped(ElementTag<float>{}, partials); break;
    case ElementType::kFLOAT16: launchTyped(ElementTag<__half>{}, partials); break;
    case ElementType::kBFLOAT16: launchTyped(ElementTag<__nv_bfloat16>{}, partials); break;
    }
    return cudaGetLastError();
}

} // namespace kernels
} // namespace autojudge
