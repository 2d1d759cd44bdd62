#include "core/compress/sparse_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/compress/half.h"

namespace spillway::compress {

namespace {

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
    gpu::gemvBitmapSparse(viewOf(w), x, y, rowBegin, rowEnd, set);
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
