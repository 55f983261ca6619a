/*
 * CUDA binding of torch.ops.autojudge (trtllm_autojudge/ops/torch_ops.py): checks with the shape of
 * each argument, then one launcher call on the current CUDA stream (so it is CUDA-graph safe).
 * Built on a GPU host by trtllm_autojudge/ops/cuda_extension.py with torch.utils.cpp_extension.
 * Output tensors are optional arguments: given ones are written in place (tests/gpu poisons them).
 */
#include "autojudge/accept_launch.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace
{

using at::Tensor;

autojudge::ElementType elementType(Tensor const& t, char const* name)
{
    switch (t.scalar_type())
    {
    case at::kFloat: return autojudge::ElementType::kFLOAT32;
    case at::kHalf: return autojudge::ElementType::kFLOAT16;
    case at::kBFloat16: return autojudge::ElementType::kBFLOAT16;
    default: TORCH_CHECK(false, name, " must be float32, float16 or bfloat16, got ", t.scalar_type());
    }
}

//! `t` is a contiguous CUDA tensor on `device` with the given type and sizes (-1: any extent).
void check(Tensor const& t, char const* name, char const* shape, at::Device device, std::optional<at::ScalarType> type,
    std::vector<int64_t> const& sizes)
{
    TORCH_CHECK(t.device() == device, name, " must be on ", device, ", got ", t.device());
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
    TORCH_CHECK(!type || t.scalar_type() == *type, name, " must be ", *type, ", got ", t.scalar_type());
    bool same = t.dim() == static_cast<int64_t>(sizes.size());
    for (size_t i = 0; same && i < sizes.size(); ++i)
    {
        same = sizes[i] < 0 || t.size(i) == sizes[i];
    }
    TORCH_CHECK(same, name, " must be ", shape, ", got ", t.sizes());
}

Tensor outputOr(std::optional<Tensor> const& given, char const* name, char const* shape, at::Device device,
    at::ScalarType type, std::vector<int64_t> const& sizes)
{
    if (given)
    {
        check(*given, name, shape, device, type, sizes);
        return *given;
    }
    return at::empty(sizes, at::TensorOptions().device(device).dtype(type));
}

//! The rows, hidden states and judge head shared by both modes.
autojudge::NodeRows nodeRows(Tensor const& targetLogits, Tensor const& targetHidden,
    std::optional<Tensor> const& draftHidden, Tensor const& judgeWeight, double judgeBias,
    std::vector<int64_t> const& featureBlocks) // [K] FeatureBlock codes, weight order
{
    at::Device const device = targetLogits.device();
    TORCH_CHECK(targetLogits.is_cuda(), "target_logits must be a CUDA tensor (CPU tensors run the host core)");
    check(targetLogits, "target_logits", "[rows, V]", device, std::nullopt, {-1, -1});
    int64_t const rows = targetLogits.size(0);
    TORCH_CHECK(targetLogits.size(1) >= 1, "target_logits needs a vocabulary of at least one entry");
    check(targetHidden, "target_hidden", "[rows, Ht]", device, std::nullopt, {rows, -1});
    int64_t const draftSize = draftHidden ? draftHidden->size(-1) : 0;
    if (draftHidden)
    {
        check(*draftHidden, "draft_hidden", "[rows, Hd]", device, targetHidden.scalar_type(), {rows, -1});
    }
    TORCH_CHECK(rows <= INT32_MAX && targetLogits.size(1) <= INT32_MAX && targetHidden.size(1) <= INT32_MAX
            && draftSize <= INT32_MAX,
        "extents must fit int32");
    std::vector<int32_t> const blocks(featureBlocks.begin(), featureBlocks.end());
    autojudge::JudgeLayout layout;
    TORCH_CHECK(autojudge::makeJudgeLayout(blocks.data(), static_cast<int32_t>(blocks.size()),
                    static_cast<int32_t>(targetHidden.size(1)), static_cast<int32_t>(draftSize), layout),
        "feature_blocks must be distinct block codes (0 DT, 1 DD, 2 DT1, 3 DT2, 4 DD1, 5 LS), with draft_hidden "
        "given when one reads the draft");
    TORCH_CHECK(autojudge::readsDraft(layout) == draftHidden.has_value(),
        "give draft_hidden exactly when a block reads the draft (DD, DD1)");
    check(judgeWeight, "judge_weight", "[F] (the blocks' features, in their order)", device, at::kFloat,
        {layout.featureSize});
    autojudge::NodeRows nodes{};
    nodes.targetLogits = targetLogits.data_ptr();
    nodes.targetHidden = targetHidden.data_ptr();
    nodes.draftHidden = draftHidden ? draftHidden->data_ptr() : nullptr;
    nodes.logitsType = elementType(targetLogits, "target_logits");
    nodes.hiddenType = elementType(targetHidden, "target_hidden");
    nodes.numRows = static_cast<int32_t>(rows);
    nodes.vocabSize = static_cast<int32_t>(targetLogits.size(1));
    nodes.judge = autojudge::JudgeHeadView{judgeWeight.data_ptr<float>(), static_cast<float>(judgeBias), layout};
    return nodes;
}

Tensor workspace(autojudge::NodeRows const& nodes, at::Device device)
{
    size_t const bytes = autojudge::acceptWorkspaceBytes(nodes.numRows, nodes.vocabSize);
    return at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().device(device).dtype(at::kByte));
}

//! The tree inputs of accept mode and tree logits mode, checked: draft_tokens [B, N], draft_lens [B],
//! paths [B, P, D + 1], threshold [B], and greedy_child [B, N + 1] exactly for a judge that looks ahead.
//! Returns {B, N}.
std::pair<int64_t, int64_t> checkTreeInputs(autojudge::NodeRows const& nodes, Tensor const& draftTokens,
    Tensor const& draftLens, Tensor const& paths, Tensor const& threshold, std::optional<Tensor> const& greedyChild,
    at::Device device)
{
    check(draftTokens, "draft_tokens", "[B, N]", device, at::kInt, {-1, -1});
    int64_t const batch = draftTokens.size(0);
    int64_t const numDraftNodes = draftTokens.size(1);
    TORCH_CHECK(numDraftNodes + 1 <= autojudge::kMaxTreeNodes, "at most ", autojudge::kMaxTreeNodes - 1,
        " draft nodes per sequence, got ", numDraftNodes);
    check(draftLens, "draft_lens", "[B]", device, at::kInt, {batch});
    check(paths, "paths", "[B, P, D + 1]", device, at::kInt, {batch, -1, -1});
    TORCH_CHECK(paths.size(2) >= 1 && paths.size(1) <= INT32_MAX, "paths must be [B, P, D + 1] with D + 1 >= 1");
    check(threshold, "threshold", "[B]", device, at::kFloat, {batch});
    TORCH_CHECK((nodes.judge.layout.windowTokens > 0) == greedyChild.has_value(),
        "give greedy_child [B, N + 1] exactly when a block looks ahead (DT1, DT2, DD1, LS)");
    if (greedyChild)
    {
        check(*greedyChild, "greedy_child", "[B, N + 1]", device, at::kInt, {batch, numDraftNodes + 1});
    }
    return {batch, numDraftNodes};
}

//! The launch arguments both tree ops share (AcceptTreeArgs, RewriteTreeLogitsArgs), from inputs that
//! checkTreeInputs accepted.
template <typename Args>
Args treeArgs(autojudge::NodeRows const& nodes, Tensor const& draftTokens, Tensor const& draftLens,
    Tensor const& paths, Tensor const& threshold, std::optional<Tensor> const& greedyChild, int32_t minRun)
{
    Args args{};
    args.rows = nodes;
    args.draftTokens = draftTokens.data_ptr<int32_t>();
    args.draftLens = draftLens.data_ptr<int32_t>();
    args.paths = paths.data_ptr<int32_t>();
    args.threshold = threshold.data_ptr<float>();
    args.greedyChild = greedyChild ? greedyChild->data_ptr<int32_t>() : nullptr;
    args.batchSize = static_cast<int32_t>(draftTokens.size(0));
    args.numDraftNodes = static_cast<int32_t>(draftTokens.size(1));
    args.numPaths = static_cast<int32_t>(paths.size(1));
    args.maxPathLen = static_cast<int32_t>(paths.size(2));
    args.minRun = minRun;
    return args;
}

//! The judge's minimum run (accept_core.h), checked: 1 = none.
int32_t checkedMinRun(int64_t minRun)
{
    TORCH_CHECK(minRun >= 1 && minRun <= INT32_MAX, "min_run must be >= 1 (the judge's minimum run, 1 = none), got ",
        minRun);
    return static_cast<int32_t>(minRun);
}

} // namespace

//! Accept mode. Returns accepted_tokens [B, D+1], accepted_lens [B], best_path [B], judged_count [B].
std::vector<Tensor> accept(Tensor targetLogits, // [B * (N + 1), V] fp32/fp16/bf16
    Tensor targetHidden,                         // [B * (N + 1), Ht]
    Tensor draftTokens,                          // [B, N] int32
    Tensor draftLens,                            // [B] int32
    Tensor paths,                                // [B, P, D + 1] int32
    Tensor threshold,                            // [B] float32
    Tensor judgeWeight,                          // [F] float32
    double judgeBias, std::vector<int64_t> featureBlocks, // [K] FeatureBlock codes
    int64_t minRun,                              // the judge's minimum run, 1 = none
    std::optional<Tensor> draftHidden,           // [B * (N + 1), Hd] (blocks DD, DD1)
    std::optional<Tensor> greedyChild,           // [B, N + 1] int32 (blocks DT1, DT2, DD1, LS)
    std::optional<Tensor> acceptedTokens, std::optional<Tensor> acceptedLens, std::optional<Tensor> bestPath,
    std::optional<Tensor> judgedCount)
{
    c10::cuda::CUDAGuard guard(targetLogits.device());
    autojudge::NodeRows const nodes
        = nodeRows(targetLogits, targetHidden, draftHidden, judgeWeight, judgeBias, featureBlocks);
    at::Device const device = targetLogits.device();
    auto const [batch, numDraftNodes] = checkTreeInputs(nodes, draftTokens, draftLens, paths, threshold, greedyChild,
        device);
    TORCH_CHECK(nodes.numRows == batch * (numDraftNodes + 1), "target_logits must have B * (N + 1) = ",
        batch * (numDraftNodes + 1), " rows for draft_tokens [B, N] = ", draftTokens.sizes(), ", got ", nodes.numRows);
    int64_t const maxPathLen = paths.size(2);

    auto args = treeArgs<autojudge::AcceptTreeArgs>(nodes, draftTokens, draftLens, paths, threshold, greedyChild,
        checkedMinRun(minRun));
    Tensor tokens = outputOr(acceptedTokens, "accepted_tokens", "[B, D + 1]", device, at::kInt, {batch, maxPathLen});
    Tensor lens = outputOr(acceptedLens, "accepted_lens", "[B]", device, at::kInt, {batch});
    Tensor best = outputOr(bestPath, "best_path", "[B]", device, at::kInt, {batch});
    Tensor judged = outputOr(judgedCount, "judged_count", "[B]", device, at::kInt, {batch});
    args.acceptedTokens = tokens.data_ptr<int32_t>();
    args.acceptedLens = lens.data_ptr<int32_t>();
    args.bestPath = best.data_ptr<int32_t>();
    args.judgedCount = judged.data_ptr<int32_t>();
    Tensor scratch = workspace(nodes, device);
    cudaError_t const status = autojudge::launchAcceptTree(args, scratch.data_ptr(), static_cast<size_t>(scratch.numel()),
        c10::cuda::getCurrentCUDAStream(device.index()));
    TORCH_CHECK(status == cudaSuccess, "autojudge accept launch failed: ", cudaGetErrorString(status));
    return {tokens, lens, best, judged};
}

//! Logits mode. Returns rewritten_logits [L, V] of target_logits' type. request_types and
//! host_context_lengths are CPU tensors, as TensorRT-LLM keeps them in host memory: the sequences'
//! token ends are computed here with the core's rule and copied to the device.
Tensor rewriteLogits(Tensor targetLogits, // [L, V] fp32/fp16/bf16
    Tensor targetHidden,                   // [L, Ht]
    Tensor inputIds,                       // [T] int32
    Tensor lastTokenIds,                   // [L] int32, ascending 1-based positions in input_ids
    Tensor requestTypes,                   // [S] int32, CPU: host_request_types
    Tensor hostContextLengths,             // [S] int32, CPU
    double threshold, Tensor judgeWeight,  // [F] float32
    double judgeBias, std::vector<int64_t> featureBlocks, // [K] FeatureBlock codes
    int64_t minRun,                        // the judge's minimum run, 1 = none
    std::optional<Tensor> draftHidden,     // [L, Hd] (blocks DD, DD1)
    std::optional<Tensor> rewrittenLogits) // [L, V] out
{
    c10::cuda::CUDAGuard guard(targetLogits.device());
    autojudge::NodeRows const nodes
        = nodeRows(targetLogits, targetHidden, draftHidden, judgeWeight, judgeBias, featureBlocks);
    at::Device const device = targetLogits.device();
    check(inputIds, "input_ids", "[T]", device, at::kInt, {-1});
    check(lastTokenIds, "last_token_ids", "[L]", device, at::kInt, {nodes.numRows});
    check(requestTypes, "request_types", "[S] (CPU)", at::Device(at::kCPU), at::kInt, {-1});
    check(hostContextLengths, "host_context_lengths", "[S] (CPU)", at::Device(at::kCPU), at::kInt,
        {requestTypes.size(0)});
    TORCH_CHECK(inputIds.size(0) <= INT32_MAX && requestTypes.size(0) <= INT32_MAX, "extents must fit int32");
    Tensor out = outputOr(rewrittenLogits, "rewritten_logits", "[L, V]", device, targetLogits.scalar_type(),
        {targetLogits.size(0), targetLogits.size(1)});

    auto const numSequences = static_cast<int32_t>(requestTypes.size(0));
    Tensor tokenEnds = at::empty({numSequences}, at::TensorOptions().dtype(at::kInt));
    TORCH_CHECK(autojudge::sequenceTokenEnds(requestTypes.data_ptr<int32_t>(), hostContextLengths.data_ptr<int32_t>(),
                    numSequences, inputIds.size(0), tokenEnds.data_ptr<int32_t>()),
        "the sequences' tokens (host_request_types, host_context_lengths) do not add up to input_ids: the step is "
        "refused");
    Tensor deviceEnds = tokenEnds.to(device);

    autojudge::RewriteLogitsArgs args{};
    args.rows = nodes;
    args.inputIds = inputIds.data_ptr<int32_t>();
    args.numTokens = static_cast<int32_t>(inputIds.size(0));
    args.lastTokenIds = lastTokenIds.data_ptr<int32_t>();
    args.tokenEnds = deviceEnds.data_ptr<int32_t>();
    args.numSequences = numSequences;
    args.threshold = static_cast<float>(threshold);
    args.minRun = checkedMinRun(minRun);
    args.rewrittenLogits = out.data_ptr();
    Tensor scratch = workspace(nodes, device);
    cudaError_t const status = autojudge::launchRewriteLogits(args, scratch.data_ptr(),
        static_cast<size_t>(scratch.numel()), c10::cuda::getCurrentCUDAStream(device.index()));
    TORCH_CHECK(status == cudaSuccess, "autojudge rewrite_logits launch failed: ", cudaGetErrorString(status));
    return out;
}

//! Tree logits mode (one TensorRT-LLM EAGLE engine step). Returns rewritten_logits [L, V] of target_logits' type.
Tensor rewriteTreeLogits(Tensor targetLogits, // [L, V] fp32/fp16/bf16: request b's draft_lens[b] + 1 rows in order
    Tensor targetHidden,                       // [L, Ht]
    Tensor draftTokens,                        // [B, N] int32
    Tensor draftLens,                          // [B] int32
    Tensor paths,                              // [B, P, D + 1] int32
    Tensor threshold,                          // [B] float32
    Tensor judgeWeight,                        // [F] float32
    double judgeBias, std::vector<int64_t> featureBlocks, // [K] FeatureBlock codes (none reads the draft)
    int64_t minRun,                            // the judge's minimum run, 1 = none
    std::optional<Tensor> greedyChild,         // [B, N + 1] int32 (blocks DT1, DT2, LS)
    std::optional<Tensor> rewrittenLogits)     // [L, V] out
{
    c10::cuda::CUDAGuard guard(targetLogits.device());
    autojudge::NodeRows const nodes
        = nodeRows(targetLogits, targetHidden, std::nullopt, judgeWeight, judgeBias, featureBlocks);
    at::Device const device = targetLogits.device();
    checkTreeInputs(nodes, draftTokens, draftLens, paths, threshold, greedyChild, device);
    Tensor out = outputOr(rewrittenLogits, "rewritten_logits", "[L, V]", device, targetLogits.scalar_type(),
        {targetLogits.size(0), targetLogits.size(1)});

    auto args = treeArgs<autojudge::RewriteTreeLogitsArgs>(nodes, draftTokens, draftLens, paths, threshold,
        greedyChild, checkedMinRun(minRun));
    args.rewrittenLogits = out.data_ptr();
    Tensor scratch = workspace(nodes, device);
    cudaError_t const status = autojudge::launchRewriteTreeLogits(args, scratch.data_ptr(),
        static_cast<size_t>(scratch.numel()), c10::cuda::getCurrentCUDAStream(device.index()));
    TORCH_CHECK(status == cudaSuccess, "autojudge rewrite_tree_logits launch failed: ", cudaGetErrorString(status));
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.def("accept", &accept, "AutoJudge accept mode on CUDA tensors", py::arg("target_logits"),
        py::arg("target_hidden"), py::arg("draft_tokens"), py::arg("draft_lens"), py::arg("paths"),
        py::arg("threshold"), py::arg("judge_weight"), py::arg("judge_bias"), py::arg("feature_blocks"),
        py::arg("min_run") = 1, py::arg("draft_hidden") = py::none(), py::arg("greedy_child") = py::none(),
        py::arg("accepted_tokens") = py::none(), py::arg("accepted_lens") = py::none(),
        py::arg("best_path") = py::none(), py::arg("judged_count") = py::none());
    m.def("rewrite_logits", &rewriteLogits, "AutoJudge logits mode on CUDA tensors", py::arg("target_logits"),
        py::arg("target_hidden"), py::arg("input_ids"), py::arg("last_token_ids"), py::arg("request_types"),
        py::arg("host_context_lengths"),
        py::arg("threshold"), py::arg("judge_weight"), py::arg("judge_bias"), py::arg("feature_blocks"),
        py::arg("min_run") = 1, py::arg("draft_hidden") = py::none(), py::arg("rewritten_logits") = py::none());
    m.def("rewrite_tree_logits", &rewriteTreeLogits, "AutoJudge tree logits mode on CUDA tensors",
        py::arg("target_logits"), py::arg("target_hidden"), py::arg("draft_tokens"), py::arg("draft_lens"),
        py::arg("paths"), py::arg("threshold"), py::arg("judge_weight"), py::arg("judge_bias"),
        py::arg("feature_blocks"), py::arg("min_run") = 1, py::arg("greedy_child") = py::none(),
        py::arg("rewritten_logits") = py::none());
}
