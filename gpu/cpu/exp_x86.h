#pragma once
// exp(x) on 8 (AVX2 + FMA) or 16 (AVX-512) floats, for the softmax and SiLU of the AVX2 and
// AVX-512 sets (Kernels::expSum, Kernels::swiglu), where glibc's expf one value at a time was a
// sixth of a 512-token prompt's time. Range reduction x = n ln2 + r (|r| <= ln2 / 2, ln2 in two
// parts), e^r by its Taylor series to r^7 (truncation under 1e-8 relative) in Horner form with
// FMA, then 2^n through the exponent bits: within 2 ulp of expf over the normal range. Below
// kExpLow (where expf is subnormal, at most 1.2e-38) the result is 0; above kExpHigh it is +inf;
// a NaN stays a NaN. Included by files compiled for AVX2 or wider; internal to each.

#include <immintrin.h>

namespace spillway::gpu::cpu {

inline constexpr float kExpLow = -87.33654f;   // ln(FLT_MIN)
inline constexpr float kExpHigh = 88.72283f;   // ln(FLT_MAX)
// x = n ln2 + r with ln2 = kLn2Hi + kLn2Lo (kLn2Hi exact in few bits, so n kLn2Hi is exact).
inline constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
// e^r's Taylor coefficients, highest first (Horner): 1 / 7!, ..., 1 / 1!, 1 / 0!.
inline constexpr int kExpTerms = 8;
inline constexpr float kExpTaylor[kExpTerms] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                                1.0f / 6.0f,    0.5f,           1.0f,           1.0f};

static inline __m256 expPs256(__m256 x)
{
    const __m256 log2e = _mm256_set1_ps(kLog2e);
    const __m256 ln2hi = _mm256_set1_ps(kLn2Hi), ln2lo = _mm256_set1_ps(kLn2Lo);
    // min / max with x second: a NaN x passes through.
    const __m256 c = _mm256_max_ps(_mm256_set1_ps(kExpLow), _mm256_min_ps(_mm256_set1_ps(kExpHigh), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(c, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2hi, c);
    r = _mm256_fnmadd_ps(n, ln2lo, r);
    __m256 p = _mm256_set1_ps(kExpTaylor[0]);
#pragma GCC unroll 8
    for (int i = 1; i < kExpTerms; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpTaylor[i]));
    // 2^n for n in [-126, 128]: n = 128 (x near kExpHigh) as 2 * 2^127.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i top = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, _mm256_and_si256(top, _mm256_set1_epi32(1))),
                                                         _mm256_set1_epi32(127)),
                                        23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_blendv_ps(y, _mm256_add_ps(y, y), _mm256_castsi256_ps(top));
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kExpLow), _CMP_LT_OQ), y);  // 0 below
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(kExpHigh), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// x[i] = exp(x[i] - shift), and their sum in double (Kernels::expSum).
static inline double expSumAvx2(float* x, int n, float shift)
{
    const __m256 s = _mm256_set1_ps(shift);
    __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 y = expPs256(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        _mm256_storeu_ps(x + i, y);
        sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
        sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
    }
    if (i < n) {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 y = expPs256(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), s));
        y = _mm256_and_ps(y, _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(x + i, mask, y);
        sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
        sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
    }
    const __m256d t = _mm256_add_pd(sum0, sum1);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up (Kernels::swiglu).
static inline void swigluAvx2(const float* gate, const float* up, float* out, int n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = expPs256(_mm256_xor_ps(g, sign));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    if (i < n) {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 g = _mm256_maskload_ps(gate + i, mask);
        const __m256 e = expPs256(_mm256_xor_ps(g, sign));
        _mm256_maskstore_ps(out + i, mask,
                            _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_maskload_ps(up + i, mask)));
    }
}

#ifdef __AVX512F__
static inline __m512 expPs512(__m512 x)
{
    const __m512 c = _mm512_max_ps(_mm512_set1_ps(kExpLow), _mm512_min_ps(_mm512_set1_ps(kExpHigh), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), c);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kExpTaylor[0]);
#pragma GCC unroll 8
    for (int i = 1; i < kExpTerms; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpTaylor[i]));
    // p * 2^n, exact for n in [-126, 128] (vscalefps).
    __m512 y = _mm512_scalef_ps(p, n);
    y = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLow), _CMP_LT_OQ), y);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpHigh), _CMP_GT_OQ), _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

static inline double expSumAvx512(float* x, int n, float shift)
{
    const __m512 s = _mm512_set1_ps(shift);
    __m512d sum0 = _mm512_setzero_pd(), sum1 = _mm512_setzero_pd();
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        const __m512 y = _mm512_maskz_mov_ps(m, expPs512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
        _mm512_mask_storeu_ps(x + i, m, y);
        sum0 = _mm512_add_pd(sum0, _mm512_cvtps_pd(_mm512_castps512_ps256(y)));
        sum1 = _mm512_add_pd(sum1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8(0xF), _mm512_castps_pd(y), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1));
}

static inline void swigluAvx512(const float* gate, const float* up, float* out, int n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512 e = expPs512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
    }
}
#endif

}  // namespace spillway::gpu::cpu
