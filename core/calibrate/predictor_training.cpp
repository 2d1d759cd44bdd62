#include "core/calibrate/predictor_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "core/calibrate/prune_calibration.h"
#include "core/calibrate/calibration.h"
#include "core/compress/linalg.h"
#include "core/model/llama_model.h"
#include "core/plan/neuron_cache.h"
#include "core/tokenizer/tokenizer.h"
#include "storage/package.h"
#include "gpu/device.h"


namespace spillway::compress {

namespace {

// One layer's calibration data: FFN inputs and which neurons were active, token by token.
struct LayerSamples {
    std::vector<float> x;           // (tokens, dim)
    std::vector<uint8_t> active;    // (tokens, neurons)
    std::vector<uint8_t> heldOut;   // (tokens) 1: a held-out prompt's token
    int64_t tokens() const { return int64_t(heldOut.size()); }
};

// Orthonormalizes the r columns of v (d, r), row-major, by modified Gram-Schmidt; a column that
// vanishes becomes a fresh random one (then orthonormalized too).
void orthonormalize(std::vector<double>& v, int d, int r, std::mt19937_64& rng)
{
    std::normal_distribution<double> normal;
    for (int c = 0; c < r; ++c) {
        for (int attempt = 0; attempt < 3; ++attempt) {
            for (int p = 0; p < c; ++p) {
                double dot = 0.0;
                for (int i = 0; i < d; ++i) dot += v[size_t(i) * r + c] * v[size_t(i) * r + p];
                for (int i = 0; i < d; ++i) v[size_t(i) * r + c] -= dot * v[size_t(i) * r + p];
            }
            double norm = 0.0;
            for (int i = 0; i < d; ++i) norm += v[size_t(i) * r + c] * v[size_t(i) * r + c];
            norm = std::sqrt(norm);
            if (norm > 1e-10) {
                for (int i = 0; i < d; ++i) v[size_t(i) * r + c] /= norm;
                break;
            }
            for (int i = 0; i < d; ++i) v[size_t(i) * r + c] = normal(rng);
        }
    }
}

// A (rank, dim) spanning W's top right-singular subspace, and B = W Aᵀ (neurons, rank). W is
// (n, d), row-major.
void lowRankFactors(const std::vector<float>& w, int n, int d, int r, int iterations,
                    std::mt19937_64& rng, FfnPredictor& p)
{
    std::normal_distribution<double> normal;
    std::vector<double> v(size_t(d) * r);  // (d, r): the subspace, orthonormalized in double
    for (double& e : v) e = normal(rng);
    orthonormalize(v, d, r, rng);
    std::vector<float> vf(v.size()), t(size_t(n) * r);
    for (int it = 0; it < iterations; ++it) {
        // t = W v; v = Wᵀ t; orthonormalize: one step of subspace iteration on WᵀW.
        std::copy(v.begin(), v.end(), vf.begin());
        linalg::gemm(false, false, n, r, d, 1.0f, w.data(), d, vf.data(), r, 0.0f, t.data(), r);
        linalg::gemm(true, false, d, r, n, 1.0f, w.data(), d, t.data(), r, 0.0f, vf.data(), r);
        std::copy(vf.begin(), vf.end(), v.begin());
        orthonormalize(v, d, r, rng);
    }
    std::copy(v.begin(), v.end(), vf.begin());
    p.a.assign(size_t(r) * d, 0.0f);
    for (int c = 0; c < r; ++c)
        for (int k = 0; k < d; ++k) p.a[size_t(c) * d + k] = vf[size_t(k) * r + c];
    p.b.assign(size_t(n) * r, 0.0f);
    linalg::gemm(false, false, n, r, d, 1.0f, w.data(), d, vf.data(), r, 0.0f, p.b.data(), r);
}

// The predictor's parameters as one (neurons, rank + 1) matrix: row j = (B_j, bias_j), so that
// with features extended by a 1, (h, 1), a logit is one dot product and a batch one GEMM.
std::vector<float> extendedParameters(const FfnPredictor& p)
{
    const int r = p.rank, f = r + 1;
    std::vector<float> theta(size_t(p.neurons) * f);
    for (int j = 0; j < p.neurons; ++j) {
        std::copy_n(p.b.data() + size_t(j) * r, r, theta.data() + size_t(j) * f);
        theta[size_t(j) * f + r] = p.bias[size_t(j)];
    }
    return theta;
}

// Tokens per GEMM when a (tokens, neurons) block of logits is made: 64 MiB of floats at most.
int64_t logitChunk(int neurons) { return std::max<int64_t>(1, (int64_t(64) << 20) / (4 * int64_t(std::max(neurons, 1)))); }

// Step 2: with A fixed, each neuron's (row of B, bias) is a logistic regression on the features
// h = A x, all neurons sharing the features: full-batch gradient descent with Nesterov momentum,
// step 1/L from the loss's curvature bound, positives weighted by the class ratio (clipped to
// [1, 20]) since a missed neuron costs more than a spare one, and a little L2 so that separable
// neurons keep finite weights. hx: (tokens, rank + 1), each token's features followed by a 1;
// y: (tokens, neurons) labels. Every neuron's logits and gradient for all tokens are two GEMMs
// per step (linalg.h), the sigmoid between them one vectorized pass.
// Returns false when `keepGoing` (called once per iteration) said stop.
bool fitLogistic(FfnPredictor& p, const std::vector<float>& hx, const std::vector<uint8_t>& y,
                 int64_t tokens, int iterations, const std::function<bool(double)>& keepGoing)
{
    const int r = p.rank, n = p.neurons, f = r + 1;
    if (tokens == 0 || iterations <= 0) return true;
    int64_t pos = 0;
    for (uint8_t v : y) pos += v != 0;
    const double neg = double(int64_t(y.size()) - pos);
    const double wPos = std::clamp(pos > 0 ? neg / double(pos) : 1.0, 1.0, 20.0);
    // L <= wPos / 4 * lambda_max(E[h~ h~^T]), h~ = (h, 1): power iteration on the f x f matrix.
    std::vector<float> mf(size_t(f) * f);
    linalg::gemm(true, false, f, f, tokens, 1.0f / float(tokens), hx.data(), f, hx.data(), f, 0.0f,
                 mf.data(), f);
    std::vector<double> m(mf.begin(), mf.end()), v(size_t(f), 1.0), u(size_t(f), 0.0);
    double lambda = 1.0;
    for (int it = 0; it < 50; ++it) {
        for (int i = 0; i < f; ++i) {
            double s = 0.0;
            for (int k = 0; k < f; ++k) s += m[size_t(i) * f + k] * v[size_t(k)];
            u[size_t(i)] = s;
        }
        double norm = 0.0;
        for (double e : u) norm += e * e;
        norm = std::sqrt(norm);
        if (norm <= 0.0) break;
        lambda = norm;
        for (int i = 0; i < f; ++i) v[size_t(i)] = u[size_t(i)] / norm;
    }
    const float l2 = 1e-3f;
    const float step = float(1.0 / (wPos / 4.0 * lambda + double(l2)));

    // theta: the parameters (neurons, f), look: the look-ahead point the gradient is taken at.
    std::vector<float> theta = extendedParameters(p), look = theta, grad(theta.size());
    const int64_t chunk = std::min(tokens, logitChunk(n));
    std::vector<float> z(size_t(chunk) * n);  // (chunk, neurons): logits, then residuals
    const float invTokens = 1.0f / float(tokens);
    for (int it = 0; it < iterations; ++it) {
        if (keepGoing && !keepGoing(double(it) / double(iterations))) return false;
        for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
            const int64_t tc = std::min(chunk, tokens - t0);
            const float* h = hx.data() + size_t(t0) * f;
            // z = h~ look^T: every neuron's logit for every token of the chunk.
            linalg::gemm(false, true, tc, n, f, 1.0f, h, f, look.data(), f, 0.0f, z.data(), n);
            linalg::logisticResidual(z.data(), y.data() + size_t(t0) * n, size_t(tc) * n, float(wPos));
            // grad (+)= residual^T h~: per neuron, the sum over tokens of residual times (h, 1).
            linalg::gemm(true, false, n, f, tc, 1.0f, z.data(), n, h, f, t0 == 0 ? 0.0f : 1.0f,
                         grad.data(), f);
        }
        const float momentum = float(it) / float(it + 3);
        for (int j = 0; j < n; ++j)
            for (int c = 0; c < f; ++c) {
                const size_t i = size_t(j) * f + size_t(c);
                const float l2grad = c == r ? 0.0f : l2 * look[i];  // the bias is not shrunk
                const float next = look[i] - step * (grad[i] * invTokens + l2grad);
                look[i] = next + momentum * (next - theta[i]);
                theta[i] = next;
            }
    }
    for (int j = 0; j < n; ++j) {
        std::copy_n(theta.data() + size_t(j) * f, r, p.b.data() + size_t(j) * r);
        p.bias[size_t(j)] = theta[size_t(j) * f + r];
    }
    return true;
}

}  // namespace

PredictorWork estimatePredictorWork(const LlamaModel& model, const PredictorOptions& options)
{
    const LlamaConfig& c = model.config();
    const std::vector<std::string> prompts =
        options.prompts.empty() ? builtinCalibrationPrompts() : options.prompts;
    double promptTokens = 0.0, sampledTokens = 0.0;
    const size_t cut = size_t(std::max(options.maxTokensPerPrompt, 0));
    for (const std::string& p : prompts) {
        promptTokens += double(std::min(model.tokenizer().encode(p, true).size(), cut));
        sampledTokens += double(std::max(options.continueTokens, 0));
    }
    const double tokens = promptTokens + sampledTokens;
    double weightBytes = 0.0;
    for (const ModelTensor& t : model.tensors()) weightBytes += double(t.bytes);
    const double n = c.ffnDim, d = c.dim, r = std::min(options.rank, c.dim);
    // Per layer: the subspace iteration (two products of W per step, and B), the features of
    // every token, and per fit step two products over the training tokens (3 in 4).
    const double perLayer = 2.0 * n * d * r * (2.0 * options.iterations + 1.0) + 2.0 * tokens * d * r +
                            double(options.fitIterations) * 4.0 * 0.75 * tokens * n * (r + 1.0);
    PredictorWork w;
    w.calibrationSeconds = (promptTokens / kNominalBatchedSpeedup + sampledTokens) * weightBytes / kNominalReadBytesPerSecond;
    w.fitSeconds = double(c.nLayers) * perLayer / kNominalFlopsPerSecond;
    return w;
}

Result<std::vector<FfnPredictor>> trainFfnPredictors(const LlamaModel& model, gpu::Device& device,
                                                     const PredictorOptions& options)
{
    const LlamaConfig& c = model.config();
    const bool relu = c.ffnRelu || !c.ffnGated;
    if (!relu)
        return makeError(ErrorCode::UnsupportedModel,
                         model.path() + ": its FFN has no ReLU (SwiGLU activations are never "
                                        "exactly zero): nothing to predict");
    if (options.rank < 1 || options.rank > 4096 || options.iterations < 0 ||
        options.iterations > 100 || !(options.targetRecall > 0.0 && options.targetRecall <= 1.0))
        return makeError(ErrorCode::InvalidArgument,
                         "predictor: rank must be 1..4096, iterations 0..100, recall in (0, 1]");
    const std::vector<std::string> prompts =
        options.prompts.empty() ? builtinCalibrationPrompts() : options.prompts;
    if (prompts.size() < 2)
        return makeError(ErrorCode::InvalidArgument,
                         "predictor: at least 2 calibration prompts are needed (one is held out)");

    // Watch each layer's pre-activation matrix (its input is the FFN input) and ffn_down (its
    // input shows which neurons are active).
    const int layers = c.nLayers, dim = c.dim, n = c.ffnDim;
    std::vector<NamedMatrix> watched;
    for (int l = 0; l < layers; ++l) {
        const LlamaLayerWeights& L = model.weights().layers[size_t(l)];
        const std::string b = "blk." + std::to_string(l) + ".";
        if (options.input == PredictorInput::Attention)
            watched.push_back({b + "attn_q.weight", L.wq, false});  // its input: the attention's
        else
            watched.push_back(c.ffnGated ? NamedMatrix{b + "ffn_gate.weight", L.gate, false}
                                         : NamedMatrix{b + "ffn_up.weight", L.up, false});
        watched.push_back({b + "ffn_down.weight", L.down, false});
    }
    std::vector<LayerSamples> samples{size_t(layers)};
    // The progress fraction's share of the calibration run (the rest is the layers' fits).
    const PredictorWork work = estimatePredictorWork(model, options);
    const double calibrationShare = work.total() > 0.0 ? work.calibrationSeconds / work.total() : 0.5;
    SPILLWAY_TRY(runCalibration(
        model, device, prompts, options.maxTokensPerPrompt, watched,
        [&](size_t i, std::span<const float> x, int prompt, int) {
            LayerSamples& s = samples[i / 2];
            if (i % 2 == 0) {
                s.x.insert(s.x.end(), x.begin(), x.begin() + std::min<ptrdiff_t>(dim, ptrdiff_t(x.size())));
                s.heldOut.push_back(prompt % 4 == 3 || (prompts.size() < 4 && prompt == int(prompts.size()) - 1));
            } else {
                for (int j = 0; j < n; ++j) s.active.push_back(j < int(x.size()) && x[size_t(j)] != 0.0f);
            }
        },
        options.continueTokens,
        [&](double f) { return !options.progress || options.progress(calibrationShare * f); }));

    std::mt19937_64 rng(options.seed);
    std::vector<FfnPredictor> out;
    const linalg::ThreadScope threads(options.threads);
    for (int l = 0; l < layers; ++l) {
        const LayerSamples& s = samples[size_t(l)];
        const LlamaLayerWeights& L = model.weights().layers[size_t(l)];
        const gpu::MatrixView& pre = c.ffnGated ? L.gate : L.up;
        std::vector<float> w(size_t(n) * dim);
        for (int i = 0; i < n; ++i) device.getRow(pre, i, w.data() + size_t(i) * dim);
        device.synchronize();

        FfnPredictor p;
        p.layer = l;
        p.input = options.input;
        p.dim = dim;
        p.neurons = n;
        p.rank = std::min(options.rank, dim);
        lowRankFactors(w, n, dim, p.rank, options.iterations, rng, p);
        p.bias.assign(size_t(n), -c.ffnReluShift);
        if (!c.ffnGated && L.upBias)
            for (int j = 0; j < n; ++j) p.bias[size_t(j)] += L.upBias[j];

        // Every token's features (h, 1), h = A x: one GEMM over the layer's samples.
        const int r = p.rank, f = r + 1;
        const int64_t tokens = s.tokens();
        std::vector<float> hx(size_t(tokens) * f);
        linalg::gemm(false, true, tokens, r, dim, 1.0f, s.x.data(), dim, p.a.data(), dim, 0.0f, hx.data(), f);
        for (int64_t t = 0; t < tokens; ++t) hx[size_t(t) * f + r] = 1.0f;
        // The training tokens' features and labels, for the logistic fit.
        std::vector<float> trainHx;
        std::vector<uint8_t> labels;
        for (int64_t t = 0; t < tokens; ++t) {
            if (s.heldOut[size_t(t)]) continue;
            ++p.trainTokens;
            trainHx.insert(trainHx.end(), hx.begin() + ptrdiff_t(t * f), hx.begin() + ptrdiff_t((t + 1) * f));
            labels.insert(labels.end(), s.active.begin() + ptrdiff_t(t * n), s.active.begin() + ptrdiff_t((t + 1) * n));
        }
        auto keepGoing = [&](double done) {
            return !options.progress ||
                   options.progress(calibrationShare + (1.0 - calibrationShare) * (double(l) + done) / double(layers));
        };
        if (!keepGoing(0.0) || !fitLogistic(p, trainHx, labels, p.trainTokens, options.fitIterations, keepGoing))
            return makeError(ErrorCode::Cancelled, "predictor training cancelled");
        // Each token's logits (tokens, neurons), a chunk of tokens at a time: fn(t, z of t).
        std::vector<float> z;
        auto forEachToken = [&](const std::function<void(int64_t, const float*)>& fn) {
            const std::vector<float> theta = extendedParameters(p);
            const int64_t chunk = std::min(tokens, logitChunk(n));
            z.resize(size_t(chunk) * n);
            for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
                const int64_t tc = std::min(chunk, tokens - t0);
                linalg::gemm(false, true, tc, n, f, 1.0f, hx.data() + size_t(t0) * f, f, theta.data(), f, 0.0f,
                             z.data(), n);
                for (int64_t t = t0; t < t0 + tc; ++t) fn(t, z.data() + size_t(t - t0) * n);
            }
        };
        // Offset for the target recall on the training tokens: the bias is raised, never
        // lowered (a predictor that finds more already keeps doing so).
        std::vector<float> positives;
        forEachToken([&](int64_t t, const float* zt) {
            if (s.heldOut[size_t(t)]) return;
            for (int j = 0; j < n; ++j)
                if (s.active[size_t(t) * n + j]) positives.push_back(zt[j]);
        });
        if (!positives.empty()) {
            std::sort(positives.begin(), positives.end());
            const size_t at = std::min(positives.size() - 1,
                                       size_t(std::floor((1.0 - options.targetRecall) * double(positives.size()))));
            const float q = positives[at];
            const float offset = std::max(0.0f, -q + 1e-6f * (1.0f + std::fabs(q)));
            for (float& b : p.bias) b += offset;
        }
        // With the offset: held-out recall and precision, and every token's true and predicted
        // active sets (for the LRU hit-rate curves).
        int64_t tp = 0, fp = 0, fn = 0, predicted = 0, actual = 0;
        std::vector<uint32_t> trueIds, predictedIds;
        std::vector<uint64_t> trueOffsets{0}, predictedOffsets{0};
        forEachToken([&](int64_t t, const float* zt) {
            const bool held = s.heldOut[size_t(t)] != 0;
            p.testTokens += held;
            for (int j = 0; j < n; ++j) {
                const bool yes = zt[j] > 0.0f, truth = s.active[size_t(t) * n + j] != 0;
                if (truth) trueIds.push_back(uint32_t(j));
                if (yes) predictedIds.push_back(uint32_t(j));
                if (!held) continue;
                tp += yes && truth;
                fp += yes && !truth;
                fn += !yes && truth;
                predicted += yes;
                actual += truth;
            }
            trueOffsets.push_back(trueIds.size());
            predictedOffsets.push_back(predictedIds.size());
        });
        p.recall = tp + fn > 0 ? double(tp) / double(tp + fn) : 1.0;
        p.precision = tp + fp > 0 ? double(tp) / double(tp + fp) : 1.0;
        const double cells = double(std::max<int64_t>(p.testTokens, 1)) * n;
        p.predictedDensity = double(predicted) / cells;
        p.density = double(actual) / cells;

        // How often each neuron is active, over the same tokens.
        auto frequencies = [&](const std::vector<uint32_t>& ids) {
            std::vector<float> f(size_t(n), 0.0f);
            std::vector<uint64_t> count(size_t(n), 0);
            for (uint32_t j : ids) ++count[j];
            const double tokens = double(std::max<int64_t>(s.tokens(), 1));
            for (int j = 0; j < n; ++j) f[size_t(j)] = float(double(count[size_t(j)]) / tokens);
            return f;
        };
        p.frequency = frequencies(trueIds);
        p.predictedFrequency = frequencies(predictedIds);
        // pinned: the hot neurons held as a shipping session holds them (by these frequencies).
        auto curve = [&](const std::vector<uint32_t>& ids, const std::vector<uint64_t>& offsets, bool predicted,
                         bool pinned) {
            std::vector<float> out;
            for (double share : kHitCurveShares) {
                const int slots = std::max(1, int(std::lround(share * n)));
                NeuronCache cache(n, slots, EvictionPolicy::Lru);
                if (pinned) cache.pin(p.hottest(slots / 2, predicted, kDefaultHotFrequency));
                for (size_t t = 0; t + 1 < offsets.size(); ++t)
                    cache.update(std::span<const uint32_t>(ids.data() + offsets[t], offsets[t + 1] - offsets[t]));
                out.push_back(float(cache.stats().hitRate()));
            }
            return out;
        };
        p.hitCurve = curve(trueIds, trueOffsets, false, false);
        p.predictedHitCurve = curve(predictedIds, predictedOffsets, true, false);
        p.pinnedHitCurve = curve(trueIds, trueOffsets, false, true);
        p.predictedPinnedHitCurve = curve(predictedIds, predictedOffsets, true, true);
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace spillway::compress
