#pragma once
// The opaque CPU device (gpu/opaque_device.h) under the name the tests use.

#include "gpu/opaque_device.h"

namespace spillway::testing_support {
using gpu::OpaqueDevice;
}
