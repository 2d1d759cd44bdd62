#pragma once
// One integer prompt product (gpu/cpu/gemm_int8_x86.h) called directly, as CpuDevice::gemm calls
// it: the n tokens of x (row stride cols) packed once, then every block of rows multiplied into
// y (token j's row r at j * ldc + r), y first filled with `fill` so that a test sees what was
// written past the rows.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_kernels.h"
#include "prompt_tolerance.h"

namespace spillway::testing_support {

struct Int8ProductRun {
    std::vector<uint8_t> packed;  // the packed batch (pack's output)
    std::vector<float> y;
};

inline Int8ProductRun runInt8Product(const gpu::cpu::GemmInt8& p, const gpu::MatrixView& w, const float* x,
                                     int64_t n, int64_t ldc, float fill)
{
    const int64_t cols = w.cols, rows = w.rows;
    const int64_t panels = (n + p.tokens - 1) / p.tokens;
    Int8ProductRun run;
    run.packed.resize(size_t(panels * (cols / 32) * gpu::cpu::gemmInt8XBlockBytes(p.tokens)));
    std::vector<uint8_t> panel(size_t(cols / 32 * gpu::cpu::gemmInt8WBlockBytes(p.rowsPerBlock)));
    p.pack(x, cols, n, cols, 0, panels, w, run.packed.data());
    run.y.assign(size_t(n * ldc), fill);
    for (int64_t r0 = 0; r0 < rows; r0 += p.rowsPerBlock)
        p.rows(run.packed.data(), n, w, r0, std::min(rows, r0 + p.rowsPerBlock), run.y.data(), ldc, panel.data());
    return run;
}

// Each token of a run's y against the decode kernels of `device` on that token alone: within
// kPromptIntegerTolerance, and nothing written past the rows (still `fill`, bit for bit).
inline void expectTokensNearDecode(gpu::Device& device, const gpu::MatrixView& w, const float* x,
                                   const std::vector<float>& y, int64_t n, int64_t ldc, float fill,
                                   const std::string& what)
{
    const int64_t cols = w.cols, rows = w.rows;
    for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(0, std::memcmp(&y[size_t(j * ldc + rows)], &fill, sizeof fill)) << what << ": wrote past the rows";
        std::vector<float> alone(size_t(rows), fill);
        device.matvec(w, x + j * cols, alone.data());
        const std::vector<float> got(y.begin() + j * ldc, y.begin() + j * ldc + rows);
        EXPECT_LE(relativeL2(got, alone), kPromptIntegerTolerance) << what << " token " << j;
    }
}

}  // namespace spillway::testing_support
