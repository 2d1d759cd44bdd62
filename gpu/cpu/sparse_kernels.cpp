// GEMV on the bitmap sparse blob (gpu/sparse_format.h), straight from the compressed form: the
// scalar kernels, and the dispatch to the instruction-set kernels (sparse_kernels_*.cpp).

#include <algorithm>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/sparse_kernels.h"
#include "gpu/half_inline.h"

namespace spillway::gpu::cpu {

namespace {

using detail::load16;
using detail::load64;

// The dense scalar kernels' summation (kernels_scalar.cpp, dotRowAny): column c of the first
// cols & ~7 goes to partial sum c % 8, the rest to a tail, combined in the same order. A pruned
// column adds nothing here where the dense kernel adds a +-0 product, which leaves every partial
// sum as it was: for finite x, a pruned matrix gives bit-identical y in both forms.
template <class Load>
float sparseRowFloat(const BitmapSparseView& w, int64_t r, const float* x, const Load& load)
{
    const int64_t full = w.cols & ~int64_t{7};
    const int64_t words = w.bitmapRowBytes() / 8;
    const uint8_t* bits = w.bitmap + r * w.bitmapRowBytes();
    const uint8_t* v = w.values + w.rowOffsets[r];
    float acc[8] = {};
    float tail = 0.0f;
    int64_t k = 0;
    for (int64_t word = 0; word < words; ++word) {
        for (uint64_t b = load64(bits + 8 * word); b; b &= b - 1) {
            const int64_t c = word * 64 + __builtin_ctzll(b);
            const float p = load(v, k++) * x[c];
            if (c < full) acc[c & 7] += p;
            else tail += p;
        }
    }
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// Walks a row's bitmap and hands out the columns of its non-zeros, a chunk at a time.
class BitmapCursor {
public:
    BitmapCursor(const uint8_t* row, int64_t words) : m_row(row), m_words(words)
    {
        m_bits = words > 0 ? load64(row) : 0;
    }

    // Writes up to `max` next non-zero columns into idx; returns how many (0 at the end).
    int next(int32_t* idx, int max)
    {
        int n = 0;
        while (n < max) {
            while (m_bits == 0) {
                if (++m_word >= m_words) return n;
                m_bits = load64(m_row + 8 * m_word);
            }
            idx[n++] = static_cast<int32_t>(m_word * 64 + __builtin_ctzll(m_bits));
            m_bits &= m_bits - 1;
        }
        return n;
    }

private:
    const uint8_t* m_row;
    int64_t m_words;
    int64_t m_word = 0;
    uint64_t m_bits = 0;
};

// Non-zeros gathered per step: a multiple of every group size, so quantization groups never
// straddle two chunks.
constexpr int kChunk = 1024;

template <class Load>
float gatherDot(const Load& load, const int32_t* idx, int n, const float* x)
{
    float acc[4] = {0, 0, 0, 0};
    int j = 0;
    for (; j + 4 <= n; j += 4)
        for (int l = 0; l < 4; ++l) acc[l] += load(j + l) * x[idx[j + l]];
    for (; j < n; ++j) acc[0] += load(j) * x[idx[j]];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

float sparseRowQuantized(const BitmapSparseView& w, int64_t r, const float* x)
{
    BitmapCursor cursor(w.bitmap + r * w.bitmapRowBytes(), w.bitmapRowBytes() / 8);
    const uint8_t* p = w.values + w.rowOffsets[r];
    const bool int8 = w.format == SparseValues::Int8;
    int32_t idx[kChunk];
    float sum = 0.0f;
    for (int n; (n = cursor.next(idx, kChunk)) > 0;) {
        for (int g0 = 0; g0 < n; g0 += w.group) {
            const int len = std::min(w.group, n - g0);
            const float scale = detail::halfToFloat(load16(p));
            const uint8_t* q = p + 2;
            const int32_t* gi = idx + g0;
            float part;
            if (int8)
                part = gatherDot([&](int j) { return static_cast<float>(static_cast<int8_t>(q[j])); }, gi, len, x);
            else
                part = gatherDot([&](int j) { return static_cast<float>(detail::nibbleAt(q, j)); }, gi, len, x);
            sum += scale * part;
            p += 2 + (int8 ? len : (len + 1) / 2);
        }
    }
    return sum;
}

void gemvScalar(const BitmapSparseView& w, const float* x, float* y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; ++r) {
        switch (w.format) {
        case SparseValues::F32:
            y[r] = sparseRowFloat(w, r, x, [](const uint8_t* v, int64_t k) {
                float f;
                std::memcpy(&f, v + 4 * k, 4);
                return f;
            });
            break;
        case SparseValues::F16:
            y[r] = sparseRowFloat(w, r, x, [](const uint8_t* v, int64_t k) { return detail::halfToFloat(load16(v + 2 * k)); });
            break;
        case SparseValues::BF16:
            y[r] = sparseRowFloat(w, r, x, [](const uint8_t* v, int64_t k) { return detail::bf16ToFloat(load16(v + 2 * k)); });
            break;
        case SparseValues::Int8:
        case SparseValues::Int4: y[r] = sparseRowQuantized(w, r, x); break;
        }
    }
}

}  // namespace

void gemvBitmapSparseSet(const BitmapSparseView& w, const float* x, float* y, int64_t r0, int64_t r1,
                         CpuKernelSet set)
{
    if (r0 >= r1) return;
    const bool f16 = w.format == SparseValues::F16 || w.format == SparseValues::BF16;
    if (f16 && set != CpuKernelSet::Scalar) {
        const SparseRows16 m{w.rowOffsets, w.bitmap, w.values, w.valuesBytes, w.cols, w.bitmapRowBytes(),
                             w.format == SparseValues::BF16};
        if (set == CpuKernelSet::Avx512) gemvSparse16Avx512(m, x, y, r0, r1);
        else gemvSparse16Avx2(m, x, y, r0, r1);
        return;
    }
    if (w.format == SparseValues::Int8 && set == CpuKernelSet::Avx512) {
        const SparseRowsInt8 m{w.rowOffsets, w.bitmap, w.values, w.valuesBytes, w.cols, w.bitmapRowBytes(), w.group};
        gemvSparseInt8Avx512(m, x, y, r0, r1);
        return;
    }
    gemvScalar(w, x, y, r0, r1);
}

void matvecBitmapScalar(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    gemvBitmapSparseSet(viewBitmapBlob(w.data), in.x, y, r0, r1, CpuKernelSet::Scalar);
}
void matvecBitmapAvx2(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    gemvBitmapSparseSet(viewBitmapBlob(w.data), in.x, y, r0, r1, CpuKernelSet::Avx2);
}
void matvecBitmapAvx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    gemvBitmapSparseSet(viewBitmapBlob(w.data), in.x, y, r0, r1, CpuKernelSet::Avx512);
}

}  // namespace spillway::gpu::cpu

namespace spillway::gpu {

void gemvBitmapSparse(const BitmapSparseView& w, const float* x, float* y, int64_t rowBegin, int64_t rowEnd,
                      CpuKernelSet set)
{
    cpu::gemvBitmapSparseSet(w, x, y, rowBegin, rowEnd, std::min(set, bestCpuKernelSet()));
}

}  // namespace spillway::gpu
