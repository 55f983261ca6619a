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
    kTREE_LOGITS = 2, //!< rewritten lm_logits of a TensorRT-LLM EAGLE engine step (tree rows per request)
};

struct AcceptConfig
{
    std::vector<float> judgeWeight;     //!< [feature_size] folded w = coef / scale, the blocks' features in order
    float judgeBias{0.f};               //!< folded c
    std::vector<int32_t> featureBlocks; //!< [K] FeatureBlock codes of the judge's blocks, in weight order
    JudgeLayout layout{};               //!< where each block's weights lie (featureBlocks and the hidden sizes)
    int32_t targetHidden{0};            //!< Ht
    int32_t draftHidden{0};             //!< Hd, 0 when no block reads the draft
    int32_t maxPathLen{1};              //!< D + 1 (accept and tree logits modes)
    OutputMode outputMode{OutputMode::kACCEPT};
    float threshold{0.5f};              //!< the judge's threshold in logits mode (not read in accept mode)
    int32_t minRun{1};                  //!< the judge's minimum run (accept_core.h), 1 = none (an absent field)
};

//! Parse and validate `fields`. On failure returns false and sets `error` to a message that names
//! the field and says what to change. A field set of the first contract (`feature_setup` 0 = DT or
//! 1 = DD-DT instead of `feature_blocks`) is accepted and becomes the same blocks.
bool parseAcceptConfig(nvinfer1::PluginFieldCollection const* fields, AcceptConfig& config, std::string& error);

//! A warning for a lookahead judge whose paths are too short for any node to get a verdict (every
//! node then lacks the draft tokens its blocks need after it); empty when there is none.
std::string shortPathWarning(AcceptConfig const& config);

//! The int32 code of output_mode, which the serialized fields point into.
using EnumFieldStorage = std::array<int32_t, 1>;

//! The fields of `config` (feature_blocks, never the legacy feature_setup); their data points into
//! `config` and `enumStorage`, which must outlive them.
std::vector<nvinfer1::PluginField> acceptConfigFields(AcceptConfig const& config, EnumFieldStorage& enumStorage);

//! Names and types of every field the creator accepts (the legacy feature_setup included), for
//! IPluginCreatorV3One::getFieldNames.
nvinfer1::PluginFieldCollection const* acceptFieldNames();

//! The judge's setup, e.g. "DD-DT-LS", from its block codes.
std::string setupName(std::vector<int32_t> const& featureBlocks);

//! "feature_blocks=DT target_hidden=4096 ..." for logs and the engine inspector.
std::string describeAcceptConfig(AcceptConfig const& config);

} // namespace plugin
} // namespace autojudge
