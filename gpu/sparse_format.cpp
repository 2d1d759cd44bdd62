#include "gpu/sparse_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "gpu/device.h"
#include "gpu/half_inline.h"

namespace spillway::gpu {

static_assert(std::endian::native == std::endian::little,
              "the bitmap sparse blob is little-endian and read by memcpy");

namespace {

constexpr char kMagic[8] = {'S', 'P', 'W', 'B', 'S', 'M', '1', '\0'};
constexpr uint32_t kVersion = 1;
// Far beyond any real weight matrix; keeps every size computation below 2^63.
constexpr uint64_t kMaxDim = uint64_t(1) << 31;

template <class T>
T get(const uint8_t* p, size_t at)
{
    T v;
    std::memcpy(&v, p + at, sizeof(T));
    return v;
}

template <class T>
void put(uint8_t* p, size_t at, T v)
{
    std::memcpy(p + at, &v, sizeof(T));
}

bool allZero(const uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i]) return false;
    return true;
}

size_t groupBytes(int bits, int64_t len) { return 2 + static_cast<size_t>(bits == 8 ? len : (len + 1) / 2); }

bool validGroup(int group) { return group == 32 || group == 64 || group == 128; }

}  // namespace

const char* sparseValuesName(SparseValues f)
{
    switch (f) {
    case SparseValues::F32: return "f32";
    case SparseValues::F16: return "f16";
    case SparseValues::BF16: return "bf16";
    case SparseValues::Int8: return "int8";
    case SparseValues::Int4: return "int4";
    }
    return "unknown";
}

size_t groupQuantizedBytes(int bits, int group, int64_t n)
{
    const int64_t full = n / group;
    const int64_t rest = n % group;
    return static_cast<size_t>(full) * groupBytes(bits, group) + (rest ? groupBytes(bits, rest) : 0);
}

size_t packedValueBytes(SparseValues f, int group, int64_t nnz)
{
    switch (f) {
    case SparseValues::F32: return static_cast<size_t>(nnz) * 4;
    case SparseValues::F16:
    case SparseValues::BF16: return static_cast<size_t>(nnz) * 2;
    case SparseValues::Int8:
    case SparseValues::Int4: return groupQuantizedBytes(quantBits(f), group, nnz);
    }
    return 0;
}

void writeBitmapBlobHeader(uint8_t* out, SparseValues format, int group, uint64_t rows, uint64_t cols,
                           uint64_t valuesBytes)
{
    std::memset(out, 0, kBitmapBlobHeaderBytes);
    std::memcpy(out, kMagic, 8);
    put<uint32_t>(out, 8, kVersion);
    put<uint8_t>(out, 12, static_cast<uint8_t>(format));
    put<uint32_t>(out, 16, static_cast<uint32_t>(group));
    put<uint64_t>(out, 24, rows);
    put<uint64_t>(out, 32, cols);
    put<uint64_t>(out, 40, valuesBytes);
    put<uint64_t>(out, 48, bitmapBlobSections(rows, cols, valuesBytes).total);
}

std::string checkBitmapBlob(const uint8_t* p, size_t size)
{
    if (!p || size < kBitmapBlobHeaderBytes)
        return "truncated: " + std::to_string(size) + " bytes, the header alone is 64";
    if (std::memcmp(p, kMagic, 8) != 0) return "not a bitmap sparse tensor (bad magic)";
    if (get<uint32_t>(p, 8) != kVersion) return "unsupported version " + std::to_string(get<uint32_t>(p, 8));
    const uint8_t formatByte = get<uint8_t>(p, 12);
    if (formatByte > static_cast<uint8_t>(SparseValues::Int4)) return "unknown value format " + std::to_string(formatByte);
    if (!allZero(p + 13, 3) || get<uint32_t>(p, 20) != 0 || get<uint64_t>(p, 56) != 0)
        return "reserved header fields are not zero";
    const auto format = static_cast<SparseValues>(formatByte);
    const uint32_t group = get<uint32_t>(p, 16);
    if (isQuantized(format) ? !validGroup(static_cast<int>(group)) : group != 0)
        return "bad group size " + std::to_string(group) + " for " + sparseValuesName(format);
    const uint64_t rows = get<uint64_t>(p, 24);
    const uint64_t cols = get<uint64_t>(p, 32);
    const uint64_t valuesBytes = get<uint64_t>(p, 40);
    const uint64_t totalBytes = get<uint64_t>(p, 48);
    if (rows > kMaxDim || cols > kMaxDim || rows * cols > (uint64_t(1) << 48))
        return "shape " + std::to_string(rows) + " x " + std::to_string(cols) + " too large";
    // A row holds at most cols values of at most 4 bytes plus scales: bound valuesBytes before
    // any arithmetic with it.
    if (valuesBytes > rows * cols * 5)
        return "values section of " + std::to_string(valuesBytes) + " bytes is larger than the shape allows";
    const BitmapBlobSections s = bitmapBlobSections(rows, cols, valuesBytes);
    if (totalBytes != s.total || size != s.total)
        return "size mismatch: blob is " + std::to_string(size) + " bytes, header says " +
               std::to_string(totalBytes) + ", sections need " + std::to_string(s.total);

    const BitmapSparseView v = viewBitmapBlob(p);
    const size_t bitmapBytes = rows * static_cast<size_t>(v.bitmapRowBytes());
    if (!allZero(p + s.offsets + (rows + 1) * 8, s.bitmap - s.offsets - (rows + 1) * 8) ||
        !allZero(p + s.bitmap + bitmapBytes, s.values - s.bitmap - bitmapBytes) ||
        !allZero(p + s.values + valuesBytes, s.total - s.values - valuesBytes))
        return "section padding is not zero";
    if (get<uint64_t>(p, s.offsets) != 0 || get<uint64_t>(p, s.offsets + rows * 8) != valuesBytes)
        return "row offsets do not span the values section";

    const int64_t words = v.bitmapRowBytes() / 8;
    const int64_t usedInLastWord = v.cols % 64;
    const uint64_t tailMask = usedInLastWord ? ~((uint64_t(1) << usedInLastWord) - 1) : 0;
    for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t begin = get<uint64_t>(p, s.offsets + r * 8);
        const uint64_t end = get<uint64_t>(p, s.offsets + (r + 1) * 8);
        if (end < begin) return "row offsets decrease at row " + std::to_string(r);
        const uint8_t* bits = p + s.bitmap + r * static_cast<size_t>(v.bitmapRowBytes());
        if (words > 0 && (detail::load64(bits + 8 * (words - 1)) & tailMask))
            return "bitmap bits set past the last column in row " + std::to_string(r);
        int64_t nnz = 0;
        for (int64_t w = 0; w < words; ++w) nnz += std::popcount(detail::load64(bits + 8 * w));
        const uint64_t expect = packedValueBytes(format, v.group, nnz);
        if (end - begin != expect)
            return "row " + std::to_string(r) + " has " + std::to_string(nnz) + " non-zeros (" +
                   std::to_string(expect) + " value bytes) but its offsets give " + std::to_string(end - begin);
        // Scales must be finite: a NaN or infinite scale would poison every product of its group.
        if (isQuantized(format)) {
            const uint8_t* q = p + s.values + begin;
            for (int64_t g0 = 0; g0 < nnz; g0 += v.group) {
                const int64_t len = std::min<int64_t>(v.group, nnz - g0);
                if (!std::isfinite(detail::halfToFloat(detail::load16(q))))
                    return "non-finite scale in row " + std::to_string(r);
                q += groupBytes(quantBits(format), len);
            }
        }
    }
    return {};
}

BitmapSparseView viewBitmapBlob(const void* blob)
{
    const auto* p = static_cast<const uint8_t*>(blob);
    BitmapSparseView v;
    v.format = static_cast<SparseValues>(get<uint8_t>(p, 12));
    v.group = static_cast<int>(get<uint32_t>(p, 16));
    v.rows = static_cast<int64_t>(get<uint64_t>(p, 24));
    v.cols = static_cast<int64_t>(get<uint64_t>(p, 32));
    v.valuesBytes = get<uint64_t>(p, 40);
    const BitmapBlobSections s = bitmapBlobSections(uint64_t(v.rows), uint64_t(v.cols), v.valuesBytes);
    v.rowOffsets = reinterpret_cast<const uint64_t*>(p + s.offsets);
    v.bitmap = p + s.bitmap;
    v.values = p + s.values;
    return v;
}

void decodeBitmapSparseRow(const BitmapSparseView& w, int64_t row, float* out)
{
    std::memset(out, 0, static_cast<size_t>(w.cols) * sizeof(float));
    const uint8_t* bits = w.bitmap + row * w.bitmapRowBytes();
    const uint8_t* v = w.values + w.rowOffsets[row];
    const int64_t words = w.bitmapRowBytes() / 8;
    const int bits8 = isQuantized(w.format) ? quantBits(w.format) : 0;
    // Quantized: `group` codes follow each fp16 scale; k counts values within the current group.
    float scale = 0.0f;
    int64_t inGroup = 0;
    int64_t k = 0;
    for (int64_t wi = 0; wi < words; ++wi) {
        for (uint64_t b = detail::load64(bits + 8 * wi); b; b &= b - 1) {
            const int64_t c = wi * 64 + __builtin_ctzll(b);
            switch (w.format) {
            case SparseValues::F32: std::memcpy(out + c, v + 4 * k, 4); break;
            case SparseValues::F16: out[c] = detail::halfToFloat(detail::load16(v + 2 * k)); break;
            case SparseValues::BF16: out[c] = detail::bf16ToFloat(detail::load16(v + 2 * k)); break;
            case SparseValues::Int8:
            case SparseValues::Int4:
                if (inGroup == 0) {
                    scale = detail::halfToFloat(detail::load16(v));
                    v += 2;
                }
                out[c] = scale * static_cast<float>(bits8 == 8 ? static_cast<int8_t>(v[inGroup])
                                                               : detail::nibbleAt(v, inGroup));
                if (++inGroup == w.group) {
                    v += bits8 == 8 ? w.group : w.group / 2;
                    inGroup = 0;
                }
                break;
            }
            ++k;
        }
    }
}

uint64_t bitmapBlobBytes(const void* blob) { return get<uint64_t>(static_cast<const uint8_t*>(blob), 48); }

uint64_t matrixBytes(const MatrixView& m)
{
    if (m.type == DType::BitmapSparse) return m.data ? bitmapBlobBytes(m.data) : 0;
    return uint64_t(m.rowStride) * uint64_t(std::max<int64_t>(m.rows, 0));
}

}  // namespace spillway::gpu
