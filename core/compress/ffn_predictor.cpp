#include "core/compress/ffn_predictor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/compress/calibration.h"
#include "core/model/llama_model.h"
#include "core/runtime/neuron_cache.h"
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

// A (rank, dim) spanning W's top right-singular subspace, and B = W Aᵀ (neurons, rank).
void lowRankFactors(const std::vector<float>& w, int n, int d, int r, int iterations,
                    std::mt19937_64& rng, FfnPredictor& p)
{
    std::normal_distribution<double> normal;
    std::vector<double> v(size_t(d) * r), t(size_t(n) * r);
    for (double& e : v) e = normal(rng);
    orthonormalize(v, d, r, rng);
    for (int it = 0; it < iterations; ++it) {
        // t = W v; v = Wᵀ t; orthonormalize: one step of subspace iteration on WᵀW.
        std::fill(t.begin(), t.end(), 0.0);
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < d; ++k) {
                const double wik = w[size_t(i) * d + k];
                if (wik == 0.0) continue;
                for (int c = 0; c < r; ++c) t[size_t(i) * r + c] += wik * v[size_t(k) * r + c];
            }
        std::fill(v.begin(), v.end(), 0.0);
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < d; ++k) {
                const double wik = w[size_t(i) * d + k];
                if (wik == 0.0) continue;
                for (int c = 0; c < r; ++c) v[size_t(k) * r + c] += wik * t[size_t(i) * r + c];
            }
        orthonormalize(v, d, r, rng);
    }
    p.a.assign(size_t(r) * d, 0.0f);
    for (int c = 0; c < r; ++c)
        for (int k = 0; k < d; ++k) p.a[size_t(c) * d + k] = float(v[size_t(k) * r + c]);
    p.b.assign(size_t(n) * r, 0.0f);
    for (int i = 0; i < n; ++i)
        for (int c = 0; c < r; ++c) {
            double s = 0.0;
            for (int k = 0; k < d; ++k) s += double(w[size_t(i) * d + k]) * v[size_t(k) * r + c];
            p.b[size_t(i) * r + c] = float(s);
        }
}

// The predictor's logits (neurons) for FFN input x; h gets the features A x. With `features`
// given, those are used and x is not read.
// h = A x (rank values).
void features(const FfnPredictor& p, const float* x, std::vector<float>& h)
{
    h.assign(size_t(p.rank), 0.0f);
    for (int c = 0; c < p.rank; ++c) {
        float s = 0.0f;
        const float* a = p.a.data() + size_t(c) * p.dim;
        for (int k = 0; k < p.dim; ++k) s += a[k] * x[k];
        h[size_t(c)] = s;
    }
}

// Neuron j's logit for features h: bias_j + B_j . h.
float logitOf(const FfnPredictor& p, int j, const float* h)
{
    float s = p.bias[size_t(j)];
    const float* b = p.b.data() + size_t(j) * p.rank;
    for (int c = 0; c < p.rank; ++c) s += b[c] * h[c];
    return s;
}

void logits(const FfnPredictor& p, const float* x, std::vector<float>& h, std::vector<float>& out,
            const float* given = nullptr)
{
    if (given) h.assign(given, given + p.rank);
    else features(p, x, h);
    out.resize(size_t(p.neurons));
    for (int j = 0; j < p.neurons; ++j) out[size_t(j)] = logitOf(p, j, h.data());
}

// Step 2: with A fixed, each neuron's (row of B, bias) is a logistic regression on the features
// h = A x, all neurons sharing the features: full-batch gradient descent with Nesterov momentum,
// step 1/L from the loss's curvature bound, positives weighted by the class ratio (clipped to
// [1, 20]) since a missed neuron costs more than a spare one, and a little L2 so that separable
// neurons keep finite weights.
// Returns false when `keepGoing` (called on the calling thread once per iteration of its block)
// said stop; the other threads then stop at their next iteration too.
bool fitLogistic(FfnPredictor& p, const std::vector<float>& h, const std::vector<uint8_t>& y,
                 int64_t tokens, int iterations, int threads, const std::function<bool(double)>& keepGoing)
{
    const int r = p.rank, n = p.neurons;
    if (tokens == 0 || iterations <= 0) return true;
    int64_t pos = 0;
    for (uint8_t v : y) pos += v;
    const double neg = double(int64_t(y.size()) - pos);
    const double wPos = std::clamp(pos > 0 ? neg / double(pos) : 1.0, 1.0, 20.0);
    // L <= wPos / 4 * lambda_max(E[h~ h~^T]), h~ = (h, 1): power iteration on the (r+1)^2 matrix.
    const int f = r + 1;
    std::vector<double> m(size_t(f) * f, 0.0);
    for (int64_t t = 0; t < tokens; ++t)
        for (int i = 0; i < f; ++i) {
            const double hi = i < r ? h[size_t(t) * r + i] : 1.0;
            for (int k = 0; k < f; ++k) m[size_t(i) * f + k] += hi * (k < r ? h[size_t(t) * r + k] : 1.0);
        }
    for (double& e : m) e /= double(tokens);
    std::vector<double> v(size_t(f), 1.0), u(size_t(f), 0.0);
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
    const double l2 = 1e-3;
    const double step = 1.0 / (wPos / 4.0 * lambda + l2);

    // Each neuron's regression is its own (the features and the step are shared): blocks of
    // neurons are fitted on separate threads, each running every iteration for its block. The
    // arithmetic per neuron is the same whatever the threading: results are bit for bit the same.
    std::atomic<bool> stop{false};
    auto fitBlock = [&](int j0, int j1, bool caller) {
        const size_t count = size_t(j1 - j0) * size_t(f);
        // Parameters theta (neurons, f): row j = (b_j, bias_j); look the look-ahead point.
        std::vector<double> theta(count), look, prev, grad(count);
        for (int j = j0; j < j1; ++j) {
            for (int c = 0; c < r; ++c) theta[size_t(j - j0) * f + c] = p.b[size_t(j) * r + c];
            theta[size_t(j - j0) * f + r] = p.bias[size_t(j)];
        }
        look = prev = theta;
        for (int it = 0; it < iterations; ++it) {
            if (caller && keepGoing && !keepGoing(double(it) / double(iterations))) stop = true;
            if (stop) return;
            std::fill(grad.begin(), grad.end(), 0.0);
            for (int64_t t = 0; t < tokens; ++t) {
                const float* ht = h.data() + size_t(t) * r;
                for (int j = j0; j < j1; ++j) {
                    const double* th = look.data() + size_t(j - j0) * f;
                    double z = th[r];
                    for (int c = 0; c < r; ++c) z += th[c] * ht[c];
                    const bool label = y[size_t(t) * n + j] != 0;
                    const double sig = 1.0 / (1.0 + std::exp(-z));
                    const double g = label ? wPos * (sig - 1.0) : sig;
                    double* gr = grad.data() + size_t(j - j0) * f;
                    for (int c = 0; c < r; ++c) gr[c] += g * ht[c];
                    gr[r] += g;
                }
            }
            for (size_t i = 0; i < count; ++i) {
                const double l2grad = (i % size_t(f)) == size_t(r) ? 0.0 : l2 * look[i];
                const double next = look[i] - step * (grad[i] / double(tokens) + l2grad);
                const double momentum = double(it) / double(it + 3);
                prev[i] = theta[i];
                theta[i] = next;
                look[i] = next + momentum * (next - prev[i]);
            }
        }
        for (int j = j0; j < j1; ++j) {
            for (int c = 0; c < r; ++c) p.b[size_t(j) * r + c] = float(theta[size_t(j - j0) * f + c]);
            p.bias[size_t(j)] = float(theta[size_t(j - j0) * f + r]);
        }
    };
    const int workers = std::clamp(threads > 0 ? threads : int(std::thread::hardware_concurrency()), 1, std::max(1, n / 64));
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w)
        pool.emplace_back(fitBlock, int(int64_t(n) * w / workers), int(int64_t(n) * (w + 1) / workers), false);
    fitBlock(0, int(int64_t(n) / workers), true);
    for (std::thread& t : pool) t.join();
    return !stop;
}

}  // namespace

void FfnPredictor::predict(const float* x, std::vector<uint32_t>& active,
                           std::vector<float>& scratch) const
{
    // Each logit is tested as it is made: no (neurons) vector.
    features(*this, x, scratch);
    active.clear();
    for (int j = 0; j < neurons; ++j)
        if (logitOf(*this, j, scratch.data()) > 0.0f) active.push_back(uint32_t(j));
}

std::string predictorExtra(const FfnPredictor& p)
{
    nlohmann::json j = {{"rank", p.rank},
                        {"recall", p.recall},
                        {"precision", p.precision},
                        {"predictedDensity", p.predictedDensity},
                        {"density", p.density},
                        {"trainTokens", p.trainTokens},
                        {"testTokens", p.testTokens}};
    if (p.input == PredictorInput::Attention) j["input"] = "attention";
    if (!p.hitCurve.empty()) j["hitCurve"] = p.hitCurve;
    if (!p.predictedHitCurve.empty()) j["predictedHitCurve"] = p.predictedHitCurve;
    if (!p.pinnedHitCurve.empty()) j["pinnedHitCurve"] = p.pinnedHitCurve;
    if (!p.predictedPinnedHitCurve.empty()) j["predictedPinnedHitCurve"] = p.predictedPinnedHitCurve;
    return j.dump();
}

double FfnPredictor::hitRateAt(double share, bool predicted, bool pinned) const
{
    const std::vector<float>& plain = predicted ? predictedHitCurve : hitCurve;
    const std::vector<float>& withPins = predicted ? predictedPinnedHitCurve : pinnedHitCurve;
    const std::vector<float>& curve = pinned && !withPins.empty() ? withPins : plain;
    constexpr size_t points = std::size(kHitCurveShares);
    if (curve.size() != points) return -1.0;
    if (share <= kHitCurveShares[0]) return curve[0] * std::max(0.0, share) / kHitCurveShares[0];
    for (size_t i = 1; i < points; ++i)
        if (share <= kHitCurveShares[i]) {
            const double t = (share - kHitCurveShares[i - 1]) / (kHitCurveShares[i] - kHitCurveShares[i - 1]);
            return curve[i - 1] + t * (curve[i] - curve[i - 1]);
        }
    return curve.back();
}

namespace {
// Neuron ids by descending frequency (ties: lower id first).
std::vector<uint32_t> byFrequency(const std::vector<float>& f)
{
    std::vector<uint32_t> order(f.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = uint32_t(j);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return f[a] > f[b]; });
    return order;
}
}  // namespace

double FfnPredictor::staticHitRate(int slots, bool predicted) const
{
    const std::vector<float>& f = predicted ? predictedFrequency : frequency;
    if (f.empty()) return -1.0;
    double total = 0.0;
    for (float v : f) total += v;
    if (total <= 0.0) return 1.0;  // nothing is ever active: nothing misses
    std::vector<float> sorted(f);
    const size_t k = std::min(sorted.size(), size_t(std::max(slots, 0)));
    std::partial_sort(sorted.begin(), sorted.begin() + ptrdiff_t(k), sorted.end(), std::greater<float>());
    double kept = 0.0;
    for (size_t i = 0; i < k; ++i) kept += sorted[i];
    return std::min(1.0, kept / total);
}

std::vector<uint32_t> FfnPredictor::hottest(int slots, bool predicted, double minFrequency) const
{
    const std::vector<float>& f = predicted ? predictedFrequency : frequency;
    std::vector<uint32_t> order = byFrequency(f);
    order.resize(std::min(order.size(), size_t(std::max(slots, 0))));
    while (!order.empty() && (f[order.back()] <= 0.0f || f[order.back()] < minFrequency)) order.pop_back();
    return order;
}

bool hasFfnPredictors(const LlamaModel& model)
{
    return model.tensor(std::string("blk.0.") + kPredictorA) != nullptr;
}

bool hasNeuronActivity(const LlamaModel& model)
{
    return model.tensor(std::string("blk.0.") + kNeuronActivity) != nullptr;
}

Result<std::vector<FfnPredictor>> loadFfnPredictors(const LlamaModel& model, bool recordsOnly)
{
    const LlamaConfig& c = model.config();
    std::vector<FfnPredictor> out;
    for (int l = 0; l < c.nLayers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const ModelTensor* a = model.tensor(b + kPredictorA);
        const ModelTensor* bm = model.tensor(b + kPredictorB);
        const ModelTensor* bias = model.tensor(b + kPredictorBias);
        auto bad = [&](const std::string& why) {
            return makeError(ErrorCode::ModelFileInvalid, model.path() + ": activation predictor of layer " +
                                                              std::to_string(l) + ": " + why);
        };
        if (!a && !bm && !bias) continue;  // counted below: all layers or none
        if (!a || !bm || !bias)
            return bad("incomplete (needs " + std::string(kPredictorA) + ", " + kPredictorB + " and " +
                       kPredictorBias + ")");
        if (a->type != gpu::DType::F32 || bm->type != gpu::DType::F32 || bias->type != gpu::DType::F32)
            return bad("not f32");
        if (a->dims.size() != 2 || a->dims[0] != c.dim || a->dims[1] < 1 || a->dims[1] > c.dim)
            return bad("A is not (rank, dim)");
        const int64_t rank = a->dims[1];
        if (bm->dims.size() != 2 || bm->dims[0] != rank || bm->dims[1] != c.ffnDim) return bad("B is not (neurons, rank)");
        if (bias->dims.size() != 1 || bias->dims[0] != c.ffnDim) return bad("bias is not (neurons)");
        FfnPredictor p;
        p.layer = l;
        p.rank = int(rank);
        p.dim = c.dim;
        p.neurons = c.ffnDim;
        auto floats = [](const ModelTensor& t) {
            std::vector<float> v(size_t(t.bytes / sizeof(float)));
            std::memcpy(v.data(), t.data, v.size() * sizeof(float));
            return v;
        };
        if (!recordsOnly) {
            p.a = floats(*a);
            p.b = floats(*bm);
            p.bias = floats(*bias);
        }
        // The activity frequencies (small: two floats per neuron, kept even in records).
        if (const ModelTensor* f = model.tensor(b + kNeuronActivity)) {
            if (f->type != gpu::DType::F32 || f->dims.size() != 2 || f->dims[0] != c.ffnDim || f->dims[1] != 2 ||
                f->bytes < size_t(2 * c.ffnDim) * sizeof(float))
                return bad(std::string(kNeuronActivity) + " is not (2, neurons) f32");
            const auto* v = reinterpret_cast<const float*>(f->data);
            p.frequency.assign(v, v + c.ffnDim);
            p.predictedFrequency.assign(v + c.ffnDim, v + 2 * size_t(c.ffnDim));
            for (float x : p.frequency)
                if (!(x >= 0.0f && x <= 1.0f)) return bad(std::string(kNeuronActivity) + " holds a value outside [0, 1]");
            for (float x : p.predictedFrequency)
                if (!(x >= 0.0f && x <= 1.0f)) return bad(std::string(kNeuronActivity) + " holds a value outside [0, 1]");
        }
        // The figures measured when it was trained (a package keeps them beside A); informative
        // only, so a missing or odd record leaves them 0.
        if (const storage::Package* pkg = model.package())
            if (const storage::PackageTensor* pa = pkg->find(b + kPredictorA); pa && !pa->extraJson.empty()) {
                const auto j = nlohmann::json::parse(pa->extraJson, nullptr, false);
                auto number = [&](const char* key) {
                    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
                };
                p.recall = number("recall");
                p.precision = number("precision");
                p.predictedDensity = number("predictedDensity");
                p.density = number("density");
                p.trainTokens = int64_t(number("trainTokens"));
                p.testTokens = int64_t(number("testTokens"));
                auto curve = [&](const char* key) {
                    std::vector<float> v;
                    if (j.is_object() && j.contains(key) && j[key].is_array() &&
                        j[key].size() == std::size(kHitCurveShares))
                        for (const auto& e : j[key]) v.push_back(e.is_number() ? e.get<float>() : 0.0f);
                    return v;
                };
                if (j.is_object() && j.contains("input") && j["input"] == "attention")
                    p.input = PredictorInput::Attention;
                p.hitCurve = curve("hitCurve");
                p.predictedHitCurve = curve("predictedHitCurve");
                p.pinnedHitCurve = curve("pinnedHitCurve");
                p.predictedPinnedHitCurve = curve("predictedPinnedHitCurve");
            }
        out.push_back(std::move(p));
    }
    if (!out.empty() && int(out.size()) != c.nLayers)
        return makeError(ErrorCode::ModelFileInvalid, model.path() + ": activation predictors for " +
                                                          std::to_string(out.size()) + " of " +
                                                          std::to_string(c.nLayers) + " layers");
    return out;
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
        [&](double f) { return !options.progress || options.progress(0.5 * f); }));

    std::mt19937_64 rng(options.seed);
    std::vector<FfnPredictor> out;
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

        // The training tokens' features h = A x and labels, for the logistic fit.
        std::vector<float> h, z, features, positives;
        std::vector<uint8_t> labels;
        for (int64_t t = 0; t < s.tokens(); ++t) {
            if (s.heldOut[size_t(t)]) continue;
            ++p.trainTokens;
            logits(p, s.x.data() + size_t(t) * dim, h, z);
            features.insert(features.end(), h.begin(), h.end());
            labels.insert(labels.end(), s.active.begin() + ptrdiff_t(t * n),
                          s.active.begin() + ptrdiff_t((t + 1) * n));
        }
        auto keepGoing = [&](double f) {
            return !options.progress || options.progress(0.5 + 0.5 * (double(l) + f) / double(layers));
        };
        if (!keepGoing(0.0) ||
            !fitLogistic(p, features, labels, p.trainTokens, options.fitIterations, options.threads, keepGoing))
            return makeError(ErrorCode::Cancelled, "predictor training cancelled");
        // Offset for the target recall on the training tokens: the bias is raised, never
        // lowered (a predictor that finds more already keeps doing so).
        for (int64_t t = 0; t < p.trainTokens; ++t) {
            logits(p, nullptr, h, z, features.data() + size_t(t) * p.rank);
            for (int j = 0; j < n; ++j)
                if (labels[size_t(t) * n + j]) positives.push_back(z[size_t(j)]);
        }
        if (!positives.empty()) {
            std::sort(positives.begin(), positives.end());
            const size_t at = std::min(positives.size() - 1,
                                       size_t(std::floor((1.0 - options.targetRecall) * double(positives.size()))));
            const float q = positives[at];
            const float offset = std::max(0.0f, -q + 1e-6f * (1.0f + std::fabs(q)));
            for (float& b : p.bias) b += offset;
        }
        // Held-out recall and precision.
        int64_t tp = 0, fp = 0, fn = 0, predicted = 0, actual = 0;
        for (int64_t t = 0; t < s.tokens(); ++t) {
            if (!s.heldOut[size_t(t)]) continue;
            ++p.testTokens;
            logits(p, s.x.data() + size_t(t) * dim, h, z);
            for (int j = 0; j < n; ++j) {
                const bool yes = z[size_t(j)] > 0.0f, truth = s.active[size_t(t) * n + j] != 0;
                tp += yes && truth;
                fp += yes && !truth;
                fn += !yes && truth;
                predicted += yes;
                actual += truth;
            }
        }
        p.recall = tp + fn > 0 ? double(tp) / double(tp + fn) : 1.0;
        p.precision = tp + fp > 0 ? double(tp) / double(tp + fp) : 1.0;
        const double cells = double(std::max<int64_t>(p.testTokens, 1)) * n;
        p.predictedDensity = double(predicted) / cells;
        p.density = double(actual) / cells;

        // LRU hit-rate curves over every calibration token, true and predicted sets.
        std::vector<uint32_t> trueIds, predictedIds;
        std::vector<uint64_t> trueOffsets{0}, predictedOffsets{0};
        for (int64_t t = 0; t < s.tokens(); ++t) {
            logits(p, s.x.data() + size_t(t) * dim, h, z);
            for (int j = 0; j < n; ++j) {
                if (s.active[size_t(t) * n + j]) trueIds.push_back(uint32_t(j));
                if (z[size_t(j)] > 0.0f) predictedIds.push_back(uint32_t(j));
            }
            trueOffsets.push_back(trueIds.size());
            predictedOffsets.push_back(predictedIds.size());
        }
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
