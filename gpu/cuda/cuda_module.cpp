// The module's C entry points (see cuda_module.h). Nothing here throws past the boundary.

#include "gpu/cuda/cuda_module.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "gpu/cuda/cuda_device.h"
#include "gpu/module_support.h"

#ifndef SPILLWAY_GPU_INTERFACE_HASH
#error "SPILLWAY_GPU_INTERFACE_HASH must be defined (gpu/CMakeLists.txt)"
#endif

namespace {

using spillway::gpu::writeModuleError;

}  // namespace

extern "C" {

SPILLWAY_EXPORT int spillway_cuda_abi() { return SPILLWAY_CUDA_MODULE_ABI; }

SPILLWAY_EXPORT const char* spillway_cuda_interface() { return SPILLWAY_GPU_INTERFACE_HASH; }

SPILLWAY_EXPORT int spillway_cuda_probe(char* err, size_t errLen)
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice) return 0;
    if (e != cudaSuccess) {
        writeModuleError(err, errLen, std::string("cudaGetDeviceCount failed (") + cudaGetErrorName(e) + ": " +
                                    cudaGetErrorString(e) + ")");
        return -1;
    }
    return count;
}

SPILLWAY_EXPORT spillway::gpu::Device* spillway_cuda_create(const spillway::gpu::DeviceOptions* options,
                                                            char* err, size_t errLen)
{
    return spillway::gpu::createModuleDevice<spillway::gpu::cuda::CudaDevice>("cuda", options, err, errLen);
}

}  // extern "C"
