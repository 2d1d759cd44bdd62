// Device::deltaNet on CUDA (gpu/device.h, DeltaNetArgs): a.n tokens through a Gated DeltaNet
// mixer, each by the delta rule's recurrent step, as the CPU device's decode path
// (gpu/cpu/delta_net.cpp, recurrentHead); a prompt's tokens run in order inside each kernel.
//   1. convolution: one thread per channel of [q | k | v] runs the causal convolution over the
//      tokens in order (its taps and its state in registers), SiLU, into `prepared` (n, convDim);
//   2. normalize: one warp per (token, key head, q or k): L2 norm in double, q times
//      1 / sqrt(stateDim);
//   3. recurrence: one warp per state row (value head h, row r). Every row of the delta rule
//      moves on its own (u_r = b (v_r - S_r . k) needs only row r), so a row's stateDim values
//      stay in its lanes' registers for all n tokens: decay, the row's dot with k, the rank-one
//      update, the clamp, the dot with q, which is o_h[r];
//   4. gate: one warp per (token, value head): RMSNorm over the head, its weight, times silu(z).
// Float rounding follows the CPU's operations; only the order of the dot products' additions
// differs.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowRegs = kMaxDeltaNetStateDim / kWarp;

struct Shape {
    int dk, dv, kh, vh, ratio, keyDim, valueDim, convDim, taps, group;
};

Shape shapeOf(const DeltaNetArgs& a)
{
    Shape s;
    s.dk = a.stateDim;
    s.dv = a.headVDim;
    s.kh = a.kHeads;
    s.vh = a.vHeads;
    s.ratio = a.vHeads / a.kHeads;
    s.keyDim = a.kHeads * a.stateDim;
    s.valueDim = a.vHeads * a.headVDim;
    s.convDim = 2 * s.keyDim + s.valueDim;
    s.taps = a.kernel;
    s.group = 2 * s.dk + 2 * s.ratio * s.dv;  // the fused layout's floats per key head
    return s;
}

__device__ __forceinline__ float silu(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Where channel c of the convolution's input [q | k | v] sits in a token's qkv.
__device__ __forceinline__ size_t convSource(const DeltaNetArgs& a, const Shape& s, int c)
{
    if (!a.fused) return size_t(c);
    if (c < s.keyDim) return size_t(c / s.dk) * s.group + c % s.dk;
    if (c < 2 * s.keyDim) {
        c -= s.keyDim;
        return size_t(c / s.dk) * s.group + s.dk + c % s.dk;
    }
    c -= 2 * s.keyDim;
    const int rv = s.ratio * s.dv;
    return size_t(c / rv) * s.group + 2 * s.dk + c % rv;
}

// Token i's z at value channel j, and its beta and alpha of value head h.
__device__ __forceinline__ float zOf(const DeltaNetArgs& a, const Shape& s, int i, int j)
{
    const size_t at = size_t(i) * a.stride;
    if (!a.fused) return a.z[at + j];
    const int rv = s.ratio * s.dv;
    return a.qkv[at + size_t(j / rv) * s.group + 2 * s.dk + rv + j % rv];
}
__device__ __forceinline__ float betaOf(const DeltaNetArgs& a, const Shape& s, int i, int h)
{
    const size_t at = size_t(i) * a.stride;
    return a.fused ? a.beta[at + size_t(h / s.ratio) * 2 * s.ratio + h % s.ratio] : a.beta[at + h];
}
__device__ __forceinline__ float alphaOf(const DeltaNetArgs& a, const Shape& s, int i, int h)
{
    const size_t at = size_t(i) * a.stride;
    return a.fused ? a.beta[at + size_t(h / s.ratio) * 2 * s.ratio + s.ratio + h % s.ratio] : a.alpha[at + h];
}

__global__ void __launch_bounds__(kThreads) convolutionKernel(DeltaNetArgs a, Shape s, float* prepared)
{
    const int c = blockIdx.x * kThreads + threadIdx.x;
    if (c >= s.convDim) return;
    float w[kMaxDeltaNetTaps], state[kMaxDeltaNetTaps];
#pragma unroll
    for (int k = 0; k < kMaxDeltaNetTaps; ++k) {
        w[k] = k < s.taps ? a.convWeight[size_t(c) * s.taps + k] : 0.0f;
        state[k] = k + 1 < s.taps ? a.convState[size_t(k) * s.convDim + c] : 0.0f;
    }
    const size_t source = convSource(a, s, c);
    for (int i = 0; i < a.n; ++i) {
        const float x = a.qkv[size_t(i) * a.stride + source];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxDeltaNetTaps; ++k)
            if (k + 1 < s.taps) sum = __fadd_rn(sum, __fmul_rn(w[k], state[k]));
        sum = __fadd_rn(sum, __fmul_rn(w[s.taps - 1], x));
        // The state moves on by one: the oldest input out, this one in.
#pragma unroll
        for (int k = 0; k + 1 < kMaxDeltaNetTaps; ++k)
            if (k + 2 < s.taps) state[k] = state[k + 1];
#pragma unroll
        for (int k = 0; k < kMaxDeltaNetTaps; ++k)
            if (k + 2 == s.taps) state[k] = x;
        prepared[size_t(i) * s.convDim + c] = silu(sum);
    }
#pragma unroll
    for (int k = 0; k < kMaxDeltaNetTaps; ++k)
        if (k + 1 < s.taps) a.convState[size_t(k) * s.convDim + c] = state[k];
}

__global__ void __launch_bounds__(kThreads) normalizeKernel(DeltaNetArgs a, Shape s, float* prepared)
{
    const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (warp >= int64_t(a.n) * 2 * s.kh) return;
    const int i = int(warp / (2 * s.kh));
    const int rest = int(warp % (2 * s.kh));
    const bool isK = rest >= s.kh;
    float* v = prepared + size_t(i) * s.convDim + (isK ? s.keyDim : 0) + size_t(rest % s.kh) * s.dk;
    double sum = 0.0;
    for (int d = lane; d < s.dk; d += kWarp) sum += double(v[d]) * double(v[d]);
    sum = warpSum(sum);
    const float extra = isK ? 1.0f : __fdiv_rn(1.0f, sqrtf(float(s.dk)));
    const float scale = __fdiv_rn(extra, fmaxf(float(sqrt(sum)), a.eps));
    for (int d = lane; d < s.dk; d += kWarp) v[d] = __fmul_rn(v[d], scale);
}

__global__ void __launch_bounds__(kThreads) recurrenceKernel(DeltaNetArgs a, Shape s, const float* prepared)
{
    const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (warp >= int64_t(s.vh) * s.dv) return;
    const int h = int(warp / s.dv), r = int(warp % s.dv);
    const int key = a.tiled ? h % s.kh : h / s.ratio;
    float* S = a.state + (size_t(h) * s.dv + r) * s.dk;
    float row[kRowRegs];
#pragma unroll
    for (int j = 0; j < kRowRegs; ++j) {
        const int c = lane + j * kWarp;
        row[j] = c < s.dk ? S[c] : 0.0f;
    }
    const float dtBias = a.dtBias[h], aLog = a.a[h];
    for (int i = 0; i < a.n; ++i) {
        const float* token = prepared + size_t(i) * s.convDim;
        const float* q = token + size_t(key) * s.dk;
        const float* k = token + s.keyDim + size_t(key) * s.dk;
        const float v = token[2 * s.keyDim + size_t(h) * s.dv + r];
        const float decay = expf(fminf(__fmul_rn(softplus(__fadd_rn(alphaOf(a, s, i, h), dtBias)), aLog), 50.0f));
        const float b = sigmoid(betaOf(a, s, i, h));
        float kj[kRowRegs];
        float dot = 0.0f;
#pragma unroll
        for (int j = 0; j < kRowRegs; ++j) {
            const int c = lane + j * kWarp;
            kj[j] = c < s.dk ? k[c] : 0.0f;
            row[j] = __fmul_rn(row[j], decay);
            dot += row[j] * kj[j];
        }
        dot = warpSum(dot);
        const float u = __fmul_rn(b, __fsub_rn(v, dot));
        float o = 0.0f;
#pragma unroll
        for (int j = 0; j < kRowRegs; ++j) {
            const int c = lane + j * kWarp;
            row[j] = fminf(fmaxf(__fadd_rn(row[j], __fmul_rn(u, kj[j])), -1e6f), 1e6f);
            if (c < s.dk) o += row[j] * q[c];
        }
        o = warpSum(o);
        if (lane == 0) a.out[size_t(i) * a.stride + size_t(h) * s.dv + r] = o;
    }
#pragma unroll
    for (int j = 0; j < kRowRegs; ++j) {
        const int c = lane + j * kWarp;
        if (c < s.dk) S[c] = row[j];
    }
}

__global__ void __launch_bounds__(kThreads) gateKernel(DeltaNetArgs a, Shape s)
{
    const int64_t warp = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (warp >= int64_t(a.n) * s.vh) return;
    const int i = int(warp / s.vh), h = int(warp % s.vh);
    float* o = a.out + size_t(i) * a.stride + size_t(h) * s.dv;
    double squares = 0.0;
    for (int r = lane; r < s.dv; r += kWarp) squares += double(__fmul_rn(o[r], o[r]));
    squares = warpSum(squares);
    const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn(float(squares / s.dv), a.eps)));
    for (int r = lane; r < s.dv; r += kWarp)
        o[r] = __fmul_rn(__fmul_rn(__fmul_rn(o[r], scale), a.normWeight[r]), silu(zOf(a, s, i, h * s.dv + r)));
}

}  // namespace

size_t deltaNetScratchBytes(const DeltaNetArgs& a)
{
    return size_t(a.n) * size_t(shapeOf(a).convDim) * sizeof(float);
}

cudaError_t launchDeltaNet(const DeltaNetArgs& a, float* prepared, cudaStream_t stream)
{
    if (a.n <= 0) return cudaSuccess;
    const Shape s = shapeOf(a);
    const int64_t threads = int64_t(kWarp);
    convolutionKernel<<<gridFor(s.convDim, kThreads), kThreads, 0, stream>>>(a, s, prepared);
    normalizeKernel<<<gridFor(int64_t(a.n) * 2 * s.kh * threads, kThreads), kThreads, 0, stream>>>(a, s, prepared);
    recurrenceKernel<<<gridFor(int64_t(s.vh) * s.dv * threads, kThreads), kThreads, 0, stream>>>(a, s, prepared);
    gateKernel<<<gridFor(int64_t(a.n) * s.vh * threads, kThreads), kThreads, 0, stream>>>(a, s);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
