/*
 * Host harness of libautojudge_trt_plugin.so: dlopens the library (no libnvinfer in the process)
 * and exercises the plugin's host-side methods against the contract of plugins/README.md.
 *
 *   autojudge_plugin_harness <libautojudge_trt_plugin.so> list
 *   autojudge_plugin_harness <libautojudge_trt_plugin.so> <check> [<check> ...]
 *
 * Prints "PASS <check>" or "FAIL <check>: <why>" per check; exits non-zero if any failed.
 * TensorRT's registry, logger, error recorder, resource context and dimension-expression builder
 * are provided here as small recording implementations of the real interfaces (this executable
 * exports getPluginRegistry, which the plugin looks up at run time as it would in libnvinfer).
 */
#include <NvInferRuntime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace nvinfer1;

namespace
{

// ---------------------------------------------------------------------------------------------
// Recording implementations of the TensorRT interfaces the plugin talks to.

class RecordingLogger : public ILogger
{
public:
    void log(Severity severity, char const* message) noexcept override
    {
        entries.emplace_back(severity, message);
    }

    bool hasError(std::string const& text) const
    {
        for (auto const& [severity, message] : entries)
        {
            if (severity <= Severity::kERROR && message.find(text) != std::string::npos)
            {
                return true;
            }
        }
        return false;
    }

    std::string lastError() const
    {
        for (auto it = entries.rbegin(); it != entries.rend(); ++it)
        {
            if (it->first <= Severity::kERROR)
            {
                return it->second;
            }
        }
        return "(no error logged)";
    }

    std::vector<std::pair<Severity, std::string>> entries;
};

class RecordingErrorRecorder : public IErrorRecorder
{
public:
    int32_t getNbErrors() const noexcept override
    {
        return static_cast<int32_t>(mErrors.size());
    }
    ErrorCode getErrorCode(int32_t index) const noexcept override
    {
        return mErrors.at(index).first;
    }
    ErrorDesc getErrorDesc(int32_t index) const noexcept override
    {
        return mErrors.at(index).second.c_str();
    }
    bool hasOverflowed() const noexcept override
    {
        return false;
    }
    void clear() noexcept override
    {
        mErrors.clear();
    }
    bool reportError(ErrorCode code, ErrorDesc description) noexcept override
    {
        mErrors.emplace_back(code, description);
        return true;
    }
    RefCount incRefCount() noexcept override
    {
        return ++mRefs;
    }
    RefCount decRefCount() noexcept override
    {
        return --mRefs;
    }

    bool has(ErrorCode code, std::string const& text) const
    {
        for (auto const& [recorded, message] : mErrors)
        {
            if (recorded == code && message.find(text) != std::string::npos)
            {
                return true;
            }
        }
        return false;
    }

private:
    std::vector<std::pair<ErrorCode, std::string>> mErrors;
    RefCount mRefs{0};
};

class RecordingRegistry : public IPluginRegistry
{
public:
    bool registerCreator(IPluginCreatorInterface& creator, AsciiChar const* const ns) noexcept override
    {
        auto* v3 = dynamic_cast<IPluginCreatorV3One*>(&creator);
        if (v3 == nullptr || getCreator(v3->getPluginName(), v3->getPluginVersion(), ns) != nullptr)
        {
            return false;
        }
        mCreators.push_back({v3, ns});
        mAll.push_back(&creator);
        return true;
    }
    IPluginCreatorInterface* getCreator(AsciiChar const* const name, AsciiChar const* const version,
        AsciiChar const* const ns) noexcept override
    {
        for (auto const& entry : mCreators)
        {
            if (std::strcmp(entry.creator->getPluginName(), name) == 0
                && std::strcmp(entry.creator->getPluginVersion(), version) == 0 && entry.ns == ns)
            {
                return entry.creator;
            }
        }
        return nullptr;
    }
    IPluginCreatorInterface* const* getAllCreators(int32_t* const count) const noexcept override
    {
        *count = static_cast<int32_t>(mAll.size());
        return mAll.data();
    }
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return const_cast<RecordingErrorRecorder*>(&recorder);
    }
    size_t size() const
    {
        return mCreators.size();
    }

    // The rest of the interface is not used by the plugin library.
    bool registerCreator(IPluginCreator&, AsciiChar const* const) noexcept override
    {
        return false;
    }
    IPluginCreator* const* getPluginCreatorList(int32_t* const count) const noexcept override
    {
        *count = 0;
        return nullptr;
    }
    IPluginCreator* getPluginCreator(AsciiChar const* const, AsciiChar const* const, AsciiChar const* const) noexcept override
    {
        return nullptr;
    }
    void setErrorRecorder(IErrorRecorder* const) noexcept override {}
    bool deregisterCreator(IPluginCreator const&) noexcept override
    {
        return false;
    }
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(AsciiChar const*) noexcept override
    {
        return nullptr;
    }
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool deregisterCreator(IPluginCreatorInterface const&) noexcept override
    {
        return false;
    }
    IPluginResource* acquirePluginResource(AsciiChar const*, IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(AsciiChar const*) noexcept override
    {
        return -1;
    }
    IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const count) noexcept override
    {
        return getAllCreators(count);
    }

    RecordingErrorRecorder recorder;

private:
    struct Entry
    {
        IPluginCreatorV3One* creator;
        std::string ns;
    };
    std::vector<Entry> mCreators;
    std::vector<IPluginCreatorInterface*> mAll;
};

RecordingRegistry gRegistry;

class ResourceContext : public IPluginResourceContext
{
public:
    IGpuAllocator* getGpuAllocator() const noexcept override
    {
        return nullptr;
    }
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return const_cast<RecordingErrorRecorder*>(&recorder);
    }
    RecordingErrorRecorder recorder;
};

//! A dimension expression: a constant, or a named symbol / symbolic operation.
class Expr : public IDimensionExpr
{
public:
    Expr(std::string text, int64_t value, bool constant)
        : mText(std::move(text))
        , mValue(value)
        , mConstant(constant)
    {
        mBacking.owner = this;
        mImpl = &mBacking;
    }
    ~Expr() override = default;

    std::string const& text() const
    {
        return mText;
    }

private:
    struct Backing : apiv::VDimensionExpr
    {
        Expr const* owner{nullptr};
        bool isConstant() const override
        {
            return owner->mConstant;
        }
        int64_t getConstantValue() const override
        {
            return owner->mValue;
        }
        bool isSizeTensor() const override
        {
            return false;
        }
    };
    std::string mText;
    int64_t mValue;
    bool mConstant;
    Backing mBacking;
};

class ExprBuilder : public IExprBuilder
{
public:
    ExprBuilder()
    {
        mBacking.owner = this;
        mImpl = &mBacking;
    }
    ~ExprBuilder() override = default;

    Expr const* symbol(std::string const& name)
    {
        mExprs.push_back(std::make_unique<Expr>(name, -1, false));
        return mExprs.back().get();
    }
    Expr const* makeConstant(int64_t value)
    {
        mExprs.push_back(std::make_unique<Expr>(std::to_string(value), value, true));
        return mExprs.back().get();
    }

private:
    struct Backing : apiv::VExprBuilder
    {
        ExprBuilder* owner{nullptr};
        IDimensionExpr const* constant(int64_t value) override
        {
            return owner->makeConstant(value);
        }
        IDimensionExpr const* operation(DimensionOperation, IDimensionExpr const& a, IDimensionExpr const& b) override
        {
            auto const& left = static_cast<Expr const&>(a);
            auto const& right = static_cast<Expr const&>(b);
            return owner->symbol("(" + left.text() + " op " + right.text() + ")");
        }
        IDimensionExpr const* declareSizeTensor(int32_t, IDimensionExpr const&, IDimensionExpr const&) override
        {
            return nullptr;
        }
    };
    Backing mBacking;
    std::deque<std::unique_ptr<Expr>> mExprs;
};

} // namespace

extern "C" __attribute__((visibility("default"))) IPluginRegistry* getPluginRegistry() noexcept
{
    return &gRegistry;
}

namespace
{

// ---------------------------------------------------------------------------------------------
// Plugin fields.

class Fields
{
public:
    void floats(std::string const& name, std::vector<float> values)
    {
        remove(name);
        mFloats.push_back(std::move(values));
        mFields.push_back({name, mFloats.back().data(), PluginFieldType::kFLOAT32, mFloats.back().size()});
    }
    void ints(std::string const& name, std::vector<int32_t> values)
    {
        remove(name);
        mInts.push_back(std::move(values));
        mFields.push_back({name, mInts.back().data(), PluginFieldType::kINT32, mInts.back().size()});
    }
    //! Add a field without replacing one of the same name (for the duplicate-field check).
    void duplicateInt(std::string const& name, int32_t value)
    {
        mInts.push_back({value});
        mFields.push_back({name, mInts.back().data(), PluginFieldType::kINT32, 1});
    }
    void remove(std::string const& name)
    {
        for (auto it = mFields.begin(); it != mFields.end(); ++it)
        {
            if (it->name == name)
            {
                mFields.erase(it);
                return;
            }
        }
    }
    PluginFieldCollection const* collection()
    {
        mView.clear();
        for (Entry const& entry : mFields)
        {
            mView.emplace_back(entry.name.c_str(), entry.data, entry.type, static_cast<int32_t>(entry.length));
        }
        mCollection = {static_cast<int32_t>(mView.size()), mView.data()};
        return &mCollection;
    }

private:
    struct Entry
    {
        std::string name;
        void const* data;
        PluginFieldType type;
        size_t length;
    };
    std::deque<std::vector<float>> mFloats;
    std::deque<std::vector<int32_t>> mInts;
    std::deque<Entry> mFields;
    std::vector<PluginField> mView;
    PluginFieldCollection mCollection{};
};

constexpr int32_t kTargetHidden = 8;
constexpr int32_t kDraftHidden = 4;
constexpr int32_t kMaxPathLen = 5;

// Block codes (accept_core.h FeatureBlock).
constexpr int32_t kDT = 0;
constexpr int32_t kDD = 1;
constexpr int32_t kDT1 = 2;
constexpr int32_t kDT2 = 3;
constexpr int32_t kDD1 = 4;
constexpr int32_t kLS = 5;

//! The setups the checks use, by index: DT, DD-DT (the first contract's two), the shipped lookahead
//! judge DD-DT-DT1-DT2-DD1-LS, and the target-only DT-DT1-DT2-LS of the stock route.
std::vector<std::vector<int32_t>> const kSetups{
    {kDT}, {kDD, kDT}, {kDD, kDT, kDT1, kDT2, kDD1, kLS}, {kDT, kDT1, kDT2, kLS}};
constexpr int32_t kLookaheadSetup = 2;
constexpr int32_t kTargetOnlyLookaheadSetup = 3;

bool readsDraft(int32_t setup)
{
    for (int32_t block : kSetups[setup])
    {
        if (block == kDD || block == kDD1)
        {
            return true;
        }
    }
    return false;
}

bool looksAhead(int32_t setup)
{
    return setup >= kLookaheadSetup;
}

int32_t featureSize(int32_t setup)
{
    int32_t size = 0;
    for (int32_t block : kSetups[setup])
    {
        size += block == kLS ? 6 : (block == kDD || block == kDD1 ? kDraftHidden : kTargetHidden);
    }
    return size;
}

//! Valid fields: setup kSetups[setup] in feature_blocks, output_mode 0 (accept) or 1 (logits).
Fields validFields(int32_t setup, int32_t mode)
{
    Fields fields;
    std::vector<float> weight(featureSize(setup));
    for (size_t i = 0; i < weight.size(); ++i)
    {
        weight[i] = 0.25f * static_cast<float>(i % 16) - 1.f;
    }
    fields.floats("judge_weight", weight);
    fields.floats("judge_bias", {-0.5f});
    fields.ints("feature_blocks", kSetups[setup]);
    fields.ints("target_hidden", {kTargetHidden});
    fields.ints("draft_hidden", {readsDraft(setup) ? kDraftHidden : 0});
    fields.ints("max_path_len", {kMaxPathLen});
    fields.ints("output_mode", {mode});
    fields.floats("threshold", {0.25f});
    return fields;
}

// ---------------------------------------------------------------------------------------------
// The library under test.

struct Library
{
    void* handle{nullptr};
    std::function<IPluginCreatorInterface* const*(int32_t&)> getCreators;
    std::function<bool(void*, char const*)> init;
    std::function<void(ILoggerFinder*)> setLoggerFinder;
};

Library gLibrary;
RecordingLogger gLogger;
size_t gCreatorsAfterLoad = 0; //!< creators in the registry right after dlopen, before any init call

IPluginCreatorV3One* creator()
{
    int32_t count = 0;
    IPluginCreatorInterface* const* creators = gLibrary.getCreators(count);
    return count == 1 ? dynamic_cast<IPluginCreatorV3One*>(creators[0]) : nullptr;
}

std::unique_ptr<IPluginV3> create(Fields& fields, TensorRTPhase phase = TensorRTPhase::kBUILD)
{
    return std::unique_ptr<IPluginV3>(creator()->createPlugin("autojudge_accept", fields.collection(), phase));
}

template <typename T>
T* capability(IPluginV3& plugin, PluginCapabilityType type)
{
    return dynamic_cast<T*>(plugin.getCapabilityInterface(type));
}

IPluginV3OneBuild* build(IPluginV3& plugin)
{
    return capability<IPluginV3OneBuild>(plugin, PluginCapabilityType::kBUILD);
}

IPluginV3OneRuntime* runtime(IPluginV3& plugin)
{
    return capability<IPluginV3OneRuntime>(plugin, PluginCapabilityType::kRUNTIME);
}

//! Deep copy of a field collection, comparable with ==.
struct FieldCopy
{
    std::string name;
    PluginFieldType type;
    int32_t length;
    std::vector<unsigned char> bytes;

    bool operator==(FieldCopy const& other) const
    {
        return name == other.name && type == other.type && length == other.length && bytes == other.bytes;
    }
};

std::vector<FieldCopy> copyFields(PluginFieldCollection const* collection)
{
    std::vector<FieldCopy> copies;
    for (int32_t i = 0; i < collection->nbFields; ++i)
    {
        PluginField const& field = collection->fields[i];
        size_t const elementBytes = field.type == PluginFieldType::kINT32 || field.type == PluginFieldType::kFLOAT32 ? 4 : 1;
        auto const* data = static_cast<unsigned char const*>(field.data);
        copies.push_back({field.name, field.type, field.length,
            std::vector<unsigned char>(data, data + elementBytes * static_cast<size_t>(field.length))});
    }
    return copies;
}

class CheckFailure : public std::runtime_error
{
    using std::runtime_error::runtime_error;
};

void expect(bool condition, std::string const& what)
{
    if (!condition)
    {
        throw CheckFailure(what);
    }
}

Dims dims(std::vector<int64_t> extents)
{
    Dims d{};
    d.nbDims = static_cast<int32_t>(extents.size());
    for (size_t i = 0; i < extents.size(); ++i)
    {
        d.d[i] = extents[i];
    }
    return d;
}

DynamicPluginTensorDesc dynamicDesc(std::vector<int64_t> extents, DataType type = DataType::kINT32,
    TensorFormat format = TensorFormat::kLINEAR)
{
    DynamicPluginTensorDesc desc{};
    desc.desc.dims = dims(extents);
    desc.desc.type = type;
    desc.desc.format = format;
    desc.min = desc.desc.dims;
    desc.opt = desc.desc.dims;
    desc.max = desc.desc.dims;
    return desc;
}

//! Accept-mode input descriptions for B sequences of N draft nodes and P paths.
std::vector<DynamicPluginTensorDesc> acceptInputs(int64_t batch, int64_t nodes, int64_t paths, bool ddDt,
    DataType logitsType = DataType::kFLOAT, DataType hiddenType = DataType::kHALF)
{
    int64_t const rows = batch < 0 || nodes < 0 ? -1 : batch * (nodes + 1);
    std::vector<DynamicPluginTensorDesc> inputs{dynamicDesc({rows, 32000}, logitsType),
        dynamicDesc({rows, kTargetHidden}, hiddenType), dynamicDesc({batch, nodes}), dynamicDesc({batch}),
        dynamicDesc({batch, paths, kMaxPathLen}), dynamicDesc({batch}, DataType::kFLOAT)};
    if (ddDt)
    {
        inputs.push_back(dynamicDesc({rows, kDraftHidden}, hiddenType));
    }
    return inputs;
}

std::vector<DynamicPluginTensorDesc> acceptOutputs(int64_t batch)
{
    return {dynamicDesc({batch, kMaxPathLen}), dynamicDesc({batch}), dynamicDesc({batch}), dynamicDesc({batch})};
}

//! Logits-mode input descriptions (DT) for L rows of V logits, T tokens and S sequences.
std::vector<DynamicPluginTensorDesc> logitsInputs(int64_t rows, int64_t vocab, int64_t tokens, int64_t sequences,
    DataType logitsType = DataType::kFLOAT, DataType hiddenType = DataType::kHALF)
{
    return {dynamicDesc({rows, vocab}, logitsType), dynamicDesc({rows, kTargetHidden}, hiddenType),
        dynamicDesc({tokens}), dynamicDesc({rows}), dynamicDesc({sequences}), dynamicDesc({sequences})};
}

// ---------------------------------------------------------------------------------------------
// Checks.

void checkCreators()
{
    int32_t count = -1;
    IPluginCreatorInterface* const* creators = gLibrary.getCreators(count);
    expect(count == 1 && creators != nullptr && creators[0] != nullptr, "getCreators must return one creator");
    InterfaceInfo const info = creators[0]->getInterfaceInfo();
    expect(std::string(info.kind) == "PLUGIN CREATOR_V3ONE", std::string("creator kind is ") + info.kind);
    IPluginCreatorV3One* v3 = creator();
    expect(std::string(v3->getPluginName()) == "AutoJudgeAccept", "plugin name");
    expect(std::string(v3->getPluginVersion()) == "1", "plugin version");
    expect(std::string(v3->getPluginNamespace()) == "autojudge", "plugin namespace");
    PluginFieldCollection const* names = v3->getFieldNames();
    std::map<std::string, PluginFieldType> const expected{{"judge_weight", PluginFieldType::kFLOAT32},
        {"judge_bias", PluginFieldType::kFLOAT32}, {"feature_blocks", PluginFieldType::kINT32},
        {"target_hidden", PluginFieldType::kINT32}, {"draft_hidden", PluginFieldType::kINT32},
        {"max_path_len", PluginFieldType::kINT32}, {"output_mode", PluginFieldType::kINT32},
        {"threshold", PluginFieldType::kFLOAT32}, {"min_run", PluginFieldType::kINT32},
        {"feature_setup", PluginFieldType::kINT32}};
    expect(names != nullptr && names->nbFields == static_cast<int32_t>(expected.size()),
        "getFieldNames: 10 fields (feature_setup: the first contract's, still accepted)");
    for (int32_t i = 0; i < names->nbFields; ++i)
    {
        auto const it = expected.find(names->fields[i].name);
        expect(it != expected.end() && it->second == names->fields[i].type,
            std::string("unexpected field name or type: ") + names->fields[i].name);
    }
}

void checkInitRegistration()
{
    expect(gLibrary.init(&gLogger, "autojudge"), "initAutoJudgePlugins(logger, \"autojudge\") must succeed: "
            + gLogger.lastError());
    expect(gRegistry.getCreator("AutoJudgeAccept", "1", "autojudge") == creator(),
        "the registry must hold the library's creator under autojudge::AutoJudgeAccept version 1");
    expect(gLibrary.init(&gLogger, "autojudge") && gLibrary.init(nullptr, ""), "a second init must succeed");
    expect(gRegistry.size() == 1, "a second init must not register the creator twice");
    expect(!gLibrary.init(&gLogger, "tensorrt_llm"), "init with another namespace must fail");
    expect(gLogger.hasError("namespace 'autojudge'"), "the namespace error must name 'autojudge': " + gLogger.lastError());
}

void checkCreatePlugin()
{
    for (int32_t setup = 0; setup < static_cast<int32_t>(kSetups.size()); ++setup)
    {
        for (int32_t mode : {0, 1})
        {
            Fields fields = validFields(setup, mode);
            std::unique_ptr<IPluginV3> plugin = create(fields);
            std::string const label = "setup " + std::to_string(setup) + " output_mode " + std::to_string(mode);
            expect(plugin != nullptr, "createPlugin failed for " + label + ": " + gLogger.lastError());
            auto* core = capability<IPluginV3OneCore>(*plugin, PluginCapabilityType::kCORE);
            expect(core != nullptr && build(*plugin) != nullptr && runtime(*plugin) != nullptr,
                "core, build and runtime capabilities must exist (" + label + ")");
            expect(std::string(core->getInterfaceInfo().kind) == "PLUGIN_V3ONE_CORE"
                    && std::string(build(*plugin)->getInterfaceInfo().kind) == "PLUGIN_V3ONE_BUILD"
                    && std::string(runtime(*plugin)->getInterfaceInfo().kind) == "PLUGIN_V3ONE_RUNTIME",
                "capability interface kinds");
            expect(std::string(core->getPluginName()) == "AutoJudgeAccept" && std::string(core->getPluginVersion()) == "1"
                    && std::string(core->getPluginNamespace()) == "autojudge",
                "core name, version and namespace");
            expect(build(*plugin)->getNbOutputs() == (mode == 0 ? 4 : 1), "getNbOutputs (" + label + ")");
        }
    }
    // The first contract's field sets (feature_setup 0 / 1) are the blocks DT / DD-DT: the same fields,
    // serialized as feature_blocks.
    for (int32_t setup : {0, 1})
    {
        Fields legacy = validFields(setup, 0);
        legacy.remove("feature_blocks");
        legacy.ints("feature_setup", {setup});
        std::unique_ptr<IPluginV3> old = create(legacy);
        expect(old != nullptr, "a feature_setup field set must still create a plugin: " + gLogger.lastError());
        Fields current = validFields(setup, 0);
        expect(copyFields(runtime(*old)->getFieldsToSerialize())
                == copyFields(runtime(*create(current))->getFieldsToSerialize()),
            "feature_setup " + std::to_string(setup) + " must serialize as the feature_blocks of the same setup");
    }
}

void checkRejectBadFields()
{
    struct Case
    {
        std::string what;
        int32_t setup;
        int32_t mode;
        std::function<void(Fields&)> mutate;
        std::string message;
    };
    std::vector<Case> const cases{
        {"missing judge_weight", 0, 0, [](Fields& f) { f.remove("judge_weight"); }, "missing field 'judge_weight'"},
        {"missing judge_bias", 0, 0, [](Fields& f) { f.remove("judge_bias"); }, "missing field 'judge_bias'"},
        {"missing feature_blocks", 0, 0, [](Fields& f) { f.remove("feature_blocks"); }, "missing field 'feature_blocks'"},
        {"missing target_hidden", 0, 0, [](Fields& f) { f.remove("target_hidden"); }, "missing field 'target_hidden'"},
        {"missing max_path_len", 0, 0, [](Fields& f) { f.remove("max_path_len"); }, "missing field 'max_path_len'"},
        {"missing threshold (logits)", 0, 1, [](Fields& f) { f.remove("threshold"); }, "missing field 'threshold'"},
        {"missing draft_hidden (DD-DT)", 1, 0, [](Fields& f) { f.remove("draft_hidden"); }, "missing field 'draft_hidden'"},
        {"weight size", 0, 0, [](Fields& f) { f.floats("judge_weight", std::vector<float>(kTargetHidden + 1, 0.f)); },
            "holds 9 values"},
        {"weight size DD-DT", 1, 0, [](Fields& f) { f.floats("judge_weight", std::vector<float>(kTargetHidden, 0.f)); },
            "holds 8 values, but feature_blocks DD-DT with target_hidden 8 and draft_hidden 4 needs 12 (DD: 4, DT: 8)"},
        {"weight size lookahead", kLookaheadSetup, 0,
            [](Fields& f) { f.floats("judge_weight", std::vector<float>(kDraftHidden + kTargetHidden, 0.f)); },
            "holds 12 values, but feature_blocks DD-DT-DT1-DT2-DD1-LS with target_hidden 8 and draft_hidden 4 needs "
            "38 (DD: 4, DT: 8, DT1: 8, DT2: 8, DD1: 4, LS: 6)"},
        {"missing draft_hidden (DD1)", kLookaheadSetup, 0, [](Fields& f) { f.remove("draft_hidden"); },
            "which feature_blocks DD-DT-DT1-DT2-DD1-LS needs"},
        {"draft_hidden for a target-only lookahead", kTargetOnlyLookaheadSetup, 1,
            [](Fields& f) { f.ints("draft_hidden", {4}); }, "reads no draft hidden state: set it to 0"},
        {"unknown block", 0, 0, [](Fields& f) { f.ints("feature_blocks", {0, 6}); }, "holds 6 at index 1"},
        {"repeated block", 0, 0, [](Fields& f) { f.ints("feature_blocks", {0, 2, 0}); }, "names block DT twice"},
        {"legacy and current setup", 0, 0, [](Fields& f) { f.ints("feature_setup", {0}); },
            "'feature_blocks' and 'feature_setup' are both given"},
        {"NaN weight", 0, 0,
            [](Fields& f) {
                std::vector<float> weight(kTargetHidden, 0.f);
                weight[3] = std::nanf("");
                f.floats("judge_weight", weight);
            },
            "NaN or inf at index 3"},
        {"inf bias", 0, 0, [](Fields& f) { f.floats("judge_bias", {INFINITY}); }, "'judge_bias' is NaN or inf"},
        {"wrong type", 0, 0, [](Fields& f) { f.floats("feature_blocks", {0.f}); }, "'feature_blocks' must be int32"},
        {"wrong length", 0, 0, [](Fields& f) { f.floats("judge_bias", {0.f, 1.f}); }, "must hold 1 value, got 2"},
        {"unknown field", 0, 0, [](Fields& f) { f.floats("thresold", {0.5f}); }, "unknown field 'thresold'"},
        {"duplicate field", 0, 0, [](Fields& f) { f.duplicateInt("output_mode", 0); }, "'output_mode' is given twice"},
        {"feature_setup value", 0, 0,
            [](Fields& f) {
                f.remove("feature_blocks");
                f.ints("feature_setup", {2});
            },
            "0 (DT) or 1 (DD-DT): give feature_blocks"},
        {"output_mode value", 0, 0, [](Fields& f) { f.ints("output_mode", {5}); },
            "0 (accept), 1 (logits) or 2 (tree logits)"},
        {"tree logits mode with a draft block", 1, 2, [](Fields&) {}, "output_mode 2 (tree logits) runs target-only"},
        {"target_hidden value", 0, 0, [](Fields& f) { f.ints("target_hidden", {0}); }, "'target_hidden' is 0"},
        {"draft_hidden for DT", 0, 0, [](Fields& f) { f.ints("draft_hidden", {4}); }, "set it to 0"},
        {"draft_hidden for DD-DT", 1, 0, [](Fields& f) { f.ints("draft_hidden", {0}); }, "needs the draft's hidden size"},
        {"empty feature_blocks", 0, 0, [](Fields& f) { f.ints("feature_blocks", {}); }, "'feature_blocks' is empty"},
        {"max_path_len value", 0, 0, [](Fields& f) { f.ints("max_path_len", {0}); }, "'max_path_len' is 0"},
        {"threshold above 1", 0, 1, [](Fields& f) { f.floats("threshold", {1.5f}); }, "must lie in [0, 1]"},
        {"threshold NaN", 0, 0, [](Fields& f) { f.floats("threshold", {std::nanf("")}); }, "must lie in [0, 1]"},
        {"min_run value", 0, 0, [](Fields& f) { f.ints("min_run", {0}); }, "'min_run' is 0; it must be >= 1"},
    };
    for (Case const& c : cases)
    {
        Fields fields = validFields(c.setup, c.mode);
        c.mutate(fields);
        gRegistry.recorder.clear();
        std::unique_ptr<IPluginV3> plugin = create(fields);
        expect(plugin == nullptr, c.what + ": createPlugin must return nullptr");
        expect(gRegistry.recorder.has(ErrorCode::kINVALID_ARGUMENT, c.message),
            c.what + ": the registry's error recorder must hold kINVALID_ARGUMENT with '" + c.message
                + "'; the logger saw: " + gLogger.lastError());
        expect(gLogger.hasError(c.message), c.what + ": the logger must get the message too");
    }
    gRegistry.recorder.clear();
    expect(creator()->createPlugin("x", nullptr, TensorRTPhase::kBUILD) == nullptr
            && gRegistry.recorder.has(ErrorCode::kINVALID_ARGUMENT, "no field collection"),
        "a null field collection must be rejected");
}

void checkOutputDataTypes()
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        Fields accept = validFields(0, 0);
        std::unique_ptr<IPluginV3> plugin = create(accept);
        std::vector<DataType> inputs{type, DataType::kHALF, DataType::kINT32, DataType::kINT32, DataType::kINT32,
            DataType::kFLOAT};
        std::vector<DataType> outputs(4, DataType::kFLOAT);
        expect(build(*plugin)->getOutputDataTypes(outputs.data(), 4, inputs.data(), 6) == 0, "accept-mode types");
        for (DataType output : outputs)
        {
            expect(output == DataType::kINT32, "every accept-mode output is int32");
        }
        expect(build(*plugin)->getOutputDataTypes(outputs.data(), 4, inputs.data(), 5) != 0,
            "5 inputs for a DT accept plugin must be refused");

        Fields logits = validFields(1, 1);
        plugin = create(logits);
        // logits, target hidden, input_ids, last_token_ids, host_request_types, host_context_lengths, draft hidden
        inputs = {type, DataType::kBF16, DataType::kINT32, DataType::kINT32, DataType::kINT32, DataType::kINT32,
            DataType::kBF16};
        std::vector<DataType> rewritten(1, DataType::kINT32);
        expect(build(*plugin)->getOutputDataTypes(rewritten.data(), 1, inputs.data(), 7) == 0 && rewritten[0] == type,
            "logits mode returns the logits' type");
        expect(build(*plugin)->getOutputDataTypes(rewritten.data(), 1, inputs.data(), 6) != 0,
            "6 inputs for a DD-DT logits plugin must be refused (the host inputs are both required)");
    }
}

void checkFormatCombinations()
{
    Fields fields = validFields(1, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    IPluginV3OneBuild* b = build(*plugin);
    std::vector<DynamicPluginTensorDesc> io = acceptInputs(2, 3, 4, true, DataType::kBF16, DataType::kHALF);
    for (DynamicPluginTensorDesc const& output : acceptOutputs(2))
    {
        io.push_back(output);
    }
    int32_t const nbIn = 7;
    int32_t const nbOut = 4;
    for (int32_t pos = 0; pos < nbIn + nbOut; ++pos)
    {
        expect(b->supportsFormatCombination(pos, io.data(), nbIn, nbOut), "position " + std::to_string(pos) + " supported");
    }
    auto refused = [&](int32_t pos, DataType type, TensorFormat format = TensorFormat::kLINEAR) {
        std::vector<DynamicPluginTensorDesc> changed = io;
        changed[pos].desc.type = type;
        changed[pos].desc.format = format;
        return !b->supportsFormatCombination(pos, changed.data(), nbIn, nbOut);
    };
    expect(refused(0, DataType::kINT32), "int32 logits refused");
    expect(refused(0, DataType::kFLOAT, TensorFormat::kCHW32), "non-linear format refused");
    expect(refused(1, DataType::kINT8), "int8 hidden states refused");
    expect(refused(2, DataType::kFLOAT), "float draft tokens refused");
    expect(refused(5, DataType::kHALF), "half threshold refused");
    expect(refused(6, DataType::kFLOAT), "draft hidden of another type than target hidden refused");
    expect(refused(7, DataType::kFLOAT), "float accepted tokens refused");
    expect(!b->supportsFormatCombination(0, io.data(), 6, nbOut), "6 inputs for a DD-DT plugin refused");

    Fields logitsFields = validFields(0, 1);
    plugin = create(logitsFields);
    b = build(*plugin);
    std::vector<DynamicPluginTensorDesc> logits = logitsInputs(9, 100, 12, 3, DataType::kHALF, DataType::kFLOAT);
    logits.push_back(dynamicDesc({9, 100}, DataType::kHALF));
    for (int32_t pos = 0; pos < 7; ++pos)
    {
        expect(b->supportsFormatCombination(pos, logits.data(), 6, 1), "logits mode position " + std::to_string(pos));
    }
    for (int32_t hostInput : {4, 5})
    {
        std::vector<DynamicPluginTensorDesc> changed = logits;
        changed[hostInput].desc.type = DataType::kINT64;
        expect(!b->supportsFormatCombination(hostInput, changed.data(), 6, 1),
            "host_request_types / host_context_lengths must be int32 (input " + std::to_string(hostInput) + ")");
    }
    logits[6].desc.type = DataType::kFLOAT;
    expect(!b->supportsFormatCombination(6, logits.data(), 6, 1), "rewritten logits must keep the logits' type");
    expect(!b->supportsFormatCombination(0, logits.data(), 5, 1), "the old 5-input logits layout is refused");
}

void checkLookaheadInputs()
{
    // Accept mode, a target-only lookahead judge: the six inputs, then greedy_child [B, N + 1] as input 6.
    Fields fields = validFields(kTargetOnlyLookaheadSetup, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    IPluginV3OneBuild* b = build(*plugin);
    std::vector<DynamicPluginTensorDesc> inputs = acceptInputs(2, 6, 3, false);
    inputs.push_back(dynamicDesc({2, 7}));
    std::vector<DynamicPluginTensorDesc> outputs = acceptOutputs(2);
    expect(b->configurePlugin(inputs.data(), 7, outputs.data(), 4) == 0,
        "DT-DT1-DT2-LS takes greedy_child as input 6: " + gLogger.lastError());
    expect(b->configurePlugin(inputs.data(), 6, outputs.data(), 4) != 0
            && gLogger.hasError("takes 7 inputs (target_logits, target_hidden, draft_tokens, draft_lens, paths, "
                                "threshold, greedy_child)"),
        "six inputs must be refused, naming greedy_child: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongChildren = inputs;
    wrongChildren[6].desc.dims.d[1] = 6;
    expect(b->configurePlugin(wrongChildren.data(), 7, outputs.data(), 4) != 0
            && gLogger.hasError("input 6 (greedy_child, [B, N + 1]) has 6 in dimension 1, expected 7"),
        "greedy_child must have N + 1 columns: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> io = inputs;
    io.insert(io.end(), outputs.begin(), outputs.end());
    for (int32_t pos = 0; pos < 11; ++pos)
    {
        expect(b->supportsFormatCombination(pos, io.data(), 7, 4), "position " + std::to_string(pos) + " supported");
    }
    io[6].desc.type = DataType::kFLOAT;
    expect(!b->supportsFormatCombination(6, io.data(), 7, 4), "float greedy_child refused");

    // The shipped judge reads the draft too: draft_hidden is input 6, greedy_child input 7.
    Fields shippedFields = validFields(kLookaheadSetup, 0);
    plugin = create(shippedFields);
    std::vector<DynamicPluginTensorDesc> shipped = acceptInputs(2, 6, 3, true);
    shipped.push_back(dynamicDesc({2, 7}));
    expect(build(*plugin)->configurePlugin(shipped.data(), 8, outputs.data(), 4) == 0,
        "DD-DT-DT1-DT2-DD1-LS takes draft_hidden, then greedy_child: " + gLogger.lastError());

    // Logits mode: a sequence's draft rows are a chain, so there is no greedy_child input.
    Fields logitsFields = validFields(kTargetOnlyLookaheadSetup, 1);
    plugin = create(logitsFields);
    std::vector<DynamicPluginTensorDesc> rewritten{dynamicDesc({9, 100})};
    std::vector<DynamicPluginTensorDesc> logits = logitsInputs(9, 100, 12, 3);
    expect(build(*plugin)->configurePlugin(logits.data(), 6, rewritten.data(), 1) == 0,
        "a target-only lookahead judge takes the six stock inputs in logits mode: " + gLogger.lastError());

    // Paths too short for any verdict (2 draft tokens, the judge needs 2 after a node): said once, at creation.
    auto warnings = [] {
        size_t count = 0;
        for (auto const& [severity, message] : gLogger.entries)
        {
            count += severity == ILogger::Severity::kWARNING && message.find("never gives a verdict") != std::string::npos;
        }
        return count;
    };
    size_t const before = warnings();
    Fields shortPaths = validFields(kTargetOnlyLookaheadSetup, 0);
    shortPaths.ints("max_path_len", {3});
    expect(create(shortPaths) != nullptr && warnings() == before + 1
            && gLogger.entries.back().second.find("max_path_len 3") != std::string::npos,
        "a lookahead judge with max_path_len 3 must be created with one warning naming it");
    shortPaths.ints("max_path_len", {4});
    expect(create(shortPaths) != nullptr && warnings() == before + 1, "max_path_len 4 gives verdicts: no warning");
}

void checkOutputShapes()
{
    ExprBuilder exprs;
    Expr const* rows = exprs.symbol("R");
    Expr const* vocab = exprs.symbol("V");
    Expr const* batch = exprs.symbol("B");
    Expr const* nodes = exprs.symbol("N");
    Expr const* paths = exprs.symbol("P");
    auto dimsOf = [](std::vector<IDimensionExpr const*> extents) {
        DimsExprs d{};
        d.nbDims = static_cast<int32_t>(extents.size());
        for (size_t i = 0; i < extents.size(); ++i)
        {
            d.d[i] = extents[i];
        }
        return d;
    };
    std::vector<DimsExprs> inputs{dimsOf({rows, vocab}), dimsOf({rows, exprs.makeConstant(kTargetHidden)}),
        dimsOf({batch, nodes}), dimsOf({batch}), dimsOf({batch, paths, exprs.makeConstant(kMaxPathLen)}),
        dimsOf({batch})};
    Fields fields = validFields(0, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    std::vector<DimsExprs> outputs(4);
    expect(build(*plugin)->getOutputShapes(inputs.data(), 6, nullptr, 0, outputs.data(), 4, exprs) == 0,
        "getOutputShapes (accept) failed: " + gLogger.lastError());
    expect(outputs[0].nbDims == 2 && outputs[0].d[0] == batch && outputs[0].d[1]->isConstant()
            && outputs[0].d[1]->getConstantValue() == kMaxPathLen,
        "accepted_tokens must be [B, max_path_len]");
    for (int32_t i = 1; i < 4; ++i)
    {
        expect(outputs[i].nbDims == 1 && outputs[i].d[0] == batch, "output " + std::to_string(i) + " must be [B]");
    }
    inputs[4] = dimsOf({batch, paths});
    expect(build(*plugin)->getOutputShapes(inputs.data(), 6, nullptr, 0, outputs.data(), 4, exprs) != 0
            && gLogger.hasError("input 4 (paths) must be [B, P, max_path_len], got rank 2"),
        "a rank-2 paths input must be refused with a message: " + gLogger.lastError());

    Fields logitsFields = validFields(0, 1);
    plugin = create(logitsFields);
    Expr const* sequences = exprs.symbol("S");
    std::vector<DimsExprs> logitsInputs{dimsOf({rows, vocab}), dimsOf({rows, exprs.makeConstant(kTargetHidden)}),
        dimsOf({exprs.symbol("T")}), dimsOf({rows}), dimsOf({sequences}), dimsOf({sequences})};
    std::vector<DimsExprs> rewritten(1);
    expect(build(*plugin)->getOutputShapes(logitsInputs.data(), 6, nullptr, 0, rewritten.data(), 1, exprs) == 0
            && rewritten[0].nbDims == 2 && rewritten[0].d[0] == rows && rewritten[0].d[1] == vocab,
        "rewritten logits must have the logits' shape");
}

void checkConfigureShapes()
{
    Fields fields = validFields(0, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    IPluginV3OneBuild* b = build(*plugin);
    std::vector<DynamicPluginTensorDesc> outputs = acceptOutputs(-1);
    std::vector<DynamicPluginTensorDesc> dynamic = acceptInputs(-1, -1, -1, false);
    expect(b->configurePlugin(dynamic.data(), 6, outputs.data(), 4) == 0,
        "dynamic dimensions must be accepted: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> fixed = acceptInputs(4, 16, 1, false);
    expect(b->configurePlugin(fixed.data(), 6, outputs.data(), 4) == 0, "consistent shapes must be accepted");

    auto refusedWith = [&](std::vector<DynamicPluginTensorDesc> inputs, int32_t nbInputs, std::string const& text) {
        return b->configurePlugin(inputs.data(), nbInputs, outputs.data(), 4) != 0 && gLogger.hasError(text);
    };
    std::vector<DynamicPluginTensorDesc> wrongHidden = fixed;
    wrongHidden[1].desc.dims.d[1] = kTargetHidden + 1;
    expect(refusedWith(wrongHidden, 6, "(the target_hidden field)"), "hidden width: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongPaths = fixed;
    wrongPaths[4].desc.dims.d[2] = kMaxPathLen + 2;
    expect(refusedWith(wrongPaths, 6, "(the max_path_len field)"), "paths width: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongRows = fixed;
    wrongRows[0].desc.dims.d[0] = 4 * 16;
    expect(refusedWith(wrongRows, 6, "B * (N + 1)"), "logits rows: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongBatch = fixed;
    wrongBatch[5].desc.dims.d[0] = 3;
    expect(refusedWith(wrongBatch, 6, "input 5 (threshold, [B]) has 3"), "threshold length: " + gLogger.lastError());
    expect(refusedWith(fixed, 5, "takes 6 inputs"), "input count: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> tooMany = acceptInputs(1, 2048, 1, false);
    expect(refusedWith(tooMany, 6, "at most 2047"), "node limit: " + gLogger.lastError());

    Fields logitsFields = validFields(0, 1);
    plugin = create(logitsFields);
    b = build(*plugin);
    std::vector<DynamicPluginTensorDesc> rewritten{dynamicDesc({9, 100})};
    std::vector<DynamicPluginTensorDesc> logits = logitsInputs(9, 100, 12, 3);
    expect(b->configurePlugin(logits.data(), 6, rewritten.data(), 1) == 0,
        "consistent logits-mode shapes must be accepted: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> dynamicLogits = logitsInputs(-1, 100, -1, -1);
    expect(b->configurePlugin(dynamicLogits.data(), 6, rewritten.data(), 1) == 0,
        "dynamic logits-mode dimensions must be accepted: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongSequences = logits;
    wrongSequences[5].desc.dims.d[0] = 4;
    expect(b->configurePlugin(wrongSequences.data(), 6, rewritten.data(), 1) != 0
            && gLogger.hasError("input 5 (host_context_lengths, [S]) has 4"),
        "host_context_lengths must have one entry per host_request_types entry: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrongLastTokens = logits;
    wrongLastTokens[3].desc.dims.d[0] = 8;
    expect(b->configurePlugin(wrongLastTokens.data(), 6, rewritten.data(), 1) != 0
            && gLogger.hasError("input 3 (last_token_ids, [L]) has 8"),
        "last_token_ids must have one entry per logits row: " + gLogger.lastError());
}

void checkWorkspace()
{
    Fields fields = validFields(0, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    std::vector<DynamicPluginTensorDesc> inputs = acceptInputs(64, 16, 1, false);
    inputs[0].max.d[1] = 128256;
    std::vector<DynamicPluginTensorDesc> outputs = acceptOutputs(64);
    size_t const bytes = build(*plugin)->getWorkspaceSize(inputs.data(), 6, outputs.data(), 4);
    size_t const expected = size_t{64} * 17 * 16 * 40; // rows * ceil(128256 / 8192) splits * 40-byte RowScores
    expect(bytes == expected, "workspace " + std::to_string(bytes) + " bytes, expected " + std::to_string(expected));

    Fields logitsFields = validFields(0, 1);
    plugin = create(logitsFields);
    std::vector<DynamicPluginTensorDesc> logits = logitsInputs(77, 128256, 500, 33);
    std::vector<DynamicPluginTensorDesc> rewritten{dynamicDesc({77, 128256})};
    size_t const logitsBytes = build(*plugin)->getWorkspaceSize(logits.data(), 6, rewritten.data(), 1);
    size_t const partials = size_t{77} * 16 * 40;                           // 49280, a multiple of 16
    size_t const expectedLogits = (partials + 15) / 16 * 16 + 33 * sizeof(int32_t); // then the token ends [S]
    expect(logitsBytes == expectedLogits, "logits-mode workspace " + std::to_string(logitsBytes) + " bytes, expected "
            + std::to_string(expectedLogits) + " (partials, then one token end per sequence)");
}

void checkSerializationRoundTrip()
{
    for (int32_t setup = 0; setup < static_cast<int32_t>(kSetups.size()); ++setup)
    {
        for (int32_t mode : {0, 1})
        {
            Fields fields = validFields(setup, mode);
            std::unique_ptr<IPluginV3> plugin = create(fields);
            PluginFieldCollection const* serialized = runtime(*plugin)->getFieldsToSerialize();
            std::vector<FieldCopy> const before = copyFields(serialized);
            expect(before.size() == 9, "9 serialized fields");
            std::unique_ptr<IPluginV3> restored(
                creator()->createPlugin("autojudge_accept", serialized, TensorRTPhase::kRUNTIME));
            expect(restored != nullptr, "createPlugin(kRUNTIME) from the serialized fields failed: " + gLogger.lastError());
            expect(copyFields(runtime(*restored)->getFieldsToSerialize()) == before,
                "the restored plugin must serialize to the same fields");
            expect(std::string(build(*restored)->getMetadataString()) == build(*plugin)->getMetadataString(),
                "same metadata string");
            // validFields has no min_run (an older field set): it loads as min_run 1, and serializes that
            Fields explicitNone = validFields(setup, mode);
            explicitNone.ints("min_run", {1});
            expect(copyFields(runtime(*create(explicitNone))->getFieldsToSerialize()) == before,
                "a field set without min_run must serialize as min_run 1");
            Fields held = validFields(setup, mode);
            held.ints("min_run", {3});
            std::unique_ptr<IPluginV3> withRun = create(held);
            expect(withRun != nullptr, "min_run 3 must create a plugin: " + gLogger.lastError());
            std::vector<FieldCopy> const heldFields = copyFields(runtime(*withRun)->getFieldsToSerialize());
            expect(heldFields != before, "min_run 3 must serialize differently from min_run 1");
            std::unique_ptr<IPluginV3> heldRestored(creator()->createPlugin(
                "autojudge_accept", runtime(*withRun)->getFieldsToSerialize(), TensorRTPhase::kRUNTIME));
            expect(heldRestored != nullptr && copyFields(runtime(*heldRestored)->getFieldsToSerialize()) == heldFields,
                "min_run 3 must survive the round trip");
        }
    }
}

void checkClone()
{
    Fields fields = validFields(1, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    std::vector<FieldCopy> const original = copyFields(runtime(*plugin)->getFieldsToSerialize());
    std::string const metadata = build(*plugin)->getMetadataString();
    std::unique_ptr<IPluginV3> copy(plugin->clone());
    expect(copy != nullptr && copy.get() != plugin.get(), "clone must return a new object");
    plugin.reset();
    expect(copyFields(runtime(*copy)->getFieldsToSerialize()) == original, "the clone must own the same fields");
    expect(build(*copy)->getMetadataString() == metadata, "the clone must describe the same configuration");
    expect(build(*copy)->getNbOutputs() == 4, "the clone keeps output_mode");
}

void checkAttachToContext()
{
    Fields fields = validFields(0, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    ResourceContext context;
    std::unique_ptr<IPluginV3> attached(runtime(*plugin)->attachToContext(&context));
    if (attached != nullptr)
    {
        // A CUDA device is present: the attached clone holds the same fields.
        expect(copyFields(runtime(*attached)->getFieldsToSerialize())
                == copyFields(runtime(*plugin)->getFieldsToSerialize()),
            "the attached clone must hold the same fields");
        std::cout << "note attach_to_context: a CUDA device was available, judge_weight was uploaded\n";
        return;
    }
    expect(context.recorder.has(ErrorCode::kFAILED_ALLOCATION, "could not copy judge_weight"),
        "without a GPU, attachToContext must fail through the context's error recorder: " + gLogger.lastError());
    std::cout << "note attach_to_context: no CUDA device; the failure was reported through the recorder\n";
}

void checkEnqueueRejectsBadShapes()
{
    Fields fields = validFields(0, 0);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    std::vector<DynamicPluginTensorDesc> inputs = acceptInputs(2, 3, 1, false);
    inputs[0].desc.dims.d[0] = 7; // B * (N + 1) is 8
    std::vector<PluginTensorDesc> inputDesc;
    for (DynamicPluginTensorDesc const& input : inputs)
    {
        inputDesc.push_back(input.desc);
    }
    std::vector<PluginTensorDesc> outputDesc(4);
    std::vector<void const*> inputPointers(6, nullptr);
    std::vector<void*> outputPointers(4, nullptr);
    int32_t status = runtime(*plugin)->enqueue(
        inputDesc.data(), outputDesc.data(), inputPointers.data(), outputPointers.data(), nullptr, nullptr);
    expect(status != 0 && gLogger.hasError("expected 8 (B * (N + 1)"),
        "enqueue must refuse 7 logits rows for B = 2, N = 3 before touching memory: " + gLogger.lastError());
    expect(runtime(*plugin)->onShapeChange(inputDesc.data(), 6, outputDesc.data(), 4) != 0,
        "onShapeChange must refuse the same shapes");

    // Logits mode: the host inputs are read on the host; a step whose sequences' tokens do not add up to
    // input_ids is refused before any device memory is touched (all device pointers are null here).
    Fields logitsFields = validFields(0, 1);
    plugin = create(logitsFields);
    std::vector<PluginTensorDesc> logitsDesc;
    for (DynamicPluginTensorDesc const& input : logitsInputs(3, 8, 5, 2))
    {
        logitsDesc.push_back(input.desc);
    }
    std::vector<PluginTensorDesc> rewrittenDesc{dynamicDesc({3, 8}).desc};
    std::vector<int32_t> requestTypes{0, 1};        // a context request, then one generation sequence
    std::vector<int32_t> hostContextLengths{3, 40}; // 3 + 1 tokens, but input_ids has 5
    std::vector<void const*> logitsPointers{nullptr, nullptr, nullptr, nullptr, requestTypes.data(),
        hostContextLengths.data()};
    std::vector<void*> rewrittenPointers{nullptr};
    status = runtime(*plugin)->enqueue(logitsDesc.data(), rewrittenDesc.data(), logitsPointers.data(),
        rewrittenPointers.data(), nullptr, nullptr);
    expect(status != 0 && gLogger.hasError("hold 4 tokens") && gLogger.hasError("but input_ids has 5"),
        "enqueue must refuse a step whose sequences hold 4 tokens for 5 input_ids: " + gLogger.lastError());
    logitsPointers[4] = nullptr;
    status = runtime(*plugin)->enqueue(logitsDesc.data(), rewrittenDesc.data(), logitsPointers.data(),
        rewrittenPointers.data(), nullptr, nullptr);
    expect(status != 0 && gLogger.hasError("must be bound"), "unbound host inputs must be refused: " + gLogger.lastError());
}

//! Tree-logits-mode input descriptions for B requests, N draft nodes and L logits rows (paths [B, N + 1, D + 1]).
std::vector<DynamicPluginTensorDesc> treeInputs(int64_t rows, int64_t batch, int64_t nodes, bool greedyChild,
    DataType logitsType = DataType::kFLOAT, DataType hiddenType = DataType::kHALF)
{
    std::vector<DynamicPluginTensorDesc> inputs{dynamicDesc({rows, 32000}, logitsType),
        dynamicDesc({rows, kTargetHidden}, hiddenType), dynamicDesc({batch, nodes}), dynamicDesc({batch}),
        dynamicDesc({batch, nodes < 0 ? -1 : nodes + 1, kMaxPathLen}), dynamicDesc({batch}, DataType::kFLOAT)};
    if (greedyChild)
    {
        inputs.push_back(dynamicDesc({batch, nodes < 0 ? -1 : nodes + 1}));
    }
    return inputs;
}

void checkTreeLogitsMode()
{
    // DT: six inputs (the EAGLE step's lm_logits, LM head input rows, draft_tokens, draft_lens, draft_paths,
    // posterior_threshold), one output of the logits' type and shape; the rows are ragged (L is free).
    Fields fields = validFields(0, 2);
    std::unique_ptr<IPluginV3> plugin = create(fields);
    IPluginV3OneBuild* b = build(*plugin);
    expect(b->getNbOutputs() == 1, "tree logits mode has one output");
    std::vector<DynamicPluginTensorDesc> inputs = treeInputs(11, 3, 7, false);
    std::vector<DynamicPluginTensorDesc> outputs{dynamicDesc({11, 32000}, DataType::kFLOAT)};
    expect(b->configurePlugin(inputs.data(), 6, outputs.data(), 1) == 0,
        "consistent tree-logits shapes must be accepted: " + gLogger.lastError());
    std::vector<DynamicPluginTensorDesc> wrong = inputs;
    wrong[4].desc.dims.d[0] = 2;
    expect(b->configurePlugin(wrong.data(), 6, outputs.data(), 1) != 0
            && gLogger.hasError("input 4 (paths, [B, N + 1, max_path_len]) has 2 in dimension 0, expected 3"),
        "paths must have B rows: " + gLogger.lastError());
    wrong = inputs;
    wrong[1].desc.dims.d[0] = 10;
    expect(b->configurePlugin(wrong.data(), 6, outputs.data(), 1) != 0 && gLogger.hasError("one row per logits row"),
        "target_hidden must have the logits' rows: " + gLogger.lastError());
    std::vector<DataType> types(1);
    std::vector<DataType> inputTypes{DataType::kBF16, DataType::kHALF, DataType::kINT32, DataType::kINT32,
        DataType::kINT32, DataType::kFLOAT};
    expect(b->getOutputDataTypes(types.data(), 1, inputTypes.data(), 6) == 0 && types[0] == DataType::kBF16,
        "tree logits mode returns the logits' type");
    std::vector<DynamicPluginTensorDesc> io = inputs;
    io.push_back(outputs[0]);
    for (int32_t pos = 0; pos < 7; ++pos)
    {
        expect(b->supportsFormatCombination(pos, io.data(), 6, 1), "tree position " + std::to_string(pos));
    }
    io[5].desc.type = DataType::kINT32;
    expect(!b->supportsFormatCombination(5, io.data(), 6, 1), "an int32 threshold refused");

    // A target-only lookahead judge: greedy_child [B, N + 1] as input 6.
    Fields lookahead = validFields(kTargetOnlyLookaheadSetup, 2);
    plugin = create(lookahead);
    std::vector<DynamicPluginTensorDesc> withChild = treeInputs(11, 3, 7, true);
    expect(build(*plugin)->configurePlugin(withChild.data(), 7, outputs.data(), 1) == 0,
        "DT-DT1-DT2-LS takes greedy_child in tree logits mode: " + gLogger.lastError());
    expect(build(*plugin)->configurePlugin(inputs.data(), 6, outputs.data(), 1) != 0
            && gLogger.hasError("output_mode 2 (tree logits)") && gLogger.hasError("greedy_child"),
        "six inputs must be refused, naming greedy_child: " + gLogger.lastError());

    // enqueue refuses inconsistent shapes before touching memory (every pointer is null)
    std::vector<PluginTensorDesc> desc;
    for (DynamicPluginTensorDesc const& input : wrong)
    {
        desc.push_back(input.desc);
    }
    plugin = create(fields);
    std::vector<PluginTensorDesc> outputDesc{outputs[0].desc};
    std::vector<void const*> pointers(6, nullptr);
    std::vector<void*> outputPointers{nullptr};
    expect(runtime(*plugin)->enqueue(desc.data(), outputDesc.data(), pointers.data(), outputPointers.data(), nullptr,
               nullptr)
            != 0,
        "enqueue must refuse target_hidden rows that differ from the logits rows");
}

class LoggerFinder : public ILoggerFinder
{
public:
    ILogger* findLogger() override
    {
        return &logger;
    }
    RecordingLogger logger;
};

void checkRegisterOnLoad()
{
    char const* flag = std::getenv("AUTOJUDGE_REGISTER_ON_LOAD");
    bool const asked = flag != nullptr && std::string(flag) == "1";
    expect(gCreatorsAfterLoad == (asked ? 1u : 0u),
        std::string("with AUTOJUDGE_REGISTER_ON_LOAD ") + (asked ? "=1" : "unset")
            + ", loading the library must " + (asked ? "" : "not ") + "register the creator (registry held "
            + std::to_string(gCreatorsAfterLoad) + " after dlopen)");
    if (asked)
    {
        expect(gRegistry.getCreator("AutoJudgeAccept", "1", "autojudge") == creator(),
            "the creator registered on load is the library's, in namespace autojudge");
    }
}

void checkLoggerFinder()
{
    LoggerFinder finder;
    gLibrary.setLoggerFinder(&finder);
    Fields fields = validFields(0, 0);
    fields.remove("judge_bias");
    bool const created = create(fields) != nullptr;
    gLibrary.setLoggerFinder(nullptr);
    expect(!created, "createPlugin without judge_bias must fail");
    expect(finder.logger.hasError("missing field 'judge_bias'"),
        "errors must go to the logger found through setLoggerFinder (as TensorRT's loadLibrary sets it)");
}

std::map<std::string, std::function<void()>> const kChecks{
    {"logger_finder", checkLoggerFinder},
    {"register_on_load", checkRegisterOnLoad},
    {"creators", checkCreators},
    {"init_registration", checkInitRegistration},
    {"create_plugin", checkCreatePlugin},
    {"reject_bad_fields", checkRejectBadFields},
    {"output_data_types", checkOutputDataTypes},
    {"format_combinations", checkFormatCombinations},
    {"lookahead_inputs", checkLookaheadInputs},
    {"output_shapes", checkOutputShapes},
    {"configure_shapes", checkConfigureShapes},
    {"workspace", checkWorkspace},
    {"serialization_roundtrip", checkSerializationRoundTrip},
    {"clone", checkClone},
    {"attach_to_context", checkAttachToContext},
    {"enqueue_rejects_bad_shapes", checkEnqueueRejectsBadShapes},
    {"tree_logits_mode", checkTreeLogitsMode},
};

template <typename F>
F symbol(char const* name)
{
    void* address = dlsym(gLibrary.handle, name);
    if (address == nullptr)
    {
        std::cerr << "the plugin library does not export " << name << "\n";
        std::exit(2);
    }
    return reinterpret_cast<F>(address);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 3)
    {
        std::cerr << "usage: " << argv[0] << " <libautojudge_trt_plugin.so> list | <check>...\n";
        return 2;
    }
    if (std::string(argv[2]) == "list")
    {
        for (auto const& check : kChecks)
        {
            std::cout << check.first << "\n";
        }
        return 0;
    }
    gLibrary.handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (gLibrary.handle == nullptr)
    {
        std::cerr << "dlopen failed: " << dlerror() << "\n";
        return 2;
    }
    gCreatorsAfterLoad = gRegistry.size();
    gLibrary.getCreators = symbol<IPluginCreatorInterface* const* (*) (int32_t&)>("getCreators");
    gLibrary.init = symbol<bool (*)(void*, char const*)>("initAutoJudgePlugins");
    gLibrary.setLoggerFinder = symbol<void (*)(ILoggerFinder*)>("setLoggerFinder");
    gLibrary.init(&gLogger, "autojudge"); // the logger for every check (registration is checked separately)

    int failures = 0;
    for (int i = 2; i < argc; ++i)
    {
        auto const check = kChecks.find(argv[i]);
        if (check == kChecks.end())
        {
            std::cout << "FAIL " << argv[i] << ": no such check\n";
            ++failures;
            continue;
        }
        try
        {
            check->second();
            std::cout << "PASS " << argv[i] << "\n";
        }
        catch (CheckFailure const& failure)
        {
            std::cout << "FAIL " << argv[i] << ": " << failure.what() << "\n";
            ++failures;
        }
    }
    return failures == 0 ? 0 : 1;
}
