// Row-column bundles (compress --bundles) and the neuron-cache runtime that reads them: the
// bundle bytes are the FFN's own (checked against the source tensors, element by element), a
// damaged bundle tensor is refused by name, exact mode keeps relu-stories-260K's reference text
// with bundles from RAM and from the SSD (direct reads, merged), the served FFN matrices are not
// streamed, and predicted mode reads no FFN weight but the predicted neurons'.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/calibrate/compress_model.h"
#include "core/compress/ffn_predictor.h"
#include "core/plan/planner.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/half_inline.h"
#include "../common/greedy_text.h"
#include "../common/made_up_hardware.h"
#include "../common/opaque_device.h"
#include "../common/session_logits.h"
#include "../common/temp_dir.h"
#include "cache_run.h"

using namespace spillway;
using namespace spillway::compress;
using spillway::compress::CompressProgress;

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;

std::unique_ptr<LlamaModel> reluStories260K()
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin", ModelLoadOptions{"relu-llama", ""});
    EXPECT_TRUE(model.ok()) << model.error().message;
    return model ? std::move(*model) : nullptr;
}

// A package of relu-stories-260K with bundles and rank-16 predictors of `input`, or the error
// that stopped it (a missing model file, a failed compression).
Result<std::string> makeBundledPackage(const testing_support::TempDir& dir, PredictorInput input)
{
    if (dir.path().empty()) return makeError(ErrorCode::Io, "cannot make a temporary folder for the package");
    const std::string p = dir.path() + "/package";
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin", ModelLoadOptions{"relu-llama", ""});
    if (!model) return model.error();
    auto device = gpu::createCpuDevice(2);
    CompressOptions o;
    o.qualityCheck = false;
    o.bundles = true;
    o.predictorRank = 16;
    o.predictorContinueTokens = 16;
    o.predictorInput = input;
    auto report = compressModel(**model, p, o, *device);
    if (!report) return report.error();
    EXPECT_GT(report->bundleBytes, 0u);
    return p;
}

// The package's path; a test failure, and an empty path (which no load accepts), if it could not
// be made. Every test that asks is told why, not only the first.
const std::string& packagePath(const Result<std::string>& made)
{
    static const std::string none;
    if (!made) {
        ADD_FAILURE() << "cannot make the bundled package: " << made.error().message;
        return none;
    }
    return *made;
}

// Made once per test run: predictors of the FFN's input, and of the attention's (Deja Vu, Tricksy).
const std::string& bundledPackage()
{
    static testing_support::TempDir dir("bundles");
    static const Result<std::string> made = makeBundledPackage(dir, PredictorInput::Ffn);
    return packagePath(made);
}

const std::string& attentionPredictedPackage()
{
    static testing_support::TempDir dir("bundles-attention");
    static const Result<std::string> made = makeBundledPackage(dir, PredictorInput::Attention);
    return packagePath(made);
}

using testing_support::CacheRun;

CacheRun generateWith(const LlamaModel& model, const std::string& prompt, const NeuronCacheOptions& cache, int tokens = 48)
{
    auto device = gpu::createCpuDevice(2);
    SessionOptions o;
    o.contextLength = 128;
    o.neuronCache = cache;
    o.placement = plan::uniformPlacement(model, plan::Tier::Device);
    return testing_support::greedyRun(model, *device, o, prompt, tokens);
}

float downElement(gpu::Device& device, const gpu::MatrixView& down, int64_t row, int64_t col)
{
    std::vector<float> r(size_t(down.cols));
    device.getRow(down, row, r.data());
    return r[size_t(col)];
}

}  // namespace

TEST(NeuronBundles, HoldTheFfnsOwnRowsAndColumns)
{
    auto source = reluStories260K();
    ASSERT_TRUE(source);
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaConfig& c = (*package)->config();
    const auto& bundles = (*package)->ffnBundles();
    ASSERT_EQ(bundles.size(), size_t(c.nLayers));
    auto device = gpu::createCpuDevice(1);
    for (int l = 0; l < c.nLayers; ++l) {
        const FfnBundles& b = bundles[size_t(l)];
        const LlamaLayerWeights& L = source->weights().layers[size_t(l)];
        EXPECT_EQ(b.parts, 3);  // gated: gate row, up row, down column
        EXPECT_EQ(b.neurons, c.ffnDim);
        EXPECT_EQ(b.rowType, L.up.type);
        // Q8_G64 down: int8 columns, their scales in a table (q * scale: the matrix's own values).
        EXPECT_EQ(b.column.group, 64);
        ASSERT_NE(b.scales, nullptr);
        EXPECT_EQ(b.stride, 2 * gpu::rowBytes(L.up.type, c.dim) + size_t(c.dim));
        for (int j : {0, 1, c.ffnDim / 2, c.ffnDim - 1}) {
            const uint8_t* n = b.data + size_t(j) * b.stride;
            EXPECT_EQ(std::memcmp(n, static_cast<const uint8_t*>(L.gate.data) + size_t(j) * L.gate.rowStride, b.rowBytes), 0);
            EXPECT_EQ(std::memcmp(n + b.upOffset(), static_cast<const uint8_t*>(L.up.data) + size_t(j) * L.up.rowStride, b.rowBytes), 0);
            for (int r : {0, 7, c.dim - 1}) {
                const auto q = static_cast<int8_t>(n[b.downOffset() + size_t(r)]);
                const float v = float(q) * b.scales[size_t(j / 64) * size_t(c.dim) + size_t(r)];
                EXPECT_EQ(v, downElement(*device, L.down, r, j)) << "layer " << l << " neuron " << j << " row " << r;
            }
        }
    }
}

// llama2.c checkpoints group the matrices by role (every layer's wq, then every wk...); the
// package is written layer by layer, so a streamed layer's matrices are one read from the SSD.
TEST(NeuronBundles, PackageKeepsEachLayersMatricesTogether)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const int layers = (*package)->config().nLayers;
    uint64_t previousEnd = 0;
    for (int l = 0; l < layers; ++l) {
        std::vector<SsdPiece> pieces;
        uint64_t begin = UINT64_MAX, end = 0;
        for (const char* role : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
            const ModelTensor* t = (*package)->tensor("blk." + std::to_string(l) + "." + role + ".weight");
            ASSERT_NE(t, nullptr) << role;
            ASSERT_NE(t->file, kInMemoryTensor);
            pieces.push_back({t->file, t->fileOffset, t->bytes});
            begin = std::min(begin, t->fileOffset);
            end = std::max(end, t->fileOffset + t->bytes);
        }
        EXPECT_GE(begin, previousEnd) << "layer " << l << " starts inside the previous one";
        previousEnd = end;
        EXPECT_EQ(layOutSsdReads(pieces).reads.size(), 1u) << "layer " << l;
    }
}

TEST(NeuronBundles, DamagedOrMisplacedBundlesAreRefusedByName)
{
    ASSERT_FALSE(bundledPackage().empty());
    const std::string original = bundledPackage() + "/manifest.json";
    std::ifstream in(original);
    ASSERT_TRUE(in) << "cannot read " << original;
    std::stringstream text;
    text << in.rdbuf();
    const std::string manifest = text.str();
    auto withManifest = [&](const std::string& changed) {
        testing_support::TempDir dir("bad-bundles");
        const std::string copy = dir.path() + "/package";
        std::filesystem::copy(bundledPackage(), copy);
        std::ofstream(copy + "/manifest.json", std::ios::trunc) << changed;
        auto model = LlamaModel::load(copy);
        EXPECT_FALSE(model.ok());
        return model ? Error{} : model.error();
    };
    // A format no version writes.
    const std::string name = "\"blk.1.ffn_bundle\"";
    const size_t at = manifest.find(name);
    ASSERT_NE(at, std::string::npos);
    std::string wrongFormat = manifest;
    const size_t format = wrongFormat.find("bundle-", wrongFormat.rfind('{', at));  // this tensor's object
    ASSERT_NE(format, std::string::npos);
    wrongFormat.replace(format, 7, "bundle-nosuch-");
    const Error e1 = withManifest(wrongFormat);
    EXPECT_NE(e1.message.find("blk.1.ffn_bundle"), std::string::npos) << e1.message;

    // A layer without its bundle: the name points at a layer that does not exist.
    std::string missing = manifest;
    missing.replace(at, name.size(), "\"blk.99.ffn_bundle\"");
    const Error e2 = withManifest(missing);
    EXPECT_EQ(e2.code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(e2.message.find("blk.99.ffn_bundle"), std::string::npos) << e2.message;

    // Int8 columns without their scale table.
    const std::string scales = "\"blk.3.ffn_bundle_scales\"";
    const size_t s = manifest.find(scales);
    ASSERT_NE(s, std::string::npos);
    std::string noScales = manifest;
    noScales.replace(s, scales.size(), "\"blk.3.ffn_bundle_scalez\"");
    const Error e3 = withManifest(noScales);
    EXPECT_EQ(e3.code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(e3.message.find("blk.3.ffn_bundle_scales"), std::string::npos) << e3.message;
}

TEST(NeuronBundles, CompressRefusesWhatWouldChangeTheFfnOrHasNoZeros)
{
    auto source = reluStories260K();
    ASSERT_TRUE(source);
    auto device = gpu::createCpuDevice(1);
    testing_support::TempDir dir("bundles-refused");
    CompressOptions pruned;
    pruned.qualityCheck = false;
    pruned.bundles = true;
    pruned.prune = {PruneMethod::Magnitude, 0.5, 0, 0};
    auto r1 = compressModel(*source, dir.path() + "/a", pruned, *device);
    ASSERT_FALSE(r1.ok());
    EXPECT_EQ(r1.error().code, ErrorCode::InvalidArgument);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/a"));

    auto swiglu = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(swiglu.ok()) << swiglu.error().message;
    CompressOptions plain;
    plain.qualityCheck = false;
    plain.bundles = true;
    auto r2 = compressModel(**swiglu, dir.path() + "/b", plain, *device);
    ASSERT_FALSE(r2.ok());
    EXPECT_EQ(r2.error().code, ErrorCode::UnsupportedModel);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/b"));
}

TEST(NeuronCacheRuntime, ExactModeFromRamOrSsdKeepsTheReferenceText)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaConfig& c = (*package)->config();
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    const CacheRun dense = generateWith(**package, refs[0].prompt, {});
    NeuronCacheOptions ram;
    ram.capacity = c.ffnDim / 4;
    NeuronCacheOptions ssd = ram;
    ssd.source = BundleSource::Ssd;
    for (const auto& ref : refs) {
        SCOPED_TRACE(ref.prompt);
        const CacheRun fromRam = generateWith(**package, ref.prompt, ram);
        const CacheRun fromSsd = generateWith(**package, ref.prompt, ssd);
        EXPECT_EQ(fromRam.text.substr(0, ref.text.size()), ref.text);
        EXPECT_EQ(fromSsd.text.substr(0, ref.text.size()), ref.text);
        // The same bundles whichever tier they come from, and the dense kernel's arithmetic for
        // these Q8_G64 weights: the dense run's logits, bit for bit.
        EXPECT_EQ(fromRam.logits, fromSsd.logits);
        EXPECT_EQ(fromRam.logits, dense.logits);
        EXPECT_EQ(fromRam.report.total.loaded, fromSsd.report.total.loaded);
        EXPECT_EQ(fromRam.report.ssdBytes, 0u);
        // The SSD reads: at least the slices loaded, merged into fewer requests than loads.
        EXPECT_GE(fromSsd.report.ssdBytes, fromSsd.report.loadedBytes());
        EXPECT_GT(fromSsd.report.ssdRequests, 0u);
        EXPECT_LT(fromSsd.report.ssdRequests, fromSsd.report.total.loaded);
        // The up rows and down columns are the cache's: the session holds neither densely.
        EXPECT_LT(fromRam.memory.peak, dense.memory.peak);
    }
    // Exact mode needs the up row and down column of a gated neuron, not its gate row.
    const CacheRun run = generateWith(**package, refs[0].prompt, ram, 8);
    ASSERT_FALSE((*package)->ffnBundles().empty());
    EXPECT_EQ(run.report.bundleBytes, (*package)->ffnBundles()[0].stride - (*package)->ffnBundles()[0].rowBytes);
}

// The GPU path (a device that cannot compute on host memory: slots in its memory, one upload and
// scatter per layer, rows and the down projection over every resident slot, neurons without a
// slot computed on the CPU and added), checked on an opaque CPU device against the CPU path:
// the same neurons load, the reference text holds, the logits agree to rounding, and each
// token costs a few uploads per layer whatever the number of neurons that move.
TEST(NeuronCacheRuntime, OnADeviceWithoutHostPointersTheCpuComputesWhatFindsNoSlot)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaModel& model = **package;
    const LlamaConfig& c = model.config();
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    auto opaqueRun = [&](const std::string& prompt, const NeuronCacheOptions& cache, int tokens = 48) {
        testing_support::OpaqueDevice device(gpu::createCpuDevice(2));
        SessionOptions o;
        o.contextLength = 128;
        o.neuronCache = cache;
        o.placement = plan::uniformPlacement(model, plan::Tier::Device);
        return testing_support::greedyRun(model, device, o, prompt, tokens);
    };
    // 8 slots: most active neurons are the CPU's; a quarter: some are; all: none are.
    for (int capacity : {8, c.ffnDim / 4, c.ffnDim})
        for (BundleSource source : {BundleSource::Ram, BundleSource::Ssd}) {
            SCOPED_TRACE("capacity " + std::to_string(capacity) + (source == BundleSource::Ssd ? " ssd" : " ram"));
            NeuronCacheOptions cache;
            cache.capacity = capacity;
            cache.source = source;
            const auto& ref = refs[size_t(capacity) % refs.size()];
            const CacheRun onCpu = generateWith(model, ref.prompt, cache);
            const CacheRun onDevice = opaqueRun(ref.prompt, cache);
            EXPECT_EQ(onDevice.text.substr(0, ref.text.size()), ref.text);
            EXPECT_LE(testing_support::relativeL2(onDevice.logits, onCpu.logits), 1e-5);
            EXPECT_EQ(onDevice.report.total.loaded, onCpu.report.total.loaded);
            EXPECT_EQ(onDevice.report.total.hits, onCpu.report.total.hits);
            EXPECT_EQ(onDevice.report.ssdBytes, onCpu.report.ssdBytes);
        }
    // Predicted mode: the predictor runs on the host, on `in` downloaded; same choices as on the CPU.
    NeuronCacheOptions predicted;
    predicted.capacity = c.ffnDim / 3;
    predicted.mode = NeuronCacheMode::Predicted;
    const CacheRun onCpu = generateWith(model, refs[0].prompt, predicted);
    const CacheRun onDevice = opaqueRun(refs[0].prompt, predicted);
    EXPECT_EQ(onDevice.text, onCpu.text);
    EXPECT_LE(testing_support::relativeL2(onDevice.logits, onCpu.logits), 1e-5);
    EXPECT_EQ(onDevice.report.total.loaded, onCpu.report.total.loaded);

    // Uploads per token: the arrivals, the slots' activations and the CPU's share, per layer,
    // not one per neuron.
    testing_support::OpaqueDevice device(gpu::createCpuDevice(2));
    SessionOptions o;
    o.contextLength = 64;
    o.neuronCache.capacity = c.ffnDim / 4;
    o.placement = plan::uniformPlacement(model, plan::Tier::Device);
    auto session = LlamaSession::create(model, device, o);
    ASSERT_TRUE(session.ok()) << session.error().message;
    // What the planner sets aside for the cache on a GPU is what it takes: the device's memory
    // holds the weights the cache does not serve, the working buffers and the cache.
    uint64_t unserved = 0;
    const std::vector<std::string> served = SparseFfn::servedTensors(model, o.neuronCache);
    for (const auto& t : o.placement->tensors)
        if (std::find(served.begin(), served.end(), t.name) == served.end()) unserved += t.bytes;
    const uint64_t reserved = SparseFfn::deviceBytes(model, o.neuronCache, /*gpu=*/true);
    const uint64_t taken = device.memoryStats().used - unserved - LlamaSession::workingBytes(c, 64, (*session)->batch());
    EXPECT_GT(reserved, SparseFfn::deviceBytes(model, o.neuronCache));
    EXPECT_LE(taken, reserved + reserved / 10);
    EXPECT_GE(taken, reserved - reserved / 10);
    ASSERT_TRUE((*session)->forward(1, 0).ok());
    const uint64_t loadedBefore = (*session)->neuronCacheReport().total.loaded;
    const uint64_t before = device.uploads;
    ASSERT_TRUE((*session)->forward(400, 1).ok());
    const uint64_t loaded = (*session)->neuronCacheReport().total.loaded - loadedBefore;
    EXPECT_GT(loaded, uint64_t(c.nLayers));  // neurons moved...
    EXPECT_LE(device.uploads - before, uint64_t(3 * c.nLayers + 2));  // ... in a few uploads per layer
}

// PowerInfer's hot/cold split: each layer's hottest neurons (the package's measured activity
// frequencies) are pinned when the session starts. With cold neurons on the CPU, the slots hold
// only hot ones and nothing is shipped per token: the cold ones are computed where they lie (RAM
// in place, or the SSD's overflow area), on the CPU device and beside an opaque device alike,
// and the text is still the reference.
TEST(NeuronCacheRuntime, HotNeuronsArePinnedAndColdOnesRunOnTheCpu)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaModel& model = **package;
    const LlamaConfig& c = model.config();
    auto records = loadFfnPredictors(model, /*recordsOnly=*/true);
    ASSERT_TRUE(records.ok()) << records.error().message;
    ASSERT_EQ(int(records->size()), c.nLayers);
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    const CacheRun dense = generateWith(model, refs[0].prompt, {});

    NeuronCacheOptions ship;
    ship.capacity = c.ffnDim / 4;
    ship.cold = ColdNeurons::Ship;
    NeuronCacheOptions cpu = ship;
    cpu.cold = ColdNeurons::Cpu;
    const CacheRun shipped = generateWith(model, refs[0].prompt, ship);
    const CacheRun pinnedOnly = generateWith(model, refs[0].prompt, cpu);
    EXPECT_EQ(shipped.text.substr(0, refs[0].text.size()), refs[0].text);
    EXPECT_EQ(pinnedOnly.text.substr(0, refs[0].text.size()), refs[0].text);
    // Q8_G64 in exact mode: the dense kernel's arithmetic wherever the neurons are computed.
    EXPECT_EQ(pinnedOnly.logits, dense.logits);
    ASSERT_EQ(pinnedOnly.report.pinned.size(), size_t(c.nLayers));
    // (the sizes of what is indexed below: a run whose session failed reports nothing)
    ASSERT_EQ(pinnedOnly.report.capacities.size(), size_t(c.nLayers));
    ASSERT_EQ(pinnedOnly.report.cold.size(), size_t(c.nLayers));
    ASSERT_EQ(shipped.report.pinned.size(), size_t(c.nLayers));
    ASSERT_EQ(shipped.report.cold.size(), size_t(c.nLayers));
    int shippedPins = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        const FfnPredictor& p = (*records)[size_t(l)];
        const int capacity = pinnedOnly.report.capacities[size_t(l)];
        // Shipping layers pin what is active on at least half of the tokens, up to half the slots;
        // the CPU's layers fill every slot with the hottest.
        EXPECT_EQ(shipped.report.pinned[size_t(l)], int(p.hottest(capacity / 2, false, 0.5).size())) << l;
        EXPECT_EQ(pinnedOnly.report.pinned[size_t(l)], int(p.hottest(capacity, false).size())) << l;
        EXPECT_EQ(pinnedOnly.report.cold[size_t(l)], ColdNeurons::Cpu);
        EXPECT_EQ(shipped.report.cold[size_t(l)], ColdNeurons::Ship);
        shippedPins += shipped.report.pinned[size_t(l)];
        std::printf("[ INFO     ] layer %d: %d of %d slots pinned when shipping, hit rate of the hottest %d: %.3f "
                    "(recorded LRU: %.3f, with pins: %.3f)\n",
                    l, shipped.report.pinned[size_t(l)], capacity, capacity, p.staticHitRate(capacity, false),
                    p.hitRateAt(double(capacity) / c.ffnDim, false), p.hitRateAt(double(capacity) / c.ffnDim, false, true));
    }
    EXPECT_GT(shippedPins, 0);
    // Nothing moves per token: every miss is computed in place.
    const NeuronCacheStats& st = pinnedOnly.report.total;
    EXPECT_GT(st.slotless, 0u);
    EXPECT_EQ(st.loaded, st.slotless);
    EXPECT_EQ(pinnedOnly.report.shippedBytes(), 0u);
    EXPECT_GT(shipped.report.shippedBytes(), 0u);
    std::printf("[ INFO     ] hit rate: hottest pinned %.3f, shipping %.3f\n", st.hitRate(),
                shipped.report.total.hitRate());

    // From the SSD: the pins are read when the session starts, the cold neurons each token.
    NeuronCacheOptions cpuSsd = cpu;
    cpuSsd.source = BundleSource::Ssd;
    const CacheRun fromSsd = generateWith(model, refs[0].prompt, cpuSsd);
    EXPECT_EQ(fromSsd.logits, dense.logits);
    EXPECT_GT(fromSsd.report.pinnedSsdBytes, 0u);
    EXPECT_GE(fromSsd.report.ssdBytes, fromSsd.report.loadedBytes());
    EXPECT_EQ(fromSsd.report.total.loaded, st.loaded);

    // An opaque device: the slots' part on it, the cold part on the CPU, the same text.
    for (const NeuronCacheOptions& o : {cpu, cpuSsd}) {
        testing_support::OpaqueDevice device(gpu::createCpuDevice(2));
        SessionOptions so;
        so.contextLength = 128;
        so.neuronCache = o;
        so.placement = plan::uniformPlacement(model, plan::Tier::Device);
        const CacheRun onDevice = testing_support::greedyRun(model, device, so, refs[0].prompt, 48);
        EXPECT_EQ(onDevice.text, pinnedOnly.text);
        EXPECT_LE(testing_support::relativeL2(onDevice.logits, pinnedOnly.logits), 1e-5);
        EXPECT_EQ(onDevice.report.total.loaded, st.loaded);
        EXPECT_EQ(onDevice.report.total.hits, st.hits);
        EXPECT_EQ(onDevice.report.shippedBytes(), 0u);
    }
    // Predicted mode pins by the predicted frequencies and keeps the CPU device's choices.
    NeuronCacheOptions predicted = cpu;
    predicted.mode = NeuronCacheMode::Predicted;
    const CacheRun predictedRun = generateWith(model, refs[0].prompt, predicted);
    ASSERT_EQ(predictedRun.report.pinned.size(), size_t(c.nLayers));
    ASSERT_EQ(predictedRun.report.capacities.size(), size_t(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l)
        EXPECT_EQ(predictedRun.report.pinned[size_t(l)],
                  int((*records)[size_t(l)].hottest(predictedRun.report.capacities[size_t(l)], true).size()));
    EXPECT_EQ(predictedRun.text.substr(0, refs[0].prompt.size() + 12), dense.text.substr(0, refs[0].prompt.size() + 12));
}

// What the planner is told about a layer whose cold neurons run on the CPU: no bytes go to the
// device, the CPU's work is its own lane, and the choice follows the measured speeds.
TEST(NeuronCachePlanning, ColdNeuronsOnTheCpuAreCostedOnItsLane)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaModel& model = **package;
    const LlamaConfig& c = model.config();
    NeuronCacheOptions ship;
    ship.capacity = c.ffnDim / 4;
    ship.cold = ColdNeurons::Ship;
    NeuronCacheOptions cpu = ship;
    cpu.cold = ColdNeurons::Cpu;
    const auto shipCosts = SparseFfn::layerCosts(model, ship);
    const auto cpuCosts = SparseFfn::layerCosts(model, cpu);
    ASSERT_EQ(cpuCosts.size(), size_t(c.nLayers));
    ASSERT_EQ(shipCosts.size(), size_t(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l) {
        EXPECT_FALSE(cpuCosts[size_t(l)].toDevice);
        EXPECT_EQ(cpuCosts[size_t(l)].loadBytes, 0.0);
        EXPECT_GT(cpuCosts[size_t(l)].cpuComputeBytes, 0.0);
        // The same work, split between the device and the CPU.
        EXPECT_NEAR(cpuCosts[size_t(l)].computeBytes + cpuCosts[size_t(l)].cpuComputeBytes,
                    shipCosts[size_t(l)].computeBytes, 1e-6 * shipCosts[size_t(l)].computeBytes);
        EXPECT_TRUE(shipCosts[size_t(l)].toDevice);
        EXPECT_GT(shipCosts[size_t(l)].loadBytes, 0.0);
    }
    // A GPU behind a slow link with a fast CPU: the CPU's lane carries the cold neurons.
    hw::HardwareProfile profile = testing_support::madeUpHardware();
    hw::DeviceProfile gpu = profile.devices.front();
    gpu.backend = "made-up-gpu";
    gpu.caps.hostPointers = false;
    gpu.hostToDevicePinned = 1e6;
    auto everyType = [](double rate) {
        std::vector<hw::FormatThroughput> v;
        for (int t = 0; t < gpu::kDTypeCount; ++t) v.push_back({gpu::DType(t), rate});
        return v;
    };
    gpu.matvec = everyType(1e12);
    profile.devices.push_back(gpu);
    profile.host.cpuMatvec = everyType(20e9);
    NeuronCacheOptions automatic = ship;
    automatic.cold = ColdNeurons::Auto;
    const auto slowLink = SparseFfn::chooseColdNeurons(model, automatic, profile, "made-up-gpu");
    ASSERT_EQ(slowLink.size(), size_t(c.nLayers));
    for (const auto& choice : slowLink) EXPECT_EQ(choice.choice, ColdNeurons::Cpu);
    // A fast link with a slow CPU: every layer ships.
    profile.devices.back().hostToDevicePinned = 1e12;
    profile.host.cpuMatvec = everyType(1e6);
    for (const auto& choice : SparseFfn::chooseColdNeurons(model, automatic, profile, "made-up-gpu"))
        EXPECT_EQ(choice.choice, ColdNeurons::Ship);

    plan::PlannerInput in;
    in.model = &model;
    in.profile = profile;
    in.backend = "made-up-gpu";
    in.contextLength = 64;
    in.served = SparseFfn::servedTensors(model, cpu);
    in.neuronCache = cpuCosts;
    auto planned = plan::planPlacement(in);
    ASSERT_TRUE(planned.ok()) << planned.error().message;
    EXPECT_GT(planned->lanes.cpuCompute, 0.0);
    in.neuronCache = shipCosts;
    auto shipping = plan::planPlacement(in);
    ASSERT_TRUE(shipping.ok()) << shipping.error().message;
    EXPECT_EQ(shipping->lanes.cpuCompute, 0.0);
    EXPECT_GT(shipping->lanes.hostToDevice, planned->lanes.hostToDevice);
}

TEST(NeuronCacheRuntime, PredictedModeTrustsThePredictorsAndStaysCloseToDense)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaConfig& c = (*package)->config();
    const std::string prompt = "Once upon a time";
    const CacheRun dense = generateWith(**package, prompt, {});
    NeuronCacheOptions predicted;
    predicted.capacity = c.ffnDim / 3;
    predicted.mode = NeuronCacheMode::Predicted;
    predicted.source = BundleSource::Ssd;
    const CacheRun run = generateWith(**package, prompt, predicted);
    // The whole bundle moves (gate row included), for the predicted neurons only.
    ASSERT_FALSE((*package)->ffnBundles().empty());
    EXPECT_EQ(run.report.bundleBytes, (*package)->ffnBundles()[0].stride);
    const NeuronCacheStats& s = run.report.total;
    ASSERT_GT(s.tokens, 0u);
    EXPECT_LT(double(s.active) / double(s.tokens), 0.8 * c.ffnDim);  // the predictor picks a part of each layer
    EXPECT_LT(run.memory.peak, dense.memory.peak);  // no FFN matrix is held densely
    // Approximate: the same opening words, and the first token's logits close to the dense ones.
    EXPECT_EQ(run.text.substr(0, prompt.size() + 12), dense.text.substr(0, prompt.size() + 12)) << run.text;
    ASSERT_EQ(run.logits.size(), dense.logits.size());
    size_t best = 0, denseBest = 0;
    for (size_t i = 0; i < run.logits.size(); ++i) {
        if (run.logits[i] > run.logits[best]) best = i;
        if (dense.logits[i] > dense.logits[denseBest]) denseBest = i;
    }
    EXPECT_EQ(best, denseBest);
}

// Predictors of the attention's input: the active set is known before attention runs, so the
// missing bundles are read while it does (every SSD byte of the run, here: each layer's reads fit
// the staging buffer). The package records the input; the predictors are measured on held-out
// tokens like the FFN-input ones, and the text stays close to the dense model's. On a device
// without host pointers the same reads start early, and the text is the CPU's.
TEST(NeuronCacheRuntime, AttentionInputPredictorsReadWhileAttentionRuns)
{
    auto package = LlamaModel::load(attentionPredictedPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaModel& model = **package;
    const LlamaConfig& c = model.config();
    auto predictors = loadFfnPredictors(model, /*recordsOnly=*/true);
    ASSERT_TRUE(predictors.ok()) << predictors.error().message;
    ASSERT_EQ(int(predictors->size()), c.nLayers);
    double recall = 0.0;
    for (const FfnPredictor& p : *predictors) {
        EXPECT_EQ(p.input, PredictorInput::Attention);
        recall += p.recall / c.nLayers;
        std::printf("[ INFO     ] layer %d: attention-input predictor, held-out recall %.3f, precision %.3f\n",
                    p.layer, p.recall, p.precision);
    }
    EXPECT_GT(recall, 0.8);

    const std::string prompt = "Once upon a time";
    const CacheRun dense = generateWith(model, prompt, {});
    NeuronCacheOptions early;
    early.capacity = c.ffnDim / 3;
    early.mode = NeuronCacheMode::Predicted;
    early.source = BundleSource::Ssd;
    const CacheRun run = generateWith(model, prompt, early);
    EXPECT_GT(run.report.ssdBytes, 0u);
    EXPECT_EQ(run.report.earlyBytes, run.report.ssdBytes);
    std::printf("[ INFO     ] dense: %s\n[ INFO     ] early: %s\n", dense.text.c_str(), run.text.c_str());
    EXPECT_EQ(run.text.substr(0, prompt.size() + 12), dense.text.substr(0, prompt.size() + 12)) << run.text;

    testing_support::OpaqueDevice device(gpu::createCpuDevice(2));
    SessionOptions o;
    o.contextLength = 128;
    o.neuronCache = early;
    o.placement = plan::uniformPlacement(model, plan::Tier::Device);
    const CacheRun onDevice = testing_support::greedyRun(model, device, o, prompt, 48);
    EXPECT_EQ(onDevice.text, run.text);
    EXPECT_EQ(onDevice.report.earlyBytes, onDevice.report.ssdBytes);
    EXPECT_EQ(onDevice.report.total.loaded, run.report.total.loaded);

    // Predictors of the FFN's input start nothing early.
    auto ffnPackage = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(ffnPackage.ok()) << ffnPackage.error().message;
    const CacheRun late = generateWith(**ffnPackage, prompt, early);
    EXPECT_GT(late.report.ssdBytes, 0u);
    EXPECT_EQ(late.report.earlyBytes, 0u);
}

TEST(NeuronCacheRuntime, ModesAndSourcesThatCannotWorkSaySo)
{
    auto source = reluStories260K();
    ASSERT_TRUE(source);
    auto device = gpu::createCpuDevice(1);
    SessionOptions o;
    o.contextLength = 32;
    o.neuronCache.capacity = 16;
    o.neuronCache.source = BundleSource::Ssd;  // a checkpoint stores no bundles
    auto s1 = LlamaSession::create(*source, *device, o);
    ASSERT_FALSE(s1.ok());
    EXPECT_NE(s1.error().message.find("--bundles"), std::string::npos) << s1.error().message;
    o.neuronCache.source = BundleSource::Ram;
    o.neuronCache.mode = NeuronCacheMode::Predicted;  // ... nor predictors
    auto s2 = LlamaSession::create(*source, *device, o);
    ASSERT_FALSE(s2.ok());
    EXPECT_NE(s2.error().message.find("--predictors"), std::string::npos) << s2.error().message;
    o.neuronCache.mode = NeuronCacheMode::Exact;
    o.neuronCache.cold = ColdNeurons::Cpu;  // ... nor activity frequencies to pick hot neurons by
    auto s3 = LlamaSession::create(*source, *device, o);
    ASSERT_FALSE(s3.ok());
    EXPECT_EQ(s3.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(s3.error().message.find("--predictors"), std::string::npos) << s3.error().message;
}

TEST(NeuronBundles, CancellingDuringPredictorTrainingLeavesNothingBehind)
{
    // Training runs the model over every calibration prompt and fits each layer: a cancel there
    // must stop it, not wait for the end.
    auto source = reluStories260K();
    ASSERT_TRUE(source);
    auto device = gpu::createCpuDevice(2);
    testing_support::TempDir dir("cancel-predictors");
    CompressOptions o;
    o.qualityCheck = false;
    o.bundles = true;
    o.predictorRank = 16;
    int calls = 0;
    double last = 0;
    o.progress = [&](const CompressProgress& p) {
        if (p.stage != "training predictors") return true;
        EXPECT_GE(p.fraction, last);  // moves forward through the stage
        last = p.fraction;
        return ++calls < 20;  // a few reports into the stage
    };
    auto report = compressModel(*source, dir.path() + "/package", o, *device);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error().code, ErrorCode::Cancelled);
    EXPECT_EQ(calls, 20);
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
        ADD_FAILURE() << "left behind: " << entry.path();
}

TEST(NeuronCachePlanning, CostsFollowTheRecordedHitCurveAndSlowThePlan)
{
    auto package = LlamaModel::load(bundledPackage());
    ASSERT_TRUE(package.ok()) << package.error().message;
    const LlamaConfig& c = (*package)->config();
    auto predictors = loadFfnPredictors(**package);
    ASSERT_TRUE(predictors.ok()) << predictors.error().message;
    ASSERT_EQ(predictors->size(), size_t(c.nLayers));
    for (const FfnPredictor& p : *predictors) {
        // LRU's stack property: more room never loses hits; all of the layer misses only cold starts.
        for (bool predicted : {false, true}) {
            const std::vector<float>& curve = predicted ? p.predictedHitCurve : p.hitCurve;
            ASSERT_EQ(curve.size(), std::size(kHitCurveShares));
            for (size_t i = 1; i < curve.size(); ++i) EXPECT_GE(curve[i], curve[i - 1]) << p.layer;
            EXPECT_GT(curve.back(), 0.9);
            EXPECT_LE(curve.back(), 1.0);
            EXPECT_NEAR(p.hitRateAt(kHitCurveShares[3], predicted), curve[3], 1e-6);
            const double between = p.hitRateAt((kHitCurveShares[3] + kHitCurveShares[4]) / 2, predicted);
            EXPECT_NEAR(between, (curve[3] + curve[4]) / 2, 1e-6);
            // With the hot neurons pinned as a shipping session pins them: recorded too, and
            // about as good as plain LRU or better (pins only keep what is used most).
            const std::vector<float>& pinned = predicted ? p.predictedPinnedHitCurve : p.pinnedHitCurve;
            ASSERT_EQ(pinned.size(), std::size(kHitCurveShares));
            for (size_t i = 0; i < pinned.size(); ++i) {
                EXPECT_GE(pinned[i], curve[i] - 0.05) << p.layer << " " << i;
                EXPECT_LE(pinned[i], 1.0);
            }
            EXPECT_NEAR(p.hitRateAt(kHitCurveShares[2], predicted, true), pinned[2], 1e-6);
        }
    }
    // A bigger cache loads fewer bytes per token; the planner puts them on the layer's path.
    NeuronCacheOptions small;
    small.capacity = c.ffnDim / 10;
    small.source = BundleSource::Ssd;
    NeuronCacheOptions big = small;
    big.capacity = c.ffnDim / 2;
    const auto smallCosts = SparseFfn::layerCosts(**package, small);
    const auto bigCosts = SparseFfn::layerCosts(**package, big);
    ASSERT_EQ(smallCosts.size(), size_t(c.nLayers));
    ASSERT_EQ(bigCosts.size(), size_t(c.nLayers));
    double smallBytes = 0, bigBytes = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        smallBytes += smallCosts[size_t(l)].loadBytes;
        bigBytes += bigCosts[size_t(l)].loadBytes;
        EXPECT_TRUE(smallCosts[size_t(l)].fromSsd);
        EXPECT_GT(smallCosts[size_t(l)].computeBytes, 0.0);
    }
    EXPECT_GT(smallBytes, bigBytes);
    EXPECT_GT(bigBytes, 0.0);

    plan::PlannerInput in;
    in.model = &**package;
    in.profile = testing_support::madeUpHardware();
    in.contextLength = 64;
    in.served = SparseFfn::servedTensors(**package, small);
    auto without = plan::planPlacement(in);
    in.neuronCache = smallCosts;
    auto with = plan::planPlacement(in);
    ASSERT_TRUE(without.ok() && with.ok());
    EXPECT_NEAR(double(with->ssdBytes - without->ssdBytes), smallBytes, double(c.nLayers));  // whole bytes per layer
    EXPECT_GT(with->lanes.ssdRead, without->lanes.ssdRead);
    EXPECT_GT(with->secondsPerToken, without->secondsPerToken);
}
