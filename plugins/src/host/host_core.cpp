/*
 * libautojudge_host: the host core. Sequential loops around the accept_core.h functions that the
 * CUDA kernels call in parallel, so the host and the device run one rule.
 */
#include "autojudge/accept_core.h"
#include "autojudge/element_types.h"
#include "autojudge/host_api.h"

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

} // namespace

extern "C"
{

int32_t autojudge_host_abi_version(void)
{
    return AUTOJUDGE_HOST_ABI_VERSION;
}

int32_t autojudge_host_score_rows(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype, void const* target_logits,
    int32_t hidden_dtype, void const* target_hidden, int32_t target_hidden_size, void const* draft_hidden,
    int32_t draft_hidden_size, int32_t feature_setup, float const* judge_weight, float judge_bias,
    int32_t* target_argmax, float* judge_logit)
{
    bool const isDdDt = feature_setup == static_cast<int32_t>(autojudge::FeatureSetup::kDD_DT);
    bool const valid = num_rows >= 0 && vocab_size > 0 && autojudge::isElementType(logits_dtype)
        && autojudge::isElementType(hidden_dtype) && target_hidden_size > 0
        && (isDdDt ? draft_hidden_size > 0 : feature_setup == static_cast<int32_t>(autojudge::FeatureSetup::kDT))
        && (num_rows == 0
            || (target_logits && target_hidden && judge_weight && target_argmax && judge_logit
                && (!isDdDt || draft_hidden)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    auto const logitsType = static_cast<ElementType>(logits_dtype);
    auto const hiddenType = static_cast<ElementType>(hidden_dtype);
    int32_t const draftSize = isDdDt ? draft_hidden_size : 0;
    for (int64_t row = 0; row < num_rows; ++row)
    {
        float bestValue = -INFINITY;
        int32_t bestIndex = 0x7fffffff;
        int64_t const base = row * vocab_size;
        for (int32_t v = 0; v < vocab_size; ++v)
        {
            float const value = elementAt(target_logits, logitsType, base + v);
            if (autojudge::argmaxPrefers(value, v, bestValue, bestIndex))
            {
                bestValue = value;
                bestIndex = v;
            }
        }
        target_argmax[row] = bestIndex;
        float dot = isDdDt ? dotRow(draft_hidden, hiddenType, row, draftSize, judge_weight) : 0.f;
        dot += dotRow(target_hidden, hiddenType, row, target_hidden_size, judge_weight + draftSize);
        judge_logit[row] = judge_bias + dot;
    }
    return AUTOJUDGE_HOST_OK;
}

int32_t autojudge_host_accept_tree(int32_t batch_size, int32_t num_draft_nodes, int32_t num_paths, int32_t max_path_len,
    int32_t const* draft_tokens, int32_t const* target_argmax, int32_t const* paths, float const* judge_logit,
    float const* threshold, int32_t const* draft_lens, int32_t* accepted_tokens, int32_t* accepted_lens,
    int32_t* best_path, int32_t* judged_count)
{
    bool const valid = batch_size >= 0 && num_draft_nodes >= 0 && num_paths >= 0 && max_path_len >= 1
        && (batch_size == 0
            || (target_argmax && draft_lens && accepted_tokens && accepted_lens && best_path && judged_count
                && (num_draft_nodes == 0 || draft_tokens) && (num_paths == 0 || paths) && (!judge_logit || threshold)));
    if (!valid)
    {
        return AUTOJUDGE_HOST_INVALID_ARGUMENT;
    }
    int64_t const numNodes = int64_t{num_draft_nodes} + 1;
    std::vector<uint8_t> relaxed(numNodes);
    for (int64_t b = 0; b < batch_size; ++b)
    {
        int32_t const* draftTokens = draft_tokens + b * num_draft_nodes;
        int32_t const* targetArgmax = target_argmax + b * numNodes;
        int32_t const* sequencePaths = paths + b * num_paths * int64_t{max_path_len};
        double const cut = judge_logit ? autojudge::thresholdLogit(threshold[b]) : 0.0;
        for (int64_t n = 0; n < numNodes; ++n)
        {
            relaxed[n] = judge_logit && n > 0 && autojudge::judgeRelaxes(judge_logit[b * numNodes + n], cut);
        }
        int32_t const numValidNodes = autojudge::validNodeCount(draft_lens[b], num_draft_nodes);
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

int32_t autojudge_host_rewrite_logits(int32_t num_rows, int32_t vocab_size, int32_t logits_dtype,
    void const* target_logits, int32_t const* target_argmax, float const* judge_logit, int32_t num_tokens,
    int32_t const* input_ids, int32_t const* last_token_ids, int32_t num_sequences, int32_t const* request_types,
    int32_t const* host_context_lengths, float threshold, void* rewritten_logits)
{
    bool const valid = num_rows >= 0 && vocab_size > 0 && num_tokens >= 0 && num_sequences >= 0
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
    for (autojudge::SequenceRows const& sequence : rows)
    {
        for (int32_t k = 1; k <= sequence.numDrafts; ++k)
        {
            int32_t const child = sequence.firstRow + k;
            int32_t const parent = child - 1;
            int64_t const position = int64_t{last_token_ids[child]} - 1; // in [0, T): aligned rows lie in (start, end]
            int32_t const draftToken = input_ids[position];
            int32_t const parentArgmax = target_argmax[parent];
            if (parentArgmax < 0 || parentArgmax >= vocab_size
                || !autojudge::judgeRewritesRow(draftToken, parentArgmax, vocab_size, judge_logit[child], cut))
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

} // extern "C"
