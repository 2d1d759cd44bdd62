// linalg.h's vectorized kernels for AVX-512 (this file is compiled for that set only).
#define SPILLWAY_LINALG_LANES 16
#define SPILLWAY_LINALG_SUFFIX Avx512
#include "core/compress/linalg_kernels.h"
