// libFuzzer target: arbitrary bytes as blocks of ggml's newer block types (Q2_K, Q3_K, Q5_1,
// IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, MXFP4): the first byte picks
// the type, the rest are whole blocks. Every block is decoded (gpu/cpu/iq_blocks.h) and expanded
// to the matvec form (gpu/cpu/iq_expand.h); wherever the decoded value and the block's scales are
// finite, the expansion must give the same value (D * scale * v - Dmin * min) to float rounding,
// so an index or shift that reads the wrong bits is a finding, not only one that reads outside.
// SPILLWAY_FUZZ_QUANT_TYPE=<name> (e.g. IQ2_XXS) fixes the type, so that one run gives one decoder
// all its time (tests/fuzz/RUNS.md records 10 minutes per type); the first byte is then ignored.
// run_fuzz: -max_len=4096

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/cpu/iq_expand.h"

namespace spillway::gpu::cpu {

// The scalar kernels' fp16 table, without the rest of the CPU backend.
const float* fp16Table()
{
    static float* table = [] {
        static float t[65536];
        for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16ToFp32(static_cast<uint16_t>(h));
        return t;
    }();
    return table;
}

}  // namespace spillway::gpu::cpu

namespace {

using namespace spillway::gpu;
using namespace spillway::gpu::cpu;

constexpr DType kTypes[] = {DType::Q2_K,    DType::Q3_K,   DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S,
                            DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,  DType::IQ1_S,   DType::IQ1_M,
                            DType::Q5_1,    DType::IQ4_NL, DType::MXFP4};

void check(bool ok, DType t, int i, double want, double got)
{
    if (ok) return;
    std::fprintf(stderr, "fuzz_quant_blocks: %s value %d decodes to %.9g, its expansion gives %.9g\n", dtypeName(t), i,
                 want, got);
    std::abort();
}

// The type fixed by SPILLWAY_FUZZ_QUANT_TYPE, or -1: the first byte picks it.
int fixedType()
{
    static const int fixed = [] {
        const char* name = std::getenv("SPILLWAY_FUZZ_QUANT_TYPE");
        if (!name || !*name) return -1;
        for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
            if (std::strcmp(dtypeName(kTypes[i]), name) == 0) return int(i);
        std::fprintf(stderr, "fuzz_quant_blocks: SPILLWAY_FUZZ_QUANT_TYPE=%s is not one of the new block types\n", name);
        std::exit(2);
    }();
    return fixed;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max(std::fabs(a), std::fabs(b)) + 1e-30; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 1) return 0;
    const int fixed = fixedType();
    const DType type = kTypes[fixed >= 0 ? size_t(fixed) : data[0] % (sizeof kTypes / sizeof kTypes[0])];
    const DTypeTraits& tr = dtypeTraits(type);
    const float* fp16 = fp16Table();
    float out[256];
    for (size_t at = 1; at + size_t(tr.blockBytes) <= size; at += size_t(tr.blockBytes)) {
        const uint8_t* b = data + at;
        if (!decodeIqBlock(type, b, fp16, out)) std::abort();
        if (Expand256Fn f = expand256Of(type)) {
            Expanded256 e;
            f(b, fp16, e);
            for (int i = 0; i < 256; ++i) {
                const double v = double(e.D) * e.scale[i / 16] * e.v[i] - (e.hasMin ? double(e.Dmin) * e.min[i / 16] : 0.0);
                if (std::isfinite(out[i]) && std::isfinite(e.D) && std::isfinite(e.Dmin)) check(close(out[i], v), type, i, out[i], v);
            }
        } else if (Expand32Fn g = expand32Of(type)) {
            Expanded32 e;
            g(b, fp16, e);
            for (int i = 0; i < 32; ++i) {
                const double v = double(e.D) * e.v[i] + e.M;
                if (std::isfinite(out[i]) && std::isfinite(e.D) && std::isfinite(e.M)) check(close(out[i], v), type, i, out[i], v);
            }
        }
    }
    return 0;
}
