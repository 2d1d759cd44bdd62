// The prompt product's AVX2 unpacking of each block type (gpu/cpu/int8_unpack_x86.h) against
// iq_expand.h's scalar expansion, for test_quant_types: compiled for AVX2 (its name), called
// only where the CPU has it. No std containers here (see gpu/cpu/kernels_common.h).

#include "int8_unpack_check.h"

#include <cstdio>
#include <cstring>

#include "gpu/cpu/gemm_int8_x86.h"  // int8TypeOf's shifts
#include "gpu/cpu/int8_unpack_x86.h"
#include "gpu/cpu/iq_expand.h"

namespace spillway::testing_support {

using namespace spillway::gpu;
using namespace spillway::gpu::cpu;

namespace {

bool sameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

int int8UnpackMismatches(DType type, const uint8_t* blocks, int count, char* what, int whatBytes)
{
    const int64_t bytes = dtypeTraits(type).blockBytes;
    const int shift = int8TypeOf(type).shift;
    const float* fp16 = fp16Table();
    int bad = 0;
    const auto note = [&](int block, const char* part, int index, double got, double want) {
        if (bad++ == 0)
            std::snprintf(what, size_t(whatBytes), "block %d: %s %d is %g, the expansion gives %g", block, part, index,
                          got, want);
    };
    if (const Unpack256Fn unpack = unpack256Of(type)) {
        for (int k = 0; k < count; ++k) {
            const uint8_t* b = blocks + k * bytes;
            Expanded256 e;
            expand256Of(type)(b, fp16, e);
            __m256i v[8];
            float f[4][8];
            unpack(b, fp16, v, f);
            alignas(32) uint8_t got[256];
            for (int j = 0; j < 8; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(got + 32 * j), v[j]);
            const int before = bad;
            for (int i = 0; i < 256 && bad == before; ++i)
                if (got[i] != uint8_t(e.v[i] + shift)) note(k, "byte", i, got[i], uint8_t(e.v[i] + shift));
            for (int j = 0; j < 8 && bad == before; ++j)
                for (int h = 0; h < 2; ++h) {
                    const float want = e.D * static_cast<float>(e.scale[2 * j + h]);
                    const float wantMin = e.hasMin ? e.Dmin * static_cast<float>(e.min[2 * j + h]) : 0.0f;
                    if (!sameBits(f[h][j], want)) note(k, "scale of half", 2 * j + h, f[h][j], want);
                    else if (!sameBits(f[2 + h][j], wantMin)) note(k, "min of half", 2 * j + h, f[2 + h][j], wantMin);
                }
        }
    } else if (const Unpack32Fn unpack = unpack32Of(type)) {
        for (int k = 0; k < count; ++k) {
            const uint8_t* b = blocks + k * bytes;
            Expanded32 e;
            expand32Of(type)(b, fp16, e);
            float d = 0.0f, m = 0.0f;
            alignas(32) uint8_t got[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(got), unpack(b, fp16, d, m));
            const int before = bad;
            for (int i = 0; i < 32 && bad == before; ++i)
                if (got[i] != uint8_t(e.v[i] + shift)) note(k, "byte", i, got[i], uint8_t(e.v[i] + shift));
            if (bad == before && !sameBits(d, e.D)) note(k, "scale", 0, d, e.D);
            if (bad == before && !sameBits(m, e.M)) note(k, "min", 0, m, e.M);
        }
    } else {
        std::snprintf(what, size_t(whatBytes), "no unpacking for this type");
        return -1;
    }
    return bad;
}

}  // namespace spillway::testing_support
