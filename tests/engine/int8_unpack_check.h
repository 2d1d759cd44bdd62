#pragma once
// The prompt product's AVX2 unpacking of a block type against iq_expand.h's expansion
// (int8_unpack_check_avx2.cpp; call it only on a CPU with AVX2, FMA and F16C).

#include <cstdint>

#include "gpu/dtype.h"

namespace spillway::testing_support {

// How many of `count` blocks of `type` unpack to other bytes (q = v + the type's shift) or other
// float scales (bit for bit) than the expansion gives; the first difference is described in
// `what`. -1 where the type has no unpacking.
int int8UnpackMismatches(gpu::DType type, const uint8_t* blocks, int count, char* what, int whatBytes);

}  // namespace spillway::testing_support
