#include "gpu/cuda/cuda_device.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/cuda/cuda_ops.h"
#include "gpu/matvec_runs.h"

namespace spillway::gpu::cuda {

namespace {

// allocateHost's mapping: whole pages, at least one.
size_t hostMappedBytes(size_t bytes)
{
    const size_t page = 4096;
    return std::max<size_t>(page, (bytes + page - 1) / page * page);
}

std::string cudaMessage(cudaError_t e)
{
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// The form a weight type's matvec wants x in: float (0), Q8 blocks of 32 (1) or Q8_K (2).
// x's form for a weight type as these kernels number it: 0 float, 1 Q8 blocks, 2 Q8_K (the
// llama2.c groups are not computed here).
int xForm(DType t)
{
    switch (xFormFor(t)) {
    case XForm::Q8: return 1;
    case XForm::Q8K: return 2;
    default: return 0;
    }
}

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Bytes of one x's quantized form in the matvec scratch: int8 values, then d and sum8 floats
// (Q8 blocks of 32), or d floats and int16 bsums (Q8_K).
size_t q8Bytes(int64_t cols, int form)
{
    const size_t n = static_cast<size_t>(cols);
    return alignUp(form == 2 ? n + n / 256 * 4 + n / 16 * 2 : n + n / 32 * 8, 256);
}

}  // namespace

std::unique_ptr<CudaDevice> CudaDevice::create(const DeviceOptions& options, std::string* error)
{
    auto fail = [error](const std::string& what, cudaError_t e) {
        *error = "cuda: " + what + " failed (" + cudaMessage(e) + ")";
        return nullptr;
    };
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
        *error = "no CUDA device";
        return nullptr;
    }
    if (e != cudaSuccess) return fail("cudaGetDeviceCount", e);
    if ((e = cudaSetDevice(0)) != cudaSuccess) return fail("cudaSetDevice(0)", e);
    cudaDeviceProp prop{};
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) return fail("cudaGetDeviceProperties", e);
    if (prop.major < 7 || (prop.major == 7 && prop.minor < 5)) {
        *error = std::string("the GPU ") + prop.name + " (sm_" + std::to_string(prop.major * 10 + prop.minor) +
                 ") is older than the oldest this build supports (sm_75)";
        return nullptr;
    }

    std::unique_ptr<CudaDevice> d(new CudaDevice());
    if ((e = cudaStreamCreateWithFlags(&d->m_compute, cudaStreamNonBlocking)) != cudaSuccess)
        return fail("cudaStreamCreate", e);
    if ((e = cudaStreamCreateWithFlags(&d->m_copy, cudaStreamNonBlocking)) != cudaSuccess)
        return fail("cudaStreamCreate", e);
    if ((e = cudaEventCreateWithFlags(&d->m_computeMark, cudaEventDisableTiming)) != cudaSuccess)
        return fail("cudaEventCreate", e);
    if (cublasStatus_t s = cublasCreate(&d->m_cublas); s != CUBLAS_STATUS_SUCCESS) {
        *error = std::string("cuda: cublasCreate failed (") + cublasGetStatusName(s) + ")";
        return nullptr;
    }
    if (cublasStatus_t s = cublasSetStream(d->m_cublas, d->m_compute); s != CUBLAS_STATUS_SUCCESS) {
        *error = std::string("cuda: cublasSetStream failed (") + cublasGetStatusName(s) + ")";
        return nullptr;
    }
    // The device accepts every GPU from sm_75 up: make sure this build holds code it can run
    // (machine code for its architecture, or PTX it can compile) before anything is launched.
    if ((e = kernelImageStatus()) != cudaSuccess) {
        *error = std::string("the GPU ") + prop.name + " (sm_" + std::to_string(prop.major * 10 + prop.minor) +
                 ") has no code in this build (" + cudaGetErrorString(e) +
                 "): rebuild with CMAKE_CUDA_ARCHITECTURES naming it";
        return nullptr;
    }

    size_t freeBytes = 0, totalBytes = 0;
    if ((e = cudaMemGetInfo(&freeBytes, &totalBytes)) != cudaSuccess) return fail("cudaMemGetInfo", e);

    d->m_memory.setLimit(options.memoryLimit);
    DeviceInfo& info = d->m_info;
    info.backend = "cuda";
    info.name = std::string(prop.name) + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ", " +
                std::to_string(prop.multiProcessorCount) + " SMs, " +
                std::to_string(prop.l2CacheSize >> 20) + " MiB L2)";
    info.totalMemory = options.memoryLimit ? std::min<uint64_t>(options.memoryLimit, totalBytes) : totalBytes;
    info.freeMemory = std::min<uint64_t>(info.totalMemory, freeBytes);
    info.threads = 1;
    info.kernels = "cuda: custom GEMV (16-byte loads; dp4a for Q8_0/Q4_0/Q4_1/Q5_0 and the K-quants), cuBLAS";
    info.caps.hostPointers = false;
    info.caps.asyncCopy = true;
    info.caps.pinnedHostMemory = true;
    info.caps.events = true;
    info.caps.attentionSinks = info.caps.slidingWindow = info.caps.clampedSwiglu = true;
    info.caps.deltaNet = info.caps.sigmoidGate = true;
    return d;
}

CudaDevice::~CudaDevice()
{
    if (m_compute) cudaStreamSynchronize(m_compute);
    if (m_copy) cudaStreamSynchronize(m_copy);
    if (m_xScratch.data) cudaFree(m_xScratch.data);
    if (m_scoreScratch.data) cudaFree(m_scoreScratch.data);
    if (m_deltaScratch.data) cudaFree(m_deltaScratch.data);
    if (m_cublas) cublasDestroy(m_cublas);
    if (m_computeMark) cudaEventDestroy(m_computeMark);
    for (cudaEvent_t e : m_marks) cudaEventDestroy(e);
    if (m_clockMark) cudaEventDestroy(m_clockMark);
    if (m_copy) cudaStreamDestroy(m_copy);
    if (m_compute) cudaStreamDestroy(m_compute);
}

const DeviceInfo& CudaDevice::info() const
{
    return m_failed.load(std::memory_order_acquire) ? m_failedInfo : m_info;
}

bool CudaDevice::supports(DType type) const
{
    return static_cast<int>(type) <= static_cast<int>(DType::Q4_0) || type == DType::BitmapSparse ||
           xForm(type) != 0;
}

// ---- errors ----------------------------------------------------------------------------------

void CudaDevice::recordError(ErrorCode code, const std::string& message)
{
    std::lock_guard lock(m_errorMutex);
    if (m_failed.load(std::memory_order_relaxed)) return;
    m_firstError = makeError(code, message);
    m_failedInfo = m_info;
    m_failedInfo.name += " [failed: " + message + "]";
    m_failed.store(true, std::memory_order_release);
}

bool CudaDevice::checkBlas(cublasStatus_t status, const char* what)
{
    if (status == CUBLAS_STATUS_SUCCESS) return true;
    recordError(ErrorCode::DeviceLost, std::string("cuda device: ") + what + " failed (" +
                                           cublasGetStatusName(status) + ")");
    return false;
}

bool CudaDevice::check(cudaError_t e, const char* what)
{
    if (e == cudaSuccess) return true;
    recordError(e == cudaErrorMemoryAllocation ? ErrorCode::OutOfDeviceMemory : ErrorCode::DeviceLost,
                std::string("cuda device: ") + what + " failed (" + cudaMessage(e) + ")");
    return false;
}

Status CudaDevice::firstError() const
{
    if (!m_failed.load(std::memory_order_acquire)) return {};
    return m_firstError;
}

// ---- memory ----------------------------------------------------------------------------------

Result<Buffer> CudaDevice::allocate(size_t bytes)
{
    if (m_failed.load(std::memory_order_acquire)) return m_firstError;
    SPILLWAY_TRY(m_memory.reserve(bytes, "cuda device"));
    const uint64_t used = m_memory.used();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 256));
    if (e != cudaSuccess) {
        m_memory.release(bytes);
        cudaGetLastError();  // an allocation failure is not sticky: clear it
        if (e == cudaErrorMemoryAllocation)
            return makeError(ErrorCode::OutOfDeviceMemory,
                             "cuda device: cannot allocate " + std::to_string(bytes) +
                                 " bytes of device memory (" + std::to_string(used) +
                                 " in use by this device)");
        return makeError(ErrorCode::DeviceLost, "cuda device: cudaMalloc failed (" + cudaMessage(e) + ")");
    }
    return Buffer(p, bytes, &CudaDevice::releaseDevice, this);
}

// Pinned host memory, page-aligned as the interface promises (direct I/O reads land in it):
// cudaHostAlloc packs small allocations into shared chunks at finer alignment, so the pages are
// mapped here and registered with the driver instead.
Result<Buffer> CudaDevice::allocateHost(size_t bytes)
{
    if (m_failed.load(std::memory_order_acquire)) return m_firstError;
    const size_t mapped = hostMappedBytes(bytes);
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return makeError(ErrorCode::OutOfMemory, "cuda device: cannot allocate " + std::to_string(bytes) +
                                                     " bytes of host memory (" + std::strerror(errno) + ")");
    const cudaError_t e = cudaHostRegister(p, mapped, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        munmap(p, mapped);
        return makeError(ErrorCode::OutOfMemory, "cuda device: cannot pin " + std::to_string(bytes) +
                                                     " bytes of host memory (" + cudaMessage(e) + ")");
    }
    m_memory.addHost(bytes);
    return Buffer(p, bytes, &CudaDevice::releaseHost, this);
}

void CudaDevice::releaseDevice(void* owner, void* data, size_t bytes)
{
    auto* self = static_cast<CudaDevice*>(owner);
    self->check(cudaFree(data), "cudaFree");
    self->m_memory.release(bytes);
}

void CudaDevice::releaseHost(void* owner, void* data, size_t bytes)
{
    auto* self = static_cast<CudaDevice*>(owner);
    self->check(cudaHostUnregister(data), "cudaHostUnregister");
    munmap(data, hostMappedBytes(bytes));
    self->m_memory.releaseHost(bytes);
}

MemoryStats CudaDevice::memoryStats() const { return m_memory.stats(); }

void CudaDevice::resetPeak() { m_memory.resetPeak(); }

void* CudaDevice::reserve(Scratch& s, size_t bytes, const char* what)
{
    if (bytes <= s.bytes) return s.data;
    const size_t grown = std::max(bytes, s.bytes + s.bytes / 2);
    if (s.data) {
        // cudaFree waits for the device, so no queued op still reads the old scratch.
        if (!check(cudaFree(s.data), "cudaFree")) return nullptr;
        s.data = nullptr;
        s.bytes = 0;
    }
    const cudaError_t e = cudaMalloc(&s.data, grown);
    if (e != cudaSuccess) {
        cudaGetLastError();
        s.data = nullptr;
        recordError(ErrorCode::OutOfDeviceMemory, std::string("cuda device: no device memory for the ") +
                                                      what + " scratch (" + std::to_string(grown) + " bytes)");
        return nullptr;
    }
    s.bytes = grown;
    return s.data;
}

// ---- copies ----------------------------------------------------------------------------------

void CudaDevice::upload(void* deviceDst, const void* hostSrc, size_t bytes)
{
    if (bytes == 0) return;
    std::lock_guard lock(m_copyMutex);
    if (check(cudaMemcpyAsync(deviceDst, hostSrc, bytes, cudaMemcpyHostToDevice, m_copy), "upload"))
        check(cudaStreamSynchronize(m_copy), "upload (synchronize)");
}

void CudaDevice::download(void* hostDst, const void* deviceSrc, size_t bytes)
{
    if (bytes == 0) return;
    std::lock_guard lock(m_copyMutex);
    // The data may come from ops still queued on the compute stream: wait for those first.
    if (!check(cudaEventRecord(m_computeMark, m_compute), "download (event)") ||
        !check(cudaStreamWaitEvent(m_copy, m_computeMark, 0), "download (wait)"))
        return;
    if (check(cudaMemcpyAsync(hostDst, deviceSrc, bytes, cudaMemcpyDeviceToHost, m_copy), "download"))
        check(cudaStreamSynchronize(m_copy), "download (synchronize)");
}

void CudaDevice::synchronize()
{
    check(cudaStreamSynchronize(m_compute), "synchronize");
    m_syncNs = steadyClockNs();
    m_syncedSinceMark = true;
}

// ---- the timeline's marks: CUDA events on the compute stream ---------------------------------

void CudaDevice::mark()
{
    if (m_failed.load(std::memory_order_acquire)) return;
    if (m_marks.empty()) {
        m_marks.resize(kMaxMarks, nullptr);
        for (cudaEvent_t& e : m_marks)
            if (!check(cudaEventCreate(&e), "cudaEventCreate (timeline marks)")) return;
    }
    if (check(cudaEventRecord(m_marks[m_markCount % kMaxMarks], m_compute), "cudaEventRecord (timeline mark)")) {
        ++m_markCount;
        m_syncedSinceMark = false;
    }
}

size_t CudaDevice::takeMarks(std::span<uint64_t> out)
{
    const size_t n = std::min({m_markCount, kMaxMarks, out.size()});
    const size_t made = m_markCount;
    m_markCount = 0;
    if (n == 0 || m_failed.load(std::memory_order_acquire)) return 0;
    cudaEvent_t last = m_marks[(made - 1) % kMaxMarks];
    // The host clock of the newest mark. synchronize() after the mark ties it (m_syncNs); else,
    // finished or not, a clock event recorded now and waited for gives it: the newest mark ended
    // (clock event's end - the device time between them) on the host's clock. An event that
    // finished long before would otherwise borrow the time of an older synchronize().
    if (!m_syncedSinceMark) {
        if (!m_clockMark && !check(cudaEventCreate(&m_clockMark), "cudaEventCreate (timeline clock)")) return 0;
        if (!check(cudaEventRecord(m_clockMark, m_compute), "cudaEventRecord (timeline clock)") ||
            !check(cudaEventSynchronize(m_clockMark), "cudaEventSynchronize (timeline clock)"))
            return 0;
        const uint64_t now = steadyClockNs();
        float gapMs = 0;
        if (!check(cudaEventElapsedTime(&gapMs, last, m_clockMark), "cudaEventElapsedTime (timeline clock)"))
            return 0;
        const uint64_t gap = uint64_t(std::max(0.0, double(gapMs) * 1e6));
        m_syncNs = now > gap ? now - gap : 0;
        m_syncedSinceMark = true;
    }
    for (size_t i = 0; i < n; ++i) {
        float ms = 0;  // from mark i to the newest; about 0.5 us resolution
        if (!check(cudaEventElapsedTime(&ms, m_marks[(made - n + i) % kMaxMarks], last), "cudaEventElapsedTime"))
            return 0;
        const uint64_t before = uint64_t(std::max(0.0, double(ms) * 1e6));
        out[i] = m_syncNs > before ? m_syncNs - before : 0;
    }
    return n;
}

// ---- ops -------------------------------------------------------------------------------------

// ---- THE HOT SPOT OF DECODING: matvec_float.cu, matvec_quant.cu and matvec_bitmap.cu. ---------
// Quantized weights first need their x in Q8 form: each distinct x of the call is quantized once
// (the Q, K and V projections share theirs), then the jobs are launched back to back.
// ---- prompt batches: matrix products -------------------------------------------------------
// A batch of prompt tokens comes as runs of jobs on one weight matrix (LayerStep lays the tokens'
// vectors out at one stride). From kGemmMinJobs such jobs on, the matrix is read once for all of
// them as a cuBLAS matrix product (tensor cores, fp32 accumulation) instead of a matvec per
// token. The sums run in another order and x is rounded to fp16 / bf16, so a batch's logits
// follow the one-token path to a tolerance (tests/gpu/test_gpu_generate.cpp), not bit for bit.
constexpr size_t kGemmMinJobs = 8;
constexpr size_t kGemmSlabBytes = size_t{64} << 20;

size_t CudaDevice::gemmRun(std::span<const MatvecJob> jobs, size_t first)
{
    const DType type = jobs[first].w.type;
    if (type == DType::BitmapSparse || type == DType::Q8_G64) return 1;
    const size_t n = evenJobRun(jobs, first);
    return n >= kGemmMinJobs ? n : 1;
}

void CudaDevice::gemm(const MatvecJob* jobs, size_t n)
{
    const MatrixView& w = jobs[0].w;
    const int64_t sx = jobs[1].x - jobs[0].x, sy = jobs[1].y - jobs[0].y;
    const float one = 1.0f, zero = 0.0f;
    const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols), tokens = static_cast<int>(n);
    // Column-major view: W (rows, cols) row-major is (cols, rows) with leading dimension
    // rowStride / element, so Y (rows, tokens; column i at y0 + i * sy) = op(W)^T X.
    if (w.type == DType::F32 && w.rowStride % 4 == 0) {
        checkBlas(cublasSgemm(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, rows, tokens, cols, &one,
                              static_cast<const float*>(w.data), static_cast<int>(w.rowStride / 4), jobs[0].x,
                              static_cast<int>(sx), &zero, jobs[0].y, static_cast<int>(sy)),
                  "matvec batch (cublasSgemm)");
        return;
    }
    const bool bf16 = w.type == DType::BF16;
    const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    void* x = reserve(m_gemmX, n * static_cast<size_t>(cols) * 2, "matvec batch");
    if (!x || !check(launchConvertX(jobs[0].x, sx, tokens, cols, bf16, x, m_compute), "matvec batch (convert x)"))
        return;
    const bool stored = (w.type == DType::F16 || bf16) && w.rowStride % 2 == 0;
    const int64_t slab = stored ? w.rows : std::max<int64_t>(1, std::min<int64_t>(w.rows, kGemmSlabBytes / (2 * w.cols)));
    for (int64_t r0 = 0; r0 < w.rows; r0 += slab) {
        const int64_t r = std::min(slab, w.rows - r0);
        const void* a = w.data;
        int lda = static_cast<int>(w.rowStride / 2);
        if (!stored) {
            a = reserve(m_gemmW, static_cast<size_t>(r * w.cols) * 2, "matvec batch");
            if (!a || !check(launchDequantizeF16(w, r0, r, const_cast<void*>(a), m_compute), "matvec batch (dequantize)"))
                return;
            lda = cols;
        }
        if (!checkBlas(cublasGemmEx(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(r), tokens, cols, &one, a,
                                    type, lda, x, type, cols, &zero, jobs[0].y + r0, CUDA_R_32F, static_cast<int>(sy),
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "matvec batch (cublasGemmEx)"))
            return;
    }
}

void CudaDevice::matvec(std::span<const MatvecJob> jobs)
{
    // Job e already quantized the x that job i needs (same x, columns and form).
    const auto sameX = [&](size_t e, size_t i) {
        return jobs[e].x == jobs[i].x && jobs[e].w.cols == jobs[i].w.cols && jobs[e].w.rows > 0 &&
               xForm(jobs[e].w.type) == xForm(jobs[i].w.type);
    };
    size_t scratchBytes = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        if (j.w.rows <= 0 || j.w.cols <= 0 || !xForm(j.w.type)) continue;
        if (const size_t run = gemmRun(jobs, i); run > 1) {
            i += run - 1;
            continue;
        }
        bool seen = false;
        for (size_t e = 0; e < i && !seen; ++e) seen = sameX(e, i);
        if (!seen) scratchBytes += q8Bytes(j.w.cols, xForm(j.w.type));
    }
    auto* scratch = static_cast<uint8_t*>(scratchBytes ? reserve(m_xScratch, scratchBytes, "matvec") : nullptr);
    if (scratchBytes && !scratch) return;

    // The quantized form of job i's x (the first job with the same x, cols and form made it).
    if (m_quantized.size() < jobs.size()) m_quantized.resize(jobs.size());
    QuantizedXDevice* quantized = m_quantized.data();
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        if (j.w.rows <= 0 || j.w.cols <= 0) continue;
        if (!supports(j.w.type) || j.w.cols % dtypeTraits(j.w.type).blockSize != 0) {
            recordError(ErrorCode::InvalidArgument,
                        "cuda device: matvec of " + std::to_string(j.w.cols) + " columns of type " +
                            std::string(dtypeName(j.w.type)) + " is not supported");
            return;
        }
        if (const size_t run = gemmRun(jobs, i); run > 1) {
            gemm(&jobs[i], run);
            std::fill(quantized + i, quantized + i + run, QuantizedXDevice{});  // no Q8 x made for these
            i += run - 1;
            continue;
        }
        cudaError_t e = cudaSuccess;
        if (const int form = xForm(j.w.type)) {
            bool reused = false;
            for (size_t o = 0; o < i && !reused; ++o) {
                if (sameX(o, i) && quantized[o].qs) {
                    quantized[i] = quantized[o];
                    reused = true;
                }
            }
            if (!reused) {
                auto* qs = reinterpret_cast<int8_t*>(scratch);
                auto* d = reinterpret_cast<float*>(scratch + j.w.cols);
                if (form == 2) {
                    auto* bsums = reinterpret_cast<int16_t*>(d + j.w.cols / 256);
                    e = launchQuantizeQ8K(j.x, j.w.cols, qs, d, bsums, m_compute);
                    quantized[i] = QuantizedXDevice{qs, d, nullptr, bsums};
                } else {
                    float* sum8 = d + j.w.cols / 32;
                    e = launchQuantizeQ8(j.x, j.w.cols, qs, d, sum8, m_compute);
                    quantized[i] = QuantizedXDevice{qs, d, sum8, nullptr};
                }
                if (!check(e, "matvec (quantize x)")) return;
                scratch += q8Bytes(j.w.cols, form);
            }
            if (j.w.type == DType::Q8_0 || j.w.type == DType::Q4_0)
                e = launchMatvecQuant(j.w, quantized[i], j.y, m_compute);
            else if (isIqBlockType(j.w.type))
                e = launchMatvecIq(j.w, quantized[i], j.y, m_compute);
            else
                e = launchMatvecKQuant(j.w, quantized[i], j.y, m_compute);
        } else if (j.w.type == DType::BitmapSparse) {
            e = launchMatvecBitmap(j.w, j.x, j.y, m_compute);
        } else if (j.w.type == DType::F32 && m_f32Cublas && j.w.rowStride % 4 == 0) {
            // W is row-major (rows, cols): as column-major it is (cols, rows) with leading
            // dimension rowStride / 4, so y = W x is op(A) = A^T.
            const float one = 1.0f, zero = 0.0f;
            const cublasStatus_t s = cublasSgemv(m_cublas, CUBLAS_OP_T, static_cast<int>(j.w.cols),
                                                 static_cast<int>(j.w.rows), &one,
                                                 static_cast<const float*>(j.w.data),
                                                 static_cast<int>(j.w.rowStride / 4), j.x, 1, &zero, j.y, 1);
            if (s != CUBLAS_STATUS_SUCCESS) {
                recordError(ErrorCode::DeviceLost,
                            std::string("cuda device: cublasSgemv failed (") + cublasGetStatusName(s) + ")");
                return;
            }
        } else {
            e = launchMatvecFloat(j.w, j.x, j.y, m_compute);
        }
        if (!check(e, "matvec")) return;
    }
}

void CudaDevice::getRow(const MatrixView& w, int64_t row, float* out)
{
    if (w.type == DType::BitmapSparse) check(launchBitmapRowsToFloat(w, row, 1, out, w.cols, m_compute), "getRow");
    else check(launchGetRow(w, row, out, m_compute), "getRow");
}

void CudaDevice::rmsnorm(const float* x, const float* weight, float* out, int n, float eps)
{
    check(launchRmsnorm(x, weight, out, n, eps, m_compute), "rmsnorm");
}

void CudaDevice::rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p)
{
    const int dims = std::min(p.rotaryDims, headDim) & ~1;
    if (dims <= 0 || nHeads <= 0) return;
    // The same float operation as the CPU device's ropeOp, on the host, so both see one value.
    const float thetaScale = std::pow(p.base, -2.0f / static_cast<float>(dims));
    check(launchRope(x, nHeads, headDim, pos, dims, thetaScale, p.freqScale, p.neox, p.freqFactors, m_compute),
          "rope");
}

void CudaDevice::attention(const AttentionArgs& a)
{
    if (a.nHeads <= 0 || a.nKvHeads <= 0 || a.nHeads % a.nKvHeads != 0 || a.nPos <= 0 || a.headDim <= 0 ||
        (a.kvType == KvType::Q8 && (!a.kScales || !a.vScales)))
        return;  // nothing sensible to compute, as on the CPU device: out stays as it was
    AttentionArgs args = a;
    if (!args.scores) {
        const size_t bytes = static_cast<size_t>(a.nHeads) * static_cast<size_t>(a.nPos) * sizeof(float);
        args.scores = static_cast<float*>(reserve(m_scoreScratch, bytes, "attention scores"));
        if (!args.scores) return;
    }
    check(launchAttention(args, m_compute), "attention");
}

void CudaDevice::swiglu(const float* gate, const float* up, float* out, int n)
{
    check(launchSwiglu(gate, up, out, n, m_compute), "swiglu");
}

void CudaDevice::add(float* y, const float* x, int n) { check(launchAdd(y, x, n, m_compute), "add"); }

void CudaDevice::pointwise(const PointwiseArgs& a) { check(launchPointwise(a, m_compute), "pointwise"); }

void CudaDevice::deltaNet(const DeltaNetArgs& a)
{
    if (a.n <= 0 || a.kHeads <= 0 || a.vHeads <= 0 || a.vHeads % a.kHeads != 0 || a.stateDim <= 0 || a.headVDim <= 0)
        return;  // nothing sensible to compute, as on the CPU device
    if (a.stateDim > kMaxDeltaNetStateDim || a.kernel < 1 || a.kernel > kMaxDeltaNetTaps) {
        recordError(ErrorCode::UnsupportedModel,
                    "cuda device: Gated DeltaNet with " + std::to_string(a.stateDim) + " state values per head and " +
                        std::to_string(a.kernel) + " convolution taps (at most " +
                        std::to_string(kMaxDeltaNetStateDim) + " and " + std::to_string(kMaxDeltaNetTaps) + ")");
        return;
    }
    auto* prepared = static_cast<float*>(reserve(m_deltaScratch, deltaNetScratchBytes(a), "Gated DeltaNet"));
    if (!prepared) return;
    check(launchDeltaNet(a, prepared, m_compute), "deltaNet");
}

void CudaDevice::layernorm(const float* x, const float* w, const float* b, float* out, int n, float eps)
{
    check(launchLayernorm(x, w, b, out, n, eps, m_compute), "layernorm");
}

void CudaDevice::scatterRows(const ScatterRowsArgs& a)
{
    if (a.count <= 0 || a.rowBytes == 0) return;
    const uintptr_t bits = reinterpret_cast<uintptr_t>(a.dst) | reinterpret_cast<uintptr_t>(a.src) | a.dstStride |
                           a.srcStride | a.rowBytes;
    if (bits % 4 != 0) {
        recordError(ErrorCode::InvalidArgument, "cuda device: scatterRows needs addresses, strides and row sizes "
                                                "that are multiples of 4 bytes");
        return;
    }
    check(launchScatterRows(a, m_compute), "scatterRows");
}

void CudaDevice::rowSum(const RowSumArgs& a)
{
    if (a.w.cols <= 0) return;
    const bool int8 = a.scales != nullptr;
    const size_t element = a.w.type == DType::F32 ? 4 : 2;
    const bool typeOk = int8 ? a.group != nullptr
                             : (a.w.type == DType::F32 || a.w.type == DType::F16 || a.w.type == DType::BF16) &&
                                   reinterpret_cast<uintptr_t>(a.w.data) % element == 0 && a.w.rowStride % element == 0;
    if (!typeOk || a.w.rows < 0) {
        recordError(ErrorCode::InvalidArgument, std::string("cuda device: rowSum of type ") +
                                                    (int8 ? "int8" : dtypeName(a.w.type)) +
                                                    " is not supported (or its rows are misaligned)");
        return;
    }
    check(launchRowSum(a, m_compute), "rowSum");
}

}  // namespace spillway::gpu::cuda
