#pragma once
// The C entry points of the Vulkan backend module (lib/libspillway_vulkan.so). gpu/registry.cpp
// dlopen()s the module and looks these up by name; nothing else in the program names Vulkan.
// This header includes no Vulkan header, so the registry compiles without the SDK.
//
// Loading order (registry.cpp): dlopen("libvulkan.so.1") (is there a loader?), then the module,
// then spillway_vulkan_abi() and spillway_vulkan_interface() must match the registry's own
// numbers, then spillway_vulkan_probe() (is there a usable device?), then
// spillway_vulkan_create().

#include <cstddef>

namespace spillway::gpu {
class Device;
struct DeviceOptions;
}  // namespace spillway::gpu

// Bump when the signatures below change.
#define SPILLWAY_VULKAN_MODULE_ABI 1

extern "C" {

// SPILLWAY_VULKAN_MODULE_ABI as the module was built.
using SpillwayVulkanAbiFn = int (*)();
int spillway_vulkan_abi();

// A hash of the C++ headers the module shares with the program (gpu/device.h, gpu/dtype.h,
// gpu/registry.h, base/result.h); see gpu/CMakeLists.txt.
using SpillwayVulkanInterfaceFn = const char* (*)();
const char* spillway_vulkan_interface();

// Number of usable Vulkan devices (>= 0: physical devices with Vulkan 1.2, buffer device
// addresses and 64-bit integers), or -1 with a one-line reason in err (a NUL-terminated string
// of at most errLen bytes). 0 with a reason in err when devices exist but none is usable.
using SpillwayVulkanProbeFn = int (*)(char* err, size_t errLen);
int spillway_vulkan_probe(char* err, size_t errLen);

// A new device (delete it through Device's virtual destructor), or nullptr with a reason in err.
// Never throws.
using SpillwayVulkanCreateFn = spillway::gpu::Device* (*)(const spillway::gpu::DeviceOptions* options,
                                                         char* err, size_t errLen);
spillway::gpu::Device* spillway_vulkan_create(const spillway::gpu::DeviceOptions* options, char* err,
                                              size_t errLen);

}  // extern "C"
