#include "gpu/vulkan/vulkan_instance.h"

#include <cstdlib>
#include <string>

namespace spillway::gpu::vulkan {

std::string resultName(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS: return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS";
    default: break;
    }
    return "VkResult " + std::to_string(static_cast<int>(r));
}

namespace {

VkInstance createInstance(std::string* error)
{
    // vkEnumerateInstanceVersion is 1.1; a 1.0 loader lacks it.
    auto enumerateVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    uint32_t version = VK_API_VERSION_1_0;
    if (enumerateVersion) enumerateVersion(&version);
    if (version < VK_API_VERSION_1_2) {
        *error = "the Vulkan loader offers API " + std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                 std::to_string(VK_API_VERSION_MINOR(version)) + "; Spillway needs 1.2";
        return VK_NULL_HANDLE;
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "Spillway";
    app.pEngineName = "Spillway";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    VkInstance instance = VK_NULL_HANDLE;
    const VkResult r = vkCreateInstance(&info, nullptr, &instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        *error = "no Vulkan driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)";
        return VK_NULL_HANDLE;
    }
    if (r != VK_SUCCESS) {
        *error = "vkCreateInstance failed (" + resultName(r) + ")";
        return VK_NULL_HANDLE;
    }
    return instance;
}

}  // namespace

VkInstance sharedInstance(std::string* error)
{
    struct Made {
        VkInstance instance = VK_NULL_HANDLE;
        std::string error;
    };
    static const Made made = [] {
        Made m;
        m.instance = createInstance(&m.error);
        return m;
    }();
    if (!made.instance) *error = made.error;
    return made.instance;
}

const char* deviceTypeName(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: break;
    }
    return "other";
}

namespace {

// Lower is better.
int typeRank(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: break;
    }
    return 4;
}

PhysicalCandidate describe(VkPhysicalDevice device, uint32_t index)
{
    PhysicalCandidate c;
    c.device = device;
    c.index = index;
    vkGetPhysicalDeviceProperties(device, &c.properties);
    if (c.properties.apiVersion < VK_API_VERSION_1_2) {
        c.unusable = "offers Vulkan " + std::to_string(VK_API_VERSION_MAJOR(c.properties.apiVersion)) + "." +
                     std::to_string(VK_API_VERSION_MINOR(c.properties.apiVersion)) + ", not 1.2";
        return c;
    }
    VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &v12;
    vkGetPhysicalDeviceFeatures2(device, &features);
    c.float64 = features.features.shaderFloat64 == VK_TRUE;
    if (!v12.bufferDeviceAddress) {
        c.unusable = "lacks buffer device addresses (bufferDeviceAddress)";
        return c;
    }
    if (!features.features.shaderInt64) {
        c.unusable = "lacks 64-bit integers in shaders (shaderInt64)";
        return c;
    }
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(device, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(device, &families, props.data());
    for (uint32_t f = 0; f < families; ++f) {
        if (props[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            c.computeQueueFamily = f;
            return c;
        }
    }
    c.unusable = "has no compute queue";
    return c;
}

}  // namespace

std::vector<PhysicalCandidate> listPhysicalDevices(VkInstance instance, std::string* error)
{
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &count, nullptr);
    if (r != VK_SUCCESS) {
        *error = "vkEnumeratePhysicalDevices failed (" + resultName(r) + ")";
        return {};
    }
    std::vector<VkPhysicalDevice> devices(count);
    r = vkEnumeratePhysicalDevices(instance, &count, devices.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        *error = "vkEnumeratePhysicalDevices failed (" + resultName(r) + ")";
        return {};
    }
    std::vector<PhysicalCandidate> list;
    for (uint32_t i = 0; i < count; ++i) list.push_back(describe(devices[i], i));
    return list;
}

const PhysicalCandidate* choosePhysicalDevice(const std::vector<PhysicalCandidate>& list, std::string* error)
{
    if (list.empty()) {
        *error = "no Vulkan device";
        return nullptr;
    }
    if (const char* forced = std::getenv("SPILLWAY_VULKAN_DEVICE"); forced && *forced) {
        char* end = nullptr;
        const long index = std::strtol(forced, &end, 10);
        if (*end != '\0' || index < 0 || index >= static_cast<long>(list.size())) {
            *error = std::string("SPILLWAY_VULKAN_DEVICE=") + forced + " names no device (there are " +
                     std::to_string(list.size()) + ", numbered from 0)";
            return nullptr;
        }
        const PhysicalCandidate& c = list[static_cast<size_t>(index)];
        if (!c.unusable.empty()) {
            *error = std::string("Vulkan device ") + forced + " (" + c.properties.deviceName + ") " + c.unusable;
            return nullptr;
        }
        return &c;
    }
    const PhysicalCandidate* best = nullptr;
    for (const PhysicalCandidate& c : list) {
        if (!c.unusable.empty()) continue;
        if (!best || typeRank(c.properties.deviceType) < typeRank(best->properties.deviceType)) best = &c;
    }
    if (!best) {
        *error = "no usable Vulkan device:";
        for (const PhysicalCandidate& c : list)
            *error += std::string(" ") + c.properties.deviceName + " " + c.unusable + ";";
        error->pop_back();
    }
    return best;
}

}  // namespace spillway::gpu::vulkan
