// linalg.h's vectorized kernels for AVX2 + FMA (this file is compiled for that set only).
#define SPILLWAY_LINALG_LANES 8
#define SPILLWAY_LINALG_SUFFIX Avx2
#include "core/compress/linalg_kernels.h"
