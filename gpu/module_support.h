#pragma once
// Shared by the backend modules' C entry points (gpu/cuda/cuda_module.cpp,
// gpu/vulkan/vulkan_module.cpp): the export attribute and the error-string convention.

#include <cstddef>
#include <cstdio>
#include <exception>
#include <string>

#include "gpu/device.h"
#include "gpu/registry.h"

#define SPILLWAY_EXPORT __attribute__((visibility("default")))

namespace spillway::gpu {

// Copies a one-line reason into the caller's buffer (NUL-terminated, cut to errLen bytes).
inline void writeModuleError(char* err, size_t errLen, const std::string& message)
{
    if (err && errLen) std::snprintf(err, errLen, "%s", message.c_str());
}

// A module's create entry point: DeviceT::create(options, &error), with the reason in err when it
// fails and no exception past the C boundary. `label` prefixes exception messages ("cuda").
template <class DeviceT>
Device* createModuleDevice(const char* label, const DeviceOptions* options, char* err, size_t errLen)
{
    try {
        std::string error;
        auto device = DeviceT::create(options ? *options : DeviceOptions{}, &error);
        if (!device) writeModuleError(err, errLen, error);
        return device.release();
    } catch (const std::exception& e) {
        writeModuleError(err, errLen, std::string(label) + ": " + e.what());
    } catch (...) {
        writeModuleError(err, errLen, std::string(label) + ": unknown exception while creating the device");
    }
    return nullptr;
}

}  // namespace spillway::gpu
