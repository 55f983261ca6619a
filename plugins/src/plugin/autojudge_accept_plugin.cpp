#include "plugin/autojudge_accept_plugin.h"

#include "autojudge/accept_launch.h"
#include "plugin/plugin_log.h"

#include <array>
#include <cstdint>
#include <memory>
#include <sstream>

namespace autojudge
{
namespace plugin
{
namespace
{

using nvinfer1::DataType;
using nvinfer1::Dims;
using nvinfer1::ErrorCode;

template <typename E>
constexpr int32_t idx(E e)
{
    return static_cast<int32_t>(e);
}

struct InputSpec
{
    char const* name;
    int32_t rank;
    char const* shape;
};

constexpr std::array<InputSpec, 8> kAcceptInputs{{
    {"target_logits", 2, "[B * (N + 1), V]"},
    {"target_hidden", 2, "[B * (N + 1), target_hidden]"},
    {"draft_tokens", 2, "[B, N]"},
    {"draft_lens", 1, "[B]"},
    {"paths", 3, "[B, P, max_path_len]"},
    {"threshold", 1, "[B]"},
    {"draft_hidden", 2, "[B * (N + 1), draft_hidden]"},
    {"greedy_child", 2, "[B, N + 1]"},
}};

constexpr std::array<InputSpec, 7> kLogitsInputs{{
    {"target_logits", 2, "[L, V]"},
    {"target_hidden", 2, "[L, target_hidden]"},
    {"input_ids", 1, "[T]"},
    {"last_token_ids", 1, "[L]"},
    {"host_request_types", 1, "[S]"},
    {"host_context_lengths", 1, "[S]"},
    {"draft_hidden", 2, "[L, draft_hidden]"},
}};

constexpr std::array<InputSpec, 7> kTreeLogitsInputs{{
    {"target_logits", 2, "[L, V]"},
    {"target_hidden", 2, "[L, target_hidden]"},
    {"draft_tokens", 2, "[B, N]"},
    {"draft_lens", 1, "[B]"},
    {"paths", 3, "[B, N + 1, max_path_len]"},
    {"threshold", 1, "[B]"},
    {"greedy_child", 2, "[B, N + 1]"},
}};

//! The inputs of the configured mode, in order: the six, then draft_hidden when a block reads the
//! draft, then (accept mode) greedy_child when a block looks ahead; tree logits mode: its six, then
//! greedy_child when a block looks ahead (no block reads the draft).
std::vector<InputSpec> presentInputs(AcceptConfig const& config)
{
    if (config.outputMode == OutputMode::kTREE_LOGITS)
    {
        std::vector<InputSpec> specs(kTreeLogitsInputs.begin(), kTreeLogitsInputs.begin() + 6);
        if (config.layout.windowTokens > 0)
        {
            specs.push_back(kTreeLogitsInputs[6]);
        }
        return specs;
    }
    bool const accept = config.outputMode == OutputMode::kACCEPT;
    InputSpec const* all = accept ? kAcceptInputs.data() : kLogitsInputs.data();
    std::vector<InputSpec> specs(all, all + 6);
    if (readsDraft(config.layout))
    {
        specs.push_back(all[6]);
    }
    if (accept && config.layout.windowTokens > 0)
    {
        specs.push_back(kAcceptInputs[7]);
    }
    return specs;
}

bool isFloatType(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF || type == DataType::kBF16;
}

bool toElementType(DataType type, ElementType& element)
{
    switch (type)
    {
    case DataType::kFLOAT: element = ElementType::kFLOAT32; return true;
    case DataType::kHALF: element = ElementType::kFLOAT16; return true;
    case DataType::kBF16: element = ElementType::kBFLOAT16; return true;
    default: return false;
    }
}

bool known(int64_t extent)
{
    return extent >= 0;
}

bool fitsInt32(int64_t extent)
{
    return extent >= 0 && extent <= INT32_MAX;
}

//! The first shape problem found, phrased with the input names of the mode.
class ShapeProblems
{
public:
    ShapeProblems(Dims const* dims, InputSpec const* specs)
        : mDims(dims)
        , mSpecs(specs)
    {
    }

    bool ranksOk(int32_t nbInputs)
    {
        for (int32_t i = 0; i < nbInputs && mText.empty(); ++i)
        {
            if (mDims[i].nbDims != mSpecs[i].rank)
            {
                std::ostringstream text;
                text << "input " << i << " (" << mSpecs[i].name << ") must be " << mSpecs[i].shape << ", got rank "
                     << mDims[i].nbDims;
                mText = text.str();
            }
        }
        return mText.empty();
    }

    //! dims[input].d[axis] must equal `expected` (when both are known); `why` says where it comes from.
    void expectExtent(int32_t input, int32_t axis, int64_t expected, std::string const& why)
    {
        int64_t const extent = mDims[input].d[axis];
        if (mText.empty() && known(extent) && known(expected) && extent != expected)
        {
            std::ostringstream text;
            text << "input " << input << " (" << mSpecs[input].name << ", " << mSpecs[input].shape << ") has "
                 << extent << " in dimension " << axis << ", expected " << expected << " (" << why << ")";
            mText = text.str();
        }
    }

    void fail(std::string const& text)
    {
        if (mText.empty())
        {
            mText = text;
        }
    }

    int64_t extent(int32_t input, int32_t axis) const
    {
        return mDims[input].d[axis];
    }

    std::string const& text() const
    {
        return mText;
    }

private:
    Dims const* mDims;
    InputSpec const* mSpecs;
    std::string mText;
};

} // namespace

AutoJudgeAcceptPlugin::AutoJudgeAcceptPlugin(AcceptConfig config)
    : mConfig(std::move(config))
    , mSerialFields(acceptConfigFields(mConfig, mSerialEnums))
    , mMetadata(describeAcceptConfig(mConfig))
{
    mSerialCollection.nbFields = static_cast<int32_t>(mSerialFields.size());
    mSerialCollection.fields = mSerialFields.data();
}

AutoJudgeAcceptPlugin::AutoJudgeAcceptPlugin(AutoJudgeAcceptPlugin const& other)
    : AutoJudgeAcceptPlugin(other.mConfig)
{
}

AutoJudgeAcceptPlugin::~AutoJudgeAcceptPlugin()
{
    if (mDeviceWeight != nullptr)
    {
        cudaFree(mDeviceWeight);
    }
}

nvinfer1::IPluginCapability* AutoJudgeAcceptPlugin::getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept
{
    switch (type)
    {
    case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
    case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
    case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
    }
    return nullptr;
}

nvinfer1::IPluginV3* AutoJudgeAcceptPlugin::clone() noexcept
{
    try
    {
        return new AutoJudgeAcceptPlugin(*this);
    }
    catch (std::exception const& e)
    {
        fail(ErrorCode::kINTERNAL_ERROR, std::string("clone failed: ") + e.what());
        return nullptr;
    }
}

char const* AutoJudgeAcceptPlugin::getPluginName() const noexcept
{
    return kPluginName;
}

char const* AutoJudgeAcceptPlugin::getPluginVersion() const noexcept
{
    return kPluginVersion;
}

char const* AutoJudgeAcceptPlugin::getPluginNamespace() const noexcept
{
    return kPluginNamespace;
}

int32_t AutoJudgeAcceptPlugin::expectedInputs() const
{
    return static_cast<int32_t>(presentInputs(mConfig).size());
}

int32_t AutoJudgeAcceptPlugin::greedyChildInput() const
{
    return idx(AcceptInput::kDRAFT_HIDDEN) + (readsDraft(mConfig.layout) ? 1 : 0);
}

int32_t AutoJudgeAcceptPlugin::getNbOutputs() const noexcept
{
    return mConfig.outputMode == OutputMode::kACCEPT ? 4 : 1;
}

std::string AutoJudgeAcceptPlugin::checkShapes(Dims const* inputs, int32_t nbInputs, int32_t nbOutputs) const
{
    bool const accept = mConfig.outputMode == OutputMode::kACCEPT;
    bool const tree = mConfig.outputMode == OutputMode::kTREE_LOGITS;
    if (nbInputs != expectedInputs() || nbOutputs != getNbOutputs())
    {
        std::ostringstream text;
        text << "output_mode " << (accept ? "0 (accept)" : tree ? "2 (tree logits)" : "1 (logits)") << " with feature_blocks "
             << setupName(mConfig.featureBlocks) << " takes " << expectedInputs() << " inputs (";
        std::vector<InputSpec> const specs = presentInputs(mConfig);
        for (size_t i = 0; i < specs.size(); ++i)
        {
            text << (i ? ", " : "") << specs[i].name;
        }
        text << ") and gives " << getNbOutputs() << " outputs; got " << nbInputs << " inputs and " << nbOutputs
             << " outputs";
        return text.str();
    }
    return accept ? checkAcceptShapes(inputs) : tree ? checkTreeLogitsShapes(inputs) : checkLogitsShapes(inputs);
}

std::string AutoJudgeAcceptPlugin::checkAcceptShapes(Dims const* inputs) const
{
    std::vector<InputSpec> const specs = presentInputs(mConfig);
    ShapeProblems problems(inputs, specs.data());
    if (!problems.ranksOk(expectedInputs()))
    {
        return problems.text();
    }
    int32_t const logits = idx(AcceptInput::kTARGET_LOGITS);
    int32_t const draftTokens = idx(AcceptInput::kDRAFT_TOKENS);
    int64_t const batch = problems.extent(idx(AcceptInput::kDRAFT_LENS), 0);
    int64_t const numDraftNodes = problems.extent(draftTokens, 1);
    int64_t const rows = problems.extent(logits, 0);
    problems.expectExtent(idx(AcceptInput::kTARGET_HIDDEN), 1, mConfig.targetHidden, "the target_hidden field");
    problems.expectExtent(idx(AcceptInput::kPATHS), 2, mConfig.maxPathLen, "the max_path_len field");
    problems.expectExtent(draftTokens, 0, batch, "B, the length of draft_lens");
    problems.expectExtent(idx(AcceptInput::kPATHS), 0, batch, "B, the length of draft_lens");
    problems.expectExtent(idx(AcceptInput::kTHRESHOLD), 0, batch, "B, the length of draft_lens");
    if (known(batch) && known(numDraftNodes))
    {
        problems.expectExtent(logits, 0, batch * (numDraftNodes + 1), "B * (N + 1): one row per node, root included");
    }
    problems.expectExtent(idx(AcceptInput::kTARGET_HIDDEN), 0, rows, "one row per logits row");
    if (readsDraft(mConfig.layout))
    {
        problems.expectExtent(idx(AcceptInput::kDRAFT_HIDDEN), 1, mConfig.draftHidden, "the draft_hidden field");
        problems.expectExtent(idx(AcceptInput::kDRAFT_HIDDEN), 0, rows, "one row per logits row");
    }
    if (mConfig.layout.windowTokens > 0)
    {
        problems.expectExtent(greedyChildInput(), 0, batch, "B, the length of draft_lens");
        problems.expectExtent(greedyChildInput(), 1, known(numDraftNodes) ? numDraftNodes + 1 : -1,
            "N + 1: one entry per node, root included");
    }
    if (known(numDraftNodes) && numDraftNodes + 1 > kMaxTreeNodes)
    {
        problems.fail("draft_tokens has N = " + std::to_string(numDraftNodes) + " draft nodes; the kernel holds at most "
            + std::to_string(kMaxTreeNodes - 1) + " per sequence");
    }
    if (problems.extent(logits, 1) == 0)
    {
        problems.fail("target_logits has an empty vocabulary dimension");
    }
    return problems.text();
}

std::string AutoJudgeAcceptPlugin::checkLogitsShapes(Dims const* inputs) const
{
    std::vector<InputSpec> const specs = presentInputs(mConfig);
    ShapeProblems problems(inputs, specs.data());
    if (!problems.ranksOk(expectedInputs()))
    {
        return problems.text();
    }
    int64_t const rows = problems.extent(idx(LogitsInput::kTARGET_LOGITS), 0);
    problems.expectExtent(idx(LogitsInput::kTARGET_HIDDEN), 1, mConfig.targetHidden, "the target_hidden field");
    problems.expectExtent(idx(LogitsInput::kTARGET_HIDDEN), 0, rows, "one row per logits row");
    problems.expectExtent(idx(LogitsInput::kLAST_TOKEN_IDS), 0, rows, "one entry per logits row");
    problems.expectExtent(idx(LogitsInput::kHOST_CONTEXT_LENGTHS), 0,
        problems.extent(idx(LogitsInput::kHOST_REQUEST_TYPES), 0), "S, one entry per sequence like host_request_types");
    if (readsDraft(mConfig.layout))
    {
        problems.expectExtent(idx(LogitsInput::kDRAFT_HIDDEN), 1, mConfig.draftHidden, "the draft_hidden field");
        problems.expectExtent(idx(LogitsInput::kDRAFT_HIDDEN), 0, rows, "one row per logits row");
    }
    if (problems.extent(idx(LogitsInput::kTARGET_LOGITS), 1) == 0)
    {
        problems.fail("target_logits has an empty vocabulary dimension");
    }
    return problems.text();
}

std::string AutoJudgeAcceptPlugin::checkTreeLogitsShapes(Dims const* inputs) const
{
    std::vector<InputSpec> const specs = presentInputs(mConfig);
    ShapeProblems problems(inputs, specs.data());
    if (!problems.ranksOk(expectedInputs()))
    {
        return problems.text();
    }
    int32_t const logits = idx(TreeLogitsInput::kTARGET_LOGITS);
    int32_t const draftTokens = idx(TreeLogitsInput::kDRAFT_TOKENS);
    int32_t const paths = idx(TreeLogitsInput::kPATHS);
    int64_t const batch = problems.extent(idx(TreeLogitsInput::kDRAFT_LENS), 0);
    int64_t const numDraftNodes = problems.extent(draftTokens, 1);
    problems.expectExtent(idx(TreeLogitsInput::kTARGET_HIDDEN), 1, mConfig.targetHidden, "the target_hidden field");
    problems.expectExtent(idx(TreeLogitsInput::kTARGET_HIDDEN), 0, problems.extent(logits, 0), "one row per logits row");
    problems.expectExtent(paths, 2, mConfig.maxPathLen, "the max_path_len field");
    problems.expectExtent(draftTokens, 0, batch, "B, the length of draft_lens");
    problems.expectExtent(paths, 0, batch, "B, the length of draft_lens");
    problems.expectExtent(idx(TreeLogitsInput::kTHRESHOLD), 0, batch, "B, the length of draft_lens");
    if (mConfig.layout.windowTokens > 0)
    {
        problems.expectExtent(idx(TreeLogitsInput::kGREEDY_CHILD), 0, batch, "B, the length of draft_lens");
        problems.expectExtent(idx(TreeLogitsInput::kGREEDY_CHILD), 1, known(numDraftNodes) ? numDraftNodes + 1 : -1,
            "N + 1: one entry per node, root included");
    }
    if (known(numDraftNodes) && numDraftNodes + 1 > kMaxTreeNodes)
    {
        problems.fail("draft_tokens has N = " + std::to_string(numDraftNodes) + " draft nodes; the kernel holds at most "
            + std::to_string(kMaxTreeNodes - 1) + " per request");
    }
    if (problems.extent(logits, 1) == 0)
    {
        problems.fail("target_logits has an empty vocabulary dimension");
    }
    return problems.text();
}

int32_t AutoJudgeAcceptPlugin::fail(ErrorCode code, std::string const& message) const
{
    reportError(mRecorder, code, std::string(kPluginName) + ": " + message);
    return 1;
}

int32_t AutoJudgeAcceptPlugin::configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept
{
    try
    {
        std::vector<Dims> dims(nbInputs > 0 ? nbInputs : 0);
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            dims[i] = in[i].desc.dims;
        }
        std::string const problem = checkShapes(dims.data(), nbInputs, nbOutputs);
        return problem.empty() ? 0 : fail(ErrorCode::kINVALID_ARGUMENT, problem);
    }
    catch (std::exception const& e)
    {
        return fail(ErrorCode::kINTERNAL_ERROR, e.what());
    }
}

int32_t AutoJudgeAcceptPlugin::getOutputDataTypes(
    DataType* outputTypes, int32_t nbOutputs, DataType const* inputTypes, int32_t nbInputs) const noexcept
{
    if (nbInputs != expectedInputs() || nbOutputs != getNbOutputs())
    {
        return fail(ErrorCode::kINVALID_ARGUMENT, checkShapes(nullptr, nbInputs, nbOutputs));
    }
    if (mConfig.outputMode != OutputMode::kACCEPT)
    {
        outputTypes[idx(LogitsOutput::kREWRITTEN_LOGITS)] = inputTypes[idx(LogitsInput::kTARGET_LOGITS)];
        return 0;
    }
    for (int32_t i = 0; i < nbOutputs; ++i)
    {
        outputTypes[i] = DataType::kINT32;
    }
    return 0;
}

int32_t AutoJudgeAcceptPlugin::getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs const* /*shapeInputs*/, int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs,
    int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder) noexcept
{
    try
    {
        std::vector<Dims> ranks(nbInputs > 0 ? nbInputs : 0);
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            ranks[i].nbDims = inputs[i].nbDims;
            for (int32_t axis = 0; axis < Dims::MAX_DIMS; ++axis)
            {
                ranks[i].d[axis] = -1; // extents are expressions here: only ranks and counts are checked
            }
        }
        std::string const problem = checkShapes(ranks.data(), nbInputs, nbOutputs);
        if (!problem.empty())
        {
            return fail(ErrorCode::kINVALID_ARGUMENT, problem);
        }
        if (mConfig.outputMode != OutputMode::kACCEPT)
        {
            outputs[idx(LogitsOutput::kREWRITTEN_LOGITS)] = inputs[idx(LogitsInput::kTARGET_LOGITS)];
            return 0;
        }
        nvinfer1::IDimensionExpr const* batch = inputs[idx(AcceptInput::kDRAFT_LENS)].d[0];
        nvinfer1::DimsExprs& tokens = outputs[idx(AcceptOutput::kACCEPTED_TOKENS)];
        tokens.nbDims = 2;
        tokens.d[0] = batch;
        tokens.d[1] = exprBuilder.constant(mConfig.maxPathLen);
        for (AcceptOutput output : {AcceptOutput::kACCEPTED_LENS, AcceptOutput::kBEST_PATH, AcceptOutput::kJUDGED_COUNT})
        {
            outputs[idx(output)].nbDims = 1;
            outputs[idx(output)].d[0] = batch;
        }
        return 0;
    }
    catch (std::exception const& e)
    {
        return fail(ErrorCode::kINTERNAL_ERROR, e.what());
    }
}

bool AutoJudgeAcceptPlugin::supportsFormatCombination(
    int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept
{
    if (nbInputs != expectedInputs() || nbOutputs != getNbOutputs() || pos < 0 || pos >= nbInputs + nbOutputs)
    {
        return false;
    }
    nvinfer1::PluginTensorDesc const& desc = inOut[pos].desc;
    if (desc.format != nvinfer1::TensorFormat::kLINEAR)
    {
        return false;
    }
    bool const accept = mConfig.outputMode == OutputMode::kACCEPT;
    bool const tree = mConfig.outputMode == OutputMode::kTREE_LOGITS;
    int32_t const targetHidden = accept ? idx(AcceptInput::kTARGET_HIDDEN) : idx(LogitsInput::kTARGET_HIDDEN);
    int32_t const draftHidden = accept ? idx(AcceptInput::kDRAFT_HIDDEN) : idx(LogitsInput::kDRAFT_HIDDEN);
    if (pos == idx(AcceptInput::kTARGET_LOGITS) || pos == targetHidden)
    {
        return isFloatType(desc.type);
    }
    if (pos == draftHidden && pos < nbInputs && readsDraft(mConfig.layout))
    {
        return desc.type == inOut[targetHidden].desc.type;
    }
    if (pos >= nbInputs)
    {
        return accept ? desc.type == DataType::kINT32 : desc.type == inOut[idx(LogitsInput::kTARGET_LOGITS)].desc.type;
    }
    if ((accept && pos == idx(AcceptInput::kTHRESHOLD)) || (tree && pos == idx(TreeLogitsInput::kTHRESHOLD)))
    {
        return desc.type == DataType::kFLOAT;
    }
    return desc.type == DataType::kINT32; // token ids, lengths, paths, greedy children, positions
}

size_t AutoJudgeAcceptPlugin::getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
    nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept
{
    if (nbInputs < 1 || inputs[0].max.nbDims != 2)
    {
        return 0;
    }
    int32_t const sequences = idx(LogitsInput::kHOST_REQUEST_TYPES);
    if (mConfig.outputMode == OutputMode::kLOGITS && nbInputs > sequences && inputs[sequences].max.nbDims == 1)
    {
        return rewriteWorkspaceBytes(inputs[0].max.d[0], inputs[0].max.d[1], inputs[sequences].max.d[0]);
    }
    return acceptWorkspaceBytes(inputs[0].max.d[0], inputs[0].max.d[1]);
}

char const* AutoJudgeAcceptPlugin::getMetadataString() noexcept
{
    return mMetadata.c_str();
}

int32_t AutoJudgeAcceptPlugin::onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
    nvinfer1::PluginTensorDesc const* /*out*/, int32_t nbOutputs) noexcept
{
    try
    {
        std::vector<Dims> dims(nbInputs > 0 ? nbInputs : 0);
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            dims[i] = in[i].dims;
        }
        std::string const problem = checkShapes(dims.data(), nbInputs, nbOutputs);
        return problem.empty() ? 0 : fail(ErrorCode::kINVALID_ARGUMENT, problem);
    }
    catch (std::exception const& e)
    {
        return fail(ErrorCode::kINTERNAL_ERROR, e.what());
    }
}

bool AutoJudgeAcceptPlugin::uploadJudgeWeight(std::string& error)
{
    if (mDeviceWeight != nullptr)
    {
        return true;
    }
    size_t const bytes = mConfig.judgeWeight.size() * sizeof(float);
    void* device = nullptr;
    cudaError_t status = cudaMalloc(&device, bytes);
    if (status == cudaSuccess)
    {
        status = cudaMemcpy(device, mConfig.judgeWeight.data(), bytes, cudaMemcpyHostToDevice);
        if (status != cudaSuccess)
        {
            cudaFree(device);
        }
    }
    if (status != cudaSuccess)
    {
        error = "could not copy judge_weight (" + std::to_string(bytes)
            + " bytes) to the GPU: " + cudaGetErrorString(status);
        return false;
    }
    mDeviceWeight = static_cast<float*>(device);
    return true;
}

int32_t AutoJudgeAcceptPlugin::enqueue(nvinfer1::PluginTensorDesc const* inputDesc,
    nvinfer1::PluginTensorDesc const* /*outputDesc*/, void const* const* inputs, void* const* outputs, void* workspace,
    cudaStream_t stream) noexcept
{
    try
    {
        std::vector<Dims> dims(expectedInputs());
        for (int32_t i = 0; i < expectedInputs(); ++i)
        {
            dims[i] = inputDesc[i].dims;
        }
        std::string const problem = checkShapes(dims.data(), expectedInputs(), getNbOutputs());
        if (!problem.empty())
        {
            return fail(ErrorCode::kINVALID_ARGUMENT, problem);
        }
        for (int32_t i = 0; i < expectedInputs(); ++i)
        {
            for (int32_t axis = 0; axis < dims[i].nbDims; ++axis)
            {
                if (!fitsInt32(dims[i].d[axis]))
                {
                    return fail(ErrorCode::kINVALID_ARGUMENT,
                        "input " + std::to_string(i) + " has an extent outside [0, 2^31 - 1] in dimension "
                            + std::to_string(axis));
                }
            }
        }
        if (mConfig.outputMode == OutputMode::kLOGITS)
        {
            std::string const stepProblem = stageTokenEnds(inputDesc, inputs);
            if (!stepProblem.empty())
            {
                return fail(ErrorCode::kINVALID_ARGUMENT, stepProblem);
            }
        }
        std::string error;
        if (!uploadJudgeWeight(error))
        {
            return fail(ErrorCode::kFAILED_ALLOCATION, error);
        }
        switch (mConfig.outputMode)
        {
        case OutputMode::kACCEPT: return enqueueAccept(inputDesc, inputs, outputs, workspace, stream);
        case OutputMode::kTREE_LOGITS: return enqueueTreeLogits(inputDesc, inputs, outputs, workspace, stream);
        default: return enqueueLogits(inputDesc, inputs, outputs, workspace, stream);
        }
    }
    catch (std::exception const& e)
    {
        return fail(ErrorCode::kINTERNAL_ERROR, e.what());
    }
}

namespace
{

//! NodeRows over the first two inputs (logits, target hidden) and the optional draft hidden input.
bool nodeRowsOf(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs, int32_t draftHiddenInput,
    AcceptConfig const& config, float const* deviceWeight, NodeRows& rows)
{
    rows.targetLogits = inputs[0];
    rows.targetHidden = inputs[1];
    rows.draftHidden = readsDraft(config.layout) ? inputs[draftHiddenInput] : nullptr;
    rows.numRows = static_cast<int32_t>(inputDesc[0].dims.d[0]);
    rows.vocabSize = static_cast<int32_t>(inputDesc[0].dims.d[1]);
    rows.judge = JudgeHeadView{deviceWeight, config.judgeBias, config.layout};
    return toElementType(inputDesc[0].type, rows.logitsType) && toElementType(inputDesc[1].type, rows.hiddenType);
}

} // namespace

int32_t AutoJudgeAcceptPlugin::enqueueAccept(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
    void* const* outputs, void* workspace, cudaStream_t stream)
{
    AcceptTreeArgs args{};
    if (!nodeRowsOf(inputDesc, inputs, idx(AcceptInput::kDRAFT_HIDDEN), mConfig, mDeviceWeight, args.rows))
    {
        return fail(ErrorCode::kINVALID_ARGUMENT, "target_logits and target_hidden must be float32, float16 or bfloat16");
    }
    Dims const& paths = inputDesc[idx(AcceptInput::kPATHS)].dims;
    args.draftTokens = static_cast<int32_t const*>(inputs[idx(AcceptInput::kDRAFT_TOKENS)]);
    args.draftLens = static_cast<int32_t const*>(inputs[idx(AcceptInput::kDRAFT_LENS)]);
    args.paths = static_cast<int32_t const*>(inputs[idx(AcceptInput::kPATHS)]);
    args.threshold = static_cast<float const*>(inputs[idx(AcceptInput::kTHRESHOLD)]);
    args.greedyChild
        = mConfig.layout.windowTokens > 0 ? static_cast<int32_t const*>(inputs[greedyChildInput()]) : nullptr;
    args.batchSize = static_cast<int32_t>(inputDesc[idx(AcceptInput::kDRAFT_LENS)].dims.d[0]);
    args.numDraftNodes = static_cast<int32_t>(inputDesc[idx(AcceptInput::kDRAFT_TOKENS)].dims.d[1]);
    args.numPaths = static_cast<int32_t>(paths.d[1]);
    args.maxPathLen = static_cast<int32_t>(paths.d[2]);
    args.minRun = mConfig.minRun;
    args.acceptedTokens = static_cast<int32_t*>(outputs[idx(AcceptOutput::kACCEPTED_TOKENS)]);
    args.acceptedLens = static_cast<int32_t*>(outputs[idx(AcceptOutput::kACCEPTED_LENS)]);
    args.bestPath = static_cast<int32_t*>(outputs[idx(AcceptOutput::kBEST_PATH)]);
    args.judgedCount = static_cast<int32_t*>(outputs[idx(AcceptOutput::kJUDGED_COUNT)]);
    size_t const workspaceBytes = acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    cudaError_t const status = launchAcceptTree(args, workspace, workspaceBytes, stream);
    return status == cudaSuccess
        ? 0
        : fail(ErrorCode::kFAILED_EXECUTION, std::string("accept-mode launch failed: ") + cudaGetErrorString(status));
}

std::string AutoJudgeAcceptPlugin::stageTokenEnds(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs)
{
    // host_request_types and host_context_lengths live in host memory (TensorRT-LLM binds them there, as
    // for its own plugins): the sequences' token ends are computed here, with the core's rule.
    auto const numSequences = static_cast<int32_t>(inputDesc[idx(LogitsInput::kHOST_REQUEST_TYPES)].dims.d[0]);
    int64_t const numTokens = inputDesc[idx(LogitsInput::kINPUT_IDS)].dims.d[0];
    auto const* requestTypes = static_cast<int32_t const*>(inputs[idx(LogitsInput::kHOST_REQUEST_TYPES)]);
    auto const* hostContextLengths = static_cast<int32_t const*>(inputs[idx(LogitsInput::kHOST_CONTEXT_LENGTHS)]);
    if (numSequences > 0 && (requestTypes == nullptr || hostContextLengths == nullptr))
    {
        return "host_request_types and host_context_lengths must be bound (host memory)";
    }
    mTokenEnds.resize(static_cast<size_t>(numSequences));
    if (!sequenceTokenEnds(requestTypes, hostContextLengths, numSequences, numTokens, mTokenEnds.data()))
    {
        int64_t tokens = 0;
        for (int32_t s = 0; s < numSequences; ++s)
        {
            tokens += sequenceTokenCount(requestTypes[s], hostContextLengths[s]);
        }
        return "the step's sequences hold " + std::to_string(tokens) + " tokens by host_request_types and "
            + "host_context_lengths (a context request its context length, any other sequence 1), but input_ids has "
            + std::to_string(numTokens)
            + ": build the target with --speculative_decoding_mode draft_tokens_external and send draft tokens "
              "with new requests only (docs/deploy.md, stock route)";
    }
    mStepHasContext = false;
    for (int32_t s = 0; s < numSequences && !mStepHasContext; ++s)
    {
        mStepHasContext = requestTypes[s] == kContextRequest;
    }
    return "";
}

int32_t AutoJudgeAcceptPlugin::enqueueLogits(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
    void* const* outputs, void* workspace, cudaStream_t stream)
{
    RewriteLogitsArgs args{};
    if (!nodeRowsOf(inputDesc, inputs, idx(LogitsInput::kDRAFT_HIDDEN), mConfig, mDeviceWeight, args.rows))
    {
        return fail(ErrorCode::kINVALID_ARGUMENT, "target_logits and target_hidden must be float32, float16 or bfloat16");
    }
    args.inputIds = static_cast<int32_t const*>(inputs[idx(LogitsInput::kINPUT_IDS)]);
    args.numTokens = static_cast<int32_t>(inputDesc[idx(LogitsInput::kINPUT_IDS)].dims.d[0]);
    args.lastTokenIds = static_cast<int32_t const*>(inputs[idx(LogitsInput::kLAST_TOKEN_IDS)]);
    args.numSequences = static_cast<int32_t>(inputDesc[idx(LogitsInput::kHOST_REQUEST_TYPES)].dims.d[0]);
    args.threshold = mConfig.threshold;
    args.minRun = mConfig.minRun;
    args.rewrittenLogits = outputs[idx(LogitsOutput::kREWRITTEN_LOGITS)];
    if (!mStepHasContext)
    {
        // Only generation sequences: one token each, so no sequence has a draft row to rewrite. A copy
        // (no host-to-device transfer) also keeps CUDA-graph-captured steps capturable.
        size_t const rowsBytes = static_cast<size_t>(args.rows.numRows) * static_cast<size_t>(args.rows.vocabSize)
            * elementBytes(args.rows.logitsType);
        cudaError_t const status = rowsBytes == 0
            ? cudaSuccess
            : cudaMemcpyAsync(args.rewrittenLogits, args.rows.targetLogits, rowsBytes, cudaMemcpyDeviceToDevice, stream);
        return status == cudaSuccess
            ? 0
            : fail(ErrorCode::kFAILED_EXECUTION, std::string("logits-mode copy failed: ") + cudaGetErrorString(status));
    }
    auto* tokenEnds = reinterpret_cast<int32_t*>(
        static_cast<char*>(workspace) + tokenEndsWorkspaceOffset(args.rows.numRows, args.rows.vocabSize));
    cudaError_t status = cudaMemcpyAsync(
        tokenEnds, mTokenEnds.data(), mTokenEnds.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream);
    args.tokenEnds = tokenEnds;
    size_t const partialBytes = acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    if (status == cudaSuccess)
    {
        status = launchRewriteLogits(args, workspace, partialBytes, stream);
    }
    return status == cudaSuccess
        ? 0
        : fail(ErrorCode::kFAILED_EXECUTION, std::string("logits-mode launch failed: ") + cudaGetErrorString(status));
}

int32_t AutoJudgeAcceptPlugin::enqueueTreeLogits(nvinfer1::PluginTensorDesc const* inputDesc, void const* const* inputs,
    void* const* outputs, void* workspace, cudaStream_t stream)
{
    // draft_lens lives in device memory (the EAGLE engine computes it): the kernel checks that the requests'
    // rows add up to the logits rows and copies the step unchanged when they do not.
    RewriteTreeLogitsArgs args{};
    if (!nodeRowsOf(inputDesc, inputs, -1, mConfig, mDeviceWeight, args.rows))
    {
        return fail(ErrorCode::kINVALID_ARGUMENT, "target_logits and target_hidden must be float32, float16 or bfloat16");
    }
    Dims const& paths = inputDesc[idx(TreeLogitsInput::kPATHS)].dims;
    args.draftTokens = static_cast<int32_t const*>(inputs[idx(TreeLogitsInput::kDRAFT_TOKENS)]);
    args.draftLens = static_cast<int32_t const*>(inputs[idx(TreeLogitsInput::kDRAFT_LENS)]);
    args.paths = static_cast<int32_t const*>(inputs[idx(TreeLogitsInput::kPATHS)]);
    args.threshold = static_cast<float const*>(inputs[idx(TreeLogitsInput::kTHRESHOLD)]);
    args.greedyChild = mConfig.layout.windowTokens > 0
        ? static_cast<int32_t const*>(inputs[idx(TreeLogitsInput::kGREEDY_CHILD)])
        : nullptr;
    args.batchSize = static_cast<int32_t>(inputDesc[idx(TreeLogitsInput::kDRAFT_LENS)].dims.d[0]);
    args.numDraftNodes = static_cast<int32_t>(inputDesc[idx(TreeLogitsInput::kDRAFT_TOKENS)].dims.d[1]);
    args.numPaths = static_cast<int32_t>(paths.d[1]);
    args.maxPathLen = static_cast<int32_t>(paths.d[2]);
    args.minRun = mConfig.minRun;
    args.rewrittenLogits = outputs[idx(LogitsOutput::kREWRITTEN_LOGITS)];
    size_t const workspaceBytes = acceptWorkspaceBytes(args.rows.numRows, args.rows.vocabSize);
    cudaError_t const status = launchRewriteTreeLogits(args, workspace, workspaceBytes, stream);
    return status == cudaSuccess
        ? 0
        : fail(ErrorCode::kFAILED_EXECUTION, std::string("tree-logits-mode launch failed: ") + cudaGetErrorString(status));
}

nvinfer1::IPluginV3* AutoJudgeAcceptPlugin::attachToContext(nvinfer1::IPluginResourceContext* context) noexcept
{
    try
    {
        auto attached = std::make_unique<AutoJudgeAcceptPlugin>(*this);
        attached->mRecorder = context != nullptr ? context->getErrorRecorder() : nullptr;
        std::string error;
        if (!attached->uploadJudgeWeight(error))
        {
            attached->fail(ErrorCode::kFAILED_ALLOCATION, error);
            return nullptr;
        }
        return attached.release();
    }
    catch (std::exception const& e)
    {
        fail(ErrorCode::kINTERNAL_ERROR, std::string("attachToContext failed: ") + e.what());
        return nullptr;
    }
}

nvinfer1::PluginFieldCollection const* AutoJudgeAcceptPlugin::getFieldsToSerialize() noexcept
{
    return &mSerialCollection;
}

nvinfer1::IPluginV3* AutoJudgeAcceptPluginCreator::createPlugin(
    char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase /*phase*/) noexcept
{
    // Both phases get the same fields (the runtime phase gets getFieldsToSerialize's), validated alike.
    try
    {
        AcceptConfig config;
        std::string error;
        if (!parseAcceptConfig(fc, config, error))
        {
            nvinfer1::IPluginRegistry* registry = findPluginRegistry();
            reportError(registry != nullptr ? registry->getErrorRecorder() : nullptr, ErrorCode::kINVALID_ARGUMENT,
                std::string(kPluginName) + " '" + (name != nullptr ? name : "") + "': " + error);
            return nullptr;
        }
        std::string const warning = shortPathWarning(config);
        if (!warning.empty())
        {
            logMessage(nvinfer1::ILogger::Severity::kWARNING,
                std::string(kPluginName) + " '" + (name != nullptr ? name : "") + "': " + warning);
        }
        return new AutoJudgeAcceptPlugin(std::move(config));
    }
    catch (std::exception const& e)
    {
        reportError(nullptr, ErrorCode::kINTERNAL_ERROR, std::string(kPluginName) + ": createPlugin failed: " + e.what());
        return nullptr;
    }
}

nvinfer1::PluginFieldCollection const* AutoJudgeAcceptPluginCreator::getFieldNames() noexcept
{
    return acceptFieldNames();
}

char const* AutoJudgeAcceptPluginCreator::getPluginName() const noexcept
{
    return kPluginName;
}

char const* AutoJudgeAcceptPluginCreator::getPluginVersion() const noexcept
{
    return kPluginVersion;
}

char const* AutoJudgeAcceptPluginCreator::getPluginNamespace() const noexcept
{
    return kPluginNamespace;
}

} // namespace plugin
} // namespace autojudge
