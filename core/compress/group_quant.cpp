#include "core/compress/group_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/compress/half.h"
#include "gpu/sparse_format.h"
#include "gpu/dtype.h"

namespace spillway::compress {

namespace {

int qmaxOf(int bits) { return bits == 8 ? 127 : 7; }

}  // namespace

bool validQuantParams(int bits, int group)
{
    return (bits == 8 || bits == 4) && (group == 32 || group == 64 || group == 128);
}

size_t quantizedBytes(int bits, int group, int64_t n) { return gpu::groupQuantizedBytes(bits, group, n); }

void quantizeGroup(const float* v, int len, int bits, uint16_t* scale, int8_t* codes)
{
    const int qmax = qmaxOf(bits);
    float amax = 0.0f;
    for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[i]));
    // The codes are computed against the scale as stored (fp16), so dequantization reproduces
    // exactly what was chosen here. Scales beyond fp16's range saturate at its largest finite.
    const uint16_t s16 = gpu::fp32ToFp16(std::min(amax / static_cast<float>(qmax), 65504.0f));
    const float s = detail::halfToFloat(s16);
    *scale = s16;
    for (int i = 0; i < len; ++i) {
        // s == 0 only when every value is below fp16's resolution: all codes are then 0.
        const float q = s > 0.0f ? std::nearbyint(v[i] / s) : 0.0f;
        codes[i] = static_cast<int8_t>(std::clamp(q, static_cast<float>(-qmax), static_cast<float>(qmax)));
    }
}

void quantizeValues(const float* v, int64_t n, int bits, int group, uint8_t* out)
{
    int8_t codes[128];
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int len = static_cast<int>(std::min<int64_t>(group, n - g0));
        uint16_t scale;
        quantizeGroup(v + g0, len, bits, &scale, codes);
        std::memcpy(out, &scale, 2);
        out += 2;
        if (bits == 8) {
            std::memcpy(out, codes, static_cast<size_t>(len));
            out += len;
        } else {
            for (int i = 0; i < len; i += 2) {
                const uint8_t lo = static_cast<uint8_t>(codes[i]) & 0x0F;
                const uint8_t hi = i + 1 < len ? (static_cast<uint8_t>(codes[i + 1]) & 0x0F) : 0;
                *out++ = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
    }
}

void dequantizeValues(const uint8_t* p, int64_t n, int bits, int group, float* out)
{
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int len = static_cast<int>(std::min<int64_t>(group, n - g0));
        const float s = detail::halfToFloat(detail::load16(p));
        p += 2;
        if (bits == 8) {
            for (int i = 0; i < len; ++i) out[g0 + i] = s * static_cast<float>(static_cast<int8_t>(p[i]));
            p += len;
        } else {
            for (int i = 0; i < len; ++i) {
                const uint8_t b = p[i / 2];
                const int q = (i & 1) ? detail::highNibble(b) : detail::lowNibble(b);
                out[g0 + i] = s * static_cast<float>(q);
            }
            p += (len + 1) / 2;
        }
    }
}

Result<QuantizedMatrix> quantize(const float* w, int64_t rows, int64_t cols, int bits, int group)
{
    if (!validQuantParams(bits, group))
        return makeError(ErrorCode::InvalidArgument,
                         "group quantization: bits must be 4 or 8 and group 32, 64 or 128 (got " +
                             std::to_string(bits) + ", " + std::to_string(group) + ")");
    if (rows < 0 || cols < 0 || cols > INT32_MAX || (rows > 0 && cols > 0 && !w))
        return makeError(ErrorCode::InvalidArgument, "group quantization: bad matrix shape");
    const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    for (size_t i = 0; i < count; ++i)
        if (!std::isfinite(w[i]))
            return makeError(ErrorCode::InvalidArgument,
                             "group quantization: non-finite weight at index " + std::to_string(i));
    QuantizedMatrix m;
    m.bits = bits;
    m.group = group;
    m.rows = rows;
    m.cols = cols;
    m.data.resize(static_cast<size_t>(rows) * m.rowBytes());
    for (int64_t r = 0; r < rows; ++r)
        quantizeValues(w + r * cols, cols, bits, group, m.data.data() + r * m.rowBytes());
    return m;
}

void dequantizeRow(const QuantizedMatrix& m, int64_t row, float* out)
{
    dequantizeValues(m.row(row), m.cols, m.bits, m.group, out);
}

}  // namespace spillway::compress
