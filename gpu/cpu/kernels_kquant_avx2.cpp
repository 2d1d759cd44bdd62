// Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and Q8_G64 rows for AVX2 + FMA + F16C (compiled with those flags;
// chosen at run time only on CPUs that have them): kernels_kquant_x86.h with maddubs / madd as
// the integer dot products.

#include <immintrin.h>

#include "gpu/cpu/kernels_kquant_x86.h"

namespace spillway::gpu::cpu {

namespace {

struct Avx2KIsa {
    // u * s pairs summed to int16 (|pair| <= 2 * 128 * 127 < 2^15: no saturation), then to int32.
    static __m256i dotUS(__m256i u, __m256i s)
    {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
    }
    static __m256i madd16(__m256i acc, __m256i a, __m256i b)
    {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
    }
    static __m256i groupDot64(const uint8_t* w, const int8_t* x)
    {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32));
        const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x));
        const __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 32));
        return _mm256_add_epi32(dotSS<Avx2KIsa>(w0, x0), dotSS<Avx2KIsa>(w1, x1));
    }
};

}  // namespace

void fillAvx2KQuantKernels(Kernels& k) { fillKQuantX86<Avx2KIsa>(k); }

}  // namespace spillway::gpu::cpu
