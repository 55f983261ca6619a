#include "plugin/plugin_log.h"

#include <cstdio>
#include <dlfcn.h>
#include <mutex>

namespace autojudge
{
namespace plugin
{
namespace
{

struct LogSinks
{
    std::mutex mutex;
    nvinfer1::ILogger* logger{nullptr};
    nvinfer1::ILoggerFinder* finder{nullptr};
};

LogSinks& sinks()
{
    static LogSinks instance;
    return instance;
}

nvinfer1::ILogger* currentLogger()
{
    LogSinks& s = sinks();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.finder != nullptr)
    {
        if (nvinfer1::ILogger* found = s.finder->findLogger())
        {
            return found;
        }
    }
    return s.logger;
}

} // namespace

void setLogger(nvinfer1::ILogger* logger)
{
    if (logger != nullptr)
    {
        std::lock_guard<std::mutex> lock(sinks().mutex);
        sinks().logger = logger;
    }
}

void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    std::lock_guard<std::mutex> lock(sinks().mutex);
    sinks().finder = finder;
}

void logMessage(nvinfer1::ILogger::Severity severity, std::string const& message)
{
    if (nvinfer1::ILogger* logger = currentLogger())
    {
        logger->log(severity, message.c_str());
    }
    else if (severity <= nvinfer1::ILogger::Severity::kWARNING)
    {
        std::fprintf(stderr, "%s\n", message.c_str());
    }
}

void reportError(nvinfer1::IErrorRecorder* recorder, nvinfer1::ErrorCode code, std::string const& message)
{
    if (recorder != nullptr)
    {
        recorder->reportError(code, message.c_str());
    }
    logMessage(nvinfer1::ILogger::Severity::kERROR, message);
}

nvinfer1::IPluginRegistry* findPluginRegistry()
{
    using GetRegistry = nvinfer1::IPluginRegistry* (*) ();
    void* symbol = dlsym(RTLD_DEFAULT, "getPluginRegistry");
    for (char const* library : {"libnvinfer.so.10", "libnvinfer.so"})
    {
        if (symbol != nullptr)
        {
            break;
        }
        // Python's tensorrt module loads libnvinfer privately (RTLD_LOCAL): reach it by name.
        if (void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD))
        {
            symbol = dlsym(handle, "getPluginRegistry");
            dlclose(handle);
        }
    }
    return symbol != nullptr ? reinterpret_cast<GetRegistry>(symbol)() : nullptr;
}

} // namespace plugin
} // namespace autojudge
