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

// The device "auto" picks, and why: a usable CUDA device first, then a Vulkan device that is a
// real GPU (not a CPU driver such as lavapipe), else the CPU device. `why` says why the faster
// backends were passed over ("" when CUDA was taken); the user sees it.
struct DeviceChoice {
    std::unique_ptr<Device> device;
    std::string why;
};

std::vector<BackendStatus> backendStatus();
// backend: "cpu", "cuda", "vulkan" or "auto" (see DeviceChoice).
Result<std::unique_ptr<Device>> createDevice(const std::string& backend, const DeviceOptions& options);
Result<DeviceChoice> chooseDevice(const std::string& backend, const DeviceOptions& options);

}  // namespace spillway::gpu
