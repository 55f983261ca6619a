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
 *   judged         a mismatching node whose judge logit is finite and < logit(threshold).
 *   accepted       exact or judged; nodes past draft_lens are never accepted.
 *   best path      longest accepted prefix; ties: fewer judged nodes, then the lower path index.
 *   correction     targetArgmax at the last accepted node of the best path (the bonus token when
 *   token          the whole path was accepted); emitted after the accepted draft tokens.
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

//! Which hidden states the judge reads at a node (PAPER.md section 2).
enum class FeatureSetup : int32_t
{
    kDT = 0,    //!< the target's hidden state: features [target_hidden]
    kDD_DT = 1, //!< the draft's, then the target's: features [draft_hidden + target_hidden]
};

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

//! The judge lets a mismatching node through: a finite judge logit below logit(threshold).
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

//! Longest accepted prefix of one path row. A node index outside [1, numValidNodes] ends the
//! path: -1 padding, a node past draft_lens, or a malformed index (never read out of bounds).
AUTOJUDGE_HD PathWalk walkPath(int32_t const* path, //!< [max_path_len] node indices, path[0] == 0
    int32_t maxPathLen,                               //!< D + 1
    int32_t numValidNodes,                            //!< validNodeCount(draft_lens[b], N)
    int32_t const* draftTokens,                       //!< [num_draft_nodes] token of node n at n - 1
    int32_t const* targetArgmax,                      //!< [num_draft_nodes + 1]
    uint8_t const* relaxed)                           //!< [num_draft_nodes + 1] judge lets node n through
{
    PathWalk walk{0, 0};
    int32_t parent = 0;
    for (int32_t j = 1; j < maxPathLen; ++j)
    {
        int32_t const node = path[j];
        if (node < 1 || node > numValidNodes)
        {
            break;
        }
        if (draftTokens[node - 1] != targetArgmax[parent])
        {
            if (!relaxed[node])
            {
                break;
            }
            ++walk.judgedCount;
        }
        ++walk.acceptedLen;
        parent = node;
    }
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
//! mismatching in-vocabulary draft token whose judge logit passes the threshold is rewritten.
AUTOJUDGE_HD bool judgeRewritesRow(int32_t draftToken, int32_t parentArgmax, int32_t vocabSize, float judgeLogit,
    double cut)
{
    return draftToken >= 0 && draftToken < vocabSize && draftToken != parentArgmax
        && judgeRelaxes(judgeLogit, cut);
}

} // namespace autojudge
