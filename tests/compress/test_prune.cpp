// Pruning (core/compress/prune.h): exact zero counts and survivors against a sorted reference,
// tie-breaking, N:M structure and its tail rule, Wanda vs magnitude, dense rows from every
// stored type, Wanda calibration on stories260K (shape, determinism, an independent reference),
// and a 50% Wanda-pruned stories260K that still generates text, also through the bitmap sparse
// form.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/calibrate/prune_calibration.h"
#include "core/compress/bitmap_sparse.h"
#include "core/compress/prune.h"
#include "core/compress/sparse_gemv.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/forwarding_device.h"
#include "gpu/dtype.h"

using namespace spillway;
using compress::pruneMagnitude;
using compress::pruneNM;

namespace {

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

std::vector<float> randomMatrix(int64_t rows, int64_t cols, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> w(size_t(rows * cols));
    for (float& v : w) {
        v = d(rng);
        if (v == 0.0f) v = 1e-3f;  // the zero counts below assume non-zero inputs
    }
    return w;
}

std::vector<float> randomNorms(int64_t cols, unsigned seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(0.01f, 5.0f);
    std::vector<float> n(static_cast<size_t>(cols));
    for (float& v : n) v = d(rng);
    return n;
}

int64_t zerosInRow(const std::vector<float>& w, int64_t cols, int64_t r, int64_t begin = 0, int64_t end = -1)
{
    if (end < 0) end = cols;
    int64_t z = 0;
    for (int64_t c = begin; c < end; ++c) z += w[size_t(r * cols + c)] == 0.0f;
    return z;
}

// Reference: in columns [begin, end) of each row, keep the `keep` best by a full sort on
// (score descending, column ascending), zero the rest.
void referenceKeep(std::vector<float>& w, int64_t cols, int64_t r, int64_t begin, int64_t end,
                   int64_t keep, const float* norms)
{
    float* row = w.data() + r * cols;
    std::vector<int64_t> idx(size_t(end - begin));
    std::iota(idx.begin(), idx.end(), begin);
    auto score = [&](int64_t c) { return std::fabs(double(row[c])) * (norms ? double(norms[c]) : 1.0); };
    std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
        return score(a) != score(b) ? score(a) > score(b) : a < b;
    });
    for (size_t i = size_t(keep); i < idx.size(); ++i) row[idx[i]] = 0.0f;
}

int64_t pruneCount(double ratio, int64_t cols) { return int64_t(std::floor(ratio * double(cols) + 1e-9)); }

std::unique_ptr<LlamaModel> loadModel()
{
    auto m = LlamaModel::load(kModel);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(m.value()) : nullptr;
}

const std::vector<float>* findNorms(const compress::ActivationNorms& n, const std::string& name)
{
    auto it = n.find(name);
    return it == n.end() ? nullptr : &it->second;
}

}  // namespace

// ---- unstructured --------------------------------------------------------------------------

TEST(PruneMagnitude, ExactZeroCountsAndSurvivorsAreTheLargest)
{
    const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 7}, {5, 13}, {2, 100}, {4, 257}, {1, 1000}};
    unsigned seed = 1;
    for (auto [rows, cols] : shapes) {
        for (double ratio : {0.0, 0.3, 0.5, 0.9, 1.0}) {
            for (bool wanda : {false, true}) {
                SCOPED_TRACE(testing::Message() << rows << "x" << cols << " ratio " << ratio << " wanda " << wanda);
                const std::vector<float> original = randomMatrix(rows, cols, ++seed);
                const std::vector<float> norms = randomNorms(cols, ++seed);
                const float* n = wanda ? norms.data() : nullptr;
                std::vector<float> w = original;
                ASSERT_TRUE(pruneMagnitude(w.data(), rows, cols, ratio, n));
                std::vector<float> expected = original;
                const int64_t k = pruneCount(ratio, cols);
                EXPECT_EQ(k, int64_t(std::floor(ratio * double(cols))));  // no slack needed here
                for (int64_t r = 0; r < rows; ++r) {
                    EXPECT_EQ(zerosInRow(w, cols, r), k) << "row " << r;
                    referenceKeep(expected, cols, r, 0, cols, cols - k, n);
                }
                EXPECT_EQ(0, std::memcmp(w.data(), expected.data(), w.size() * 4));
            }
        }
    }
}

TEST(PruneMagnitude, RoundingRuleFloorsWithSlack)
{
    // 0.29 * 100 = 28.999999999999996 in double: the rule gives the 29 a caller means.
    std::vector<float> w = randomMatrix(2, 100, 7);
    ASSERT_TRUE(pruneMagnitude(w.data(), 2, 100, 0.29));
    EXPECT_EQ(zerosInRow(w, 100, 0), 29);
    EXPECT_EQ(zerosInRow(w, 100, 1), 29);
    // 0.5 of 7 columns floors to 3.
    std::vector<float> v = randomMatrix(1, 7, 8);
    ASSERT_TRUE(pruneMagnitude(v.data(), 1, 7, 0.5));
    EXPECT_EQ(zerosInRow(v, 7, 0), 3);
}

TEST(PruneMagnitude, TiesKeepTheLowerColumn)
{
    std::vector<float> w = {1, 1, 1, 1, 1, 1};
    ASSERT_TRUE(pruneMagnitude(w.data(), 1, 6, 0.5));
    EXPECT_EQ(w, (std::vector<float>{1, 1, 1, 0, 0, 0}));

    // |-2| = |2|: signs do not matter, order among equal scores is by column.
    std::vector<float> a = {-2, 2, 1, -1, 2};
    ASSERT_TRUE(pruneMagnitude(a.data(), 1, 5, 0.4));
    EXPECT_EQ(a, (std::vector<float>{-2, 2, 0, 0, 2}));
    std::vector<float> b = {-2, 2, 1, -1, 2};
    ASSERT_TRUE(pruneMagnitude(b.data(), 1, 5, 0.6));
    EXPECT_EQ(b, (std::vector<float>{-2, 2, 0, 0, 0}));

    // Wanda ties: equal products |w| * norm.
    std::vector<float> c = {4, 2, 1, 8};
    const float norms[] = {1, 2, 4, 0.5f};  // every score is 4
    ASSERT_TRUE(pruneMagnitude(c.data(), 1, 4, 0.5, norms));
    EXPECT_EQ(c, (std::vector<float>{4, 2, 0, 0}));
}

TEST(PruneMagnitude, ExistingZerosAreKeptAsZeros)
{
    std::vector<float> w = {0, 0, 0, 3, 2, 1};
    ASSERT_TRUE(pruneMagnitude(w.data(), 1, 6, 1.0 / 3.0));  // k = 2: at least 2 zeros
    EXPECT_EQ(w, (std::vector<float>{0, 0, 0, 3, 2, 1}));
}

TEST(PruneMagnitude, WandaDiffersFromMagnitudeWhenNormsDiffer)
{
    // Column 1 has small weights but a large input norm: Wanda keeps it, magnitude drops it.
    const std::vector<float> original = {1.0f, 0.5f, 0.9f, 0.2f,
                                         -0.8f, 0.3f, 1.2f, -0.1f};
    const float norms[] = {0.1f, 10.0f, 1.0f, 20.0f};
    std::vector<float> mag = original, wanda = original;
    ASSERT_TRUE(pruneMagnitude(mag.data(), 2, 4, 0.5));
    ASSERT_TRUE(pruneMagnitude(wanda.data(), 2, 4, 0.5, norms));
    EXPECT_EQ(mag, (std::vector<float>{1.0f, 0, 0.9f, 0, -0.8f, 0, 1.2f, 0}));
    // Scores row 0: 0.1, 5, 0.9, 4; row 1: 0.08, 3, 1.2, 2.
    EXPECT_EQ(wanda, (std::vector<float>{0, 0.5f, 0, 0.2f, 0, 0.3f, 0, -0.1f}));

    // Equal norms: Wanda is magnitude pruning.
    std::vector<float> x = randomMatrix(3, 50, 3), y = x;
    const std::vector<float> flat(50, 2.5f);
    ASSERT_TRUE(pruneMagnitude(x.data(), 3, 50, 0.6));
    ASSERT_TRUE(pruneMagnitude(y.data(), 3, 50, 0.6, flat.data()));
    EXPECT_EQ(x, y);
}

TEST(PruneMagnitude, BadArgumentsAreErrorsAndLeaveWeightsAlone)
{
    std::vector<float> w = randomMatrix(2, 8, 4);
    const std::vector<float> before = w;
    for (double r : {-0.1, 1.5, std::nan("")}) {
        auto s = pruneMagnitude(w.data(), 2, 8, r);
        ASSERT_FALSE(s);
        EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
    }
    w[5] = std::nanf("");
    EXPECT_FALSE(pruneMagnitude(w.data(), 2, 8, 0.5));
    w[5] = before[5];
    std::vector<float> badNorms(8, 1.0f);
    badNorms[3] = -1.0f;
    EXPECT_FALSE(pruneMagnitude(w.data(), 2, 8, 0.5, badNorms.data()));
    EXPECT_FALSE(pruneNM(w.data(), 2, 8, 3, 2));
    EXPECT_FALSE(pruneNM(w.data(), 2, 8, 1, 0));
    EXPECT_FALSE(pruneNM(w.data(), 2, 8, -1, 4));
    EXPECT_EQ(w, before);
    EXPECT_TRUE(pruneMagnitude(nullptr, 0, 0, 0.5));  // empty matrix: nothing to do
}

// ---- N:M -----------------------------------------------------------------------------------

TEST(PruneNM, GroupsKeepTheirNBestAndTheTailFollowsThePaddedRule)
{
    struct Case { int64_t rows, cols; int n, m; };
    const Case cases[] = {{5, 16, 2, 4}, {3, 10, 2, 4}, {3, 11, 2, 4}, {2, 6, 1, 4},
                          {4, 37, 4, 8}, {2, 9, 0, 4},  {2, 9, 4, 4},  {3, 5, 2, 8}};
    unsigned seed = 100;
    for (const Case& k : cases) {
        for (bool wanda : {false, true}) {
            SCOPED_TRACE(testing::Message() << k.rows << "x" << k.cols << " " << k.n << ":" << k.m
                                            << " wanda " << wanda);
            const std::vector<float> original = randomMatrix(k.rows, k.cols, ++seed);
            const std::vector<float> norms = randomNorms(k.cols, ++seed);
            const float* nn = wanda ? norms.data() : nullptr;
            std::vector<float> w = original;
            ASSERT_TRUE(pruneNM(w.data(), k.rows, k.cols, k.n, k.m, nn));
            std::vector<float> expected = original;
            for (int64_t r = 0; r < k.rows; ++r) {
                for (int64_t g = 0; g < k.cols; g += k.m) {
                    const int64_t end = std::min<int64_t>(k.cols, g + k.m);
                    const int64_t len = end - g;
                    const int64_t keep = std::min<int64_t>(k.n, len);  // tail: min(n, t)
                    EXPECT_EQ(zerosInRow(w, k.cols, r, g, end), len - keep) << "row " << r << " group " << g;
                    // Padded to m with zeros, every group has at least m - n zeros.
                    EXPECT_GE(zerosInRow(w, k.cols, r, g, end) + (k.m - len), k.m - k.n);
                    referenceKeep(expected, k.cols, r, g, end, keep, nn);
                }
            }
            EXPECT_EQ(0, std::memcmp(w.data(), expected.data(), w.size() * 4));
        }
    }
}

TEST(PruneNM, TiesAndWanda)
{
    std::vector<float> w = {3, 3, 3, 3, -1, 1, -1, 1};
    ASSERT_TRUE(pruneNM(w.data(), 1, 8, 2, 4));
    EXPECT_EQ(w, (std::vector<float>{3, 3, 0, 0, -1, 1, 0, 0}));

    std::vector<float> a = {1.0f, 0.5f, 0.9f, 0.2f}, b = a;
    const float norms[] = {0.1f, 10.0f, 1.0f, 20.0f};
    ASSERT_TRUE(pruneNM(a.data(), 1, 4, 2, 4));
    ASSERT_TRUE(pruneNM(b.data(), 1, 4, 2, 4, norms));
    EXPECT_EQ(a, (std::vector<float>{1.0f, 0, 0.9f, 0}));
    EXPECT_EQ(b, (std::vector<float>{0, 0.5f, 0, 0.2f}));
}

// ---- dense rows ----------------------------------------------------------------------------

TEST(DenseRows, EveryStoredType)
{
    // Two rows of 64 values each; rows padded to a larger stride to check rowStride is used.
    const int64_t rows = 2, cols = 64;
    std::vector<float> values(size_t(rows * cols));
    for (size_t i = 0; i < values.size(); ++i) values[i] = float(int(i * 5 % 16) - 8) * 0.25f;  // in [-2, 1.75]

    auto check = [&](gpu::DType t, const std::vector<uint8_t>& data, size_t stride,
                     const std::vector<float>& expected) {
        gpu::MatrixView v{t, data.data(), rows, cols, stride};
        auto dense = compress::denseRowsF32(v);
        ASSERT_TRUE(dense) << dense.error().message;
        EXPECT_EQ(*dense, expected) << gpu::dtypeName(t);
    };
    {
        const size_t stride = cols * 4 + 16;
        std::vector<uint8_t> d(rows * stride);
        for (int64_t r = 0; r < rows; ++r) std::memcpy(&d[r * stride], &values[r * cols], cols * 4);
        check(gpu::DType::F32, d, stride, values);
    }
    for (gpu::DType t : {gpu::DType::F16, gpu::DType::BF16}) {
        const size_t stride = cols * 2 + 8;
        std::vector<uint8_t> d(rows * stride);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                const float f = values[size_t(r * cols + c)];
                const uint16_t h = t == gpu::DType::F16 ? gpu::fp32ToFp16(f) : gpu::fp32ToBf16(f);
                std::memcpy(&d[r * stride + c * 2], &h, 2);
            }
        check(t, d, stride, values);  // quarter steps are exact in both
    }
    {   // Q8_0: d = 0.25, q = value / 0.25 (|q| <= 8).
        const size_t stride = gpu::rowBytes(gpu::DType::Q8_0, cols);
        std::vector<uint8_t> d(rows * stride);
        const uint16_t half = gpu::fp32ToFp16(0.25f);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < cols / 32; ++b) {
                uint8_t* block = &d[r * stride + b * 34];
                std::memcpy(block, &half, 2);
                for (int i = 0; i < 32; ++i)
                    block[2 + i] = uint8_t(int8_t(values[size_t(r * cols + b * 32 + i)] / 0.25f));
            }
        check(gpu::DType::Q8_0, d, stride, values);
    }
    {   // Q4_0: d = 0.25, nibble = value / 0.25 + 8 (in [0, 15]); low nibbles values 0..15.
        const size_t stride = gpu::rowBytes(gpu::DType::Q4_0, cols);
        std::vector<uint8_t> d(rows * stride);
        const uint16_t quarter = gpu::fp32ToFp16(0.25f);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < cols / 32; ++b) {
                uint8_t* block = &d[r * stride + b * 18];
                std::memcpy(block, &quarter, 2);
                auto nib = [&](int i) { return uint8_t(int(values[size_t(r * cols + b * 32 + i)] / 0.25f) + 8); };
                for (int i = 0; i < 16; ++i) block[2 + i] = uint8_t(nib(i) | (nib(16 + i) << 4));
            }
        check(gpu::DType::Q4_0, d, stride, values);
    }
    gpu::MatrixView bad{gpu::DType::Q8_0, values.data(), 1, 40, 80};
    EXPECT_FALSE(compress::denseRowsF32(bad));
    EXPECT_FALSE(compress::denseRowsF32(gpu::MatrixView{}));
}

TEST(DenseRows, MatchesTheDeviceOnTheRealModel)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(1);
    for (const auto& m : compress::linearMatrices(*model)) {
        auto dense = compress::denseRowsF32(m.view);
        ASSERT_TRUE(dense) << m.name << ": " << dense.error().message;
        std::vector<float> row(size_t(m.view.cols));
        for (int64_t r = 0; r < m.view.rows; r += 7) {
            device->getRow(m.view, r, row.data());
            ASSERT_EQ(0, std::memcmp(row.data(), dense->data() + r * m.view.cols, row.size() * 4)) << m.name;
        }
    }
}

// ---- Wanda calibration on stories260K -------------------------------------------------------

TEST(Calibration, OneVectorPerMatrixDeterministicAcrossRunsAndThreads)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    const std::vector<std::string> prompts = compress::builtinCalibrationPrompts();
    ASSERT_GE(prompts.size(), 10u);
    auto one = gpu::createCpuDevice(1);
    auto two = gpu::createCpuDevice(2);
    auto a = compress::collectActivationNorms(*model, *one, prompts, 24);
    ASSERT_TRUE(a) << a.error().message;
    auto b = compress::collectActivationNorms(*model, *one, prompts, 24);
    auto c = compress::collectActivationNorms(*model, *two, prompts, 24);
    ASSERT_TRUE(b && c) << (b ? "" : b.error().message) << (c ? "" : c.error().message);
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(*a, *c);

    const auto matrices = compress::linearMatrices(*model);
    EXPECT_EQ(matrices.size(), size_t(model->config().nLayers) * 7 + 1);
    EXPECT_EQ(a->size(), matrices.size());
    for (const auto& m : matrices) {
        const auto* n = findNorms(*a, m.name);
        ASSERT_TRUE(n) << m.name;
        ASSERT_EQ(int64_t(n->size()), m.view.cols) << m.name;
        for (float v : *n) {
            ASSERT_TRUE(std::isfinite(v)) << m.name;
            ASSERT_GT(v, 0.0f) << m.name;
        }
    }
    // Matrices that share an input share its norms exactly.
    for (int l = 0; l < model->config().nLayers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        EXPECT_EQ(a->at(p + "attn_q.weight"), a->at(p + "attn_k.weight"));
        EXPECT_EQ(a->at(p + "attn_q.weight"), a->at(p + "attn_v.weight"));
        EXPECT_EQ(a->at(p + "ffn_gate.weight"), a->at(p + "ffn_up.weight"));
    }
}

TEST(Calibration, MatchesAnIndependentReferenceForLayer0)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    const LlamaConfig& cfg = model->config();
    const LlamaWeights& w = model->weights();
    auto device = gpu::createCpuDevice(1);
    std::vector<float> e(size_t(cfg.dim)), n(size_t(cfg.dim));

    // One token (BOS at position 0): ||X_j|| = |rmsnorm(embedding(BOS))_j|, bitwise, since
    // sqrt(x^2) in double is |x| for a float x.
    {
        const std::vector<std::string> prompt = {"Hello"};
        auto norms = compress::collectActivationNorms(*model, *device, prompt, 1);
        ASSERT_TRUE(norms) << norms.error().message;
        device->getRow(w.tokenEmbedding, model->tokenizer().bos(), e.data());
        device->rmsnorm(e.data(), w.layers[0].attnNorm, n.data(), cfg.dim, cfg.normEps);
        const auto& q = norms->at("blk.0.attn_q.weight");
        for (int j = 0; j < cfg.dim; ++j) EXPECT_EQ(q[size_t(j)], std::fabs(n[size_t(j)])) << j;
    }

    // All prompts: layer 0's attention input depends only on each token (not its position):
    // sqrt(sum over tokens of rmsnorm(embedding(t))^2), computed here in double.
    const std::vector<std::string> prompts = compress::builtinCalibrationPrompts();
    const int maxTokens = 20;
    auto norms = compress::collectActivationNorms(*model, *device, prompts, maxTokens);
    ASSERT_TRUE(norms) << norms.error().message;
    auto dense = compress::denseRowsF32(w.tokenEmbedding);
    ASSERT_TRUE(dense) << dense.error().message;
    std::vector<double> sums(size_t(cfg.dim), 0.0);
    for (const auto& p : prompts) {
        std::vector<int32_t> tokens = model->tokenizer().encode(p, true);
        tokens.resize(std::min<size_t>(tokens.size(), maxTokens));
        for (int32_t t : tokens) {
            const float* row = dense->data() + size_t(t) * size_t(cfg.dim);
            double ms = 0;
            for (int j = 0; j < cfg.dim; ++j) ms += double(row[j]) * row[j];
            const double scale = 1.0 / std::sqrt(ms / cfg.dim + double(cfg.normEps));
            for (int j = 0; j < cfg.dim; ++j) {
                const double x = double(row[j]) * scale * double(w.layers[0].attnNorm[j]);
                sums[size_t(j)] += x * x;
            }
        }
    }
    const auto& q = norms->at("blk.0.attn_q.weight");
    for (int j = 0; j < cfg.dim; ++j)
        EXPECT_NEAR(q[size_t(j)], std::sqrt(sums[size_t(j)]), 1e-5 * std::sqrt(sums[size_t(j)])) << j;
}

TEST(Calibration, BadArguments)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(1);
    const std::vector<std::string> none;
    EXPECT_FALSE(compress::collectActivationNorms(*model, *device, none, 8));
    const std::vector<std::string> one = {"Hi"};
    EXPECT_FALSE(compress::collectActivationNorms(*model, *device, one, 0));
}

// ---- a Wanda-pruned stories260K ------------------------------------------------------------

namespace {

// A CPU device on which matvecs of chosen model matrices use replacement weights (the pruned
// dense fp32 copies), or, for one matrix, the bitmap sparse kernel.
class PrunedWeightsDevice final : public gpu::ForwardingDevice {
public:
    explicit PrunedWeightsDevice(std::unique_ptr<gpu::Device> inner) : ForwardingDevice(std::move(inner)) {}
    std::map<const void*, gpu::MatrixView> replace;
    const void* sparseKey = nullptr;
    const compress::BitmapSparseMatrix* sparse = nullptr;

    using Device::matvec;
    void matvec(std::span<const gpu::MatvecJob> jobs) override
    {
        std::vector<gpu::MatvecJob> dense;
        for (gpu::MatvecJob j : jobs) {
            if (sparse && j.w.data == sparseKey) {
                compress::gemvBitmapSparse(*sparse, j.x, j.y, 0, sparse->rows);
                continue;
            }
            auto it = replace.find(j.w.data);
            if (it != replace.end()) j.w = it->second;
            dense.push_back(j);
        }
        if (!dense.empty()) m_inner.matvec(dense);
    }
};

// Greedy decoding: the logits of every step (prompt's last token, then each new one) and the
// tokens, on a session whose weights are the model's own views (so the device sees them).
struct GreedyRun {
    std::vector<float> logits;
    std::vector<int32_t> tokens;
};

GreedyRun greedyRun(const LlamaModel& model, gpu::Device& device, const std::vector<int32_t>& prompt, int steps)
{
    SessionOptions o;
    o.contextLength = int(prompt.size()) + steps + 1;
    o.batch = 4;
    plan::Placement p = plan::uniformPlacement(model, plan::Tier::Device);
    p.mapInPlace = true;
    o.placement = p;
    GreedyRun run;
    auto session = LlamaSession::create(model, device, o);
    EXPECT_TRUE(session) << (session ? "" : session.error().message);
    if (!session) return run;
    const size_t vocab = size_t(model.config().vocabSize);
    auto logits = (*session)->forward(std::span<const int32_t>(prompt), 0);
    for (int i = 0; logits; ++i) {
        run.logits.insert(run.logits.end(), *logits, *logits + vocab);
        const int32_t t = argmax({*logits, vocab});
        run.tokens.push_back(t);
        if (i == steps) break;
        logits = (*session)->forward(t, int(prompt.size()) + i);
    }
    EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
    return run;
}

}  // namespace

TEST(PrunedModel, WandaHalfSparseStillGeneratesAndMatchesTheSparseKernel)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto calibrationDevice = gpu::createCpuDevice(2);
    const std::vector<std::string> prompts = compress::builtinCalibrationPrompts();
    auto norms = compress::collectActivationNorms(*model, *calibrationDevice, prompts, 32);
    ASSERT_TRUE(norms) << norms.error().message;

    // Prune every layer matrix to 50% with Wanda; the head stays dense.
    std::map<std::string, std::vector<float>> pruned;
    PrunedWeightsDevice device(gpu::createCpuDevice(2));
    for (const auto& m : compress::linearMatrices(*model)) {
        if (m.head) continue;
        auto dense = compress::denseRowsF32(m.view);
        ASSERT_TRUE(dense) << m.name << ": " << dense.error().message;
        const auto& n = norms->at(m.name);
        ASSERT_TRUE(pruneMagnitude(dense->data(), m.view.rows, m.view.cols, 0.5, n.data()));
        for (int64_t r = 0; r < m.view.rows; ++r)
            ASSERT_EQ(zerosInRow(*dense, m.view.cols, r), m.view.cols / 2) << m.name;
        std::vector<float>& kept = pruned[m.name] = std::move(dense.value());
        device.replace[m.view.data] = gpu::MatrixView{gpu::DType::F32, kept.data(), m.view.rows,
                                                      m.view.cols, size_t(m.view.cols) * 4};
    }

    const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time", true);
    const int steps = 24;
    auto plain = gpu::createCpuDevice(2);
    const GreedyRun original = greedyRun(*model, *plain, prompt, steps);
    const GreedyRun dense = greedyRun(*model, device, prompt, steps);
    ASSERT_EQ(dense.tokens.size(), size_t(steps + 1));
    for (float v : dense.logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_NE(dense.logits, original.logits);  // the pruning took effect
    const std::string text = model->tokenizer().decode(dense.tokens);
    EXPECT_FALSE(text.empty());
    std::cout << "[pruned 50% Wanda] Once upon a time|" << text << "\n";

    // generate() with a greedy sampler on the pruned model gives the same tokens.
    {
        SessionOptions o;
        o.contextLength = 64;
        plan::Placement p = plan::uniformPlacement(*model, plan::Tier::Device);
        p.mapInPlace = true;
        o.placement = p;
        auto session = LlamaSession::create(*model, device, o);
        ASSERT_TRUE(session) << session.error().message;
        SamplerSettings greedy;
        greedy.temperature = 0.0f;
        Sampler sampler(model->config().vocabSize, greedy);
        GenerationRequest req;
        req.prompt = "Once upon a time";
        req.maxNewTokens = steps;
        std::string streamed;
        req.onToken = [&](std::string_view t, int32_t) { streamed += t; return true; };
        auto stats = generate(**session, sampler, req);
        ASSERT_TRUE(stats) << stats.error().message;
        EXPECT_GT(stats->generatedTokens, 0);
        EXPECT_FALSE(streamed.empty());
        const size_t n = std::min<size_t>(size_t(stats->generatedTokens), dense.tokens.size());
        ASSERT_GE(stats->tokens.size(), prompt.size() + n);
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(stats->tokens[prompt.size() + i], dense.tokens[i]) << i;
    }

    // One layer matrix in ENDOR's bitmap sparse form (fp32 values): it holds the pruned matrix
    // bitwise, so running on its decompressed form gives bitwise the pruned model's logits; the
    // sparse GEMV kernel adds in another order than the dense kernel (its own partial sums over
    // the non-zeros only), so its logits agree to float rounding and give the same tokens.
    const std::string name = "blk.0.ffn_down.weight";
    const gpu::MatrixView original0 = [&] {
        for (const auto& m : compress::linearMatrices(*model))
            if (m.name == name) return m.view;
        return gpu::MatrixView{};
    }();
    const std::vector<float>& w = pruned.at(name);
    auto encoded = compress::encode(w.data(), original0.rows, original0.cols, compress::ValueFormat::F32);
    ASSERT_TRUE(encoded) << encoded.error().message;
    EXPECT_EQ(encoded->nonZeros(), original0.rows * (original0.cols - original0.cols / 2));
    std::vector<float> decompressed(w.size());
    compress::decompressRows(*encoded, 0, encoded->rows, decompressed.data());
    ASSERT_EQ(0, std::memcmp(decompressed.data(), w.data(), w.size() * 4));
    device.replace[original0.data].data = decompressed.data();
    const GreedyRun viaDecompressed = greedyRun(*model, device, prompt, steps);
    ASSERT_EQ(viaDecompressed.logits.size(), dense.logits.size());
    EXPECT_EQ(0, std::memcmp(viaDecompressed.logits.data(), dense.logits.data(), dense.logits.size() * 4));

    device.sparseKey = original0.data;
    device.sparse = &*encoded;
    const GreedyRun viaSparse = greedyRun(*model, device, prompt, steps);
    ASSERT_EQ(viaSparse.logits.size(), dense.logits.size());
    double maxDiff = 0, maxAbs = 0;
    for (size_t i = 0; i < dense.logits.size(); ++i) {
        maxDiff = std::max(maxDiff, double(std::fabs(viaSparse.logits[i] - dense.logits[i])));
        maxAbs = std::max(maxAbs, double(std::fabs(dense.logits[i])));
    }
    EXPECT_LE(maxDiff, 1e-4 * std::max(1.0, maxAbs)) << "max |logit| " << maxAbs;
    EXPECT_EQ(viaSparse.tokens, dense.tokens);
}
