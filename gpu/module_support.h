#pragma once
// Shared by the backend modules' C entry points (gpu/cuda/cuda_module.cpp,
// gpu/vulkan/vulkan_module.cpp): the export attribute and the error-string convention.

#include <cstddef>
#include <cstdio>
#include <string>

#define SPILLWAY_EXPORT __attribute__((visibility("default")))

namespace spillway::gpu {

// Copies a one-line reason into the caller's buffer (NUL-terminated, cut to errLen bytes).
inline void writeModuleError(char* err, size_t errLen, const std::string& message)
{
    if (err && errLen) std::snprintf(err, errLen, "%s", message.c_str());
}

}  // namespace spillway::gpu
