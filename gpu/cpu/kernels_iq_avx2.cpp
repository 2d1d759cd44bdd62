// The AVX2 set's row kernels of the types of iq_expand.h: fused kernels (kernels_iq_fused_x86.h,
// kernels_iq_lattice_x86.h) for every type.

#include "gpu/cpu/kernels_iq_fused_x86.h"
#include "gpu/cpu/kernels_iq_lattice_x86.h"

namespace spillway::gpu::cpu {

namespace {

struct Avx2IqIsa {
    static __m256i madd16(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
    static __m256i negate(__m256i x, uint32_t bits)
    {
        const __m256i m = iqBytesFromBits(bits);
        return _mm256_sub_epi8(_mm256_xor_si256(x, m), m);
    }
    static __m256i bitBytes(uint32_t bits, char value) { return _mm256_and_si256(iqBytesFromBits(bits), _mm256_set1_epi8(value)); }
    static __m256i pairScales(__m256i s16, int c)
    {
        // Within the int32 holding int16 scales (2c, 2c + 1): low 128-bit lane takes the first,
        // high lane the second.
        const __m256i split = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                               2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
        return _mm256_shuffle_epi8(iqLane(s16, c), split);
    }
};

}  // namespace

void fillAvx2IqKernels(Kernels& k)
{
    fillIqFusedX86<Avx2IqIsa>(k);
    fillIqLatticeX86<Avx2IqIsa>(k);
}

}  // namespace spillway::gpu::cpu
