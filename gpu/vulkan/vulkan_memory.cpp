// Device and host memory of the Vulkan device, the address map, and copies.

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "gpu/vulkan/vulkan_device.h"

namespace spillway::gpu::vulkan {

namespace {

constexpr uint64_t kBufferGranule = 256;        // buffer sizes round up to this (whole words)
constexpr uint64_t kHostAlignment = 4096;       // allocateHost() promise
constexpr uint64_t kStagingBytes = 16u << 20;   // staged copies go in chunks of this

uint64_t roundUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

std::string hex(uint64_t v)
{
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
}

// The first memory type allowed by `bits` with all of `wanted`, trying each in order.
int findMemoryType(const VkPhysicalDeviceMemoryProperties& props, uint32_t bits,
                   std::initializer_list<VkMemoryPropertyFlags> preferences)
{
    for (VkMemoryPropertyFlags wanted : preferences)
        for (uint32_t t = 0; t < props.memoryTypeCount; ++t)
            if ((bits & (1u << t)) && (props.memoryTypes[t].propertyFlags & wanted) == wanted)
                return static_cast<int>(t);
    return -1;
}

}  // namespace

Result<VulkanDevice::Allocation> VulkanDevice::makeAllocation(uint64_t bytes, bool hostSide)
{
    const char* who = hostSide ? "host" : "device";
    Allocation a;
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = roundUp(std::max<uint64_t>(bytes, 1), kBufferGranule);
    info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (!hostSide) info.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    auto memoryError = [&](VkResult r, const char* what) -> Error {
        const bool oom = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
        const ErrorCode outOf = hostSide ? ErrorCode::OutOfMemory : ErrorCode::OutOfDeviceMemory;
        return makeError(oom ? outOf : ErrorCode::DeviceLost,
                         std::string("vulkan device: cannot allocate ") + std::to_string(bytes) + " bytes of " + who +
                             " memory (" + what + ": " + resultName(r) + ")");
    };
    if (m_maxAllocation && info.size > m_maxAllocation)
        return makeError(hostSide ? ErrorCode::OutOfMemory : ErrorCode::OutOfDeviceMemory,
                         "vulkan device: " + std::to_string(bytes) +
                             " bytes are more than one allocation may hold (" +
                             std::to_string(m_maxAllocation) + ")");
    if (VkResult r = vkCreateBuffer(m_device, &info, nullptr, &a.buffer); r != VK_SUCCESS)
        return memoryError(r, "vkCreateBuffer");
    a.bytes = info.size;
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(m_device, a.buffer, &req);
    constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    constexpr VkMemoryPropertyFlags kHost =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int type;
    if (hostSide)
        type = findMemoryType(m_memoryProperties, req.memoryTypeBits,
                              {kHost | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, kHost});
    else if (m_mappedDevice)
        type = findMemoryType(m_memoryProperties, req.memoryTypeBits, {kLocal | kHost});
    else
        type = findMemoryType(m_memoryProperties, req.memoryTypeBits, {kLocal, 0});
    if (type < 0) {
        vkDestroyBuffer(m_device, a.buffer, nullptr);
        return makeError(ErrorCode::DeviceLost, std::string("vulkan device: no memory type for ") + who + " buffers");
    }
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.pNext = hostSide ? nullptr : &flags;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = static_cast<uint32_t>(type);
    if (VkResult r = vkAllocateMemory(m_device, &alloc, nullptr, &a.memory); r != VK_SUCCESS) {
        vkDestroyBuffer(m_device, a.buffer, nullptr);
        return memoryError(r, "vkAllocateMemory");
    }
    VkResult r = vkBindBufferMemory(m_device, a.buffer, a.memory, 0);
    if (r == VK_SUCCESS && (hostSide || m_mappedDevice)) {
        void* p = nullptr;
        r = vkMapMemory(m_device, a.memory, 0, VK_WHOLE_SIZE, 0, &p);
        a.mapped = static_cast<uint8_t*>(p);
    }
    if (r != VK_SUCCESS) {
        destroyAllocation(a);
        return memoryError(r, "vkBindBufferMemory / vkMapMemory");
    }
    if (!hostSide) {
        VkBufferDeviceAddressInfo addressInfo{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
        addressInfo.buffer = a.buffer;
        a.address = vkGetBufferDeviceAddress(m_device, &addressInfo);
        if (a.address == 0 || a.address % 64 != 0) {
            const uint64_t got = a.address;
            destroyAllocation(a);
            return makeError(ErrorCode::DeviceLost, "vulkan device: the driver gave buffer address " + hex(got) +
                                                        ", not 64-byte aligned");
        }
    }
    return a;
}

void VulkanDevice::destroyAllocation(Allocation& a)
{
    if (a.mapped) vkUnmapMemory(m_device, a.memory);
    if (a.buffer) vkDestroyBuffer(m_device, a.buffer, nullptr);
    if (a.memory) vkFreeMemory(m_device, a.memory, nullptr);
    a = Allocation{};
}

Result<Buffer> VulkanDevice::allocate(size_t bytes)
{
    if (failed()) return lastError().error();
    SPILLWAY_TRY(m_memory.reserve(bytes, "vulkan device"));
    auto a = makeAllocation(bytes, false);
    if (!a) {
        m_memory.release(bytes);
        return a.error();
    }
    {
        std::lock_guard lock(m_allocationsMutex);
        m_allocations[a->address] = *a;
    }
    return Buffer(reinterpret_cast<void*>(static_cast<uintptr_t>(a->address)), bytes, &VulkanDevice::releaseDevice,
                  this);
}

Result<Buffer> VulkanDevice::allocateHost(size_t bytes)
{
    if (failed()) return lastError().error();
    auto a = makeAllocation(bytes + kHostAlignment, true);
    if (!a) return a.error();
    const auto start = reinterpret_cast<uintptr_t>(a->mapped);
    const uintptr_t aligned = roundUp(start, kHostAlignment);
    {
        std::lock_guard lock(m_allocationsMutex);
        m_hostAllocations[aligned] = *a;
    }
    m_memory.addHost(bytes);
    return Buffer(reinterpret_cast<void*>(aligned), bytes, &VulkanDevice::releaseHost, this);
}

void VulkanDevice::releaseDevice(void* owner, void* data, size_t bytes)
{
    auto* self = static_cast<VulkanDevice*>(owner);
    {
        // Ops recorded or running may still use the buffer (as cudaFree, wait for them).
        std::lock_guard lock(self->m_recordMutex);
        if (self->m_recording.cmd || !self->m_inFlight.empty()) self->flushAndWait();
    }
    Allocation a;
    {
        std::lock_guard lock(self->m_allocationsMutex);
        auto it = self->m_allocations.find(reinterpret_cast<uintptr_t>(data));
        if (it == self->m_allocations.end()) return;
        a = it->second;
        self->m_allocations.erase(it);
    }
    self->destroyAllocation(a);
    self->m_memory.release(bytes);
}

void VulkanDevice::releaseHost(void* owner, void* data, size_t bytes)
{
    auto* self = static_cast<VulkanDevice*>(owner);
    Allocation a;
    {
        std::lock_guard lock(self->m_allocationsMutex);
        auto it = self->m_hostAllocations.find(reinterpret_cast<uintptr_t>(data));
        if (it == self->m_hostAllocations.end()) return;
        a = it->second;
        self->m_hostAllocations.erase(it);
    }
    self->destroyAllocation(a);
    self->m_memory.releaseHost(bytes);
}

MemoryStats VulkanDevice::memoryStats() const { return m_memory.stats(); }

void VulkanDevice::resetPeak() { m_memory.resetPeak(); }

bool VulkanDevice::findAllocation(uint64_t address, uint64_t bytes, Allocation* found, uint64_t* offset)
{
    std::lock_guard lock(m_allocationsMutex);
    auto it = m_allocations.upper_bound(address);
    if (it == m_allocations.begin()) return false;
    --it;
    const Allocation& a = it->second;
    if (address - a.address > a.bytes || bytes > a.bytes - (address - a.address)) return false;
    *found = a;
    *offset = address - a.address;
    return true;
}

uint64_t VulkanDevice::reserveScratch(Allocation& scratch, uint64_t bytes, const char* what)
{
    if (bytes <= scratch.bytes) return scratch.address;
    flushAndWait();  // ops recorded or running may use the old scratch
    const uint64_t grown = std::max(bytes, scratch.bytes + scratch.bytes / 2);
    destroyAllocation(scratch);
    auto a = makeAllocation(grown, false);
    if (!a) {
        recordError(ErrorCode::OutOfDeviceMemory, std::string("vulkan device: no device memory for the ") + what +
                                                      " scratch (" + a.error().message + ")");
        return 0;
    }
    scratch = *a;
    return scratch.address;
}

// ---- copies ----------------------------------------------------------------------------------

void VulkanDevice::upload(void* deviceDst, const void* hostSrc, size_t bytes)
{
    if (bytes == 0) return;
    {
        // Ops issued before the upload read what was there before it (the runtime uploads one
        // embedding row after another into one buffer, each read by a getRow in between). Ops
        // are only recorded until a flush, so finish them first. Stricter than CUDA, whose copy
        // stream does not wait for the compute stream: no upload overlaps the device's work.
        std::lock_guard lock(m_recordMutex);
        flushAndWait();
    }
    if (failed()) return;
    const auto address = reinterpret_cast<uintptr_t>(deviceDst);
    Allocation a;
    uint64_t offset = 0;
    if (!findAllocation(address, bytes, &a, &offset)) {
        recordError(ErrorCode::InvalidArgument, "vulkan device: upload of " + std::to_string(bytes) + " bytes to " +
                                                    hex(address) + ", which no buffer of this device holds");
        return;
    }
    if (a.mapped)
        std::memcpy(a.mapped + offset, hostSrc, bytes);
    else
        stagedCopy(a, offset, const_cast<void*>(hostSrc), bytes, true);
}

void VulkanDevice::download(void* hostDst, const void* deviceSrc, size_t bytes)
{
    if (bytes == 0) return;
    {
        // The data may come from ops recorded or running: finish them first.
        std::lock_guard lock(m_recordMutex);
        flushAndWait();
    }
    if (failed()) return;
    const auto address = reinterpret_cast<uintptr_t>(deviceSrc);
    Allocation a;
    uint64_t offset = 0;
    if (!findAllocation(address, bytes, &a, &offset)) {
        recordError(ErrorCode::InvalidArgument, "vulkan device: download of " + std::to_string(bytes) +
                                                    " bytes from " + hex(address) +
                                                    ", which no buffer of this device holds");
        return;
    }
    if (a.mapped)
        std::memcpy(hostDst, a.mapped + offset, bytes);
    else
        stagedCopy(a, offset, hostDst, bytes, false);
}

void VulkanDevice::stagedCopy(const Allocation& a, uint64_t offset, void* host, uint64_t bytes, bool toDevice)
{
    std::lock_guard lock(m_copyMutex);
    if (!m_staging.buffer) {
        auto s = makeAllocation(kStagingBytes, true);
        if (!s) {
            recordError(s.error().code, s.error().message + " (the staging buffer)");
            return;
        }
        m_staging = *s;
    }
    auto* bytesHost = static_cast<uint8_t*>(host);
    for (uint64_t done = 0; done < bytes && !failed();) {
        const uint64_t n = std::min(bytes - done, kStagingBytes);
        if (toDevice) std::memcpy(m_staging.mapped, bytesHost + done, n);
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        if (!check(vkBeginCommandBuffer(m_copy.cmd, &begin), "vkBeginCommandBuffer (copy)")) return;
        VkBufferCopy region{toDevice ? 0 : offset + done, toDevice ? offset + done : 0, n};
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        if (!toDevice) {
            // Ops that wrote the source have finished (download waited); make their writes visible.
            barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
            barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
            vkCmdPipelineBarrier(m_copy.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 0, 1, &barrier, 0, nullptr, 0, nullptr);
        }
        vkCmdCopyBuffer(m_copy.cmd, toDevice ? m_staging.buffer : a.buffer, toDevice ? a.buffer : m_staging.buffer, 1,
                        &region);
        if (!toDevice) {
            barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
            barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
            vkCmdPipelineBarrier(m_copy.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                                 &barrier, 0, nullptr, 0, nullptr);
        }
        if (!check(vkEndCommandBuffer(m_copy.cmd), "vkEndCommandBuffer (copy)")) return;
        VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        submit.commandBufferCount = 1;
        submit.pCommandBuffers = &m_copy.cmd;
        VkResult r;
        {
            std::lock_guard queueLock(m_queueMutex);
            r = vkQueueSubmit(m_queue, 1, &submit, m_copy.fence);
        }
        if (!check(r, toDevice ? "upload (submit)" : "download (submit)")) return;
        if (!waitFence(m_copy.fence, toDevice ? "upload" : "download")) return;
        vkResetFences(m_device, 1, &m_copy.fence);
        vkResetCommandBuffer(m_copy.cmd, 0);
        if (!toDevice) std::memcpy(bytesHost + done, m_staging.mapped, n);
        done += n;
    }
}

}  // namespace spillway::gpu::vulkan
