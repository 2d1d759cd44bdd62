#include "core/compress/bitmap_sparse.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/compress/group_quant.h"
#include "core/compress/half.h"
#include "gpu/dtype.h"

namespace spillway::compress {

int64_t BitmapSparseMatrix::rowNonZeros(int64_t r) const
{
    const uint8_t* row = bitmapRow(r);
    int64_t n = 0;
    for (int64_t w = 0; w < bitmapRowBytes() / 8; ++w) n += __builtin_popcountll(detail::load64(row + 8 * w));
    return n;
}

int64_t BitmapSparseMatrix::nonZeros() const
{
    int64_t n = 0;
    for (int64_t r = 0; r < rows; ++r) n += rowNonZeros(r);
    return n;
}

namespace {

// Quantized rows: drops the non-zeros whose code is 0 and re-quantizes the rest until every
// code is non-zero. Each pass removes at least one value or stops; a group's largest value
// never rounds to 0, so this ends after a few passes.
void keepNonZeroCodes(std::vector<float>& vals, std::vector<int32_t>& cols, int bits, int group)
{
    int8_t codes[128];
    for (;;) {
        size_t kept = 0;
        bool dropped = false;
        for (size_t g0 = 0; g0 < vals.size(); g0 += static_cast<size_t>(group)) {
            const int len = static_cast<int>(std::min<size_t>(group, vals.size() - g0));
            uint16_t scale;
            quantizeGroup(vals.data() + g0, len, bits, &scale, codes);
            for (int i = 0; i < len; ++i) {
                if (codes[i] == 0) {
                    dropped = true;
                    continue;
                }
                vals[kept] = vals[g0 + i];
                cols[kept] = cols[g0 + i];
                ++kept;
            }
        }
        vals.resize(kept);
        cols.resize(kept);
        if (!dropped) return;
    }
}

}  // namespace

Result<BitmapSparseMatrix> encode(const float* dense, int64_t rows, int64_t cols, ValueFormat format,
                                  int group)
{
    if (static_cast<int>(format) > static_cast<int>(ValueFormat::Int4))
        return makeError(ErrorCode::InvalidArgument, "bitmap sparse: unknown value format");
    if (isQuantized(format) && !validQuantParams(quantBits(format), group))
        return makeError(ErrorCode::InvalidArgument,
                         "bitmap sparse: group must be 32, 64 or 128 (got " + std::to_string(group) + ")");
    if (rows < 0 || cols < 0 || cols > INT32_MAX || (rows > 0 && cols > 0 && !dense))
        return makeError(ErrorCode::InvalidArgument, "bitmap sparse: bad matrix shape");

    BitmapSparseMatrix m;
    m.format = format;
    m.group = isQuantized(format) ? group : 0;
    m.rows = rows;
    m.cols = cols;
    m.rowOffsets.assign(static_cast<size_t>(rows) + 1, 0);
    m.bitmap.assign(static_cast<size_t>(rows * m.bitmapRowBytes()), 0);

    std::vector<float> vals;
    std::vector<int32_t> nzCols;
    vals.reserve(static_cast<size_t>(cols));
    nzCols.reserve(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float* w = dense + r * cols;
        vals.clear();
        nzCols.clear();
        for (int64_t c = 0; c < cols; ++c) {
            if (!std::isfinite(w[c]))
                return makeError(ErrorCode::InvalidArgument, "bitmap sparse: non-finite weight at row " +
                                                                 std::to_string(r) + ", column " +
                                                                 std::to_string(c));
            if (w[c] != 0.0f) {
                vals.push_back(w[c]);
                nzCols.push_back(static_cast<int32_t>(c));
            }
        }
        if (isQuantized(format)) keepNonZeroCodes(vals, nzCols, quantBits(format), group);

        uint8_t* bits = m.bitmap.data() + r * m.bitmapRowBytes();
        for (int32_t c : nzCols) bits[c / 8] |= static_cast<uint8_t>(1u << (c % 8));

        const size_t at = m.values.size();
        const int64_t nnz = static_cast<int64_t>(vals.size());
        m.values.resize(at + packedValueBytes(format, group, nnz));
        uint8_t* out = m.values.data() + at;
        switch (format) {
        case ValueFormat::F32: std::memcpy(out, vals.data(), vals.size() * 4); break;
        case ValueFormat::F16:
        case ValueFormat::BF16:
            for (int64_t i = 0; i < nnz; ++i) {
                const uint16_t h = format == ValueFormat::F16 ? gpu::fp32ToFp16(vals[i]) : gpu::fp32ToBf16(vals[i]);
                std::memcpy(out + 2 * i, &h, 2);
            }
            break;
        case ValueFormat::Int8:
        case ValueFormat::Int4: quantizeValues(vals.data(), nnz, quantBits(format), group, out); break;
        }
        m.rowOffsets[r + 1] = m.values.size();
    }
    return m;
}

gpu::BitmapSparseView viewOf(const BitmapSparseMatrix& m)
{
    gpu::BitmapSparseView v;
    v.format = m.format;
    v.group = m.group;
    v.rows = m.rows;
    v.cols = m.cols;
    v.rowOffsets = m.rowOffsets.data();
    v.bitmap = m.bitmap.data();
    v.values = m.values.data();
    v.valuesBytes = m.values.size();
    return v;
}

void decodeRow(const BitmapSparseMatrix& m, int64_t row, float* out)
{
    gpu::decodeBitmapSparseRow(viewOf(m), row, out);
}

std::vector<float> decode(const BitmapSparseMatrix& m)
{
    std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r) decodeRow(m, r, out.data() + r * m.cols);
    return out;
}

}  // namespace spillway::compress
