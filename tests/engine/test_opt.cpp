// OPT (learned positions with offset 2, pre-LayerNorm, ReLU FFN, biases, tied head): a small
// model with random weights against a double-precision forward pass written here from the
// architecture's definition (transformers' OPTForCausalLM), not from the engine's code; then the
// same model as a Hugging Face folder gives the same logits. The same for opt-350m's variant:
// post-LayerNorm blocks (do_layer_norm_before = false, no final norm) and narrower embeddings
// with project_in / project_out (word_embed_proj_dim).

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/model/convert_model.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/tiny_models.h"

using namespace spillway;
namespace fs = std::filesystem;

namespace {

constexpr int kDim = 64, kHeads = 4, kHead = 16, kFfn = 128, kLayers = 2, kCtx = 32, kVocab = 259;
constexpr int kProj = 32;  // word_embed_proj_dim of the opt-350m-style variant

using Vec = std::vector<double>;

struct Layer {
    Vec attnNormW, attnNormB, wq, bq, wk, bk, wv, bv, wo, bo, ffnNormW, ffnNormB, up, upB, down, downB;
};

struct Opt {
    bool postNorm = false;   // do_layer_norm_before = false: no final norm
    int embedDim = kDim;     // kProj: project_in / project_out
    Vec embed, positions;    // (vocab, embedDim), (ctx + 2, dim)
    Vec projectIn, projectOut;  // (dim, embedDim), (embedDim, dim), when embedDim != dim
    std::vector<Layer> layers;
    Vec finalW, finalB;
};

Vec randomVec(std::mt19937& rng, size_t n, double center, double spread)
{
    std::uniform_real_distribution<double> u(-spread, spread);
    Vec v(n);
    for (double& x : v) x = double(float(center + u(rng)));  // values a float holds exactly
    return v;
}

Opt makeOpt(uint32_t seed, bool postNorm = false, int embedDim = kDim)
{
    std::mt19937 rng(seed);
    Opt m;
    m.postNorm = postNorm;
    m.embedDim = embedDim;
    const double w = 1.0 / std::sqrt(double(kDim));
    m.embed = randomVec(rng, size_t(kVocab) * size_t(embedDim), 0.0, 1.0);
    if (embedDim != kDim) {
        m.projectIn = randomVec(rng, size_t(kDim) * size_t(embedDim), 0.0, 1.0 / std::sqrt(double(embedDim)));
        m.projectOut = randomVec(rng, size_t(embedDim) * kDim, 0.0, w);
    }
    m.positions = randomVec(rng, size_t(kCtx + 2) * kDim, 0.0, 0.5);
    for (int l = 0; l < kLayers; ++l) {
        Layer L;
        L.attnNormW = randomVec(rng, kDim, 1.0, 0.2);
        L.attnNormB = randomVec(rng, kDim, 0.0, 0.1);
        L.wq = randomVec(rng, size_t(kDim) * kDim, 0.0, w);
        L.bq = randomVec(rng, kDim, 0.0, 0.1);
        L.wk = randomVec(rng, size_t(kDim) * kDim, 0.0, w);
        L.bk = randomVec(rng, kDim, 0.0, 0.1);
        L.wv = randomVec(rng, size_t(kDim) * kDim, 0.0, w);
        L.bv = randomVec(rng, kDim, 0.0, 0.1);
        L.wo = randomVec(rng, size_t(kDim) * kDim, 0.0, w);
        L.bo = randomVec(rng, kDim, 0.0, 0.1);
        L.ffnNormW = randomVec(rng, kDim, 1.0, 0.2);
        L.ffnNormB = randomVec(rng, kDim, 0.0, 0.1);
        L.up = randomVec(rng, size_t(kFfn) * kDim, 0.0, w);
        L.upB = randomVec(rng, kFfn, 0.0, 0.1);
        L.down = randomVec(rng, size_t(kDim) * kFfn, 0.0, 1.0 / std::sqrt(double(kFfn)));
        L.downB = randomVec(rng, kDim, 0.0, 0.1);
        m.layers.push_back(std::move(L));
    }
    if (!postNorm) {
        m.finalW = randomVec(rng, kDim, 1.0, 0.2);
        m.finalB = randomVec(rng, kDim, 0.0, 0.1);
    }
    return m;
}

Vec layerNorm(const Vec& x, const Vec& w, const Vec& b)
{
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= double(x.size());
    for (double v : x) var += (v - mean) * (v - mean);
    var /= double(x.size());
    Vec out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    return out;
}

Vec linear(const Vec& w, const Vec& b, const Vec& x, int rows)
{
    return testing_support::referenceLinear(w, b, x, rows);
}

// Logits of every position of `tokens`, in double.
std::vector<Vec> referenceLogits(const Opt& m, const std::vector<int>& tokens)
{
    std::vector<std::vector<Vec>> keys(kLayers), values(kLayers);
    std::vector<Vec> all;
    for (size_t p = 0; p < tokens.size(); ++p) {
        const size_t e = size_t(m.embedDim);
        Vec h(m.embed.begin() + std::ptrdiff_t(size_t(tokens[p]) * e),
              m.embed.begin() + std::ptrdiff_t(size_t(tokens[p] + 1) * e));
        if (m.embedDim != kDim) h = linear(m.projectIn, {}, h, kDim);
        for (int i = 0; i < kDim; ++i) h[size_t(i)] += m.positions[(p + 2) * kDim + size_t(i)];
        for (int l = 0; l < kLayers; ++l) {
            const Layer& L = m.layers[size_t(l)];
            const Vec a = m.postNorm ? h : layerNorm(h, L.attnNormW, L.attnNormB);
            const Vec q = linear(L.wq, L.bq, a, kDim);
            keys[size_t(l)].push_back(linear(L.wk, L.bk, a, kDim));
            values[size_t(l)].push_back(linear(L.wv, L.bv, a, kDim));
            Vec att(kDim, 0.0);
            for (int hd = 0; hd < kHeads; ++hd) {
                Vec scores(p + 1);
                double mx = -1e300;
                for (size_t t = 0; t <= p; ++t) {
                    double s = 0;
                    for (int i = 0; i < kHead; ++i) s += q[size_t(hd * kHead + i)] * keys[size_t(l)][t][size_t(hd * kHead + i)];
                    scores[t] = s / std::sqrt(double(kHead));
                    mx = std::max(mx, scores[t]);
                }
                double sum = 0;
                for (double& s : scores) sum += (s = std::exp(s - mx));
                for (size_t t = 0; t <= p; ++t)
                    for (int i = 0; i < kHead; ++i)
                        att[size_t(hd * kHead + i)] += scores[t] / sum * values[size_t(l)][t][size_t(hd * kHead + i)];
            }
            const Vec o = linear(L.wo, L.bo, att, kDim);
            for (int i = 0; i < kDim; ++i) h[size_t(i)] += o[size_t(i)];
            if (m.postNorm) h = layerNorm(h, L.attnNormW, L.attnNormB);
            const Vec f = m.postNorm ? h : layerNorm(h, L.ffnNormW, L.ffnNormB);
            Vec u = linear(L.up, L.upB, f, kFfn);
            for (double& v : u) v = std::max(0.0, v);
            const Vec d = linear(L.down, L.downB, u, kDim);
            for (int i = 0; i < kDim; ++i) h[size_t(i)] += d[size_t(i)];
            if (m.postNorm) h = layerNorm(h, L.ffnNormW, L.ffnNormB);
        }
        if (!m.postNorm) h = layerNorm(h, m.finalW, m.finalB);
        if (m.embedDim != kDim) h = linear(m.projectOut, {}, h, m.embedDim);
        all.push_back(linear(m.embed, {}, h, kVocab));
    }
    return all;
}

void writeOptGguf(const Opt& m, const std::string& path)
{
    gguf::Writer w;
    w.setString("general.architecture", "opt");
    w.setString("general.name", "tiny random OPT");
    w.setUInt32("opt.context_length", kCtx);
    w.setUInt32("opt.embedding_length", kDim);
    w.setUInt32("opt.feed_forward_length", kFfn);
    w.setUInt32("opt.block_count", kLayers);
    w.setUInt32("opt.attention.head_count", kHeads);
    w.setFloat32("opt.attention.layer_norm_epsilon", 1e-5f);
    if (m.postNorm) w.setBool("spillway.post_norm", true);
    if (m.embedDim != kDim) w.setUInt32("spillway.word_embed_proj_dim", uint32_t(m.embedDim));
    testing_support::addByteVocabulary(w);
    auto add = [&](const std::string& name, const Vec& v, std::vector<int64_t> dims) {
        auto data = std::make_shared<std::vector<float>>(v.begin(), v.end());
        w.addTensor(name, gpu::DType::F32, dims,
                    [data](std::span<uint8_t> out) { std::memcpy(out.data(), data->data(), out.size()); });
    };
    add("token_embd.weight", m.embed, {m.embedDim, kVocab});
    if (m.embedDim != kDim) {
        add("proj_in.weight", m.projectIn, {m.embedDim, kDim});
        add("proj_out.weight", m.projectOut, {kDim, m.embedDim});
    }
    add("position_embd.weight", m.positions, {kDim, kCtx + 2});
    for (int l = 0; l < kLayers; ++l) {
        const Layer& L = m.layers[size_t(l)];
        const std::string b = "blk." + std::to_string(l) + ".";
        add(b + "attn_norm.weight", L.attnNormW, {kDim});
        add(b + "attn_norm.bias", L.attnNormB, {kDim});
        add(b + "attn_q.weight", L.wq, {kDim, kDim});
        add(b + "attn_q.bias", L.bq, {kDim});
        add(b + "attn_k.weight", L.wk, {kDim, kDim});
        add(b + "attn_k.bias", L.bk, {kDim});
        add(b + "attn_v.weight", L.wv, {kDim, kDim});
        add(b + "attn_v.bias", L.bv, {kDim});
        add(b + "attn_output.weight", L.wo, {kDim, kDim});
        add(b + "attn_output.bias", L.bo, {kDim});
        add(b + "ffn_norm.weight", L.ffnNormW, {kDim});
        add(b + "ffn_norm.bias", L.ffnNormB, {kDim});
        add(b + "ffn_up.weight", L.up, {kDim, kFfn});
        add(b + "ffn_up.bias", L.upB, {kFfn});
        add(b + "ffn_down.weight", L.down, {kFfn, kDim});
        add(b + "ffn_down.bias", L.downB, {kDim});
    }
    if (!m.postNorm) {
        add("output_norm.weight", m.finalW, {kDim});
        add("output_norm.bias", m.finalB, {kDim});
    }
    ASSERT_TRUE(w.write(path).ok());
}

std::vector<std::vector<float>> engineLogits(const LlamaModel& model, const std::vector<int>& tokens)
{
    return testing_support::logitsAtEachPosition(model, tokens, kCtx);
}

void checkAgainstReference(const Opt& m)
{
    char tmpl[] = "/tmp/spillway-opt-XXXXXX";
    const char* made = mkdtemp(tmpl);
    ASSERT_NE(made, nullptr) << "cannot make a folder in /tmp: " << std::strerror(errno);
    const std::string dir = made;
    ASSERT_NO_FATAL_FAILURE(writeOptGguf(m, dir + "/opt.gguf"));
    auto model = LlamaModel::load(dir + "/opt.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ((*model)->config().trainedContext, kCtx);

    std::mt19937 rng(3);
    std::vector<int> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back(int(rng() % kVocab));
    const auto reference = referenceLogits(m, tokens);
    const auto logits = engineLogits(**model, tokens);
    ASSERT_EQ(logits.size(), tokens.size());
    for (size_t p = 0; p < tokens.size(); ++p) {
        double maxDiff = 0;
        size_t bestRef = 0, bestEngine = 0;
        for (size_t i = 0; i < size_t(kVocab); ++i) {
            maxDiff = std::max(maxDiff, std::fabs(double(logits[p][i]) - reference[p][i]));
            if (reference[p][i] > reference[p][bestRef]) bestRef = i;
            if (logits[p][i] > logits[p][bestEngine]) bestEngine = i;
        }
        EXPECT_LT(maxDiff, 1e-3) << "position " << p;
        EXPECT_EQ(bestEngine, bestRef) << "position " << p;
    }

    // A prompt in batches: the same logits, bit for bit.
    testing_support::expectBatchedPromptMatches(**model, tokens, kCtx, logits, 13, 5);

    // The same model as a Hugging Face folder: the same logits.
    ConvertOptions o;
    o.target = ConvertTarget::HuggingFace;
    ASSERT_TRUE(convertModel(**model, dir + "/hf", o).ok());
    auto hf = LlamaModel::load(dir + "/hf");
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    const auto hfLogits = engineLogits(**hf, tokens);
    ASSERT_EQ(hfLogits.size(), logits.size());
    for (size_t p = 0; p < tokens.size(); ++p) EXPECT_EQ(hfLogits[p], logits[p]) << "position " << p;
    fs::remove_all(dir);
}

}  // namespace

TEST(Opt, MatchesADoublePrecisionReference)
{
    checkAgainstReference(makeOpt(7));
}

// opt-350m's layout: post-LayerNorm blocks and project_in / project_out.
TEST(Opt, PostNormWithEmbeddingProjectionsMatchesTheReference)
{
    checkAgainstReference(makeOpt(9, /*postNorm=*/true, kProj));
}

// Each difference alone, so that a fault shows which one it is in.
TEST(Opt, PostNormAloneAndProjectionsAloneMatchTheReference)
{
    {
        SCOPED_TRACE("post-norm");
        checkAgainstReference(makeOpt(10, /*postNorm=*/true));
    }
    {
        SCOPED_TRACE("projections");
        checkAgainstReference(makeOpt(11, /*postNorm=*/false, kProj));
    }
}

TEST(Opt, APositionPastTheTableIsRefused)
{
    const Opt m = makeOpt(8);
    char tmpl[] = "/tmp/spillway-opt-XXXXXX";
    const char* made = mkdtemp(tmpl);
    ASSERT_NE(made, nullptr) << "cannot make a folder in /tmp: " << std::strerror(errno);
    const std::string dir = made;
    ASSERT_NO_FATAL_FAILURE(writeOptGguf(m, dir + "/opt.gguf"));
    auto model = LlamaModel::load(dir + "/opt.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    auto session = LlamaSession::create(**model, *device, 0);
    ASSERT_TRUE(session.ok()) << session.error().message;
    EXPECT_EQ((*session)->contextLength(), kCtx);
    EXPECT_FALSE((*session)->forward(5, kCtx).ok());
    fs::remove_all(dir);
}
