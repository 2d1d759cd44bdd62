// Device::deltaNet on the CPU (gpu/device.h, DeltaNetArgs): tokens through a Gated DeltaNet
// mixer. The convolution and the norms are small (a few thousand channels per token) and run
// token by token, as the convolution's state must; the state update, (vHeads x headVDim x
// stateDim) values, is split by value head across the pool.
//
// One token (decode) takes the recurrent step: each state row done in one pass while it is in L1
// (decay and S k, then the rank-one update and S q), through the kernel set's dot and axpy.
//
// A prompt's batch takes the chunked (matrix) form of the same rule, C tokens at a time (as in
// Yang, Kautz and Hatamizadeh, "Gated Delta Networks"). With G_t the sum of the log decays of
// the chunk's tokens up to t and S_0 the state before the chunk, the recurrence unrolls to
//   S_t = e^{G_t} S_0 + sum_{j<=t} e^{G_t - G_j} u_j k_j^T,
//   u_t = b_t (v_t - e^{G_t} S_0 k_t - sum_{j<t} e^{G_t - G_j} (k_t . k_j) u_j),
//   o_t = e^{G_t} S_0 q_t + sum_{j<=t} e^{G_t - G_j} (q_t . k_j) u_j,
// a triangular system for the u (solved forward) and products against S_0: the state is read
// twice (S_0 k and S_0 q for the chunk's tokens) and written once per chunk instead of read and
// written several times per token. Every factor e^{G_t - G_j} has t >= j, so it is at most 1
// (no overflow however strong the forgetting). The clamp of the state (+-1e6) is applied at the
// chunk's end.

#include "gpu/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace spillway::gpu::cpu {

namespace {

constexpr int kChunk = 64;

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

struct Shape {
    int dk, dv, kh, vh, ratio, keyDim, valueDim, convDim, taps;
    size_t tokenFloats;  // one prepared token: [conv (q | k | v) | z | beta | alpha]

    explicit Shape(const DeltaNetArgs& a)
        : dk(a.stateDim), dv(a.headVDim), kh(a.kHeads), vh(a.vHeads), ratio(a.vHeads / a.kHeads),
          keyDim(a.kHeads * a.stateDim), valueDim(a.vHeads * a.headVDim), convDim(2 * keyDim + valueDim),
          taps(a.kernel), tokenFloats(size_t(convDim) + size_t(valueDim) + 2 * size_t(a.vHeads))
    {
    }
    int keyHead(const DeltaNetArgs& a, int h) const { return a.tiled ? h % kh : h / ratio; }
};

// Token i's projections gathered into `t` (the unfused layout), through the causal convolution
// (which moves the convolution state on by one) and SiLU, q and k L2-normed per head.
void prepareToken(const DeltaNetArgs& a, const Shape& s, int i, float* t)
{
    float* conv = t;
    float* z = conv + s.convDim;
    float* beta = z + s.valueDim;
    float* alpha = beta + s.vh;
    const size_t at = size_t(i) * a.stride;
    const float* qkv = a.qkv + at;
    const int dk = s.dk, dv = s.dv, ratio = s.ratio;
    if (a.fused) {
        const int group = 2 * dk + 2 * ratio * dv;
        for (int g = 0; g < s.kh; ++g) {
            const float* src = qkv + size_t(g) * size_t(group);
            std::memcpy(conv + size_t(g) * dk, src, size_t(dk) * sizeof(float));
            std::memcpy(conv + s.keyDim + size_t(g) * dk, src + dk, size_t(dk) * sizeof(float));
            std::memcpy(conv + 2 * s.keyDim + size_t(g) * ratio * dv, src + 2 * dk, size_t(ratio * dv) * sizeof(float));
            std::memcpy(z + size_t(g) * ratio * dv, src + 2 * dk + ratio * dv, size_t(ratio * dv) * sizeof(float));
            const float* ba = a.beta + at + size_t(g) * 2 * ratio;
            std::memcpy(beta + size_t(g) * ratio, ba, size_t(ratio) * sizeof(float));
            std::memcpy(alpha + size_t(g) * ratio, ba + ratio, size_t(ratio) * sizeof(float));
        }
    } else {
        std::memcpy(conv, qkv, size_t(s.convDim) * sizeof(float));
        std::memcpy(z, a.z + at, size_t(s.valueDim) * sizeof(float));
        std::memcpy(beta, a.beta + at, size_t(s.vh) * sizeof(float));
        std::memcpy(alpha, a.alpha + at, size_t(s.vh) * sizeof(float));
    }

    // The causal convolution per channel over [state (taps - 1 inputs) | this input], SiLU; the
    // state then holds the last taps - 1 inputs.
    const int taps = s.taps, convDim = s.convDim;
    for (int c = 0; c < convDim; ++c) {
        const float* w = a.convWeight + size_t(c) * size_t(taps);
        float sum = 0.0f;
        for (int k = 0; k < taps - 1; ++k) sum += w[k] * a.convState[size_t(k) * convDim + c];
        const float x = conv[c];
        sum += w[taps - 1] * x;
        for (int k = 0; k + 1 < taps - 1; ++k) a.convState[size_t(k) * convDim + c] = a.convState[size_t(k + 1) * convDim + c];
        if (taps > 1) a.convState[size_t(taps - 2) * convDim + c] = x;
        conv[c] = silu(sum);
    }
    const float qScale = 1.0f / std::sqrt(float(dk));
    for (int h = 0; h < s.kh; ++h) {
        l2Normalize(conv + size_t(h) * dk, dk, a.eps, qScale);
        l2Normalize(conv + s.keyDim + size_t(h) * dk, dk, a.eps, 1.0f);
    }
}

float logDecay(const DeltaNetArgs& a, const float* alpha, int h)
{
    return std::min(softplus(alpha[h] + a.dtBias[h]) * a.a[h], 50.0f);
}

// The output's RMSNorm over the head, its weight, times silu(z).
void gateOutput(const DeltaNetArgs& a, const Shape& s, const float* zh, float* o)
{
    double squares = 0.0;
    for (int r = 0; r < s.dv; ++r) squares += double(o[r] * o[r]);
    const float scale = 1.0f / std::sqrt(float(squares / s.dv) + a.eps);
    for (int r = 0; r < s.dv; ++r) o[r] = (o[r] * scale) * a.normWeight[r] * silu(zh[r]);
}

// One token, value head h: the recurrent step.
void recurrentHead(const DeltaNetArgs& a, const Shape& s, const Kernels& k, const float* t, int h)
{
    const int dk = s.dk, dv = s.dv;
    const float* conv = t;
    const float* z = conv + s.convDim;
    const float* beta = z + s.valueDim;
    const float* alpha = beta + s.vh;
    const int key = s.keyHead(a, h);
    const float* qh = conv + size_t(key) * dk;
    const float* kv = conv + s.keyDim + size_t(key) * dk;
    const float* vv = conv + 2 * s.keyDim + size_t(h) * dv;
    const float decay = std::exp(logDecay(a, alpha, h));
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
    gateOutput(a, s, z + size_t(h) * dv, o);
}

// The per-thread scratch of the chunked form.
size_t chunkScratchFloats(const Shape& s) { return 3 * size_t(kChunk) * s.dv + 2 * size_t(kChunk) * kChunk + 2 * kChunk; }

// All a.n prepared tokens (`tokens`, s.tokenFloats apart), value head h: the chunked form.
void chunkedHead(const DeltaNetArgs& a, const Shape& s, const Kernels& k, const float* tokens, int h, float* scratch)
{
    const int dk = s.dk, dv = s.dv, key = s.keyHead(a, h);
    float* W = scratch;                       // (C, dv): S_0 k_t
    float* P = W + size_t(kChunk) * dv;       // (C, dv): S_0 q_t, then o_t
    float* U = P + size_t(kChunk) * dv;       // (C, dv): u_t
    float* KK = U + size_t(kChunk) * dv;      // (C, C): k_t . k_j, j < t
    float* QK = KK + size_t(kChunk) * kChunk; // (C, C): q_t . k_j, j <= t
    float* G = QK + size_t(kChunk) * kChunk;  // (C): cumulative log decay
    float* B = G + kChunk;                    // (C): sigmoid(beta)
    float* S = a.state + size_t(h) * size_t(dv) * size_t(dk);
    auto tokenAt = [&](int i) { return tokens + size_t(i) * s.tokenFloats; };
    auto qOf = [&](int i) { return tokenAt(i) + size_t(key) * dk; };
    auto kOf = [&](int i) { return tokenAt(i) + s.keyDim + size_t(key) * dk; };

    for (int t0 = 0; t0 < a.n; t0 += kChunk) {
        const int C = std::min(kChunk, a.n - t0);
        double g = 0.0;
        for (int t = 0; t < C; ++t) {
            const float* beta = tokenAt(t0 + t) + s.convDim + s.valueDim;
            g += double(logDecay(a, beta + s.vh, h));
            G[t] = float(g);
            B[t] = sigmoid(beta[h]);
        }
        // S_0 k_t and S_0 q_t, row by row of the state (each row read once for the chunk).
        for (int r = 0; r < dv; ++r) {
            const float* row = S + size_t(r) * dk;
            for (int t = 0; t < C; ++t) {
                W[size_t(t) * dv + r] = k.dot(row, kOf(t0 + t), dk);
                P[size_t(t) * dv + r] = k.dot(row, qOf(t0 + t), dk);
            }
        }
        for (int t = 0; t < C; ++t)
            for (int j = 0; j <= t; ++j) {
                if (j < t) KK[size_t(t) * kChunk + j] = k.dot(kOf(t0 + t), kOf(t0 + j), dk);
                QK[size_t(t) * kChunk + j] = k.dot(qOf(t0 + t), kOf(t0 + j), dk);
            }
        // u_t, forward: b_t (v_t - e^{G_t} S_0 k_t) minus the earlier u's share.
        for (int t = 0; t < C; ++t) {
            const float* v = tokenAt(t0 + t) + 2 * s.keyDim + size_t(h) * dv;
            float* u = U + size_t(t) * dv;
            const float e = std::exp(G[t]);
            const float* w = W + size_t(t) * dv;
            for (int r = 0; r < dv; ++r) u[r] = B[t] * (v[r] - e * w[r]);
            for (int j = 0; j < t; ++j)
                k.axpy(-B[t] * std::exp(G[t] - G[j]) * KK[size_t(t) * kChunk + j], U + size_t(j) * dv, u, dv);
        }
        // o_t = e^{G_t} S_0 q_t + sum_{j<=t} e^{G_t - G_j} (q_t . k_j) u_j, gated into the output.
        for (int t = 0; t < C; ++t) {
            float* o = P + size_t(t) * dv;
            const float e = std::exp(G[t]);
            for (int r = 0; r < dv; ++r) o[r] *= e;
            for (int j = 0; j <= t; ++j) k.axpy(std::exp(G[t] - G[j]) * QK[size_t(t) * kChunk + j], U + size_t(j) * dv, o, dv);
            const float* z = tokenAt(t0 + t) + s.convDim + size_t(h) * dv;
            float* out = a.out + size_t(t0 + t) * a.stride + size_t(h) * dv;
            std::memcpy(out, o, size_t(dv) * sizeof(float));
            gateOutput(a, s, z, out);
        }
        // S = e^{G_last} S_0 + sum_j e^{G_last - G_j} u_j k_j^T, clamped.
        const float last = G[C - 1], eLast = std::exp(last);
        for (int j = 0; j < C; ++j) G[j] = std::exp(last - G[j]);
        for (int r = 0; r < dv; ++r) {
            float* row = S + size_t(r) * dk;
            for (int c = 0; c < dk; ++c) row[c] *= eLast;
            for (int j = 0; j < C; ++j) k.axpy(G[j] * U[size_t(j) * dv + r], kOf(t0 + j), row, dk);
            for (int c = 0; c < dk; ++c) row[c] = std::clamp(row[c], -1e6f, 1e6f);
        }
    }
}

}  // namespace

void deltaNetOp(const DeltaNetArgs& a, ThreadPool& pool, const Kernels& k, std::vector<float>& scratch)
{
    const Shape s(a);
    const int n = std::max(1, a.n);
    const size_t perThread = n > 1 ? chunkScratchFloats(s) : 0;
    scratch.resize(size_t(n) * s.tokenFloats + size_t(pool.size()) * perThread);
    for (int i = 0; i < n; ++i) prepareToken(a, s, i, scratch.data() + size_t(i) * s.tokenFloats);
    const float* tokens = scratch.data();
    float* chunkScratch = scratch.data() + size_t(n) * s.tokenFloats;

    auto work = [&](int thread, int threads) {
        for (int h = thread; h < s.vh; h += threads) {
            if (n == 1)
                recurrentHead(a, s, k, tokens, h);
            else
                chunkedHead(a, s, k, tokens, h, chunkScratch + size_t(thread) * perThread);
        }
    };
    if (size_t(n) * size_t(s.vh) * size_t(s.dv) * size_t(s.dk) < 32768)
        work(0, 1);
    else
        pool.run(work);
}

}  // namespace spillway::gpu::cpu
