// Device::deltaNet on the CPU (gpu/device.h, DeltaNetArgs): one token through a Gated DeltaNet
// mixer. The convolution and the norms are small (a few thousand channels); the state update,
// (vHeads x headVDim x stateDim) values read and written per token, is split by value head across
// the pool, each state row done in one pass while it is in L1 (decay and S k, then the rank-one
// update and S q), through the kernel set's dot and axpy.

#include "gpu/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace spillway::gpu::cpu {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }

// v / max(|v|, eps) in place, the squares summed in double (as ggml's l2_norm sums in float;
// the difference is far below the tests' tolerance).
void l2Normalize(float* v, int n, float eps, float extra)
{
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += double(v[i]) * double(v[i]);
    const float scale = extra / std::max(float(std::sqrt(sum)), eps);
    for (int i = 0; i < n; ++i) v[i] *= scale;
}

}  // namespace

void deltaNetOp(const DeltaNetArgs& a, ThreadPool& pool, const Kernels& k, std::vector<float>& scratch)
{
    const int dk = a.stateDim, dv = a.headVDim, kh = a.kHeads, vh = a.vHeads;
    const int ratio = vh / kh, keyDim = kh * dk, valueDim = vh * dv;
    const int convDim = 2 * keyDim + valueDim, taps = a.kernel;
    // Scratch: the convolved [q | k | v], then z, beta and alpha in the unfused layout.
    scratch.resize(size_t(convDim) + size_t(valueDim) + 2 * size_t(vh));
    float* conv = scratch.data();
    float* z = conv + convDim;
    float* beta = z + valueDim;
    float* alpha = beta + vh;

    // The convolution's input in [q | k | v] order (fused: gathered from each key head's group).
    if (a.fused) {
        const int group = 2 * dk + 2 * ratio * dv;
        for (int g = 0; g < kh; ++g) {
            const float* src = a.qkv + size_t(g) * size_t(group);
            std::memcpy(conv + size_t(g) * dk, src, size_t(dk) * sizeof(float));
            std::memcpy(conv + keyDim + size_t(g) * dk, src + dk, size_t(dk) * sizeof(float));
            std::memcpy(conv + 2 * keyDim + size_t(g) * ratio * dv, src + 2 * dk, size_t(ratio * dv) * sizeof(float));
            std::memcpy(z + size_t(g) * ratio * dv, src + 2 * dk + ratio * dv, size_t(ratio * dv) * sizeof(float));
            const float* ba = a.beta + size_t(g) * 2 * ratio;
            std::memcpy(beta + size_t(g) * ratio, ba, size_t(ratio) * sizeof(float));
            std::memcpy(alpha + size_t(g) * ratio, ba + ratio, size_t(ratio) * sizeof(float));
        }
    } else {
        std::memcpy(conv, a.qkv, size_t(convDim) * sizeof(float));
        std::memcpy(z, a.z, size_t(valueDim) * sizeof(float));
        std::memcpy(beta, a.beta, size_t(vh) * sizeof(float));
        std::memcpy(alpha, a.alpha, size_t(vh) * sizeof(float));
    }

    // The causal convolution per channel over [state (taps - 1 inputs) | this input], SiLU; the
    // state then holds the last taps - 1 inputs.
    for (int c = 0; c < convDim; ++c) {
        const float* w = a.convWeight + size_t(c) * size_t(taps);
        float sum = 0.0f;
        for (int t = 0; t < taps - 1; ++t) sum += w[t] * a.convState[size_t(t) * convDim + c];
        const float x = conv[c];
        sum += w[taps - 1] * x;
        for (int t = 0; t + 1 < taps - 1; ++t) a.convState[size_t(t) * convDim + c] = a.convState[size_t(t + 1) * convDim + c];
        if (taps > 1) a.convState[size_t(taps - 2) * convDim + c] = x;
        conv[c] = silu(sum);
    }
    const float qScale = 1.0f / std::sqrt(float(dk));
    for (int h = 0; h < kh; ++h) {
        l2Normalize(conv + size_t(h) * dk, dk, a.eps, qScale);
        l2Normalize(conv + keyDim + size_t(h) * dk, dk, a.eps, 1.0f);
    }
    const float* q = conv;
    const float* kk = conv + keyDim;
    const float* v = conv + 2 * keyDim;

    auto work = [&](int thread, int threads) {
        for (int h = thread; h < vh; h += threads) {
            const int key = a.tiled ? h % kh : h / ratio;
            const float* qh = q + size_t(key) * dk;
            const float* kv = kk + size_t(key) * dk;
            const float* vv = v + size_t(h) * dv;
            const float decay = std::exp(std::min(softplus(alpha[h] + a.dtBias[h]) * a.a[h], 50.0f));
            const float b = sigmoid(beta[h]);
            float* S = a.state + size_t(h) * size_t(dv) * size_t(dk);
            float* o = a.out + size_t(h) * dv;
            for (int r = 0; r < dv; ++r) {
                float* row = S + size_t(r) * dk;
                for (int c = 0; c < dk; ++c) row[c] *= decay;
                const float u = b * (vv[r] - k.dot(row, kv, dk));
                k.axpy(u, kv, row, dk);
                for (int c = 0; c < dk; ++c) row[c] = std::clamp(row[c], -1e6f, 1e6f);
                o[r] = k.dot(row, qh, dk);
            }
            // The output's RMSNorm over the head, its weight, times silu(z).
            double squares = 0.0;
            for (int r = 0; r < dv; ++r) squares += double(o[r] * o[r]);
            const float scale = 1.0f / std::sqrt(float(squares / dv) + a.eps);
            const float* zh = z + size_t(h) * dv;
            for (int r = 0; r < dv; ++r) o[r] = (o[r] * scale) * a.normWeight[r] * silu(zh[r]);
        }
    };
    if (size_t(vh) * size_t(dv) * size_t(dk) < 32768)
        work(0, 1);
    else
        pool.run(work);
}

}  // namespace spillway::gpu::cpu
