#include "core/compress/sparse_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/compress/half.h"
#include "core/compress/sparse_gemv_kernels.h"

namespace spillway::compress {

namespace {

// Walks a row's bitmap and hands out the columns of its non-zeros, a chunk at a time, so the
// kernels keep a fixed-size column buffer on the stack instead of allocating per row.
class BitmapCursor {
public:
    BitmapCursor(const uint8_t* row, int64_t words) : m_row(row), m_words(words)
    {
        m_bits = words > 0 ? detail::load64(row) : 0;
    }

    // Writes up to `max` next non-zero columns into idx; returns how many (0 at the end).
    int next(int32_t* idx, int max)
    {
        int n = 0;
        while (n < max) {
            while (m_bits == 0) {
                if (++m_word >= m_words) return n;
                m_bits = detail::load64(m_row + 8 * m_word);
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

// Chunk of non-zeros gathered per step: a multiple of every group size, so quantization groups
// never straddle two chunks.
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

float sparseRowFloat(const BitmapSparseMatrix& w, int64_t r, const float* x)
{
    BitmapCursor cursor(w.bitmapRow(r), w.bitmapRowBytes() / 8);
    const uint8_t* v = w.rowValues(r);
    int32_t idx[kChunk];
    float sum = 0.0f;
    int64_t k = 0;
    for (int n; (n = cursor.next(idx, kChunk)) > 0; k += n) {
        switch (w.format) {
        case ValueFormat::F32: {
            const uint8_t* base = v + 4 * k;
            sum += gatherDot([&](int j) { float f; std::memcpy(&f, base + 4 * j, 4); return f; }, idx, n, x);
            break;
        }
        case ValueFormat::F16: {
            const uint8_t* base = v + 2 * k;
            sum += gatherDot([&](int j) { return detail::halfToFloat(detail::load16(base + 2 * j)); }, idx, n, x);
            break;
        }
        default: {
            const uint8_t* base = v + 2 * k;
            sum += gatherDot([&](int j) { return detail::bf16ToFloat(detail::load16(base + 2 * j)); }, idx, n, x);
            break;
        }
        }
    }
    return sum;
}

float sparseRowQuantized(const BitmapSparseMatrix& w, int64_t r, const float* x)
{
    BitmapCursor cursor(w.bitmapRow(r), w.bitmapRowBytes() / 8);
    const uint8_t* p = w.rowValues(r);
    const bool int8 = w.format == ValueFormat::Int8;
    int32_t idx[kChunk];
    float sum = 0.0f;
    for (int n; (n = cursor.next(idx, kChunk)) > 0;) {
        for (int g0 = 0; g0 < n; g0 += w.group) {
            const int len = std::min(w.group, n - g0);
            const float scale = detail::halfToFloat(detail::load16(p));
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

// Dense dot: converts a block of weights to fp32 in one simple loop, then multiplies with 8
// independent partial sums; both loops are shaped for the auto-vectorizer (no fp reordering
// needed).
template <class Load>
float denseDot(const Load& load, const float* x, int64_t n)
{
    constexpr int kBlock = 64;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float buf[kBlock];
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
        const int len = static_cast<int>(std::min<int64_t>(kBlock, n - j0));
        if (len == kBlock) {
            for (int i = 0; i < kBlock; ++i) buf[i] = load(j0 + i);
            for (int i = 0; i < kBlock; i += 8)
                for (int l = 0; l < 8; ++l) acc[l] += buf[i + l] * x[j0 + i + l];
        } else {
            for (int i = 0; i < len; ++i) acc[i % 8] += load(j0 + i) * x[j0 + i];
        }
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

// The AVX-512 kernel needs only F/BW/VL of the set's F/BW/VL/DQ/VNNI (it uses vexpandps, not
// VBMI2's vpexpandw: slower on Zen 5, see sparse_gemv_avx512.cpp).
gpu::CpuKernelSet bestSparseKernelSet() { return gpu::bestCpuKernelSet(); }

gpu::CpuKernelSet activeSparseKernelSet()
{
    static const gpu::CpuKernelSet active = [] {
        const gpu::CpuKernelSet best = bestSparseKernelSet();
        const char* forced = std::getenv("SPILLWAY_CPU_KERNELS");
        if (!forced) return best;
        const std::string_view name(forced);
        if (name == "scalar") return gpu::CpuKernelSet::Scalar;
        if (name == "avx2") return std::min(best, gpu::CpuKernelSet::Avx2);
        return best;
    }();
    return active;
}

void gemvBitmapSparse(const BitmapSparseMatrix& w, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd)
{
    gemvBitmapSparse(w, x, y, rowBegin, rowEnd, activeSparseKernelSet());
}

void gemvBitmapSparse(const BitmapSparseMatrix& w, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd, gpu::CpuKernelSet set)
{
    set = std::min(set, bestSparseKernelSet());
    const bool f16 = w.format == ValueFormat::F16 || w.format == ValueFormat::BF16;
    if (f16 && set != gpu::CpuKernelSet::Scalar && rowBegin < rowEnd) {
        const detail::SparseRows16 m{w.rowOffsets.data(), w.bitmap.data(), w.values.data(),
                                     w.values.size(), w.cols, w.bitmapRowBytes(),
                                     w.format == ValueFormat::BF16};
        if (set == gpu::CpuKernelSet::Avx512)
            detail::gemvSparse16Avx512(m, x, y, rowBegin, rowEnd);
        else
            detail::gemvSparse16Avx2(m, x, y, rowBegin, rowEnd);
        return;
    }
    if (w.format == ValueFormat::Int8 && set == gpu::CpuKernelSet::Avx512 && rowBegin < rowEnd) {
        const detail::SparseRowsInt8 m{w.rowOffsets.data(), w.bitmap.data(), w.values.data(),
                                       w.values.size(), w.cols, w.bitmapRowBytes(), w.group};
        detail::gemvSparseInt8Avx512(m, x, y, rowBegin, rowEnd);
        return;
    }
    for (int64_t r = rowBegin; r < rowEnd; ++r)
        y[r] = isQuantized(w.format) ? sparseRowQuantized(w, r, x) : sparseRowFloat(w, r, x);
}

void gemvQuantized(const QuantizedMatrix& w, const float* x, float* y, int64_t rowBegin, int64_t rowEnd)
{
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
        const uint8_t* p = w.row(r);
        float sum = 0.0f;
        for (int64_t g0 = 0; g0 < w.cols; g0 += w.group) {
            const int64_t len = std::min<int64_t>(w.group, w.cols - g0);
            const float scale = detail::halfToFloat(detail::load16(p));
            const uint8_t* q = p + 2;
            float part;
            if (w.bits == 8) {
                part = denseDot([&](int64_t j) { return static_cast<float>(static_cast<int8_t>(q[j])); }, x + g0, len);
                p += 2 + len;
            } else {
                part = denseDot([&](int64_t j) { return static_cast<float>(detail::nibbleAt(q, j)); }, x + g0, len);
                p += 2 + (len + 1) / 2;
            }
            sum += scale * part;
        }
        y[r] = sum;
    }
}

void gemvDenseF16(const uint16_t* w, int64_t cols, const float* x, float* y, int64_t rowBegin,
                  int64_t rowEnd)
{
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
        const uint16_t* row = w + r * cols;
        y[r] = denseDot([&](int64_t j) { return detail::halfToFloat(row[j]); }, x, cols);
    }
}

void decompressRows(const BitmapSparseMatrix& w, int64_t rowBegin, int64_t rowEnd, float* out)
{
    for (int64_t r = rowBegin; r < rowEnd; ++r) decodeRow(w, r, out + r * w.cols);
}

void decompressRows16(const BitmapSparseMatrix& w, int64_t rowBegin, int64_t rowEnd, uint16_t* out)
{
    const int64_t words = w.bitmapRowBytes() / 8;
    for (int64_t r = rowBegin; r < rowEnd; ++r) {
        uint16_t* row = out + r * w.cols;
        std::memset(row, 0, static_cast<size_t>(w.cols) * 2);
        const uint8_t* bits = w.bitmapRow(r);
        const uint8_t* v = w.rowValues(r);
        int64_t k = 0;
        for (int64_t wi = 0; wi < words; ++wi) {
            uint64_t b = detail::load64(bits + 8 * wi);
            while (b) {
                row[wi * 64 + __builtin_ctzll(b)] = detail::load16(v + 2 * k++);
                b &= b - 1;
            }
        }
    }
}

}  // namespace spillway::compress
