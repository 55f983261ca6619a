/*
 * Where the plugin library's messages go: the TensorRT logger (given to initAutoJudgePlugins, or
 * found through the ILoggerFinder that TensorRT passes to setLoggerFinder), and the error recorder
 * of the call site (the execution context's in enqueue, the plugin registry's in createPlugin).
 * With neither a logger nor a recorder, errors go to stderr, so none is lost.
 */
#pragma once

#include <NvInferRuntime.h>

#include <string>

namespace autojudge
{
namespace plugin
{

//! The logger passed to initAutoJudgePlugins (nullptr leaves the current one).
void setLogger(nvinfer1::ILogger* logger);

//! The logger finder passed by TensorRT when it loads the library (IPluginRegistry::loadLibrary).
void setLoggerFinder(nvinfer1::ILoggerFinder* finder);

void logMessage(nvinfer1::ILogger::Severity severity, std::string const& message);

//! Record `message` in `recorder` (when not nullptr) and log it as an error.
void reportError(nvinfer1::IErrorRecorder* recorder, nvinfer1::ErrorCode code, std::string const& message);

//! TensorRT's plugin registry of this process, looked up at run time (the library does not link
//! libnvinfer): nullptr when TensorRT is not loaded.
nvinfer1::IPluginRegistry* findPluginRegistry();

} // namespace plugin
} // namespace autojudge
