#pragma once
// The Vulkan instance and the choice of physical device, shared by the module's probe and by
// VulkanDevice::create.
//
// A physical device is usable when it offers Vulkan 1.2, buffer device addresses (the ops take
// device "pointers" as VkDeviceAddress values, so the engine's pointer arithmetic works
// unchanged), 64-bit integers in shaders, and a compute queue. Preference: discrete GPU, then
// integrated, virtual, CPU (Mesa's lavapipe); SPILLWAY_VULKAN_DEVICE=<index> picks one of the
// list vkEnumeratePhysicalDevices gives.

#include <vulkan/vulkan.h>

#include <string>
#include <vector>

namespace spillway::gpu::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and so on.
std::string resultName(VkResult r);

// The process's instance for API 1.2, made on first use and never destroyed, or VK_NULL_HANDLE
// with a one-line reason in *error (the same reason every time). The probe and every device use
// it: creating an instance loads the driver (lavapipe loads LLVM: a tenth of a second or more),
// and the loader unloads the driver with the last instance destroyed; Mesa's lavapipe leaves a
// few allocations behind at each unload, which LeakSanitizer then reports from an unknown
// module. The driver's resources go with the process.
VkInstance sharedInstance(std::string* error);

struct PhysicalCandidate {
    VkPhysicalDevice device = VK_NULL_HANDLE;
    uint32_t index = 0;            // in vkEnumeratePhysicalDevices' order
    VkPhysicalDeviceProperties properties{};
    uint32_t computeQueueFamily = 0;
    bool float64 = false;          // shaderFloat64
    std::string unusable;          // why not, "" when usable
};

// Every physical device of the instance, usable or not (empty with *error set on failure).
std::vector<PhysicalCandidate> listPhysicalDevices(VkInstance instance, std::string* error);

// The device to use: SPILLWAY_VULKAN_DEVICE's, else the most preferred usable one. nullptr with
// a one-line reason in *error when there is none.
const PhysicalCandidate* choosePhysicalDevice(const std::vector<PhysicalCandidate>& list, std::string* error);

// "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other".
const char* deviceTypeName(VkPhysicalDeviceType type);

}  // namespace spillway::gpu::vulkan
