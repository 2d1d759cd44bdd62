// AVX-512 GEMV on the bitmap sparse format, group-quantized Int8 values (compiled with AVX-512
// F/BW/VL; chosen at run time only on CPUs that have them). Two steps per block of 1024 columns:
//  1. dequantize: the block's packed codes of each row become fp32 weights code * scale in a
//     stack buffer, walking the groups exactly like the scalar kernel (a group may span bitmap
//     words and blocks; its fp16 scale sits between the codes of two groups, so the codes are not
//     contiguous across a group boundary). code * scale is exact in fp32 (7 + 11 bits).
//  2. expand: per 16 columns, the next popcount(mask) weights of the buffer are moved to their
//     columns with vexpandps and multiplied with x, as in sparse_kernels_avx512.cpp.
// Sums differ from the scalar kernel's (which scales each group's partial sum) only by fp32
// rounding order. Pruned lanes are +0: for finite x, y is the scalar kernel's within rounding.
// R rows run together so that each x load serves R rows. Measured (4096 x 11008, 50%, int8 g64,
// 1 thread, noisy shared 2-core AVX-512 VM): 7-10 ms against 29 ms scalar, 2.8-3.1 ms bitmap f16.
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

constexpr int64_t kBlockWords = 16;          // bitmap words (64 columns each) per block
constexpr int kBufFloats = 64 * kBlockWords + 16;  // + 16: the expand loads 16 past the last

// A row's walk through its groups: p is the next byte (a scale when left == 0).
struct GroupCursor {
    const uint8_t* p;
    int left;     // codes left in the current group
    float scale;  // the current group's scale
};

// Writes the row's next n weights (code * scale) to out; reads no byte past `end`.
inline void dequantize(GroupCursor& g, int n, int group, const uint8_t* end, float* out)
{
    while (n > 0) {
        if (g.left == 0) {
            uint16_t h;
            std::memcpy(&h, g.p, 2);
            g.scale = _cvtsh_ss(h);
            g.p += 2;
            g.left = group;  // the row's last group may be shorter: n never reaches past it
        }
        const int t = n < g.left ? n : g.left;
        const __m512 s = _mm512_set1_ps(g.scale);
        for (int i = 0; i < t; i += 16) {
            const int k = t - i;
            __m128i codes;
            // A full load may take bytes past the group (the next scale and codes): their lanes
            // are rewritten by the next group's stores or never read by the expand.
            if (end - (g.p + i) >= 16)
                codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.p + i));
            else
                codes = _mm_maskz_loadu_epi8(
                    k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1u),
                    g.p + i);
            const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes));
            _mm512_storeu_ps(out + i, _mm512_mul_ps(f, s));  // lanes past t: rewritten or unread
        }
        g.p += t;
        g.left -= t;
        out += t;
        n -= t;
    }
}

// Rows [r, r + R); every per-row array indexed by constants after unrolling (see
// sparse_kernels_avx512.cpp: kept in registers that way).
template <int R>
void rows(const SparseRowsInt8& m, const float* x, float* y, int64_t r)
{
    const uint8_t* bits[R];
    GroupCursor cur[R];
    __m512 acc[R][2];
    alignas(64) float buf[R][kBufFloats];
    const uint8_t* end = m.values + m.valuesBytes;
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) {
        bits[j] = m.bitmap + (r + j) * m.bitmapRowBytes;
        cur[j] = GroupCursor{m.values + m.rowOffsets[r + j], 0, 0.0f};
        acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    }
    const int64_t cols = m.cols, words = m.bitmapRowBytes / 8;
    for (int64_t w0 = 0; w0 < words; w0 += kBlockWords) {
        const int64_t w1 = w0 + kBlockWords < words ? w0 + kBlockWords : words;
        const float* v[R];
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            int n = 0;
            for (int64_t wi = w0; wi < w1; ++wi) {
                uint64_t b;
                std::memcpy(&b, bits[j] + 8 * wi, 8);
                n += __builtin_popcountll(b);
            }
            dequantize(cur[j], n, m.group, end, buf[j]);
            v[j] = buf[j];
        }
        for (int64_t wi = w0; wi < w1; ++wi) {  // 64 columns a step
            const int64_t c = wi * 64;
            __m512 xs[4];
            loadXWord(x, c, cols, xs);
#pragma GCC unroll 4
            for (int j = 0; j < R; ++j) {
                uint64_t b;
                std::memcpy(&b, bits[j] + 8 * wi, 8);
#pragma GCC unroll 4
                for (int q = 0; q < 4; ++q) {
                    const uint32_t m16 = static_cast<uint32_t>(b >> (16 * q)) & 0xFFFF;
                    const __m512 w16 = _mm512_maskz_expand_ps(static_cast<__mmask16>(m16),
                                                              _mm512_loadu_ps(v[j]));
                    acc[j][q & 1] = _mm512_fmadd_ps(w16, xs[q], acc[j][q & 1]);
                    v[j] += __builtin_popcount(m16);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) y[r + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]));
}

}  // namespace

void gemvSparseInt8Avx512(const SparseRowsInt8& m, const float* x, float* y, int64_t rowBegin,
                          int64_t rowEnd)
{
    constexpr int R = 4;
    int64_t r = rowBegin;
    for (; r + R <= rowEnd; r += R) rows<R>(m, x, y, r);
    for (; r < rowEnd; ++r) rows<1>(m, x, y, r);
}

}  // namespace spillway::gpu::cpu
