/*
 * Logits mode, kernel 2: one block per sequence of the packed step. Sequence s owns the input
 * tokens (tokenEnds[s - 1], tokenEnds[s]] (1-based positions; the ends come from host_request_types
 * and host_context_lengths, accept_core.h sequenceTokenEnds) and the gathered rows whose
 * last_token_ids fall there: its root row, then one row per draft token, which must be the
 * sequence's last 1 + K tokens (sequenceRowRange, sequenceRowIsAligned); a sequence whose rows do
 * not match is left unchanged. For every draft row whose token (input_ids[last_token_ids[row] - 1])
 * mismatches the argmax of its parent row, opens at least the judge's minimum run of tokens through
 * the exact rows after it (chainRunReaches) and passes the judge (judgeNode; the sequence's draft rows
 * are a chain, so a row's c1 and c2 are its next rows, chainLookahead), the parent row's entry for
 * that token becomes the next value above the row's maximum: the draft token is then the row's strict
 * argmax, and an exact-match decoder accepts it. Kernel 1 has already copied every row to the output.
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

template <typename T>
__global__ void __launch_bounds__(kRewriteThreads) rewriteLogitsKernel(
    RewriteLogitsArgs args, RowScore const* partials, int32_t numSplits)
{
    int32_t const sequence = blockIdx.x;
    int64_t const tokenStart = sequence > 0 ? args.tokenEnds[sequence - 1] : 0;
    int64_t const tokenEnd = args.tokenEnds[sequence];
    int32_t const numRows = args.rows.numRows;
    SequenceRows const rows = sequenceRowRange(args.lastTokenIds, numRows, tokenStart, tokenEnd);
    bool misplaced = rows.numDrafts == kRefusedSequence || tokenEnd > args.numTokens; // the latter: defensive
    for (int32_t j = threadIdx.x; !misplaced && j <= rows.numDrafts; j += kRewriteThreads)
    {
        misplaced = !sequenceRowIsAligned(args.lastTokenIds[rows.firstRow + j], j, rows.numDrafts, tokenEnd);
    }
    if (__syncthreads_or(misplaced))
    {
        return; // refused: its rows stay as kernel 1 copied them
    }
    int64_t const vocabSize = args.rows.vocabSize;
    double const cut = thresholdLogit(args.threshold);
    FloatFormat const format = floatFormat(args.rows.logitsType);
    T const* logits = static_cast<T const*>(args.rows.targetLogits);
    T* rewritten = static_cast<T*>(args.rewrittenLogits);

    int32_t const lastRow = rows.firstRow + rows.numDrafts;
    // aligned rows lie in (tokenStart, tokenEnd], so every position read is in [0, T)
    auto const tokenOf = [&](int32_t row) { return args.inputIds[int64_t{args.lastTokenIds[row]} - 1]; };
    auto const isExact = [&](int32_t row) { return tokenOf(row) == reduceRow(partials, row - 1, numSplits).argmax; };
    for (int32_t k = 1 + threadIdx.x; k <= rows.numDrafts; k += kRewriteThreads)
    {
        int32_t const child = rows.firstRow + k;
        int32_t const parent = child - 1;
        int32_t const draftToken = tokenOf(child);
        RowScore const parentScore = reduceRow(partials, parent, numSplits);
        float judgeLogit = INFINITY; // scored only for a mismatching in-vocabulary draft token opening minRun tokens
        if (tokenInVocab(draftToken, args.rows.vocabSize) && draftToken != parentScore.argmax
            && chainRunReaches(child, lastRow, args.minRun, isExact))
        {
            Lookahead const ahead = chainLookahead(child, lastRow);
            judgeLogit = judgeNode(args.rows, partials, numSplits, child, ahead,
                ahead.child >= 0 ? tokenOf(ahead.child) : kPad, ahead.grandchild >= 0 ? tokenOf(ahead.grandchild) : kPad);
        }
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

} // namespace
} // namespace kernels

cudaError_t launchRewriteLogits(
    RewriteLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream)
{
    bool const sizesOk = args.numSequences >= 0 && args.numTokens >= 0 && args.minRun >= 1
        && kernels::nodeRowsAreConsistent(args.rows)
        && (args.rows.numRows == 0 || args.rewrittenLogits != nullptr)
        && (args.numSequences == 0 || args.tokenEnds != nullptr)
        && workspaceBytes >= acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    if (!sizesOk)
    {
        return cudaErrorInvalidValue;
    }
    return kernels::scoreThenRewrite(args.rows, args.rewrittenLogits, workspace, args.numSequences > 0, stream,
        [&](auto tag, RowScore const* partials)
        {
            kernels::rewriteLogitsKernel<typename decltype(tag)::type><<<args.numSequences, kernels::kRewriteThreads,
                0, stream>>>(args, partials, vocabSplits(args.rows.vocabSize));
        });
}

} // namespace autojudge
