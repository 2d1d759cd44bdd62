// Serialization of BitmapSparseMatrix to one contiguous blob; the layout is documented in
// bitmap_sparse.h. A blob comes from a model file, so it is untrusted: deserialize checks every
// field, size and offset before it reads through them.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "core/compress/bitmap_sparse.h"
#include "core/compress/group_quant.h"
#include "core/compress/half.h"

namespace spillway::compress {

static_assert(std::endian::native == std::endian::little,
              "the bitmap sparse blob is little-endian and read by memcpy");

namespace {

constexpr char kMagic[8] = {'S', 'P', 'W', 'B', 'S', 'M', '1', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kAlign = 64;
// Far beyond any real weight matrix; keeps every size computation below 2^63.
constexpr uint64_t kMaxDim = uint64_t(1) << 31;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Sections {
    size_t offsets = 0, bitmap = 0, values = 0, total = 0;
};

Sections sectionsFor(uint64_t rows, uint64_t cols, uint64_t valuesBytes)
{
    Sections s;
    s.offsets = kHeaderBytes;
    s.bitmap = s.offsets + alignUp((rows + 1) * 8);
    s.values = s.bitmap + alignUp(rows * ((cols + 63) / 64 * 8));
    s.total = s.values + alignUp(valuesBytes);
    return s;
}

template <class T>
void put(std::vector<uint8_t>& b, size_t at, T v)
{
    std::memcpy(b.data() + at, &v, sizeof(T));
}

template <class T>
T get(const uint8_t* p, size_t at)
{
    T v;
    std::memcpy(&v, p + at, sizeof(T));
    return v;
}

bool allZero(const uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i]) return false;
    return true;
}

}  // namespace

size_t serializedBytes(const BitmapSparseMatrix& m)
{
    return sectionsFor(m.rows, m.cols, m.values.size()).total;
}

std::vector<uint8_t> serialize(const BitmapSparseMatrix& m)
{
    const Sections s = sectionsFor(m.rows, m.cols, m.values.size());
    std::vector<uint8_t> b(s.total, 0);
    std::memcpy(b.data(), kMagic, 8);
    put<uint32_t>(b, 8, kVersion);
    put<uint8_t>(b, 12, static_cast<uint8_t>(m.format));
    put<uint32_t>(b, 16, static_cast<uint32_t>(m.group));
    put<uint64_t>(b, 24, static_cast<uint64_t>(m.rows));
    put<uint64_t>(b, 32, static_cast<uint64_t>(m.cols));
    put<uint64_t>(b, 40, m.values.size());
    put<uint64_t>(b, 48, s.total);
    std::memcpy(b.data() + s.offsets, m.rowOffsets.data(), m.rowOffsets.size() * 8);
    if (!m.bitmap.empty()) std::memcpy(b.data() + s.bitmap, m.bitmap.data(), m.bitmap.size());
    if (!m.values.empty()) std::memcpy(b.data() + s.values, m.values.data(), m.values.size());
    return b;
}

Result<BitmapSparseMatrix> deserialize(const uint8_t* p, size_t size, const std::string& what)
{
    auto bad = [&](const std::string& why) {
        return makeError(ErrorCode::ModelFileInvalid, what + ": " + why);
    };
    if (!p || size < kHeaderBytes)
        return bad("truncated: " + std::to_string(size) + " bytes, the header alone is 64");
    if (std::memcmp(p, kMagic, 8) != 0) return bad("not a bitmap sparse tensor (bad magic)");
    if (get<uint32_t>(p, 8) != kVersion)
        return bad("unsupported version " + std::to_string(get<uint32_t>(p, 8)));
    const uint8_t formatByte = get<uint8_t>(p, 12);
    if (formatByte > static_cast<uint8_t>(ValueFormat::Int4))
        return bad("unknown value format " + std::to_string(formatByte));
    if (!allZero(p + 13, 3) || get<uint32_t>(p, 20) != 0 || get<uint64_t>(p, 56) != 0)
        return bad("reserved header fields are not zero");
    const auto format = static_cast<ValueFormat>(formatByte);
    const uint32_t group = get<uint32_t>(p, 16);
    if (isQuantized(format) ? !validQuantParams(quantBits(format), static_cast<int>(group)) : group != 0)
        return bad("bad group size " + std::to_string(group) + " for " + valueFormatName(format));
    const uint64_t rows = get<uint64_t>(p, 24);
    const uint64_t cols = get<uint64_t>(p, 32);
    const uint64_t valuesBytes = get<uint64_t>(p, 40);
    const uint64_t totalBytes = get<uint64_t>(p, 48);
    if (rows > kMaxDim || cols > kMaxDim || rows * cols > (uint64_t(1) << 48))
        return bad("shape " + std::to_string(rows) + " x " + std::to_string(cols) + " too large");
    // A row holds at most cols values of at most 4 bytes plus scales: bound valuesBytes before
    // any arithmetic with it.
    if (valuesBytes > rows * packedValueBytes(ValueFormat::F32, 0, static_cast<int64_t>(cols)) + rows * cols)
        return bad("values section of " + std::to_string(valuesBytes) + " bytes is larger than the shape allows");
    const Sections s = sectionsFor(rows, cols, valuesBytes);
    if (totalBytes != s.total || size != s.total)
        return bad("size mismatch: blob is " + std::to_string(size) + " bytes, header says " +
                   std::to_string(totalBytes) + ", sections need " + std::to_string(s.total));

    BitmapSparseMatrix m;
    m.format = format;
    m.group = static_cast<int>(group);
    m.rows = static_cast<int64_t>(rows);
    m.cols = static_cast<int64_t>(cols);
    const size_t bitmapBytes = rows * static_cast<size_t>(m.bitmapRowBytes());
    if (!allZero(p + s.offsets + (rows + 1) * 8, s.bitmap - s.offsets - (rows + 1) * 8) ||
        !allZero(p + s.bitmap + bitmapBytes, s.values - s.bitmap - bitmapBytes) ||
        !allZero(p + s.values + valuesBytes, s.total - s.values - valuesBytes))
        return bad("section padding is not zero");

    m.rowOffsets.resize(rows + 1);
    std::memcpy(m.rowOffsets.data(), p + s.offsets, (rows + 1) * 8);
    m.bitmap.assign(p + s.bitmap, p + s.bitmap + bitmapBytes);
    if (m.rowOffsets[0] != 0 || m.rowOffsets[rows] != valuesBytes)
        return bad("row offsets do not span the values section");

    const int64_t usedInLastWord = m.cols % 64;
    const uint64_t tailMask = usedInLastWord ? ~((uint64_t(1) << usedInLastWord) - 1) : 0;
    for (uint64_t r = 0; r < rows; ++r) {
        if (m.rowOffsets[r + 1] < m.rowOffsets[r])
            return bad("row offsets decrease at row " + std::to_string(r));
        const int64_t words = m.bitmapRowBytes() / 8;
        if (words > 0 && (detail::load64(m.bitmapRow(r) + 8 * (words - 1)) & tailMask))
            return bad("bitmap bits set past the last column in row " + std::to_string(r));
        const int64_t nnz = m.rowNonZeros(static_cast<int64_t>(r));
        const uint64_t expect = packedValueBytes(format, m.group, nnz);
        if (m.rowOffsets[r + 1] - m.rowOffsets[r] != expect)
            return bad("row " + std::to_string(r) + " has " + std::to_string(nnz) + " non-zeros (" +
                       std::to_string(expect) + " value bytes) but its offsets give " +
                       std::to_string(m.rowOffsets[r + 1] - m.rowOffsets[r]));
    }
    m.values.assign(p + s.values, p + s.values + valuesBytes);

    // Scales must be finite: a NaN or infinite scale would poison every product of its group.
    if (isQuantized(format)) {
        const int bits = quantBits(format);
        for (int64_t r = 0; r < m.rows; ++r) {
            const uint8_t* v = m.rowValues(r);
            const int64_t nnz = m.rowNonZeros(r);
            for (int64_t g0 = 0; g0 < nnz; g0 += m.group) {
                const int64_t len = std::min<int64_t>(m.group, nnz - g0);
                if (!std::isfinite(detail::halfToFloat(detail::load16(v))))
                    return bad("non-finite scale in row " + std::to_string(r));
                v += quantizedBytes(bits, m.group, len);
            }
        }
    }
    return m;
}

}  // namespace spillway::compress
