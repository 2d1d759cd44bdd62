// Baseline x86-64 kernels: run on any CPU, and define the results the vector sets must match
// (bit-exactly for the Q8 quantization of x; within float rounding for the dot products).

#include <cmath>
#include <cstring>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

// ---- x -> Q8 blocks --------------------------------------------------------------------------

void quantizeQ8Scalar(const float* x, int64_t n, int8_t* qs, float* d, float* sum8)
{
    for (int64_t b = 0; b < n / kQ8Block; ++b) {
        const float* xb = x + b * kQ8Block;
        float amax = 0.0f;
        for (int i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
        const float scale = amax / 127.0f;
        const float inverse = q8Inverse(scale);
        const float stored = fp16ToFp32(fp32ToFp16(scale));
        int sum = 0;
        for (int i = 0; i < kQ8Block; ++i) {
            const int q = static_cast<int>(std::nearbyint(xb[i] * inverse));
            qs[b * kQ8Block + i] = static_cast<int8_t>(q);
            sum += q;
        }
        d[b] = stored;
        sum8[b] = q8Sum8(stored, sum);
    }
}

// ---- matvec rows, one per weight type --------------------------------------------------------

// 8 partial sums so that the compiler can keep them in SSE registers; a tail for odd n.
template <class Load>
float dotRowAny(Load load, const float* x, int64_t n)
{
    const int64_t full = n & ~int64_t{7};
    float acc[8] = {};
    for (int64_t c = 0; c < full; c += 8)
        for (int j = 0; j < 8; ++j) acc[j] += load(c + j) * x[c + j];
    float tail = 0.0f;
    for (int64_t c = full; c < n; ++c) tail += load(c) * x[c];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) +
           tail;
}

void matvecF32(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; ++r) {
        const float* row = reinterpret_cast<const float*>(rowPointer(w, r));
        y[r] = dotRowAny([row](int64_t c) { return row[c]; }, in.x, w.cols);
    }
}

void matvecF16(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* table = fp16Table();
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        y[r] = dotRowAny([row, table](int64_t c) { return table[loadU16(row + 2 * c)]; }, in.x,
                         w.cols);
    }
}

void matvecBf16(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        y[r] = dotRowAny([row](int64_t c) { return bf16ToFp32(loadU16(row + 2 * c)); }, in.x,
                         w.cols);
    }
}

// Q8_0 rows in either layout: `Stored` tells where block b's values and scale lie in a row.
template <bool Stored>
void matvecQ8_0Rows(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* table = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* values = Stored ? row + b * 34 + 2 : row + b * kQ8Block;
            const uint8_t* scale = Stored ? row + b * 34 : row + w.cols + 2 * b;
            const int8_t* wq = reinterpret_cast<const int8_t*>(values);
            const int8_t* xq = in.q.qs + b * kQ8Block;
            int sum = 0;
            for (int i = 0; i < kQ8Block; ++i) sum += wq[i] * xq[i];
            acc += static_cast<float>(sum) * (table[loadU16(scale)] * in.q.d[b]);
        }
        y[r] = acc;
    }
}

void matvecQ8_0(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    matvecQ8_0Rows<true>(w, in, y, r0, r1);
}

void matvecQ4_0(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* table = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        float correction = 0.0f;  // sum over blocks of d_w * 8 * d_x * sum(q_x)
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * 18;
            const uint8_t* nibbles = block + 2;
            const int8_t* xq = in.q.qs + b * kQ8Block;
            int sum = 0;
            for (int i = 0; i < 16; ++i)
                sum += (nibbles[i] & 0x0f) * xq[i] + (nibbles[i] >> 4) * xq[i + 16];
            const float dw = table[loadU16(block)];
            acc += static_cast<float>(sum) * (dw * in.q.d[b]);
            correction += dw * in.q.sum8[b];
        }
        y[r] = acc - correction;
    }
}

// ---- small helpers used by attention and the bandwidth probe ---------------------------------

float dotScalar(const float* a, const float* b, int n)
{
    return dotRowAny([a](int64_t c) { return a[c]; }, b, n);
}

void axpyScalar(float a, const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

uint64_t readAllScalar(const void* data, size_t bytes)
{
    const uint64_t* p = static_cast<const uint64_t*>(data);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < bytes / 8; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 ^ s1 ^ s2 ^ s3;
}

// exp(x) for a softmax's x <= 0: 0 below -104, where expf's result is 0 anyway, without calling
// it (glibc's expf takes a slow path that sets errno for every result that underflows: ~6 % of a
// long random-weight prompt's time went there).
double expSumScalar(float* x, int n, float shift)
{
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        const float v = x[i] - shift;
        x[i] = v < -104.0f ? 0.0f : std::exp(v);
        sum += x[i];
    }
    return sum;
}

void swigluScalar(const float* gate, const float* up, float* out, int n)
{
    for (int i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];  // silu as ggml_silu_f32
    }
}

}  // namespace

void matvecQ8_0ScalesLastScalar(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                                int64_t r1)
{
    matvecQ8_0Rows<false>(w, in, y, r0, r1);
}

void repackQ8_0ScalesLast(const MatrixView& src, uint8_t* dst, int64_t r0, int64_t r1)
{
    const int64_t blocks = src.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* from = rowPointer(src, r);
        uint8_t* to = dst + static_cast<size_t>(r) * src.rowStride;
        for (int64_t b = 0; b < blocks; ++b) {
            std::memcpy(to + b * kQ8Block, from + b * 34 + 2, kQ8Block);
            std::memcpy(to + src.cols + 2 * b, from + b * 34, 2);
        }
    }
}

void fillScalarKernels(Kernels& k)
{
    k.set = CpuKernelSet::Scalar;
    k.matvec[static_cast<int>(DType::F32)] = matvecF32;
    k.matvec[static_cast<int>(DType::F16)] = matvecF16;
    k.matvec[static_cast<int>(DType::BF16)] = matvecBf16;
    k.matvec[static_cast<int>(DType::Q8_0)] = matvecQ8_0;
    k.matvecQ8_0ScalesLast = matvecQ8_0ScalesLastScalar;
    k.matvec[static_cast<int>(DType::Q4_0)] = matvecQ4_0;
    k.matvec[static_cast<int>(DType::BitmapSparse)] = matvecBitmapScalar;
    k.quantizeQ8 = quantizeQ8Scalar;
    k.dot = dotScalar;
    k.axpy = axpyScalar;
    k.readAll = readAllScalar;
    k.expSum = expSumScalar;
    k.swiglu = swigluScalar;
}

}  // namespace spillway::gpu::cpu
