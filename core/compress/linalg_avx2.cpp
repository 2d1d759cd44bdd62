// linalg.h's elementwise kernels for AVX2 + FMA (this file is compiled for that set only).
#include "core/compress/linalg.h"
#define SPILLWAY_LINALG_LANES 8
#include "core/compress/linalg_kernels.h"

namespace spillway::compress::linalg::detail {

void logisticResidualAvx2(float* z, const uint8_t* y, size_t count, float wPos)
{
    logisticResidualBody<SPILLWAY_LINALG_LANES>(z, y, count, wPos);
}

}  // namespace spillway::compress::linalg::detail
