#pragma once
// The CPU kernel sets a test compares: every set this CPU runs (scalar always, AVX2 and AVX-512
// where the CPU has them), never a set the CPU lacks under that set's name (createCpuDevice lowers
// such a request to the widest set below it, so "avx512" on an AVX2-only CPU would quietly run
// AVX2 again). The first call prints which sets run here and which do not, and why, so a log
// says what was compared; CpuKernelSets.DetectionMatchesTheCpuFlags checks that no set the CPU
// has is left out.

#include <cstdio>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_device.h"

namespace spillway::testing_support {

// Prints, once per process: "kernel sets: scalar, avx2 run here; avx512 not on this CPU".
inline void announceKernelSets()
{
    static const bool once = [] {
        const int best = static_cast<int>(gpu::bestCpuKernelSet());
        std::string ran, absent;
        for (int s = 0; s <= static_cast<int>(gpu::CpuKernelSet::Avx512); ++s) {
            std::string& list = s <= best ? ran : absent;
            if (!list.empty()) list += ", ";
            list += gpu::cpuKernelSetName(static_cast<gpu::CpuKernelSet>(s));
        }
        std::printf("kernel sets: %s run here%s%s\n", ran.c_str(), absent.empty() ? "" : "; ",
                    absent.empty() ? "" : (absent + " not on this CPU (not compared)").c_str());
        std::fflush(stdout);
        return true;
    }();
    (void)once;
}

// Every kernel set this CPU runs, lowest first.
inline std::vector<gpu::CpuKernelSet> kernelSetsThisCpuRuns()
{
    announceKernelSets();
    std::vector<gpu::CpuKernelSet> sets;
    for (int s = 0; s <= static_cast<int>(gpu::bestCpuKernelSet()); ++s)
        sets.push_back(static_cast<gpu::CpuKernelSet>(s));
    return sets;
}

// The same, by the names SPILLWAY_CPU_KERNELS takes ("scalar", "avx2", "avx512").
inline std::vector<std::string> kernelSetNamesThisCpuRuns()
{
    std::vector<std::string> names;
    for (gpu::CpuKernelSet s : kernelSetsThisCpuRuns()) names.push_back(gpu::cpuKernelSetName(s));
    return names;
}

}  // namespace spillway::testing_support
