// linalg.h's vectorized kernels for AVX-512 (this file is compiled for that set only).
#include "core/compress/linalg.h"
#define SPILLWAY_LINALG_LANES 16
#include "core/compress/linalg_kernels.h"

namespace spillway::compress::linalg::detail {

void logisticResidualAvx512(float* z, const uint8_t* y, size_t count, float wPos)
{
    logisticResidualBody<SPILLWAY_LINALG_LANES>(z, y, count, wPos);
}

void matvecAvx512(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y)
{
    matvecBody(m, rows, cols, v, bias, y);
}

}  // namespace spillway::compress::linalg::detail
