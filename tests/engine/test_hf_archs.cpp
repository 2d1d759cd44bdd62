// Qwen2, Qwen3 and Llama with Llama 3 RoPE scaling: small models with random weights, written as
// GGUF, against a double-precision forward pass written here from the architectures' definitions
// (transformers' modeling_qwen2.py, modeling_qwen3.py, modeling_llama.py and
// modeling_rope_utils.py's _compute_llama3_parameters), not from the engine's code; then the same
// models converted to a Hugging Face folder and back to GGUF give the same logits.
//
// What each model exercises:
//   Qwen2: Q/K/V biases, NeoX (rotate-half) RoPE on GGUF's rows (GGUF keeps Qwen's HF order),
//          grouped-query attention, tied embeddings, RMSNorm eps 1e-6, rope base 1e6.
//   Qwen3: per-head RMSNorm of q and k (after the projection, before RoPE), head_dim 32 with
//          hidden 64 and 4 heads (q is 128 wide: {arch}.attention.key_length), no biases.
//   Llama: Llama 3 RoPE scaling with the ramp covering real pairs, GQA, an untied output.weight,
//          Q/K rows in GGUF's adjacent-pair order; the HF folder's q_proj / k_proj rows are
//          checked against llama.cpp's permutation.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/formats/safetensors.h"
#include "core/model/convert_model.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/same_tensors.h"
#include "../common/tiny_models.h"

using namespace spillway;
namespace fs = std::filesystem;

namespace {

constexpr int kVocab = 259, kCtx = 32, kPositions = 20;

using Vec = std::vector<double>;

struct Arch {
    std::string name;  // general.architecture
    int dim = 64, heads = 4, kvHeads = 2, headDim = 16, ffn = 96, layers = 2;
    double eps = 1e-6, ropeBase = 1e6;
    bool qkvBias = false, qkNorm = false, tied = true;
    bool writeKeyLength = false;  // {arch}.attention.key_length / value_length
    // Llama 3 RoPE scaling; factor 0: none.
    double factor = 0, lowFreqFactor = 1, highFreqFactor = 4;
    int originalContext = 0;
    int qDim() const { return heads * headDim; }
    int kvDim() const { return kvHeads * headDim; }
};

struct Layer {
    Vec attnNorm, wq, bq, wk, bk, wv, bv, wo, qNorm, kNorm, ffnNorm, gate, up, down;
};

struct Model {
    Vec embed;  // (vocab, dim)
    std::vector<Layer> layers;
    Vec finalNorm;
    Vec output;  // (vocab, dim); empty when tied
};

Vec randomVec(std::mt19937& rng, size_t n, double center, double spread)
{
    std::uniform_real_distribution<double> u(-spread, spread);
    Vec v(n);
    for (double& x : v) x = double(float(center + u(rng)));  // values a float holds exactly
    return v;
}

Model makeModel(const Arch& a, uint32_t seed)
{
    std::mt19937 rng(seed);
    Model m;
    const double w = 1.0 / std::sqrt(double(a.dim));
    m.embed = randomVec(rng, size_t(kVocab) * size_t(a.dim), 0.0, 1.0);
    for (int l = 0; l < a.layers; ++l) {
        Layer L;
        L.attnNorm = randomVec(rng, size_t(a.dim), 1.0, 0.2);
        L.wq = randomVec(rng, size_t(a.qDim()) * size_t(a.dim), 0.0, 2 * w);
        L.wk = randomVec(rng, size_t(a.kvDim()) * size_t(a.dim), 0.0, 2 * w);
        L.wv = randomVec(rng, size_t(a.kvDim()) * size_t(a.dim), 0.0, w);
        L.wo = randomVec(rng, size_t(a.dim) * size_t(a.qDim()), 0.0, 1.0 / std::sqrt(double(a.qDim())));
        if (a.qkvBias) {
            L.bq = randomVec(rng, size_t(a.qDim()), 0.0, 0.5);
            L.bk = randomVec(rng, size_t(a.kvDim()), 0.0, 0.5);
            L.bv = randomVec(rng, size_t(a.kvDim()), 0.0, 0.2);
        }
        if (a.qkNorm) {
            L.qNorm = randomVec(rng, size_t(a.headDim), 1.0, 0.5);
            L.kNorm = randomVec(rng, size_t(a.headDim), 1.0, 0.5);
        }
        L.ffnNorm = randomVec(rng, size_t(a.dim), 1.0, 0.2);
        L.gate = randomVec(rng, size_t(a.ffn) * size_t(a.dim), 0.0, 2 * w);
        L.up = randomVec(rng, size_t(a.ffn) * size_t(a.dim), 0.0, w);
        L.down = randomVec(rng, size_t(a.dim) * size_t(a.ffn), 0.0, 1.0 / std::sqrt(double(a.ffn)));
        m.layers.push_back(std::move(L));
    }
    m.finalNorm = randomVec(rng, size_t(a.dim), 1.0, 0.2);
    if (!a.tied) m.output = randomVec(rng, size_t(kVocab) * size_t(a.dim), 0.0, 1.0);
    return m;
}

// ---- the double-precision reference ----------------------------------------------------------

// Qwen2RMSNorm / LlamaRMSNorm: w * x / sqrt(mean(x^2) + eps), over n values at x.
void rmsnorm(const double* x, const double* w, double eps, size_t n, double* out)
{
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
    for (size_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * scale);
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps)
{
    Vec out(x.size());
    rmsnorm(x.data(), w.data(), eps, x.size(), out.data());
    return out;
}

Vec linear(const Vec& w, const Vec& b, const Vec& x, int rows)
{
    return testing_support::referenceLinear(w, b, x, rows);
}

// The rotary inverse frequencies, as transformers computes them: 1 / base^(2i/d) for each of
// the d/2 pairs, then (Llama 3) _compute_llama3_parameters:
//   wavelen = 2 pi / inv_freq; low_freq_wavelen = original / low_freq_factor;
//   high_freq_wavelen = original / high_freq_factor
//   wavelen > low_freq_wavelen:  inv_freq / factor
//   wavelen < high_freq_wavelen: inv_freq
//   otherwise: smooth = (original / wavelen - low) / (high - low),
//              (1 - smooth) * inv_freq / factor + smooth * inv_freq
Vec inverseFrequencies(const Arch& a, bool applyScaling = true)
{
    const int pairs = a.headDim / 2;
    Vec inv(static_cast<size_t>(pairs));
    for (int i = 0; i < pairs; ++i) inv[size_t(i)] = 1.0 / std::pow(a.ropeBase, double(2 * i) / double(a.headDim));
    if (a.factor <= 0 || !applyScaling) return inv;
    const double lowWavelen = a.originalContext / a.lowFreqFactor;
    const double highWavelen = a.originalContext / a.highFreqFactor;
    for (double& f : inv) {
        const double wavelen = 2 * M_PI / f;
        if (wavelen > lowWavelen) {
            f = f / a.factor;
        } else if (wavelen >= highWavelen) {
            const double smooth = (a.originalContext / wavelen - a.lowFreqFactor) / (a.highFreqFactor - a.lowFreqFactor);
            f = (1 - smooth) * f / a.factor + smooth * f;
        }
    }
    return inv;
}

enum class RopeOrder {
    RotateHalf,    // HF's apply_rotary_pos_emb: pairs (i, i + d/2); Qwen in GGUF too
    AdjacentPairs  // GGUF/Meta Llama: pairs (2i, 2i + 1)
};

// Rotates one head of d values at position pos.
void rope(double* v, int d, int pos, const Vec& inv, RopeOrder order)
{
    for (int i = 0; i < d / 2; ++i) {
        const double angle = double(pos) * inv[size_t(i)];
        const double c = std::cos(angle), s = std::sin(angle);
        double* x0 = order == RopeOrder::RotateHalf ? v + i : v + 2 * i;
        double* x1 = order == RopeOrder::RotateHalf ? v + i + d / 2 : v + 2 * i + 1;
        // q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x2, x1)
        const double a = *x0, b = *x1;
        *x0 = a * c - b * s;
        *x1 = b * c + a * s;
    }
}

struct ReferenceOptions {
    RopeOrder order = RopeOrder::RotateHalf;
    bool ropeScaling = true;  // false: Llama 3 scaling left out (to show that it matters)
};

// Logits of every position of `tokens`, in double.
std::vector<Vec> referenceLogits(const Arch& a, const Model& m, const std::vector<int>& tokens,
                                 const ReferenceOptions& o)
{
    const Vec inv = inverseFrequencies(a, o.ropeScaling);
    const int group = a.heads / a.kvHeads;  // repeat_kv: query head h reads KV head h / group
    const size_t hd = size_t(a.headDim);
    std::vector<std::vector<Vec>> keys(size_t(a.layers)), values(size_t(a.layers));
    std::vector<Vec> all;
    for (size_t p = 0; p < tokens.size(); ++p) {
        Vec h(m.embed.begin() + std::ptrdiff_t(size_t(tokens[p]) * size_t(a.dim)),
              m.embed.begin() + std::ptrdiff_t(size_t(tokens[p] + 1) * size_t(a.dim)));
        for (int l = 0; l < a.layers; ++l) {
            const Layer& L = m.layers[size_t(l)];
            const Vec x = rmsnorm(h, L.attnNorm, a.eps);
            Vec q = linear(L.wq, L.bq, x, a.qDim());
            Vec k = linear(L.wk, L.bk, x, a.kvDim());
            Vec v = linear(L.wv, L.bv, x, a.kvDim());
            if (a.qkNorm) {  // Qwen3: q_norm / k_norm over each head, before RoPE
                for (int i = 0; i < a.heads; ++i) rmsnorm(&q[size_t(i) * hd], L.qNorm.data(), a.eps, hd, &q[size_t(i) * hd]);
                for (int i = 0; i < a.kvHeads; ++i) rmsnorm(&k[size_t(i) * hd], L.kNorm.data(), a.eps, hd, &k[size_t(i) * hd]);
            }
            for (int i = 0; i < a.heads; ++i) rope(&q[size_t(i) * hd], a.headDim, int(p), inv, o.order);
            for (int i = 0; i < a.kvHeads; ++i) rope(&k[size_t(i) * hd], a.headDim, int(p), inv, o.order);
            keys[size_t(l)].push_back(k);
            values[size_t(l)].push_back(v);
            Vec att(size_t(a.qDim()), 0.0);
            for (int head = 0; head < a.heads; ++head) {
                const size_t qo = size_t(head) * hd, ko = size_t(head / group) * hd;
                Vec scores(p + 1);
                double mx = -1e300;
                for (size_t t = 0; t <= p; ++t) {
                    double s = 0;
                    for (size_t i = 0; i < hd; ++i) s += q[qo + i] * keys[size_t(l)][t][ko + i];
                    scores[t] = s / std::sqrt(double(a.headDim));
                    mx = std::max(mx, scores[t]);
                }
                double sum = 0;
                for (double& s : scores) sum += (s = std::exp(s - mx));
                for (size_t t = 0; t <= p; ++t)
                    for (size_t i = 0; i < hd; ++i) att[qo + i] += scores[t] / sum * values[size_t(l)][t][ko + i];
            }
            const Vec out = linear(L.wo, {}, att, a.dim);
            for (int i = 0; i < a.dim; ++i) h[size_t(i)] += out[size_t(i)];
            const Vec f = rmsnorm(h, L.ffnNorm, a.eps);
            Vec g = linear(L.gate, {}, f, a.ffn);
            const Vec u = linear(L.up, {}, f, a.ffn);
            for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];  // silu(gate) * up
            const Vec d = linear(L.down, {}, g, a.dim);
            for (int i = 0; i < a.dim; ++i) h[size_t(i)] += d[size_t(i)];
        }
        all.push_back(linear(a.tied ? m.embed : m.output, {}, rmsnorm(h, m.finalNorm, a.eps), kVocab));
    }
    return all;
}

// ---- llama.cpp's Q/K row permutation ---------------------------------------------------------

// convert_hf_to_gguf.py's LlamaModel.permute, HF -> GGUF:
//   w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(rows, cols)
// so that gguf[h*r + 2*i + s] = hf[h*r + s*r/2 + i] (r = rows per head, s in {0, 1}).
// Returns hf's rows from gguf's (the inverse).
Vec ggufRowsToHf(const Vec& gguf, int rows, int cols, int nHeads)
{
    Vec hf(gguf.size());
    const int r = rows / nHeads;
    for (int h = 0; h < nHeads; ++h)
        for (int s = 0; s < 2; ++s)
            for (int i = 0; i < r / 2; ++i)
                for (int c = 0; c < cols; ++c)
                    hf[size_t(h * r + s * r / 2 + i) * size_t(cols) + size_t(c)] =
                        gguf[size_t(h * r + 2 * i + s) * size_t(cols) + size_t(c)];
    return hf;
}

// ---- files -----------------------------------------------------------------------------------

void writeGguf(const Arch& a, const Model& m, const std::string& path)
{
    gguf::Writer w;
    const std::string p = a.name + ".";
    w.setString("general.architecture", a.name);
    w.setString("general.name", "tiny random " + a.name);
    w.setUInt32(p + "context_length", kCtx);
    w.setUInt32(p + "embedding_length", uint32_t(a.dim));
    w.setUInt32(p + "feed_forward_length", uint32_t(a.ffn));
    w.setUInt32(p + "block_count", uint32_t(a.layers));
    w.setUInt32(p + "attention.head_count", uint32_t(a.heads));
    w.setUInt32(p + "attention.head_count_kv", uint32_t(a.kvHeads));
    if (a.writeKeyLength) {
        w.setUInt32(p + "attention.key_length", uint32_t(a.headDim));
        w.setUInt32(p + "attention.value_length", uint32_t(a.headDim));
    }
    w.setFloat32(p + "attention.layer_norm_rms_epsilon", float(a.eps));
    w.setFloat32(p + "rope.freq_base", float(a.ropeBase));
    w.setUInt32(p + "rope.dimension_count", uint32_t(a.headDim));
    if (a.factor > 0) {
        w.setString(p + "rope.scaling.type", "llama3");
        w.setFloat32(p + "rope.scaling.factor", float(a.factor));
        w.setFloat32(p + "rope.scaling.low_freq_factor", float(a.lowFreqFactor));
        w.setFloat32(p + "rope.scaling.high_freq_factor", float(a.highFreqFactor));
        w.setUInt32(p + "rope.scaling.original_context_length", uint32_t(a.originalContext));
    }
    testing_support::addByteVocabulary(w);
    auto add = [&](const std::string& name, const Vec& v, std::vector<int64_t> dims) {
        auto data = std::make_shared<std::vector<float>>(v.begin(), v.end());
        w.addTensor(name, gpu::DType::F32, dims,
                    [data](std::span<uint8_t> out) { std::memcpy(out.data(), data->data(), out.size()); });
    };
    add("token_embd.weight", m.embed, {a.dim, kVocab});
    for (int l = 0; l < a.layers; ++l) {
        const Layer& L = m.layers[size_t(l)];
        const std::string b = "blk." + std::to_string(l) + ".";
        add(b + "attn_norm.weight", L.attnNorm, {a.dim});
        add(b + "attn_q.weight", L.wq, {a.dim, a.qDim()});
        add(b + "attn_k.weight", L.wk, {a.dim, a.kvDim()});
        add(b + "attn_v.weight", L.wv, {a.dim, a.kvDim()});
        if (a.qkvBias) {
            add(b + "attn_q.bias", L.bq, {a.qDim()});
            add(b + "attn_k.bias", L.bk, {a.kvDim()});
            add(b + "attn_v.bias", L.bv, {a.kvDim()});
        }
        if (a.qkNorm) {
            add(b + "attn_q_norm.weight", L.qNorm, {a.headDim});
            add(b + "attn_k_norm.weight", L.kNorm, {a.headDim});
        }
        add(b + "attn_output.weight", L.wo, {a.qDim(), a.dim});
        add(b + "ffn_norm.weight", L.ffnNorm, {a.dim});
        add(b + "ffn_gate.weight", L.gate, {a.dim, a.ffn});
        add(b + "ffn_up.weight", L.up, {a.dim, a.ffn});
        add(b + "ffn_down.weight", L.down, {a.ffn, a.dim});
    }
    add("output_norm.weight", m.finalNorm, {a.dim});
    if (!a.tied) add("output.weight", m.output, {a.dim, kVocab});
    ASSERT_TRUE(w.write(path).ok());
}

std::vector<std::vector<float>> engineLogits(const LlamaModel& model, const std::vector<int>& tokens)
{
    return testing_support::logitsAtEachPosition(model, tokens, kCtx);
}

std::vector<int> testTokens()
{
    std::mt19937 rng(3);
    std::vector<int> tokens;
    for (int i = 0; i < kPositions; ++i) tokens.push_back(int(rng() % kVocab));
    return tokens;
}

// The largest |a - b| over all positions and logits.
template <class A, class B>
double maxDifference(const std::vector<A>& a, const std::vector<B>& b)
{
    double d = 0;
    for (size_t p = 0; p < std::min(a.size(), b.size()); ++p)
        for (size_t i = 0; i < size_t(kVocab); ++i) d = std::max(d, std::fabs(double(a[p][i]) - double(b[p][i])));
    return d;
}

void expectMatchesReference(const std::vector<std::vector<float>>& logits, const std::vector<Vec>& reference,
                            const std::string& what)
{
    ASSERT_EQ(logits.size(), reference.size()) << what;
    for (size_t p = 0; p < reference.size(); ++p) {
        double maxDiff = 0;
        size_t bestRef = 0, bestEngine = 0;
        for (size_t i = 0; i < size_t(kVocab); ++i) {
            maxDiff = std::max(maxDiff, std::fabs(double(logits[p][i]) - reference[p][i]));
            if (reference[p][i] > reference[p][bestRef]) bestRef = i;
            if (logits[p][i] > logits[p][bestEngine]) bestEngine = i;
        }
        EXPECT_LT(maxDiff, 1e-3) << what << ", position " << p;
        EXPECT_EQ(bestEngine, bestRef) << what << ", position " << p;
    }
}

struct TempDir {
    std::string path;
    TempDir()  // path stays empty (a test failure) when the folder cannot be made
    {
        char tmpl[] = "/tmp/spillway-hf-archs-XXXXXX";
        if (const char* made = mkdtemp(tmpl))
            path = made;
        else
            ADD_FAILURE() << "cannot make a folder in /tmp: " << std::strerror(errno);
    }
    ~TempDir()
    {
        if (!path.empty()) fs::remove_all(path);
    }
};

// The GGUF model against the reference, then GGUF -> HF folder -> GGUF: the folder's and the
// second GGUF's logits against the first's (`exact`: bitwise; else within 1e-5, for Q/K rows
// whose order, and so the float summation order of q.k, changes), and every tensor of the
// second GGUF byte for byte the first's.
void checkArchitecture(const Arch& a, uint32_t seed, RopeOrder ggufOrder, bool exact)
{
    const Model m = makeModel(a, seed);
    TempDir dir;
    ASSERT_FALSE(dir.path.empty());
    const std::string ggufPath = dir.path + "/" + a.name + ".gguf";
    ASSERT_NO_FATAL_FAILURE(writeGguf(a, m, ggufPath));
    auto model = LlamaModel::load(ggufPath);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    EXPECT_EQ(c.headDim, a.headDim);
    EXPECT_EQ(c.qDim(), a.qDim());
    EXPECT_EQ(c.nKvHeads, a.kvHeads);
    EXPECT_EQ((*model)->tiedEmbeddings(), a.tied);

    const std::vector<int> tokens = testTokens();
    ReferenceOptions ro;
    ro.order = ggufOrder;
    const auto reference = referenceLogits(a, m, tokens, ro);
    const auto logits = engineLogits(**model, tokens);
    // Stops on missing logits: the comparisons below index them by position.
    ASSERT_NO_FATAL_FAILURE(expectMatchesReference(logits, reference, a.name + " GGUF"));

    // A prompt in batches: the same logits, bit for bit.
    testing_support::expectBatchedPromptMatches(**model, tokens, kCtx, logits, tokens.size() - 3, 4);

    // The test has teeth: the other RoPE pairing gives clearly different logits.
    ReferenceOptions wrong = ro;
    wrong.order = ggufOrder == RopeOrder::RotateHalf ? RopeOrder::AdjacentPairs : RopeOrder::RotateHalf;
    EXPECT_GT(maxDifference(referenceLogits(a, m, tokens, wrong), reference), 1e-2) << a.name;

    ConvertOptions o;
    o.target = ConvertTarget::HuggingFace;
    ASSERT_TRUE(convertModel(**model, dir.path + "/hf", o).ok());
    auto hf = LlamaModel::load(dir.path + "/hf");
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    EXPECT_EQ((*hf)->config().headDim, a.headDim);
    EXPECT_EQ((*hf)->config().ropeBase, c.ropeBase);
    EXPECT_EQ((*hf)->config().ropeFactor, c.ropeFactor);
    EXPECT_EQ((*hf)->config().ropeLowFreqFactor, c.ropeLowFreqFactor);
    EXPECT_EQ((*hf)->config().ropeHighFreqFactor, c.ropeHighFreqFactor);
    EXPECT_EQ((*hf)->config().ropeOriginalContext, c.ropeOriginalContext);
    EXPECT_EQ((*hf)->config().normEps, c.normEps);
    EXPECT_EQ((*hf)->tiedEmbeddings(), a.tied);
    const auto hfLogits = engineLogits(**hf, tokens);
    ASSERT_EQ(hfLogits.size(), logits.size());
    expectMatchesReference(hfLogits, reference, a.name + " HF folder");

    o.target = ConvertTarget::Gguf;
    ASSERT_TRUE(convertModel(**hf, dir.path + "/back.gguf", o).ok());
    auto back = LlamaModel::load(dir.path + "/back.gguf");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ((*back)->config().ropeNeox, c.ropeNeox);
    const auto backLogits = engineLogits(**back, tokens);
    ASSERT_EQ(backLogits.size(), logits.size());
    for (size_t p = 0; p < tokens.size(); ++p) {
        EXPECT_EQ(backLogits[p], logits[p]) << a.name << " GGUF -> HF -> GGUF, position " << p;
        if (exact) {
            EXPECT_EQ(hfLogits[p], logits[p]) << a.name << " HF folder, position " << p;
        }
    }
    if (!exact) {
        EXPECT_LT(maxDifference(hfLogits, logits), 1e-5) << a.name << " HF folder";
    }
    testing_support::expectSameTensors(**back, **model);
}

Arch qwen2()
{
    Arch a;
    a.name = "qwen2";
    a.qkvBias = true;
    return a;
}

Arch qwen3()
{
    Arch a;
    a.name = "qwen3";
    a.headDim = 32;  // q is 128 wide with hidden 64
    a.qkNorm = true;
    a.writeKeyLength = true;
    return a;
}

// Llama 3 scaling over head 16 and base 10000: pair i's wavelength is 2 pi 10000^(i/8) =
// 6.3, 19.9, 62.8, 198.7, 628, ... With original context 64, low 1, high 4 the thresholds are
// 64 (longer: slowed by the factor) and 16 (shorter: kept): pair 0 is kept, pairs 1 and 2 are on
// the ramp, pairs 3 to 7 are divided by 8.
Arch llama3()
{
    Arch a;
    a.name = "llama";
    a.ropeBase = 10000;
    a.eps = 1e-5;
    a.tied = false;
    a.factor = 8;
    a.lowFreqFactor = 1;
    a.highFreqFactor = 4;
    a.originalContext = 64;
    return a;
}

}  // namespace

TEST(HfArchs, Qwen2MatchesADoublePrecisionReference)
{
    checkArchitecture(qwen2(), 11, RopeOrder::RotateHalf, true);
}

TEST(HfArchs, Qwen3MatchesADoublePrecisionReference)
{
    checkArchitecture(qwen3(), 12, RopeOrder::RotateHalf, true);
}

TEST(HfArchs, Llama3RopeScalingRegimesAreAllExercised)
{
    const Arch a = llama3();
    const Vec plain = inverseFrequencies(a, false), scaled = inverseFrequencies(a, true);
    int kept = 0, ramp = 0, slowed = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
        const double ratio = scaled[i] / plain[i];
        if (ratio == 1.0) ++kept;
        else if (std::fabs(ratio - 1.0 / a.factor) < 1e-15) ++slowed;
        else if (ratio > 1.0 / a.factor && ratio < 1.0) ++ramp;
    }
    EXPECT_EQ(kept, 1);
    EXPECT_EQ(ramp, 2);
    EXPECT_EQ(slowed, 5);
}

TEST(HfArchs, Llama3RopeScalingMatchesADoublePrecisionReference)
{
    const Arch a = llama3();
    // GGUF's Llama rows are in adjacent-pair order.
    checkArchitecture(a, 13, RopeOrder::AdjacentPairs, false);

    const Model m = makeModel(a, 13);
    const std::vector<int> tokens = testTokens();
    ReferenceOptions ro;
    ro.order = RopeOrder::AdjacentPairs;
    const auto reference = referenceLogits(a, m, tokens, ro);
    // The scaling matters at these positions: without it the logits are clearly different.
    ReferenceOptions unscaled = ro;
    unscaled.ropeScaling = false;
    EXPECT_GT(maxDifference(referenceLogits(a, m, tokens, unscaled), reference), 1e-2);

    // The reference's own consistency: the HF rows (llama.cpp's permutation undone) rotated as
    // halves give the logits of the GGUF rows rotated as adjacent pairs.
    Model hfOrder = m;
    for (Layer& L : hfOrder.layers) {
        L.wq = ggufRowsToHf(L.wq, a.qDim(), a.dim, a.heads);
        L.wk = ggufRowsToHf(L.wk, a.kvDim(), a.dim, a.kvHeads);
    }
    EXPECT_LT(maxDifference(referenceLogits(a, hfOrder, tokens, {}), reference), 1e-9);

    // The HF folder's q_proj / k_proj rows are the GGUF rows under that permutation, and the
    // other tensors are copied as they are.
    TempDir dir;
    ASSERT_FALSE(dir.path.empty());
    ASSERT_NO_FATAL_FAILURE(writeGguf(a, m, dir.path + "/llama.gguf"));
    auto model = LlamaModel::load(dir.path + "/llama.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_FALSE((*model)->config().ropeNeox);
    EXPECT_EQ((*model)->config().ropeFactor, 8.0f);
    EXPECT_EQ((*model)->config().ropeOriginalContext, 64);
    ConvertOptions o;
    o.target = ConvertTarget::HuggingFace;
    ASSERT_TRUE(convertModel(**model, dir.path + "/hf", o).ok());
    auto st = safetensors::openSingle(dir.path + "/hf/model.safetensors");
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto expectTensor = [&](const std::string& name, const Vec& values, std::vector<int64_t> shape) {
        const safetensors::Tensor* t = st->find(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(t->dtypeName, "F32") << name;
        EXPECT_EQ(t->shape, shape) << name;
        ASSERT_EQ(t->bytes, values.size() * sizeof(float)) << name;
        std::vector<float> got(values.size());
        std::memcpy(got.data(), t->data, t->bytes);
        size_t mismatches = 0;
        for (size_t i = 0; i < values.size(); ++i) mismatches += got[i] != float(values[i]);
        EXPECT_EQ(mismatches, 0u) << name;
    };
    for (int l = 0; l < a.layers; ++l) {
        const Layer& L = m.layers[size_t(l)];
        const Layer& H = hfOrder.layers[size_t(l)];
        const std::string b = "model.layers." + std::to_string(l) + ".";
        expectTensor(b + "self_attn.q_proj.weight", H.wq, {a.qDim(), a.dim});
        expectTensor(b + "self_attn.k_proj.weight", H.wk, {a.kvDim(), a.dim});
        expectTensor(b + "self_attn.v_proj.weight", L.wv, {a.kvDim(), a.dim});
        expectTensor(b + "self_attn.o_proj.weight", L.wo, {a.dim, a.qDim()});
    }
    expectTensor("lm_head.weight", m.output, {kVocab, a.dim});
    expectTensor("model.embed_tokens.weight", m.embed, {kVocab, a.dim});
}
