// Activation-sparsity statistics: the accumulator's figures on hand-made activation sequences
// (worked out by hand below), then real measurements on the ReLU-sparse relu-stories-260K (its
// README reports 23-32% of matmul inputs non-zero) and the dense SwiGLU stories260K.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/calibrate/predictor_training.h"
#include "core/calibrate/activation_sparsity.h"
#include "core/calibrate/activation_threshold.h"
#include "core/calibrate/compress_model.h"
#include "core/compress/ffn_predictor.h"
#include "core/plan/model_tensors.h"
#include "core/plan/neuron_cache_model.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/plan/neuron_cache.h"
#include "core/runtime/sampler.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/greedy_text.h"
#include "cache_run.h"
#include "../common/temp_dir.h"

using namespace spillway;
using namespace spillway::compress;

namespace {

// Activations of 4 neurons with the given ones non-zero (a negative value counts as active).
std::vector<float> active(std::initializer_list<int> ids)
{
    std::vector<float> x(4, 0.0f);
    for (int i : ids) x[size_t(i)] = i % 2 ? -0.5f : 0.25f;
    return x;
}

const std::string kData = SPILLWAY_TEST_DATA_DIR;

}  // namespace

TEST(SparsityAccumulator, HandWorkedSequence)
{
    SparsityAccumulator acc(4, {1, 2}, 0.0);
    acc.startPrompt();
    acc.add(active({0, 1}));  // no history
    acc.add(active({1, 2}));  // 1 seen 1 token ago: hit1 1/2, hit2 1/2; holds {0,1,2}: k1 2, k2 3
    acc.add(active({0, 3}));  // 0 seen 2 tokens ago: hit1 0, hit2 1/2; holds k1 {0,3}, k2 all 4
    acc.startPrompt();        // what came before is forgotten
    acc.add(active({2}));     // no history
    acc.add(active({2}));     // hit1 1, hit2 1; holds {2}

    const LayerSparsity r = acc.result(7);
    EXPECT_EQ(r.layer, 7);
    EXPECT_EQ(r.neurons, 4);
    EXPECT_EQ(r.tokens, 5);
    EXPECT_DOUBLE_EQ(r.density, (0.5 + 0.5 + 0.5 + 0.25 + 0.25) / 5);
    EXPECT_DOUBLE_EQ(r.minDensity, 0.25);
    EXPECT_DOUBLE_EQ(r.maxDensity, 0.5);
    ASSERT_EQ(r.windowHit.size(), 2u);
    EXPECT_DOUBLE_EQ(r.windowHit[0], (0.5 + 0.0 + 1.0) / 3);
    EXPECT_DOUBLE_EQ(r.windowHit[1], (0.5 + 0.5 + 1.0) / 3);
    EXPECT_DOUBLE_EQ(r.windowFetch[0], (0.25 + 0.5 + 0.0) / 3);
    EXPECT_DOUBLE_EQ(r.windowFetch[1], (0.25 + 0.25 + 0.0) / 3);
    EXPECT_DOUBLE_EQ(r.windowSize[0], (0.5 + 0.5 + 0.25) / 3);
    EXPECT_DOUBLE_EQ(r.windowSize[1], (0.75 + 1.0 + 0.25) / 3);
    // Activity counts 2, 2, 3, 1: the hottest 10% (one neuron) holds 3 of 8.
    EXPECT_DOUBLE_EQ(r.hotShare, 3.0 / 8.0);
}

TEST(SparsityAccumulator, ThresholdDecidesWhatIsActive)
{
    SparsityAccumulator acc(4, {1}, 0.3);
    acc.add(std::vector<float>{0.2f, -0.31f, 0.29f, 1.0f});  // |x| > 0.3: neurons 1, 3
    EXPECT_DOUBLE_EQ(acc.result(0).density, 0.5);
}

TEST(ActivationSparsity, ReluStoriesIsSparseAndWindowsHelp)
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    SparsityOptions options;
    options.windows = {1, 2, 4, 8};
    auto report = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(report.ok()) << report.error().message;
    ASSERT_EQ(report->layers.size(), size_t((*model)->config().nLayers));
    EXPECT_GT(report->tokens, 100);
    EXPECT_GT(report->density(), 0.10);
    EXPECT_LT(report->density(), 0.50);
    for (const LayerSparsity& l : report->layers) {
        EXPECT_EQ(l.tokens, report->tokens);
        EXPECT_EQ(l.neurons, (*model)->config().ffnDim);
        EXPECT_LE(l.minDensity, l.density);
        EXPECT_GE(l.maxDensity, l.density);
        ASSERT_EQ(l.windowHit.size(), options.windows.size());
        ASSERT_EQ(l.windowFetch.size(), options.windows.size());
        ASSERT_EQ(l.windowSize.size(), options.windows.size());
        for (size_t w = 0; w < options.windows.size(); ++w) {
            // Loaded per token: what is active and not in the window; never more than is active.
            EXPECT_LE(l.windowFetch[w], l.density + 1e-12) << "layer " << l.layer;
            EXPECT_GE(l.windowSize[w], 0.0);
            if (w == 0) continue;
            EXPECT_GE(l.windowHit[w], l.windowHit[w - 1]) << "layer " << l.layer;
            EXPECT_LE(l.windowFetch[w], l.windowFetch[w - 1]) << "layer " << l.layer;
            EXPECT_GE(l.windowSize[w], l.windowSize[w - 1]) << "layer " << l.layer;
        }
        // Consecutive tokens share active neurons far more than chance (density) would give.
        EXPECT_GT(l.windowHit[0], l.density) << "layer " << l.layer;
    }
}

TEST(ActivationSparsity, SwigluHasNoExactZerosUnlessAThresholdSaysSo)
{
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    SparsityOptions options;
    options.prompts = {"Once upon a time, there was a little dog."};
    auto dense = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(dense.ok()) << dense.error().message;
    EXPECT_GT(dense->density(), 0.99);
    options.threshold = 1e30;
    auto none = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(none.ok()) << none.error().message;
    EXPECT_EQ(none->density(), 0.0);
}

TEST(ActivationSparsity, BadOptionsAreRefused)
{
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    SparsityOptions options;
    options.windows = {0};
    auto r = measureActivationSparsity(**model, *device, options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    options.windows = {1};
    options.threshold = -1.0;
    EXPECT_FALSE(measureActivationSparsity(**model, *device, options).ok());
}

// ---- predictors ------------------------------------------------------------------------------

TEST(FfnPredictor, FullRankIsExactAndLowRankStillBeatsChance)
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    const LlamaConfig& c = (*model)->config();

    // Rank = dim, no fit: B A x is the gate's own pre-activation, so the prediction is the
    // truth up to the offset and to the engine rounding the gate inputs.
    PredictorOptions exact;
    exact.rank = c.dim;
    exact.fitIterations = 0;
    auto full = trainFfnPredictors(**model, *device, exact);
    ASSERT_TRUE(full.ok()) << full.error().message;
    ASSERT_EQ(full->size(), size_t(c.nLayers));
    for (const FfnPredictor& p : *full) {
        EXPECT_EQ(p.rank, c.dim);
        EXPECT_EQ(p.neurons, c.ffnDim);
        EXPECT_GT(p.testTokens, 20);
        EXPECT_GT(p.trainTokens, p.testTokens);
        EXPECT_GE(p.recall, 0.97) << "layer " << p.layer;
        EXPECT_GE(p.precision, 0.97) << "layer " << p.layer;
    }

    // A quarter of the rank, fitted: most active neurons found, in a set well below the layer.
    PredictorOptions low;
    low.rank = c.dim / 4;
    auto small = trainFfnPredictors(**model, *device, low);
    ASSERT_TRUE(small.ok()) << small.error().message;
    for (const FfnPredictor& p : *small) {
        EXPECT_GE(p.recall, 0.85) << "layer " << p.layer;
        EXPECT_LT(p.predictedDensity, 0.75) << "layer " << p.layer;
        EXPECT_GT(p.precision, 1.2 * p.density) << "layer " << p.layer;  // far better than chance
        // predict() gives the neurons whose logits are positive, ascending.
        std::vector<float> x(size_t(c.dim), 0.1f), scratch;
        std::vector<uint32_t> active;
        p.predict(x.data(), active, scratch);
        EXPECT_TRUE(std::is_sorted(active.begin(), active.end()));
        EXPECT_LE(active.size(), size_t(p.neurons));
    }
}

TEST(FfnPredictor, RefusesWhatItCannotPredict)
{
    auto swiglu = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(swiglu.ok()) << swiglu.error().message;
    auto device = gpu::createCpuDevice(1);
    auto r = trainFfnPredictors(**swiglu, *device, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(r.error().message.find("no ReLU"), std::string::npos) << r.error().message;

    auto relu = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                 ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(relu.ok()) << relu.error().message;
    PredictorOptions one;
    one.prompts = {"Only one prompt."};
    auto onePrompt = trainFfnPredictors(**relu, *device, one);
    ASSERT_FALSE(onePrompt.ok());
    EXPECT_EQ(onePrompt.error().code, ErrorCode::InvalidArgument);
    PredictorOptions rank0;
    rank0.rank = 0;
    auto noRank = trainFfnPredictors(**relu, *device, rank0);
    ASSERT_FALSE(noRank.ok());
    EXPECT_EQ(noRank.error().code, ErrorCode::InvalidArgument);
}

// ---- the neuron cache model ------------------------------------------------------------------

namespace {

plan::ActivityTrace activity(int neurons, std::vector<std::vector<uint32_t>> tokens)
{
    plan::ActivityTrace t;
    t.neurons = neurons;
    t.offsets.push_back(0);
    for (const auto& ids : tokens) {
        t.ids.insert(t.ids.end(), ids.begin(), ids.end());
        t.offsets.push_back(t.ids.size());
    }
    return t;
}

}  // namespace

TEST(NeuronCacheModel, LruReplayWorkedByHand)
{
    // Capacity 2 of 4 neurons. t0 {0,1}: loads 2. t1 {1,2}: hit 1, loads 2, evicts 0 (least
    // recently active). t2 {0,1}: loads 0, hit 1, evicts 2.
    const std::vector<plan::ActivityTrace> layers = {activity(4, {{0, 1}, {1, 2}, {0, 1}})};
    const plan::NeuronCacheResult r = plan::simulateNeuronCache(layers, 10, 20);
    ASSERT_EQ(r.layers.size(), 1u);
    EXPECT_EQ(r.layers[0].capacity, 2);
    EXPECT_DOUBLE_EQ(r.hitRate, 2.0 / 6.0);
    EXPECT_DOUBLE_EQ(r.layers[0].loadedPerToken, 4.0 / 3.0);
    EXPECT_EQ(r.ffnBytes, 40u);
    EXPECT_DOUBLE_EQ(r.bytesPerToken, 40.0 / 3.0);
    EXPECT_DOUBLE_EQ(r.denseBytesPerToken, 20.0);
    EXPECT_DOUBLE_EQ(r.reduction(), 1.5);
    // Everything fits: only the first use of each neuron loads.
    const plan::NeuronCacheResult all = plan::simulateNeuronCache(layers, 10, 40);
    EXPECT_DOUBLE_EQ(all.layers[0].loadedPerToken, 3.0 / 3.0);
    EXPECT_DOUBLE_EQ(all.denseBytesPerToken, 0.0);
}

TEST(NeuronCacheModel, BudgetsFollowDensityAndFillUp)
{
    const std::vector<double> density = {0.1, 0.4};
    const std::vector<int> neurons = {100, 100};
    EXPECT_EQ(plan::allocateCacheCapacity(density, neurons, 1, 100), (std::vector<int>{20, 80}));
    // The denser layer would get 120 of its 100: full, and the rest goes to the other.
    EXPECT_EQ(plan::allocateCacheCapacity(density, neurons, 1, 150), (std::vector<int>{50, 100}));
    EXPECT_EQ(plan::allocateCacheCapacity(density, neurons, 1, 1000), (std::vector<int>{100, 100}));
    EXPECT_EQ(plan::allocateCacheCapacity(density, neurons, 1, 0), (std::vector<int>{0, 0}));
}

TEST(NeuronCacheModel, ReluStoriesMovesFewerBytesThanDenseOffloading)
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    SparsityOptions options;
    options.keepTraces = true;
    options.continueTokens = 32;
    auto report = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(report.ok()) << report.error().message;
    ASSERT_EQ(report->traces.size(), report->layers.size());
    for (size_t l = 0; l < report->traces.size(); ++l) {
        EXPECT_EQ(int64_t(report->traces[l].tokens()), report->tokens);
        EXPECT_NEAR(report->traces[l].density(), report->layers[l].density, 0.02);
    }
    const uint64_t bundle = 3 * 68;  // gate, up and down: 64 values each in one Q8_G64 block
    uint64_t ffn = 0;
    for (const auto& t : report->traces) ffn += uint64_t(t.neurons) * bundle;
    double previous = 0.0;
    for (double share : {0.1, 0.25, 0.5}) {
        const auto r = plan::simulateNeuronCache(report->traces, bundle, uint64_t(share * double(ffn)));
        EXPECT_GT(r.reduction(), 2.0) << share;  // the cache loads active neurons only
        EXPECT_GT(r.hitRate, previous) << share;  // more room, more hits
        previous = r.hitRate;
    }
}

TEST(FfnPredictor, StoredInThePackageAndReadBack)
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    auto none = loadFfnPredictors(**model);
    ASSERT_TRUE(none.ok()) << none.error().message;
    EXPECT_TRUE(none->empty());

    CompressOptions o;
    o.qualityCheck = false;
    o.predictorRank = 16;
    o.predictorContinueTokens = 16;
    // The progress fraction only grows, through every stage, to 1 when done; training takes a
    // share of it by its work (estimatePredictorWork), not a fixed half.
    std::vector<std::pair<std::string, double>> seen;
    o.progress = [&](const CompressProgress& p) {
        seen.emplace_back(p.stage, p.fraction);
        return true;
    };
    testing_support::TempDir dir("predictors");
    const std::string path = dir.path() + "/package";
    auto report = compressModel(**model, path, o, *device);
    ASSERT_TRUE(report.ok()) << report.error().message;
    ASSERT_FALSE(seen.empty());
    double firstTraining = -1.0, lastTraining = -1.0;
    for (size_t i = 0; i < seen.size(); ++i) {
        if (i > 0) {
            EXPECT_GE(seen[i].second, seen[i - 1].second) << seen[i].first << " after " << seen[i - 1].first;
        }
        if (seen[i].first == "training predictors") {
            if (firstTraining < 0.0) firstTraining = seen[i].second;
            lastTraining = seen[i].second;
        }
    }
    EXPECT_EQ(seen.back().first, "done");
    EXPECT_EQ(seen.back().second, 1.0);
    EXPECT_GT(lastTraining - firstTraining, 0.05);  // training moves the fraction along
    const PredictorWork work = estimatePredictorWork(**model, PredictorOptions{});
    EXPECT_GT(work.calibrationSeconds, 0.0);
    EXPECT_GT(work.fitSeconds, 0.0);
    EXPECT_EQ(report->predictors, (*model)->config().nLayers);
    EXPECT_GT(report->predictorRecall, 0.8);

    auto package = LlamaModel::load(path);
    ASSERT_TRUE(package.ok()) << package.error().message;
    auto loaded = loadFfnPredictors(**package);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    ASSERT_EQ(loaded->size(), size_t((*model)->config().nLayers));

    // Training is deterministic: the same options give the stored predictors bit for bit.
    PredictorOptions po;
    po.rank = 16;
    po.continueTokens = 16;
    po.maxTokensPerPrompt = o.calibrationTokens;
    auto trained = trainFfnPredictors(**model, *device, po);
    ASSERT_TRUE(trained.ok()) << trained.error().message;
    ASSERT_EQ(trained->size(), loaded->size());
    for (size_t l = 0; l < loaded->size(); ++l) {
        EXPECT_EQ((*loaded)[l].rank, 16);
        EXPECT_EQ((*loaded)[l].a, (*trained)[l].a) << l;
        EXPECT_EQ((*loaded)[l].b, (*trained)[l].b) << l;
        EXPECT_EQ((*loaded)[l].bias, (*trained)[l].bias) << l;
        // The activity frequencies: stored with them, each in [0, 1], and their mean is the
        // layer's density (over every calibration token, where `density` is the held-out one's).
        EXPECT_EQ((*loaded)[l].frequency, (*trained)[l].frequency) << l;
        EXPECT_EQ((*loaded)[l].predictedFrequency, (*trained)[l].predictedFrequency) << l;
        ASSERT_EQ((*loaded)[l].frequency.size(), size_t((*model)->config().ffnDim));
        double mean = 0.0, predictedMean = 0.0;
        for (float f : (*loaded)[l].frequency) mean += f;
        for (float f : (*loaded)[l].predictedFrequency) predictedMean += f;
        mean /= (*model)->config().ffnDim;
        predictedMean /= (*model)->config().ffnDim;
        EXPECT_NEAR(mean, (*loaded)[l].density, 0.05) << l;
        EXPECT_NEAR(predictedMean, (*loaded)[l].predictedDensity, 0.05) << l;
        // Records alone carry them too (planning needs them).
        auto records = loadFfnPredictors(**package, /*recordsOnly=*/true);
        ASSERT_TRUE(records.ok()) << records.error().message;
        ASSERT_EQ(records->size(), loaded->size());
        EXPECT_EQ((*records)[l].frequency, (*loaded)[l].frequency);
        EXPECT_TRUE((*records)[l].a.empty());
    }
}

TEST(FfnPredictor, SparsePresetMakesANeuronCachePackage)
{
    // The app's one-click preset for ReLU models: weights as they are, bundles and predictors of
    // the attention's input; refused, with nothing left behind, for a SwiGLU model.
    ASSERT_EQ(presetFromName("sparse"), Preset::Sparse);
    EXPECT_STREQ(presetName(Preset::Sparse), "sparse");
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    testing_support::TempDir dir("sparse-preset");
    CompressOptions o = presetOptions(Preset::Sparse);
    o.predictorContinueTokens = 8;  // keeps the test short
    auto report = compressModel(**model, dir.path() + "/package", o, *device);
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->predictors, (*model)->config().nLayers);
    EXPECT_GT(report->bundleBytes, 0u);
    EXPECT_FALSE(report->quality);  // the dense weights did not change: nothing to compare
    auto package = LlamaModel::load(dir.path() + "/package");
    ASSERT_TRUE(package.ok()) << package.error().message;
    EXPECT_FALSE((*package)->ffnBundles().empty());
    auto loaded = loadFfnPredictors(**package);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    ASSERT_FALSE(loaded->empty());
    EXPECT_EQ(loaded->front().input, PredictorInput::Attention);

    auto swiglu = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(swiglu.ok()) << swiglu.error().message;
    auto refused = compressModel(**swiglu, dir.path() + "/swiglu", presetOptions(Preset::Sparse), *device);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::UnsupportedModel) << refused.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/swiglu"));
}

TEST(FfnPredictor, ThreadsChangeTheFitOnlyInRounding)
{
    // The fit's matrix products (linalg.h) may round differently on another thread count; the
    // predictors' figures stay the same.
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    PredictorOptions po;
    po.rank = 8;
    po.maxTokensPerPrompt = 16;
    po.fitIterations = 20;
    po.threads = 1;
    auto one = trainFfnPredictors(**model, *device, po);
    po.threads = 3;
    auto three = trainFfnPredictors(**model, *device, po);
    ASSERT_TRUE(one.ok() && three.ok()) << (one ? "" : one.error().message) << (three ? "" : three.error().message);
    ASSERT_EQ(one->size(), three->size());
    for (size_t l = 0; l < one->size(); ++l) {
        const FfnPredictor &a = (*one)[l], &b = (*three)[l];
        ASSERT_EQ(a.b.size(), b.b.size());
        for (size_t i = 0; i < a.b.size(); ++i) ASSERT_NEAR(a.b[i], b.b[i], 1e-3f * (1.0f + std::fabs(a.b[i]))) << l;
        EXPECT_NEAR(a.recall, b.recall, 0.01) << l;
        EXPECT_NEAR(a.precision, b.precision, 0.01) << l;
    }
}

// ---- approximate mode for SwiGLU -------------------------------------------------------------

TEST(ActivationThreshold, DropsTheTargetShareAndCostsQualityInProportion)
{
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);

    ThresholdOptions none;
    none.targetSparsity = 0.0;  // thresholds 0: only exact zeros go, none here: the same logits
    auto same = measureThresholdQuality(**model, *device, none);
    ASSERT_TRUE(same.ok()) << same.error().message;
    for (float t : same->thresholds) EXPECT_EQ(t, 0.0f);
    EXPECT_LE(same->quality.meanKl, 1e-9);  // the batched positions' float matrix products: rounding
    EXPECT_EQ(same->quality.top1Agreement, 1.0);

    double previousKl = 0.0;
    for (double target : {0.3, 0.7}) {
        ThresholdOptions o;
        o.targetSparsity = target;
        auto r = measureThresholdQuality(**model, *device, o);
        ASSERT_TRUE(r.ok()) << r.error().message;
        ASSERT_EQ(r->thresholds.size(), size_t((*model)->config().nLayers));
        for (float t : r->thresholds) EXPECT_GT(t, 0.0f);
        // Calibrated on other prompts than the quality run's, the share still lands near.
        EXPECT_NEAR(r->droppedShare, target, 0.08) << target;
        EXPECT_GT(r->quality.meanKl, previousKl) << target;
        previousKl = r->quality.meanKl;
    }

    ThresholdOptions bad;
    bad.targetSparsity = 1.0;
    auto refused = calibrateActivationThresholds(**model, *device, bad);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

// ---- synthetic ReLU models with a chosen density ----------------------------------------------

TEST(SyntheticDensity, OptLayersFollowTheTargetProfile)
{
    testing_support::TempDir dir("synthetic-density");
    auto write = [&](const std::string& name, std::vector<double> density, double spread) {
        SyntheticOptions o;
        o.preset = "opt-125m";
        o.type = gpu::DType::Q8_0;
        o.layers = 2;
        o.alignment = 32;
        o.ffnDensity = std::move(density);
        o.ffnDensitySpread = spread;
        const std::string path = dir.path() + "/" + name;
        const Status s = writeSyntheticModel(o, path);
        EXPECT_TRUE(s.ok()) << s.error().message;
        return path;
    };
    // An empty report (no layers: the callers check the count) if the model or the measurement
    // failed.
    auto measure = [&](const std::string& path) -> SparsityReport {
        auto model = LlamaModel::load(path);
        EXPECT_TRUE(model.ok()) << model.error().message;
        if (!model) return {};
        auto device = gpu::createCpuDevice(2);
        SparsityOptions o;
        o.prompts = {"Once upon a time there was a little cat.", "The sun is warm and the sky is blue.",
                     "First mix the flour, then add two eggs."};
        auto r = measureActivationSparsity(**model, *device, o);
        EXPECT_TRUE(r.ok()) << r.error().message;
        if (!r) return {};
        return *r;
    };
    const SparsityReport hot = measure(write("hot.gguf", {0.1, 0.3}, 1.0));
    ASSERT_EQ(hot.layers.size(), 2u);
    EXPECT_NEAR(hot.layers[0].density, 0.1, 0.04);
    EXPECT_NEAR(hot.layers[1].density, 0.3, 0.06);
    // All neurons alike: the same density, but the hottest 10% carry far less of it.
    const SparsityReport flat = measure(write("flat.gguf", {0.1, 0.3}, 0.0));
    ASSERT_EQ(flat.layers.size(), 2u);
    EXPECT_NEAR(flat.layers[0].density, 0.1, 0.04);
    EXPECT_LT(flat.layers[0].hotShare + 0.1, hot.layers[0].hotShare);

    SyntheticOptions llama;
    llama.preset = "tinyllama-1.1b";
    llama.layers = 1;
    llama.ffnDensity = {0.1};
    const Status refused = writeSyntheticModel(llama, dir.path() + "/llama.gguf");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("ReLU"), std::string::npos);
}

// ---- the neuron cache's bookkeeping ------------------------------------------------------------

namespace {

std::vector<std::pair<uint32_t, int32_t>> loadsOf(std::span<const NeuronLoad> loads)
{
    std::vector<std::pair<uint32_t, int32_t>> out;
    for (const NeuronLoad& l : loads) out.emplace_back(l.neuron, l.slot);
    return out;
}

using Loads = std::vector<std::pair<uint32_t, int32_t>>;

}  // namespace

TEST(NeuronCache, OnlyTheDifferenceIsLoadedAndLruEvictsTheStalest)
{
    NeuronCache c(8, 3, EvictionPolicy::Lru);
    const std::vector<uint32_t> t0 = {1, 2, 3}, t1 = {2, 4}, t2 = {3, 5}, t3 = {2, 5, 3};
    EXPECT_EQ(loadsOf(c.update(t0)), (Loads{{1, 0}, {2, 1}, {3, 2}}));
    // 2 resident; 4 takes the slot of the least recently active of {1, 3}: both last active at
    // t0, the lower slot goes (1's).
    EXPECT_EQ(loadsOf(c.update(t1)), (Loads{{4, 0}}));
    EXPECT_EQ(c.slotOf(1), -1);
    // 3 resident; 5 evicts the stalest of {2 (t1), 4 (t1)}: slot order breaks the tie: 4 (slot 0).
    EXPECT_EQ(loadsOf(c.update(t2)), (Loads{{5, 0}}));
    EXPECT_EQ(loadsOf(c.update(t3)), (Loads{}));  // all three resident
    EXPECT_EQ(c.stats().tokens, 4u);
    EXPECT_EQ(c.stats().active, 10u);
    EXPECT_EQ(c.stats().hits, 5u);
    EXPECT_EQ(c.stats().loaded, 5u);
    EXPECT_EQ(c.resident(), 3);
}

TEST(NeuronCache, FifoWindowsAndOverflow)
{
    // FIFO evicts the longest resident even when it was just used.
    NeuronCache fifo(8, 2, EvictionPolicy::Fifo);
    const std::vector<uint32_t> a = {0, 1}, b = {0}, c = {2};
    fifo.update(a);
    fifo.update(b);  // 0 used again
    EXPECT_EQ(loadsOf(fifo.update(c)), (Loads{{2, 0}}));  // 0 loaded first: it goes
    NeuronCache lru(8, 2, EvictionPolicy::Lru);
    lru.update(a);
    lru.update(b);
    EXPECT_EQ(loadsOf(lru.update(c)), (Loads{{2, 1}}));  // 1 is the stalest

    // A window of 1 token keeps the neuron active one token ago over one active two tokens ago
    // (which a window of 2 would keep as well), under FIFO too.
    NeuronCache windowed(8, 2, EvictionPolicy::Fifo, 1);
    const std::vector<uint32_t> w0 = {0}, w1 = {1}, w2 = {0}, w3 = {2};
    windowed.update(w0);
    windowed.update(w1);
    windowed.update(w2);  // 0 resident, active again
    EXPECT_EQ(loadsOf(windowed.update(w3)), (Loads{{2, 1}}));  // 1 goes, though 0 came first

    // More active than slots: the extra ones get none, and count as loaded.
    NeuronCache small(8, 2);
    const std::vector<uint32_t> many = {5, 6, 7};
    EXPECT_EQ(loadsOf(small.update(many)), (Loads{{5, 0}, {6, 1}, {7, -1}}));
    EXPECT_EQ(small.stats().loaded, 3u);
    small.clear();
    EXPECT_EQ(small.resident(), 0);
    EXPECT_EQ(small.slotOf(5), -1);
}

TEST(NeuronCache, PinnedNeuronsStayAndAStaticCacheAdmitsNothing)
{
    // 10 neurons, 4 slots; 7 and 2 pinned to the first slots (pins are not counted as loads).
    NeuronCache c(10, 4);
    const std::vector<uint32_t> hot = {7, 2};
    EXPECT_EQ(loadsOf(c.pin(hot)), (Loads{{7, 0}, {2, 1}}));
    EXPECT_EQ(c.pinned(), 2);
    EXPECT_TRUE(c.isPinned(7));
    EXPECT_FALSE(c.isPinned(1));
    EXPECT_EQ(c.stats().loaded, 0u);
    // {1, 3, 5}: two free slots; 5 finds none, since only pinned and needed neurons are resident.
    const std::vector<uint32_t> t0 = {1, 3, 5}, t1 = {5, 7}, t2 = {0, 1, 4, 6, 8};
    EXPECT_EQ(loadsOf(c.update(t0)), (Loads{{1, 2}, {3, 3}, {5, -1}}));
    EXPECT_EQ(c.stats().slotless, 1u);
    // 7 hits; 5 evicts the stalest unpinned neuron (1 and 3 tie: the lower slot goes).
    EXPECT_EQ(loadsOf(c.update(t1)), (Loads{{5, 2}}));
    EXPECT_EQ(c.stats().hits, 1u);
    // Five cold neurons at once evict the two unpinned ones, never 7 or 2 (which sat idle longer).
    EXPECT_EQ(loadsOf(c.update(t2)), (Loads{{0, 3}, {1, 2}, {4, -1}, {6, -1}, {8, -1}}));
    EXPECT_EQ(c.slotOf(7), 0);
    EXPECT_EQ(c.slotOf(2), 1);
    EXPECT_EQ(c.stats().slotless, 4u);

    // A static cache: its pinned neurons hit, every other one is slotless, and the free slot stays
    // free (nothing is shipped after the pins).
    NeuronCache s(10, 3);
    const std::vector<uint32_t> pins = {4, 9};
    s.pin(pins);
    s.setAdmitsMisses(false);
    const std::vector<uint32_t> u0 = {1, 4}, u1 = {4, 9, 1};
    EXPECT_EQ(loadsOf(s.update(u0)), (Loads{{1, -1}}));
    EXPECT_EQ(loadsOf(s.update(u1)), (Loads{{1, -1}}));
    EXPECT_EQ(s.resident(), 2);
    EXPECT_EQ(s.stats().hits, 3u);
    EXPECT_EQ(s.stats().loaded, s.stats().slotless);
    // Pins beyond the slots are dropped; clear() drops pins too.
    NeuronCache tiny(10, 1);
    const std::vector<uint32_t> three = {3, 4, 5};
    EXPECT_EQ(loadsOf(tiny.pin(three)), (Loads{{3, 0}}));
    EXPECT_EQ(tiny.pinned(), 1);
    tiny.clear();
    EXPECT_EQ(tiny.pinned(), 0);
    EXPECT_FALSE(tiny.isPinned(3));
}

TEST(FfnPredictor, HottestNeuronsAndTheirStaticHitRate)
{
    FfnPredictor p;
    EXPECT_EQ(p.staticHitRate(2, false), -1.0);  // not measured
    EXPECT_TRUE(p.hottest(2, false).empty());
    p.frequency = {0.1f, 0.9f, 0.0f, 0.5f, 0.5f};
    p.predictedFrequency = {0.0f, 0.0f, 1.0f, 0.0f, 0.0f};
    // Most frequent first; 3 and 4 tie (the lower id first); never-active neurons are not hot.
    EXPECT_EQ(p.hottest(2, false), (std::vector<uint32_t>{1, 3}));
    EXPECT_EQ(p.hottest(5, false), (std::vector<uint32_t>{1, 3, 4, 0}));
    EXPECT_EQ(p.hottest(5, false, 0.6), (std::vector<uint32_t>{1}));
    EXPECT_EQ(p.hottest(5, true), (std::vector<uint32_t>{2}));
    EXPECT_NEAR(p.staticHitRate(2, false), (0.9 + 0.5) / 2.0, 1e-6);
    EXPECT_NEAR(p.staticHitRate(5, false), 1.0, 1e-6);
    EXPECT_NEAR(p.staticHitRate(0, false), 0.0, 1e-6);
    EXPECT_NEAR(p.staticHitRate(1, true), 1.0, 1e-6);
}

TEST(NeuronCacheModel, ColdNeuronsGoWhereTheCostModelSaysFaster)
{
    // 100 active neurons of 4 KiB each; LRU keeps half, the 'hottest' static set 80%.
    plan::ColdNeuronLayer layer;
    layer.active = 100;
    layer.lruHitRate = 0.5;
    layer.staticHitRate = 0.8;
    layer.sliceBytes = 4096;
    layer.computeBytes = 4096;
    plan::ColdNeuronSpeeds gpu;
    gpu.copy = 25e9;
    gpu.device = 2000e9;
    gpu.cpu = 50e9;
    // Ship: 50 x 4 KiB over PCIe, then 100 on the GPU; CPU: 20 on the CPU beside 80 on the GPU.
    plan::ColdNeuronChoice c = plan::chooseColdNeurons(layer, gpu);
    EXPECT_EQ(c.choice, ColdNeurons::Cpu);
    EXPECT_NEAR(c.shipSeconds, 50 * 4096 / 25e9 + 100 * 4096 / 2000e9, 1e-12);
    EXPECT_NEAR(c.cpuSeconds, 20 * 4096 / 50e9, 1e-12);
    // A slow CPU: shipping wins.
    plan::ColdNeuronSpeeds slowCpu = gpu;
    slowCpu.cpu = 1e9;
    c = plan::chooseColdNeurons(layer, slowCpu);
    EXPECT_EQ(c.choice, ColdNeurons::Ship);
    EXPECT_LT(c.shipSeconds, c.cpuSeconds);
    // A cache that reuses almost everything ships (few misses), though the CPU is fast.
    plan::ColdNeuronLayer reused = layer;
    reused.lruHitRate = 0.99;
    EXPECT_EQ(plan::chooseColdNeurons(reused, gpu).choice, ColdNeurons::Ship);
    // Without frequencies, or without measured speeds, it ships.
    plan::ColdNeuronLayer unknown = layer;
    unknown.staticHitRate = -1;
    EXPECT_EQ(plan::chooseColdNeurons(unknown, gpu).choice, ColdNeurons::Ship);
    plan::ColdNeuronSpeeds unmeasured = gpu;
    unmeasured.copy = 0;
    EXPECT_EQ(plan::chooseColdNeurons(layer, unmeasured).choice, ColdNeurons::Ship);
    // The CPU device with bundles in RAM: computing in place saves the copies.
    plan::ColdNeuronSpeeds cpuDevice;
    cpuDevice.copy = 10e9;
    cpuDevice.device = cpuDevice.cpu = 20e9;
    cpuDevice.sameProcessor = true;
    c = plan::chooseColdNeurons(reused, cpuDevice);
    EXPECT_EQ(c.choice, ColdNeurons::Cpu);
    EXPECT_NEAR(c.cpuSeconds, 100 * 4096 / 20e9, 1e-12);
    // ... but from the SSD, the cold neurons would be read again each token: the LRU cache that
    // keeps 99% ships, one that keeps less than the hottest set does not.
    plan::ColdNeuronLayer ssd = reused;
    ssd.readBytes = 8192;
    cpuDevice.ssd = 2e9;
    EXPECT_EQ(plan::chooseColdNeurons(ssd, cpuDevice).choice, ColdNeurons::Ship);
    ssd.lruHitRate = 0.6;
    EXPECT_EQ(plan::chooseColdNeurons(ssd, cpuDevice).choice, ColdNeurons::Cpu);
}

// ---- the neuron-cache runtime (exact mode, CPU device) -----------------------------------------

namespace {

// Greedy, 48 tokens, `capacity` bundles per layer (0: dense).
testing_support::CacheRun runWithCache(const LlamaModel& model, gpu::Device& device, const std::string& prompt,
                                       int capacity)
{
    SessionOptions o;
    o.contextLength = 128;
    o.neuronCache.capacity = capacity;
    return testing_support::greedyRun(model, device, o, prompt, 48);
}

}  // namespace

TEST(NeuronCacheRuntime, ReluStoriesKeepsItsReferenceTextAndLoadsOnlyTheDifference)
{
    auto model = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    const testing_support::CacheRun dense = runWithCache(**model, *device, refs[0].prompt, 0);
    for (int capacity : {48, 96, c.ffnDim}) {  // a quarter, half and all of each layer
        SCOPED_TRACE(capacity);
        for (const auto& ref : refs) {
            const testing_support::CacheRun run = runWithCache(**model, *device, ref.prompt, capacity);
            EXPECT_EQ(run.text.substr(0, ref.text.size()), ref.text);
            const NeuronCacheStats& s = run.report.total;
            ASSERT_GT(s.tokens, 0u);
            // Loaded: the misses only, never more than what is active.
            EXPECT_EQ(s.loaded, s.active - s.hits);
            EXPECT_LE(s.loaded, s.active);
            // Every bundle would move each token without the cache: far more than the misses.
            const double densePerToken = double(c.ffnDim);
            const double loadedPerToken = double(s.loaded) / double(s.tokens);
            EXPECT_LT(loadedPerToken * 3.0, densePerToken) << "loaded " << loadedPerToken << " of " << c.ffnDim;
            if (capacity == c.ffnDim) {
                EXPECT_LE(s.loaded, uint64_t(c.ffnDim) * c.nLayers);  // each neuron once at most
            }
        }
    }
    // Logits: for Q8_G64 weights the cache computes the down projection with the dense kernel's
    // own arithmetic (activations quantized in groups of 64 over the whole layer, integer sums
    // per group over the active neurons): the same bits as the dense path.
    const testing_support::CacheRun cached = runWithCache(**model, *device, refs[0].prompt, 48);
    ASSERT_EQ(cached.logits.size(), dense.logits.size());
    EXPECT_EQ(cached.logits, dense.logits);
}

TEST(NeuronCacheRuntime, RefusedWhereActivationsAreNotSparse)
{
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    SessionOptions o;
    o.neuronCache.capacity = 32;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(session.error().message.find("ReLU"), std::string::npos);
}
