// Quality check (core/calibrate/quality.h) on stories260K: a model against itself (exactly zero
// divergence, equal perplexities), against noisy copies of itself written with the GGUF writer
// (divergence and perplexity grow with the noise), one-position runs checked against KL and
// perplexity computed here from two sessions, a vocabulary mismatch, progress and cancellation.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "core/calibrate/quality.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"

using namespace spillway;
using compress::compareModels;
using compress::QualityOptions;
using compress::QualityReport;
namespace fs = std::filesystem;

namespace {

using TempDir = spillway::testing_support::TempDir;

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

std::unique_ptr<LlamaModel> load(const std::string& path)
{
    auto m = LlamaModel::load(path);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(m.value()) : nullptr;
}

// Writes a copy of the F32 GGUF at `source` to `path` in which every layer matrix (blk.*, two
// dimensions) has uniform noise of `relative` times the matrix's RMS added to each weight; the
// embedding, the head and the norms are copied bitwise.
Status writeNoisyCopy(const std::string& source, const std::string& path, double relative,
                      unsigned seed)
{
    auto file = gguf::File::open(source);
    if (!file) return file.error();
    gguf::Writer w((*file)->alignment());
    for (const auto& kv : (*file)->metadata()) w.setValue(kv.key, kv.value);
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
        const bool noisy = t.name.rfind("blk.", 0) == 0 && t.dims.size() == 2;
        if (noisy && t.type != gpu::DType::F32)
            return makeError(ErrorCode::InvalidArgument, t.name + " is not F32");
        const uint8_t* data = t.data;
        const uint64_t bytes = t.bytes;
        const unsigned s = seed++;
        w.addTensor(t.name, t.type, t.dims, [=](std::span<uint8_t> out) {
            std::memcpy(out.data(), data, bytes);
            if (!noisy) return;
            const size_t n = bytes / 4;
            std::vector<float> v(n);
            std::memcpy(v.data(), data, bytes);
            double ms = 0;
            for (float x : v) ms += double(x) * x;
            // Uniform in [-a, a] has RMS a / sqrt(3).
            const double amplitude = relative * std::sqrt(ms / double(n)) * std::sqrt(3.0);
            std::mt19937 rng(s);
            for (float& x : v) x += float(amplitude * (2.0 * (rng() / 4294967296.0) - 1.0));
            std::memcpy(out.data(), v.data(), bytes);
        });
    }
    return w.write(path);  // the source stays mapped (file is alive) until here
}

std::vector<double> softmax(const float* logits, int n)
{
    double m = logits[0];
    for (int i = 1; i < n; ++i) m = std::max(m, double(logits[i]));
    std::vector<double> p(static_cast<size_t>(n));
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += p[size_t(i)] = std::exp(double(logits[i]) - m);
    for (double& x : p) x /= sum;
    return p;
}

// The logits after BOS at position 0, from a fresh session.
std::vector<float> logitsAfterBos(const LlamaModel& model, gpu::Device& device)
{
    auto session = LlamaSession::create(model, device, 4);
    EXPECT_TRUE(session) << (session ? "" : session.error().message);
    if (!session) return {};
    auto logits = (*session)->forward(model.tokenizer().bos(), 0);
    EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
    if (!logits) return {};
    return {*logits, *logits + model.config().vocabSize};
}

void print(const char* what, const QualityReport& r)
{
    std::cout << "[quality] " << what << ": " << r.toJson() << "\n";
}

}  // namespace

TEST(Quality, BuiltInTextIsVariedAndLongEnough)
{
    EXPECT_GE(compress::qualityPrompts().size(), 4u);
    for (const char* p : compress::qualityPrompts()) EXPECT_GT(std::strlen(p), 40u) << p;
    const size_t chars = std::strlen(compress::perplexityText());
    EXPECT_GE(chars, 1300u);
    EXPECT_LE(chars, 1800u);
}

TEST(Quality, ModelAgainstItselfIsExact)
{
    auto model = load(kModel);
    auto again = load(kModel);  // a second mapping of the same file: a distinct object
    ASSERT_TRUE(model && again);
    auto device = gpu::createCpuDevice(2);
    for (const LlamaModel* candidate : {model.get(), again.get()}) {
        auto r = compareModels(*model, *candidate, *device);
        ASSERT_TRUE(r) << r.error().message;
        print("stories260K vs itself", *r);
        EXPECT_LT(std::fabs(r->meanKl), 1e-9);
        EXPECT_EQ(r->maxKl, 0.0);
        EXPECT_EQ(r->top1Agreement, 1.0);
        EXPECT_EQ(r->perplexityReference, r->perplexityCandidate);
        EXPECT_TRUE(std::isfinite(r->perplexityReference));
        EXPECT_GT(r->perplexityReference, 1.0);
        EXPECT_LT(r->perplexityReference, model->config().vocabSize);  // better than uniform

        // Positions: every token of every prompt (BOS included), each cut to 64.
        int positions = 0;
        for (const char* p : compress::qualityPrompts())
            positions += std::min<int>(int(model->tokenizer().encode(p, true).size()), 64);
        EXPECT_EQ(r->positions, positions);
        const std::string text = compress::perplexityText();
        EXPECT_GT(model->tokenizer().encode(text, true).size(), 257u);  // enough for the default
        EXPECT_EQ(r->perplexityTokens, 256);

        // The JSON holds the same figures.
        const auto j = nlohmann::json::parse(r->toJson());
        EXPECT_EQ(j.at("meanKl").get<double>(), r->meanKl);
        EXPECT_EQ(j.at("maxKl").get<double>(), r->maxKl);
        EXPECT_EQ(j.at("top1Agreement").get<double>(), r->top1Agreement);
        EXPECT_EQ(j.at("positions").get<int>(), r->positions);
        EXPECT_EQ(j.at("perplexityReference").get<double>(), r->perplexityReference);
        EXPECT_EQ(j.at("perplexityCandidate").get<double>(), r->perplexityCandidate);
        EXPECT_EQ(j.at("perplexityTokens").get<int>(), r->perplexityTokens);
    }
}

TEST(Quality, NoisyCopiesDivergeMoreWithMoreNoise)
{
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string small = dir.path() + "/noise2.gguf", large = dir.path() + "/noise20.gguf";
    {
        const Status written = writeNoisyCopy(kModel, small, 0.02, 100);
        ASSERT_TRUE(written) << written.error().message;
    }
    {
        const Status written = writeNoisyCopy(kModel, large, 0.20, 200);
        ASSERT_TRUE(written) << written.error().message;
    }
    auto model = load(kModel);
    auto slightly = load(small);
    auto heavily = load(large);
    ASSERT_TRUE(model && slightly && heavily);
    auto device = gpu::createCpuDevice(2);

    auto a = compareModels(*model, *slightly, *device);
    auto b = compareModels(*model, *heavily, *device);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    print("stories260K vs 2% noise", *a);
    print("stories260K vs 20% noise", *b);
    for (const QualityReport* r : {&a.value(), &b.value()}) {
        EXPECT_GT(r->meanKl, 0.0);
        EXPECT_GE(r->maxKl, r->meanKl);
        EXPECT_GT(r->top1Agreement, 0.0);
        EXPECT_LE(r->top1Agreement, 1.0);
        EXPECT_NE(r->perplexityCandidate, r->perplexityReference);
        EXPECT_TRUE(std::isfinite(r->perplexityCandidate));
        EXPECT_EQ(r->positions, a->positions);
        EXPECT_EQ(r->perplexityReference, a->perplexityReference);  // the same reference run
    }
    EXPECT_GT(b->meanKl, 10 * a->meanKl);
    EXPECT_LT(b->top1Agreement, 1.0);
    EXPECT_GT(b->perplexityCandidate, b->perplexityReference);  // noise this large hurts
    EXPECT_GT(std::fabs(std::log(b->perplexityCandidate / b->perplexityReference)),
              std::fabs(std::log(a->perplexityCandidate / a->perplexityReference)));

    // Swapping the roles gives the other direction of KL: also > 0, in general not equal.
    auto back = compareModels(*heavily, *model, *device);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_GT(back->meanKl, 0.0);
    EXPECT_EQ(back->perplexityReference, b->perplexityCandidate);
    EXPECT_EQ(back->perplexityCandidate, b->perplexityReference);
}

TEST(Quality, OnePositionMatchesAnIndependentComputation)
{
    // With one token per prompt every position is BOS at position 0, and with one scored text
    // token the perplexity is 1 / P(text[1] | BOS): both computed here from two sessions.
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string noisy = dir.path() + "/noise10.gguf";
    {
        const Status written = writeNoisyCopy(kModel, noisy, 0.10, 300);
        ASSERT_TRUE(written) << written.error().message;
    }
    auto model = load(kModel);
    auto candidate = load(noisy);
    ASSERT_TRUE(model && candidate);
    auto device = gpu::createCpuDevice(1);
    QualityOptions o;
    o.maxPromptTokens = 1;
    o.perplexityTokens = 1;
    auto r = compareModels(*model, *candidate, *device, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->positions, int(compress::qualityPrompts().size()));
    EXPECT_EQ(r->perplexityTokens, 1);

    const int vocab = model->config().vocabSize;
    const std::vector<float> lp = logitsAfterBos(*model, *device);
    const std::vector<float> lq = logitsAfterBos(*candidate, *device);
    ASSERT_EQ(int(lp.size()), vocab);
    ASSERT_EQ(int(lq.size()), vocab);
    const std::vector<double> p = softmax(lp.data(), vocab), q = softmax(lq.data(), vocab);
    double kl = 0;
    for (int i = 0; i < vocab; ++i) kl += p[size_t(i)] * std::log(p[size_t(i)] / q[size_t(i)]);
    ASSERT_GT(kl, 0.0);
    EXPECT_NEAR(r->meanKl, kl, 1e-9 * kl);
    EXPECT_NEAR(r->maxKl, kl, 1e-9 * kl);
    const bool sameTop = std::max_element(lp.begin(), lp.end()) - lp.begin() ==
                         std::max_element(lq.begin(), lq.end()) - lq.begin();
    EXPECT_EQ(r->top1Agreement, sameTop ? 1.0 : 0.0);

    const auto text = model->tokenizer().encode(compress::perplexityText(), true);
    ASSERT_GE(text.size(), 2u);
    const size_t next = size_t(text[1]);
    EXPECT_NEAR(r->perplexityReference, 1.0 / p[next], 1e-9 / p[next]);
    EXPECT_NEAR(r->perplexityCandidate, 1.0 / q[next], 1e-9 / q[next]);
}

// Many positions: the check runs its prompts and text in batches that keep every token's
// logits; the figures are those of feeding the same tokens one at a time, computed here.
TEST(Quality, BatchedPositionsMatchOneTokenAtATime)
{
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string noisy = dir.path() + "/noise10.gguf";
    {
        const Status written = writeNoisyCopy(kModel, noisy, 0.10, 301);
        ASSERT_TRUE(written) << written.error().message;
    }
    auto model = load(kModel);
    auto candidate = load(noisy);
    ASSERT_TRUE(model && candidate);
    auto device = gpu::createCpuDevice(2);
    QualityOptions o;
    o.maxPromptTokens = 40;  // more than one batch of 32
    o.perplexityTokens = 70;
    auto r = compareModels(*model, *candidate, *device, o);
    ASSERT_TRUE(r) << r.error().message;

    const int vocab = model->config().vocabSize;
    auto oneAtATime = [&](const LlamaModel& m, const std::vector<int32_t>& tokens) {
        std::vector<std::vector<double>> probabilities;
        auto session = LlamaSession::create(m, *device, 128);
        EXPECT_TRUE(session) << (session ? "" : session.error().message);
        for (size_t pos = 0; session && pos < tokens.size(); ++pos) {
            auto logits = (*session)->forward(tokens[pos], int(pos));
            EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
            if (!logits) break;
            probabilities.push_back(softmax(*logits, vocab));
        }
        return probabilities;
    };
    double klSum = 0, klMax = 0;
    int positions = 0, agree = 0;
    for (const char* prompt : compress::qualityPrompts()) {
        std::vector<int32_t> t = model->tokenizer().encode(prompt, true);
        t.resize(std::min<size_t>(t.size(), size_t(o.maxPromptTokens)));
        const auto p = oneAtATime(*model, t), q = oneAtATime(*candidate, t);
        ASSERT_EQ(p.size(), t.size());
        ASSERT_EQ(q.size(), t.size());
        for (size_t i = 0; i < t.size(); ++i) {
            double kl = 0;
            for (int v = 0; v < vocab; ++v) kl += p[i][size_t(v)] * std::log(p[i][size_t(v)] / q[i][size_t(v)]);
            klSum += kl;
            klMax = std::max(klMax, kl);
            agree += std::max_element(p[i].begin(), p[i].end()) - p[i].begin() ==
                     std::max_element(q[i].begin(), q[i].end()) - q[i].begin();
            ++positions;
        }
    }
    ASSERT_GT(positions, 64);
    EXPECT_EQ(r->positions, positions);
    // The report runs the positions in batches (the CPU's float matrix products from 8 tokens),
    // this test one at a time: the same figures but for rounding.
    EXPECT_NEAR(r->meanKl, klSum / positions, 1e-4 * klSum / positions);
    EXPECT_NEAR(r->maxKl, klMax, 1e-4 * klMax);
    EXPECT_EQ(r->top1Agreement, double(agree) / positions);

    std::vector<int32_t> text = model->tokenizer().encode(compress::perplexityText(), true);
    ASSERT_GT(text.size(), size_t(o.perplexityTokens));
    text.resize(size_t(o.perplexityTokens) + 1);
    const std::vector<int32_t> scored(text.begin(), text.end() - 1);
    const auto p = oneAtATime(*model, scored), q = oneAtATime(*candidate, scored);
    ASSERT_EQ(p.size(), scored.size());
    ASSERT_EQ(q.size(), scored.size());
    double nllP = 0, nllQ = 0;
    for (size_t i = 0; i < scored.size(); ++i) {
        nllP -= std::log(p[i][size_t(text[i + 1])]);
        nllQ -= std::log(q[i][size_t(text[i + 1])]);
    }
    const double pplP = std::exp(nllP / double(scored.size())), pplQ = std::exp(nllQ / double(scored.size()));
    EXPECT_EQ(r->perplexityTokens, o.perplexityTokens);
    EXPECT_NEAR(r->perplexityReference, pplP, 1e-6 * pplP);
    EXPECT_NEAR(r->perplexityCandidate, pplQ, 1e-6 * pplQ);
}

TEST(Quality, VocabularyMismatchIsInvalidArgument)
{
    TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string path = dir.path() + "/synthetic.gguf";
    SyntheticOptions s;
    s.preset = "tinyllama-1.1b";  // 32,000 tokens against stories260K's 512
    s.layers = 1;
    s.type = gpu::DType::Q4_0;    // smallest file the preset allows
    const Status written = writeSyntheticModel(s, path);
    ASSERT_TRUE(written) << written.error().message;
    auto model = load(kModel);
    auto other = load(path);
    ASSERT_TRUE(model && other);
    ASSERT_NE(model->config().vocabSize, other->config().vocabSize);
    auto device = gpu::createCpuDevice(1);
    const std::pair<LlamaModel*, LlamaModel*> orders[] = {{model.get(), other.get()},
                                                          {other.get(), model.get()}};
    for (auto [ref, cand] : orders) {
        auto r = compareModels(*ref, *cand, *device);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(r.error().message.find(kModel), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
    }
}

TEST(Quality, BadOptionsAreInvalidArgument)
{
    auto model = load(kModel);
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(1);
    for (auto [prompt, text] : {std::pair{0, 256}, std::pair{64, 0}, std::pair{-1, -1}}) {
        QualityOptions o;
        o.maxPromptTokens = prompt;
        o.perplexityTokens = text;
        auto r = compareModels(*model, *model, *device, o);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    }
}

TEST(Quality, ProgressRisesToOneAndFalseCancels)
{
    auto model = load(kModel);
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(2);

    // Every token of both runs reports once; fractions rise strictly and end at exactly 1.
    std::vector<double> seen;
    QualityOptions o;
    o.progress = [&](double f) { seen.push_back(f); return true; };
    auto r = compareModels(*model, *model, *device, o);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(int(seen.size()), 2 * (r->positions + r->perplexityTokens));
    EXPECT_GT(seen.front(), 0.0);
    for (size_t i = 1; i < seen.size(); ++i) ASSERT_GT(seen[i], seen[i - 1]) << i;
    EXPECT_EQ(seen.back(), 1.0);

    // Returning false stops at once, wherever it happens: first call, mid-reference,
    // mid-candidate.
    for (size_t stopAt : {size_t(1), seen.size() / 4, seen.size() * 3 / 4}) {
        size_t calls = 0;
        QualityOptions c;
        c.progress = [&](double) { return ++calls < stopAt; };
        auto cancelled = compareModels(*model, *model, *device, c);
        ASSERT_FALSE(cancelled) << stopAt;
        EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled) << cancelled.error().message;
        EXPECT_EQ(calls, stopAt);
    }
}
