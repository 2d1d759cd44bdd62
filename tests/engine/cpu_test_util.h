#pragma once
// Helpers shared by the CPU backend tests (test_cpu_conversions.cpp, test_cpu_matvec.cpp,
// test_cpu_ops.cpp, test_cpu_device.cpp): independent fp16/bf16 decoders, test weights in the
// stored byte layouts of gpu/dtype.h with this header's own decoding of them, and the list of
// kernel-set and thread-count configurations every conformance test runs through.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_device.h"
#include "../common/kernel_sets.h"

namespace spillway::cpu_test {

using namespace spillway::gpu;

// ---- independent references: decoders written from the format definitions -----------------------

inline double refHalf(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -24);
    return sign * std::ldexp(1024 + m, e - 25);
}

inline double refBf16(uint16_t h)
{
    const int e = (h >> 7) & 0xff, m = h & 0x7f;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0xff) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -133);
    return sign * std::ldexp(128 + m, e - 134);
}

inline uint32_t bitsOf(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float floatOf(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// ---- test weights: bytes in the stored layout plus this header's decoding of them ---------------

struct TestMatrix {
    DType type;
    int64_t rows, cols;
    size_t stride;
    std::vector<uint8_t> bytes;
    std::vector<double> values;  // (rows, cols) decoded
    MatrixView view() const { return {type, bytes.data(), rows, cols, stride}; }
};

inline void putU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Random weights of `type`; each row is followed by `padding` bytes (a stride past the row).
inline TestMatrix makeMatrix(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng,
                             size_t padding = 0)
{
    TestMatrix m{type, rows, cols, rowBytes(type, cols) + padding, {}, {}};
    m.bytes.assign(m.stride * rows, 0xcd);
    m.values.resize(rows * cols);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), scale(0.001f, 0.1f);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = m.bytes.data() + r * m.stride;
        double* out = m.values.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            if (type == DType::F32) {
                const float v = unit(rng);
                std::memcpy(row + 4 * c, &v, 4);
                out[c] = v;
            } else if (type == DType::F16 || type == DType::BF16) {
                const float v = unit(rng) * (c % 7 == 0 ? 1e-6f : 1.0f);  // some fp16 subnormals
                const uint16_t h = type == DType::F16 ? fp32ToFp16(v) : fp32ToBf16(v);
                putU16(row + 2 * c, h);
                out[c] = type == DType::F16 ? refHalf(h) : refBf16(h);
            }
        }
        for (int64_t b = 0; b < cols / 32 && (type == DType::Q8_0 || type == DType::Q4_0); ++b) {
            const uint16_t dh = fp32ToFp16(scale(rng));
            const double d = refHalf(dh);
            uint8_t* block = row + b * (type == DType::Q8_0 ? 34 : 18);
            putU16(block, dh);
            for (int i = 0; i < (type == DType::Q8_0 ? 32 : 16); ++i) block[2 + i] = byte(rng);
            for (int i = 0; i < 32; ++i) {
                const int q = type == DType::Q8_0
                                  ? static_cast<int8_t>(block[2 + i])
                                  : ((i < 16 ? block[2 + i] : block[2 + i - 16] >> 4) & 15) - 8;
                out[b * 32 + i] = d * q;
            }
        }
    }
    return m;
}

inline std::vector<float> randomVector(int64_t n, std::mt19937_64& rng, float amplitude = 1.0f)
{
    std::uniform_real_distribution<float> unit(-amplitude, amplitude);
    std::vector<float> v(n);
    for (float& x : v) x = unit(rng);
    return v;
}

// ---- outputs, configurations --------------------------------------------------------------------

// Outputs are filled with kPoison first, so that a skipped row or a write past the end shows.
inline const float kPoison = floatOf(0x7fbadbadu);  // a NaN no kernel produces

inline bool isPoison(float f) { return bitsOf(f) == 0x7fbadbadu; }

// One device configuration; configs() lists every kernel set this CPU runs, with 1 and 3 threads.
struct Config {
    CpuKernelSet set;
    int threads;
};

inline std::vector<Config> configs()
{
    std::vector<Config> list;
    for (CpuKernelSet set : testing_support::kernelSetsThisCpuRuns())
        for (int threads : {1, 3}) list.push_back({set, threads});
    return list;
}

// "avx2/3t Q8_0 257x4128": names the case in failure messages.
inline std::string label(const Device& d, DType t, int64_t rows, int64_t cols)
{
    return d.info().kernels + "/" + std::to_string(d.info().threads) + "t " + dtypeName(t) + " " +
           std::to_string(rows) + "x" + std::to_string(cols);
}

inline constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                      DType::Q4_0};

}  // namespace spillway::cpu_test
