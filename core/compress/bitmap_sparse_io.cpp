// Serialization of BitmapSparseMatrix to one contiguous blob (gpu/sparse_format.h). A blob
// comes from a model file, so it is untrusted: deserialize has gpu::checkBitmapBlob check every
// field, size and offset before it reads through them.

#include <cstring>
#include <string>

#include "core/compress/bitmap_sparse.h"

namespace spillway::compress {

size_t serializedBytes(const BitmapSparseMatrix& m)
{
    return gpu::bitmapBlobSections(uint64_t(m.rows), uint64_t(m.cols), m.values.size()).total;
}

std::vector<uint8_t> serialize(const BitmapSparseMatrix& m)
{
    const gpu::BitmapBlobSections s = gpu::bitmapBlobSections(uint64_t(m.rows), uint64_t(m.cols), m.values.size());
    std::vector<uint8_t> b(s.total, 0);
    gpu::writeBitmapBlobHeader(b.data(), m.format, m.group, uint64_t(m.rows), uint64_t(m.cols), m.values.size());
    std::memcpy(b.data() + s.offsets, m.rowOffsets.data(), m.rowOffsets.size() * 8);
    if (!m.bitmap.empty()) std::memcpy(b.data() + s.bitmap, m.bitmap.data(), m.bitmap.size());
    if (!m.values.empty()) std::memcpy(b.data() + s.values, m.values.data(), m.values.size());
    return b;
}

Result<BitmapSparseMatrix> deserialize(const uint8_t* p, size_t size, const std::string& what)
{
    if (const std::string problem = gpu::checkBitmapBlob(p, size); !problem.empty())
        return makeError(ErrorCode::ModelFileInvalid, what + ": " + problem);
    const gpu::BitmapSparseView v = gpu::viewBitmapBlob(p);
    BitmapSparseMatrix m;
    m.format = v.format;
    m.group = v.group;
    m.rows = v.rows;
    m.cols = v.cols;
    m.rowOffsets.assign(v.rowOffsets, v.rowOffsets + v.rows + 1);
    m.bitmap.assign(v.bitmap, v.bitmap + size_t(v.rows) * size_t(v.bitmapRowBytes()));
    m.values.assign(v.values, v.values + v.valuesBytes);
    return m;
}

}  // namespace spillway::compress
