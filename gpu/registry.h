#pragma once
// Which backends were compiled in, and how to make a device. Only registry.cpp knows the list.

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/device.h"

namespace spillway::gpu {

struct BackendStatus {
    std::string name;       // "cpu", "cuda", "vulkan"
    bool compiled = false;  // built into this binary
    bool usable = false;    // a device can be created here
    std::string reason;     // why not, when it is not usable
};

struct DeviceOptions {
    int threads = 0;           // CPU worker threads; 0 = one per core
    uint64_t memoryLimit = 0;  // device-memory budget in bytes; 0 = the device's own memory
};

std::vector<BackendStatus> backendStatus();
Result<std::unique_ptr<Device>> createDevice(const std::string& backend, const DeviceOptions& options);

}  // namespace spillway::gpu
