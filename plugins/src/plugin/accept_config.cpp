#include "plugin/accept_config.h"

#include "autojudge/accept_launch.h"

#include <array>
#include <cstring>
#include <sstream>

namespace autojudge
{
namespace plugin
{
namespace
{

using nvinfer1::PluginField;
using nvinfer1::PluginFieldType;

enum FieldId : int32_t
{
    kJUDGE_WEIGHT = 0,
    kJUDGE_BIAS,
    kFEATURE_BLOCKS,
    kTARGET_HIDDEN,
    kDRAFT_HIDDEN,
    kMAX_PATH_LEN,
    kOUTPUT_MODE,
    kTHRESHOLD,
    kMIN_RUN,
    kFEATURE_SETUP, //!< the first contract's setup field, accepted and never serialized
    kNUM_FIELDS
};

struct FieldSpec
{
    char const* name;
    PluginFieldType type;
    bool scalar;
    char const* meaning;
};

constexpr std::array<FieldSpec, kNUM_FIELDS> kFieldSpecs{{
    {"judge_weight", PluginFieldType::kFLOAT32, false,
        "float32 [F]: the folded judge weights coef / scale, the blocks' features in feature_blocks order"},
    {"judge_bias", PluginFieldType::kFLOAT32, true, "float32 [1]: the folded judge bias"},
    {"feature_blocks", PluginFieldType::kINT32, false,
        "int32 [K]: the judge's blocks in weight order, 0 DT, 1 DD, 2 DT1, 3 DT2, 4 DD1, 5 LS"},
    {"target_hidden", PluginFieldType::kINT32, true, "int32 [1]: the target's hidden size Ht"},
    {"draft_hidden", PluginFieldType::kINT32, true,
        "int32 [1]: the draft's hidden size Hd, 0 when no block reads the draft (DD, DD1)"},
    {"max_path_len", PluginFieldType::kINT32, true, "int32 [1]: D + 1, the columns of paths and accepted_tokens"},
    {"output_mode", PluginFieldType::kINT32, true, "int32 [1]: 0 = accept, 1 = logits, 2 = tree logits"},
    {"threshold", PluginFieldType::kFLOAT32, true, "float32 [1]: the judge threshold of logits mode, in [0, 1]"},
    {"min_run", PluginFieldType::kINT32, true,
        "int32 [1]: the judge's minimum run, >= 1: a mismatch whose exact run is shorter is never judged (1 = none, "
        "the default when absent)"},
    {"feature_setup", PluginFieldType::kINT32, true,
        "int32 [1]: the first contract's setup, 0 = DT, 1 = DD-DT (feature_blocks replaces it)"},
}};

char const* typeName(PluginFieldType type)
{
    switch (type)
    {
    case PluginFieldType::kFLOAT16: return "float16";
    case PluginFieldType::kFLOAT32: return "float32";
    case PluginFieldType::kFLOAT64: return "float64";
    case PluginFieldType::kINT8: return "int8";
    case PluginFieldType::kINT16: return "int16";
    case PluginFieldType::kINT32: return "int32";
    case PluginFieldType::kCHAR: return "char";
    case PluginFieldType::kDIMS: return "Dims";
    case PluginFieldType::kBF16: return "bfloat16";
    case PluginFieldType::kINT64: return "int64";
    default: return "another type";
    }
}

std::string fieldList()
{
    std::string names;
    for (FieldSpec const& spec : kFieldSpecs)
    {
        names += names.empty() ? "" : ", ";
        names += spec.name;
    }
    return names;
}

std::string missing(FieldId id, char const* why)
{
    FieldSpec const& spec = kFieldSpecs[id];
    return std::string("missing field '") + spec.name + "' (" + spec.meaning + ")" + why;
}

int32_t readInt(PluginField const* field)
{
    int32_t value;
    std::memcpy(&value, field->data, sizeof(value));
    return value;
}

float readFloat(PluginField const* field)
{
    float value;
    std::memcpy(&value, field->data, sizeof(value));
    return value;
}

//! Collect the fields by name, checking names, types and lengths.
bool collectFields(nvinfer1::PluginFieldCollection const* fields, std::array<PluginField const*, kNUM_FIELDS>& found,
    std::string& error)
{
    if (fields == nullptr || fields->nbFields < 0 || (fields->nbFields > 0 && fields->fields == nullptr))
    {
        error = "no field collection given; the fields are " + fieldList();
        return false;
    }
    for (int32_t i = 0; i < fields->nbFields; ++i)
    {
        PluginField const& field = fields->fields[i];
        int32_t id = 0;
        while (id < kNUM_FIELDS && (field.name == nullptr || std::strcmp(field.name, kFieldSpecs[id].name) != 0))
        {
            ++id;
        }
        if (id == kNUM_FIELDS)
        {
            error = std::string("unknown field '") + (field.name ? field.name : "(no name)") + "'; the fields are "
                + fieldList();
            return false;
        }
        FieldSpec const& spec = kFieldSpecs[id];
        std::ostringstream problem;
        if (found[id] != nullptr)
        {
            problem << "field '" << spec.name << "' is given twice";
        }
        else if (field.type != spec.type)
        {
            problem << "field '" << spec.name << "' must be " << typeName(spec.type) << " (" << spec.meaning
                    << "), got " << typeName(field.type);
        }
        else if (field.length < 1 || field.data == nullptr)
        {
            problem << "field '" << spec.name << "' is empty; it must hold " << spec.meaning;
        }
        else if (spec.scalar && field.length != 1)
        {
            problem << "field '" << spec.name << "' must hold 1 value, got " << field.length;
        }
        if (!problem.str().empty())
        {
            error = problem.str();
            return false;
        }
        found[id] = &field;
    }
    return true;
}

} // namespace

namespace
{

//! The judge's block codes from feature_blocks, or from the legacy feature_setup; false with `error`.
bool readFeatureBlocks(PluginField const* blocks, PluginField const* legacySetup, std::vector<int32_t>& codes,
    std::string& error)
{
    if (blocks != nullptr && legacySetup != nullptr)
    {
        error = "fields 'feature_blocks' and 'feature_setup' are both given: give feature_blocks only (feature_setup "
                "is the first contract's name for the blocks DT or DD-DT)";
        return false;
    }
    if (legacySetup != nullptr)
    {
        int32_t const setup = readInt(legacySetup);
        if (setup != 0 && setup != 1)
        {
            error = "field 'feature_setup' is " + std::to_string(setup)
                + "; it must be 0 (DT) or 1 (DD-DT): give feature_blocks for any other setup";
            return false;
        }
        codes = setup == 0 ? std::vector<int32_t>{static_cast<int32_t>(FeatureBlock::kDT)}
                           : std::vector<int32_t>{static_cast<int32_t>(FeatureBlock::kDD), static_cast<int32_t>(FeatureBlock::kDT)};
        return true;
    }
    if (blocks == nullptr)
    {
        error = missing(kFEATURE_BLOCKS, "");
        return false;
    }
    codes.resize(blocks->length);
    std::memcpy(codes.data(), blocks->data, codes.size() * sizeof(int32_t));
    for (size_t i = 0; i < codes.size(); ++i)
    {
        if (featureBlockName(codes[i]) == nullptr)
        {
            error = "field 'feature_blocks' holds " + std::to_string(codes[i]) + " at index " + std::to_string(i)
                + "; the block codes are " + kFieldSpecs[kFEATURE_BLOCKS].meaning;
            return false;
        }
        for (size_t j = 0; j < i; ++j)
        {
            if (codes[j] == codes[i])
            {
                error = std::string("field 'feature_blocks' names block ") + featureBlockName(codes[i])
                    + " twice: each block appears once";
                return false;
            }
        }
    }
    return true;
}

//! "DD: 4096, DT: 4096, LS: 6" for the weight-length message.
std::string blockWidths(AcceptConfig const& config)
{
    std::string text;
    for (int32_t code : config.featureBlocks)
    {
        auto const block = static_cast<FeatureBlock>(code);
        text += (text.empty() ? "" : ", ") + std::string(featureBlockName(code)) + ": "
            + std::to_string(blockWidth(block, config.targetHidden, config.draftHidden));
    }
    return text;
}

} // namespace

bool parseAcceptConfig(nvinfer1::PluginFieldCollection const* fields, AcceptConfig& config, std::string& error)
{
    std::array<PluginField const*, kNUM_FIELDS> found{};
    if (!collectFields(fields, found, error))
    {
        return false;
    }
    for (FieldId id : {kJUDGE_WEIGHT, kJUDGE_BIAS, kTARGET_HIDDEN})
    {
        if (found[id] == nullptr)
        {
            error = missing(id, "");
            return false;
        }
    }
    AcceptConfig parsed;
    if (!readFeatureBlocks(found[kFEATURE_BLOCKS], found[kFEATURE_SETUP], parsed.featureBlocks, error))
    {
        return false;
    }
    std::string const setup = setupName(parsed.featureBlocks);
    bool readsDraftHidden = false;
    for (int32_t code : parsed.featureBlocks)
    {
        readsDraftHidden = readsDraftHidden || blockReadsDraft(static_cast<FeatureBlock>(code));
    }
    int32_t const mode = found[kOUTPUT_MODE] ? readInt(found[kOUTPUT_MODE]) : 0;
    if (mode < 0 || mode > 2)
    {
        error = "field 'output_mode' is " + std::to_string(mode) + "; it must be 0 (accept), 1 (logits) or 2 (tree "
                "logits)";
        return false;
    }
    parsed.outputMode = static_cast<OutputMode>(mode);
    bool const isLogitsMode = parsed.outputMode == OutputMode::kLOGITS;
    if (parsed.outputMode == OutputMode::kTREE_LOGITS && readsDraftHidden)
    {
        error = "feature_blocks " + setup + " read the draft's hidden states (DD, DD1), which an EAGLE engine step "
                "does not have: output_mode 2 (tree logits) runs target-only judges (DT, DT1, DT2, LS)";
        return false;
    }
    if (readsDraftHidden && found[kDRAFT_HIDDEN] == nullptr)
    {
        error = missing(kDRAFT_HIDDEN, (", which feature_blocks " + setup + " needs").c_str());
        return false;
    }
    if (!isLogitsMode && found[kMAX_PATH_LEN] == nullptr)
    {
        error = missing(kMAX_PATH_LEN, ", which output_modes 0 (accept) and 2 (tree logits) need");
        return false;
    }
    if (isLogitsMode && found[kTHRESHOLD] == nullptr)
    {
        error = missing(kTHRESHOLD, ", which output_mode 1 (logits) needs: it has no per-request threshold input");
        return false;
    }

    parsed.targetHidden = readInt(found[kTARGET_HIDDEN]);
    if (parsed.targetHidden < 1)
    {
        error = "field 'target_hidden' is " + std::to_string(parsed.targetHidden)
            + "; it must be the target's hidden size (>= 1)";
        return false;
    }
    parsed.draftHidden = found[kDRAFT_HIDDEN] ? readInt(found[kDRAFT_HIDDEN]) : 0;
    if (readsDraftHidden && parsed.draftHidden < 1)
    {
        error = "field 'draft_hidden' is " + std::to_string(parsed.draftHidden) + "; feature_blocks " + setup
            + " reads the draft's hidden states (DD, DD1) and needs the draft's hidden size (>= 1)";
        return false;
    }
    if (!readsDraftHidden && parsed.draftHidden != 0)
    {
        error = "field 'draft_hidden' is " + std::to_string(parsed.draftHidden) + "; feature_blocks " + setup
            + " reads no draft hidden state: set it to 0";
        return false;
    }
    if (found[kMAX_PATH_LEN])
    {
        parsed.maxPathLen = readInt(found[kMAX_PATH_LEN]);
        if (parsed.maxPathLen < 1 || parsed.maxPathLen > kMaxTreeNodes)
        {
            error = "field 'max_path_len' is " + std::to_string(parsed.maxPathLen) + "; it must lie in [1, "
                + std::to_string(kMaxTreeNodes) + "] (D + 1: the root and at most D draft nodes per path)";
            return false;
        }
    }
    if (found[kTHRESHOLD])
    {
        parsed.threshold = readFloat(found[kTHRESHOLD]);
        if (!(parsed.threshold >= 0.f && parsed.threshold <= 1.f))
        {
            error = "field 'threshold' is " + std::to_string(parsed.threshold)
                + "; it must lie in [0, 1] (the largest probability of 'important' still accepted)";
            return false;
        }
    }

    if (found[kMIN_RUN])
    {
        parsed.minRun = readInt(found[kMIN_RUN]);
        if (parsed.minRun < 1)
        {
            error = "field 'min_run' is " + std::to_string(parsed.minRun)
                + "; it must be >= 1 (the judge's minimum run, 1 = none): export the fields again from the judge file";
            return false;
        }
    }

    makeJudgeLayout(parsed.featureBlocks.data(), static_cast<int32_t>(parsed.featureBlocks.size()), parsed.targetHidden,
        parsed.draftHidden, parsed.layout); // the blocks and sizes are valid: checked above
    PluginField const* weight = found[kJUDGE_WEIGHT];
    if (weight->length != parsed.layout.featureSize)
    {
        error = "field 'judge_weight' holds " + std::to_string(weight->length) + " values, but feature_blocks " + setup
            + " with target_hidden " + std::to_string(parsed.targetHidden) + " and draft_hidden "
            + std::to_string(parsed.draftHidden) + " needs " + std::to_string(parsed.layout.featureSize) + " ("
            + blockWidths(parsed) + "): export the fields again from the judge file";
        return false;
    }
    parsed.judgeWeight.resize(weight->length);
    std::memcpy(parsed.judgeWeight.data(), weight->data, weight->length * sizeof(float));
    for (size_t i = 0; i < parsed.judgeWeight.size(); ++i)
    {
        if (!isFiniteFloat(parsed.judgeWeight[i]))
        {
            error = "field 'judge_weight' holds NaN or inf at index " + std::to_string(i)
                + ": export the fields again from a valid judge file";
            return false;
        }
    }
    parsed.judgeBias = readFloat(found[kJUDGE_BIAS]);
    if (!isFiniteFloat(parsed.judgeBias))
    {
        error = "field 'judge_bias' is NaN or inf: export the fields again from a valid judge file";
        return false;
    }
    config = std::move(parsed);
    return true;
}

std::string shortPathWarning(AcceptConfig const& config)
{
    int32_t const window = config.layout.windowTokens;
    int32_t const depth = config.maxPathLen - 1;
    // logits mode without max_path_len keeps the default 1: the engine's draft length is unknown then
    bool const known = config.outputMode != OutputMode::kLOGITS || config.maxPathLen > 1;
    if (window == 0 || !known || depth > window)
    {
        return "";
    }
    return "feature_blocks " + setupName(config.featureBlocks) + " need " + std::to_string(window)
        + " draft tokens after a node for a verdict, and max_path_len " + std::to_string(config.maxPathLen)
        + " (paths of at most " + std::to_string(depth)
        + " draft tokens) leaves no node any: the judge never gives a verdict and only exact matches are accepted; "
          "draft at least "
        + std::to_string(window + 1) + " tokens per path (max_path_len >= " + std::to_string(window + 2) + ")";
}

std::vector<PluginField> acceptConfigFields(AcceptConfig const& config, EnumFieldStorage& enumStorage)
{
    enumStorage = {static_cast<int32_t>(config.outputMode)};
    return {
        PluginField(kFieldSpecs[kJUDGE_WEIGHT].name, config.judgeWeight.data(), PluginFieldType::kFLOAT32,
            static_cast<int32_t>(config.judgeWeight.size())),
        PluginField(kFieldSpecs[kJUDGE_BIAS].name, &config.judgeBias, PluginFieldType::kFLOAT32, 1),
        PluginField(kFieldSpecs[kFEATURE_BLOCKS].name, config.featureBlocks.data(), PluginFieldType::kINT32,
            static_cast<int32_t>(config.featureBlocks.size())),
        PluginField(kFieldSpecs[kTARGET_HIDDEN].name, &config.targetHidden, PluginFieldType::kINT32, 1),
        PluginField(kFieldSpecs[kDRAFT_HIDDEN].name, &config.draftHidden, PluginFieldType::kINT32, 1),
        PluginField(kFieldSpecs[kMAX_PATH_LEN].name, &config.maxPathLen, PluginFieldType::kINT32, 1),
        PluginField(kFieldSpecs[kOUTPUT_MODE].name, &enumStorage[0], PluginFieldType::kINT32, 1),
        PluginField(kFieldSpecs[kTHRESHOLD].name, &config.threshold, PluginFieldType::kFLOAT32, 1),
        PluginField(kFieldSpecs[kMIN_RUN].name, &config.minRun, PluginFieldType::kINT32, 1),
    };
}

nvinfer1::PluginFieldCollection const* acceptFieldNames()
{
    static std::vector<PluginField> const names = [] {
        std::vector<PluginField> list;
        for (FieldSpec const& spec : kFieldSpecs)
        {
            list.emplace_back(spec.name, nullptr, spec.type, spec.scalar ? 1 : 0);
        }
        return list;
    }();
    static nvinfer1::PluginFieldCollection const collection{static_cast<int32_t>(names.size()), names.data()};
    return &collection;
}

std::string setupName(std::vector<int32_t> const& featureBlocks)
{
    std::string name;
    for (int32_t code : featureBlocks)
    {
        char const* block = featureBlockName(code);
        name += (name.empty() ? "" : "-") + std::string(block != nullptr ? block : "?");
    }
    return name;
}

std::string describeAcceptConfig(AcceptConfig const& config)
{
    std::ostringstream text;
    text << "feature_blocks=" << setupName(config.featureBlocks) << " target_hidden=" << config.targetHidden
         << " draft_hidden=" << config.draftHidden << " max_path_len=" << config.maxPathLen
         << " output_mode="
         << (config.outputMode == OutputMode::kLOGITS ? "logits"
                 : config.outputMode == OutputMode::kTREE_LOGITS ? "tree_logits" : "accept")
         << " threshold=" << config.threshold << " min_run=" << config.minRun;
    return text.str();
}

} // namespace plugin
} // namespace autojudge
