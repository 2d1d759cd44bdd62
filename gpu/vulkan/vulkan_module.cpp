// The module's C entry points (see vulkan_module.h). Nothing here throws past the boundary.

#include "gpu/vulkan/vulkan_module.h"

#include <cstdio>
#include <exception>
#include <string>

#include "gpu/vulkan/vulkan_device.h"
#include "gpu/vulkan/vulkan_instance.h"
#include "gpu/module_support.h"

#ifndef SPILLWAY_GPU_INTERFACE_HASH
#error "SPILLWAY_GPU_INTERFACE_HASH must be defined (gpu/CMakeLists.txt)"
#endif

namespace {

using spillway::gpu::writeModuleError;

}  // namespace

extern "C" {

SPILLWAY_EXPORT int spillway_vulkan_abi() { return SPILLWAY_VULKAN_MODULE_ABI; }

SPILLWAY_EXPORT const char* spillway_vulkan_interface() { return SPILLWAY_GPU_INTERFACE_HASH; }

SPILLWAY_EXPORT int spillway_vulkan_probe(char* err, size_t errLen)
{
    using namespace spillway::gpu::vulkan;
    try {
        std::string error;
        VkInstance instance = sharedInstance(&error);
        if (!instance) {
            writeModuleError(err, errLen, error);
            return -1;
        }
        const std::vector<PhysicalCandidate> list = listPhysicalDevices(instance, &error);
        int usable = 0;
        for (const PhysicalCandidate& c : list) usable += c.unusable.empty() ? 1 : 0;
        if (error.empty()) choosePhysicalDevice(list, &error);  // the reason when none is usable
        if (usable == 0 || !error.empty()) writeModuleError(err, errLen, error);
        if (!error.empty() && usable > 0) return -1;  // e.g. SPILLWAY_VULKAN_DEVICE names none
        return usable;
    } catch (const std::exception& e) {
        writeModuleError(err, errLen, std::string("vulkan: ") + e.what());
    } catch (...) {
        writeModuleError(err, errLen, "vulkan: unknown exception while probing");
    }
    return -1;
}

SPILLWAY_EXPORT spillway::gpu::Device* spillway_vulkan_create(const spillway::gpu::DeviceOptions* options,
                                                              char* err, size_t errLen)
{
    return spillway::gpu::createModuleDevice<spillway::gpu::vulkan::VulkanDevice>("vulkan", options, err, errLen);
}

}  // extern "C"
