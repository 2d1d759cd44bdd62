// The ops of the Vulkan device: each fills its shader's push constants (the layout of the
// `Push` block of shaders/<op>.comp: 8-byte addresses first, then 4-byte values) and records
// a dispatch. Inputs the CPU device would ignore (no rows, heads that do not divide) do nothing.

#include <algorithm>
#include <cmath>

#include "gpu/matvec_runs.h"
#include "gpu/sparse_format.h"
#include "gpu/vulkan/vulkan_device.h"

namespace spillway::gpu::vulkan {

namespace {

uint64_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

uint64_t groupsFor(uint64_t n, uint64_t perGroup) { return (n + perGroup - 1) / perGroup; }

// The shaders read rows from 4-byte aligned words: F32 rows must be 4-byte aligned, MXFP4 rows
// (blocks of 17 bytes, read byte by byte and in unaligned words) may start anywhere, the others
// 2-byte aligned (Q8_0 / Q4_0 / Q5_0 blocks are 34 / 18 / 22 bytes, Q6_K 210: their fp16 fields
// are read as aligned halves); a BitmapSparse blob 8-byte aligned.
bool rowsAligned(const MatrixView& w)
{
    if (w.type == DType::BitmapSparse) return reinterpret_cast<uintptr_t>(w.data) % 8 == 0;
    const uint64_t a = w.type == DType::F32 ? 4 : w.type == DType::MXFP4 ? 1 : 2;
    return reinterpret_cast<uintptr_t>(w.data) % a == 0 && w.rowStride % a == 0;
}

// x's Q8 form in the matvec scratch: cols int8 (packed in words), then d and sum8 floats; its
// Q8_K form: cols int8, then d (a float per 256) and the sums (an int per 16).
uint64_t xFormBytes(XForm form, int64_t cols)
{
    const uint64_t n = static_cast<uint64_t>(cols);
    const uint64_t bytes = form == XForm::Q8K ? n + n / 256 * 4 + n / 16 * 4 : n + n / 32 * 8;
    return (bytes + 255) / 256 * 256;
}

struct QuantizePush {
    uint64_t x, qs, d, sum8;  // Q8_K: sum8 is the sums per 16
    uint32_t blocks;
};
struct MatvecFloatPush {
    uint64_t w, x, y, stride;
    uint32_t rows, cols, type, rowsPerGroup;
};
struct MatvecQuantPush {
    uint64_t w, qs, d, sum8, y, stride, tables;  // K-quants: sum8 is x's sums per 16
    uint32_t rows, blocks, type, rowsPerGroup;
};
struct MatmulPush {
    uint64_t w, x, y, stride, tables;
    uint32_t sx, sy, rows, cols, tokens, type;
};
struct MatvecBitmapPush {
    uint64_t header, offsets, bitmap, values, x, y;
    uint32_t rows, cols, mode, row;
};

// The push constants of shaders/matvec_bitmap.comp for the blob of w (8-byte aligned).
MatvecBitmapPush bitmapPush(const MatrixView& w, uint64_t x, uint64_t y, uint32_t mode, uint32_t row)
{
    const BitmapBlobSections s = bitmapBlobSections(uint64_t(w.rows), uint64_t(w.cols), 0);
    const uint64_t blob = addr(w.data);
    return {blob, blob + s.offsets, blob + s.bitmap, blob + s.values, x, y, static_cast<uint32_t>(w.rows),
            static_cast<uint32_t>(w.cols), mode, row};
}

struct GetRowPush {
    uint64_t row, out, tables;
    uint32_t cols, type;
};
struct NormPush {
    uint64_t x, weight, out;
    uint32_t n;
    float eps;
};
struct LayernormPush {
    uint64_t x, weight, bias, out;
    uint32_t n;
    float eps;
};
struct RopePush {
    uint64_t x, freqFactors;
    uint32_t nHeads, headDim, pos, dims;
    float thetaScale, freqScale;
    uint32_t neox;
};
struct StoreKvPush {
    uint64_t kNew, vNew, kCache, vCache, kScales, vScales;
    uint32_t nKvHeads, headDim, pos, kvType;
};
struct AttentionPush {
    uint64_t q, kCache, vCache, out, scores, kScales, vScales;
    uint32_t nHeads, nKvHeads, headDim, nPos;
    float scale;
    uint32_t kvType, queries, rowStride;
};
struct SwigluPush {
    uint64_t gate, up, out;
    uint32_t n;
};
struct AddPush {
    uint64_t y, x;
    uint32_t n;
};
struct PointwisePush {
    uint64_t x, y, out;
    uint32_t n, op;
    float shift, step, lo, hi, factor;
};

struct ScatterRowsPush {
    uint64_t dst, src, index, dstStride, srcStride;
    uint32_t words, count;
};
struct RowSumPush {
    uint64_t w, a, y, scales, group, stride;
    uint32_t rows, cols, type;
};

template <class T> uint32_t pushSize(const T&)
{
    static_assert(sizeof(T) <= 128, "push constants beyond the 128 bytes every device offers");
    return sizeof(T);
}

}  // namespace

// ---- prompt batches: matrix products -------------------------------------------------------
// A batch of prompt tokens comes as runs of jobs on one weight matrix (LayerStep lays the tokens'
// vectors out at one stride). From kMatmulMinJobs such jobs on, shaders/matmul.comp reads the
// matrix once per tile of 16 tokens instead of once per token (weights decoded to float, x not
// quantized: a batch follows the one-token path to a tolerance, as CUDA's products do).
// The types of gpu/cpu/iq_blocks.h (DType 12..24) stay matvecs, each token's x quantized as one
// token's is: as on the CPU device and in llama.cpp's batches, whose logits the float product on
// unquantized x moves visibly at these coarse types (matmul.comp decodes them all the same).
constexpr size_t kMatmulMinJobs = 8;

size_t VulkanDevice::matmulRun(std::span<const MatvecJob> jobs, size_t first) const
{
    const MatvecJob& a = jobs[first];
    if (a.w.type == DType::BitmapSparse || !supports(a.w.type) || a.w.type >= DType::Q2_K) return 1;
    const size_t n = evenJobRun(jobs, first);
    if (n < kMatmulMinJobs) return 1;
    // The shader indexes x and y in 32-bit floats.
    const uint64_t reach = std::max(uint64_t(jobs[first + 1].x - a.x), uint64_t(jobs[first + 1].y - a.y)) * n;
    return reach < (uint64_t{1} << 32) ? n : 1;
}

// ---- THE HOT SPOT OF DECODING: shaders/matvec_float.comp, matvec_quant.comp, matvec_bitmap.comp. 
// Quantized weights first need their x in Q8 (or Q8_K) form: each distinct x of the call is
// quantized once per form (the Q, K and V projections share theirs), then the jobs run as one
// group of dispatches with no barriers between them (the jobs of one call are independent).
void VulkanDevice::matvec(std::span<const MatvecJob> jobs)
{
    if (failed()) return;
    std::lock_guard lock(m_recordMutex);
    auto sameX = [](const MatvecJob& a, const MatvecJob& b) {
        return a.x == b.x && a.w.cols == b.w.cols && xFormFor(a.w.type) == xFormFor(b.w.type) &&
               xFormFor(a.w.type) != XForm::Float && a.w.rows > 0;
    };
    // Per job: the length of the run of batch jobs it starts (a matrix product), else 1; 0 for
    // the rest of a run.
    if (m_run.size() < jobs.size()) m_run.resize(jobs.size());  // grows only
    size_t* run = m_run.data();
    for (size_t i = 0; i < jobs.size(); ++i) {
        run[i] = matmulRun(jobs, i);
        for (size_t k = 1; k < run[i]; ++k) run[i + k] = 0;
        i += run[i] - 1;
    }
    uint64_t scratchBytes = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        if (j.w.rows <= 0 || j.w.cols <= 0) continue;
        if (!supports(j.w.type) || j.w.cols % dtypeTraits(j.w.type).blockSize != 0 || j.w.rows > UINT32_MAX ||
            j.w.cols > (int64_t{1} << 30) || !rowsAligned(j.w)) {
            recordError(ErrorCode::InvalidArgument, "vulkan device: matvec of " + std::to_string(j.w.rows) + "x" +
                                                        std::to_string(j.w.cols) + " values of type " +
                                                        dtypeName(j.w.type) +
                                                        " is not supported (or its rows are misaligned)");
            return;
        }
        if (xFormFor(j.w.type) == XForm::Float || run[i] != 1) continue;
        bool seen = false;  // as the quantizing loop below decides it: jobs of a product quantize nothing
        for (size_t e = 0; e < i && !seen; ++e) seen = run[e] == 1 && sameX(jobs[e], j);
        if (!seen) scratchBytes += xFormBytes(xFormFor(j.w.type), j.w.cols);
    }
    const uint64_t scratch = scratchBytes ? reserveScratch(m_xScratch, scratchBytes, "matvec") : 0;
    if (scratchBytes && !scratch) return;

    // Quantize each distinct x; job i's Q8 form starts at qOffset[i] in the scratch.
    if (m_qOffset.size() < jobs.size()) m_qOffset.resize(jobs.size());  // grows only
    uint64_t* qOffset = m_qOffset.data();
    uint64_t next = 0;
    bool first = true;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        const XForm form = xFormFor(j.w.type);
        if (j.w.rows <= 0 || j.w.cols <= 0 || form == XForm::Float || run[i] != 1) continue;
        size_t same = i;
        for (size_t e = 0; e < i && same == i; ++e)
            if (run[e] == 1 && sameX(jobs[e], j)) same = e;
        if (same != i) {
            qOffset[i] = qOffset[same];
            continue;
        }
        qOffset[i] = next;
        next += xFormBytes(form, j.w.cols);
        const uint64_t blocks = static_cast<uint64_t>(j.w.cols) / (form == XForm::Q8K ? 256 : 32);
        const uint64_t qs = scratch + qOffset[i];
        const uint64_t d = qs + static_cast<uint64_t>(j.w.cols);
        QuantizePush p{addr(j.x), qs, d, d + blocks * 4, static_cast<uint32_t>(blocks)};
        dispatch(form == XForm::Q8K ? Shader::QuantizeQ8K : Shader::QuantizeQ8, &p, pushSize(p), groupsFor(blocks, 64),
                 first);
        first = false;
    }
    // Rows per workgroup: with subgroups, one per subgroup of the workgroup (64 invocations for
    // float weights, 32 for quantized ones); otherwise the workgroup is the row's.
    const uint32_t floatRows = m_subgroups ? std::max<uint32_t>(1, 64 / m_subgroupSize) : 1;
    const uint32_t quantRows = m_subgroups ? std::max<uint32_t>(1, 32 / m_subgroupSize) : 1;
    first = true;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const MatvecJob& j = jobs[i];
        if (j.w.rows <= 0 || j.w.cols <= 0 || run[i] == 0) continue;
        if (run[i] > 1) {
            const uint64_t sx = uint64_t(jobs[i + 1].x - j.x), sy = uint64_t(jobs[i + 1].y - j.y);
            MatmulPush p{addr(j.w.data),           addr(j.x),
                         addr(j.y),                j.w.rowStride,
                         m_tables.address,
                         static_cast<uint32_t>(sx), static_cast<uint32_t>(sy),
                         static_cast<uint32_t>(j.w.rows), static_cast<uint32_t>(j.w.cols),
                         static_cast<uint32_t>(run[i]), static_cast<uint32_t>(j.w.type)};
            dispatch3(Shader::Matmul, &p, pushSize(p), static_cast<uint32_t>(groupsFor(uint64_t(j.w.rows), 64)),
                      static_cast<uint32_t>(groupsFor(run[i], 16)), 1, first);
        } else if (j.w.type == DType::BitmapSparse) {
            const MatvecBitmapPush p = bitmapPush(j.w, addr(j.x), addr(j.y), 0, 0);
            dispatch(Shader::MatvecBitmap, &p, pushSize(p), static_cast<uint64_t>(j.w.rows), first);
        } else if (const XForm form = xFormFor(j.w.type); form != XForm::Float) {
            const uint64_t blocks = static_cast<uint64_t>(j.w.cols) / (form == XForm::Q8K ? 256 : 32);
            const uint64_t qs = scratch + qOffset[i];
            MatvecQuantPush p{addr(j.w.data), qs, qs + static_cast<uint64_t>(j.w.cols),
                              qs + static_cast<uint64_t>(j.w.cols) + blocks * 4, addr(j.y), j.w.rowStride,
                              m_tables.address, static_cast<uint32_t>(j.w.rows), static_cast<uint32_t>(blocks),
                              static_cast<uint32_t>(j.w.type), quantRows};
            // Q4_K / Q5_K / Q6_K in matvec_kquant.comp, the other 256-value types in matvec_iq.comp.
            const bool kquant = j.w.type == DType::Q4_K || j.w.type == DType::Q5_K || j.w.type == DType::Q6_K;
            const Shader shader =
                form != XForm::Q8K ? (m_subgroups ? Shader::MatvecQuantSubgroups : Shader::MatvecQuant)
                : kquant           ? (m_subgroups ? Shader::MatvecKQuantSubgroups : Shader::MatvecKQuant)
                                   : (m_subgroups ? Shader::MatvecIqSubgroups : Shader::MatvecIq);
            dispatch(shader, &p, pushSize(p), groupsFor(static_cast<uint64_t>(j.w.rows), quantRows), first);
        } else {
            MatvecFloatPush p{addr(j.w.data), addr(j.x), addr(j.y), j.w.rowStride, static_cast<uint32_t>(j.w.rows),
                              static_cast<uint32_t>(j.w.cols), static_cast<uint32_t>(j.w.type), floatRows};
            dispatch(m_subgroups ? Shader::MatvecFloatSubgroups : Shader::MatvecFloat, &p, pushSize(p),
                     groupsFor(static_cast<uint64_t>(j.w.rows), floatRows), first);
        }
        first = false;
    }
}

void VulkanDevice::getRow(const MatrixView& w, int64_t row, float* out)
{
    if (failed() || w.cols <= 0) return;
    if (!supports(w.type) || !rowsAligned(w)) {
        recordError(ErrorCode::InvalidArgument, std::string("vulkan device: getRow of type ") + dtypeName(w.type) +
                                                    " is not supported (or its rows are misaligned)");
        return;
    }
    std::lock_guard lock(m_recordMutex);
    const bool inside = row >= 0 && row < w.rows;
    if (w.type == DType::BitmapSparse) {
        const uint32_t r = inside ? static_cast<uint32_t>(row) : static_cast<uint32_t>(w.rows);
        const MatvecBitmapPush p = bitmapPush(w, 0, addr(out), 1, r);
        dispatch(Shader::MatvecBitmap, &p, pushSize(p), 1);
        return;
    }
    const uint64_t rowAddress = inside ? addr(w.data) + static_cast<uint64_t>(row) * w.rowStride : 0;
    GetRowPush p{rowAddress, addr(out), m_tables.address, static_cast<uint32_t>(w.cols),
                 static_cast<uint32_t>(w.type)};
    dispatch(Shader::GetRow, &p, pushSize(p), groupsFor(static_cast<uint64_t>(w.cols), 64));
}

void VulkanDevice::rmsnorm(const float* x, const float* weight, float* out, int n, float eps)
{
    if (failed() || n <= 0) return;
    std::lock_guard lock(m_recordMutex);
    NormPush p{addr(x), addr(weight), addr(out), static_cast<uint32_t>(n), eps};
    dispatch(Shader::Rmsnorm, &p, pushSize(p), 1);
}

void VulkanDevice::layernorm(const float* x, const float* w, const float* b, float* out, int n, float eps)
{
    if (failed() || n <= 0) return;
    std::lock_guard lock(m_recordMutex);
    LayernormPush p{addr(x), addr(w), addr(b), addr(out), static_cast<uint32_t>(n), eps};
    dispatch(Shader::Layernorm, &p, pushSize(p), 1);
}

void VulkanDevice::rope(float* x, int nHeads, int headDim, int pos, const RopeParams& rp)
{
    const int dims = std::min(rp.rotaryDims, headDim) & ~1;
    if (failed() || dims <= 0 || nHeads <= 0 || pos < 0) return;
    std::lock_guard lock(m_recordMutex);
    // The same float operation as the CPU device's ropeOp, on the host, so both see one value.
    const float thetaScale = std::pow(rp.base, -2.0f / static_cast<float>(dims));
    RopePush p{addr(x),
               addr(rp.freqFactors),
               static_cast<uint32_t>(nHeads),
               static_cast<uint32_t>(headDim),
               static_cast<uint32_t>(pos),
               static_cast<uint32_t>(dims),
               thetaScale,
               rp.freqScale,
               rp.neox ? 1u : 0u};
    dispatch(m_float64 ? Shader::RopeF64 : Shader::Rope, &p, pushSize(p),
             groupsFor(static_cast<uint64_t>(nHeads) * static_cast<uint64_t>(dims / 2), 64));
}

void VulkanDevice::attention(const AttentionArgs& a) { attentionQueries(a, 1, 0); }

// A prompt batch's queries in one dispatch (a workgroup per head and query), each computed
// exactly as attention() computes it alone; their K and V stored first, one dispatch per
// position with no barrier between them (they write different positions).
void VulkanDevice::attentionBatch(const AttentionArgs& a, int queries, size_t rowStride)
{
    if (queries == 1) return attention(a);
    if (queries <= 0 || a.nPos < queries || rowStride > UINT32_MAX ||
        static_cast<uint64_t>(queries) > m_maxGroups[1])
        return Device::attentionBatch(a, queries, rowStride);
    attentionQueries(a, queries, rowStride);
}

void VulkanDevice::attentionQueries(const AttentionArgs& a, int queries, size_t rowStride)
{
    if (failed() || a.nHeads <= 0 || a.nKvHeads <= 0 || a.nHeads % a.nKvHeads != 0 || a.nPos <= 0 ||
        a.headDim <= 0 || (a.kvType == KvType::Q8 && (!a.kScales || !a.vScales)))
        return;  // nothing sensible to compute, as on the CPU device: out stays as it was
    std::lock_guard lock(m_recordMutex);
    // The caller's scratch holds one query's scores; a batch's go to the device's own.
    uint64_t scores = queries == 1 ? addr(a.scores) : 0;
    if (!scores) {
        const uint64_t bytes =
            static_cast<uint64_t>(a.nHeads) * static_cast<uint64_t>(a.nPos) * sizeof(float) * uint64_t(queries);
        scores = reserveScratch(m_scoreScratch, bytes, "attention scores");
        if (!scores) return;
    }
    const uint32_t kvType = static_cast<uint32_t>(a.kvType);
    if (a.kNew && a.vNew) {
        const uint64_t kvDim = static_cast<uint64_t>(a.nKvHeads) * static_cast<uint64_t>(a.headDim);
        for (int i = 0; i < queries; ++i) {
            StoreKvPush s{addr(a.kNew + i * kvDim),  addr(a.vNew + i * kvDim), addr(a.kCache),
                          addr(a.vCache),            addr(a.kScales),          addr(a.vScales),
                          static_cast<uint32_t>(a.nKvHeads), static_cast<uint32_t>(a.headDim),
                          static_cast<uint32_t>(a.nPos - queries + i), kvType};
            dispatch3(Shader::StoreKv, &s, pushSize(s), static_cast<uint32_t>(a.nKvHeads), 2, 1, i == 0);
        }
    }
    AttentionPush p{addr(a.q),
                    addr(a.kCache),
                    addr(a.vCache),
                    addr(a.out),
                    scores,
                    addr(a.kScales),
                    addr(a.vScales),
                    static_cast<uint32_t>(a.nHeads),
                    static_cast<uint32_t>(a.nKvHeads),
                    static_cast<uint32_t>(a.headDim),
                    static_cast<uint32_t>(a.nPos),
                    a.scale,
                    kvType,
                    static_cast<uint32_t>(queries),
                    static_cast<uint32_t>(rowStride)};
    dispatch3(Shader::Attention, &p, pushSize(p), static_cast<uint32_t>(a.nHeads), static_cast<uint32_t>(queries), 1,
              true);
}

void VulkanDevice::swiglu(const float* gate, const float* up, float* out, int n)
{
    if (failed() || n <= 0) return;
    std::lock_guard lock(m_recordMutex);
    SwigluPush p{addr(gate), addr(up), addr(out), static_cast<uint32_t>(n)};
    dispatch(Shader::Swiglu, &p, pushSize(p), groupsFor(static_cast<uint64_t>(n), 64));
}

void VulkanDevice::add(float* y, const float* x, int n)
{
    if (failed() || n <= 0) return;
    std::lock_guard lock(m_recordMutex);
    AddPush p{addr(y), addr(x), static_cast<uint32_t>(n)};
    dispatch(Shader::Add, &p, pushSize(p), groupsFor(static_cast<uint64_t>(n), 64));
}

void VulkanDevice::pointwise(const PointwiseArgs& a)
{
    if (failed() || a.n <= 0) return;
    std::lock_guard lock(m_recordMutex);
    PointwisePush p{addr(a.x), addr(a.y), addr(a.out), static_cast<uint32_t>(a.n), static_cast<uint32_t>(a.op),
                    a.shift, a.step, a.lo, a.hi, a.factor};
    dispatch(Shader::Pointwise, &p, pushSize(p), groupsFor(static_cast<uint64_t>(a.n), 64));
}

void VulkanDevice::scatterRows(const ScatterRowsArgs& a)
{
    if (failed() || a.count <= 0 || a.rowBytes == 0) return;
    if ((addr(a.dst) | addr(a.src) | a.dstStride | a.srcStride | a.rowBytes) % 4 != 0 || a.rowBytes / 4 > UINT32_MAX) {
        recordError(ErrorCode::InvalidArgument, "vulkan device: scatterRows needs addresses, strides and row sizes "
                                                "that are multiples of 4 bytes");
        return;
    }
    std::lock_guard lock(m_recordMutex);
    ScatterRowsPush p{addr(a.dst),  addr(a.src), addr(a.index), a.dstStride, a.srcStride,
                      static_cast<uint32_t>(a.rowBytes / 4), static_cast<uint32_t>(a.count)};
    dispatch(Shader::ScatterRows, &p, pushSize(p), static_cast<uint64_t>(a.count));
}

void VulkanDevice::rowSum(const RowSumArgs& a)
{
    if (failed() || a.w.cols <= 0) return;
    const bool int8 = a.scales != nullptr;
    if ((!int8 && a.w.type != DType::F32 && a.w.type != DType::F16 && a.w.type != DType::BF16) ||
        (int8 && !a.group) || a.w.rows < 0 || a.w.rows > UINT32_MAX || a.w.cols > UINT32_MAX ||
        (!int8 && !rowsAligned(a.w))) {
        recordError(ErrorCode::InvalidArgument, std::string("vulkan device: rowSum of type ") +
                                                    (int8 ? "int8" : dtypeName(a.w.type)) +
                                                    " is not supported (or its rows are misaligned)");
        return;
    }
    std::lock_guard lock(m_recordMutex);
    RowSumPush p{addr(a.w.data), addr(a.a), addr(a.y), addr(a.scales), addr(a.group), a.w.rowStride,
                 static_cast<uint32_t>(a.w.rows), static_cast<uint32_t>(a.w.cols), static_cast<uint32_t>(a.w.type)};
    dispatch(Shader::RowSum, &p, pushSize(p), groupsFor(static_cast<uint64_t>(a.w.cols), 64));
}

}  // namespace spillway::gpu::vulkan
