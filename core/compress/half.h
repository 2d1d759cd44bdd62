#pragma once
// The inline fp16 / bf16 -> fp32 helpers of the kernels (gpu/half_inline.h), as compress::detail.

#include "gpu/half_inline.h"

namespace spillway::compress {
namespace detail = ::spillway::gpu::detail;
}  // namespace spillway::compress
