// Baseline x86-64 row kernels of Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ1_S, IQ1_M and MXFP4 (iq_expand.h): plain int32 loops, the reference for the
// AVX2 and AVX-512 sets, which compute the same int32 sums.

#include "gpu/cpu/iq_expand.h"

namespace spillway::gpu::cpu {

namespace {

struct ScalarDot {
    static int32_t scaled(const int8_t* v, const int8_t* x, const int16_t* scale)
    {
        int32_t sum = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int i = 16 * g; i < 16 * g + 16; ++i) dot += int32_t(v[i]) * x[i];
            sum += int32_t(scale[g]) * dot;
        }
        return sum;
    }
    static int32_t block32(const int8_t* v, const int8_t* x)
    {
        int32_t dot = 0;
        for (int i = 0; i < 32; ++i) dot += int32_t(v[i]) * x[i];
        return dot;
    }
};

}  // namespace

void fillScalarIqKernels(Kernels& k) { fillIqKernels<ScalarDot>(k); }

void decodeIqBlocks(DType type, const uint8_t* data, int64_t n, float* out)
{
    const auto& tr = dtypeTraits(type);
    const float* fp16 = fp16Table();
    for (int64_t b = 0; b < n / tr.blockSize; ++b) decodeIqBlock(type, data + b * tr.blockBytes, fp16, out + b * tr.blockSize);
}

}  // namespace spillway::gpu::cpu
