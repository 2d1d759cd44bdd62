#pragma once
// The one backend interface. The engine calls only this; it never names a backend.
// Every pointer an op takes points into memory the device owns: a Buffer it allocated, or, for
// devices that report `hostPointers`, any host memory (memory-mapped model files included).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "gpu/dtype.h"

namespace spillway::gpu {

struct DeviceCapabilities {
    bool hostPointers = false;   // ops accept plain host pointers (the CPU device)
    bool asyncCopy = false;      // copies overlap compute
    bool pinnedHostMemory = false;
    bool events = false;
    bool emulated = false;  // a GPU API that runs on the host's CPU (Mesa's lavapipe): "auto" skips it
    // Ops beyond Llama's that a backend may not have yet (the engine checks a model's needs
    // against these before it runs the model there): AttentionArgs::sinks and ::window, and
    // PointwiseOp::ClampedSwiglu.
    bool attentionSinks = false;
    bool slidingWindow = false;
    bool clampedSwiglu = false;
    // Device::deltaNet (Gated DeltaNet layers) and PointwiseOp::SigmoidMul (gated attention).
    bool deltaNet = false;
    bool sigmoidGate = false;
};

struct DeviceInfo {
    std::string backend;       // "cpu", "cuda", "vulkan"
    std::string name;          // e.g. "AMD EPYC (2 threads, AVX2+FMA+F16C)"
    uint64_t totalMemory = 0;  // bytes
    uint64_t freeMemory = 0;   // bytes
    int threads = 1;           // CPU worker threads (CPU device)
    std::string kernels;       // which kernel set runs: "avx2", "scalar", ...
    DeviceCapabilities caps;
};

// Device-memory accounting, kept by the device's own allocator. `limit` is the budget the device
// was created with (DeviceOptions::memoryLimit) or its physical memory; allocations past it fail.
struct MemoryStats {
    uint64_t used = 0;   // bytes in live device buffers
    uint64_t peak = 0;   // highest `used` since creation (or the last resetPeak)
    uint64_t limit = 0;  // 0: none beyond the machine's
    uint64_t hostUsed = 0;  // bytes in live allocateHost buffers (pinned host memory)
    uint64_t hostPeak = 0;
};

// Device memory. Move-only; gives itself back through `release(owner, data, bytes)`, so the
// device that made it can keep its accounting. A device outlives the buffers it made.
class Buffer {
public:
    using Release = void (*)(void* owner, void* data, size_t bytes);
    Buffer() = default;
    Buffer(void* data, size_t bytes, Release release, void* owner)
        : m_data(data), m_bytes(bytes), m_release(release), m_owner(owner) {}
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept
    {
        if (this != &o) {
            reset();
            m_data = o.m_data; m_bytes = o.m_bytes; m_release = o.m_release; m_owner = o.m_owner;
            o.m_data = nullptr; o.m_bytes = 0; o.m_release = nullptr; o.m_owner = nullptr;
        }
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { reset(); }

    void* data() const { return m_data; }
    template <class T> T* as() const { return static_cast<T*>(m_data); }
    size_t bytes() const { return m_bytes; }
    explicit operator bool() const { return m_data != nullptr; }
    void reset()
    {
        if (m_data && m_release) m_release(m_owner, m_data, m_bytes);
        m_data = nullptr;
        m_bytes = 0;
    }

private:
    void* m_data = nullptr;
    size_t m_bytes = 0;
    Release m_release = nullptr;
    void* m_owner = nullptr;
};

// How the bytes of one row are ordered. Rows keep their size and place in every layout, so a
// view of some of a matrix's rows works the same way in each.
enum class RowLayout : uint8_t {
    Stored,          // as in the model file (GGUF's blocks, one after another)
    Q8_0ScalesLast,  // Q8_0 only: the row's cols int8 values, then its cols / 32 fp16 scales.
                     // Made by the CPU device's uploadMatrix (its AVX-512 kernel reads whole
                     // 64-byte lines of values instead of 34-byte blocks); read by its matvec
                     // and getRow only.
};

// A row-major weight matrix: `rows` rows of `cols` values, row r at data + r * rowStride bytes.
struct MatrixView {
    DType type = DType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;          // multiple of the type's block size
    size_t rowStride = 0;      // bytes; rowBytes(type, cols) for a packed matrix (unused for
                               // BitmapSparse: data is the whole blob)
    RowLayout layout = RowLayout::Stored;
};

// Bytes the matrix occupies: rows * rowStride, or a BitmapSparse blob's size (read from its
// header at data, which must be host-readable).
uint64_t matrixBytes(const MatrixView& m);

// y = W x : y[r] = sum_c W[r, c] * x[c] for r in [0, w.rows). x holds w.cols floats.
struct MatvecJob {
    MatrixView w;
    const float* x = nullptr;
    float* y = nullptr;
};

struct RopeParams {
    int rotaryDims = 0;        // leading dims of each head that rotate (= head dim for Llama)
    float base = 10000.0f;     // theta base
    float freqScale = 1.0f;    // linear rope scaling: position * freqScale
    bool neox = false;         // false: rotate pairs (2i, 2i+1) (GGUF Llama); true: (i, i + d/2)
    // Device memory, rotaryDims / 2 floats: pair i's angle is divided by freqFactors[i] (Llama 3
    // scaling, llama.cpp's rope_freqs); null for none.
    const float* freqFactors = nullptr;
};

// Element type of the KV cache. Values kept in settings: never reuse a number.
//   F32: float (exact; the default)
//   F16: IEEE half, rounded to nearest even
//   Q8:  int8 with one float scale per (position, kv head) vector of headDim values:
//        scale = max|x| / 127, q = round_half_away_from_zero(x / scale) in [-127, 127] (all 0
//        when max|x| is 0); value = q * scale
enum class KvType : uint8_t { F32 = 0, F16 = 1, Q8 = 2 };
inline constexpr int kKvTypeCount = 3;

// "f32", "f16", "q8": the spelling of the command line and the settings.
inline const char* kvTypeName(KvType t)
{
    switch (t) {
    case KvType::F16: return "f16";
    case KvType::Q8: return "q8";
    case KvType::F32: break;
    }
    return "f32";
}

// The inverse of kvTypeName; nullopt for anything else.
inline std::optional<KvType> parseKvType(std::string_view name)
{
    for (KvType t : {KvType::F32, KvType::F16, KvType::Q8})
        if (name == kvTypeName(t)) return t;
    return std::nullopt;
}

// Bytes of one cached value (Q8: its int8, the vector's scale not included).
inline size_t kvElementBytes(KvType t)
{
    return t == KvType::F32 ? 4 : t == KvType::F16 ? 2 : 1;
}

// Bytes one cached (position, kv head) vector of headDim values takes, its Q8 scale included.
inline uint64_t kvVectorBytes(KvType t, int headDim)
{
    const uint64_t n = headDim > 0 ? static_cast<uint64_t>(headDim) : 0;
    return n * kvElementBytes(t) + (t == KvType::Q8 ? sizeof(float) : 0);
}

// Decode-time attention of one query token against positions [0, nPos) of one layer's KV cache.
// The first fields keep their order (tests build this struct positionally).
struct AttentionArgs {
    const float* q = nullptr;       // (nHeads, headDim)
    const void* kCache = nullptr;   // (ctx, nKvHeads, headDim) kvType values, [0, nPos) valid
    const void* vCache = nullptr;   // (ctx, nKvHeads, headDim)
    float* out = nullptr;           // (nHeads, headDim)
    float* scores = nullptr;        // scratch (nHeads, ctx)
    int nHeads = 0;
    int nKvHeads = 0;               // nHeads % nKvHeads == 0 (grouped-query attention)
    int headDim = 0;
    int nPos = 0;                   // number of cached positions to attend to (query included)
    float scale = 1.0f;             // usually 1 / sqrt(headDim)
    KvType kvType = KvType::F32;    // element type of kCache / vCache
    const float* kScales = nullptr; // Q8 only: (ctx, nKvHeads) scale of each cached vector
    const float* vScales = nullptr;
    // This step's K and V (nKvHeads, headDim floats each), or null. When set, the op first
    // writes them, converted to kvType, into the caches (and scales) at position nPos - 1, so
    // an f16 or q8 cache is filled on the device that holds it; the caches must be writable
    // then. Null: the caller has stored position nPos - 1 itself (an F32 cache can be written
    // directly by the K/V projections).
    const float* kNew = nullptr;
    const float* vNew = nullptr;
    // Learned attention sinks (gpt-oss): one logit per head (nHeads floats), which joins each
    // softmax's maximum and denominator and carries no value. Null: none. Devices whose caps
    // lack attentionSinks ignore it (the engine does not give them such a model).
    const float* sinks = nullptr;
    // Sliding-window attention: a query at position p sees the cached positions t with
    // p - t < window (its own included), 0: every position before it. Devices whose caps lack
    // slidingWindow ignore it.
    int window = 0;
    // A sliding-window layer's cache as a ring (LlamaConfig::kvPositions): position t's vector
    // (and scale) at row t % ring of kCache / vCache. 0: at row t. Devices whose caps lack
    // slidingWindow are given no ring.
    int ring = 0;
};

// Elementwise ops of the architectures beyond Llama's SwiGLU (one entry point, so that a
// backend gains an op by a case rather than a method).
enum class PointwiseOp : uint8_t {
    ShiftedRelu,     // out[i] = max(0, x[i] - shift)
    ShiftedReluGlu,  // out[i] = max(0, x[i] - shift) * y[i]     (a ReLU-gated FFN)
    SnapToGrid,      // out[i] = clamp(round(x[i] / step), lo, hi) * step, round half away from
                     // zero (an int8 cache with one fixed scale: lo -128, hi 127)
    Scale,           // out[i] = x[i] * factor                  (a mixture of experts' weights:
    ScaledAdd,       // out[i] = (x[i] * factor) + y[i]          the product rounded, then added)
    ClampedSwiglu,   // gpt-oss's experts: g = min(x[i], hi), u = clamp(y[i], -hi, hi),
                     // out[i] = g / (1 + exp(-factor g)) * (u + 1)   (factor: alpha, hi: limit)
    SigmoidMul,      // out[i] = x[i] * (1 / (1 + exp(-y[i])))  (an attention's output gate)
};

struct PointwiseArgs {
    PointwiseOp op = PointwiseOp::ShiftedRelu;
    const float* x = nullptr;
    const float* y = nullptr;  // ShiftedReluGlu's second operand
    float* out = nullptr;      // may alias x or y
    int n = 0;
    float shift = 0.0f;
    float step = 1.0f;
    float lo = -128.0f, hi = 127.0f;
    float factor = 1.0f;  // Scale, ScaledAdd; ClampedSwiglu's alpha
};

// One token through a Gated DeltaNet mixer (LlamaConfig's ssm* fields say the shapes), as
// ik_llama.cpp's delta_net computes it. The projections come in as the matrices gave them:
//   unfused: qkv = [q (kHeads x stateDim) | k (same) | v (vHeads x headVDim)], z (vHeads x
//            headVDim), beta and alpha (vHeads each);
//   fused:   qkv = per key head [q | k | v (r x headVDim) | z (r x headVDim)] (r = vHeads /
//            kHeads), beta = per key head [beta (r) | alpha (r)]; z and alpha null.
// Then: the causal convolution of each channel of [q | k | v] over its last `kernel` inputs
// (convState's kernel - 1 and this one; convState then moves on by one), SiLU; q and k L2-normed
// per head (over max(norm, eps)), q times 1 / sqrt(stateDim); per value head h, with its key
// head kh (h % kHeads where tiled, h / r otherwise), decay g = exp(min(softplus(alpha_h + dtBias_h)
// * a_h, 50)) and b = sigmoid(beta_h), on its state S (headVDim x stateDim, row-major):
//   S = g S;  u = b (v_h - S k);  S += u k^T (each value clamped to +-1e6);  o_h = S q
// and out_h = rmsnorm(o_h, eps) * normWeight * silu(z_h). All pointers are device memory; the
// states are read and written in place.
//
// n tokens in order (a prompt's batch): token i's inputs and output at the pointers plus
// i * stride floats. A device may run them in the chunked (matrix) form of the same rule
// (gpu/cpu/delta_net.cpp): the same outputs and states to float rounding, the clamp applied at
// each chunk's end instead of each token's (it only ever bounds a state that diverged).
struct DeltaNetArgs {
    const float* qkv = nullptr;
    const float* z = nullptr;
    const float* beta = nullptr;
    const float* alpha = nullptr;
    const float* convWeight = nullptr;  // (convDim, kernel) taps, oldest input first
    const float* dtBias = nullptr;      // (vHeads)
    const float* a = nullptr;           // (vHeads)
    const float* normWeight = nullptr;  // (headVDim)
    float* convState = nullptr;         // (kernel - 1, convDim): the last inputs, oldest first
    float* state = nullptr;             // (vHeads, headVDim, stateDim)
    float* out = nullptr;               // (vHeads x headVDim)
    int kHeads = 0, vHeads = 0, stateDim = 0, headVDim = 0, kernel = 0;
    bool fused = false, tiled = false;
    float eps = 1e-6f;
    int n = 1;          // tokens
    size_t stride = 0;  // floats from one token's inputs (and output) to the next's, where n > 1
};

// The neuron cache's copy (sparse_ffn.cpp): the bundles that arrived in one upload go to their
// slots. Row i of src (at src + i * srcStride) is copied to dst + index[i] * dstStride, rowBytes
// bytes, for i in [0, count). index holds count int32 in device memory; addresses, strides and
// rowBytes are multiples of 4, and no two destinations overlap.
struct ScatterRowsArgs {
    void* dst = nullptr;
    size_t dstStride = 0;
    const void* src = nullptr;
    size_t srcStride = 0;
    size_t rowBytes = 0;
    const int32_t* index = nullptr;
    int count = 0;
};

// The weighted sum of W's rows (W transposed times a): y[c] = sum over r in [0, w.rows) of
// a[r] * W[r, c], for c in [0, w.cols); rows whose a[r] is 0 are not read (they may hold anything).
// The neuron cache keeps each neuron's down column as one row of its slots, so this is its down
// projection. W is F32, F16 or BF16 (rows aligned to their element size); or, when `scales` is
// set, int8 values (w.type is then ignored) with W[r, c] = q[r, c] * scales[group[r] * w.cols + c]
// (group: w.rows int32, the row of the scale table each row uses). y is overwritten.
struct RowSumArgs {
    MatrixView w;
    const float* a = nullptr;
    float* y = nullptr;
    const float* scales = nullptr;
    const int32_t* group = nullptr;
};

// The steady clock in nanoseconds (trace::nowNs's clock), for Device::takeMarks.
inline uint64_t steadyClockNs()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch()).count());
}

class Device {
public:
    virtual ~Device() = default;
    virtual const DeviceInfo& info() const = 0;
    virtual bool supports(DType type) const = 0;

    // Device memory, aligned to at least 64 bytes (4096 on the CPU device, so direct I/O can
    // read into it). Out of memory, or past the budget, is an Error, never a crash.
    virtual Result<Buffer> allocate(size_t bytes) = 0;
    // Page-locked host memory for staging copies (mapped pages registered with the driver on
    // CUDA; aligned RAM on the CPU device), 4096-byte aligned: direct I/O reads land in it.
    // Counted in memoryStats().hostUsed.
    virtual Result<Buffer> allocateHost(size_t bytes) = 0;
    virtual MemoryStats memoryStats() const = 0;
    virtual void resetPeak() = 0;
    // Copies between host memory and device buffers. They return when the copy is complete and
    // may be called from another thread while ops run (the runtime's prefetcher does so; on
    // CUDA they go through a separate copy stream). An op issued after upload() returns sees
    // the data.
    virtual void upload(void* deviceDst, const void* hostSrc, size_t bytes) = 0;
    virtual void download(void* hostDst, const void* deviceSrc, size_t bytes) = 0;
    // A weight matrix copied into a new device buffer of `bytes` (matrixBytes(src)) bytes, for
    // matvec and getRow only: the device may reorder each row's bytes into the layout its
    // kernels read fastest (the returned view says which). src (in host memory) is not modified.
    // This default uploads the bytes as they are. Called like an op: from the thread that
    // issues ops, not from a loader thread.
    struct UploadedMatrix {
        Buffer buffer;
        MatrixView view;  // points into buffer
    };
    virtual Result<UploadedMatrix> uploadMatrix(const MatrixView& src, size_t bytes)
    {
        auto b = allocate(bytes);
        if (!b) return b.error();
        upload(b->data(), src.data, bytes);
        MatrixView view = src;
        view.data = b->data();
        return UploadedMatrix{std::move(b.value()), view};
    }
    // Waits until every op issued so far has finished (a device buffer may be overwritten then).
    virtual void synchronize() = 0;
    // The first error an op or copy met on the device (ops return nothing, and on a GPU they
    // run after they return); sticky. The CPU device never fails an op.
    virtual Status lastError() const { return {}; }

    // ---- the device's clock, for the timeline -------------------------------------------------
    // On a GPU the ops run after they return, so the caller's clock cannot time them. mark()
    // records, in order with the ops, the moment the device has finished every op issued before
    // it. After synchronize(), takeMarks() writes the marks made since its last call, oldest
    // first, in nanoseconds of the steady clock (trace::nowNs's), and returns how many: the
    // newest min(made, out.size(), kMaxMarks). The device's clock is tied to the host's by taking
    // the newest mark to finish when synchronize() returned: mark just before synchronizing.
    // A device whose ops finish when they return (the CPU) keeps no marks and returns 0.
    static constexpr size_t kMaxMarks = 1024;
    virtual void mark() {}
    virtual size_t takeMarks(std::span<uint64_t> out) { (void)out; return 0; }

    // ---- ops; activations are float32 -----------------------------------------------------
    // Runs the jobs as one parallel dispatch (the Q, K and V projections of a layer, say).
    // The hot spot of decoding: put faster kernels behind this.
    virtual void matvec(std::span<const MatvecJob> jobs) = 0;
    void matvec(const MatrixView& w, const float* x, float* y) { MatvecJob j{w, x, y}; matvec({&j, 1}); }
    // out[c] = W[row, c] for c in [0, w.cols) (embedding lookup).
    virtual void getRow(const MatrixView& w, int64_t row, float* out) = 0;
    // out = x / sqrt(mean(x^2) + eps) * weight; n values. out may alias x.
    virtual void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) = 0;
    // out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias; n values; out may alias x.
    virtual void layernorm(const float* x, const float* weight, const float* bias, float* out, int n, float eps) = 0;
    // Rotates, in place, `nHeads` heads of `headDim` values at position `pos`.
    virtual void rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p) = 0;
    virtual void attention(const AttentionArgs& a) = 0;
    // A prompt batch's attention: `queries` queries at consecutive positions, the last at
    // a.nPos - 1, so query i (from 0) attends to positions [0, a.nPos - queries + i] (causal).
    // a.q and a.out hold one row per query, `rowStride` floats apart (nHeads * headDim used);
    // a.kNew / a.vNew, when set, hold the queries' K and V, nKvHeads * headDim floats each, back
    // to back, and are stored first; a.scores holds nHeads * a.nPos floats. The default runs
    // attention() once per query, in order; the CPU turns a batch of 8 or more (kGemmMinJobs) into
    // matrix products (same tolerance as its prompt matrix products).
    virtual void attentionBatch(const AttentionArgs& a, int queries, size_t rowStride)
    {
        const size_t kvDim = static_cast<size_t>(a.nKvHeads) * static_cast<size_t>(a.headDim);
        for (int i = 0; i < queries; ++i) {
            AttentionArgs one = a;
            one.q = a.q + static_cast<size_t>(i) * rowStride;
            one.out = a.out + static_cast<size_t>(i) * rowStride;
            one.nPos = a.nPos - queries + 1 + i;
            if (a.kNew && a.vNew) {
                one.kNew = a.kNew + static_cast<size_t>(i) * kvDim;
                one.vNew = a.vNew + static_cast<size_t>(i) * kvDim;
            }
            attention(one);
        }
    }
    // out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
    virtual void swiglu(const float* gate, const float* up, float* out, int n) = 0;
    // y[i] += x[i]
    virtual void add(float* y, const float* x, int n) = 0;
    virtual void pointwise(const PointwiseArgs& a) = 0;
    // a.n tokens through a Gated DeltaNet mixer (DeltaNetArgs). Devices whose caps lack deltaNet
    // do nothing (the engine does not give them such a model).
    virtual void deltaNet(const DeltaNetArgs& a) { (void)a; }
    // The neuron cache's ops (ScatterRowsArgs, RowSumArgs above).
    virtual void scatterRows(const ScatterRowsArgs& a) = 0;
    virtual void rowSum(const RowSumArgs& a) = 0;
};

}  // namespace spillway::gpu
