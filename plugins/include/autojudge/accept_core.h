/*
 * The AutoJudge acceptance rule as __host__ __device__ functions: the C++ host core and the CUDA
 * kernels call exactly these, so both implement one rule. The specification is the Python
 * reference, trtllm_autojudge/spec/acceptance.py (accept_tree) and decoding/rules.py (judge_relaxed);
 * the words below are the words defined there.
 *
 *   node           one token of the draft tree; node 0 is the root (the last accepted token),
 *                  node n >= 1 carries draft_tokens[n - 1].
 *   path           node indices of one root-to-leaf path, path[0] == 0, padded with -1; a path
 *                  row that does not start with 0 is padding.
 *   target argmax  targetArgmax[n]: the target's greedy token for the CHILD of node n.
 *   exact          node n with parent m: draftTokens[n - 1] == targetArgmax[m].
 *   exact run      of node n: 1 + the longest chain of exact nodes below it, within draft_lens
 *                  (decoding/rules.py exact_runs); from the path rows, the max over the rows
 *                  through n of 1 + the consecutive exact nodes after n on the row.
 *   minimum run    min_run (minRun here), the judge's meta["min_run"] (judge/head.py), 1 = none:
 *                  a mismatching node whose exact run is < min_run is never judged
 *                  (decoding/modes.py JudgeRule.judgeable); it depends on the draft and the target
 *                  argmax only, not on the threshold.
 *   judged         a mismatching node whose judge logit is finite and < logit(threshold) and
 *                  whose exact run is >= min_run.
 *   accepted       exact or judged; nodes past draft_lens are never accepted.
 *   best path      longest accepted prefix; ties: fewer judged nodes, then the lower path index.
 *   correction     targetArgmax at the last accepted node of the best path (the bonus token when
 *   token          the whole path was accepted); emitted after the accepted draft tokens.
 *
 * The judge (judge/head.py, judge/lookahead.py; decoding/modes.py JudgeRule): judge_logit = bias +
 * weight . x(n), x(n) the node's feature blocks in the judge's order (FeatureBlock). c1 and c2 are
 * the node's greedy child and grandchild; a node without the draft tokens its blocks need after it
 * has no verdict (rejected). Only mismatching nodes whose exact run reaches min_run are scored.
 */
#pragma once

#include <cstdint>
#include <math.h>

#if defined(__CUDACC__)
#define AUTOJUDGE_HD __host__ __device__ __forceinline__
#else
#define AUTOJUDGE_HD inline
#endif

namespace autojudge
{

//! Padding value of paths and accepted tokens.
constexpr int32_t kPad = -1;

//! Vocabulary entries per chunk of a row: the kernels score each chunk in its own block and merge the
//! chunks' RowScores in chunk order; the host core merges the same chunks in the same order.
constexpr int32_t kVocabChunk = 8192;

AUTOJUDGE_HD uint32_t floatBits(float value)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(value);
#else
    uint32_t bits;
    __builtin_memcpy(&bits, &value, sizeof(bits));
    return bits;
#endif
}

//! False for NaN and +-inf.
AUTOJUDGE_HD bool isFiniteFloat(float value)
{
    return (floatBits(value) & 0x7f800000u) != 0x7f800000u;
}

//! Argmax order: does (value, index) come before (bestValue, bestIndex)? NaN ranks above every
//! number (as numpy.argmax and torch.argmax do), and equal values (or two NaNs) go to the lower
//! index, so the maximum of this total order is the FIRST maximum of the row.
AUTOJUDGE_HD bool argmaxPrefers(float value, int32_t index, float bestValue, int32_t bestIndex)
{
    bool const isNan = value != value;
    bool const bestIsNan = bestValue != bestValue;
    if (isNan != bestIsNan)
    {
        return isNan;
    }
    if (!isNan && value != bestValue)
    {
        return value > bestValue;
    }
    return index < bestIndex;
}

//! logit(threshold) in double precision, as rules.threshold_logit: logit(0) = -inf, logit(1) = +inf;
//! a threshold outside [0, 1] or NaN gives NaN, which accepts nothing.
AUTOJUDGE_HD double thresholdLogit(float threshold)
{
    double const t = threshold;
    return ::log(t) - ::log1p(-t);
}

//! The judge lets a mismatching node through: a finite judge logit below logit(threshold). The node is
//! judged when, besides, its exact run reaches min_run (markJudgeable, chainRunReaches: the callers).
AUTOJUDGE_HD bool judgeRelaxes(float judgeLogit, double cut)
{
    return isFiniteFloat(judgeLogit) && static_cast<double>(judgeLogit) < cut;
}

//! Draft nodes 1..numValidNodes may be accepted: draft_lens[b] clamped to [0, num_draft_nodes].
AUTOJUDGE_HD int32_t validNodeCount(int32_t draftLen, int32_t numDraftNodes)
{
    return draftLen < 0 ? 0 : (draftLen > numDraftNodes ? numDraftNodes : draftLen);
}

//! A path row takes part only when it starts at the root; any other first entry is padding.
AUTOJUDGE_HD bool isPathRow(int32_t const* path)
{
    return path[0] == 0;
}

struct PathWalk
{
    int32_t acceptedLen; //!< accepted draft nodes along the path (root excluded)
    int32_t judgedCount; //!< how many of them were mismatches let through by the judge
};

//! Visit the nodes of one path row in order, up to the first index outside [1, numValidNodes] (-1
//! padding, a node past draft_lens, or a malformed index: never read out of bounds), while
//! visit(node, exact) returns true; exact: the node's draft token is its path parent's target argmax.
template <typename Visit>
AUTOJUDGE_HD void visitPath(int32_t const* path, //!< [max_path_len] node indices, path[0] == 0
    int32_t maxPathLen,
    int32_t numValidNodes,                       //!< validNodeCount(draft_lens[b], N)
    int32_t const* draftTokens,                  //!< [num_draft_nodes] token of node n at n - 1
    int32_t const* targetArgmax,                 //!< [num_draft_nodes + 1]
    Visit visit)
{
    int32_t parent = 0;
    for (int32_t j = 1; j < maxPathLen; ++j)
    {
        int32_t const node = path[j];
        if (node < 1 || node > numValidNodes || !visit(node, draftTokens[node - 1] == targetArgmax[parent]))
        {
            return;
        }
        parent = node;
    }
}

//! Call visit(node, run) for each mismatching node of one path row that visitPath reaches, with run
//! = 1 + the consecutive exact nodes after it on this row (visitPath's nodes: a node past draft_lens
//! ends the run). A node's exact run is the largest run the rows through it give.
template <typename Visit>
AUTOJUDGE_HD void visitRowRuns(int32_t const* path, //!< [max_path_len] node indices, path[0] == 0
    int32_t maxPathLen, int32_t numValidNodes,
    int32_t const* draftTokens,                     //!< [num_draft_nodes]
    int32_t const* targetArgmax,                    //!< [num_draft_nodes + 1]
    Visit visit)
{
    int32_t open = kPad; // the last mismatching node seen, whose run is still counting
    int32_t run = 0;
    visitPath(path, maxPathLen, numValidNodes, draftTokens, targetArgmax, [&](int32_t node, bool exact) {
        if (exact)
        {
            ++run;
            return true;
        }
        if (open != kPad)
        {
            visit(open, run);
        }
        open = node;
        run = 1;
        return true;
    });
    if (open != kPad)
    {
        visit(open, run);
    }
}

//! A mismatching node may be judged only when its exact run reaches the judge's minimum run.
AUTOJUDGE_HD bool runReaches(int32_t run, int32_t minRun)
{
    return run >= minRun;
}

//! Logits mode: does the draft row `row` of a chain (its draft rows up to lastRow) open at least minRun
//! tokens? isExact(r): row r's token is the target argmax of row r - 1. Reads at most minRun - 1 rows.
template <typename IsExact>
AUTOJUDGE_HD bool chainRunReaches(int32_t row, int32_t lastRow, int32_t minRun, IsExact isExact)
{
    int32_t run = 1;
    for (int32_t next = row + 1; run < minRun && next <= lastRow && isExact(next); ++next)
    {
        ++run;
    }
    return runReaches(run, minRun);
}

//! Longest accepted prefix of one path row (visitPath's nodes, while exact or relaxed).
AUTOJUDGE_HD PathWalk walkPath(int32_t const* path, //!< [max_path_len] node indices, path[0] == 0
    int32_t maxPathLen,                               //!< D + 1
    int32_t numValidNodes,                            //!< validNodeCount(draft_lens[b], N)
    int32_t const* draftTokens,                       //!< [num_draft_nodes] token of node n at n - 1
    int32_t const* targetArgmax,                      //!< [num_draft_nodes + 1]
    uint8_t const* relaxed)                           //!< [num_draft_nodes + 1] judge lets node n through
{
    PathWalk walk{0, 0};
    visitPath(path, maxPathLen, numValidNodes, draftTokens, targetArgmax, [&](int32_t node, bool exact) {
        if (!exact && !relaxed[node])
        {
            return false;
        }
        walk.judgedCount += exact ? 0 : 1;
        ++walk.acceptedLen;
        return true;
    });
    return walk;
}

//! Best-path order: is path a (index pathA) better than path b (index pathB)? Longer accepted
//! prefix first, then fewer judged nodes, then the lower path index.
AUTOJUDGE_HD bool pathPrefers(PathWalk a, int32_t pathA, PathWalk b, int32_t pathB)
{
    if (a.acceptedLen != b.acceptedLen)
    {
        return a.acceptedLen > b.acceptedLen;
    }
    if (a.judgedCount != b.judgedCount)
    {
        return a.judgedCount < b.judgedCount;
    }
    return pathA < pathB;
}

//! The "no path row yet" candidate (walk and index): every real path is preferred to it.
AUTOJUDGE_HD PathWalk noPathYet()
{
    return PathWalk{-1, 0};
}
constexpr int32_t kNoPathIndex = 0x7fffffff;

//! Entry j of accepted_tokens[b]: the accepted draft tokens of the best path, then the correction
//! token, then -1. bestPathRow is nullptr when the sequence has no path row.
AUTOJUDGE_HD int32_t acceptedTokenAt(int32_t j, int32_t const* bestPathRow, //!< [max_path_len] or nullptr
    int32_t acceptedLen, int32_t const* draftTokens,                        //!< [num_draft_nodes]
    int32_t const* targetArgmax)                                            //!< [num_draft_nodes + 1]
{
    if (j < acceptedLen)
    {
        return draftTokens[bestPathRow[j + 1] - 1];
    }
    if (j == acceptedLen)
    {
        return targetArgmax[acceptedLen > 0 ? bestPathRow[acceptedLen] : 0];
    }
    return kPad;
}

//! TensorRT-LLM's request types (host_request_types; runtime/common.h RequestType).
constexpr int32_t kContextRequest = 0;
constexpr int32_t kGenerationRequest = 1;

//! Logits mode: the packed input tokens of sequence s in this step, the rule TensorRT-LLM's LoRA
//! plugin splits packed rows by: a context request holds host_context_lengths[s] tokens (its chunk,
//! followed by its draft tokens on the last chunk); any other sequence (a generation request, one
//! per beam) holds 1. A negative length counts as 0.
AUTOJUDGE_HD int32_t sequenceTokenCount(int32_t requestType, int32_t hostContextLength)
{
    if (requestType != kContextRequest)
    {
        return 1;
    }
    return hostContextLength > 0 ? hostContextLength : 0;
}

//! Logits mode: the token end of every sequence (inclusive prefix sums of sequenceTokenCount, so
//! sequence s owns the positions (tokenEnds[s - 1], tokenEnds[s]]). Returns false when the counts do
//! not add up to numTokens, the step's input_ids: then no sequence can be segmented (the plugin
//! refuses the step). Stops at the first sum past numTokens, so every written end fits int32.
AUTOJUDGE_HD bool sequenceTokenEnds(int32_t const* requestTypes, //!< [S] host_request_types
    int32_t const* hostContextLengths,                           //!< [S]
    int32_t numSequences, int64_t numTokens,
    int32_t* tokenEnds)                                          //!< [S] out
{
    int64_t end = 0;
    for (int32_t s = 0; s < numSequences; ++s)
    {
        end += sequenceTokenCount(requestTypes[s], hostContextLengths[s]);
        if (end > numTokens)
        {
            return false;
        }
        tokenEnds[s] = static_cast<int32_t>(end);
    }
    return end == numTokens;
}

//! Logits mode: the first of the rows (last_token_ids, 1-based token positions) whose input token
//! lies after token position `position`. For ascending last_token_ids, the rows of a sequence whose
//! tokens are the positions (start, end] are [firstRowAfter(start), firstRowAfter(end)).
AUTOJUDGE_HD int32_t firstRowAfter(int32_t const* lastTokenIds, //!< [num_rows]
    int32_t numRows, int64_t position)
{
    int32_t low = 0;
    int32_t high = numRows;
    while (low < high)
    {
        int32_t const middle = low + (high - low) / 2;
        if (lastTokenIds[middle] <= position)
        {
            low = middle + 1;
        }
        else
        {
            high = middle;
        }
    }
    return low;
}

//! Marks a sequence whose rows do not match its tokens: its rows are never rewritten.
constexpr int32_t kRefusedSequence = -1;

//! Logits mode: the candidate rows of one sequence, before the per-row check.
struct SequenceRows
{
    int32_t firstRow;  //!< row of the root (the sequence's last real token)
    int32_t numDrafts; //!< K = rows - 1, or kRefusedSequence
};

//! Logits mode: the rows of the sequence whose input tokens are the positions (start, end]: the
//! rows whose last_token_ids fall there, [firstRow, firstRow + 1 + numDrafts). A sequence must own
//! at least one row and at most one row per token; otherwise it is refused. The caller then checks
//! every row with sequenceRowIsAligned and refuses the sequence when one fails.
AUTOJUDGE_HD SequenceRows sequenceRowRange(int32_t const* lastTokenIds, //!< [num_rows]
    int32_t numRows, int64_t tokenStart, int64_t tokenEnd)
{
    int32_t const first = firstRowAfter(lastTokenIds, numRows, tokenStart);
    int32_t const end = firstRowAfter(lastTokenIds, numRows, tokenEnd);
    int64_t const rows = int64_t{end} - first;
    if (rows < 1 || rows > tokenEnd - tokenStart)
    {
        return SequenceRows{first, kRefusedSequence};
    }
    return SequenceRows{first, static_cast<int32_t>(rows - 1)};
}

//! Logits mode: row j (0 = root) of a sequence with numDrafts draft rows ending at token position
//! tokenEnd is where TensorRT-LLM puts it: the 1 + K rows are the sequence's LAST 1 + K packed tokens,
//! so the draft tokens are its last K input_ids (runtimeBuffers.cpp setFromInputs, last chunk).
AUTOJUDGE_HD bool sequenceRowIsAligned(int32_t lastTokenId, int32_t j, int32_t numDrafts, int64_t tokenEnd)
{
    return int64_t{lastTokenId} == tokenEnd - numDrafts + j;
}

//! Logits mode: does the judge make row `parent` prefer the draft token of its child node? Only a
//! mismatching in-vocabulary draft token whose judge logit passes the threshold is rewritten (and only
//! when its exact run reaches min_run, chainRunReaches, which the callers check).
AUTOJUDGE_HD bool judgeRewritesRow(int32_t draftToken, int32_t parentArgmax, int32_t vocabSize, float judgeLogit,
    double cut)
{
    return draftToken >= 0 && draftToken < vocabSize && draftToken != parentArgmax
        && judgeRelaxes(judgeLogit, cut);
}

// ---------------------------------------------------------------------------------------------
// Tree logits mode: one step of TensorRT-LLM's EAGLE engine (spec/tree_step.py is the reference).
// Request b owns draft_lens[b] + 1 consecutive logits rows (its root, then node n at row first + n),
// after the rows of the requests before it.

//! Tree logits mode: every draft length lies in [0, numDraftNodes] and the requests' rows add up to
//! numRows; otherwise the step is refused whole. Stops at the first sum past numRows (no overflow).
AUTOJUDGE_HD bool treeStepRowsAddUp(int32_t const* draftLens, //!< [B]
    int32_t batchSize, int32_t numDraftNodes, int64_t numRows)
{
    int64_t rows = 0;
    for (int32_t b = 0; b < batchSize; ++b)
    {
        if (draftLens[b] < 0 || draftLens[b] > numDraftNodes)
        {
            return false;
        }
        rows += int64_t{draftLens[b]} + 1;
        if (rows > numRows)
        {
            return false;
        }
    }
    return rows == numRows;
}

//! Tree logits mode: the first row of request b (of a step whose rows add up).
AUTOJUDGE_HD int64_t treeRequestFirstRow(int32_t const* draftLens, int32_t b)
{
    int64_t first = 0;
    for (int32_t i = 0; i < b; ++i)
    {
        first += int64_t{draftLens[i]} + 1;
    }
    return first;
}

//! Tree logits mode: record the parent of every node on one path row in parents ([numValidNodes + 1],
//! kPad where unknown yet); false when the row breaks the request's tree: a first entry neither 0 nor
//! -1 (a padding row), an index outside [-1, numValidNodes], a node after a -1, a node whose parent
//! differs from the one another row gave it.
AUTOJUDGE_HD bool recordTreeRow(int32_t const* path, //!< [max_path_len]
    int32_t maxPathLen, int32_t numValidNodes, int32_t* parents)
{
    if (path[0] == kPad)
    {
        return true;
    }
    if (path[0] != 0)
    {
        return false;
    }
    bool closed = false;
    for (int32_t j = 1; j < maxPathLen; ++j)
    {
        int32_t const node = path[j];
        if (node == kPad)
        {
            closed = true;
            continue;
        }
        if (closed || node < 1 || node > numValidNodes || (parents[node] != kPad && parents[node] != path[j - 1]))
        {
            return false;
        }
        parents[node] = path[j - 1];
    }
    return true;
}

//! Tree logits mode: no two children of one node carry the same token (the exact-match walk could
//! follow the twin of a judged node).
AUTOJUDGE_HD bool treeSiblingsDistinct(int32_t const* parents, //!< [numValidNodes + 1]
    int32_t numValidNodes, int32_t const* draftTokens)          //!< [numValidNodes]
{
    for (int32_t a = 1; a <= numValidNodes; ++a)
    {
        for (int32_t c = a + 1; parents[a] != kPad && c <= numValidNodes; ++c)
        {
            if (parents[c] == parents[a] && draftTokens[c - 1] == draftTokens[a - 1])
            {
                return false;
            }
        }
    }
    return true;
}

//! Tree logits mode: does the judge let node n through? A mismatching in-vocabulary token with a
//! passing judge logit, whose parent row has a finite value above its maximum (so it can be rewritten);
//! the callers ask only about the nodes markJudgeable marked (exact run >= min_run).
AUTOJUDGE_HD bool treeNodeJudged(int32_t draftToken, int32_t parentArgmax, int32_t vocabSize, float judgeLogit,
    double cut, bool parentRewritable)
{
    return parentRewritable && judgeRewritesRow(draftToken, parentArgmax, vocabSize, judgeLogit, cut);
}

// ---------------------------------------------------------------------------------------------
// The judge's features (spec/judge_blocks.py holds the same vocabulary; tests pin them equal).

//! A feature block of the judge: the values of the plugin's feature_blocks field. A judge's
//! weights are its blocks' features, block after block, in the order of its block list.
enum class FeatureBlock : int32_t
{
    kDT = 0,  //!< the target's hidden state with the node's token as the input   [Ht]
    kDD = 1,  //!< the draft's hidden state there                                 [Hd]
    kDT1 = 2, //!< the target's hidden state at the node's greedy child c1        [Ht]
    kDT2 = 3, //!< the target's hidden state at c1's greedy child c2              [Ht]
    kDD1 = 4, //!< the draft's hidden state at c1                                 [Hd]
    kLS = 5,  //!< six lookahead scores of the node's and c1's logits rows        [kNumLookaheadScores]
};
constexpr int32_t kNumFeatureBlocks = 6;
//! Codes 0 .. kNumHiddenBlocks - 1 are hidden-state rows: one dot product with their weights each.
constexpr int32_t kNumHiddenBlocks = 5;
//! LS, in this order: log p0(c1), log p1(c2) (floored at kMinLogProb), c1 == argmax p0, c2 ==
//! argmax p1 (1 or 0), entropy of p0, entropy of p1; p0 / p1: the target's softmax after n / c1.
constexpr int32_t kNumLookaheadScores = 6;
constexpr float kMinLogProb = -30.f;

//! The block's name in setups ("DD-DT-LS"), nullptr for an unknown code.
inline char const* featureBlockName(int32_t code)
{
    constexpr char const* kNames[kNumFeatureBlocks] = {"DT", "DD", "DT1", "DT2", "DD1", "LS"};
    return code >= 0 && code < kNumFeatureBlocks ? kNames[code] : nullptr;
}

//! Draft tokens a node needs after it for the block (0, 1 or 2). DD1 needs two: the draft computes
//! its hidden state at c1 only when it drafts c2 after it.
AUTOJUDGE_HD int32_t blockWindowTokens(FeatureBlock block)
{
    return block == FeatureBlock::kDT1 ? 1 : (block == FeatureBlock::kDT || block == FeatureBlock::kDD ? 0 : 2);
}

AUTOJUDGE_HD bool blockReadsDraft(FeatureBlock block)
{
    return block == FeatureBlock::kDD || block == FeatureBlock::kDD1;
}

AUTOJUDGE_HD int32_t blockWidth(FeatureBlock block, int32_t targetHidden, int32_t draftHidden)
{
    return block == FeatureBlock::kLS ? kNumLookaheadScores : (blockReadsDraft(block) ? draftHidden : targetHidden);
}

//! Where each block's weights lie in judge_weight, and what a node needs for a verdict.
struct JudgeLayout
{
    int32_t weightOffset[kNumFeatureBlocks]; //!< first weight of each block, -1 when the judge lacks it
    int32_t targetHidden;                    //!< Ht
    int32_t draftHidden;                     //!< Hd, 0 when no block reads the draft
    int32_t featureSize;                     //!< F, the length of judge_weight
    int32_t windowTokens;                    //!< draft tokens a node needs after it (0, 1 or 2)
};

AUTOJUDGE_HD bool hasBlock(JudgeLayout const& layout, FeatureBlock block)
{
    return layout.weightOffset[static_cast<int32_t>(block)] >= 0;
}

AUTOJUDGE_HD bool readsDraft(JudgeLayout const& layout)
{
    return hasBlock(layout, FeatureBlock::kDD) || hasBlock(layout, FeatureBlock::kDD1);
}

//! The layout of a block list ([numBlocks] FeatureBlock codes, weight order). False for an empty
//! list, an unknown or repeated code, Ht < 1, or Hd < 1 with a draft block (Hd is kept only then).
inline bool makeJudgeLayout(int32_t const* blocks, int32_t numBlocks, int32_t targetHidden, int32_t draftHidden,
    JudgeLayout& layout)
{
    JudgeLayout made{{-1, -1, -1, -1, -1, -1}, targetHidden, 0, 0, 0};
    bool valid = numBlocks >= 1 && blocks != nullptr && targetHidden >= 1;
    for (int32_t i = 0; valid && i < numBlocks; ++i)
    {
        valid = featureBlockName(blocks[i]) != nullptr && made.weightOffset[blocks[i]] < 0;
        if (valid)
        {
            auto const block = static_cast<FeatureBlock>(blocks[i]);
            made.draftHidden = blockReadsDraft(block) ? draftHidden : made.draftHidden;
            valid = !blockReadsDraft(block) || draftHidden >= 1;
            made.weightOffset[blocks[i]] = made.featureSize;
            made.featureSize += blockWidth(block, targetHidden, draftHidden);
            made.windowTokens = blockWindowTokens(block) > made.windowTokens ? blockWindowTokens(block) : made.windowTokens;
        }
    }
    if (valid)
    {
        layout = made;
    }
    return valid;
}

//! The folded judge: judge_logit = weight . features + bias (docs/judge.md).
struct JudgeHeadView
{
    float const* weight; //!< [layout.featureSize] float32
    float bias;          //!< folded intercept
    JudgeLayout layout;
};

//! The weights of one block (nullptr when the judge lacks it).
AUTOJUDGE_HD float const* blockWeights(JudgeHeadView const& judge, FeatureBlock block)
{
    int32_t const offset = judge.layout.weightOffset[static_cast<int32_t>(block)];
    return offset >= 0 ? judge.weight + offset : nullptr;
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLargestFloat = 3.402823466e38f;

//! 2^x; on the device the flush-to-zero MUFU form: a subnormal 2^x (x < -126) is 0, which changes the
//! softmax sums by less than float rounding, and the form without the flush is a subroutine call whose
//! saved registers make the kernels spill (sm_100).
AUTOJUDGE_HD float exp2Fast(float x)
{
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return ::exp2f(x);
#endif
}

//! Streaming softmax statistics of a logits row (or a part of it), in base 2: with t_i = (x_i - max)
//! log2(e) for the elements x_i seen and max the largest of them, sum = sum_i 2^t_i and shifted =
//! sum_i 2^t_i t_i. A -inf element adds 0 (probability 0) and so does a NaN one; a row holding NaN or
//! +inf gets no scores at all (rowLogSumExp, rowEntropy look at its maximum), as in the reference.
struct SoftmaxState
{
    float max;
    float sum;
    float shifted;

    //! Express the sums relative to newMax >= max.
    AUTOJUDGE_HD void rebase(float newMax)
    {
        if (sum > 0.f)
        {
            float const t = (max - newMax) * kLog2e;
            float const scale = exp2Fast(t);
            shifted = scale * (shifted + t * sum);
            sum *= scale;
        }
        max = newMax;
    }

    //! Add an element no larger than max (the kernels rebase once per loaded vector, then add its
    //! elements with no branch; max * log2(e) is then computed once per vector). t is floored at
    //! -kLargestFloat so that -inf and NaN elements add exactly 0.
    AUTOJUDGE_HD void addBelowMax(float x)
    {
        float const t = ::fmaxf(::fmaf(x, kLog2e, -max * kLog2e), -kLargestFloat);
        float const e = exp2Fast(t);
        sum += e;
        shifted = ::fmaf(e, t, shifted);
    }

    AUTOJUDGE_HD void add(float x)
    {
        if (x > max)
        {
            rebase(x);
        }
        addBelowMax(x);
    }

    AUTOJUDGE_HD void merge(SoftmaxState other)
    {
        float const newMax = other.max > max ? other.max : max;
        rebase(newMax);
        other.rebase(newMax);
        sum += other.sum;
        shifted += other.shifted;
    }
};

//! What the judge reads of one row (node): its target argmax (argmaxPrefers order) and the maximum
//! in that order, softmax statistics (kept only when the judge has LS), and the dot product of the
//! row's hidden state with the weights of each hidden block the judge has (dot[code]; 0 otherwise).
//! The kernels build it per vocabulary chunk and merge the chunks in a fixed order.
struct RowScore
{
    float maxValue;
    int32_t argmax;
    SoftmaxState softmax;
    float dot[kNumHiddenBlocks];
};

static_assert(sizeof(RowScore) == 40, "plugins/README.md sizes the workspace with 40-byte RowScores");

AUTOJUDGE_HD RowScore emptyRowScore()
{
    return RowScore{-INFINITY, 0x7fffffff, SoftmaxState{-INFINITY, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f, 0.f}};
}

AUTOJUDGE_HD void mergeRowScore(RowScore& into, RowScore const& other)
{
    if (argmaxPrefers(other.maxValue, other.argmax, into.maxValue, into.argmax))
    {
        into.maxValue = other.maxValue;
        into.argmax = other.argmax;
    }
    into.softmax.merge(other.softmax);
    for (int32_t code = 0; code < kNumHiddenBlocks; ++code)
    {
        into.dot[code] += other.dot[code];
    }
}

//! log sum exp of a row; NaN when its maximum is NaN, +inf or -inf (reference: NaN, +inf, -inf).
AUTOJUDGE_HD float rowLogSumExp(RowScore const& row)
{
    return isFiniteFloat(row.maxValue) ? row.softmax.max + ::logf(row.softmax.sum) : NAN;
}

//! -sum p log p of a row's softmax (masked tokens count 0); NaN when its maximum is not finite.
//! a / b for b in [1, 2^126]: IEEE division on the host; on the device __fdividef (2 ulp), as an IEEE
//! division's slow-path subroutine makes kernel 2 spill the registers it saves (sm_100).
AUTOJUDGE_HD float divideBounded(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdividef(a, b);
#else
    return a / b;
#endif
}

AUTOJUDGE_HD float rowEntropy(RowScore const& row)
{
    // sum >= 1: the maximum's own term is 2^0
    return isFiniteFloat(row.maxValue) ? ::logf(row.softmax.sum) - kLn2 * divideBounded(row.softmax.shifted, row.softmax.sum)
                                       : NAN;
}

AUTOJUDGE_HD float floorLogProb(float logProb)
{
    return logProb < kMinLogProb ? kMinLogProb : logProb; // NaN stays NaN, as torch.clamp
}

//! The LS block of a node n (judge/lookahead.py lookahead_scores): `node` is n's row and `child`
//! c1's; nodeLogitOfC1 = target_logits[n, c1's token] and childLogitOfC2 = target_logits[c1, c2's
//! token] (NaN for a token outside the vocabulary).
AUTOJUDGE_HD void lookaheadScores(RowScore const& node, float nodeLogitOfC1, int32_t c1Token, RowScore const& child,
    float childLogitOfC2, int32_t c2Token, float* scores) //!< [kNumLookaheadScores] out
{
    scores[0] = floorLogProb(nodeLogitOfC1 - rowLogSumExp(node));
    scores[1] = floorLogProb(childLogitOfC2 - rowLogSumExp(child));
    scores[2] = node.argmax == c1Token ? 1.f : 0.f;
    scores[3] = child.argmax == c2Token ? 1.f : 0.f;
    scores[4] = rowEntropy(node);
    scores[5] = rowEntropy(child);
}

AUTOJUDGE_HD bool tokenInVocab(int32_t token, int32_t vocabSize)
{
    return token >= 0 && token < vocabSize;
}

//! The nodes a node's lookahead blocks read: its greedy child c1 and c1's greedy child c2 (-1: none).
struct Lookahead
{
    int32_t child;
    int32_t grandchild;
};

//! Accept mode: c1 and c2 of `node` from greedy_child (the rank-0 child of each node, decoding/tree.py
//! DraftTree.greedy_child); an entry outside [1, numValidNodes] is none (a child past draft_lens).
AUTOJUDGE_HD Lookahead treeLookahead(int32_t const* greedyChild, //!< [num_draft_nodes + 1]
    int32_t node, int32_t numValidNodes)
{
    int32_t const child = greedyChild[node];
    if (child < 1 || child > numValidNodes)
    {
        return Lookahead{kPad, kPad};
    }
    int32_t const grandchild = greedyChild[child];
    return Lookahead{child, grandchild >= 1 && grandchild <= numValidNodes ? grandchild : kPad};
}

//! Logits mode: a sequence's draft rows form a chain, so row r's c1 and c2 are the next rows up to
//! the sequence's last row.
AUTOJUDGE_HD Lookahead chainLookahead(int32_t row, int32_t lastRow)
{
    return Lookahead{row + 1 <= lastRow ? row + 1 : kPad, row + 2 <= lastRow ? row + 2 : kPad};
}

//! A node has a verdict when it has the draft tokens its blocks need after it.
AUTOJUDGE_HD bool hasVerdict(JudgeLayout const& layout, Lookahead ahead)
{
    return layout.windowTokens == 0 || (ahead.child >= 0 && (layout.windowTokens == 1 || ahead.grandchild >= 0));
}

//! judge_logit of a node with a verdict, accumulated in float32: bias, then each block's weights .
//! its features. child / grandchild: the rows of c1 / c2, read only by the blocks that look ahead;
//! the token logits and tokens are lookaheadScores' (read only with LS).
AUTOJUDGE_HD float nodeJudgeLogit(JudgeHeadView const& judge, RowScore const& node, RowScore const& child,
    RowScore const& grandchild, float nodeLogitOfC1, int32_t c1Token, float childLogitOfC2, int32_t c2Token)
{
    float logit = judge.bias;
    for (int32_t code = 0; code < kNumHiddenBlocks; ++code)
    {
        auto const block = static_cast<FeatureBlock>(code);
        if (hasBlock(judge.layout, block))
        {
            int32_t const window = blockWindowTokens(block);
            logit += (window == 0 ? node : (block == FeatureBlock::kDT2 ? grandchild : child)).dot[code];
        }
    }
    if (float const* weights = blockWeights(judge, FeatureBlock::kLS))
    {
        float scores[kNumLookaheadScores];
        lookaheadScores(node, nodeLogitOfC1, c1Token, child, childLogitOfC2, c2Token, scores);
        for (int32_t k = 0; k < kNumLookaheadScores; ++k)
        {
            logit += weights[k] * scores[k];
        }
    }
    return logit;
}

//! Marks the mismatching nodes of one path row that the walk may reach (visitPath's nodes) and whose
//! run on this row reaches minRun (visitRowRuns): over all rows, the nodes that may be judged. Their
//! verdicts are the only ones the walk can read, so only they are scored.
AUTOJUDGE_HD void markJudgeable(int32_t const* path, //!< [max_path_len], path[0] == 0
    int32_t maxPathLen, int32_t numValidNodes,
    int32_t const* draftTokens,  //!< [num_draft_nodes]
    int32_t const* targetArgmax, //!< [num_draft_nodes + 1]
    int32_t minRun,              //!< the judge's min_run, 1 = none
    uint8_t* judgeable)          //!< [num_draft_nodes + 1] set to 1 at each such node
{
    visitRowRuns(path, maxPathLen, numValidNodes, draftTokens, targetArgmax, [&](int32_t node, int32_t run) {
        if (runReaches(run, minRun))
        {
            judgeable[node] = 1; // only 1s: threads marking the same node concurrently agree
        }
    });
}

} // namespace autojudge
