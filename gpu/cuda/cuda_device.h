#pragma once
// The CUDA device: device 0 of this process (CUDA_VISIBLE_DEVICES picks which card that is).
// Built into lib/libspillway_cuda.so and reached through the registry; bench-cuda links it
// directly to time its kernels with CUDA events.
//
// Streams: ops run in issue order on one compute stream; upload() and download() use a copy
// stream of their own and may be called from another thread (download first waits for the ops
// issued before it). Neither waits for the other otherwise, which is what lets the runtime's
// prefetcher copy layer L+1 while layer L computes.
//
// Errors: allocate() and allocateHost() return them. The void calls (ops, copies, synchronize)
// have no error channel in gpu::Device, so the first CUDA error any of them meets is recorded:
// from then on info().name ends in "[failed: ...]", allocate() and allocateHost() return that
// error (ErrorCode::DeviceLost for CUDA errors), and firstError() gives it. An op whose inputs
// are unusable (no rows, heads that do not divide) does nothing, as on the CPU device.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_ops.h"
#include "gpu/device.h"
#include "gpu/memory_accounting.h"
#include "gpu/registry.h"

namespace spillway::gpu::cuda {

class CudaDevice final : public Device {
public:
    // nullptr with a one-line reason in *error when no device could be set up.
    static std::unique_ptr<CudaDevice> create(const DeviceOptions& options, std::string* error);
    ~CudaDevice() override;

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

    using Device::matvec;
    void matvec(std::span<const MatvecJob> jobs) override;
    void getRow(const MatrixView& w, int64_t row, float* out) override;
    void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) override;
    void rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p) override;
    void attention(const AttentionArgs& a) override;
    void swiglu(const float* gate, const float* up, float* out, int n) override;
    void add(float* y, const float* x, int n) override;
    void pointwise(const PointwiseArgs& a) override;
    void deltaNet(const DeltaNetArgs& a) override;
    void layernorm(const float* x, const float* w, const float* b, float* out, int n, float eps) override;
    void scatterRows(const ScatterRowsArgs& a) override;
    void rowSum(const RowSumArgs& a) override;

    // The first error a void call met (ok when none).
    Status firstError() const;
    Status lastError() const override { return firstError(); }
    // The stream ops run on (bench-cuda records its timing events there).
    cudaStream_t computeStream() const { return m_compute; }
    // F32 matvec through cublasSgemv instead of the custom kernel (for comparisons).
    void setF32Gemv(bool useCublas) { m_f32Cublas = useCublas; }

private:
    CudaDevice() = default;

    // Device memory the ops use internally (quantized x, attention scores); grows only.
    struct Scratch {
        void* data = nullptr;
        size_t bytes = 0;
    };
    void* reserve(Scratch& s, size_t bytes, const char* what);

    // True when e is cudaSuccess; otherwise records the first error and returns false.
    bool check(cudaError_t e, const char* what);
    bool checkBlas(cublasStatus_t s, const char* what);
    // How many jobs from `first` share its weights with x and y at one stride each (a prompt
    // batch's tokens), when there are enough of them for a matrix product (else 1).
    static size_t gemmRun(std::span<const MatvecJob> jobs, size_t first);
    // Y = W X for such a run of n jobs, through cuBLAS: float weights as they are (F32: SGEMM;
    // F16 / BF16: x converted to their type), the others dequantized to fp16 a slab of rows at a
    // time; fp32 accumulation.
    void gemm(const MatvecJob* jobs, size_t n);
    void recordError(ErrorCode code, const std::string& message);
    static void releaseDevice(void* owner, void* data, size_t bytes);
    static void releaseHost(void* owner, void* data, size_t bytes);

    DeviceInfo m_info;
    cudaStream_t m_compute = nullptr;
    cudaStream_t m_copy = nullptr;
    cudaEvent_t m_computeMark = nullptr;  // download(): the ops issued so far
    cublasHandle_t m_cublas = nullptr;
    bool m_f32Cublas = false;
    std::mutex m_copyMutex;  // the copy stream and m_computeMark, shared by callers' threads
    // mark(): a ring of timing events on the compute stream (made on first use), the marks made
    // since the last takeMarks() (may exceed the ring), and the steady clock when synchronize()
    // last returned. The compute thread's alone, as the ops are.
    std::vector<cudaEvent_t> m_marks;
    size_t m_markCount = 0;
    uint64_t m_syncNs = 0;
    bool m_syncedSinceMark = true;       // m_syncNs is later than the newest mark's end
    cudaEvent_t m_clockMark = nullptr;   // takeMarks() without a synchronize since the newest mark

    std::vector<QuantizedXDevice> m_quantized;  // (jobs) of a matvec call; grows only
    Scratch m_xScratch;      // (distinct x of a matvec call) Q8 form: cols int8 + 2 * cols / 32 floats
    Scratch m_scoreScratch;  // (nHeads, nPos) floats when the caller gives no scores
    Scratch m_deltaScratch;  // deltaNet(): the n tokens' convolved [q | k | v]
    Scratch m_gemmW;         // gemm(): a slab of dequantized weight rows, fp16 (at most kGemmSlabBytes)
    Scratch m_gemmX;         // gemm(): the run's x in fp16 / bf16

    MemoryAccounting m_memory;  // device-memory budget (0 = none) and use

    mutable std::mutex m_errorMutex;
    std::atomic<bool> m_failed{false};
    Error m_firstError;        // written once, before m_failed is set
    DeviceInfo m_failedInfo;   // m_info with the error in its name; written once likewise
};

}  // namespace spillway::gpu::cuda
