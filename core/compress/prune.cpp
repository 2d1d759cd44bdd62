// Magnitude / Wanda pruning (unstructured and N:M), the model's matrix list, and dense fp32
// rows from any stored weight type. The calibration run lives in prune_calibration.cpp.

#include "core/compress/prune.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/formats/ggml_quants.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "gpu/dtype.h"
#include "gpu/sparse_format.h"

namespace spillway::compress {

namespace {

Status checkInputs(const float* w, int64_t rows, int64_t cols, const float* columnNorms,
                   const char* what)
{
    if (rows < 0 || cols < 0 || (rows > 0 && cols > 0 && !w))
        return makeError(ErrorCode::InvalidArgument,
                         std::string(what) + ": bad matrix shape " + std::to_string(rows) + " x " +
                             std::to_string(cols));
    if (columnNorms)
        for (int64_t c = 0; c < cols; ++c)
            if (!std::isfinite(columnNorms[c]) || columnNorms[c] < 0.0f)
                return makeError(ErrorCode::InvalidArgument,
                                 std::string(what) + ": column norm " + std::to_string(c) +
                                     " is not a finite value >= 0");
    const int64_t n = rows * cols;
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(w[i]))
            return makeError(ErrorCode::InvalidArgument, std::string(what) + ": weight " +
                                                             std::to_string(i) + " is not finite");
    return {};
}

// Scores of one row and the order "better first": higher score, then lower column.
class RowScorer {
public:
    RowScorer(int64_t cols, const float* columnNorms)
        : m_norms(columnNorms), m_score(size_t(cols)), m_index(size_t(cols)) {}

    void score(const float* row, int64_t begin, int64_t end)
    {
        for (int64_t c = begin; c < end; ++c) {
            const double a = std::fabs(double(row[c]));
            m_score[size_t(c)] = m_norms ? a * double(m_norms[c]) : a;
        }
    }
    bool better(int32_t a, int32_t b) const
    {
        const double sa = m_score[size_t(a)], sb = m_score[size_t(b)];
        return sa != sb ? sa > sb : a < b;
    }
    // Zeroes all but the `keep` best weights of columns [begin, end) of `row` (scored already).
    void keepBest(float* row, int64_t begin, int64_t end, int64_t keep)
    {
        const int64_t len = end - begin;
        if (keep >= len) return;
        int32_t* idx = m_index.data();
        std::iota(idx, idx + len, int32_t(begin));
        auto cmp = [this](int32_t a, int32_t b) { return better(a, b); };
        if (keep > 0) std::nth_element(idx, idx + keep, idx + len, cmp);  // [0, keep): the best
        for (int64_t i = keep; i < len; ++i) row[idx[i]] = 0.0f;
    }

private:
    const float* m_norms;
    std::vector<double> m_score;   // (cols)
    std::vector<int32_t> m_index;  // (cols) scratch
};

}  // namespace

Status pruneMagnitude(float* w, int64_t rows, int64_t cols, double ratio, const float* columnNorms)
{
    if (!(ratio >= 0.0 && ratio <= 1.0))
        return makeError(ErrorCode::InvalidArgument,
                         "pruneMagnitude: ratio " + std::to_string(ratio) + " is not in [0, 1]");
    if (cols > INT32_MAX)
        return makeError(ErrorCode::InvalidArgument, "pruneMagnitude: too many columns");
    SPILLWAY_TRY(checkInputs(w, rows, cols, columnNorms, "pruneMagnitude"));
    // floor(ratio * cols), with 1e-9 of slack so that a product a double cannot hold exactly
    // (0.29 * 100 = 28.999999999999996) floors to the count the caller meant (29).
    const int64_t prune = std::min<int64_t>(cols, int64_t(std::floor(ratio * double(cols) + 1e-9)));
    if (prune == 0 || rows == 0) return {};
    RowScorer scorer(cols, columnNorms);
    for (int64_t r = 0; r < rows; ++r) {
        float* row = w + r * cols;
        scorer.score(row, 0, cols);
        scorer.keepBest(row, 0, cols, cols - prune);
    }
    return {};
}

Status pruneNM(float* w, int64_t rows, int64_t cols, int n, int m, const float* columnNorms)
{
    if (m < 1 || n < 0 || n > m)
        return makeError(ErrorCode::InvalidArgument,
                         "pruneNM: " + std::to_string(n) + ":" + std::to_string(m) + " is not N:M");
    if (cols > INT32_MAX) return makeError(ErrorCode::InvalidArgument, "pruneNM: too many columns");
    SPILLWAY_TRY(checkInputs(w, rows, cols, columnNorms, "pruneNM"));
    if (n == m || rows == 0) return {};
    RowScorer scorer(cols, columnNorms);
    for (int64_t r = 0; r < rows; ++r) {
        float* row = w + r * cols;
        scorer.score(row, 0, cols);
        for (int64_t g = 0; g < cols; g += m) {
            const int64_t end = std::min<int64_t>(cols, g + m);
            scorer.keepBest(row, g, end, std::min<int64_t>(n, end - g));
        }
    }
    return {};
}

std::vector<NamedMatrix> linearMatrices(const LlamaModel& model)
{
    const LlamaWeights& w = model.weights();
    std::vector<NamedMatrix> list;
    struct Member {
        gpu::MatrixView LlamaLayerWeights::*view;
        const char* suffix;
    };
    using L = LlamaLayerWeights;
    static constexpr Member kMembers[] = {
        {&L::wq, "attn_q.weight"},     {&L::wk, "attn_k.weight"}, {&L::wv, "attn_v.weight"},
        {&L::wo, "attn_output.weight"}, {&L::gate, "ffn_gate.weight"}, {&L::up, "ffn_up.weight"},
        {&L::down, "ffn_down.weight"},
    };
    for (size_t l = 0; l < w.layers.size(); ++l)
        for (const Member& m : kMembers)
            if ((w.layers[l].*(m.view)).data)  // absent: an ungated FFN's gate (OPT)
                list.push_back({"blk." + std::to_string(l) + "." + m.suffix, w.layers[l].*(m.view)});
    const bool tied = model.tiedEmbeddings();
    list.push_back({tied ? "token_embd.weight" : "output.weight", w.output, true});
    return list;
}

Result<std::vector<float>> denseRowsF32(const gpu::MatrixView& v)
{
    std::vector<float> out;
    SPILLWAY_TRY(denseRowsF32(v, out));
    return out;
}

Status denseRowsF32(const gpu::MatrixView& v, std::vector<float>& out)
{
    if (v.type == gpu::DType::BitmapSparse && v.data) {
        const gpu::BitmapSparseView b = gpu::viewBitmapBlob(v.data);
        if (b.rows != v.rows || b.cols != v.cols)
            return makeError(ErrorCode::InvalidArgument, "denseRowsF32: bitmap sparse blob shape differs from its view");
        out.resize(size_t(v.rows) * size_t(v.cols));
        for (int64_t r = 0; r < v.rows; ++r) gpu::decodeBitmapSparseRow(b, r, out.data() + size_t(r) * size_t(v.cols));
        return {};
    }
    const auto& traits = gpu::dtypeTraits(v.type);
    if (!v.data || v.rows < 0 || v.cols < 0 || v.cols % traits.blockSize != 0 ||
        v.rowStride < gpu::rowBytes(v.type, v.cols))
        return makeError(ErrorCode::InvalidArgument,
                         std::string("denseRowsF32: bad ") + traits.name + " matrix view " +
                             std::to_string(v.rows) + " x " + std::to_string(v.cols));
    out.resize(size_t(v.rows) * size_t(v.cols));
    const int64_t blocks = v.cols / traits.blockSize;
    for (int64_t r = 0; r < v.rows; ++r) {
        const uint8_t* row = static_cast<const uint8_t*>(v.data) + size_t(r) * v.rowStride;
        float* o = out.data() + size_t(r) * size_t(v.cols);
        auto u16 = [](const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return h; };
        switch (v.type) {
        case gpu::DType::F32:
            std::memcpy(o, row, size_t(v.cols) * 4);
            break;
        case gpu::DType::F16:
            for (int64_t c = 0; c < v.cols; ++c) o[c] = gpu::fp16ToFp32(u16(row + 2 * c));
            break;
        case gpu::DType::BF16:
            for (int64_t c = 0; c < v.cols; ++c) o[c] = gpu::bf16ToFp32(u16(row + 2 * c));
            break;
        case gpu::DType::Q8_0:  // [fp16 d][32 x int8 q]: d * q
            for (int64_t b = 0; b < blocks; ++b) {
                const uint8_t* block = row + b * 34;
                const float d = gpu::fp16ToFp32(u16(block));
                for (int i = 0; i < 32; ++i) o[b * 32 + i] = d * float(int8_t(block[2 + i]));
            }
            break;
        case gpu::DType::Q4_0:  // [fp16 d][16 bytes]: low nibbles values 0..15, high 16..31
            for (int64_t b = 0; b < blocks; ++b) {
                const uint8_t* block = row + b * 18;
                const float d = gpu::fp16ToFp32(u16(block));
                for (int i = 0; i < 16; ++i) {
                    o[b * 32 + i] = d * float(int(block[2 + i] & 0x0F) - 8);
                    o[b * 32 + 16 + i] = d * float(int(block[2 + i] >> 4) - 8);
                }
            }
            break;
        case gpu::DType::BitmapSparse: break;  // handled above
        default: gguf::dequantizeRow(v.type, row, v.cols, o); break;  // ggml's other block types
        }
    }
    return {};
}

}  // namespace spillway::compress
