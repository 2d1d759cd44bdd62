// Group quantization, the ENDOR bitmap sparse format and their CPU kernels: exact round trips on
// awkward shapes, GEMV against a double-precision reference, blob validation under truncation and
// byte flips, and the size goals of the "Compression" issue.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "../common/error_code.h"
#include "core/compress/bitmap_sparse.h"
#include "core/compress/group_quant.h"
#include "core/compress/half.h"
#include "core/compress/sparse_gemv.h"
#include "gpu/dtype.h"

using namespace spillway;
using namespace spillway::compress;

namespace {

uint32_t bitsOf(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// (rows, cols) values in [-1, 1), each zero with probability `sparsity`. Row 0 is all zero and
// the last row fully dense when rows > 2.
std::vector<float> randomMatrix(int64_t rows, int64_t cols, double sparsity, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::bernoulli_distribution zero(sparsity);
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            float v = value(rng);
            if (v == 0.0f) v = 0.5f;
            const bool z = rows > 2 && r == 0 ? true : rows > 2 && r == rows - 1 ? false : zero(rng);
            w[r * cols + c] = z ? 0.0f : v;
        }
    return w;
}

std::vector<float> randomVector(int64_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = value(rng);
    return x;
}

using testing_support::errorCodeOf;

const int64_t kRows[] = {1, 7, 33};
const int64_t kCols[] = {1, 31, 33, 65, 4097};

// y = W x in double, and sum |W| |x| per row (the scale the fp32 error is relative to).
void referenceGemv(const std::vector<float>& w, int64_t rows, int64_t cols, const std::vector<float>& x,
                   std::vector<double>& y, std::vector<double>& mag)
{
    y.assign(rows, 0.0);
    mag.assign(rows, 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            y[r] += double(w[r * cols + c]) * x[c];
            mag[r] += std::fabs(double(w[r * cols + c]) * x[c]);
        }
}

void expectGemvClose(const std::vector<float>& got, const std::vector<double>& y,
                     const std::vector<double>& mag, const char* what)
{
    for (size_t r = 0; r < y.size(); ++r)
        ASSERT_LE(std::fabs(got[r] - y[r]), 1e-5 * mag[r] + 1e-30) << what << " row " << r;
}

// Spec of group_quant.h, written out independently of the implementation.
std::vector<uint8_t> referenceQuantize(const float* v, int64_t n, int bits, int group)
{
    const int qmax = bits == 8 ? 127 : 7;
    std::vector<uint8_t> out;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t len = std::min<int64_t>(group, n - g0);
        float amax = 0;
        for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[g0 + i]));
        const uint16_t s16 = gpu::fp32ToFp16(amax / qmax);
        const float s = gpu::fp16ToFp32(s16);
        out.push_back(s16 & 0xFF);
        out.push_back(s16 >> 8);
        std::vector<int> q(len);
        for (int64_t i = 0; i < len; ++i)
            q[i] = s > 0 ? std::clamp(int(std::nearbyint(v[g0 + i] / s)), -qmax, qmax) : 0;
        if (bits == 8) {
            for (int c : q) out.push_back(uint8_t(int8_t(c)));
        } else {
            for (int64_t i = 0; i < len; i += 2)
                out.push_back(uint8_t((q[i] & 0xF) | ((i + 1 < len ? q[i + 1] & 0xF : 0) << 4)));
        }
    }
    return out;
}

}  // namespace

TEST(Half, InlineConversionMatchesGpuForAllInputs)
{
    for (uint32_t h = 0; h < 65536; ++h) {
        const float a = detail::halfToFloat(uint16_t(h));
        const float b = gpu::fp16ToFp32(uint16_t(h));
        if (std::isnan(b)) {
            ASSERT_TRUE(std::isnan(a)) << h;
        } else {
            ASSERT_EQ(bitsOf(a), bitsOf(b)) << h;
        }
    }
}

TEST(GroupQuant, MatchesSpecAndErrorBoundOnAwkwardShapes)
{
    for (int bits : {8, 4})
        for (int group : {32, 64, 128})
            for (int64_t rows : kRows)
                for (int64_t cols : kCols) {
                    const auto w = randomMatrix(rows, cols, 0.1, uint32_t(rows * 131 + cols + bits + group));
                    auto q = quantize(w.data(), rows, cols, bits, group);
                    ASSERT_TRUE(q.ok()) << q.error().message;
                    ASSERT_EQ(q->bytes(), size_t(rows) * quantizedBytes(bits, group, cols));
                    const int qmax = bits == 8 ? 127 : 7;
                    std::vector<float> out(cols);
                    for (int64_t r = 0; r < rows; ++r) {
                        const float* wr = w.data() + r * cols;
                        const auto ref = referenceQuantize(wr, cols, bits, group);
                        ASSERT_EQ(0, std::memcmp(ref.data(), q->row(r), ref.size())) << bits << " " << group;
                        dequantizeRow(*q, r, out.data());
                        for (int64_t g0 = 0; g0 < cols; g0 += group) {
                            float amax = 0;
                            for (int64_t c = g0; c < std::min(cols, g0 + group); ++c) amax = std::max(amax, std::fabs(wr[c]));
                            for (int64_t c = g0; c < std::min(cols, g0 + group); ++c)
                                ASSERT_LE(std::fabs(out[c] - wr[c]), 0.5f * amax / qmax * 1.01f);
                        }
                    }
                    // Fused dequantize-GEMV equals the dense GEMV of the dequantized matrix.
                    std::vector<float> deq(rows * cols);
                    for (int64_t r = 0; r < rows; ++r) dequantizeRow(*q, r, deq.data() + r * cols);
                    const auto x = randomVector(cols, 7);
                    std::vector<double> y, mag;
                    referenceGemv(deq, rows, cols, x, y, mag);
                    std::vector<float> got(rows);
                    gemvQuantized(*q, x.data(), got.data(), 0, rows / 2);
                    gemvQuantized(*q, x.data(), got.data(), rows / 2, rows);
                    expectGemvClose(got, y, mag, "gemvQuantized");
                }
}

TEST(GroupQuant, RejectsBadArguments)
{
    const float w[4] = {1, 2, 3, NAN};
    EXPECT_EQ(errorCodeOf(quantize(w, 1, 3, 8, 48)), ErrorCode::InvalidArgument);
    EXPECT_EQ(errorCodeOf(quantize(w, 1, 3, 2, 64)), ErrorCode::InvalidArgument);
    EXPECT_EQ(errorCodeOf(quantize(w, 1, 4, 8, 32)), ErrorCode::InvalidArgument);
    EXPECT_TRUE(quantize(w, 1, 3, 8, 32).ok());
}

namespace {

// Checks decode(encode(w)) for one format and the kernels on it.
void checkFormat(const std::vector<float>& w, int64_t rows, int64_t cols, ValueFormat f, int group)
{
    SCOPED_TRACE(std::string(valueFormatName(f)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
    auto m = encode(w.data(), rows, cols, f, group);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto d = decode(*m);
    ASSERT_EQ(d.size(), w.size());
    for (int64_t r = 0; r < rows; ++r) {
        const float* wr = w.data() + r * cols;
        const float* dr = d.data() + r * cols;
        if (!isQuantized(f)) {
            for (int64_t c = 0; c < cols; ++c) {
                const float expect = f == ValueFormat::F32 ? wr[c]
                                     : f == ValueFormat::F16 ? gpu::fp16ToFp32(gpu::fp32ToFp16(wr[c]))
                                                             : gpu::bf16ToFp32(gpu::fp32ToBf16(wr[c]));
                ASSERT_EQ(bitsOf(dr[c]), bitsOf(expect)) << r << "," << c;
            }
            ASSERT_EQ(m->rowNonZeros(r), std::count_if(wr, wr + cols, [](float v) { return v != 0; }));
            continue;
        }
        // Quantized: the stored positions are a subset of the non-zeros; reference = quantize
        // then dequantize of the dense values at those positions, bitwise.
        const int bits = quantBits(f), qmax = bits == 8 ? 127 : 7;
        float rowMax = 0;
        for (int64_t c = 0; c < cols; ++c) rowMax = std::max(rowMax, std::fabs(wr[c]));
        std::vector<float> kept;
        std::vector<int64_t> keptCols;
        for (int64_t c = 0; c < cols; ++c) {
            const bool bit = (m->bitmapRow(r)[c / 8] >> (c % 8)) & 1;
            if (bit) {
                ASSERT_NE(wr[c], 0.0f);
                ASSERT_NE(dr[c], 0.0f) << "a stored code is 0";
                kept.push_back(wr[c]);
                keptCols.push_back(c);
            } else {
                ASSERT_EQ(bitsOf(dr[c]), 0u);
            }
            ASSERT_LE(std::fabs(dr[c] - wr[c]), 0.5f * rowMax / qmax * 1.01f) << r << "," << c;
        }
        const auto packed = referenceQuantize(kept.data(), int64_t(kept.size()), bits, group);
        ASSERT_EQ(packed.size(), m->rowOffsets[r + 1] - m->rowOffsets[r]);
        ASSERT_EQ(0, std::memcmp(packed.data(), m->rowValues(r), packed.size()));
        std::vector<float> deq(kept.size());
        dequantizeValues(packed.data(), int64_t(kept.size()), bits, group, deq.data());
        for (size_t i = 0; i < kept.size(); ++i) ASSERT_EQ(bitsOf(dr[keptCols[i]]), bitsOf(deq[i]));
    }

    // Kernels, split into two row ranges as a caller splitting across threads would.
    const auto x = randomVector(cols, 11);
    std::vector<double> y, mag;
    referenceGemv(d, rows, cols, x, y, mag);
    std::vector<float> got(rows, NAN);
    gemvBitmapSparse(*m, x.data(), got.data(), 0, rows / 3);
    gemvBitmapSparse(*m, x.data(), got.data(), rows / 3, rows);
    expectGemvClose(got, y, mag, "gemvBitmapSparse");

    std::vector<float> dense(rows * cols, NAN);
    decompressRows(*m, 0, rows / 2, dense.data());
    decompressRows(*m, rows / 2, rows, dense.data());
    ASSERT_EQ(0, std::memcmp(dense.data(), d.data(), d.size() * 4));
    if (f == ValueFormat::F16 || f == ValueFormat::BF16) {
        std::vector<uint16_t> d16(rows * cols, 0xFFFF);
        decompressRows16(*m, 0, rows, d16.data());
        for (size_t i = 0; i < d16.size(); ++i)
            ASSERT_EQ(bitsOf(f == ValueFormat::F16 ? gpu::fp16ToFp32(d16[i]) : gpu::bf16ToFp32(d16[i])),
                      bitsOf(d[i]));
        if (f == ValueFormat::F16) {
            std::vector<float> yd(rows);
            gemvDenseF16(d16.data(), cols, x.data(), yd.data(), 0, rows);
            expectGemvClose(yd, y, mag, "gemvDenseF16");
        }
    }

    // Blob round trip: identical matrix back, 64-byte aligned sections.
    const auto blob = serialize(*m);
    ASSERT_EQ(blob.size() % 64, 0u);
    ASSERT_EQ(blob.size(), serializedBytes(*m));
    auto back = deserialize(blob.data(), blob.size());
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->format, m->format);
    EXPECT_EQ(back->group, m->group);
    EXPECT_EQ(back->rows, rows);
    EXPECT_EQ(back->cols, cols);
    EXPECT_EQ(back->rowOffsets, m->rowOffsets);
    EXPECT_EQ(back->bitmap, m->bitmap);
    EXPECT_EQ(back->values, m->values);
}

const ValueFormat kFormats[] = {ValueFormat::F32, ValueFormat::F16, ValueFormat::BF16,
                                ValueFormat::Int8, ValueFormat::Int4};

}  // namespace

TEST(BitmapSparse, RoundTripsEveryFormatOnAwkwardShapes)
{
    for (ValueFormat f : kFormats)
        for (int group : isQuantized(f) ? std::vector<int>{32, 64, 128} : std::vector<int>{0})
            for (int64_t rows : kRows)
                for (int64_t cols : kCols) {
                    const auto w = randomMatrix(rows, cols, 0.5, uint32_t(rows * 1000 + cols));
                    checkFormat(w, rows, cols, f, group);
                }
}

TEST(BitmapSparse, FullyZeroAndFullyDenseMatrices)
{
    for (ValueFormat f : kFormats) {
        const std::vector<float> zeros(33 * 65, 0.0f);
        checkFormat(zeros, 33, 65, f, 64);
        const auto denseW = randomMatrix(7, 4097, 0.0, 5);
        checkFormat(denseW, 7, 4097, f, 32);
        auto m = encode(zeros.data(), 33, 65, f, 64);
        ASSERT_TRUE(m.ok()) << m.error().message;
        EXPECT_EQ(m->values.size(), 0u);
        EXPECT_EQ(m->nonZeros(), 0);
    }
    auto empty = encode(nullptr, 0, 0, ValueFormat::F16, 0);
    ASSERT_TRUE(empty.ok()) << empty.error().message;
    auto back = deserialize(serialize(*empty).data(), serializedBytes(*empty));
    EXPECT_TRUE(back.ok());
}

TEST(BitmapSparse, RejectsBadArguments)
{
    const float w[2] = {1.0f, INFINITY};
    EXPECT_EQ(errorCodeOf(encode(w, 1, 2, ValueFormat::F16)), ErrorCode::InvalidArgument);
    EXPECT_EQ(errorCodeOf(encode(w, 1, 1, ValueFormat::Int8, 16)), ErrorCode::InvalidArgument);
    EXPECT_EQ(errorCodeOf(encode(w, 1, 1, static_cast<ValueFormat>(9))), ErrorCode::InvalidArgument);
}

TEST(BitmapSparse, TruncatedBlobsAreRejectedAtEveryLength)
{
    for (ValueFormat f : kFormats) {
        const auto w = randomMatrix(7, 65, 0.5, 3);
        auto m = encode(w.data(), 7, 65, f, 32);
        ASSERT_TRUE(m.ok()) << m.error().message;
        const auto blob = serialize(*m);
        for (size_t n = 0; n < blob.size(); ++n) {
            std::vector<uint8_t> cut(blob.begin(), blob.begin() + n);  // own allocation: ASan sees overreads
            auto r = deserialize(cut.data(), cut.size(), "model.spw/blk.0.ffn_up");
            ASSERT_FALSE(r.ok()) << n;
            ASSERT_EQ(r.error().code, ErrorCode::ModelFileInvalid);
            ASSERT_NE(r.error().message.find("blk.0.ffn_up"), std::string::npos);
        }
        auto extra = blob;
        extra.push_back(0);
        EXPECT_FALSE(deserialize(extra.data(), extra.size()).ok());
    }
}

TEST(BitmapSparse, FlippedBytesGiveErrorsOrAConsistentMatrix)
{
    for (ValueFormat f : kFormats) {
        const auto w = randomMatrix(7, 65, 0.5, 4);
        auto m = encode(w.data(), 7, 65, f, 32);
        ASSERT_TRUE(m.ok()) << m.error().message;
        const auto blob = serialize(*m);
        const size_t bitmapAt = 64 + 64;  // (7 + 1) offsets = 64 bytes
        const size_t valuesAt = bitmapAt + 128;  // 7 rows x 16 bytes, padded to 64
        for (size_t i = 0; i < blob.size(); ++i)
            for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
                auto bad = blob;
                bad[i] ^= mask;
                auto r = deserialize(bad.data(), bad.size());
                // Header, offsets, padding and (for 16/32-bit values) single bitmap bits are all
                // checked; a flipped value byte is only caught when it makes a scale non-finite.
                const bool mustFail = i < bitmapAt || (i >= bitmapAt + 7 * 16 && i < valuesAt) ||
                                      i >= valuesAt + m->values.size() ||
                                      (i < valuesAt && mask == 0x01 && !isQuantized(f));
                if (mustFail) {
                    ASSERT_FALSE(r.ok()) << i << " " << int(mask);
                }
                if (!r.ok()) {
                    ASSERT_EQ(r.error().code, ErrorCode::ModelFileInvalid);
                    continue;
                }
                // Whatever passed validation must be safe to use.
                const auto d = decode(*r);
                std::vector<float> y(7);
                const auto x = randomVector(65, 1);
                gemvBitmapSparse(*r, x.data(), y.data(), 0, 7);
                ASSERT_EQ(d.size(), w.size());
            }
    }
}

TEST(BitmapSparse, SizeGoalsAtHalfSparsity)
{
    // 4096 x 11008 (a Llama-7B FFN matrix), 50% unstructured sparsity at random positions.
    const int64_t rows = 4096, cols = 11008;
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> w(rows * cols);
    std::vector<int32_t> perm(cols);
    for (int64_t r = 0; r < rows; ++r) {
        for (int32_t c = 0; c < cols; ++c) perm[c] = c;
        std::shuffle(perm.begin(), perm.end(), rng);
        float* row = w.data() + r * cols;
        for (int64_t k = 0; k < cols / 2; ++k) {
            float v = value(rng);
            row[perm[k]] = v == 0.0f ? 0.25f : v;
        }
    }
    const double dense16 = double(rows) * cols * 2;
    auto f16 = encode(w.data(), rows, cols, ValueFormat::F16);
    ASSERT_TRUE(f16.ok()) << f16.error().message;
    const double f16Ratio = double(serializedBytes(*f16)) / dense16;
    auto i8 = encode(w.data(), rows, cols, ValueFormat::Int8, 64);
    ASSERT_TRUE(i8.ok()) << i8.error().message;
    const double i8Ratio = double(serializedBytes(*i8)) / dense16;
    std::printf("50%% sparse fp16: %.4f of dense fp16; + int8 g64: %.4f (%lld of %lld non-zeros kept)\n",
                f16Ratio, i8Ratio, (long long)i8->nonZeros(), (long long)f16->nonZeros());
    EXPECT_LE(f16Ratio, 0.565);
    EXPECT_LE(i8Ratio, 0.32);
}

// One case of GemvEveryKernelSetOnAwkwardShapes: `set` against a double reference and the
// scalar kernel.
static void expectKernelSetMatches(gpu::CpuKernelSet set, ValueFormat f, int group, double sparsity,
                                   int64_t rows, int64_t cols)
{
    SCOPED_TRACE(std::string(gpu::cpuKernelSetName(set)) + " " + valueFormatName(f) + " g" +
                 std::to_string(group) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                 " sparsity " + std::to_string(sparsity));
    const auto w = randomMatrix(rows, cols, sparsity, uint32_t(rows * 7919 + cols));
    auto m = encode(w.data(), rows, cols, f, group);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto x = randomVector(cols, 3);
    std::vector<double> y, mag;
    referenceGemv(decode(*m), rows, cols, x, y, mag);
    // Three row ranges, so the multi-row blocks and single-row tails both run.
    std::vector<float> got(rows, NAN), scalar(rows, NAN);
    gemvBitmapSparse(*m, x.data(), got.data(), 0, rows / 2, set);
    gemvBitmapSparse(*m, x.data(), got.data(), rows / 2, rows / 2 + 1, set);
    gemvBitmapSparse(*m, x.data(), got.data(), rows / 2 + 1, rows, set);
    expectGemvClose(got, y, mag, "gemvBitmapSparse");
    gemvBitmapSparse(*m, x.data(), scalar.data(), 0, rows, gpu::CpuKernelSet::Scalar);
    for (int64_t r = 0; r < rows; ++r)
        ASSERT_LE(std::fabs(double(got[r]) - scalar[r]), 1e-5 * mag[r] + 1e-30) << r;
}

// The AVX2 / AVX-512 kernels of gemvBitmapSparse against a double reference and the scalar
// kernel, under every kernel set this CPU runs (a set it lacks runs the widest one below it).
// Int8 runs every group size: its groups span bitmap words and 1024-column blocks differently.
TEST(BitmapSparse, GemvEveryKernelSetOnAwkwardShapes)
{
    const gpu::CpuKernelSet best = bestSparseKernelSet();
    std::printf("sparse kernel sets: up to %s\n", gpu::cpuKernelSetName(best));
    for (int s = 0; s <= static_cast<int>(best); ++s)
        for (ValueFormat f : kFormats)
            for (int group : {32, 64, 128}) {
                if (group != 32 && f != ValueFormat::Int8) continue;
                for (double sparsity : {0.0, 0.5, 0.9, 1.0})
                    for (int64_t rows : kRows)
                        for (int64_t cols : kCols)
                        {
                            expectKernelSetMatches(static_cast<gpu::CpuKernelSet>(s), f, group,
                                                   sparsity, rows, cols);
                            if (HasFatalFailure()) return;
                        }
            }
}

// The vector kernels read the packed values up to the last one and no further: a matrix whose
// values end exactly at the end of their own allocation (std::vector of exact size) runs clean
// under the ASan build, and here a last row ending in a lone value still sums right.
TEST(BitmapSparse, GemvKernelsStopAtTheLastValue)
{
    for (int s = 0; s <= static_cast<int>(bestSparseKernelSet()); ++s)
        for (ValueFormat f : {ValueFormat::F16, ValueFormat::BF16, ValueFormat::Int8}) {
            std::vector<float> w(3 * 200, 0.0f);
            w[0] = 1.0f;
            w[2 * 200 + 199] = 2.0f;  // the last column of the last row
            auto m = encode(w.data(), 3, 200, f);
            ASSERT_TRUE(m.ok()) << m.error().message;
            m->values.shrink_to_fit();
            std::vector<float> x(200, 0.5f), y(3, NAN);
            gemvBitmapSparse(*m, x.data(), y.data(), 0, 3, static_cast<gpu::CpuKernelSet>(s));
            // Int8 stores 1 and 2 as 127 x scale: compare with the decoded weights.
            const auto d = decode(*m);
            EXPECT_EQ(y[0], d[0] * 0.5f);
            EXPECT_EQ(y[1], 0.0f);
            EXPECT_EQ(y[2], d[2 * 200 + 199] * 0.5f);
        }
}
