#include "core/compress/ffn_predictor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/compress/linalg.h"
#include "core/model/llama_model.h"
#include "storage/package.h"

namespace spillway::compress {

void FfnPredictor::predict(const float* x, std::vector<uint32_t>& active,
                           std::vector<float>& scratch) const
{
    // scratch: the features h = A x (rank), then the logits B h + bias (neurons).
    if (scratch.size() < size_t(rank + neurons)) scratch.resize(size_t(rank + neurons));
    float* h = scratch.data();
    float* z = h + rank;
    linalg::matvec(a.data(), rank, dim, x, nullptr, h);
    linalg::matvec(b.data(), neurons, rank, h, bias.data(), z);
    active.clear();
    for (int j = 0; j < neurons; ++j)
        if (z[j] > 0.0f) active.push_back(uint32_t(j));
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

}  // namespace spillway::compress
