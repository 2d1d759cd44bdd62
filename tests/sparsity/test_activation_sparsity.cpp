// Activation-sparsity statistics: the accumulator's figures on hand-made activation sequences
// (worked out by hand below), then real measurements on the ReLU-sparse relu-stories-260K (its
// README reports 23-32% of matmul inputs non-zero) and the dense SwiGLU stories260K.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/compress/activation_sparsity.h"
#include "core/compress/ffn_predictor.h"
#include "core/model/llama_model.h"
#include "gpu/cpu/cpu_device.h"

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

const std::string kShared = SPILLWAY_SHARED_DIR;

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
    auto model = LlamaModel::load(kShared + "/models/relu-stories-260K/model_qint80.bin",
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
    auto model = LlamaModel::load(kShared + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    SparsityOptions options;
    options.prompts = {"Once upon a time, there was a little dog."};
    auto dense = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(dense.ok()) << dense.error().message;
    EXPECT_GT(dense->density(), 0.99);
    options.threshold = 1e30;
    auto none = measureActivationSparsity(**model, *device, options);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->density(), 0.0);
}

TEST(ActivationSparsity, BadOptionsAreRefused)
{
    auto model = LlamaModel::load(kShared + "/models/stories260K.gguf");
    ASSERT_TRUE(model.ok());
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
    auto model = LlamaModel::load(kShared + "/models/relu-stories-260K/model_qint80.bin",
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
    auto swiglu = LlamaModel::load(kShared + "/models/stories260K.gguf");
    ASSERT_TRUE(swiglu.ok());
    auto device = gpu::createCpuDevice(1);
    auto r = trainFfnPredictors(**swiglu, *device, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(r.error().message.find("no ReLU"), std::string::npos) << r.error().message;

    auto relu = LlamaModel::load(kShared + "/models/relu-stories-260K/model_qint80.bin",
                                 ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(relu.ok());
    PredictorOptions one;
    one.prompts = {"Only one prompt."};
    EXPECT_EQ(trainFfnPredictors(**relu, *device, one).error().code, ErrorCode::InvalidArgument);
    PredictorOptions rank0;
    rank0.rank = 0;
    EXPECT_EQ(trainFfnPredictors(**relu, *device, rank0).error().code, ErrorCode::InvalidArgument);
}
