/*
 * libautojudge_host: the host core. Sequential loops around the accept_core.h functions that the
 * CUDA kernels call in parallel, so the host and the device run one rule.
 */
#include "autojudge/accept_core.h"
#include "autojudge/element_types.h"
#include "autojudge/host_api.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

namespace
{

using autojudge::ElementType;

float elementAt(void const* data, ElementType type, int64_t i)
{
    switch (type)
    {
    case ElementType::kFLOAT16: return autojudge::halfBitsToFloat(static_cast<uint16_t const*>(data)[i]);
    case ElementType::kBFLOAT16: return autojudge::bfloat16BitsToFloat(static_cast<uint16_t const*>(data)[i]);
    default: return static_cast<float const*>(data)[i];
    }
}

uint32_t elementBitsAt(void const* data, ElementType type, int64_t i)
{
    return type == ElementType::kFLOAT32 ? static_cast<uint32_t const*>(data)[i] : static_cast<uint16_t const*>(data)[i];
}

void setElementBits(void* data, ElementType type, int64_t i, uint32_t bits)
{
    if (type == ElementType::kFLOAT32)
    {
        static_cast<uint32_t*>(data)[i] = bits;
    }
    else
    {
        static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits);
    }
}

float dotRow(void const* hidden, ElementType type, int64_t row, int32_t size, float const* weight)
{
    float sum = 0.f;
    int64_t const base = row * size;
    for (int32_t i = 0; i < size; ++i)
    {
        sum += elementAt(hidden, type, base + i) * weight[i];
    }
    return sum;
}

//! What the host core reads of every row (the kernels' NodeRows).
struct HostRows
{
    void const* targetLogits; //!< [R, V]
    ElementType logitsType;
    int32_t vocabSize;
    void const* targetHidden; //!< [R, Ht]
    void const* draftHidden;  //!< [R, Hd] or nullptr when no block reads the draft
    ElementType hiddenType;
    autojudge::JudgeHeadView judge;
};

//! The accept_core.h RowScore of one row, built as the kernels build it: a RowScore per vocabulary
//! chunk (its elements in ascending order), merged in chunk order, and one dot product per hidden block.
autojudge::RowScore scoreRow(HostRows const& rows, int64_t row)
{
    bool const softmax = autojudge::hasBlock(rows.judge.layout, autojudge::FeatureBlock::kLS);
    autojudge::RowScore score = autojudge::emptyRowScore();
    int64_t const base = row * rows.vocabSize;
    for (int32_t begin = 0; begin < rows.vocabSize; begin += autojudge::kVocabChunk)
    {
        autojudge::RowScore chunk = autojudge::emptyRowScore();
        int32_t const end = rows.vocabSize - begin < autojudge::kVocabChunk ? rows.vocabSize : begin + autojudge::kVocabChunk;
        for (int32_t v = begin; v < end; ++v)
        {
            float const value = elementAt(rows.targetLogits, rows.logitsType, base + v);
            if (autojudge::argmaxPrefers(value, v, chunk.maxValue, chunk.argmax))
            {
                chunk.maxValue = value;
                chunk.argmax = v;
            }
            if (softmax)
            {
                chunk.softmax.add(value);
            }
        }
        autojudge::mergeRowScore(score, chunk);
    }
    autojudge::JudgeLayout const& layout = rows.judge.layout;
    for (int32_t code = 0; code < autojudge::kNumHiddenBlocks; ++code)
    {
        auto const block = static_cast<autojudge::FeatureBlock>(code);
        if (float const* weights = autojudge::blockWeights(rows.judge, block))
        {
            bool const draft = autojudge::blockReadsDraft(block);
            score.dot[code] = dotRow(draft ? rows.draftHidden : rows.targetHidden, rows.hiddenType, row,
                draft ? layout.draftHidden : layout.targetHidden, weights);
        }
    }
    return score;
}

//! target_logits[row, token], NaN for a token outside the vocabulary.
float logitAt(HostRows const& rows, int64_t row, int32_t token)
{
    return autojudge::tokenInVocab(token, rows.vocabSize)
        ? elementAt(rows.targetLogits, rows.logitsType, row * rows.vocabSize + token)
        : NAN;
}

//! judge_logit of `node` whose c1 and c2 are the nodes of `ahead` (+inf without a verdict). Nodes
//! count from the row `first`: scores[n] is the RowScore of row first + n, tokenOf(n) the draft token
//! node n carries.
template <typename TokenOf>
float judgeNode(HostRows const& rows, autojudge::RowScore const* scores, int64_t first, int32_t node,
    autojudge::Lookahead ahead, TokenOf tokenOf)
{
    if (!autojudge::hasVerdict(rows.judge.layout, ahead))
    {
        return INFINITY;
    }
    int32_t const child = ahead.child >= 0 ? ahead.child : node;
    int32_t const grandchild = ahead.grandchild >= 0 ? ahead.grandchild : node;
    int32_t const c1Token = ahead.child >= 0 ? tokenOf(ahead.child) : autojudge::kPad;
    int32_t const c2Token = ahead.grandchild >= 0 ? tokenOf(ahead.grandchild) : autojudge::kPad;
    return autojudge::nodeJudgeLogit(rows.judge, scores[node], scores[child], scores[grandchild],
        logitAt(rows, first + node, c1Token), c1Token, logitAt(rows, first + child, c2Token), c2Token);
}

//! HostRows from the C ABI's arguments; false when a size, dtype code, block list or pointer is invalid.
bool hostRows(int32_t numRows, int32_t vocabSize, int32_t logitsDtype, void const* targetLogits, int32_t hiddenDtype,
    void const* targetHidden, int32_t targetHiddenSize, void const* draftHidden, int32_t draftHiddenSize,
    int32_t numBlocks, int32_t const* featureBlocks, float const* judgeWeight, float judgeBias, HostRows& rows)
{
    autojudge::JudgeLayout layout;
    bool const valid = numRows >= 0 && vocabSize > 0 && autojudge::isElementType(logitsDtype)
        && autojudge::isElementType(hiddenDtype)
        && autojudge::makeJudgeLayout(featureBlocks, numBlocks, targetHiddenSize, draftHiddenSize, layout)
        && (numRows == 0 || (targetLogits && targetHidden && judgeWeight && (!autojudge::readsDraft(layout) || draftHidden)));
    if (valid)
    {
        rows = HostRows{targetLogits, static_cast<ElementType>(logitsDtype), vocabSize, targetHidden, draftHidden,
            static_cast<ElementType>(hiddenDtype), autojudge::JudgeHeadView{judgeWeight, judgeBias, layout}};
    }
    return valid;
}

//! The accept_core.h segmentation of a packed step, sequentially: false when the sequences' tokens do
//! not add up to num_tokens. A sequence with a misplaced row gets numDrafts = kRefusedSequence.
bool segmentStep(int32_t numRows, int32_t const* lastTokenIds, int32_t numTokens, int32_t numSequences,
    int32_t const* requestTypes, int32_t const* hostContextLengths, std::vector<autojudge::SequenceRows>& rows)
{
    std::vector<int32_t> tokenEnds(static_cast<size_t>(numSequences));
    if (!autojudge::sequenceTokenEnds(requestTypes, hostContextLengths, numSequences, numTokens, tokenEnds.data()))
    {
        return false;
    }
    rows.resize(static_cast<size_t>(numSequences));
    for (int32_t s = 0; s < numSequences; ++s)
    {
        int64_t const tokenStart = s > 0 ? tokenEnds[s - 1] : 0;
        autojudge::SequenceRows sequence = autojudge::sequenceRowRange(lastTokenIds, numRows, tokenStart, tokenEnds[s]);
        bool aligned = true;
        for (int32_t j = 0; j <= sequence.numDrafts && aligned; ++j)
        {
            aligned = autojudge::sequenceRowIsAligned(lastTokenIds[sequence.firstRow + j], j, sequence.numDrafts,
                tokenEnds[s]);
        }
        if (!aligned)
        {
            sequence.numDrafts = autojudge::kRefusedSequence;
        }
        rows[s] = sequence;
    }
    return true;
}

//! One request of a tree logits step: its rows, whether it is refused, and each node's parent.
struct TreeRequest
{
    int64_t firstRow;
    int32_t numNodes;             //!< draft_lens[b]
    bool refused;
    std::vector<int32_t> parents; //!< [numNodes + 1], kPad for the root and nodes on no path row
};

//! The accept_core.h segmentation of a tree logits step, sequentially: false when the rows do not add up.
bool segmentTreeStep(int32_t numRows, int32_t batchSize, int32_t numDraftNodes, int32_t const* draftTokens,
    int32_t const* draftLens, int32_t numPaths, int32_t maxPathLen, int32_t const* paths,
    std::vector<TreeRequest>& requests)
{
    if (!autojudge::treeStepRowsAddUp(draftLens, batchSize, numDraftNodes, numRows))
    {
        return false;
    }
    requests.clear();
    int64_t first = 0;
    for (int32_t b = 0; b < batchSize; ++b)
    {
        TreeRequest request{first, draftLens[b], false, std::vector<int32_t>(draftLens[b] + 1, autojudge::kPad)};
        for (int32_t p = 0; p < numPaths && !request.refused; ++p)
        {
            request.refused = !autojudge::recordTreeRow(paths + (int64_t{b} * numPaths + p) * maxPathLen, maxPathLen,
                request.numNodes, request.parents.data());
        }
        request.refused = request.refused
            || !autojudge::treeSiblingsDistinct(request.parents.data(), request.numNodes,
                draftTokens + int64_t{b} * numDraftNodes);
        first += request.numNodes + 1;
        requests.push_back(std::move(request));
    }
    return true;
}

} // namespace

extern "C"
{

int32_t autojudge_host_abi_version(void)
{
    return AUTOJUDGE_HOST_ABI_VERSION;
}

char const* autojudge_host_feature_block_name(int32_t code)
{
    return autojudge::featureBlockName(code);
}

int32_t autojudge_host_feature_block_window(int32_t code)
{
    return autojudge::featureBlockName(code) ? autojudge::blockWindowTokens(static_cast<autojudge::FeatureBlock>(code))
                                             : -1;
}

int32_t autojudge_host_judge_nodes(int32_t batch_size, int32_t num_draft_nodes, int32_t vocab_size,
    int32_t logits_dtype, void const* target_logits, int32_t hidden_dtype, void const* target_hidden,
    int32_t target_hidden_size, void const* draft_hidden, int32_t draft_hidden_size, int32_t num_blocks,
    int32_t const* feature_blocks, float const* judge_weight, float judge_bias, int32_t const* draft_tokens,
    int32_t num_paths, int32_t max_path_len, int32_t const* paths, int32_t const* draft_lens,
    int32_t const* greedy_child, int32_t min_run, int32_t* target_argmax, float* judge_logit)
{
    int64_t const numNodes = int64_t{num_draft_nodes} + 1;
    HostRows rows;
    bool const valid = batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0 && max_path_len >= 1 && min_run >= 1
        && batch_size * numNodes <= INT32_MAX
        && hostRows(static_cast<int32_t>(batch_size * numNodes), vocab_size, logits_dtype, target_logits, hidden_dtype,
            target_hidden, target_hidden_size, draft_hidden, draft_hidden_size, num_blocks, feature_blocks,
            judge_weight, judge_bias, rows)
        && (batch_size == 0
            || (draft_lens && target_argmax && judge_logit && (num_draft_nodes == 0 || draft_tokens)
                && (num_paths == 0 || paths) && (rows.judge.layout.windowTokens == 0 || greedy_child)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<autojudge::RowScore> scores(static_cast<size_t>(batch_size * numNodes));
    for (int64_t row = 0; row < batch_size * numNodes; ++row)
    {
        scores[row] = scoreRow(rows, row);
        target_argmax[row] = scores[row].argmax;
    }
    std::vector<uint8_t> judgeable(numNodes); // [N + 1]
    for (int64_t b = 0; b < batch_size; ++b)
    {
        int32_t const* draftTokens = draft_tokens + b * num_draft_nodes;
        int64_t const first = b * numNodes;
        int32_t const numValidNodes = autojudge::validNodeCount(draft_lens[b], num_draft_nodes);
        std::fill(judgeable.begin(), judgeable.end(), 0);
        for (int32_t p = 0; p < num_paths; ++p)
        {
            int32_t const* path = paths + (b * num_paths + p) * int64_t{max_path_len};
            if (autojudge::isPathRow(path))
            {
                autojudge::markJudgeable(path, max_path_len, numValidNodes, draftTokens, target_argmax + first, min_run,
                    judgeable.data());
            }
        }
        auto const tokenOf = [draftTokens](int32_t node) { return draftTokens[node - 1]; };
        for (int32_t n = 0; n < numNodes; ++n)
        {
            autojudge::Lookahead const ahead = rows.judge.layout.windowTokens > 0
                ? autojudge::treeLookahead(greedy_child + first, n, numValidNodes)
                : autojudge::Lookahead{autojudge::kPad, autojudge::kPad};
            judge_logit[first + n]
                = judgeable[n] ? judgeNode(rows, scores.data() + first, first, n, ahead, tokenOf) : INFINITY;
        }
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_accept_tree(int32_t batch_size, int32_t num_draft_nodes, int32_t num_paths, int32_t max_path_len,
    int32_t const* draft_tokens, int32_t const* target_argmax, int32_t const* paths, float const* judge_logit,
    float const* threshold, int32_t const* draft_lens, int32_t min_run, int32_t* accepted_tokens,
    int32_t* accepted_lens, int32_t* best_path, int32_t* judged_count)
{
    bool const valid = batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0 && max_path_len >= 1 && min_run >= 1
        && (batch_size == 0
            || (target_argmax && draft_lens && accepted_tokens && accepted_lens && best_path && judged_count
                && (num_draft_nodes == 0 || draft_tokens) && (num_paths == 0 || paths) && (!judge_logit || threshold)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    int64_t const numNodes = int64_t{num_draft_nodes} + 1;
    std::vector<uint8_t> relaxed(numNodes); // [N + 1] judgeable, then judged
    for (int64_t b = 0; b < batch_size; ++b)
    {
        int32_t const* draftTokens = draft_tokens + b * num_draft_nodes;
        int32_t const* targetArgmax = target_argmax + b * numNodes;
        int32_t const* sequencePaths = paths + b * num_paths * int64_t{max_path_len};
        int32_t const numValidNodes = autojudge::validNodeCount(draft_lens[b], num_draft_nodes);
        std::fill(relaxed.begin(), relaxed.end(), 0);
        for (int32_t p = 0; judge_logit && p < num_paths; ++p)
        {
            int32_t const* path = sequencePaths + int64_t{p} * max_path_len;
            if (autojudge::isPathRow(path))
            {
                autojudge::markJudgeable(path, max_path_len, numValidNodes, draftTokens, targetArgmax, min_run,
                    relaxed.data());
            }
        }
        double const cut = judge_logit ? autojudge::thresholdLogit(threshold[b]) : 0.0;
        for (int64_t n = 1; judge_logit && n < numNodes; ++n)
        {
            relaxed[n] = relaxed[n] && autojudge::judgeRelaxes(judge_logit[b * numNodes + n], cut);
        }
        autojudge::PathWalk best = autojudge::noPathYet();
        int32_t bestIndex = autojudge::kNoPathIndex;
        for (int32_t p = 0; p < num_paths; ++p)
        {
            int32_t const* path = sequencePaths + int64_t{p} * max_path_len;
            if (!autojudge::isPathRow(path))
            {
                continue;
            }
            autojudge::PathWalk const walk
                = autojudge::walkPath(path, max_path_len, numValidNodes, draftTokens, targetArgmax, relaxed.data());
            if (autojudge::pathPrefers(walk, p, best, bestIndex))
            {
                best = walk;
                bestIndex = p;
            }
        }
        bool const hasPath = bestIndex != autojudge::kNoPathIndex;
        int32_t const acceptedLen = hasPath ? best.acceptedLen : 0;
        int32_t const* bestRow = hasPath ? sequencePaths + int64_t{bestIndex} * max_path_len : nullptr;
        for (int32_t j = 0; j < max_path_len; ++j)
        {
            accepted_tokens[b * max_path_len + j]
                = autojudge::acceptedTokenAt(j, bestRow, acceptedLen, draftTokens, targetArgmax);
        }
        accepted_lens[b] = acceptedLen;
        best_path[b] = hasPath ? bestIndex : 0;
        judged_count[b] = hasPath ? best.judgedCount : 0;
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_segment_step(int32_t num_rows, int32_t const* last_token_ids, int32_t num_tokens,
    int32_t num_sequences, int32_t const* request_types, int32_t const* host_context_lengths, int32_t* first_row,
    int32_t* num_drafts)
{
    bool const valid = num_rows >= 0 && num_tokens >= 0 && num_sequences >= 0 && (num_rows == 0 || last_token_ids)
        && (num_sequences == 0 || (request_types && host_context_lengths && first_row && num_drafts));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<autojudge::SequenceRows> rows;
    if (!segmentStep(num_rows, last_token_ids, num_tokens, num_sequences, request_types, host_context_lengths, rows))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    for (int32_t s = 0; s < num_sequences; ++s)
    {
        first_row[s] = rows[s].firstRow;
        num_drafts[s] = rows[s].numDrafts;
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_judge_rows(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits, int32_t hidden_dtype, void const* target_hidden, int32_t target_hidden_size,
    void const* draft_hidden, int32_t draft_hidden_size, int32_t num_blocks, int32_t const* feature_blocks,
    float const* judge_weight, float judge_bias, int32_t num_tokens, int32_t const* input_ids,
    int32_t const* last_token_ids, int32_t num_sequences, int32_t const* request_types,
    int32_t const* host_context_lengths, int32_t min_run, int32_t* target_argmax, float* judge_logit)
{
    HostRows rows;
    bool const valid = num_tokens >= 0 && num_sequences >= 0 && min_run >= 1
        && hostRows(num_rows, vocab_size, logits_dtype, target_logits, hidden_dtype, target_hidden, target_hidden_size,
            draft_hidden, draft_hidden_size, num_blocks, feature_blocks, judge_weight, judge_bias, rows)
        && (num_rows == 0 || (last_token_ids && target_argmax && judge_logit)) && (num_tokens == 0 || input_ids)
        && (num_sequences == 0 || (request_types && host_context_lengths));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<autojudge::SequenceRows> sequences;
    if (!segmentStep(num_rows, last_token_ids, num_tokens, num_sequences, request_types, host_context_lengths,
            sequences))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    std::vector<autojudge::RowScore> scores(static_cast<size_t>(num_rows));
    for (int32_t row = 0; row < num_rows; ++row)
    {
        scores[row] = scoreRow(rows, row);
        target_argmax[row] = scores[row].argmax;
        judge_logit[row] = INFINITY;
    }
    // aligned rows lie in their sequence's positions, so every position read is in [0, T)
    auto const tokenOf = [&](int32_t row) { return input_ids[last_token_ids[row] - 1]; };
    auto const isExact = [&](int32_t row) { return tokenOf(row) == target_argmax[row - 1]; };
    for (autojudge::SequenceRows const& sequence : sequences)
    {
        int32_t const lastRow = sequence.firstRow + sequence.numDrafts;
        for (int32_t child = sequence.firstRow + 1; child <= lastRow; ++child)
        {
            int32_t const draftToken = tokenOf(child);
            if (autojudge::tokenInVocab(draftToken, vocab_size) && draftToken != target_argmax[child - 1]
                && autojudge::chainRunReaches(child, lastRow, min_run, isExact))
            {
                judge_logit[child]
                    = judgeNode(rows, scores.data(), 0, child, autojudge::chainLookahead(child, lastRow), tokenOf);
            }
        }
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_rewrite_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits, int32_t const* target_argmax, float const* judge_logit, int32_t num_tokens,
    int32_t const* input_ids, int32_t const* last_token_ids, int32_t num_sequences, int32_t const* request_types,
    int32_t const* host_context_lengths, float threshold, int32_t min_run, void* rewritten_logits)
{
    bool const valid = num_rows >= 0 && vocab_size > 0 && num_tokens >= 0 && num_sequences >= 0 && min_run >= 1
        && autojudge::isElementType(logits_dtype)
        && (num_rows == 0 || (target_logits && target_argmax && judge_logit && last_token_ids && rewritten_logits))
        && (num_tokens == 0 || input_ids) && (num_sequences == 0 || (request_types && host_context_lengths));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<autojudge::SequenceRows> rows;
    if (!segmentStep(num_rows, last_token_ids, num_tokens, num_sequences, request_types, host_context_lengths, rows))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    auto const type = static_cast<ElementType>(logits_dtype);
    std::memcpy(rewritten_logits, target_logits,
        static_cast<size_t>(num_rows) * static_cast<size_t>(vocab_size) * autojudge::elementBytes(type));
    double const cut = autojudge::thresholdLogit(threshold);
    autojudge::FloatFormat const format = autojudge::floatFormat(type);
    // aligned rows lie in their sequence's positions, so every position read is in [0, T)
    auto const isExact = [&](int32_t row) { return input_ids[last_token_ids[row] - 1] == target_argmax[row - 1]; };
    for (autojudge::SequenceRows const& sequence : rows)
    {
        int32_t const lastRow = sequence.firstRow + sequence.numDrafts;
        for (int32_t k = 1; k <= sequence.numDrafts; ++k)
        {
            int32_t const child = sequence.firstRow + k;
            int32_t const parent = child - 1;
            int64_t const position = int64_t{last_token_ids[child]} - 1; // in [0, T): aligned rows lie in (start, end]
            int32_t const draftToken = input_ids[position];
            int32_t const parentArgmax = target_argmax[parent];
            if (parentArgmax < 0 || parentArgmax >= vocab_size
                || !autojudge::judgeRewritesRow(draftToken, parentArgmax, vocab_size, judge_logit[child], cut)
                || !autojudge::chainRunReaches(child, lastRow, min_run, isExact))
            {
                continue;
            }
            uint32_t next;
            int64_t const parentBase = int64_t{parent} * vocab_size;
            if (autojudge::nextFiniteAbove(elementBitsAt(target_logits, type, parentBase + parentArgmax), format, next))
            {
                setElementBits(rewritten_logits, type, parentBase + draftToken, next);
            }
        }
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_segment_tree_step(int32_t num_rows, int32_t batch_size, int32_t num_draft_nodes,
    int32_t const* draft_tokens, int32_t const* draft_lens, int32_t num_paths, int32_t max_path_len,
    int32_t const* paths, int32_t* first_row, int32_t* refused)
{
    bool const valid = num_rows >= 0 && batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0 && max_path_len >= 1
        && (batch_size == 0
            || (draft_lens && first_row && refused && (num_draft_nodes == 0 || draft_tokens) && (num_paths == 0 || paths)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<TreeRequest> requests;
    if (!segmentTreeStep(num_rows, batch_size, num_draft_nodes, draft_tokens, draft_lens, num_paths, max_path_len,
            paths, requests))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    for (int32_t b = 0; b < batch_size; ++b)
    {
        first_row[b] = static_cast<int32_t>(requests[b].firstRow);
        refused[b] = requests[b].refused ? 1 : 0;
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_judge_tree_rows(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits, int32_t hidden_dtype, void const* target_hidden, int32_t target_hidden_size,
    void const* draft_hidden, int32_t draft_hidden_size, int32_t num_blocks, int32_t const* feature_blocks,
    float const* judge_weight, float judge_bias, int32_t batch_size, int32_t num_draft_nodes,
    int32_t const* draft_tokens, int32_t const* draft_lens, int32_t num_paths, int32_t max_path_len,
    int32_t const* paths, int32_t const* greedy_child, int32_t min_run, int32_t* target_argmax, float* judge_logit)
{
    HostRows rows;
    bool const valid = batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0 && max_path_len >= 1 && min_run >= 1
        && hostRows(num_rows, vocab_size, logits_dtype, target_logits, hidden_dtype, target_hidden, target_hidden_size,
            draft_hidden, draft_hidden_size, num_blocks, feature_blocks, judge_weight, judge_bias, rows)
        && !autojudge::readsDraft(rows.judge.layout)
        && (num_rows == 0 || (target_argmax && judge_logit))
        && (batch_size == 0
            || (draft_lens && (num_draft_nodes == 0 || draft_tokens) && (num_paths == 0 || paths)
                && (rows.judge.layout.windowTokens == 0 || greedy_child)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<TreeRequest> requests;
    if (!segmentTreeStep(num_rows, batch_size, num_draft_nodes, draft_tokens, draft_lens, num_paths, max_path_len,
            paths, requests))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    std::vector<autojudge::RowScore> scores(static_cast<size_t>(num_rows));
    for (int32_t row = 0; row < num_rows; ++row)
    {
        scores[row] = scoreRow(rows, row);
        target_argmax[row] = scores[row].argmax;
        judge_logit[row] = INFINITY;
    }
    for (int32_t b = 0; b < batch_size; ++b)
    {
        TreeRequest const& request = requests[b];
        if (request.refused)
        {
            continue;
        }
        int32_t const* draftTokens = draft_tokens + int64_t{b} * num_draft_nodes;
        int32_t const* argmax = target_argmax + request.firstRow;
        std::vector<uint8_t> judgeable(request.numNodes + 1, 0); // [draft_lens[b] + 1]
        for (int32_t p = 0; p < num_paths; ++p)
        {
            int32_t const* path = paths + (int64_t{b} * num_paths + p) * max_path_len;
            if (autojudge::isPathRow(path))
            {
                autojudge::markJudgeable(path, max_path_len, request.numNodes, draftTokens, argmax, min_run,
                    judgeable.data());
            }
        }
        auto const tokenOf = [draftTokens](int32_t node) { return draftTokens[node - 1]; };
        int32_t const* greedyChild = greedy_child ? greedy_child + int64_t{b} * (num_draft_nodes + 1) : nullptr;
        for (int32_t n = 1; n <= request.numNodes; ++n)
        {
            autojudge::Lookahead const ahead = greedyChild ? autojudge::treeLookahead(greedyChild, n, request.numNodes)
                                                           : autojudge::Lookahead{autojudge::kPad, autojudge::kPad};
            if (judgeable[n])
            {
                judge_logit[request.firstRow + n]
                    = judgeNode(rows, scores.data() + request.firstRow, request.firstRow, n, ahead, tokenOf);
            }
        }
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_rewrite_tree_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits, int32_t const* target_argmax, float const* judge_logit, int32_t batch_size,
    int32_t num_draft_nodes, int32_t const* draft_tokens, int32_t const* draft_lens, int32_t num_paths,
    int32_t max_path_len, int32_t const* paths, float const* threshold, int32_t min_run, void* rewritten_logits)
{
    bool const valid = num_rows >= 0 && vocab_size > 0 && batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0
        && max_path_len >= 1 && min_run >= 1 && autojudge::isElementType(logits_dtype)
        && (num_rows == 0 || (target_logits && target_argmax && judge_logit && rewritten_logits))
        && (batch_size == 0
            || (draft_lens && threshold && (num_draft_nodes == 0 || draft_tokens) && (num_paths == 0 || paths)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    std::vector<TreeRequest> requests;
    if (!segmentTreeStep(num_rows, batch_size, num_draft_nodes, draft_tokens, draft_lens, num_paths, max_path_len,
            paths, requests))
    {
        return AUTOJUDGE_HOST_STEP_MISMATCH;
    }
    auto const type = static_cast<ElementType>(logits_dtype);
    std::memcpy(rewritten_logits, target_logits,
        static_cast<size_t>(num_rows) * static_cast<size_t>(vocab_size) * autojudge::elementBytes(type));
    autojudge::FloatFormat const format = autojudge::floatFormat(type);
    for (int32_t b = 0; b < batch_size; ++b)
    {
        TreeRequest const& request = requests[b];
        if (request.refused)
        {
            continue;
        }
        int32_t const* draftTokens = draft_tokens + int64_t{b} * num_draft_nodes;
        int32_t const* argmax = target_argmax + request.firstRow;
        double const cut = autojudge::thresholdLogit(threshold[b]);
        int32_t const* requestPaths = paths + int64_t{b} * num_paths * max_path_len;
        std::vector<uint8_t> judged(request.numNodes + 1, 0); // [draft_lens[b] + 1] judgeable, then judged
        for (int32_t p = 0; p < num_paths; ++p)
        {
            int32_t const* path = requestPaths + int64_t{p} * max_path_len;
            if (autojudge::isPathRow(path))
            {
                autojudge::markJudgeable(path, max_path_len, request.numNodes, draftTokens, argmax, min_run,
                    judged.data());
            }
        }
        std::vector<uint32_t> above(request.numNodes + 1, 0); // the parent row's next value above its maximum
        for (int32_t n = 1; n <= request.numNodes; ++n)
        {
            int32_t const parent = request.parents[n];
            if (!judged[n] || parent == autojudge::kPad || !autojudge::tokenInVocab(argmax[parent], vocab_size))
            {
                judged[n] = 0;
                continue;
            }
            int64_t const parentRow = request.firstRow + parent;
            bool const rewritable = autojudge::nextFiniteAbove(
                elementBitsAt(target_logits, type, parentRow * vocab_size + argmax[parent]), format, above[n]);
            judged[n] = autojudge::treeNodeJudged(draftTokens[n - 1], argmax[parent], vocab_size,
                judge_logit[request.firstRow + n], cut, rewritable);
        }
        autojudge::PathWalk best = autojudge::noPathYet();
        int32_t bestIndex = autojudge::kNoPathIndex;
        for (int32_t p = 0; p < num_paths; ++p)
        {
            int32_t const* path = requestPaths + int64_t{p} * max_path_len;
            if (autojudge::isPathRow(path))
            {
                autojudge::PathWalk const walk
                    = autojudge::walkPath(path, max_path_len, request.numNodes, draftTokens, argmax, judged.data());
                if (autojudge::pathPrefers(walk, p, best, bestIndex))
                {
                    best = walk;
                    bestIndex = p;
                }
            }
        }
        for (int32_t j = 1; bestIndex != autojudge::kNoPathIndex && j <= best.acceptedLen; ++j)
        {
            int32_t const* bestRow = requestPaths + int64_t{bestIndex} * max_path_len;
            int32_t const node = bestRow[j];
            if (judged[node])
            {
                setElementBits(rewritten_logits, type,
                    (request.firstRow + bestRow[j - 1]) * vocab_size + draftTokens[node - 1], above[node]);
            }
        }
    }
    return AUTOJUDGE_HOST_OK;
}

} // extern "C"
