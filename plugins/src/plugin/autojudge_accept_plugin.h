/*
 * AutoJudgeAccept (version "1", namespace "autojudge"): judge-gated acceptance of a draft tree as
 * a TensorRT IPluginV3 (IPluginV3OneCore / IPluginV3OneBuild / IPluginV3OneRuntime), and its
 * IPluginCreatorV3One creator. Contract: plugins/README.md.
 */
#pragma once

#include "plugin/accept_config.h"

#include <NvInferRuntime.h>

#include <string>
#include <vector>

namespace autojudge
{
namespace plugin
{

constexpr char const* kPluginName = "AutoJudgeAccept";
constexpr char const* kPluginVersion = "1";
constexpr char const* kPluginNamespace = "autojudge";

//! Inputs of output_mode 0 (accept). B = batch_size, N = num_draft_nodes, P = num_paths,
//! D + 1 = max_path_len, V = vocab_size. The optional inputs follow the six in this order, each only
//! when the judge's blocks need it: draft_hidden is input 6, greedy_child input 6 or 7.
enum class AcceptInput : int32_t
{
    kTARGET_LOGITS = 0, //!< [B * (N + 1), V] fp32/fp16/bf16: row b * (N + 1) + n predicts node n's child
    kTARGET_HIDDEN = 1, //!< [B * (N + 1), target_hidden] fp32/fp16/bf16: final-norm hidden, node n as input
    kDRAFT_TOKENS = 2,  //!< [B, N] int32: token of node n at column n - 1
    kDRAFT_LENS = 3,    //!< [B] int32: nodes 1..draft_lens[b] may be accepted
    kPATHS = 4,         //!< [B, P, D + 1] int32: root-to-leaf node indices, -1 padded
    kTHRESHOLD = 5,     //!< [B] float32: per-request judge threshold in [0, 1]
    kDRAFT_HIDDEN = 6,  //!< [B * (N + 1), draft_hidden] same type as target_hidden (blocks DD, DD1)
    kGREEDY_CHILD = 7,  //!< [B, N + 1] int32: rank-0 child of each node, -1 none (blocks DT1, DT2, DD1, LS);
                        //!< input 6 when no block reads the draft
};

//! Outputs of output_mode 0 (accept).
enum class AcceptOutput : int32_t
{
    kACCEPTED_TOKENS = 0, //!< [B, D + 1] int32: accepted draft tokens, the correction token, -1 padding
    kACCEPTED_LENS = 1,   //!< [B] int32: accepted draft tokens (the correction token excluded)
    kBEST_PATH = 2,       //!< [B] int32: index p of the chosen path
    kJUDGED_COUNT = 3,    //!< [B] int32: accepted mismatches let through by the judge
};

//! Inputs of output_mode 1 (logits): the stock TensorRT-LLM engine tensors of one step. L = gathered
//! logits rows, T = tokens of the step, S = sequences of the step (plugins/README.md, "Logits mode").
enum class LogitsInput : int32_t
{
    kTARGET_LOGITS = 0,        //!< [L, V] fp32/fp16/bf16: the LM head's gathered rows
    kTARGET_HIDDEN = 1,        //!< [L, target_hidden] fp32/fp16/bf16: the LM head's input rows
    kINPUT_IDS = 2,            //!< [T] int32: the step's packed input ids
    kLAST_TOKEN_IDS = 3,       //!< [L] int32: 1-based position in input_ids of each row's input token, ascending
    kHOST_REQUEST_TYPES = 4,   //!< [S] int32, host memory: 0 context request, 1 generation sequence
    kHOST_CONTEXT_LENGTHS = 5, //!< [S] int32, host memory: a context request's tokens this step
    kDRAFT_HIDDEN = 6,         //!< [L, draft_hidden] same type as target_hidden (blocks DD, DD1)
};

//! Output of output_modes 1 (logits) and 2 (tree logits).
enum class LogitsOutput : int32_t
{
    kREWRITTEN_LOGITS = 0, //!< [L, V] same type as target_logits
};

//! Inputs of output_mode 2 (tree logits): the tensors of one TensorRT-LLM EAGLE engine step at
//! EagleForCausalLM._eagle_fwd_helper. Request b owns draft_lens[b] + 1 logits rows after those of the
//! requests before it (its root, then node n at its row n); B requests, N = max_draft_len,
//! M = N + 1 (plugins/README.md, "Tree logits mode").
enum class TreeLogitsInput : int32_t
{
    kTARGET_LOGITS = 0, //!< [L, V] fp32/fp16/bf16: lm_logits
    kTARGET_HIDDEN = 1, //!< [L, target_hidden] fp32/fp16/bf16: the LM head's input rows
    kDRAFT_TOKENS = 2,  //!< [B, N] int32: the engine input draft_tokens
    kDRAFT_LENS = 3,    //!< [B] int32: draft_lens (0 for a context request)
    kPATHS = 4,         //!< [B, M, max_path_len] int32: draft_paths
    kTHRESHOLD = 5,     //!< [B] float32: posterior_threshold, the per-request judge threshold
    kGREEDY_CHILD = 6,  //!< [B, N + 1] int32: the static tree's rank-0 child of each node (blocks DT1, DT2, LS)
};

class AutoJudgeAcceptPlugin : public nvinfer1::IPluginV3,
                              public nvinfer1::IPluginV3OneCore,
                              public nvinfer1::IPluginV3OneBuild,
                              public nvinfer1::IPluginV3OneRuntime
{
public:
    explicit AutoJudgeAcceptPlugin(AcceptConfig config);
    //! Copies the fields only: a copy has no device weights and no error recorder of its own.
    AutoJudgeAcceptPlugin(AutoJudgeAcceptPlugin const& other);
    AutoJudgeAcceptPlugin& operator=(AutoJudgeAcceptPlugin const&) = delete;
    ~AutoJudgeAcceptPlugin() override;

    AcceptConfig const& config() const
    {
        return mConfig;
    }

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;

    // IPluginV3OneBuild
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
        nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override;
    int32_t getNbOutputs() const noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;
    char const* getMetadataString() noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

private:
    int32_t expectedInputs() const;
    //! Position of the accept-mode input greedy_child (when the judge looks ahead).
    int32_t greedyChildInput() const;
    //! Empty when the shapes fit the contract; else what is wrong. Dimensions < 0 (not known
    //! yet at build time) are not checked.
    std::string checkShapes(nvinfer1::Dims const* inputs, int32_t nbInputs, int32_t nbOutputs) const;
    std::string checkAcceptShapes(nvinfer1::Dims const* inputs) const;
    std::string checkLogitsShapes(nvinfer1::Dims const* inputs) const;
    std::string checkTreeLogitsShapes(nvinfer1::Dims const* inputs) const;
    //! Report an error through the attached context's recorder (if any) and the logger; returns 1.
    int32_t fail(nvinfer1::ErrorCode code, std::string const& message) const;
    //! Copy judge_weight to device memory once per plugin object.
    bool uploadJudgeWeight(std::string& error);
    int32_t enqueueAccept(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
        void* const* outputs, void* workspace, cudaStream_t stream);
    //! Logits mode, host side: the step's token ends (mTokenEnds) and whether it has a context request,
    //! from the host inputs; empty when they fit input_ids, else what is wrong (no memory touched).
    std::string stageTokenEnds(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs);
    int32_t enqueueLogits(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
        void* const* outputs, void* workspace, cudaStream_t stream);
    int32_t enqueueTreeLogits(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
        void* const* outputs, void* workspace, cudaStream_t stream);

    AcceptConfig mConfig;
    EnumFieldStorage mSerialEnums{};
    std::vector<nvinfer1::PluginField> mSerialFields;
    nvinfer1::PluginFieldCollection mSerialCollection{};
    std::string mMetadata;
    nvinfer1::IErrorRecorder* mRecorder{nullptr};
    float* mDeviceWeight{nullptr}; //!< [feature_size] judge_weight on the device, owned
    std::vector<int32_t> mTokenEnds; //!< [S] logits mode: the step's token ends, staged for the device
    bool mStepHasContext{false};     //!< logits mode: the staged step has a context request
};

class AutoJudgeAcceptPluginCreator : public nvinfer1::IPluginCreatorV3One
{
public:
    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override;
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;
};

} // namespace plugin
} // namespace autojudge
