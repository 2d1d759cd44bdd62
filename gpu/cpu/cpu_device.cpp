#include "gpu/cpu/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/cpu_memory.h"
#include "gpu/cpu/cpu_ops.h"
#include "gpu/cpu/delta_net.h"
#include "gpu/cpu/scratch.h"
#include "gpu/cpu/thread_pool.h"
#include "gpu/memory_accounting.h"

namespace spillway::gpu {

namespace {

using cpu::Kernels;
using cpu::MatvecInput;

using cpu::BlasOnThisThread;
using cpu::Scratch;

// Whether an attention op's arguments describe something to compute.
bool computable(const AttentionArgs& a)
{
    return a.nHeads > 0 && a.nKvHeads > 0 && a.nHeads % a.nKvHeads == 0 && a.nPos > 0 && a.headDim > 0 &&
           (a.kvType != KvType::Q8 || (a.kScales && a.vScales));
}

// Per job of one matvec call: what its kernel reads, and where its chunks start.
// Consecutive jobs on the same matrix (a prompt batch's tokens) form a group whose chunks go
// block of rows by block of rows, each block for every job of the group in turn: the block is
// read from memory once and from the cache for the other jobs. Every row is still computed by
// the same kernel on the same input, so the results are those of one job at a time, bit for bit.
struct JobPlan {
    MatvecInput input;
    int64_t chunkRows = 0;   // rows per chunk (a multiple of 4)
    int64_t firstChunk = 0;  // index of its group's first chunk in the call's chunk sequence
    int64_t chunks = 0;      // the group's chunks (blocks x jobs), on its first job only
    size_t groupFirst = 0;   // the group's first job
    int64_t groupJobs = 1;   // on the group's first job
};

constexpr size_t kGroupBlockBytes = size_t{64} << 10;  // rows of a group's block

bool sameMatrix(const MatrixView& a, const MatrixView& b)
{
    return a.data == b.data && a.type == b.type && a.rows == b.rows && a.cols == b.cols &&
           a.rowStride == b.rowStride && a.layout == b.layout;
}

// Scratch bytes for x in `form` (64-byte aligned parts), 0 where the kernel reads x as it is.
size_t xFormBytes(XForm form, size_t cols, bool xAligned)
{
    auto up = [](size_t b) { return (b + 63) & ~size_t{63}; };
    switch (form) {
    case XForm::Float: return xAligned ? 0 : up(cols * sizeof(float));
    case XForm::Q8: return up(cols) + up(cols / 32 * 2 * sizeof(float));  // qs; d, sum8
    case XForm::Q8K: return up(cols) + up(cols / 256 * sizeof(float)) + up(cols / 16 * 2);
    case XForm::Q8G64: return up(cols) + up(cols / 64 * sizeof(float));
    }
    return 0;
}

// One thread's share of a matvec call's chunks, [next, end); other threads take from it when
// their own share is done. One cache line each, so a thread's claims stay in its own core.
struct alignas(64) ChunkCursor {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
};

// The CPU device. Its ops are called from one thread at a time (the engine's inference thread);
// they spread over the device's pool where the work is big enough to pay for the dispatch.
class CpuDevice final : public Device {
public:
    CpuDevice(int threads, CpuKernelSet set, uint64_t memoryLimit)
        : m_kernels(cpu::kernelsFor(set)), m_pool(threads > 0 ? threads : cpu::onlineCores()),
          m_memory(memoryLimit)
    {
        const cpu::HostMemoryInfo mem = cpu::readHostMemoryInfo();
        m_info.backend = "cpu";
        m_info.threads = m_pool.size();
        m_info.kernels = cpuKernelSetName(m_kernels.set);
        m_info.name = cpu::cpuModelName() + " (" + std::to_string(m_pool.size()) +
                      (m_pool.size() == 1 ? " thread, " : " threads, ") + m_info.kernels + ")";
        m_info.totalMemory = memoryLimit ? std::min<uint64_t>(memoryLimit, mem.total) : mem.total;
        m_info.freeMemory = std::min<uint64_t>(m_info.totalMemory, mem.available);
        m_info.caps.hostPointers = true;
        m_info.caps.attentionSinks = m_info.caps.slidingWindow = m_info.caps.clampedSwiglu = true;
        m_info.caps.deltaNet = m_info.caps.sigmoidGate = true;
        m_plans.reserve(8);
        m_cursors = std::make_unique<ChunkCursor[]>(static_cast<size_t>(m_pool.size()));
        m_gemmScratch = std::make_unique<Scratch[]>(static_cast<size_t>(m_pool.size()));
        const char* gemm = std::getenv("SPILLWAY_CPU_GEMM");
        // "0": prompts on the matvec kernels; "blas": OpenBLAS's SGEMM even where the kernel set
        // has its own product; "float": the set's float product even for the types it multiplies
        // as integers (to compare them); else the kernel set's own, integer where it has one.
        m_gemm = !(gemm && std::string(gemm) == "0");
        m_ownGemm = !(gemm && std::string(gemm) == "blas");
        m_intGemm = m_ownGemm && !(gemm && std::string(gemm) == "float");
    }

    const DeviceInfo& info() const override { return m_info; }
    bool supports(DType type) const override
    {
        return static_cast<int>(type) < kDTypeCount && m_kernels.matvec[static_cast<int>(type)] != nullptr;
    }

    ~CpuDevice() override = default;

    // "Device memory" of the CPU device is host RAM; with a memory limit it behaves like a card
    // of that size (the runtime's placements are exercised against it in tests).
    Result<Buffer> allocate(size_t bytes) override
    {
        SPILLWAY_TRY(m_memory.reserve(bytes, "cpu device"));
        void* p = cpu::allocateHostMemory(bytes);
        if (!p) {
            m_memory.release(bytes);
            return makeError(ErrorCode::OutOfMemory,
                             "cpu device: cannot allocate " + std::to_string(bytes) + " bytes");
        }
        return Buffer(p, bytes, &CpuDevice::releaseDevice, this);
    }

    Result<Buffer> allocateHost(size_t bytes) override
    {
        void* p = cpu::allocateHostMemory(bytes);
        if (!p)
            return makeError(ErrorCode::OutOfMemory,
                             "cpu device: cannot allocate " + std::to_string(bytes) + " bytes of host memory");
        m_memory.addHost(bytes);
        return Buffer(p, bytes, &CpuDevice::releaseHost, this);
    }

    MemoryStats memoryStats() const override { return m_memory.stats(); }
    void resetPeak() override { m_memory.resetPeak(); }

    void upload(void* deviceDst, const void* hostSrc, size_t bytes) override
    {
        if (bytes) std::memcpy(deviceDst, hostSrc, bytes);
    }
    void download(void* hostDst, const void* deviceSrc, size_t bytes) override
    {
        if (bytes) std::memcpy(hostDst, deviceSrc, bytes);
    }
    void synchronize() override {}

    Result<UploadedMatrix> uploadMatrix(const MatrixView& src, size_t bytes) override;

    void matvec(std::span<const MatvecJob> jobs) override;

    void getRow(const MatrixView& w, int64_t row, float* out) override
    {
        if (row < 0 || row >= w.rows) {  // a caller bug: make it loud rather than read wild
            std::fill(out, out + w.cols, std::numeric_limits<float>::quiet_NaN());
            return;
        }
        cpu::getRowOp(w, row, out);
    }
    void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) override
    {
        cpu::rmsnormOp(x, weight, out, n, eps);
    }
    void rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p) override
    {
        cpu::ropeOp(x, nHeads, headDim, pos, p, m_ropeScratch.reserve<float>(
                                                    static_cast<size_t>(std::max(2, headDim))));
    }
    void attention(const AttentionArgs& a) override
    {
        if (!computable(a)) return;  // nothing sensible to compute (and no error channel): out stays as it was
        if (a.scores) {
            cpu::attentionOp(a, m_pool, m_kernels);
            return;
        }
        AttentionArgs withScratch = a;
        withScratch.scores = m_scoreScratch.reserve<float>(static_cast<size_t>(a.nHeads) *
                                                           static_cast<size_t>(a.nPos));
        cpu::attentionOp(withScratch, m_pool, m_kernels);
    }
    void attentionBatch(const AttentionArgs& a, int queries, size_t rowStride) override;
    void swiglu(const float* gate, const float* up, float* out, int n) override
    {
        cpu::swigluOp(gate, up, out, n, m_pool, m_kernels);
    }
    void add(float* y, const float* x, int n) override { cpu::addOp(y, x, n); }
    void pointwise(const PointwiseArgs& a) override { cpu::pointwiseOp(a); }
    void deltaNet(const DeltaNetArgs& a) override { cpu::deltaNetOp(a, m_pool, m_kernels, m_deltaScratch); }
    void scatterRows(const ScatterRowsArgs& a) override { cpu::scatterRowsOp(a); }
    void rowSum(const RowSumArgs& a) override { cpu::rowSumOp(a, m_pool); }
    void layernorm(const float* x, const float* w, const float* b, float* out, int n, float eps) override
    {
        cpu::layernormOp(x, w, b, out, n, eps);
    }

private:
    void planMatvec(std::span<const MatvecJob> jobs);
    void runMatvec(std::span<const MatvecJob> jobs);
    // A prompt batch's jobs on one matrix as one float matrix product (see matvec()).
    bool gemmable(std::span<const MatvecJob> run) const;
    void gemm(std::span<const MatvecJob> run);

    DeviceInfo m_info;
    const Kernels& m_kernels;
    cpu::ThreadPool m_pool;

    // matvec state, reused across calls.
    std::vector<JobPlan> m_plans;   // (jobs); grows only
    static void releaseDevice(void* owner, void* data, size_t bytes)
    {
        cpu::freeHostMemory(data);
        static_cast<CpuDevice*>(owner)->m_memory.release(bytes);
    }
    static void releaseHost(void* owner, void* data, size_t bytes)
    {
        cpu::freeHostMemory(data);
        static_cast<CpuDevice*>(owner)->m_memory.releaseHost(bytes);
    }

    Scratch m_xScratch;             // per distinct x: its Q8 form, or an aligned copy
    Scratch m_ropeScratch;          // (rotaryDims) cos, sin
    std::vector<float> m_deltaScratch;  // deltaNet's convolved input
    Scratch m_scoreScratch;         // (nHeads, nPos) when the caller gives no scores scratch
    int64_t m_totalChunks = 0;
    std::unique_ptr<ChunkCursor[]> m_cursors;  // (threads)
    // The prompt path: SPILLWAY_CPU_GEMM=0 turns it off (every job by the matvec kernels).
    bool m_gemm = true;
    bool m_ownGemm = true;
    bool m_intGemm = true;
    std::unique_ptr<Scratch[]> m_gemmScratch;  // (threads): a block of rows as floats
    Scratch m_gemmX, m_gemmY;                  // gathered inputs, outputs to scatter
    Scratch m_gemmPacked;                      // the batch in the kernel set's panels
    std::vector<MatvecJob> m_rest;             // the jobs a call leaves to the matvec kernels

    MemoryAccounting m_memory;  // device-memory budget (0 = none) and use
};

// Prepares each distinct x once per form its weights need (the Q, K and V projections share
// theirs): quantized to Q8 blocks of 32 (Q8_0/Q4_0/Q4_1/Q5_0), to blocks of 256 (K-quants) or to
// groups of 64 (Q8_G64), or copied 64-byte aligned for float weights when it is not (split
// vector loads of x would halve the kernels' load throughput). Then cuts every job into chunks of
// rows.
void CpuDevice::planMatvec(std::span<const MatvecJob> jobs)
{
    if (m_plans.size() < jobs.size()) m_plans.resize(jobs.size());

    auto scratchBytes = [](const MatvecJob& j) -> size_t {
        const size_t cols = static_cast<size_t>(std::max<int64_t>(j.w.cols, 0));
        const bool aligned = reinterpret_cast<uintptr_t>(j.x) % 64 == 0;
        return xFormBytes(xFormFor(j.w.type), cols, aligned);
    };
    size_t needed = 0;
    for (const MatvecJob& j : jobs) needed += scratchBytes(j);
    uint8_t* scratch = needed ? m_xScratch.reserve<uint8_t>(needed) : nullptr;

    int64_t totalRows = 0;
    for (const MatvecJob& j : jobs) totalRows += std::max<int64_t>(j.w.rows, 0);
    const int64_t threads = m_pool.size();
    // Chunks of 16..64 rows, multiples of 4 (the row group of some kernels); small enough that
    // a thread slowed by another process leaves a good part of its share to the others.
    const int64_t chunkRows = std::clamp<int64_t>((totalRows / (threads * 16) + 3) & ~int64_t{3},
                                                  16, 64);

    int64_t chunk = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        JobPlan& plan = m_plans[i];
        plan.input = MatvecInput{};
        plan.input.x = j.x;
        const XForm form = xFormFor(j.w.type);
        const size_t bytes = j.w.rows > 0 ? scratchBytes(j) : 0;
        if (bytes) {
            bool reused = false;
            for (size_t e = 0; e < i && !reused; ++e) {
                const MatvecJob& o = jobs[e];
                if (o.x == j.x && o.w.cols == j.w.cols && o.w.rows > 0 &&
                    xFormFor(o.w.type) == form) {
                    plan.input = m_plans[e].input;
                    reused = true;
                }
            }
            if (!reused) {
                const size_t cols = static_cast<size_t>(j.w.cols);
                auto up = [](size_t b) { return (b + 63) & ~size_t{63}; };
                int8_t* qs = reinterpret_cast<int8_t*>(scratch);
                uint8_t* rest = scratch + up(cols);
                switch (form) {
                case XForm::Q8: {
                    const int64_t blocks = j.w.cols / 32;
                    float* d = reinterpret_cast<float*>(rest);
                    float* sum8 = d + blocks;
                    m_kernels.quantizeQ8(j.x, blocks * 32, qs, d, sum8);
                    plan.input.q = cpu::QuantizedX{qs, d, sum8};
                    break;
                }
                case XForm::Q8K: {
                    const int64_t blocks = j.w.cols / 256;
                    float* d = reinterpret_cast<float*>(rest);
                    int16_t* bsums = reinterpret_cast<int16_t*>(rest + up(blocks * sizeof(float)));
                    cpu::quantizeQ8K(j.x, blocks * 256, qs, d, bsums);
                    plan.input.k = cpu::QuantizedXK{qs, d, bsums};
                    break;
                }
                case XForm::Q8G64: {
                    float* s = reinterpret_cast<float*>(rest);
                    cpu::quantizeG64(j.x, j.w.cols / 64 * 64, qs, s);
                    plan.input.g64 = cpu::QuantizedXG64{qs, s};
                    break;
                }
                case XForm::Float:
                    std::memcpy(scratch, j.x, cols * sizeof(float));
                    plan.input.x = reinterpret_cast<const float*>(scratch);
                    break;
                }
                scratch += bytes;
            }
        }
        const bool joins = i > 0 && sameMatrix(jobs[i - 1].w, j.w) && j.w.rows > 0;
        if (joins) {
            JobPlan& first = m_plans[m_plans[i - 1].groupFirst];
            const int64_t blocks = first.chunks / first.groupJobs;
            ++first.groupJobs;
            first.chunks += blocks;
            chunk += blocks;
            plan.groupFirst = m_plans[i - 1].groupFirst;
            plan.firstChunk = first.firstChunk;
            plan.chunkRows = first.chunkRows;
            plan.chunks = 0;
            plan.groupJobs = 1;
            continue;
        }
        // In a group, blocks small enough to stay in the core's cache while every job reads them.
        const bool grouped = i + 1 < jobs.size() && sameMatrix(jobs[i + 1].w, j.w) && j.w.rows > 0;
        int64_t rows = chunkRows;
        if (grouped && j.w.rowStride > 0)
            rows = std::clamp<int64_t>(int64_t(kGroupBlockBytes / j.w.rowStride) & ~int64_t{3}, 4, chunkRows);
        plan.chunkRows = rows;
        plan.firstChunk = chunk;
        plan.chunks = j.w.rows > 0 ? (j.w.rows + rows - 1) / rows : 0;
        plan.groupFirst = i;
        plan.groupJobs = 1;
        chunk += plan.chunks;
    }
    m_totalChunks = chunk;
}

// Q8_0 matrices are stored with their rows reordered (RowLayout::Q8_0ScalesLast) where this
// kernel set reads that layout faster; SPILLWAY_CPU_Q8_0_LAYOUT=stored keeps the file's layout
// (for comparisons).
Result<Device::UploadedMatrix> CpuDevice::uploadMatrix(const MatrixView& src, size_t bytes)
{
    static const bool keepStored = [] {
        const char* v = std::getenv("SPILLWAY_CPU_Q8_0_LAYOUT");
        return v && std::string(v) == "stored";
    }();
    const bool reorder = m_kernels.repacksQ8_0 && !keepStored && src.type == DType::Q8_0 &&
                         src.layout == RowLayout::Stored && src.rows > 0 && src.cols > 0 &&
                         src.cols % cpu::kQ8Block == 0 && src.rowStride >= rowBytes(src.type, src.cols) &&
                         bytes == matrixBytes(src);
    if (!reorder) return Device::uploadMatrix(src, bytes);
    auto b = allocate(bytes);
    if (!b) return b.error();
    uint8_t* dst = b->as<uint8_t>();
    auto repack = [&](int t, int n) {
        cpu::repackQ8_0ScalesLast(src, dst, src.rows * t / n, src.rows * (t + 1) / n);
    };
    m_pool.run(repack);
    MatrixView view = src;
    view.data = dst;
    view.layout = RowLayout::Q8_0ScalesLast;
    return UploadedMatrix{std::move(b.value()), view};
}

// ---- PROMPTS: a batch's tokens through one matrix as a matrix product ------------------------
// Runs of at least kGemmMinJobs jobs on one matrix (a prompt batch's tokens) whose rows this
// kernel set turns into floats fast (cpu_kernels.h: dequant; F32 rows as they are) go through a
// matrix product, a block of rows at a time per thread: the block is unpacked once and used for
// every token, and the products run at the arithmetic's speed rather than the loads'. The product
// is the kernel set's own where it has one (gemm_avx2.cpp: the batch packed once for all blocks),
// OpenBLAS's SGEMM per block of kGemmBlockRows otherwise. The sums
// are in another order than the matvec kernels' (and x is not quantized to Q8 for the integer
// types), so a prompt's logits match one token at a time within a tolerance, not bit for bit
// (tests/engine/test_cpu_matvec.cpp, tests/common/prompt_tolerance.h); decode (one job per
// matrix) is untouched.
constexpr size_t kGemmMinJobs = 8;
constexpr int64_t kGemmBlockRows = 64;

cpu::DequantRowsFn dequantFor(const Kernels& k, const MatrixView& w)
{
    return w.layout == RowLayout::Q8_0ScalesLast ? k.dequantQ8_0ScalesLast : k.dequant[static_cast<int>(w.type)];
}

// The common stride (in floats) of the pointers p(0), p(1), ... when they are evenly spaced at
// least `least` apart; 0 otherwise.
template <class Ptr>
int64_t evenStride(std::span<const MatvecJob> run, Ptr p, int64_t least)
{
    if (run.size() < 2) return least;
    const int64_t d = p(run[1]) - p(run[0]);
    if (d < least) return 0;
    for (size_t i = 2; i < run.size(); ++i)
        if (p(run[i]) - p(run[i - 1]) != d) return 0;
    return d;
}

bool CpuDevice::gemmable(std::span<const MatvecJob> run) const
{
    const MatrixView& w = run[0].w;
    if (!m_gemm || run.size() < kGemmMinJobs || w.rows <= 0 || w.cols <= 0 || !w.data) return false;
    if (w.type == DType::F32 && w.layout == RowLayout::Stored) return w.rowStride % sizeof(float) == 0;
    // The integer product takes the types without a float dequantizer too (Q2_K, Q3_K, the IQ
    // types, Q5_1, MXFP4): their batch is one product instead of a matvec per token.
    if (m_intGemm && m_kernels.gemmInt8.takes(w)) return true;
    return dequantFor(m_kernels, w) != nullptr && w.cols % 32 == 0;
}

void CpuDevice::gemm(std::span<const MatvecJob> run)
{
    const MatrixView& w = run[0].w;
    const int64_t n = int64_t(run.size()), cols = w.cols, rows = w.rows;
    // X (n x cols) and Y (n x rows) in place where the batch's vectors are evenly spaced.
    const float* x = run[0].x;
    int64_t lda = evenStride(run, [](const MatvecJob& j) { return j.x; }, cols);
    if (!lda) {
        float* gathered = m_gemmX.reserve<float>(size_t(n * cols));
        for (int64_t j = 0; j < n; ++j) std::memcpy(gathered + j * cols, run[size_t(j)].x, size_t(cols) * sizeof(float));
        x = gathered;
        lda = cols;
    }
    float* y = run[0].y;
    int64_t ldc = evenStride(run, [](const MatvecJob& j) { return j.y; }, rows);
    const bool scatter = ldc == 0;
    if (scatter) {
        y = m_gemmY.reserve<float>(size_t(n * rows));
        ldc = rows;
    }
    const cpu::DequantRowsFn dequant = w.type == DType::F32 ? nullptr : dequantFor(m_kernels, w);
    const auto weightRows = [&](int64_t r0, int64_t r1, float* unpacked, int64_t& ldw) -> const float* {
        if (dequant) {
            dequant(w, r0, r1, unpacked);
            ldw = cols;
            return unpacked;
        }
        ldw = int64_t(w.rowStride / sizeof(float));
        return reinterpret_cast<const float*>(static_cast<const uint8_t*>(w.data) + size_t(r0) * w.rowStride);
    };
    Scratch* scratch = m_gemmScratch.get();
    std::atomic<int64_t> next{0};
    const int threads = m_pool.size();
    if (const cpu::GemmInt8& product = m_kernels.gemmInt8; m_intGemm && product.takes(w)) {
        // The integer product: the batch quantized once as decode quantizes one token (Q8
        // blocks; Q8_K for the K-quants) and packed (the threads share it), then blocks of rows
        // repacked and multiplied.
        const int64_t panels = (n + product.tokens - 1) / product.tokens;
        const int64_t blocksOfK = cols / cpu::kQ8Block;
        uint8_t* packed = m_gemmPacked.reserve<uint8_t>(size_t(panels * blocksOfK * cpu::gemmInt8XBlockBytes(product.tokens)));
        auto pack = [&](int thread, int) {
            product.pack(x, lda, n, cols, panels * thread / threads, panels * (thread + 1) / threads, w, packed);
        };
        m_pool.run(pack);
        const int64_t block = product.rowsPerBlock;
        const int64_t blocks = (rows + block - 1) / block;
        auto work = [&](int thread, int) {
            uint8_t* panel = scratch[thread].reserve<uint8_t>(size_t(blocksOfK * cpu::gemmInt8WBlockBytes(block)));
            for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
                const int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
                product.rows(packed, n, w, r0, r1, y, ldc, panel);
            }
        };
        m_pool.run(work);
    } else if (m_kernels.gemmRows && m_ownGemm) {
        // The kernel set's own product: the batch packed once (the threads share the panels),
        // then blocks of the set's panel rows, unpacked and multiplied by whichever thread is free.
        const int64_t panels = (n + cpu::kGemmPanelTokens - 1) / cpu::kGemmPanelTokens;
        float* packed = m_gemmPacked.reserve<float>(size_t(panels * cpu::kGemmPanelTokens * cols));
        auto pack = [&](int thread, int) {
            m_kernels.packGemmX(x, lda, n, cols, panels * thread / threads, panels * (thread + 1) / threads, packed);
        };
        m_pool.run(pack);
        const int64_t block = m_kernels.gemmPanelRows;
        const int64_t blocks = (rows + block - 1) / block;
        auto work = [&](int thread, int) {
            float* unpacked = scratch[thread].reserve<float>(size_t(2 * block * cols));
            float* panel = unpacked + block * cols;
            for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
                const int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
                int64_t ldw = 0;
                const float* rowsOfW = weightRows(r0, r1, unpacked, ldw);
                m_kernels.gemmRows(packed, n, cols, rowsOfW, ldw, r1 - r0, y + r0, ldc, panel);
            }
        };
        m_pool.run(work);
    } else {
        const int64_t blocks = (rows + kGemmBlockRows - 1) / kGemmBlockRows;
        auto work = [&](int thread, int) {
            float* unpacked = dequant ? scratch[thread].reserve<float>(size_t(kGemmBlockRows * cols)) : nullptr;
            for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
                const int64_t r0 = b * kGemmBlockRows, r1 = std::min(rows, r0 + kGemmBlockRows);
                int64_t ldb = 0;
                const float* rowsOfW = weightRows(r0, r1, unpacked, ldb);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(n), blasint(r1 - r0), blasint(cols), 1.0f,
                            x, blasint(lda), rowsOfW, blasint(ldb), 0.0f, y + r0, blasint(ldc));
            }
        };
        const BlasOnThisThread single;
        m_pool.run(work);
    }
    if (scatter)
        for (int64_t j = 0; j < n; ++j) std::memcpy(run[size_t(j)].y, y + j * rows, size_t(rows) * sizeof(float));
}

// A prompt batch's attention as matrix products from the size on that the matrices go to SGEMM
// too; smaller batches (and SPILLWAY_CPU_GEMM=0) one query at a time, bit for bit decode's.
void CpuDevice::attentionBatch(const AttentionArgs& a, int queries, size_t rowStride)
{
    if (!m_gemm || queries < int(kGemmMinJobs) || queries > a.nPos || !computable(a)) {
        Device::attentionBatch(a, queries, rowStride);
        return;
    }
    cpu::attentionBatchOp(a, queries, rowStride, m_pool, m_gemmScratch.get(), m_kernels);
}

void CpuDevice::matvec(std::span<const MatvecJob> jobs)
{
    if (jobs.empty()) return;
    if (m_gemm && jobs.size() >= kGemmMinJobs) {
        // Prompt batches (runs of jobs on one matrix) to the matrix product where they can go.
        m_rest.clear();
        bool any = false;
        for (size_t i = 0; i < jobs.size();) {
            size_t end = i + 1;
            while (end < jobs.size() && sameMatrix(jobs[end].w, jobs[i].w)) ++end;
            const std::span<const MatvecJob> run = jobs.subspan(i, end - i);
            if (gemmable(run)) {
                gemm(run);
                any = true;
            } else {
                m_rest.insert(m_rest.end(), run.begin(), run.end());
            }
            i = end;
        }
        if (any) {
            if (!m_rest.empty()) runMatvec(m_rest);
            return;
        }
    }
    runMatvec(jobs);
}

// ---- THE HOT SPOT OF DECODING ----------------------------------------------------------------
// Thread t owns the t-th contiguous share of the call's chunks and works through it in order, so
// it reads one long sequential stream of weights (what the prefetchers follow best); a thread
// done early takes the remaining chunks of the others. The row kernels (cpu/kernels_*.cpp, per
// weight type and instruction set) do the arithmetic.
void CpuDevice::runMatvec(std::span<const MatvecJob> jobs)
{
    planMatvec(jobs);
    if (m_totalChunks == 0) return;

    const JobPlan* plans = m_plans.data();
    const size_t jobCount = jobs.size();
    auto runChunk = [&](int64_t c) {
        // The job holding chunk c: the last one starting at or before it (a call may carry
        // thousands of one-row jobs: the neuron cache's rows).
        const size_t job = size_t(std::upper_bound(plans, plans + jobCount, c,
                                                   [](int64_t v, const JobPlan& p) { return v < p.firstChunk; }) -
                                  plans) - 1;
        const size_t first = plans[job].groupFirst;
        const JobPlan& group = plans[first];
        const int64_t local = c - group.firstChunk;
        const size_t member = first + size_t(local % group.groupJobs);
        const JobPlan& plan = plans[member];
        const MatvecJob& j = jobs[member];
        const int64_t r0 = local / group.groupJobs * plan.chunkRows;
        const int64_t r1 = std::min(r0 + plan.chunkRows, j.w.rows);
        const cpu::MatvecRowsFn rows = j.w.layout == RowLayout::Q8_0ScalesLast
                                           ? m_kernels.matvecQ8_0ScalesLast
                                           : m_kernels.matvec[static_cast<int>(j.w.type)];
        rows(j.w, plan.input, j.y, r0, r1);
    };
    const int threads = m_pool.size();
    if (m_totalChunks == 1 || threads == 1) {
        for (int64_t c = 0; c < m_totalChunks; ++c) runChunk(c);
        return;
    }
    for (int t = 0; t < threads; ++t) {
        m_cursors[t].next.store(m_totalChunks * t / threads, std::memory_order_relaxed);
        m_cursors[t].end = m_totalChunks * (t + 1) / threads;
    }
    ChunkCursor* cursors = m_cursors.get();
    auto work = [&](int thread, int) {
        for (int k = 0; k < threads; ++k) {
            ChunkCursor& cursor = cursors[(thread + k) % threads];
            for (;;) {
                const int64_t c = cursor.next.fetch_add(1, std::memory_order_relaxed);
                if (c >= cursor.end) break;
                runChunk(c);
            }
        }
    };
    m_pool.run(work);
}

CpuKernelSet kernelSetFromEnvironment()
{
    const char* forced = std::getenv("SPILLWAY_CPU_KERNELS");
    const CpuKernelSet best = bestCpuKernelSet();
    if (!forced) return best;
    const std::string name = forced;
    if (name == "scalar") return CpuKernelSet::Scalar;
    if (name == "avx2") return std::min(best, CpuKernelSet::Avx2);
    return best;  // "avx512", or a name we do not know: the widest set
}

}  // namespace

std::unique_ptr<Device> createCpuDevice(int threads, uint64_t memoryLimit)
{
    return std::make_unique<CpuDevice>(threads, kernelSetFromEnvironment(), memoryLimit);
}

std::unique_ptr<Device> createCpuDevice(int threads, CpuKernelSet set, uint64_t memoryLimit)
{
    return std::make_unique<CpuDevice>(threads, set, memoryLimit);
}

}  // namespace spillway::gpu
