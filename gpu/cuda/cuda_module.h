#pragma once
// The C entry points of the CUDA backend module (lib/libspillway_cuda.so). gpu/registry.cpp
// dlopen()s the module and looks these up by name; nothing else in the program names CUDA.
// This header includes no CUDA header, so the registry compiles without the toolkit.
//
// Loading order (registry.cpp): dlopen("libcuda.so.1") and cuInit (is there a driver?), then
// the module, then spillway_cuda_abi() and spillway_cuda_interface() must match the registry's
// own numbers, then spillway_cuda_probe() (is there a device?), then spillway_cuda_create().

#include <cstddef>

namespace spillway::gpu {
class Device;
struct DeviceOptions;
}  // namespace spillway::gpu

// Bump when the signatures below change.
#define SPILLWAY_CUDA_MODULE_ABI 1

extern "C" {

// SPILLWAY_CUDA_MODULE_ABI as the module was built.
using SpillwayCudaAbiFn = int (*)();
int spillway_cuda_abi();

// A hash of the C++ headers the module shares with the program (gpu/device.h, gpu/dtype.h,
// gpu/registry.h, base/result.h); see gpu/CMakeLists.txt.
using SpillwayCudaInterfaceFn = const char* (*)();
const char* spillway_cuda_interface();

// Number of usable CUDA devices (>= 0), or -1 with a one-line reason in err (a NUL-terminated
// string of at most errLen bytes).
using SpillwayCudaProbeFn = int (*)(char* err, size_t errLen);
int spillway_cuda_probe(char* err, size_t errLen);

// A new device (delete it through Device's virtual destructor), or nullptr with a reason in err.
// Never throws.
using SpillwayCudaCreateFn = spillway::gpu::Device* (*)(const spillway::gpu::DeviceOptions* options,
                                                       char* err, size_t errLen);
spillway::gpu::Device* spillway_cuda_create(const spillway::gpu::DeviceOptions* options, char* err,
                                            size_t errLen);

}  // extern "C"
