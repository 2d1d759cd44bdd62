// The AVX-512 set's row kernels of the types of iq_expand.h: fused kernels (kernels_iq_fused_x86.h,
// kernels_iq_lattice_x86.h) for every type, with VNNI's vpdpwssd and AVX-512 BW masks for signs.

#include "gpu/cpu/kernels_iq_fused_x86.h"
#include "gpu/cpu/kernels_iq_lattice_x86.h"

namespace spillway::gpu::cpu {

namespace {

struct Avx512IqIsa {
    static __m256i madd16(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
    static __m256i negate(__m256i x, uint32_t bits)
    {
        return _mm256_mask_sub_epi8(x, static_cast<__mmask32>(bits), _mm256_setzero_si256(), x);
    }
    static __m256i bitBytes(uint32_t bits, char value)
    {
        return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), _mm256_set1_epi8(value));
    }
    static __m256i pairScales(__m256i s16, int c)
    {
        const __m256i index = _mm256_setr_epi16(short(2 * c), short(2 * c), short(2 * c), short(2 * c), short(2 * c),
                                                short(2 * c), short(2 * c), short(2 * c), short(2 * c + 1), short(2 * c + 1),
                                                short(2 * c + 1), short(2 * c + 1), short(2 * c + 1), short(2 * c + 1),
                                                short(2 * c + 1), short(2 * c + 1));
        return _mm256_permutexvar_epi16(index, s16);
    }
};

}  // namespace

void fillAvx512IqKernels(Kernels& k)
{
    fillIqFusedX86<Avx512IqIsa>(k);
    fillIqLatticeX86<Avx512IqIsa>(k);
}

}  // namespace spillway::gpu::cpu
