#include "gpu/cpu/cpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kquant_blocks.h"
#include "gpu/half_inline.h"
#include "gpu/host.h"
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
        float angle = p.freqScale * theta;
        if (p.freqFactors) angle /= p.freqFactors[i / 2];
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

// Dequantized cache values are formed in chunks of this many floats on the stack, then go
// through the kernel set's dot / axpy (any head dimension works; common ones fit one chunk).
constexpr int kKvChunk = 256;

// values[0, n) of one cached vector as floats (Q8: q, without the scale).
void loadKvChunk(KvType type, const void* base, size_t first, int n, float* out)
{
    if (type == KvType::F16) {
        const uint16_t* h = static_cast<const uint16_t*>(base) + first;
        for (int i = 0; i < n; ++i) out[i] = detail::halfToFloat(h[i]);
    } else {
        const int8_t* q = static_cast<const int8_t*>(base) + first;
        for (int i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]);
    }
}

// q . k_t for an F16 or Q8 cache row (Q8: times the row's scale).
float dotKv(const AttentionArgs& a, const float* q, size_t first, size_t scaleIndex, const Kernels& k)
{
    float chunk[kKvChunk];
    float sum = 0.0f;
    for (int c = 0; c < a.headDim; c += kKvChunk) {
        const int n = std::min(kKvChunk, a.headDim - c);
        loadKvChunk(a.kvType, a.kCache, first + c, n, chunk);
        sum += k.dot(q + c, chunk, n);
    }
    return a.kvType == KvType::Q8 ? sum * a.kScales[scaleIndex] : sum;
}

// out += p * v_t for an F16 or Q8 cache row.
void axpyKv(const AttentionArgs& a, float p, size_t first, size_t scaleIndex, float* out,
            const Kernels& k)
{
    float chunk[kKvChunk];
    const float weight = a.kvType == KvType::Q8 ? p * a.vScales[scaleIndex] : p;
    for (int c = 0; c < a.headDim; c += kKvChunk) {
        const int n = std::min(kKvChunk, a.headDim - c);
        loadKvChunk(a.kvType, a.vCache, first + c, n, chunk);
        k.axpy(weight, chunk, out + c, n);
    }
}

// The cache row of position t (AttentionArgs::ring).
int kvRow(const AttentionArgs& a, int t) { return a.ring > 0 ? t % a.ring : t; }

void attentionHead(const AttentionArgs& a, int h, const Kernels& k)
{
    const int group = a.nHeads / a.nKvHeads;
    const int kvHead = h / group;
    const size_t kvStride = static_cast<size_t>(a.nKvHeads) * a.headDim;  // values per position
    const float* q = a.q + static_cast<size_t>(h) * a.headDim;
    float* scores = a.scores + static_cast<size_t>(h) * a.nPos;
    float* out = a.out + static_cast<size_t>(h) * a.headDim;
    const bool f32 = a.kvType == KvType::F32;
    const float* kf = static_cast<const float*>(a.kCache);
    const float* vf = static_cast<const float*>(a.vCache);
    // Cached vector t of this head: values from row(t) * kvStride + kvHead * headDim, scale
    // index row(t) * nKvHeads + kvHead (row(t): t, or t % ring).
    auto first = [&](int t) { return size_t(kvRow(a, t)) * kvStride + static_cast<size_t>(kvHead) * a.headDim; };
    auto scaleIndex = [&](int t) { return static_cast<size_t>(kvRow(a, t)) * a.nKvHeads + kvHead; };

    // A sliding window sees the last `window` positions only.
    const int start = a.window > 0 ? std::max(0, a.nPos - a.window) : 0;
    float maxScore = -std::numeric_limits<float>::infinity();
    for (int t = start; t < a.nPos; ++t) {
        const float dot = f32 ? k.dot(q, kf + first(t), a.headDim) : dotKv(a, q, first(t), scaleIndex(t), k);
        scores[t] = dot * a.scale;
        maxScore = std::max(maxScore, scores[t]);
    }
    // Softmax as ggml's: exponentials in float, their sum in double, then one float scale; a
    // sink joins the maximum and the sum.
    const float sink = a.sinks ? a.sinks[h] : -std::numeric_limits<float>::infinity();
    if (a.sinks) maxScore = std::max(maxScore, sink);
    double sum = k.expSum(scores + start, a.nPos - start, maxScore);
    if (a.sinks) sum += static_cast<double>(std::exp(sink - maxScore));
    const float inverse = static_cast<float>(1.0 / sum);
    std::fill(out, out + a.headDim, 0.0f);
    for (int t = start; t < a.nPos; ++t) {
        if (f32)
            k.axpy(scores[t] * inverse, vf + first(t), out, a.headDim);
        else
            axpyKv(a, scores[t] * inverse, first(t), scaleIndex(t), out, k);
    }
}

// One vector of headDim floats into a cache of `type` at dst (Q8: its scale to *scale).
void storeKvVector(KvType type, const float* x, int headDim, void* dst, float* scale)
{
    switch (type) {
    case KvType::F32:
        std::memcpy(dst, x, static_cast<size_t>(headDim) * sizeof(float));
        return;
    case KvType::F16: {
        uint16_t* h = static_cast<uint16_t*>(dst);
        for (int i = 0; i < headDim; ++i) h[i] = fp32ToFp16(x[i]);
        return;
    }
    case KvType::Q8: {
        float maxAbs = 0.0f;
        for (int i = 0; i < headDim; ++i) maxAbs = std::max(maxAbs, std::fabs(x[i]));
        const float d = maxAbs / 127.0f;
        int8_t* q = static_cast<int8_t*>(dst);
        for (int i = 0; i < headDim; ++i) {
            // std::round rounds half away from zero; the clamp guards x / d = 127 + ulp, and a
            // NaN (from a non-finite vector) becomes 0 rather than an undefined conversion.
            const float r = d != 0.0f ? std::round(x[i] / d) : 0.0f;
            q[i] = r == r ? static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f)) : 0;
        }
        *scale = d;
        return;
    }
    }
}

}  // namespace

void storeKvOp(const AttentionArgs& a)
{
    const int pos = kvRow(a, a.nPos - 1);
    const size_t elementBytes = kvElementBytes(a.kvType);
    for (int h = 0; h < a.nKvHeads; ++h) {
        const size_t vector = static_cast<size_t>(pos) * a.nKvHeads + h;
        const size_t offset = vector * static_cast<size_t>(a.headDim) * elementBytes;
        const float* k = a.kNew + static_cast<size_t>(h) * a.headDim;
        const float* v = a.vNew + static_cast<size_t>(h) * a.headDim;
        const bool q8 = a.kvType == KvType::Q8;
        // The caches are writable when kNew / vNew are set (AttentionArgs).
        storeKvVector(a.kvType, k, a.headDim, static_cast<uint8_t*>(const_cast<void*>(a.kCache)) + offset,
                      q8 ? const_cast<float*>(a.kScales) + vector : nullptr);
        storeKvVector(a.kvType, v, a.headDim, static_cast<uint8_t*>(const_cast<void*>(a.vCache)) + offset,
                      q8 ? const_cast<float*>(a.vScales) + vector : nullptr);
    }
}

void attentionOp(const AttentionArgs& a, ThreadPool& pool, const Kernels& k)
{
    if (a.nHeads <= 0 || a.nKvHeads <= 0 || a.nHeads % a.nKvHeads != 0 || a.nPos <= 0) return;
    if (a.kNew && a.vNew) storeKvOp(a);  // a few hundred values: not worth the pool
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

namespace {

// Cached positions [from, nPos) of one KV head as floats (Q8: times each row's scale), headDim
// apart from out (a ring's rows in position order).
void unpackKvHead(const AttentionArgs& a, const void* cache, const float* scales, int from, int nPos, int kvHead,
                  float* out)
{
    const size_t kvStride = static_cast<size_t>(a.nKvHeads) * a.headDim;
    for (int t = from; t < nPos; ++t) {
        float* row = out + static_cast<size_t>(t - from) * a.headDim;
        const size_t r = size_t(kvRow(a, t));
        const size_t first = r * kvStride + static_cast<size_t>(kvHead) * a.headDim;
        if (a.kvType == KvType::F32) {
            std::memcpy(row, static_cast<const float*>(cache) + first, size_t(a.headDim) * sizeof(float));
            continue;
        }
        loadKvChunk(a.kvType, cache, first, a.headDim, row);
        if (a.kvType == KvType::Q8) {
            const float d = scales[r * a.nKvHeads + kvHead];
            for (int c = 0; c < a.headDim; ++c) row[c] *= d;
        }
    }
}

}  // namespace

// A prompt batch's attention as matrix products (Device::attentionBatch on the CPU).
void attentionBatchOp(const AttentionArgs& a, int queries, size_t rowStride, ThreadPool& pool, Scratch* perThread,
                      const Kernels& kernels)
{
    const size_t kvDim = static_cast<size_t>(a.nKvHeads) * a.headDim;
    if (a.kNew && a.vNew)
        for (int i = 0; i < queries; ++i) {
            AttentionArgs one = a;
            one.nPos = a.nPos - queries + 1 + i;
            one.kNew = a.kNew + i * kvDim;
            one.vNew = a.vNew + i * kvDim;
            storeKvOp(one);
        }
    const int firstPos = a.nPos - queries;  // query 0's position
    const int nPos = a.nPos, headDim = a.headDim, group = a.nHeads / a.nKvHeads;
    // An F32 cache is read in place, but for a ring; the others' rows (and a ring's) are unpacked
    // in position order, from the first query's window on (base) for a sliding window.
    const bool f32 = a.kvType == KvType::F32 && a.ring == 0;
    const int base = !f32 && a.window > 0 ? std::max(0, firstPos + 1 - a.window) : 0;
    std::atomic<int> next{0};
    auto work = [&](int thread, int) {
        const size_t scoreFloats = static_cast<size_t>(queries) * nPos;
        const size_t headFloats = f32 ? 0 : static_cast<size_t>(nPos - base) * headDim;
        float* scores = perThread[thread].reserve<float>(scoreFloats + 2 * headFloats);
        float* keys = scores + scoreFloats;
        float* values = keys + headFloats;
        for (int h; (h = next.fetch_add(1, std::memory_order_relaxed)) < a.nHeads;) {
            const int kvHead = h / group;
            const float* k = keys;
            const float* v = values;
            size_t ld = static_cast<size_t>(headDim);
            if (f32) {
                k = static_cast<const float*>(a.kCache) + static_cast<size_t>(kvHead) * headDim;
                v = static_cast<const float*>(a.vCache) + static_cast<size_t>(kvHead) * headDim;
                ld = kvDim;
            } else {
                unpackKvHead(a, a.kCache, a.kScales, base, nPos, kvHead, keys);
                unpackKvHead(a, a.vCache, a.vScales, base, nPos, kvHead, values);
            }
            // Per chunk of queries, against the positions the chunk's last query sees (no
            // products past the causal mask but for a chunk's own triangle): S = scale * Q K^T,
            // each row's softmax over the positions it may see (as attentionOp: exponentials in
            // float, their sum in double), the rest 0, then O = P V straight into the queries'
            // output rows.
            for (int i0 = 0; i0 < queries; i0 += kBatchQueryChunk) {
                const int rowsOf = std::min(kBatchQueryChunk, queries - i0);
                const int end = firstPos + i0 + rowsOf;  // <= nPos
                // A sliding window: nothing before the chunk's first query's window.
                const int lo = a.window > 0 ? std::max(0, firstPos + i0 + 1 - a.window) : 0;
                const int width = end - lo;
                const float* q = a.q + static_cast<size_t>(i0) * rowStride + static_cast<size_t>(h) * headDim;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rowsOf, width, headDim, a.scale, q,
                            static_cast<blasint>(rowStride), k + static_cast<size_t>(lo - base) * ld, static_cast<blasint>(ld),
                            0.0f, scores, width);
                for (int i = 0; i < rowsOf; ++i) {
                    float* row = scores + static_cast<size_t>(i) * width;  // positions lo ..
                    const int visible = firstPos + i0 + i + 1;
                    const int start = (a.window > 0 ? std::max(0, visible - a.window) : 0) - lo;
                    const int stop = visible - lo;
                    float maxScore = *std::max_element(row + start, row + stop);
                    if (a.sinks) maxScore = std::max(maxScore, a.sinks[h]);
                    double sum = kernels.expSum(row + start, stop - start, maxScore);
                    if (a.sinks) sum += static_cast<double>(std::exp(a.sinks[h] - maxScore));
                    const float inverse = static_cast<float>(1.0 / sum);
                    std::fill(row, row + start, 0.0f);
                    for (int t = start; t < stop; ++t) row[t] *= inverse;
                    std::fill(row + stop, row + width, 0.0f);
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rowsOf, headDim, width, 1.0f, scores, width,
                            v + static_cast<size_t>(lo - base) * ld, static_cast<blasint>(ld), 0.0f,
                            a.out + static_cast<size_t>(i0) * rowStride + static_cast<size_t>(h) * headDim,
                            static_cast<blasint>(rowStride));
            }
        }
    };
    const BlasOnThisThread single;
    pool.run(work);
}


void swigluOp(const float* gate, const float* up, float* out, int n, ThreadPool& pool, const Kernels& k)
{
    auto work = [=, &k](int thread, int threads) {
        const int begin = static_cast<int>(static_cast<int64_t>(n) * thread / threads);
        const int end = static_cast<int>(static_cast<int64_t>(n) * (thread + 1) / threads);
        k.swiglu(gate + begin, up + begin, out + begin, end - begin);
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

void scatterRowsOp(const ScatterRowsArgs& a)
{
    const auto* src = static_cast<const uint8_t*>(a.src);
    auto* dst = static_cast<uint8_t*>(a.dst);
    for (int i = 0; i < a.count; ++i)
        std::memcpy(dst + size_t(a.index[i]) * a.dstStride, src + size_t(i) * a.srcStride, a.rowBytes);
}

void rowSumOp(const RowSumArgs& a, ThreadPool& pool)
{
    const int64_t cols = a.w.cols, rows = a.w.rows;
    if (cols <= 0) return;
    const auto* base = static_cast<const uint8_t*>(a.w.data);
    const DType type = a.w.type;
    const float* table = fp16Table();
    auto work = [&](int thread, int threads) {
        const int64_t begin = cols * thread / threads, end = cols * (thread + 1) / threads;
        float* y = a.y;
        for (int64_t c = begin; c < end; ++c) y[c] = 0.0f;
        for (int64_t r = 0; r < rows; ++r) {
            const float s = a.a[r];
            if (s == 0.0f) continue;
            const uint8_t* row = base + size_t(r) * a.w.rowStride;
            if (a.scales) {
                const auto* q = reinterpret_cast<const int8_t*>(row);
                const float* scale = a.scales + size_t(a.group[r]) * size_t(cols);
                for (int64_t c = begin; c < end; ++c) y[c] += s * (float(q[c]) * scale[c]);
            } else if (type == DType::F32) {
                const auto* v = reinterpret_cast<const float*>(row);
                for (int64_t c = begin; c < end; ++c) y[c] += s * v[c];
            } else if (type == DType::F16) {
                for (int64_t c = begin; c < end; ++c) y[c] += s * table[loadU16(row + 2 * c)];
            } else {
                for (int64_t c = begin; c < end; ++c) y[c] += s * bf16ToFp32(loadU16(row + 2 * c));
            }
        }
    };
    if (cols * rows < 65536)
        work(0, 1);
    else
        pool.run(work);
}

void layernormOp(const float* x, const float* weight, const float* bias, float* out, int n, float eps)
{
    if (n <= 0) return;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += x[i];
    const float mean = static_cast<float>(sum / n);
    double squares = 0.0;
    for (int i = 0; i < n; ++i) {
        const double d = double(x[i] - mean);
        squares += d * d;
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(squares / n + double(eps)));
    for (int i = 0; i < n; ++i) out[i] = (x[i] - mean) * scale * weight[i] + bias[i];
}

void pointwiseOp(const PointwiseArgs& a)
{
    switch (a.op) {
    case PointwiseOp::ShiftedRelu:
        for (int i = 0; i < a.n; ++i) a.out[i] = std::max(0.0f, a.x[i] - a.shift);
        return;
    case PointwiseOp::ShiftedReluGlu:
        for (int i = 0; i < a.n; ++i) a.out[i] = std::max(0.0f, a.x[i] - a.shift) * a.y[i];
        return;
    case PointwiseOp::SnapToGrid:
        for (int i = 0; i < a.n; ++i) {
            const float r = std::round(a.x[i] / a.step);  // half away from zero, as C's round
            a.out[i] = (r == r ? std::clamp(r, a.lo, a.hi) : 0.0f) * a.step;
        }
        return;
    case PointwiseOp::Scale:
        for (int i = 0; i < a.n; ++i) a.out[i] = a.x[i] * a.factor;
        return;
    case PointwiseOp::ScaledAdd:
        // Baseline x86-64 (no FMA here): the product is rounded before the add.
        for (int i = 0; i < a.n; ++i) {
            const float product = a.x[i] * a.factor;
            a.out[i] = product + a.y[i];
        }
        return;
    case PointwiseOp::ClampedSwiglu:
        for (int i = 0; i < a.n; ++i) {
            const float g = std::min(a.x[i], a.hi);
            const float u = std::clamp(a.y[i], -a.hi, a.hi);
            a.out[i] = g / (1.0f + std::exp(-a.factor * g)) * (u + 1.0f);
        }
        return;
    case PointwiseOp::SigmoidMul:
        for (int i = 0; i < a.n; ++i) a.out[i] = a.x[i] * (1.0f / (1.0f + std::exp(-a.y[i])));
        return;
    }
}

}  // namespace spillway::gpu::cpu

namespace spillway::gpu {

void decodeRow(DType type, const void* row, int64_t n, float* out)
{
    if (type == DType::BitmapSparse) return;
    MatrixView w;
    w.type = type;
    w.data = row;
    w.rows = 1;
    w.cols = n;
    w.rowStride = rowBytes(type, n);
    cpu::getRowOp(w, 0, out);
}

}  // namespace spillway::gpu

namespace spillway::gpu::cpu {

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
    case DType::Q8_0: {
        const bool scalesLast = w.layout == RowLayout::Q8_0ScalesLast;
        for (int64_t b = 0; b < w.cols / 32; ++b) {
            const float d = table[loadU16(scalesLast ? p + w.cols + 2 * b : p + b * 34)];
            const int8_t* q = reinterpret_cast<const int8_t*>(scalesLast ? p + b * 32 : p + b * 34 + 2);
            for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(q[i]);
        }
        return;
    }
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
    case DType::Q4_1:
        for (int64_t b = 0; b < w.cols / 32; ++b) decodeQ4_1(p + b * 20, table, out + b * 32);
        return;
    case DType::Q5_0:
        for (int64_t b = 0; b < w.cols / 32; ++b) decodeQ5_0(p + b * 22, table, out + b * 32);
        return;
    case DType::Q4_K:
        for (int64_t b = 0; b < w.cols / kQK; ++b) decodeQ4_K(p + b * 144, table, out + b * kQK);
        return;
    case DType::Q5_K:
        for (int64_t b = 0; b < w.cols / kQK; ++b) decodeQ5_K(p + b * 176, table, out + b * kQK);
        return;
    case DType::Q6_K:
        for (int64_t b = 0; b < w.cols / kQK; ++b) decodeQ6_K(p + b * 210, table, out + b * kQK);
        return;
    case DType::Q8_G64:
        for (int64_t b = 0; b < w.cols / 64; ++b) decodeQ8_G64(p + b * 68, out + b * 64);
        return;
    case DType::BitmapSparse: return;  // handled above
    default: decodeIqBlocks(w.type, p, w.cols, out); return;  // the types of iq_blocks.h
    }
}

}  // namespace spillway::gpu::cpu
