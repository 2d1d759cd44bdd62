// The prompt path's integer product for Q8_0, Q4_0, the K-quants and the IQ types on AVX-512 VNNI (compiled with the
// AVX-512 flags; chosen at run time only on CPUs that have them); what it computes and the
// layouts are in gemm_int8_x86.h. Where the float product (gemm_avx512.cpp) unpacks the weights
// to floats and does 16 multiply-adds per instruction, this one keeps them 8-bit and does 64
// (vpdpbusd: 16 lanes, each the sum of four u8 x s8 products), as llama.cpp's quantized products
// do. A 6-token x 32-row tile: per block of 32 values of k, 12 zmm integer sums (8 vpdpbusd each),
// then scaled into 12 float accumulators (Q6_K: per half block of 16 values; Q4_K / Q5_K: and
// their mins subtracted).
// No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_int8_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = 6;
constexpr int64_t kRows = 32;

// The tile for one kind of weights (gemm_int8_x86.h).
struct Tiles {
    static constexpr bool kVnni = true;
    template <Int8Kind K>
    static void run(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc, int64_t tokens,
                    int64_t rows)
    {
        // (The masked conversion: GCC 12 warns about the unmasked one's undefined pass-through.)
        const auto toFloat = [](__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); };
        __m512 c[kTokens][2];
        for (int64_t t = 0; t < kTokens; ++t) c[t][0] = c[t][1] = _mm512_setzero_ps();
        // Groups [g0, g1) of one block from the starts `start`, scaled by `scale` (times xs[t]
        // where xs is given: Plain) and added to `into`.
        const auto groups = [&](const uint8_t* wp, const int32_t* words, int64_t g0, int64_t g1, const int32_t* start,
                                const float* scale, const float* xs, __m512 (&into)[kTokens][2]) {
            __m512i acc[kTokens][2];
            for (int64_t t = 0; t < kTokens; ++t) acc[t][0] = acc[t][1] = _mm512_set1_epi32(start[t]);
            for (int64_t g = g0; g < g1; ++g) {
                const __m512i w0 = _mm512_loadu_si512(wp + g * kRows * 4);
                const __m512i w1 = _mm512_loadu_si512(wp + g * kRows * 4 + 64);
                for (int64_t t = 0; t < kTokens; ++t) {
                    const __m512i xv = _mm512_set1_epi32(words[g * kTokens + t]);
                    acc[t][0] = _mm512_dpbusd_epi32(acc[t][0], w0, xv);
                    acc[t][1] = _mm512_dpbusd_epi32(acc[t][1], w1, xv);
                }
            }
            const __m512 d0 = _mm512_loadu_ps(scale), d1 = _mm512_loadu_ps(scale + 16);
            for (int64_t t = 0; t < kTokens; ++t) {
                const __m512 s = xs ? _mm512_set1_ps(xs[t]) : _mm512_setzero_ps();
                into[t][0] = _mm512_fmadd_ps(toFloat(acc[t][0]), xs ? _mm512_mul_ps(d0, s) : d0, into[t][0]);
                into[t][1] = _mm512_fmadd_ps(toFloat(acc[t][1]), xs ? _mm512_mul_ps(d1, s) : d1, into[t][1]);
            }
        };
        constexpr int64_t kWBytes = wBlockBytesOf(K, kRows);
        if constexpr (!isK(K)) {
            for (int64_t b = 0; b < blocks; ++b, x += gemmInt8XBlockBytes(kTokens), wp += kWBytes) {
                const Int8XBlock<kTokens> xb(x);
                const float* dw = reinterpret_cast<const float*>(wp + kInt8Groups * kRows * 4);
                groups(wp, xb.words, 0, kInt8Groups, xb.start, dw, xb.d, c);
                if constexpr (K == Int8Kind::PlainMin) {
                    const __m512 m0 = _mm512_loadu_ps(dw + kRows), m1 = _mm512_loadu_ps(dw + kRows + 16);
                    for (int64_t t = 0; t < kTokens; ++t) {
                        const __m512 s = _mm512_set1_ps(xb.msum[t]);
                        c[t][0] = _mm512_fmadd_ps(m0, s, c[t][0]);
                        c[t][1] = _mm512_fmadd_ps(m1, s, c[t][1]);
                    }
                }
            }
        } else {
            // The mins (Min4, Min5: one per block; Min16: one per half) times x's sums.
            const auto mins = [](const float* m, const float* sums, __m512 (&cs)[kTokens][2]) {
                const __m512 m0 = _mm512_loadu_ps(m), m1 = _mm512_loadu_ps(m + 16);
                for (int64_t t = 0; t < kTokens; ++t) {
                    const __m512 s = _mm512_set1_ps(sums[t]);
                    cs[t][0] = _mm512_fnmadd_ps(m0, s, cs[t][0]);
                    cs[t][1] = _mm512_fnmadd_ps(m1, s, cs[t][1]);
                }
            };
            for (int64_t b0 = 0; b0 < blocks; b0 += kSuper / kQ8Block) {
                __m512 cs[kTokens][2];
                for (int64_t t = 0; t < kTokens; ++t) cs[t][0] = cs[t][1] = _mm512_setzero_ps();
                const float* dx = nullptr;
                for (int64_t b = 0; b < kSuper / kQ8Block; ++b, x += gemmInt8XBlockBytes(kTokens), wp += kWBytes) {
                    const Int8XBlock<kTokens> xb(x);
                    dx = xb.d;
                    const float* dw = reinterpret_cast<const float*>(wp + kInt8Groups * kRows * 4);
                    if constexpr (isHalves(K)) {
                        groups(wp, xb.words, 0, kInt8Groups / 2, xb.start, dw, nullptr, cs);
                        groups(wp, xb.words, kInt8Groups / 2, kInt8Groups, xb.startHi, dw + kRows, nullptr, cs);
                    } else if constexpr (K == Int8Kind::Min16) {
                        groups(wp, xb.words, 0, kInt8Groups / 2, kZeroStarts, dw, nullptr, cs);
                        groups(wp, xb.words, kInt8Groups / 2, kInt8Groups, kZeroStarts, dw + kRows, nullptr, cs);
                        mins(dw + 2 * kRows, xb.bsumLo, cs);
                        mins(dw + 3 * kRows, xb.msum, cs);
                    } else {
                        groups(wp, xb.words, 0, kInt8Groups, xb.start, dw, nullptr, cs);
                        if constexpr (hasMin(K)) mins(dw + kRows, xb.msum, cs);
                    }
                }
                for (int64_t t = 0; t < kTokens; ++t) {
                    const __m512 s = _mm512_set1_ps(dx[t]);
                    c[t][0] = _mm512_fmadd_ps(cs[t][0], s, c[t][0]);
                    c[t][1] = _mm512_fmadd_ps(cs[t][1], s, c[t][1]);
                }
            }
        }
        const __mmask16 m0 = rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1);
        const __mmask16 m1 =
            rows >= 32 ? __mmask16(0xFFFF) : rows > 16 ? __mmask16((1u << (rows - 16)) - 1) : __mmask16(0);
        for (int64_t t = 0; t < tokens; ++t) {
            _mm512_mask_storeu_ps(y + t * ldc, m0, c[t][0]);
            _mm512_mask_storeu_ps(y + t * ldc + 16, m1, c[t][1]);
        }
    }
};

}  // namespace

GemmInt8 gemmInt8Avx512()
{
    return int8Product<kRows, kTokens, Tiles>("avx512-vnni");
}

}  // namespace spillway::gpu::cpu
