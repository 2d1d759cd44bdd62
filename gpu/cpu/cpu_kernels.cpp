#include "gpu/cpu/cpu_kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <array>

#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

// CPUID feature bits, and the OS's consent (XCR0) to save the wider registers.
struct CpuFeatures {
    bool avx2 = false;    // AVX2 + FMA + F16C, with OS support for ymm state
    bool avx512 = false;  // AVX-512 F/BW/VL/DQ + VNNI, with OS support for zmm/opmask state
    bool avxVnni = false;  // AVX2 + the VEX-encoded VNNI (256-bit vpdpbusd)
};

uint64_t readXcr0()
{
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures probeCpu()
{
    CpuFeatures f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27);
    const bool avx = c & (1u << 28);
    const bool fma = c & (1u << 12);
    const bool f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = readXcr0();
    const bool ymmState = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
    const bool zmmState = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    const bool avx2 = b & (1u << 5);
    const bool avx512f = b & (1u << 16);
    const bool avx512dq = b & (1u << 17);
    const bool avx512bw = b & (1u << 30);
    const bool avx512vl = b & (1u << 31);
    const bool avx512vnni = c & (1u << 11);
    f.avx2 = ymmState && avx2 && fma && f16c;
    f.avx512 = f.avx2 && zmmState && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avxVnni = f.avx2 && (a & (1u << 4));
    return f;
}

const CpuFeatures& cpuFeatures()
{
    static const CpuFeatures f = probeCpu();
    return f;
}

}  // namespace

CpuKernelSet detectKernelSet()
{
    static const CpuKernelSet best = [] {
        const CpuFeatures& f = cpuFeatures();
        if (f.avx512) return CpuKernelSet::Avx512;
        if (f.avx2) return CpuKernelSet::Avx2;
        return CpuKernelSet::Scalar;
    }();
    return best;
}

const Kernels& kernelsFor(CpuKernelSet set)
{
    // Built once; a table is only filled for a set the CPU runs.
    static const std::array<Kernels, 3> tables = [] {
        std::array<Kernels, 3> t;
        const CpuKernelSet best = detectKernelSet();
        fillScalarKernels(t[0]);
        fillScalarKQuantKernels(t[0]);
        fillScalarIqKernels(t[0]);
        if (best >= CpuKernelSet::Avx2) {
            fillAvx2Kernels(t[1]);
            fillAvx2KQuantKernels(t[1]);
            fillAvx2IqKernels(t[1]);
            t[1].gemmInt8 = cpuFeatures().avxVnni ? gemmInt8AvxVnni() : gemmInt8Avx2();
        }
        if (best >= CpuKernelSet::Avx512) {
            fillAvx512Kernels(t[2]);
            fillAvx512KQuantKernels(t[2]);
            fillAvx512IqKernels(t[2]);
        }
        return t;
    }();
    const CpuKernelSet lowered = std::min(set, detectKernelSet());
    return tables[static_cast<int>(lowered)];
}

int gemmInt8Variants(GemmInt8* out)
{
    int count = 0;
    const CpuFeatures& f = cpuFeatures();
    if (f.avx512) out[count++] = gemmInt8Avx512();
    if (f.avxVnni) out[count++] = gemmInt8AvxVnni();
    if (f.avx2) out[count++] = gemmInt8Avx2();
    return count;
}

const float* fp16Table()
{
    static const float* table = [] {
        static float values[65536];
        for (uint32_t h = 0; h < 65536; ++h) values[h] = fp16ToFp32(static_cast<uint16_t>(h));
        return values;
    }();
    return table;
}

}  // namespace spillway::gpu::cpu

namespace spillway::gpu {

const char* cpuKernelSetName(CpuKernelSet set)
{
    switch (set) {
    case CpuKernelSet::Scalar: return "scalar";
    case CpuKernelSet::Avx2: return "avx2";
    case CpuKernelSet::Avx512: return "avx512";
    }
    return "scalar";
}

CpuKernelSet bestCpuKernelSet() { return cpu::detectKernelSet(); }

}  // namespace spillway::gpu
