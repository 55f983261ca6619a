/*
 * Host launchers of the CUDA kernels (FlashInfer style: plain functions that take a stream and
 * return cudaError_t). The TensorRT plugin and the torch extension both call these.
 *
 * Both modes run the same two kernels:
 *   1. scoreNodes: one block per (row, vocabulary chunk): the chunk's RowScore (accept_core.h): the
 *      partial argmax of the target logits, the partial softmax statistics (judges with LS) and
 *      the partial dot products of the row's hidden states with each hidden block's weights over a
 *      slice of the features, into the workspace. In logits mode it also copies the row to the output.
 *   2. acceptTree (accept mode), rewriteLogits (logits mode) or rewriteTreeLogits (tree logits mode): one
 *      block per sequence (per request in tree logits mode): merges the
 *      partials of its rows into RowScores (target argmax), scores the mismatching nodes whose exact
 *      run reaches the judge's minimum run (the
 *      judge logit of accept_core.h nodeJudgeLogit from the rows of the node, its greedy child and
 *      grandchild), then walks the paths and writes the accepted tokens, or (logits mode) segments
 *      the packed step with the accept_core.h rule and rewrites the rows whose draft child the
 *      judge accepts, or (tree logits mode) walks the request's paths and rewrites the parent rows of
 *      the judged nodes on its best path.
 * Shapes use B = batch_size, N = num_draft_nodes, P = num_paths, D + 1 = max_path_len.
 */
#pragma once

#include "autojudge/accept_core.h"
#include "autojudge/element_types.h"

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace autojudge
{

//! Largest N + 1 (nodes per sequence, root included) the acceptTree kernel holds in shared memory.
constexpr int32_t kMaxTreeNodes = 2048;

//! What scoreNodes reads: one row per node (accept mode) or per gathered logits row (logits mode).
struct NodeRows
{
    void const* targetLogits; //!< [num_rows, vocab_size] of logitsType
    void const* targetHidden; //!< [num_rows, target_hidden] of hiddenType
    void const* draftHidden;  //!< [num_rows, draft_hidden] of hiddenType; nullptr unless a block reads the draft
    ElementType logitsType;
    ElementType hiddenType;
    int32_t numRows;
    int32_t vocabSize;
    JudgeHeadView judge;      //!< weight in device memory
};

struct AcceptTreeArgs
{
    NodeRows rows;               //!< num_rows = B * (N + 1), node n of sequence b at row b * (N + 1) + n
    int32_t const* draftTokens;  //!< [B, N]
    int32_t const* draftLens;    //!< [B]
    int32_t const* paths;        //!< [B, P, D + 1]
    float const* threshold;      //!< [B]
    int32_t const* greedyChild;  //!< [B, N + 1] rank-0 child of each node, -1 none; nullptr unless the judge looks ahead
    int32_t batchSize;           //!< B
    int32_t numDraftNodes;       //!< N
    int32_t numPaths;            //!< P
    int32_t maxPathLen;          //!< D + 1
    int32_t minRun;              //!< the judge's minimum run (accept_core.h), 1 = none
    int32_t* acceptedTokens;     //!< [B, D + 1] out
    int32_t* acceptedLens;       //!< [B] out
    int32_t* bestPath;           //!< [B] out
    int32_t* judgedCount;        //!< [B] out
};

struct RewriteLogitsArgs
{
    NodeRows rows;                  //!< num_rows = L gathered logits rows, in packed sequence order
    int32_t const* inputIds;        //!< [T] the step's packed input token ids
    int32_t numTokens;              //!< T
    int32_t const* lastTokenIds;    //!< [L] 1-based position in inputIds of each row's input token
    int32_t const* tokenEnds;       //!< [S] device copy of sequenceTokenEnds (host_request_types,
                                    //!< host_context_lengths): sequence s owns (tokenEnds[s-1], tokenEnds[s]]
    int32_t numSequences;           //!< S
    float threshold;                //!< probability threshold of the judge
    int32_t minRun;                 //!< the judge's minimum run (accept_core.h), 1 = none
    void* rewrittenLogits;          //!< [L, vocab_size] out, of logitsType
};

struct RewriteTreeLogitsArgs
{
    NodeRows rows;               //!< num_rows = L: request b's draft_lens[b] + 1 rows after those of the requests before it
    int32_t const* draftTokens;  //!< [B, N]
    int32_t const* draftLens;    //!< [B] (device memory; a step whose rows do not add up is copied unchanged)
    int32_t const* paths;        //!< [B, P, D + 1]
    float const* threshold;      //!< [B] per-request judge threshold
    int32_t const* greedyChild;  //!< [B, N + 1] rank-0 child of each node, -1 none; nullptr unless the judge looks ahead
    int32_t batchSize;           //!< B
    int32_t numDraftNodes;       //!< N
    int32_t numPaths;            //!< P
    int32_t maxPathLen;          //!< D + 1
    int32_t minRun;              //!< the judge's minimum run (accept_core.h), 1 = none
    void* rewrittenLogits;       //!< [L, vocab_size] out, of logitsType
};

//! Vocabulary chunks per row (blocks of scoreNodes per row).
inline int32_t vocabSplits(int64_t vocabSize)
{
    return vocabSize <= 0 ? 1 : static_cast<int32_t>((vocabSize + kVocabChunk - 1) / kVocabChunk);
}

//! Bytes of workspace both launchers need for num_rows rows of vocab_size logits: one RowScore
//! (40 bytes) per row and vocabulary chunk.
inline size_t acceptWorkspaceBytes(int64_t numRows, int64_t vocabSize)
{
    return static_cast<size_t>(numRows < 0 ? 0 : numRows) * static_cast<size_t>(vocabSplits(vocabSize))
        * sizeof(RowScore);
}

//! Logits mode: bytes from the start of the workspace to the token ends [S] (after the partials,
//! 16-byte aligned), and the whole workspace for num_rows rows and num_sequences sequences.
inline size_t tokenEndsWorkspaceOffset(int64_t numRows, int64_t vocabSize)
{
    return (acceptWorkspaceBytes(numRows, vocabSize) + 15) / 16 * 16;
}
inline size_t rewriteWorkspaceBytes(int64_t numRows, int64_t vocabSize, int64_t numSequences)
{
    return tokenEndsWorkspaceOffset(numRows, vocabSize)
        + static_cast<size_t>(numSequences < 0 ? 0 : numSequences) * sizeof(int32_t);
}

//! Accept mode. Returns cudaErrorInvalidValue for inconsistent sizes (minRun < 1 among them) or a workspace too
//! small.
cudaError_t launchAcceptTree(AcceptTreeArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream);

//! Logits mode: args.tokenEnds must already hold the step's token ends on the device (the caller copies
//! sequenceTokenEnds there, e.g. at tokenEndsWorkspaceOffset). Returns cudaErrorInvalidValue for
//! inconsistent sizes (minRun < 1 among them) or a workspace too small for the partials.
cudaError_t launchRewriteLogits(
    RewriteLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream);

//! Tree logits mode (TensorRT-LLM's EAGLE engine step): kernel 1 copies every row to the output, kernel 2
//! (one block per request) checks the step's rows add up (draft_lens is in device memory), refuses a request
//! whose paths are not one tree or whose siblings share a token, and rewrites the parent rows of the judged
//! nodes on its best accepted path. Returns cudaErrorInvalidValue for inconsistent sizes (minRun < 1 among
//! them), a judge that reads the draft, or a workspace too small for the partials.
cudaError_t launchRewriteTreeLogits(
    RewriteTreeLogitsArgs const& args, void* workspace, size_t workspaceBytes, cudaStream_t stream);

} // namespace autojudge
