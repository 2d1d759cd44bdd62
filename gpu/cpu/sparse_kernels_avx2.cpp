// AVX2 (+F16C, FMA) GEMV on the bitmap sparse format, F16 / BF16 values (chosen at run time only
// on CPUs that have them). AVX2 has no expand instruction, so each bitmap byte (8 columns) picks a
// pshufb pattern from a 256-entry table that moves the next popcount(byte) packed values to their
// columns and zeroes the rest; the 8 values are widened to fp32 and multiplied with x. Pruned
// columns multiply a +0 weight with x: y is the scalar kernel's for finite x (an inf or NaN in x
// at a pruned column gives NaN here, where the scalar and AVX-512 kernels skip it).
// See sparse_kernels.h for why this file includes no std headers.

#include <immintrin.h>

#include <cstring>

#include "gpu/cpu/sparse_kernels.h"

namespace spillway::gpu::cpu {

namespace {

// shuffle[b]: the pshufb control expanding the first popcount(b) fp16 values of a 16-byte load to
// the lanes whose bit is set in b (0x80 = zero the byte).
struct ExpandTable {
    alignas(16) uint8_t shuffle[256][16];
    constexpr ExpandTable() : shuffle{}
    {
        for (int b = 0; b < 256; ++b) {
            int k = 0;
            for (int i = 0; i < 8; ++i) {
                const bool set = (b >> i) & 1;
                shuffle[b][2 * i] = set ? static_cast<uint8_t>(2 * k) : 0x80;
                shuffle[b][2 * i + 1] = set ? static_cast<uint8_t>(2 * k + 1) : 0x80;
                k += set;
            }
        }
    }
};
constexpr ExpandTable kExpand;

struct CvtF16 {
    static __m256 widen(__m128i h) { return _mm256_cvtph_ps(h); }
};
struct CvtBf16 {
    static __m256 widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
};

// The 8 columns of bitmap byte b as fp32 weights; advances v past their packed values. Loads 16
// bytes at v: near the end of the values buffer they are copied out first, so no read goes past.
template <class Cvt>
inline __m256 expand8(const uint16_t*& v, const uint16_t* end, unsigned b)
{
    __m128i packed;
    if (__builtin_expect(end - v >= 8, 1)) {
        packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v));
    } else {
        uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        std::memcpy(buf, v, static_cast<size_t>(end - v) * 2);
        packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
    }
    v += __builtin_popcount(b);
    const __m128i ctl = _mm_load_si128(reinterpret_cast<const __m128i*>(kExpand.shuffle[b]));
    return Cvt::widen(_mm_shuffle_epi8(packed, ctl));
}

// x[c, c + 8), lanes at or past cols zero (never read).
inline __m256 loadX(const float* x, int64_t c, int64_t cols)
{
    const int64_t n = cols - c;
    if (n >= 8) return _mm256_loadu_ps(x + c);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
    return _mm256_maskload_ps(x + c, m);
}

template <class Cvt, int R, bool Tail>
inline void word(const uint8_t* const* bits, const uint16_t** v, const uint16_t* end, const float* x,
                 int64_t wi, int64_t cols, __m256 (*acc)[2])
{
    uint64_t b[R];
    for (int j = 0; j < R; ++j) std::memcpy(&b[j], bits[j] + 8 * wi, 8);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        const int64_t c = wi * 64 + 8 * i;
        if (Tail && c >= cols) break;
        const __m256 xv = Tail ? loadX(x, c, cols) : _mm256_loadu_ps(x + c);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const unsigned byte = static_cast<unsigned>(b[j] >> (8 * i)) & 0xFF;
            acc[j][i & 1] = _mm256_fmadd_ps(expand8<Cvt>(v[j], end, byte), xv, acc[j][i & 1]);
        }
    }
}

inline float hsum(__m256 v)
{
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <class Cvt, int R>
void rows(const SparseRows16& m, const float* x, float* y, int64_t r)
{
    const uint8_t* bits[R];
    const uint16_t* v[R];
    const uint16_t* end = reinterpret_cast<const uint16_t*>(m.values + m.valuesBytes);
    __m256 acc[R][2];
    for (int j = 0; j < R; ++j) {
        bits[j] = m.bitmap + (r + j) * m.bitmapRowBytes;
        v[j] = reinterpret_cast<const uint16_t*>(m.values + m.rowOffsets[r + j]);
        acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    }
    const int64_t fullWords = m.cols / 64, words = m.bitmapRowBytes / 8;
    for (int64_t wi = 0; wi < fullWords; ++wi) word<Cvt, R, false>(bits, v, end, x, wi, m.cols, acc);
    if (fullWords < words) word<Cvt, R, true>(bits, v, end, x, fullWords, m.cols, acc);
    for (int j = 0; j < R; ++j) y[r + j] = hsum(_mm256_add_ps(acc[j][0], acc[j][1]));
}

template <class Cvt>
void gemv(const SparseRows16& m, const float* x, float* y, int64_t r0, int64_t r1)
{
    constexpr int R = 2;
    int64_t r = r0;
    for (; r + R <= r1; r += R) rows<Cvt, R>(m, x, y, r);
    for (; r < r1; ++r) rows<Cvt, 1>(m, x, y, r);
}

}  // namespace

void gemvSparse16Avx2(const SparseRows16& m, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd)
{
    if (m.bf16)
        gemv<CvtBf16>(m, x, y, rowBegin, rowEnd);
    else
        gemv<CvtF16>(m, x, y, rowBegin, rowEnd);
}

}  // namespace spillway::gpu::cpu
