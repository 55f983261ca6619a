/*
 * Entry points of libautojudge_trt_plugin.so:
 *   initAutoJudgePlugins(logger, ns)  ctypes loading, TensorRT-LLM style: registers the creator with
 *                                     the process's TensorRT plugin registry.
 *   getCreators / setLoggerFinder     IPluginRegistry::loadLibrary, trtexec --dynamicPlugins and
 *                                     version-compatible engines (TensorRT's plugin-library convention).
 *   AUTOJUDGE_REGISTER_ON_LOAD=1      registers the creator when the library is loaded, e.g. with
 *                                     LD_PRELOAD into tritonserver, whose tensorrtllm backend calls none
 *                                     of the above before it deserializes an engine.
 */
#include "plugin/autojudge_accept_plugin.h"
#include "plugin/plugin_log.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

#define AUTOJUDGE_EXPORT extern "C" __attribute__((visibility("default")))

namespace
{

autojudge::plugin::AutoJudgeAcceptPluginCreator& creator()
{
    static autojudge::plugin::AutoJudgeAcceptPluginCreator instance;
    return instance;
}

} // namespace

AUTOJUDGE_EXPORT bool initAutoJudgePlugins(void* logger, char const* ns)
{
    using namespace autojudge::plugin;
    setLogger(static_cast<nvinfer1::ILogger*>(logger));
    if (ns != nullptr && ns[0] != '\0' && std::strcmp(ns, kPluginNamespace) != 0)
    {
        reportError(nullptr, nvinfer1::ErrorCode::kINVALID_ARGUMENT,
            std::string("initAutoJudgePlugins: the plugins of this library live in namespace '") + kPluginNamespace
                + "'; pass '" + kPluginNamespace + "' (or an empty namespace), not '" + ns + "'");
        return false;
    }
    nvinfer1::IPluginRegistry* registry = findPluginRegistry();
    if (registry == nullptr)
    {
        reportError(nullptr, nvinfer1::ErrorCode::kFAILED_INITIALIZATION,
            "initAutoJudgePlugins: TensorRT's plugin registry is not loaded in this process: import tensorrt (or "
            "load libnvinfer) first, or load this library with IPluginRegistry::loadLibrary / trtexec "
            "--dynamicPlugins");
        return false;
    }
    if (registry->getCreator(kPluginName, kPluginVersion, kPluginNamespace) == &creator())
    {
        return true;
    }
    if (!registry->registerCreator(creator(), kPluginNamespace))
    {
        reportError(nullptr, nvinfer1::ErrorCode::kFAILED_INITIALIZATION,
            std::string("initAutoJudgePlugins: the registry refused ") + kPluginNamespace + "::" + kPluginName
                + " version " + kPluginVersion + " (another library registered the same name and version?)");
        return false;
    }
    logMessage(nvinfer1::ILogger::Severity::kVERBOSE,
        std::string("registered ") + kPluginNamespace + "::" + kPluginName + " version " + kPluginVersion);
    return true;
}

AUTOJUDGE_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    static nvinfer1::IPluginCreatorInterface* const creators[] = {&creator()};
    nbCreators = 1;
    return creators;
}

AUTOJUDGE_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    autojudge::plugin::setLoggerFinder(finder);
}

namespace
{

//! AUTOJUDGE_REGISTER_ON_LOAD=1: register at load time. A preloaded library is loaded before
//! TensorRT, so libnvinfer is loaded here first when the process has no plugin registry yet (the
//! backend's own later load of the same library then finds it loaded).
__attribute__((constructor)) void registerOnLoad()
{
    char const* flag = std::getenv("AUTOJUDGE_REGISTER_ON_LOAD");
    if (flag == nullptr || std::strcmp(flag, "1") != 0)
    {
        return;
    }
    if (autojudge::plugin::findPluginRegistry() == nullptr)
    {
        dlopen("libnvinfer.so.10", RTLD_NOW | RTLD_GLOBAL); // kept loaded for the process's lifetime
    }
    initAutoJudgePlugins(nullptr, autojudge::plugin::kPluginNamespace);
}

} // namespace

