// AVX-512 kernels (compiled with AVX-512 F/BW/VL/DQ/VNNI; chosen at run time only on CPUs that
// have them): float weight types, the helpers, and the table. The quantized types live in
// kernels_quant_avx512.cpp. No std containers or out-of-line std templates here: see
// kernels_common.h.

// GCC 12's own AVX-512 headers trip these warnings (_mm512_undefined_* self-initialize).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/exp_x86.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"  // hsum256, quantizeQ8X86

namespace spillway::gpu::cpu {

namespace {

// ---- float weight types: 16 values per step, 4 independent accumulators ------------------------

struct LoadF32 {
    static constexpr int kBytes = 4;  // per value
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
    }
};

struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
    }
};

struct LoadBf16 {
    static constexpr int kBytes = 2;
    static __m512i widen(__m256i h) { return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16); }
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
        return _mm512_castsi512_ps(widen(h));
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_castsi512_ps(widen(_mm256_maskz_loadu_epi16(m, row + 2 * c)));
    }
};

// For the attention dots (short vectors, in cache): no prefetch.
template <class Load>
float dotRow(const uint8_t* row, const float* x, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 64 <= n; c += 64) {
        a0 = _mm512_fmadd_ps(Load::load16(row, c), _mm512_loadu_ps(x + c), a0);
        a1 = _mm512_fmadd_ps(Load::load16(row, c + 16), _mm512_loadu_ps(x + c + 16), a1);
        a2 = _mm512_fmadd_ps(Load::load16(row, c + 32), _mm512_loadu_ps(x + c + 32), a2);
        a3 = _mm512_fmadd_ps(Load::load16(row, c + 48), _mm512_loadu_ps(x + c + 48), a3);
    }
    for (; c + 16 <= n; c += 16)
        a0 = _mm512_fmadd_ps(Load::load16(row, c), _mm512_loadu_ps(x + c), a0);
    if (c < n) {  // masked tail: lanes past n load as zero
        const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1u);
        a1 = _mm512_fmadd_ps(Load::load16Masked(row, c, m), _mm512_maskz_loadu_ps(m, x + c), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// R rows at once, 32 values per step: each load of x serves R rows. x is 4 bytes a value, so
// with one row an F16 matvec reads twice as many bytes of x (from L2: 11008 floats do not stay
// in L1 next to the streaming weights) as of weights. Measured at 2 threads on 4096 x 11008:
// 4 rows reach 95-104% of the read ceiling for F32 and ~75-80% for F16/BF16, against 90% and
// 65% with one row.
//
// The rows of a group are read side by side, so each row is its own stream. Each stream is
// prefetched kPrefetchAhead bytes on; past the row's end that is the same stream's row in the
// next group (`next` bytes on: R rows), so a group starts with its lines already on the way.
template <class Load, int R>
void dotRows(const uint8_t* const* rows, const float* x, int64_t n, float* out, size_t next)
{
    const size_t rowBytes = size_t(n) * Load::kBytes;
    __m512 acc[R][2];
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
        const __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const size_t at = size_t(c) * Load::kBytes + kPrefetchAhead;
            const uint8_t* ahead = at < rowBytes ? rows[j] + at : rows[j] + next + (at - rowBytes);
            prefetchLine(ahead);
            if (Load::kBytes == 4) prefetchLine(ahead + 64);
            acc[j][0] = _mm512_fmadd_ps(Load::load16(rows[j], c), x0, acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(Load::load16(rows[j], c + 16), x1, acc[j][1]);
        }
    }
    for (; c < n; c += 16) {  // masked tail: lanes past n load as zero
        const __mmask16 m = n - c >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - c)) - 1u);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + c);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j)
            acc[j][0] = _mm512_fmadd_ps(Load::load16Masked(rows[j], c, m), xv, acc[j][0]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]));
}

template <class Load>
void matvecFloat(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    constexpr int R = 4;
    int64_t r = r0;
    for (; r + R <= r1; r += R) {
        const uint8_t* rows[R];
        for (int j = 0; j < R; ++j) rows[j] = rowPointer(w, r + j);
        dotRows<Load, R>(rows, in.x, w.cols, y + r, size_t(R) * w.rowStride);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        dotRows<Load, 1>(rows, in.x, w.cols, y + r, w.rowStride);
    }
}

// ---- helpers for attention and the bandwidth probe -------------------------------------------

float dotAvx512(const float* a, const float* b, int n)
{
    return dotRow<LoadF32>(reinterpret_cast<const uint8_t*>(a), b, n);
}

void axpyAvx512(float a, const float* x, float* y, int n)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 r = _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i));
        _mm512_storeu_ps(y + i, r);
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 r =
            _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

uint64_t readAllAvx512(const void* data, size_t bytes)
{
    const __m512i* p = static_cast<const __m512i*>(data);
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < bytes / 64; i += 4) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 3));
    }
    const __m512i s = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
    // Lanes summed as unsigned (wrapping): _mm512_reduce_add_epi64 adds signed long longs, and
    // large sums overflow (undefined behaviour; UBSan stops the sanitizer build on it).
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, s);
    uint64_t sum = 0;
    for (uint64_t v : lanes) sum += v;
    return sum;
}

}  // namespace

void fillAvx512Kernels(Kernels& k)
{
    k.set = CpuKernelSet::Avx512;
    fillAvx2Dequant(k);  // AVX-512 CPUs run the AVX2 + F16C dequantizers
    k.matvec[static_cast<int>(DType::F32)] = matvecFloat<LoadF32>;
    k.matvec[static_cast<int>(DType::F16)] = matvecFloat<LoadF16>;
    k.matvec[static_cast<int>(DType::BF16)] = matvecFloat<LoadBf16>;
    k.matvec[static_cast<int>(DType::Q8_0)] = matvecQ8_0Avx512;
    k.matvecQ8_0ScalesLast = matvecQ8_0ScalesLastAvx512;
    k.repacksQ8_0 = true;
    k.matvec[static_cast<int>(DType::Q4_0)] = matvecQ4_0Avx512;
    k.matvec[static_cast<int>(DType::BitmapSparse)] = matvecBitmapAvx512;
    k.quantizeQ8 = quantizeQ8X86;
    k.dot = dotAvx512;
    k.axpy = axpyAvx512;
    k.readAll = readAllAvx512;
    k.expSum = [](float* x, int n, float shift) { return expSumAvx512(x, n, shift); };
    k.swiglu = [](const float* g, const float* u, float* o, int n) { swigluAvx512(g, u, o, n); };
    k.packGemmX = packGemmXAvx2;
    k.gemmRows = gemmRowsAvx512;
    k.gemmPanelRows = kGemmPanelRowsAvx512;
    k.gemmInt8 = gemmInt8Avx512();
}

}  // namespace spillway::gpu::cpu
