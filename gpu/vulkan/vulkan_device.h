#pragma once
// The Vulkan device. Built into lib/libspillway_vulkan.so and reached through the registry.
//
// Pointers: every device buffer has a buffer device address, and that address is the "pointer"
// the engine holds (Buffer::data()), so its pointer arithmetic (a layer's slice of the KV cache,
// a job's y + rows) works unchanged. Shaders get addresses in push constants; upload() and
// download() find the VkBuffer behind an address (any address inside an allocation) in an
// ordered map.
//
// Memory: on devices that share memory with the host (integrated GPUs, CPU devices such as
// lavapipe) device buffers are host-visible, mapped once, and copies are memcpy; on others they
// are device-local and copies go through a staging buffer (SPILLWAY_VULKAN_STAGING=1 forces that
// path anywhere, for tests). allocateHost() gives mapped host-visible memory.
//
// Shaders: matvec uses one subgroup per row where the device has subgroup arithmetic
// (SPILLWAY_VULKAN_NO_SUBGROUPS=1 forces the shared-memory build, for tests); rope computes cos
// and sin in double where it has shaderFloat64 (SPILLWAY_VULKAN_NO_FP64=1 forces the float
// build). SPILLWAY_VULKAN_DEVICE=<index> picks the device.
//
// Ops are recorded into a command buffer, with compute-to-compute barriers between dependent
// dispatches, and submitted by synchronize(), upload(), download(), when a batch grows large, or
// before a buffer in use is freed. upload() and download() may be called from another thread
// (the runtime's prefetcher uploads): recording and queue submission are guarded by mutexes.
// Both wait for the ops issued before them, so an upload never changes what an earlier op reads
// (ordering as on one stream; caps.asyncCopy is false: copies do not overlap compute).
//
// Errors: allocate() and allocateHost() return them (past the budget, or the driver's
// VK_ERROR_OUT_OF_DEVICE_MEMORY: OutOfDeviceMemory). The void calls record the first failure
// (device lost, a fence that never signals, an address the device did not allocate); from then
// on info().name ends in "[failed: ...]", ops do nothing and lastError() gives it.

#include <vulkan/vulkan.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu/memory_accounting.h"
#include "gpu/registry.h"
#include "gpu/vulkan/vulkan_instance.h"
#include "gpu/vulkan/vulkan_shaders.h"

namespace spillway::gpu::vulkan {

class VulkanDevice final : public Device {
public:
    // nullptr with a one-line reason in *error when no device could be set up.
    static std::unique_ptr<VulkanDevice> create(const DeviceOptions& options, std::string* error);
    ~VulkanDevice() override;

    const DeviceInfo& info() const override;
    bool supports(DType type) const override;

    Result<Buffer> allocate(size_t bytes) override;
    Result<Buffer> allocateHost(size_t bytes) override;
    MemoryStats memoryStats() const override;
    void resetPeak() override;
    void upload(void* deviceDst, const void* hostSrc, size_t bytes) override;
    void download(void* hostDst, const void* deviceSrc, size_t bytes) override;
    void synchronize() override;
    void mark() override;
    size_t takeMarks(std::span<uint64_t> out) override;
    Status lastError() const override;

    using Device::matvec;
    void matvec(std::span<const MatvecJob> jobs) override;
    void getRow(const MatrixView& w, int64_t row, float* out) override;
    void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) override;
    void layernorm(const float* x, const float* w, const float* b, float* out, int n, float eps) override;
    void rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p) override;
    void attention(const AttentionArgs& a) override;
    void attentionBatch(const AttentionArgs& a, int queries, size_t rowStride) override;
    void swiglu(const float* gate, const float* up, float* out, int n) override;
    void add(float* y, const float* x, int n) override;
    void pointwise(const PointwiseArgs& a) override;
    void scatterRows(const ScatterRowsArgs& a) override;
    void rowSum(const RowSumArgs& a) override;

private:
    VulkanDevice() = default;

    // One VkBuffer with its own memory.
    struct Allocation {
        VkBuffer buffer = VK_NULL_HANDLE;
        VkDeviceMemory memory = VK_NULL_HANDLE;
        uint64_t address = 0;      // buffer device address (0 for host allocations)
        uint64_t bytes = 0;        // size of the VkBuffer
        uint8_t* mapped = nullptr; // host view, when mapped
    };
    // A command buffer and the fence its submission signals.
    struct Batch {
        VkCommandBuffer cmd = VK_NULL_HANDLE;
        VkFence fence = VK_NULL_HANDLE;
    };

    bool setUp(const PhysicalCandidate& chosen, const DeviceOptions& options, std::string* error);
    // The IQ grids and levels in m_tables (vulkan_tables.cpp), once, at the end of setUp.
    bool createIqTables(std::string* error);
    VkPipeline pipeline(Shader s);  // made on first use; null after recording an error

    // ---- memory (vulkan_memory.cpp) ----
    // A buffer of `bytes` in device memory (hostSide: host-visible staging/pinned memory).
    Result<Allocation> makeAllocation(uint64_t bytes, bool hostSide);
    void destroyAllocation(Allocation& a);
    // The device allocation holding [address, address + bytes), and the offset in it.
    bool findAllocation(uint64_t address, uint64_t bytes, Allocation* found, uint64_t* offset);
    // Internal device memory (quantized x, attention scores): grows only; returns its address
    // (0 after recording an error). Called with m_recordMutex held.
    uint64_t reserveScratch(Allocation& scratch, uint64_t bytes, const char* what);
    // Copies through the staging buffer (device memory that is not mapped).
    void stagedCopy(const Allocation& a, uint64_t offset, void* host, uint64_t bytes, bool toDevice);
    static void releaseDevice(void* owner, void* data, size_t bytes);
    static void releaseHost(void* owner, void* data, size_t bytes);

    // ---- recording and submission (vulkan_device.cpp) ----
    // Records a dispatch of `groups` workgroups (spread over x and y when above the per-axis
    // limit). barrierBefore: wait for every earlier dispatch (false only for dispatches
    // independent of the ones just before them, such as a matvec call's jobs).
    void dispatch(Shader s, const void* push, uint32_t pushBytes, uint64_t groups, bool barrierBefore = true);
    // The number of jobs from `first` on that form one prompt batch's product (one weight matrix,
    // x and y at even strides, at least kMatmulMinJobs), else 1.
    size_t matmulRun(std::span<const MatvecJob> jobs, size_t first) const;
    // attention() for `queries` queries at once (attentionBatch's meaning; 1: one query).
    void attentionQueries(const AttentionArgs& a, int queries, size_t rowStride);
    void dispatch3(Shader s, const void* push, uint32_t pushBytes, uint32_t x, uint32_t y, uint32_t z,
                   bool barrierBefore);
    bool beginBatch();             // m_recordMutex held
    void submitBatch();            // m_recordMutex held: ends and submits the recording batch
    void waitInFlight();           // m_recordMutex held: waits for every submitted batch
    void flushAndWait();           // m_recordMutex held
    bool waitFence(VkFence fence, const char* what);
    bool failed() const { return m_failed.load(std::memory_order_acquire); }

    // ---- errors ----
    bool check(VkResult r, const char* what);
    void recordError(ErrorCode code, const std::string& message);

    DeviceInfo m_info;
    VkInstance m_instance = VK_NULL_HANDLE;
    VkPhysicalDevice m_physical = VK_NULL_HANDLE;
    VkDevice m_device = VK_NULL_HANDLE;
    VkQueue m_queue = VK_NULL_HANDLE;
    uint32_t m_queueFamily = 0;
    VkPhysicalDeviceMemoryProperties m_memoryProperties{};
    uint64_t m_maxAllocation = 0;       // maxMemoryAllocationSize
    uint32_t m_maxGroups[3] = {65535, 65535, 65535};
    bool m_mappedDevice = false;        // device buffers host-visible and mapped
    bool m_float64 = false;             // rope in double
    bool m_subgroups = false;           // matvec: a subgroup per row, summed with subgroupAdd
    uint32_t m_subgroupSize = 1;        // the device's (default) subgroup size

    VkPipelineLayout m_layout = VK_NULL_HANDLE;
    VkPipeline m_pipelines[kShaderCount] = {};

    std::mutex m_queueMutex;            // vkQueueSubmit from any thread

    std::mutex m_recordMutex;           // the batches and the scratch buffers
    VkCommandPool m_computePool = VK_NULL_HANDLE;
    Batch m_recording;                  // cmd null when none is open
    uint32_t m_dispatches = 0;          // in m_recording
    std::vector<Batch> m_inFlight, m_spare;
    Allocation m_xScratch, m_scoreScratch;
    Allocation m_tables;                // the IQ types' grids and levels (shaders/iq_tables.glsl)
    std::vector<uint64_t> m_qOffset;    // matvec: where each job's quantized x starts; grows only
    std::vector<size_t> m_run;          // matvec: each job's run of batch jobs (vulkan_ops.cpp); grows only
    // mark(): a ring of kMaxMarks timestamp queries (none where the queue cannot write
    // timestamps), the marks since the last takeMarks() (may exceed the ring), the steady clock
    // when the batches were last waited for, and the timestamp's tick and valid bits.
    VkQueryPool m_marks = VK_NULL_HANDLE;
    size_t m_markCount = 0;
    uint64_t m_syncNs = 0;
    double m_tickNs = 1.0;
    uint64_t m_tickMask = ~uint64_t(0);

    std::mutex m_copyMutex;             // the staging buffer and its command buffer
    VkCommandPool m_copyPool = VK_NULL_HANDLE;
    Batch m_copy;
    Allocation m_staging;

    mutable std::mutex m_allocationsMutex;
    std::map<uint64_t, Allocation> m_allocations;  // device buffers by address
    std::map<uintptr_t, Allocation> m_hostAllocations;  // allocateHost() buffers by host pointer

    MemoryAccounting m_memory;

    mutable std::mutex m_errorMutex;
    std::atomic<bool> m_failed{false};
    Error m_firstError;
    DeviceInfo m_failedInfo;
};

}  // namespace spillway::gpu::vulkan
