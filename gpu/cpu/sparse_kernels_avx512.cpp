// AVX-512 GEMV on the bitmap sparse format, F16 / BF16 values (compiled with AVX-512 F/BW/VL;
// chosen at run time only on CPUs that have them). Per 16 columns a row's next packed values are
// widened to fp32 and moved to their columns with vexpandps (_mm512_maskz_expand_ps); pruned
// lanes are +0. Measured on Zen 5 (4096 x 11008, 50%, 1 thread): 3.05 ms, against 3.8 ms
// expanding the fp16 values first with VBMI2's vpexpandw from memory, 4.5 ms with vpexpandw from
// a register. As in the AVX2 kernel, y is the scalar kernel's for finite x (a pruned column
// multiplies +0 by x: an inf or NaN there gives NaN, where the scalar kernel skips it). R rows run together so that each x load serves R rows (x is 4 bytes a column
// against ~1.1 byte of sparse weights: its loads dominate otherwise).
// See sparse_kernels.h for why this file includes no std headers.

// GCC 12's own AVX-512 headers trip these warnings (_mm512_undefined_* self-initialize).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "gpu/cpu/sparse_kernels_avx512_x.h"
#include "gpu/cpu/sparse_kernels.h"

namespace spillway::gpu::cpu {

namespace {

struct CvtF16 {
    static __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
};

struct CvtBf16 {
    static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
};

constexpr int64_t kPrefetchAhead = 4096;  // bytes, per stream

// Rows [r, r + R). One function with every per-row array indexed by constants after unrolling,
// so that the accumulators and value pointers live in registers (passed to a helper by pointer,
// GCC kept them on the stack: a store-load round trip on every FMA chain, 2.5x slower).
// Masked: load exactly a row's values (for the last rows of the buffer, where a full 32-byte load
// could read past its end); otherwise plain 32-byte loads (the mask costs 1.5 ms of 3 here).
template <class Cvt, int R, bool Masked>
void rows(const SparseRows16& m, const float* x, float* y, int64_t r)
{
    const uint8_t* bits[R];
    const uint16_t* v[R];
    __m512 acc[R][2];
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) {
        bits[j] = m.bitmap + (r + j) * m.bitmapRowBytes;
        v[j] = reinterpret_cast<const uint16_t*>(m.values + m.rowOffsets[r + j]);
        acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    }
    const int64_t cols = m.cols, words = m.bitmapRowBytes / 8;
    for (int64_t wi = 0; wi < words; ++wi) {  // 64 columns a step
        const int64_t c = wi * 64;
        __m512 xs[4];
        loadXWord(x, c, cols, xs);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            uint64_t b;
            std::memcpy(&b, bits[j] + 8 * wi, 8);
            // Software prefetch: 2R streams (bitmap and values of each row) are more than the
            // hardware prefetcher follows at full speed (measured: 10 -> 6.5 ns per row-word).
            _mm_prefetch(reinterpret_cast<const char*>(v[j]) + kPrefetchAhead, _MM_HINT_T0);
            if ((wi & 7) == 0)
                _mm_prefetch(reinterpret_cast<const char*>(bits[j] + 8 * wi) + kPrefetchAhead / 8,
                             _MM_HINT_T0);
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                // 16 columns: the next popcount(m16) packed values, widened, then expanded to
                // their lanes (the lanes loaded past them are dropped by the expand).
                const uint32_t m16 = static_cast<uint32_t>(b >> (16 * q)) & 0xFFFF;
                const int n = __builtin_popcount(m16);
                const __m256i packed =
                    Masked ? _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1u), v[j])
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[j]));
                const __m512 w16 = _mm512_maskz_expand_ps(static_cast<__mmask16>(m16), Cvt::widen(packed));
                acc[j][q & 1] = _mm512_fmadd_ps(w16, xs[q], acc[j][q & 1]);
                v[j] += n;
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) y[r + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]));
}

template <class Cvt>
void gemv(const SparseRows16& m, const float* x, float* y, int64_t r0, int64_t r1)
{
    constexpr int R = 4;
    // Rows whose values end at least 32 bytes before the buffer's end may over-read their end.
    auto roomy = [&](int64_t rEnd) { return m.rowOffsets[rEnd] + 32 <= m.valuesBytes; };
    int64_t r = r0;
    for (; r + R <= r1; r += R) {
        if (roomy(r + R))
            rows<Cvt, R, false>(m, x, y, r);
        else
            rows<Cvt, R, true>(m, x, y, r);
    }
    for (; r < r1; ++r) {
        if (roomy(r + 1))
            rows<Cvt, 1, false>(m, x, y, r);
        else
            rows<Cvt, 1, true>(m, x, y, r);
    }
}

}  // namespace

void gemvSparse16Avx512(const SparseRows16& m, const float* x, float* y, int64_t rowBegin,
                        int64_t rowEnd)
{
    if (m.bf16)
        gemv<CvtBf16>(m, x, y, rowBegin, rowEnd);
    else
        gemv<CvtF16>(m, x, y, rowBegin, rowEnd);
}

}  // namespace spillway::gpu::cpu
