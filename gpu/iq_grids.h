#pragma once
// The fixed tables of ggml's IQ and non-linear block types (gpu/dtype.h), shared by the CPU
// kernels, the CUDA and Vulkan code and the tests.
//
// The lattices (grids) of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M are data chosen
// by llama.cpp's authors, part of the file format: gpu/iq_grids.inc holds them as read out of
// ggml's ggml-common.h by gpu/iq_grids_extract.py (source tree and checksums in its header;
// llama.cpp's February 2025 tree and ik_llama.cpp's August 2026 tree hold the same tables), and
// test_iq_grids checks each table against its checksum. Each grid entry packs 8 (IQ3: 4) values,
// one per byte, lowest byte first: IQ2 values 8, 25, 43; IQ3 values 4 .. 62 (odd multiples of 2,
// then scaled); IQ1 values -1, 0, 1 as int8.
//
// The rest is defined by the formats themselves:
// - signs of IQ2_XXS / IQ2_XS / IQ3_XXS: 7 stored bits, the 8th the parity of the 7 (an even
//   number of minus signs), iqSigns();
// - IQ4_NL / IQ4_XS: 16 non-linear int8 levels, kIq4nlValues (ggml's kvalues_iq4nl);
// - MXFP4: the 16 FP4 E2M1 values (OCP Microscaling spec v1.0) times 2, kMxfp4Values, with the
//   block's E8M0 exponent halved to make up for it (e8m0Half).

#include <bit>
#include <cstdint>
#include <cstring>

#include "gpu/iq_grids.inc"

namespace spillway::gpu {

inline constexpr uint64_t kIq2xxsGrid[256] = {SPILLWAY_IQ2XXS_GRID};
inline constexpr uint64_t kIq2xsGrid[512] = {SPILLWAY_IQ2XS_GRID};
inline constexpr uint64_t kIq2sGrid[1024] = {SPILLWAY_IQ2S_GRID};
inline constexpr uint32_t kIq3xxsGrid[256] = {SPILLWAY_IQ3XXS_GRID};
inline constexpr uint32_t kIq3sGrid[512] = {SPILLWAY_IQ3S_GRID};
inline constexpr uint64_t kIq1sGrid[2048] = {SPILLWAY_IQ1S_GRID};

inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, doubled.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ1_S and IQ1_M shift each group of 8 grid values by +-1/8.
inline constexpr float kIq1Delta = 0.125f;

// The 8 signs of a group from its 7 stored bits (bit j set: value j is negative).
constexpr uint8_t iqSigns(uint32_t seven)
{
    seven &= 127;
    return static_cast<uint8_t>(seven | ((__builtin_popcount(seven) & 1) << 7));
}

// An E8M0 exponent e as the float 2^(e - 127) / 2 (MXFP4's scale, halved because its values are
// stored doubled); e = 0 and 1 give the subnormals 2^-128 and 2^-127.
constexpr float e8m0Half(uint8_t e)
{
    const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : (e == 1 ? 0x00400000u : 0x00200000u);
    return std::bit_cast<float>(bits);
}

}  // namespace spillway::gpu
