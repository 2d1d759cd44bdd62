// Device::deltaNet on the CPU (gpu/cpu/delta_net.cpp) against a double-precision reference of
// the Gated DeltaNet recurrence written here from gpu/device.h's DeltaNetArgs: one token (the
// recurrent step) and a prompt's batch (the chunked form, across chunk boundaries), fused and
// unfused inputs, tiled and grouped heads, forgetting from none to total; outputs, the state
// matrices and the convolution's state all compared. The ik_llama.cpp references of the hybrid
// models (test_families) check the same kernel end to end.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "../common/prompt_tolerance.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;

namespace {

struct Shape {
    int kHeads, vHeads, stateDim, headVDim, kernel;
    bool fused, tiled;
    int keyDim() const { return kHeads * stateDim; }
    int valueDim() const { return vHeads * headVDim; }
    int convDim() const { return 2 * keyDim() + valueDim(); }
    // Per token: [qkv (with z where fused) | z (unfused) | beta, alpha | out], one stride.
    int qkvFloats() const { return fused ? convDim() + valueDim() : convDim(); }
    int stride() const { return qkvFloats() + valueDim() + 2 * vHeads + valueDim(); }
};

struct Weights {
    std::vector<float> conv, dtBias, a, norm;
};

// The recurrence in double, token by token, on one token's fused or unfused inputs.
struct Reference {
    const Shape& s;
    const Weights& w;
    std::vector<double> convState, state;
    Reference(const Shape& shape, const Weights& weights)
        : s(shape), w(weights), convState(size_t(shape.kernel - 1) * shape.convDim()),
          state(size_t(shape.vHeads) * shape.headVDim * shape.stateDim)
    {
    }

    std::vector<double> step(const float* token)
    {
        const int dk = s.stateDim, dv = s.headVDim, r = s.vHeads / s.kHeads;
        std::vector<double> x(s.convDim()), z(s.valueDim()), beta(s.vHeads), alpha(s.vHeads);
        const float* ba = token + s.qkvFloats() + (s.fused ? 0 : s.valueDim());
        if (s.fused) {
            // Per key head g: [q (dk) | k (dk) | v (r dv) | z (r dv)], and [beta (r) | alpha (r)].
            const int group = 2 * dk + 2 * r * dv;
            for (int g = 0; g < s.kHeads; ++g) {
                const float* src = token + g * group;
                for (int i = 0; i < dk; ++i) x[g * dk + i] = src[i];
                for (int i = 0; i < dk; ++i) x[s.keyDim() + g * dk + i] = src[dk + i];
                for (int i = 0; i < r * dv; ++i) x[2 * s.keyDim() + g * r * dv + i] = src[2 * dk + i];
                for (int i = 0; i < r * dv; ++i) z[g * r * dv + i] = src[2 * dk + r * dv + i];
                for (int i = 0; i < r; ++i) beta[g * r + i] = ba[g * 2 * r + i];
                for (int i = 0; i < r; ++i) alpha[g * r + i] = ba[g * 2 * r + r + i];
            }
        } else {
            for (int i = 0; i < s.convDim(); ++i) x[i] = token[i];
            for (int i = 0; i < s.valueDim(); ++i) z[i] = token[s.convDim() + i];
            for (int h = 0; h < s.vHeads; ++h) beta[h] = ba[h], alpha[h] = ba[s.vHeads + h];
        }
        auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
        const int taps = s.kernel, cd = s.convDim();
        std::vector<double> conv(cd);
        for (int c = 0; c < cd; ++c) {
            double sum = w.conv[size_t(c) * taps + taps - 1] * x[c];
            for (int t = 0; t < taps - 1; ++t) sum += w.conv[size_t(c) * taps + t] * convState[size_t(t) * cd + c];
            for (int t = 0; t + 1 < taps - 1; ++t) convState[size_t(t) * cd + c] = convState[size_t(t + 1) * cd + c];
            convState[size_t(taps - 2) * cd + c] = x[c];
            conv[c] = silu(sum);
        }
        auto l2 = [&](double* v, double extra) {
            double sum = 0;
            for (int i = 0; i < dk; ++i) sum += v[i] * v[i];
            const double scale = extra / std::max(std::sqrt(sum), 1e-6);
            for (int i = 0; i < dk; ++i) v[i] *= scale;
        };
        for (int h = 0; h < s.kHeads; ++h) {
            l2(conv.data() + h * dk, 1.0 / std::sqrt(double(dk)));
            l2(conv.data() + s.keyDim() + h * dk, 1.0);
        }
        std::vector<double> out(s.valueDim());
        for (int h = 0; h < s.vHeads; ++h) {
            const int key = s.tiled ? h % s.kHeads : h / r;
            const double* q = conv.data() + key * dk;
            const double* k = conv.data() + s.keyDim() + key * dk;
            const double* v = conv.data() + 2 * s.keyDim() + h * dv;
            const double sp = alpha[h] + w.dtBias[h] > 20 ? alpha[h] + w.dtBias[h] : std::log1p(std::exp(alpha[h] + w.dtBias[h]));
            const double g = std::exp(std::min(sp * w.a[h], 50.0));
            const double b = 1.0 / (1.0 + std::exp(-beta[h]));
            double* S = state.data() + size_t(h) * dv * dk;
            double* o = out.data() + h * dv;
            for (int row = 0; row < dv; ++row) {
                double* Sr = S + size_t(row) * dk;
                double sk = 0;
                for (int c = 0; c < dk; ++c) sk += (Sr[c] *= g) * k[c];
                const double u = b * (v[row] - sk);
                double sq = 0;
                for (int c = 0; c < dk; ++c) sq += (Sr[c] += u * k[c]) * q[c];
                o[row] = sq;
            }
            double squares = 0;
            for (int i = 0; i < dv; ++i) squares += o[i] * o[i];
            const double scale = 1.0 / std::sqrt(squares / dv + 1e-6);
            for (int i = 0; i < dv; ++i) o[i] = o[i] * scale * w.norm[i] * silu(z[h * dv + i]);
        }
        return out;
    }
};

double relativeError(const std::vector<float>& got, const std::vector<double>& want)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        norm += want[i] * want[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-300));
}

// The op's arguments for tokens [first, first + n) of `io` (Shape's layout, one stride a token).
DeltaNetArgs argsFor(const Shape& s, const Weights& w, float* io, int first, int n, std::vector<float>& convState,
                     std::vector<float>& state)
{
    DeltaNetArgs a;
    float* token = io + size_t(first) * s.stride();
    a.qkv = token;
    a.z = s.fused ? nullptr : token + s.qkvFloats();
    a.beta = token + s.qkvFloats() + (s.fused ? 0 : s.valueDim());
    a.alpha = s.fused ? nullptr : a.beta + s.vHeads;
    a.out = token + s.stride() - s.valueDim();
    a.convWeight = w.conv.data();
    a.dtBias = w.dtBias.data();
    a.a = w.a.data();
    a.normWeight = w.norm.data();
    a.convState = convState.data();
    a.state = state.data();
    a.kHeads = s.kHeads;
    a.vHeads = s.vHeads;
    a.stateDim = s.stateDim;
    a.headVDim = s.headVDim;
    a.kernel = s.kernel;
    a.fused = s.fused;
    a.tiled = s.tiled;
    a.n = n;
    a.stride = size_t(s.stride());
    return a;
}

// `decayScale` moves the gates: 0 keeps everything (decay 1), large values forget all at once.
void checkShape(const Shape& s, float decayScale, std::mt19937_64& rng)
{
    Weights w;
    w.conv = randomVector(int64_t(s.convDim()) * s.kernel, rng, 0.7f);
    w.dtBias = randomVector(s.vHeads, rng);
    w.a = randomVector(s.vHeads, rng);
    for (float& x : w.a) x = -decayScale * (0.2f + std::fabs(x));  // -exp(A_log): negative
    w.norm = randomVector(s.headVDim, rng);
    for (float& x : w.norm) x += 1.0f;
    const int maxTokens = 150;  // past two chunks of 64
    const std::vector<float> inputs = randomVector(int64_t(maxTokens) * s.stride(), rng, 2.0f);

    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (int batch : {1, 2, 7, 64, 65, 150}) {
            // Three calls: 5 tokens one at a time, then `batch` tokens in one call, then one more.
            const int total = 5 + batch + 1;
            if (total > maxTokens) continue;
            std::vector<float> io(inputs.begin(), inputs.begin() + size_t(total) * s.stride());
            for (int t = 0; t < total; ++t)
                std::fill_n(io.begin() + size_t(t) * s.stride() + s.stride() - s.valueDim(), s.valueDim(), kPoison);
            std::vector<float> convState(size_t(s.kernel - 1) * s.convDim(), 0.0f);
            std::vector<float> state(size_t(s.vHeads) * s.headVDim * s.stateDim, 0.0f);
            auto run = [&](int first, int n) { device->deltaNet(argsFor(s, w, io.data(), first, n, convState, state)); };
            for (int t = 0; t < 5; ++t) run(t, 1);
            run(5, batch);
            run(5 + batch, 1);

            Reference ref(s, w);
            std::vector<double> want;
            std::vector<float> got;
            for (int t = 0; t < total; ++t) {
                const std::vector<double> o = ref.step(inputs.data() + size_t(t) * s.stride());
                want.insert(want.end(), o.begin(), o.end());
                const float* out = io.data() + size_t(t) * s.stride() + s.stride() - s.valueDim();
                got.insert(got.end(), out, out + s.valueDim());
            }
            const std::string name = std::string(device->info().kernels) + "/" + std::to_string(cfg.threads) +
                                     "t " + (s.fused ? "fused" : "unfused") + (s.tiled ? " tiled" : "") +
                                     " heads " + std::to_string(s.kHeads) + "/" + std::to_string(s.vHeads) +
                                     " decay x" + std::to_string(decayScale) + " batch " + std::to_string(batch);
            for (float x : got) ASSERT_FALSE(isPoison(x)) << name << ": an output was not written";
            EXPECT_LT(relativeError(got, want), 2e-5) << name << ": outputs";
            EXPECT_LT(relativeError(state, ref.state), 2e-5) << name << ": state";
            EXPECT_LT(relativeError(convState, ref.convState), 1e-6) << name << ": convolution state";
        }
    }
}

}  // namespace

TEST(CpuDeltaNet, UnfusedGroupedHeadsMatchTheRecurrence)
{
    std::mt19937_64 rng(52);
    for (float decay : {0.0f, 1.0f, 200.0f}) checkShape({2, 4, 32, 16, 4, false, false}, decay, rng);
}

TEST(CpuDeltaNet, FusedInputsTiledHeadsMatchTheRecurrence)
{
    std::mt19937_64 rng(53);
    for (float decay : {0.0f, 1.0f}) checkShape({2, 4, 16, 24, 4, true, true}, decay, rng);
}

// Qwen3.5's real head size (128 x 128), where the pool splits the heads.
TEST(CpuDeltaNet, RealHeadSizeMatchesTheRecurrence)
{
    std::mt19937_64 rng(54);
    checkShape({1, 2, 128, 128, 4, false, true}, 1.0f, rng);
}

// The batch goes the chunked way: its sums differ from the recurrent step's in the last bits.
TEST(CpuDeltaNet, ABatchTakesTheChunkedForm)
{
    std::mt19937_64 rng(55);
    const Shape s{1, 2, 32, 16, 4, false, false};
    const int n = 20;
    const std::vector<float> inputs = randomVector(int64_t(n) * s.stride(), rng, 2.0f);
    Weights w;
    w.conv = randomVector(int64_t(s.convDim()) * s.kernel, rng, 0.7f);
    w.dtBias.assign(s.vHeads, 0.5f);
    w.a.assign(s.vHeads, -0.3f);
    w.norm.assign(s.headVDim, 1.0f);
    auto device = createCpuDevice(1);
    auto outputs = [&](bool batched) {
        std::vector<float> io = inputs;
        std::vector<float> convState(size_t(s.kernel - 1) * s.convDim(), 0.0f);
        std::vector<float> state(size_t(s.vHeads) * s.headVDim * s.stateDim, 0.0f);
        for (int first = 0; first < n; first += batched ? n : 1)
            device->deltaNet(argsFor(s, w, io.data(), first, batched ? n : 1, convState, state));
        return state;
    };
    const std::vector<float> one = outputs(false), batch = outputs(true);
    const double error = testing_support::relativeL2(batch, one);
    EXPECT_GT(error, 0.0) << "the batch ran the recurrent step";
    EXPECT_LT(error, testing_support::kPromptFloatTolerance);
}
