#pragma once
// What the prompt path's integer products for Q8_0 and Q4_0 weights share (gemm_int8_avx2.cpp,
// gemm_int8_avxvnni.cpp, gemm_int8_avx512.cpp): the batch's quantization and packing, the
// weight rows' repacking, and the loop that runs a register tile over the token panels. AVX2
// code (every CPU that runs one of the products has it).
//
// Y[j, r] = sum_b dw[r, b] dx[j, b] sum_{i<32} w[r, 32 b + i] qx[j, 32 b + i], where dx, qx are
// x quantized to Q8 blocks of 32 exactly as the decode kernels quantize one token (quantizeQ8X86)
// and w the weights' integers (Q8_0: -128..127; Q4_0: nibble - 8). The integer part of each
// block is exact, as in decode; only the float sum over blocks is in another order, so a prompt's
// logits match one token at a time within kPromptIntegerTolerance (tests/common/prompt_tolerance.h).
// Every tile adds the blocks in the same order with the same operations (c += float(sum) *
// (dw * dx), one FMA per block), so all of them give the same bits.
//
// The dot-product instructions multiply unsigned by signed bytes, so the weights go in shifted to
// unsigned (Q8_0 + 128, Q4_0's nibbles as stored) and the shift comes back out through each
// block's sum of x: sum w qx = sum (w + s) qx - s sum qx; that correction is where each block's
// integer sum starts.
//
// Layouts (kTokens tokens per panel, kRows rows per block; g counts the 8 groups of 4 values of k
// in a block of 32):
//   packed x, panel p, block b: int32 qx words [g][t] (8 x kTokens), then float dx[t], then int32
//     start[t] = -s sum qx (gemmInt8XBlockBytes(kTokens) in all); tokens past n are zeros;
//   weight panel, block b: u8 words [g][row] (8 x kRows x 4 bytes), then float dw[row]
//     (gemmInt8WBlockBytes(kRows)); rows past the block's are zeros.
// Included by files compiled for AVX2 or wider; everything here is internal to each of them.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_x86.h"  // transpose8x8
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"  // quantizeQ8X86, fp16Scalar

namespace spillway::gpu::cpu {
namespace {

constexpr int64_t kInt8Groups = kQ8Block / 4;
constexpr int64_t kQ4_0BlockBytes = 18, kQ8_0BlockBytes = 34;  // fp16 scale, then the values
constexpr int64_t kRowPrefetchAhead = 512;                      // bytes ahead in each row

// The weights' shift to unsigned bytes.
inline int32_t int8ShiftOf(const MatrixView& w) { return w.type == DType::Q4_0 ? 8 : 128; }

// 8 x 8 transpose of 32-bit words: v[i] word j -> v[j] word i (gemm_x86.h's, on integers).
inline void transposeWords8x8(__m256i v[8])
{
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(v[i]);
    transpose8x8(r);
    for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(r[i]);
}

// Row r's block b as 32 unsigned bytes in k order, and its scale.
inline __m256i int8RowBlock(const MatrixView& w, int64_t r, int64_t b, float& d)
{
    const uint8_t* row = rowPointer(w, r);
    // The rows come from memory, many streams at once: ask for each one's bytes ahead (the block's
    // values: 18-byte Q4_0 blocks, 34-byte Q8_0 ones, or 32 values with the scales at the end).
    const int64_t stride = w.type == DType::Q4_0                   ? kQ4_0BlockBytes
                           : w.layout == RowLayout::Q8_0ScalesLast ? kQ8Block
                                                                   : kQ8_0BlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(row + b * stride + kRowPrefetchAhead), _MM_HINT_T0);
    if (w.type == DType::Q4_0) {
        const uint8_t* block = row + b * kQ4_0BlockBytes;
        d = fp16Scalar(block);
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
        const __m128i mask = _mm_set1_epi8(0x0F);
        return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
    }
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    if (w.layout == RowLayout::Q8_0ScalesLast) {
        d = fp16Scalar(row + w.cols + 2 * b);
        return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * kQ8Block)), flip);
    }
    const uint8_t* block = row + b * kQ8_0BlockBytes;
    d = fp16Scalar(block);
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)), flip);
}

// Rows [r0, r1) (at most kRows) of w into the weight panel.
template <int64_t kRows>
void packInt8Rows(const MatrixView& w, int64_t r0, int64_t r1, uint8_t* panel)
{
    static_assert(kRows % 8 == 0, "whole 8 x 8 transposes");
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t b = 0; b < blocks; ++b) {
        uint8_t* out = panel + b * gemmInt8WBlockBytes(kRows);
        float* dw = reinterpret_cast<float*>(out + kInt8Groups * kRows * 4);
        for (int64_t eighth = 0; eighth < kRows / 8; ++eighth) {
            __m256i v[8];
            for (int64_t i = 0; i < 8; ++i) {
                const int64_t r = r0 + eighth * 8 + i;
                float d = 0.0f;
                v[i] = r < r1 ? int8RowBlock(w, r, b, d) : _mm256_setzero_si256();
                dw[eighth * 8 + i] = d;
            }
            transposeWords8x8(v);  // v[g]: word g of the 8 rows
            for (int64_t g = 0; g < kInt8Groups; ++g)
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (g * kRows + eighth * 8) * 4), v[g]);
        }
    }
}

// The batch's token panels [p0, p1) (GemmInt8::pack).
template <int64_t kTokens>
void packInt8X(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0, int64_t p1, const MatrixView& w,
               uint8_t* packed)
{
    constexpr int64_t kBlockBytes = gemmInt8XBlockBytes(kTokens);
    const int64_t blocks = cols / kQ8Block;
    const int32_t shift = int8ShiftOf(w);
    alignas(32) int8_t qs[kQ8Block];
    for (int64_t p = p0; p < p1; ++p) {
        uint8_t* panel = packed + p * blocks * kBlockBytes;
        for (int64_t i = 0; i < kTokens; ++i) {
            const int64_t t = p * kTokens + i;
            for (int64_t b = 0; b < blocks; ++b) {
                uint8_t* out = panel + b * kBlockBytes;
                float d = 0.0f, sum8 = 0.0f;
                int32_t sum = 0;
                if (t < n) {
                    quantizeQ8X86(x + t * lda + b * kQ8Block, kQ8Block, qs, &d, &sum8);
                    for (int64_t k = 0; k < kQ8Block; ++k) sum += qs[k];
                } else {
                    std::memset(qs, 0, sizeof qs);
                }
                for (int64_t g = 0; g < kInt8Groups; ++g) std::memcpy(out + (g * kTokens + i) * 4, qs + g * 4, 4);
                const int32_t start = -shift * sum;
                std::memcpy(out + (kInt8Groups * kTokens + i) * 4, &d, 4);
                std::memcpy(out + (kInt8Groups * kTokens + kTokens + i) * 4, &start, 4);
            }
        }
    }
}

// A tile of 8-row float vectors into y: token t's rows at y + t * ldc, the first `tokens` tokens
// and `rows` rows (the AVX2-width tiles).
inline void storeInt8Tile(const __m256* c, float* y, int64_t ldc, int64_t tokens, int64_t rows)
{
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rows)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t t = 0; t < tokens; ++t) _mm256_maskstore_ps(y + t * ldc, mask, c[t]);
}

// A tile as a product. GemmInt8::rows: rows [r0, r1) of w times the packed batch, the rows
// repacked into `panel`, then `Tile` (x panel, weight panel, blocks, y, ldc, tokens, rows) over
// every token panel (a template argument, so each call is direct).
using Int8TileFn = void (*)(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc,
                            int64_t tokens, int64_t rows);
template <int64_t kRows, int64_t kTokens, Int8TileFn Tile>
void int8Rows(const uint8_t* packedX, int64_t n, const MatrixView& w, int64_t r0, int64_t r1, float* y, int64_t ldc,
              uint8_t* panel)
{
    const int64_t blocks = w.cols / kQ8Block;
    packInt8Rows<kRows>(w, r0, r1, panel);
    for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
        const int64_t tokens = n - t0 < kTokens ? n - t0 : kTokens;
        Tile(packedX + t0 / kTokens * blocks * gemmInt8XBlockBytes(kTokens), panel, blocks, y + t0 * ldc + r0, ldc,
             tokens, r1 - r0);
    }
}
template <int64_t kRows, int64_t kTokens, Int8TileFn Tile>
GemmInt8 int8Product(const char* name, bool q8_0)
{
    GemmInt8 g;
    g.name = name;
    g.tokens = kTokens;
    g.rowsPerBlock = kRows;
    g.q8_0 = q8_0;
    g.pack = packInt8X<kTokens>;
    g.rows = int8Rows<kRows, kTokens, Tile>;
    return g;
}

// The tile's view of one block of a token panel.
template <int64_t kTokens>
struct Int8XBlock {
    const int32_t* words;  // [g][t]
    const float* d;        // [t]
    const int32_t* start;  // [t]
    explicit Int8XBlock(const uint8_t* x)
        : words(reinterpret_cast<const int32_t*>(x)),
          d(reinterpret_cast<const float*>(x + kInt8Groups * kTokens * 4)),
          start(reinterpret_cast<const int32_t*>(x + kInt8Groups * kTokens * 4 + kTokens * 4))
    {
    }
};

}  // namespace
}  // namespace spillway::gpu::cpu
