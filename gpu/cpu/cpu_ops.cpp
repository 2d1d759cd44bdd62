#include "gpu/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/cpu/kernels_common.h"
#include "gpu/sparse_format.h"

namespace spillway::gpu::cpu {

void rmsnormOp(const float* x, const float* weight, float* out, int n, float eps)
{
    if (n <= 0) return;
    // As ggml_compute_forward_rms_norm_f32: float squares summed in double, then float scale.
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void ropeOp(float* x, int nHeads, int headDim, int pos, const RopeParams& p, float* cosSin)
{
    const int dims = std::min(p.rotaryDims, headDim) & ~1;
    if (dims <= 0) return;
    // As ggml's rope cache: theta starts at the position and is multiplied by
    // base^(-2 / dims) once per pair, in float; linear scaling multiplies each angle.
    const float thetaScale = std::pow(p.base, -2.0f / static_cast<float>(dims));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < dims; i += 2) {
        const float angle = p.freqScale * theta;
        cosSin[i] = std::cos(angle);
        cosSin[i + 1] = std::sin(angle);
        theta *= thetaScale;
    }
    const int half = dims / 2;
    for (int h = 0; h < nHeads; ++h) {
        float* v = x + static_cast<size_t>(h) * headDim;
        for (int i = 0; i < dims; i += 2) {
            const float c = cosSin[i];
            const float s = cosSin[i + 1];
            // Pair (2k, 2k+1) for GGUF Llama; pair (k, k + dims/2) for NeoX-style models.
            float* a = p.neox ? v + i / 2 : v + i;
            float* b = p.neox ? v + i / 2 + half : v + i + 1;
            const float x0 = *a;
            const float x1 = *b;
            *a = x0 * c - x1 * s;
            *b = x0 * s + x1 * c;
        }
    }
}

namespace {

void attentionHead(const AttentionArgs& a, int h, const Kernels& k)
{
    const int group = a.nHeads / a.nKvHeads;
    const int kvHead = h / group;
    const size_t kvStride = static_cast<size_t>(a.nKvHeads) * a.headDim;  // floats per position
    const float* q = a.q + static_cast<size_t>(h) * a.headDim;
    float* scores = a.scores + static_cast<size_t>(h) * a.nPos;
    float* out = a.out + static_cast<size_t>(h) * a.headDim;

    float maxScore = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < a.nPos; ++t) {
        const float* kt = a.kCache + t * kvStride + static_cast<size_t>(kvHead) * a.headDim;
        scores[t] = k.dot(q, kt, a.headDim) * a.scale;
        maxScore = std::max(maxScore, scores[t]);
    }
    // Softmax as ggml's: exponentials in float, their sum in double, then one float scale.
    double sum = 0.0;
    for (int t = 0; t < a.nPos; ++t) {
        scores[t] = std::exp(scores[t] - maxScore);
        sum += scores[t];
    }
    const float inverse = static_cast<float>(1.0 / sum);
    std::fill(out, out + a.headDim, 0.0f);
    for (int t = 0; t < a.nPos; ++t) {
        const float* vt = a.vCache + t * kvStride + static_cast<size_t>(kvHead) * a.headDim;
        k.axpy(scores[t] * inverse, vt, out, a.headDim);
    }
}

}  // namespace

void attentionOp(const AttentionArgs& a, ThreadPool& pool, const Kernels& k)
{
    if (a.nHeads <= 0 || a.nKvHeads <= 0 || a.nHeads % a.nKvHeads != 0 || a.nPos <= 0) return;
    auto work = [&a, &k](int thread, int threads) {
        // Contiguous runs of heads: heads of one KV group share their K/V rows in cache.
        const int begin = static_cast<int>(static_cast<int64_t>(a.nHeads) * thread / threads);
        const int end = static_cast<int>(static_cast<int64_t>(a.nHeads) * (thread + 1) / threads);
        for (int h = begin; h < end; ++h) attentionHead(a, h, k);
    };
    if (a.nHeads == 1 || static_cast<int64_t>(a.nPos) * a.headDim * a.nHeads < 4096)
        work(0, 1);
    else
        pool.run(work);
}

void swigluOp(const float* gate, const float* up, float* out, int n, ThreadPool& pool)
{
    auto work = [=](int thread, int threads) {
        const int begin = static_cast<int>(static_cast<int64_t>(n) * thread / threads);
        const int end = static_cast<int>(static_cast<int64_t>(n) * (thread + 1) / threads);
        for (int i = begin; i < end; ++i) {
            const float g = gate[i];
            out[i] = g / (1.0f + std::exp(-g)) * up[i];  // silu as ggml_silu_f32
        }
    };
    if (n < 4096)
        work(0, 1);
    else
        pool.run(work);
}

void addOp(float* y, const float* x, int n)
{
    for (int i = 0; i < n; ++i) y[i] += x[i];
}

void getRowOp(const MatrixView& w, int64_t row, float* out)
{
    if (w.type == DType::BitmapSparse) {
        decodeBitmapSparseRow(viewBitmapBlob(w.data), row, out);
        return;
    }
    const uint8_t* p = rowPointer(w, row);
    const float* table = fp16Table();
    switch (w.type) {
    case DType::F32:
        std::memcpy(out, p, static_cast<size_t>(w.cols) * 4);
        return;
    case DType::F16:
        for (int64_t c = 0; c < w.cols; ++c) out[c] = table[loadU16(p + 2 * c)];
        return;
    case DType::BF16:
        for (int64_t c = 0; c < w.cols; ++c) out[c] = bf16ToFp32(loadU16(p + 2 * c));
        return;
    case DType::Q8_0:
        for (int64_t b = 0; b < w.cols / 32; ++b) {
            const uint8_t* block = p + b * 34;
            const float d = table[loadU16(block)];
            const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
            for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(q[i]);
        }
        return;
    case DType::Q4_0:
        for (int64_t b = 0; b < w.cols / 32; ++b) {
            const uint8_t* block = p + b * 18;
            const float d = table[loadU16(block)];
            for (int i = 0; i < 16; ++i) {
                out[b * 32 + i] = d * static_cast<float>((block[2 + i] & 0x0f) - 8);
                out[b * 32 + i + 16] = d * static_cast<float>((block[2 + i] >> 4) - 8);
            }
        }
        return;
    case DType::BitmapSparse: return;  // handled above
    }
}

}  // namespace spillway::gpu::cpu
