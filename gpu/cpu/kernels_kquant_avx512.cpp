// Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and Q8_G64 rows for AVX-512 + VNNI (compiled with AVX-512
// F/BW/VL/DQ/VNNI; chosen at run time only on CPUs that have them): kernels_kquant_x86.h with
// VNNI's fused dot products (vpdpbusd, vpdpwssd) on 256 bits, and the Q8_G64 group dot on 512.

#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers trip these
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "gpu/cpu/kernels_kquant_x86.h"

namespace spillway::gpu::cpu {

namespace {

struct VnniKIsa {
    static __m256i dotUS(__m256i u, __m256i s)
    {
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
    }
    static __m256i madd16(__m256i acc, __m256i a, __m256i b)
    {
        return _mm256_dpwssd_epi32(acc, a, b);
    }
    // One 64-byte group in one register: |w| times x with w's sign, then the two halves added.
    static __m256i groupDot64(const uint8_t* w, const int8_t* x)
    {
        const __m512i wq = _mm512_loadu_si512(w);
        const __m512i xq = _mm512_load_si512(x);
        const __mmask64 negative = _mm512_movepi8_mask(wq);
        const __m512i signedX = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
        const __m512i dot =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wq), signedX);
        return _mm256_add_epi32(_mm512_castsi512_si256(dot), _mm512_extracti64x4_epi64(dot, 1));
    }
};

}  // namespace

void fillAvx512KQuantKernels(Kernels& k) { fillKQuantX86<VnniKIsa>(k); }

}  // namespace spillway::gpu::cpu
