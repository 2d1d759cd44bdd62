// Setting up the Vulkan device, its pipelines, recording and submitting ops, and errors.
// Memory and copies are in vulkan_memory.cpp, the ops in vulkan_ops.cpp.

#include "gpu/vulkan/vulkan_device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace spillway::gpu::vulkan {

namespace {

constexpr uint32_t kPushConstantBytes = 128;  // the minimum every device offers
constexpr uint32_t kBatchDispatches = 256;    // submit (without waiting) past this many
constexpr uint64_t kFenceTimeoutNs = 120ull * 1000 * 1000 * 1000;

bool hasExtension(VkPhysicalDevice device, const char* name)
{
    uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> list(count);
    if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, list.data()) != VK_SUCCESS) return false;
    for (const auto& e : list)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

std::string versionText(uint32_t v)
{
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v));
}

}  // namespace

std::unique_ptr<VulkanDevice> VulkanDevice::create(const DeviceOptions& options, std::string* error)
{
    std::unique_ptr<VulkanDevice> d(new VulkanDevice());
    d->m_instance = sharedInstance(error);
    if (!d->m_instance) return nullptr;
    const std::vector<PhysicalCandidate> list = listPhysicalDevices(d->m_instance, error);
    if (!error->empty()) return nullptr;
    const PhysicalCandidate* chosen = choosePhysicalDevice(list, error);
    if (!chosen) return nullptr;
    if (!d->setUp(*chosen, options, error)) return nullptr;  // the destructor undoes the rest
    return d;
}

bool VulkanDevice::setUp(const PhysicalCandidate& chosen, const DeviceOptions& options, std::string* error)
{
    auto fail = [error](const std::string& what, VkResult r) {
        *error = "vulkan: " + what + " failed (" + resultName(r) + ")";
        return false;
    };
    m_physical = chosen.device;
    m_queueFamily = chosen.computeQueueFamily;
    const char* noFloat64 = std::getenv("SPILLWAY_VULKAN_NO_FP64");
    m_float64 = chosen.float64 && !(noFloat64 && *noFloat64);
    const bool budgetExtension = hasExtension(m_physical, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = m_queueFamily;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    v12.bufferDeviceAddress = VK_TRUE;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &v12;
    features.features.shaderInt64 = VK_TRUE;
    features.features.shaderFloat64 = m_float64 ? VK_TRUE : VK_FALSE;
    const char* extensions[] = {VK_EXT_MEMORY_BUDGET_EXTENSION_NAME};
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = &features;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    info.enabledExtensionCount = budgetExtension ? 1 : 0;
    info.ppEnabledExtensionNames = extensions;
    if (VkResult r = vkCreateDevice(m_physical, &info, nullptr, &m_device); r != VK_SUCCESS)
        return fail("vkCreateDevice", r);
    vkGetDeviceQueue(m_device, m_queueFamily, 0, &m_queue);

    VkPhysicalDeviceSubgroupProperties subgroups{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    maintenance3.pNext = &subgroups;
    VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    properties.pNext = &maintenance3;
    vkGetPhysicalDeviceProperties2(m_physical, &properties);
    const VkPhysicalDeviceProperties& p = properties.properties;
    m_maxAllocation = maintenance3.maxMemoryAllocationSize;
    const VkSubgroupFeatureFlags arithmetic = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    const char* noSubgroups = std::getenv("SPILLWAY_VULKAN_NO_SUBGROUPS");
    m_subgroups = (subgroups.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                  (subgroups.supportedOperations & arithmetic) == arithmetic && !(noSubgroups && *noSubgroups) &&
                  subgroups.subgroupSize > 0;
    m_subgroupSize = std::max<uint32_t>(subgroups.subgroupSize, 1);
    for (int i = 0; i < 3; ++i) m_maxGroups[i] = p.limits.maxComputeWorkGroupCount[i];
    if (p.limits.maxPushConstantsSize < kPushConstantBytes) {
        *error = "vulkan: the device offers " + std::to_string(p.limits.maxPushConstantsSize) +
                 " bytes of push constants; the shaders need " + std::to_string(kPushConstantBytes);
        return false;
    }

    // Memory: the largest device-local heap, and what the budget extension says is free in it.
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 memory{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    if (budgetExtension) memory.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(m_physical, &memory);
    m_memoryProperties = memory.memoryProperties;
    uint32_t heap = 0;
    uint64_t heapBytes = 0;
    for (uint32_t h = 0; h < m_memoryProperties.memoryHeapCount; ++h) {
        const VkMemoryHeap& mh = m_memoryProperties.memoryHeaps[h];
        const bool local = mh.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
        if (local && mh.size > heapBytes) {
            heap = h;
            heapBytes = mh.size;
        }
    }
    uint64_t freeBytes = heapBytes;
    if (budgetExtension && budget.heapBudget[heap] > 0)
        freeBytes = budget.heapBudget[heap] > budget.heapUsage[heap]
                        ? budget.heapBudget[heap] - budget.heapUsage[heap]
                        : 0;

    // Copies by memcpy where the device shares the host's memory.
    const bool sharesMemory = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                              p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const char* staging = std::getenv("SPILLWAY_VULKAN_STAGING");
    const bool forceStaging = staging && *staging && std::strcmp(staging, "0") != 0;
    const VkMemoryPropertyFlags mappable = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    bool hasMappable = false;
    for (uint32_t t = 0; t < m_memoryProperties.memoryTypeCount; ++t)
        hasMappable |= (m_memoryProperties.memoryTypes[t].propertyFlags & mappable) == mappable;
    m_mappedDevice = sharesMemory && hasMappable && !forceStaging;

    // Timestamps for the timeline's marks, where the compute queue writes them.
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(m_physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> familyList(families);
    vkGetPhysicalDeviceQueueFamilyProperties(m_physical, &families, familyList.data());
    const uint32_t validBits = m_queueFamily < families ? familyList[m_queueFamily].timestampValidBits : 0;
    if (validBits > 0 && p.limits.timestampPeriod > 0) {
        VkQueryPoolCreateInfo queries{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        queries.queryType = VK_QUERY_TYPE_TIMESTAMP;
        queries.queryCount = uint32_t(kMaxMarks);
        if (vkCreateQueryPool(m_device, &queries, nullptr, &m_marks) != VK_SUCCESS) m_marks = VK_NULL_HANDLE;
        m_tickNs = p.limits.timestampPeriod;
        m_tickMask = validBits >= 64 ? ~uint64_t(0) : (uint64_t(1) << validBits) - 1;
    }

    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.pushConstantRangeCount = 1;
    layout.pPushConstantRanges = &range;
    if (VkResult r = vkCreatePipelineLayout(m_device, &layout, nullptr, &m_layout); r != VK_SUCCESS)
        return fail("vkCreatePipelineLayout", r);

    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = m_queueFamily;
    if (VkResult r = vkCreateCommandPool(m_device, &pool, nullptr, &m_computePool); r != VK_SUCCESS)
        return fail("vkCreateCommandPool", r);
    if (VkResult r = vkCreateCommandPool(m_device, &pool, nullptr, &m_copyPool); r != VK_SUCCESS)
        return fail("vkCreateCommandPool", r);
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = m_copyPool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    if (VkResult r = vkAllocateCommandBuffers(m_device, &alloc, &m_copy.cmd); r != VK_SUCCESS)
        return fail("vkAllocateCommandBuffers", r);
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (VkResult r = vkCreateFence(m_device, &fence, nullptr, &m_copy.fence); r != VK_SUCCESS)
        return fail("vkCreateFence", r);

    m_memory.setLimit(options.memoryLimit);
    DeviceInfo& di = m_info;
    di.backend = "vulkan";
    di.name = std::string(p.deviceName) + " (" + deviceTypeName(p.deviceType) + ", Vulkan " +
              versionText(p.apiVersion) + ")";
    di.totalMemory = options.memoryLimit ? std::min<uint64_t>(options.memoryLimit, heapBytes) : heapBytes;
    di.freeMemory = std::min<uint64_t>(di.totalMemory, freeBytes);
    di.threads = 1;
    // Printed as "(<kernels> kernels)" by spillway-cli.
    di.kernels = std::string("vulkan: ") + (m_mappedDevice ? "copies by memcpy" : "staged copies") + "; rope in " +
                 (m_float64 ? "fp64" : "fp32") + "; matvec " +
                 (m_subgroups ? "a subgroup of " + std::to_string(m_subgroupSize) + " per row"
                              : std::string("a workgroup per row")) + "; GLSL compute";
    di.caps.hostPointers = false;
    di.caps.asyncCopy = false;  // upload() waits for the ops issued before it (vulkan_memory.cpp)
    di.caps.pinnedHostMemory = true;
    di.caps.events = false;
    di.caps.emulated = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    di.caps.clampedSwiglu = true;  // pointwise.comp op 5 (attention sinks and windows: not yet)
    return createIqTables(error);
}

VulkanDevice::~VulkanDevice()
{
    if (m_device) {
        {
            std::lock_guard lock(m_recordMutex);
            if (m_recording.cmd) {
                vkEndCommandBuffer(m_recording.cmd);
                m_spare.push_back(m_recording);
                m_recording = {};
            }
            for (const Batch& b : m_inFlight) {
                vkWaitForFences(m_device, 1, &b.fence, VK_TRUE, kFenceTimeoutNs);
                m_spare.push_back(b);
            }
            m_inFlight.clear();
        }
        vkDeviceWaitIdle(m_device);
        destroyAllocation(m_xScratch);
        destroyAllocation(m_scoreScratch);
        destroyAllocation(m_tables);
        destroyAllocation(m_staging);
        for (auto& [address, a] : m_allocations) destroyAllocation(a);
        for (auto& [pointer, a] : m_hostAllocations) destroyAllocation(a);
        for (const Batch& b : m_spare) vkDestroyFence(m_device, b.fence, nullptr);
        if (m_copy.fence) vkDestroyFence(m_device, m_copy.fence, nullptr);
        if (m_computePool) vkDestroyCommandPool(m_device, m_computePool, nullptr);
        if (m_copyPool) vkDestroyCommandPool(m_device, m_copyPool, nullptr);
        for (VkPipeline p : m_pipelines)
            if (p) vkDestroyPipeline(m_device, p, nullptr);
        if (m_layout) vkDestroyPipelineLayout(m_device, m_layout, nullptr);
        if (m_marks) vkDestroyQueryPool(m_device, m_marks, nullptr);
        vkDestroyDevice(m_device, nullptr);
    }
}

const DeviceInfo& VulkanDevice::info() const { return failed() ? m_failedInfo : m_info; }

// The weight types the shaders compute on: F32, F16, BF16, Q8_0, Q4_0, the GGUF types Q4_1,
// Q5_0, Q4_K, Q5_K, Q6_K and Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ1_S, IQ1_M, MXFP4 (in their file layout), and bitmap sparse blobs.
bool VulkanDevice::supports(DType type) const
{
    switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::MXFP4:
    case DType::BitmapSparse: return true;
    default: return false;
    }
}

// ---- errors ----------------------------------------------------------------------------------

void VulkanDevice::recordError(ErrorCode code, const std::string& message)
{
    std::lock_guard lock(m_errorMutex);
    if (m_failed.load(std::memory_order_relaxed)) return;
    m_firstError = makeError(code, message);
    m_failedInfo = m_info;
    m_failedInfo.name += " [failed: " + message + "]";
    m_failed.store(true, std::memory_order_release);
}

bool VulkanDevice::check(VkResult r, const char* what)
{
    if (r == VK_SUCCESS) return true;
    const bool memory = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
    recordError(memory ? ErrorCode::OutOfDeviceMemory : ErrorCode::DeviceLost,
                std::string("vulkan device: ") + what + " failed (" + resultName(r) + ")");
    return false;
}

Status VulkanDevice::lastError() const
{
    if (!failed()) return {};
    std::lock_guard lock(m_errorMutex);
    return m_firstError;
}

// ---- pipelines -------------------------------------------------------------------------------

// Pipelines are made on first use: a CPU device (lavapipe) compiles each one with LLVM, and
// most programs use a few of the ops.
VkPipeline VulkanDevice::pipeline(Shader s)
{
    VkPipeline& p = m_pipelines[static_cast<int>(s)];
    if (p) return p;
    const std::span<const uint32_t> code = shaderCode(s);
    VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module.codeSize = code.size_bytes();
    module.pCode = code.data();
    VkShaderModule shader = VK_NULL_HANDLE;
    const std::string what = std::string("creating the ") + shaderName(s) + " shader";
    if (!check(vkCreateShaderModule(m_device, &module, nullptr, &shader), what.c_str())) return VK_NULL_HANDLE;
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = shader;
    info.stage.pName = "main";
    info.layout = m_layout;
    const VkResult r = vkCreateComputePipelines(m_device, VK_NULL_HANDLE, 1, &info, nullptr, &p);
    vkDestroyShaderModule(m_device, shader, nullptr);
    if (!check(r, what.c_str())) {
        p = VK_NULL_HANDLE;
        return VK_NULL_HANDLE;
    }
    return p;
}

// ---- recording and submission ----------------------------------------------------------------

namespace {

void memoryBarrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags srcAccess,
                   VkPipelineStageFlags dst, VkAccessFlags dstAccess)
{
    VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    b.srcAccessMask = srcAccess;
    b.dstAccessMask = dstAccess;
    vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
}

}  // namespace

bool VulkanDevice::beginBatch()
{
    Batch b;
    if (!m_spare.empty()) {
        b = m_spare.back();
        m_spare.pop_back();
    } else {
        VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        alloc.commandPool = m_computePool;
        alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        alloc.commandBufferCount = 1;
        if (!check(vkAllocateCommandBuffers(m_device, &alloc, &b.cmd), "vkAllocateCommandBuffers")) return false;
        VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if (!check(vkCreateFence(m_device, &fence, nullptr, &b.fence), "vkCreateFence")) {
            vkFreeCommandBuffers(m_device, m_computePool, 1, &b.cmd);
            return false;
        }
    }
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (!check(vkBeginCommandBuffer(b.cmd, &begin), "vkBeginCommandBuffer")) {
        m_spare.push_back(b);
        return false;
    }
    // Staged uploads (transfer) and the batches before this one (compute) are done with
    // whatever the ops read or write.
    memoryBarrier(b.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                  VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                  VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    m_recording = b;
    m_dispatches = 0;
    return true;
}

void VulkanDevice::submitBatch()
{
    if (!m_recording.cmd) return;
    Batch b = m_recording;
    m_recording = {};
    m_dispatches = 0;
    // The ops' writes visible to the host (mapped memory) and to staged downloads.
    memoryBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                  VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                  VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
    if (!check(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer") ||
        !check(vkResetFences(m_device, 1, &b.fence), "vkResetFences")) {
        m_spare.push_back(b);
        return;
    }
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &b.cmd;
    VkResult r;
    {
        std::lock_guard lock(m_queueMutex);
        r = vkQueueSubmit(m_queue, 1, &submit, b.fence);
    }
    if (!check(r, "vkQueueSubmit")) {
        vkResetCommandBuffer(b.cmd, 0);
        m_spare.push_back(b);
        return;
    }
    m_inFlight.push_back(b);
}

bool VulkanDevice::waitFence(VkFence fence, const char* what)
{
    const VkResult r = vkWaitForFences(m_device, 1, &fence, VK_TRUE, kFenceTimeoutNs);
    if (r == VK_TIMEOUT) {
        recordError(ErrorCode::DeviceLost, std::string("vulkan device: ") + what + " did not finish within " +
                                               std::to_string(kFenceTimeoutNs / 1000000000) + " s");
        return false;
    }
    return check(r, what);
}

void VulkanDevice::waitInFlight()
{
    for (const Batch& b : m_inFlight) {
        if (waitFence(b.fence, "ops")) vkResetCommandBuffer(b.cmd, 0);
        else continue;  // a batch that may still run keeps its command buffer
        m_spare.push_back(b);
    }
    m_inFlight.clear();
}

void VulkanDevice::flushAndWait()
{
    submitBatch();
    waitInFlight();
}

void VulkanDevice::synchronize()
{
    std::lock_guard lock(m_recordMutex);
    flushAndWait();
    m_syncNs = steadyClockNs();
}

// ---- the timeline's marks: timestamp queries in the batches ----------------------------------

void VulkanDevice::mark()
{
    std::lock_guard lock(m_recordMutex);
    if (!m_marks || failed()) return;
    if (!m_recording.cmd && !beginBatch()) return;
    const uint32_t query = uint32_t(m_markCount % kMaxMarks);
    vkCmdResetQueryPool(m_recording.cmd, m_marks, query, 1);
    // Bottom of the pipe: written once every command before it has finished.
    vkCmdWriteTimestamp(m_recording.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, m_marks, query);
    ++m_markCount;
}

size_t VulkanDevice::takeMarks(std::span<uint64_t> out)
{
    std::lock_guard lock(m_recordMutex);
    const size_t n = std::min({m_markCount, kMaxMarks, out.size()});
    const size_t made = m_markCount;
    m_markCount = 0;
    if (n == 0 || failed()) return 0;
    if (m_recording.cmd || !m_inFlight.empty()) {  // not waited for since: tie the clocks now
        flushAndWait();
        m_syncNs = steadyClockNs();
    }
    std::vector<uint64_t> ticks(n);
    for (size_t i = 0; i < n; ++i) {
        const uint32_t query = uint32_t((made - n + i) % kMaxMarks);
        const VkResult r = vkGetQueryPoolResults(m_device, m_marks, query, 1, sizeof(uint64_t), &ticks[i],
                                                 sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (!check(r, "vkGetQueryPoolResults (timeline marks)")) return 0;
    }
    for (size_t i = 0; i < n; ++i) {
        const uint64_t before = uint64_t(double((ticks[n - 1] - ticks[i]) & m_tickMask) * m_tickNs);
        out[i] = m_syncNs > before ? m_syncNs - before : 0;
    }
    return n;
}

void VulkanDevice::dispatch(Shader s, const void* push, uint32_t pushBytes, uint64_t groups, bool barrierBefore)
{
    if (groups == 0) return;
    const uint64_t x = std::min<uint64_t>(groups, m_maxGroups[0]);
    const uint64_t y = (groups + x - 1) / x;
    if (y > m_maxGroups[1]) {
        recordError(ErrorCode::InvalidArgument, std::string("vulkan device: ") + shaderName(s) + " needs " +
                                                    std::to_string(groups) + " workgroups, more than it takes");
        return;
    }
    dispatch3(s, push, pushBytes, static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1, barrierBefore);
}

void VulkanDevice::dispatch3(Shader s, const void* push, uint32_t pushBytes, uint32_t x, uint32_t y, uint32_t z,
                             bool barrierBefore)
{
    if (failed() || x == 0 || y == 0 || z == 0) return;
    const VkPipeline p = pipeline(s);
    if (!p) return;
    if (!m_recording.cmd && !beginBatch()) return;
    const VkCommandBuffer cmd = m_recording.cmd;
    if (barrierBefore && m_dispatches > 0)
        memoryBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    vkCmdPushConstants(cmd, m_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pushBytes, push);
    vkCmdDispatch(cmd, x, y, z);
    if (++m_dispatches >= kBatchDispatches) submitBatch();
}

}  // namespace spillway::gpu::vulkan
