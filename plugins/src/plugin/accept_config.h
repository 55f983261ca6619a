/*
 * The plugin fields of AutoJudgeAccept (plugins/README.md, "Fields"): parsed and validated once,
 * at createPlugin in both phases, and serialized back as the same fields.
 */
#pragma once

#include "autojudge/accept_core.h"

#include <NvInferRuntime.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace autojudge
{
namespace plugin
{

//! What the plugin returns: the acceptance of each sequence, or the target logits rewritten.
enum class OutputMode : int32_t
{
    kACCEPT = 0, //!< accepted_tokens, accepted_lens, best_path, judged_count
    kLOGITS = 1, //!< rewritten target logits for an exact-match decoder (TRTLLM.md route 1)
};

struct AcceptConfig
{
    std::vector<float> judgeWeight;  //!< [feature_size] folded w = coef / scale, draft block first
    float judgeBias{0.f};            //!< folded c
    FeatureSetup featureSetup{FeatureSetup::kDT};
    int32_t targetHidden{0};         //!< Ht
    int32_t draftHidden{0};          //!< Hd, 0 for DT
    int32_t maxPathLen{1};           //!< D + 1 (accept mode)
    OutputMode outputMode{OutputMode::kACCEPT};
    float threshold{0.5f};           //!< the judge's threshold in logits mode (not read in accept mode)

    int32_t featureSize() const
    {
        return (featureSetup == FeatureSetup::kDD_DT ? draftHidden : 0) + targetHidden;
    }
};

//! Parse and validate `fields`. On failure returns false and sets `error` to a message that names
//! the field and says what to change.
bool parseAcceptConfig(nvinfer1::PluginFieldCollection const* fields, AcceptConfig& config, std::string& error);

//! The int32 codes of feature_setup and output_mode, which the serialized fields point into.
using EnumFieldStorage = std::array<int32_t, 2>;

//! The fields of `config`; their data points into `config` and `enumStorage`, which must outlive them.
std::vector<nvinfer1::PluginField> acceptConfigFields(AcceptConfig const& config, EnumFieldStorage& enumStorage);

//! Names and types of every field, for IPluginCreatorV3One::getFieldNames.
nvinfer1::PluginFieldCollection const* acceptFieldNames();

//! "feature_setup=DT target_hidden=4096 ..." for logs and the engine inspector.
std::string describeAcceptConfig(AcceptConfig const& config);

} // namespace plugin
} // namespace autojudge
