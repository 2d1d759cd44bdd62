#pragma once
// What the prompt path's integer products (gemm_int8_avx2.cpp, gemm_int8_avxvnni.cpp,
// gemm_int8_avx512.cpp) share: the batch's quantization and packing, the weight rows' repacking,
// and the loop that runs a register tile over the token panels. AVX2 code (every CPU that runs
// one of the products has it).
//
// Every weight type is taken as blocks of 32 values of k with unsigned integers q (the
// dot-product instructions multiply unsigned by signed bytes), one float scale dw per block and
// row, and per kind (Int8Kind):
//   Plain  (Q8_0: q = w + 128, Q4_0: the nibble as stored), x as Q8 blocks of 32:
//     Y[j, r] = sum_b dw[r, b] dx[j, b] (sum_i q qx - s sum_i qx)
//   Min    (Q4_K: q 0..15, Q5_K: q 0..31; dw = d sc_b, mw = dmin m_b, both exact in float), x as
//   Q8_K super-blocks B of 8 blocks with one scale dx[j, B]:
//     Y[j, r] = sum_B dx[j, B] sum_{b in B} (dw[r, b] sum_i q qx - mw[r, b] sum_i qx)
//   Halves (Q6_K: q 0..63 for q6 - 32 + 32; two scales d sc per block, one per 16 values), x as Q8_K:
//     Y[j, r] = sum_B dx[j, B] sum_{b in B} sum_{h<2} dw_h[r, b] (sum_{i in half h} q qx - 32 sum qx)
// where dx, qx are x quantized exactly as the decode kernels quantize one token: Q8 blocks of 32
// for Q8_0 / Q4_0 (quantizeQ8X86), Q8_K super-blocks of 256 (quantizeQ8K's bits:
// quantizeQ8KBlockX86) for the K-quants. The
// integer part of each block (each half) is exact, as in decode; only the float sums are in
// another order (decode adds a K-quant super-block's sub-blocks as integers times their scales
// and rounds once), so a prompt's logits match one token at a time within
// kPromptIntegerTolerance (tests/common/prompt_tolerance.h). Every tile adds the blocks in the
// same order with the same operations, so all of them give the same bits: Plain, per block
// c += float(sum) * (dw * dx), one FMA; the K-quants, per super-block cs = 0, then per block
// cs += float(sum) * dw (Halves: one FMA per half, low half first; Min: then cs -= mw * sum qx,
// one FNMADD), then c += cs * dx, one FMA.
//
// The integer shift of Plain and Halves (Q8_0's 128, Q4_0's 8, Q6_K's 32) comes back out through
// the block's (half's) sum of x: sum w qx = sum (w + s) qx - s sum qx; that correction is where
// each integer sum starts.
//
// Layouts (kTokens tokens per panel, kRows rows per block; g counts the 8 groups of 4 values of k
// in a block of 32):
//   packed x, panel p, block b: int32 qx words [g][t] (8 x kTokens), then float dx[t], then int32
//     start[t] (Plain, Single: -s sum qx; Min: 0; Halves: the low half's -s sum qx), then 4 bytes
//     more per token (Min: float msum[t] = sum qx; Halves: int32, the high half's start; Plain,
//     Single: 0)
//     (gemmInt8XBlockBytes(kTokens) in all); tokens past n are zeros; a K-quant's dx is its
//     super-block's in each of its blocks;
//   weight panel, block b: u8 words [g][row] (8 x kRows x 4 bytes), then float dw[row] (Halves:
//     the low half's), then float more[row] (Min: mw; Halves: the high half's dw; Single: the
//     same dw again, unread; Plain: 0)
//     (gemmInt8WBlockBytes(kRows)); rows past the block's are zeros.
// Included by files compiled for AVX2 or wider; everything here is internal to each of them.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_x86.h"  // transpose8x8
#include "gpu/cpu/int8_unpack_x86.h"  // the new types' blocks as unsigned bytes
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"  // quantizeQ8X86, fp16Scalar
#include "gpu/cpu/kquant_blocks.h"      // kScaleMin

namespace spillway::gpu::cpu {
namespace {

constexpr int64_t kInt8Groups = kQ8Block / 4;
constexpr int64_t kQ4_0BlockBytes = 18, kQ8_0BlockBytes = 34;  // fp16 scale, then the values
constexpr int64_t kRowPrefetchAhead = 512;                      // bytes ahead in each row
constexpr int64_t kSuper = 256;                                 // values per K-quant super-block
constexpr int64_t kQ4_KBytes = 144, kQ5_KBytes = 176, kQ6_KBytes = 210;

// How a type's blocks enter the product (above), and the new types (iq_expand.h's expansions:
// value = D scale_g v - Dmin min_g, v int8):
//   Plain     also IQ4_NL (q = v + 128) and MXFP4 (q = v + 12): x as Q8 blocks of 32;
//   PlainMin  Q5_1 (q = v, 0..31; value = D q + M): Plain plus M times d_x sum qx rounded to fp16,
//             as llama.cpp's block_q8_1 keeps it (the x block's msum word);
//   Halves    Q6_K, and the 256-value types without mins with a scale per 16 values whose
//             q = v + shift fits 0..63 (Q3_K: shift 4, IQ1_M: 9): two scales per block of 32;
//             HalvesWide the same for q up to 127 (IQ2_XS, IQ2_S: shift 43);
//   Single    the 256-value types with one scale per 32 values, q up to 63 (IQ3_S: shift 15,
//             IQ1_S: 9): Min4's sums without the min, the start -shift sum qx over the block;
//             SingleWide the same for q up to 127 (IQ2_XXS: 43, IQ3_XXS: 62), SingleFull up to
//             255 (IQ4_XS: 128); the kinds of a pair differ only in how many groups AVX2's 16-bit
//             lanes can add (SingleFull: none, no AVX2 tile);
//   Min16     Q2_K (q = v, 0..3): two scales and two mins per block of 32, x's two 16-value sums
//             as floats in the start and msum words, the integer sums starting at 0:
//               cs += float(sum_h) dw_h - mw_h bsum_h   (h = low, high half)
//             (its weight blocks carry 4 floats a row: dw_lo, dw_hi, mw_lo, mw_hi).
// Q4_K and Q5_K differ only in their largest q (the AVX2 tile adds fewer groups in 16-bit lanes
// for Q5_K).
enum class Int8Kind { Plain, PlainMin, Min4, Min5, Halves, HalvesWide, Single, SingleWide, SingleFull, Min16 };
constexpr bool hasMin(Int8Kind k) { return k == Int8Kind::Min4 || k == Int8Kind::Min5; }
constexpr bool isK(Int8Kind k) { return k != Int8Kind::Plain && k != Int8Kind::PlainMin; }
constexpr bool isHalves(Int8Kind k) { return k == Int8Kind::Halves || k == Int8Kind::HalvesWide; }
constexpr bool isSingle(Int8Kind k)
{
    return k == Int8Kind::Single || k == Int8Kind::SingleWide || k == Int8Kind::SingleFull;
}
// The largest unsigned weight byte a kind's AVX2 tile adds in its 16-bit lanes (Plain: Q4_0's).
constexpr int maxQOf(Int8Kind k)
{
    switch (k) {
    case Int8Kind::Plain: return 15;
    case Int8Kind::PlainMin: return 31;
    case Int8Kind::Min4: return 15;
    case Int8Kind::Min5: return 31;
    case Int8Kind::Halves: return 63;
    case Int8Kind::HalvesWide: return 127;
    case Int8Kind::Single: return 63;
    case Int8Kind::SingleWide: return 127;
    case Int8Kind::SingleFull: return 255;
    case Int8Kind::Min16: return 3;
    }
    return 255;
}
// Groups of a block vpmaddubsw's 16-bit lanes add without saturating (pairs of at most
// 2 x maxQ x 127 each): 8, 4, 2, 1, or 0 where one group already can (SingleFull: no AVX2 tile).
constexpr int64_t avx2SpanOf(Int8Kind k)
{
    const int64_t fit = 32767 / (2 * 127 * maxQOf(k));
    return fit >= 8 ? 8 : fit >= 4 ? 4 : fit >= 2 ? 2 : fit;
}
// Floats per row of a weight block: dw, more (Min16: dw_lo, dw_hi, mw_lo, mw_hi).
constexpr int64_t wFloatsOf(Int8Kind k) { return k == Int8Kind::Min16 ? 4 : 2; }
constexpr int64_t wBlockBytesOf(Int8Kind k, int64_t rows) { return kInt8Groups * rows * 4 + wFloatsOf(k) * rows * 4; }
static_assert(wBlockBytesOf(Int8Kind::Min16, 8) == gemmInt8WBlockBytes(8), "the panel holds the largest block");

// Each type the products take: its kind, the shift that makes its values unsigned (q = v + shift)
// and its largest q; taken false for the rest.
struct Int8Type {
    bool taken = false;
    Int8Kind kind = Int8Kind::Plain;
    int32_t shift = 0;
    int32_t maxQ = 0;
};
constexpr Int8Type int8TypeOf(DType t)
{
    using K = Int8Kind;
    switch (t) {
    case DType::Q4_0: return {true, K::Plain, 8, 15};
    case DType::Q8_0: return {true, K::Plain, 128, 255};
    case DType::IQ4_NL: return {true, K::Plain, 128, 241};
    case DType::MXFP4: return {true, K::Plain, 12, 24};
    case DType::Q5_1: return {true, K::PlainMin, 0, 31};
    case DType::Q4_K: return {true, K::Min4, 0, 15};
    case DType::Q5_K: return {true, K::Min5, 0, 31};
    case DType::Q6_K: return {true, K::Halves, 32, 63};
    case DType::Q3_K: return {true, K::Halves, 4, 7};
    case DType::IQ1_M: return {true, K::Halves, 9, 18};
    case DType::IQ2_XS:
    case DType::IQ2_S: return {true, K::HalvesWide, 43, 86};
    case DType::IQ3_S: return {true, K::Single, 15, 30};
    case DType::IQ1_S: return {true, K::Single, 9, 18};
    case DType::IQ2_XXS: return {true, K::SingleWide, 43, 86};
    case DType::IQ3_XXS: return {true, K::SingleWide, 62, 124};
    case DType::IQ4_XS: return {true, K::SingleFull, 128, 241};
    case DType::Q2_K: return {true, K::Min16, 0, 3};
    default: return {};
    }
}
inline Int8Kind int8KindOf(const MatrixView& w) { return int8TypeOf(w.type).kind; }
// The weights' shift to unsigned bytes (Plain, Halves).
inline int32_t int8ShiftOf(const MatrixView& w) { return int8TypeOf(w.type).shift; }

// The types a product takes: every one where it has VNNI; AVX2's vpmaddubsw those whose bytes
// its kind's 16-bit lanes add without saturating.
inline uint32_t int8TypesOf(bool vnni)
{
    uint32_t mask = 0;
    for (int i = 0; i < kDTypeCount; ++i) {
        const Int8Type t = int8TypeOf(static_cast<DType>(i));
        if (t.taken && (vnni || (avx2SpanOf(t.kind) >= 1 && t.maxQ <= maxQOf(t.kind)))) mask |= 1u << i;
    }
    return mask;
}

// 8 x 8 transpose of 32-bit words: v[i] word j -> v[j] word i (gemm_x86.h's, on integers).
inline void transposeWords8x8(__m256i v[8])
{
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_castsi256_ps(v[i]);
    transpose8x8(r);
    for (int i = 0; i < 8; ++i) v[i] = _mm256_castps_si256(r[i]);
}

// Row r's block b as 32 unsigned bytes in k order, its scale and (PlainMin) its M; `unpack` is
// the type's (int8_unpack_x86.h: IQ4_NL, MXFP4, Q5_1), null for Q4_0 and Q8_0.
inline __m256i int8RowBlock(const MatrixView& w, Unpack32Fn unpack, int64_t r, int64_t b, float& d, float& m)
{
    const uint8_t* row = rowPointer(w, r);
    m = 0.0f;
    if (unpack) {
        const uint8_t* block = row + b * dtypeTraits(w.type).blockBytes;
        _mm_prefetch(reinterpret_cast<const char*>(block + kRowPrefetchAhead), _MM_HINT_T0);
        return unpack(block, fp16Table(), d, m);
    }
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

// Rows [r0, r1) (at most kRows) of Plain / PlainMin weights into the weight panel.
template <int64_t kRows>
void packInt8Rows(const MatrixView& w, int64_t r0, int64_t r1, uint8_t* panel)
{
    static_assert(kRows % 8 == 0, "whole 8 x 8 transposes");
    const int64_t blocks = w.cols / kQ8Block;
    const Unpack32Fn unpack = unpack32Of(w.type);
    for (int64_t b = 0; b < blocks; ++b) {
        uint8_t* out = panel + b * wBlockBytesOf(Int8Kind::Plain, kRows);
        float* dw = reinterpret_cast<float*>(out + kInt8Groups * kRows * 4);
        float* more = dw + kRows;
        for (int64_t eighth = 0; eighth < kRows / 8; ++eighth) {
            __m256i v[8];
            for (int64_t i = 0; i < 8; ++i) {
                const int64_t r = r0 + eighth * 8 + i;
                float d = 0.0f, m = 0.0f;
                v[i] = r < r1 ? int8RowBlock(w, unpack, r, b, d, m) : _mm256_setzero_si256();
                dw[eighth * 8 + i] = d;
                more[eighth * 8 + i] = m;
            }
            transposeWords8x8(v);  // v[g]: word g of the 8 rows
            for (int64_t g = 0; g < kInt8Groups; ++g)
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (g * kRows + eighth * 8) * 4), v[g]);
        }
    }
}

// Super-block sb of row r of a 256-value type through its unpacking `unpack` (unpack256Of): its 8
// blocks of 32 as unsigned bytes q = v + shift, and per block f[0] = D scale of the low half,
// f[1] = of the high half, f[2], f[3] = Dmin min of each half (Min16). Every product D scale is
// exact in float (an fp16 times at most 6 bits; IQ2 / IQ3_XXS / IQ1 D's power-of-two factor).
inline void unpackedSuperBlock(const MatrixView& w, Unpack256Fn unpack, int64_t r, int64_t sb, __m256i v[8],
                               float f[4][8])
{
    const int64_t bytes = dtypeTraits(w.type).blockBytes;
    const uint8_t* block = rowPointer(w, r) + sb * bytes;
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kRowPrefetchAhead + o), _MM_HINT_T0);
    unpack(block, fp16Table(), v, f);
}

// Super-block sb of row r of a K-quant: its 8 blocks of 32 as unsigned bytes in k order (v), each
// block's dw and its more (Min: mw; Halves: the high half's dw); layouts in kquant_blocks.h.
template <Int8Kind K>
inline void kRowSuperBlock(const MatrixView& w, int64_t r, int64_t sb, __m256i v[8], float dw[8], float more[8])
{
    constexpr int64_t bytes = K == Int8Kind::Min4 ? kQ4_KBytes : K == Int8Kind::Min5 ? kQ5_KBytes : kQ6_KBytes;
    const uint8_t* block = rowPointer(w, r) + sb * bytes;
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kRowPrefetchAhead + o), _MM_HINT_T0);
    const __m256i low = _mm256_set1_epi8(0x0F);
    if constexpr (K == Int8Kind::Halves) {
        const float d = fp16Scalar(block + 208);
        const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
        const __m256i three = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; ++h) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h));
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 128 + 32 * h));
            // Value 128 h + 32 part + l: nibble (low of a, low of b, high of a, high of b) | bits
            // 2 part, 2 part + 1 of hb as bits 4-5.
            const auto top = [&](int part) {
                return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * part), three), 4);
            };
            v[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, low), top(0));
            v[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(b, low), top(1));
            v[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low), top(2));
            v[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low), top(3));
        }
        for (int j = 0; j < 8; ++j) {
            dw[j] = d * static_cast<float>(scales[2 * j]);  // exact: 11 x 8 bits
            more[j] = d * static_cast<float>(scales[2 * j + 1]);
        }
    } else {
        const float d = fp16Scalar(block), dmin = fp16Scalar(block + 2);
        const uint8_t* nibbles = block + (K == Int8Kind::Min5 ? 48 : 16);
        const __m256i high = K == Int8Kind::Min5 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16))
                                                 : _mm256_setzero_si256();
        const __m256i one = _mm256_set1_epi8(1);
        for (int c = 0; c < 4; ++c) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nibbles + 32 * c));
            __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            if constexpr (K == Int8Kind::Min5) {  // bit 4 of value 64 c + l: bit 2 c of qh[l]; + 32: bit 2 c + 1
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * c), one), 4));
                hi = _mm256_or_si256(hi,
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * c + 1), one), 4));
            }
            v[2 * c] = lo;
            v[2 * c + 1] = hi;
        }
        for (int j = 0; j < 8; ++j) {
            int sc = 0, m = 0;
            kScaleMin(j, block + 4, sc, m);
            dw[j] = d * static_cast<float>(sc);  // exact: 11 x 6 bits
            more[j] = dmin * static_cast<float>(m);
        }
    }
}

// Rows [r0, r1) (at most kRows) of 256-value weights into the weight panel: Q4_K, Q5_K and Q6_K
// decoded here (kRowSuperBlock), the new types through their unpacking (unpackedSuperBlock).
template <int64_t kRows, Int8Kind K>
void packKRows(const MatrixView& w, int64_t r0, int64_t r1, uint8_t* panel)
{
    static_assert(kRows % 8 == 0, "whole 8 x 8 transposes");
    constexpr int64_t kFloats = wFloatsOf(K);
    // Null for Q4_K, Q5_K and Q6_K, which kRowSuperBlock decodes.
    const Unpack256Fn unpack = unpack256Of(w.type);
    const int64_t supers = w.cols / kSuper;
    for (int64_t sb = 0; sb < supers; ++sb)
        for (int64_t eighth = 0; eighth < kRows / 8; ++eighth) {
            __m256i v[8][8];  // [row][block]
            float f[8][4][8];  // [row][float of the block][block]
            for (int64_t i = 0; i < 8; ++i) {
                const int64_t r = r0 + eighth * 8 + i;
                if (r >= r1) {
                    for (int j = 0; j < 8; ++j) {
                        v[i][j] = _mm256_setzero_si256();
                        for (int k = 0; k < 4; ++k) f[i][k][j] = 0.0f;
                    }
                } else if (unpack) {
                    unpackedSuperBlock(w, unpack, r, sb, v[i], f[i]);
                } else if constexpr (K == Int8Kind::Min4 || K == Int8Kind::Min5 || K == Int8Kind::Halves) {
                    kRowSuperBlock<K>(w, r, sb, v[i], f[i][0], f[i][1]);
                }
            }
            for (int64_t j = 0; j < 8; ++j) {
                uint8_t* out = panel + (sb * 8 + j) * wBlockBytesOf(K, kRows);
                float* outF = reinterpret_cast<float*>(out + kInt8Groups * kRows * 4);
                __m256i t[8];
                for (int64_t i = 0; i < 8; ++i) {
                    t[i] = v[i][j];
                    for (int64_t k = 0; k < kFloats; ++k) outF[k * kRows + eighth * 8 + i] = f[i][k][j];
                }
                transposeWords8x8(t);  // t[g]: word g of the 8 rows
                for (int64_t g = 0; g < kInt8Groups; ++g)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (g * kRows + eighth * 8) * 4), t[g]);
            }
        }
}

// One Q8_K super-block of x (256 values) as quantizeQ8K (kernels_kquant_scalar.cpp) quantizes it,
// bit for bit: the same float operations per value (max |x|, d = max / 127, q = x * (1 / d)
// rounded to nearest even; the scalar max skips NaNs as vmaxps with the running max second does),
// 8 at a time. The scalar one takes 1.4 ns a value, a tenth of a 2048-deep K-quant product.
inline void quantizeQ8KBlockX86(const float* x, int8_t* qs, float* d, int16_t* bsums)
{
    const __m256 signMask = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int64_t i = 0; i < kSuper; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(signMask, _mm256_loadu_ps(x + i)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float scale = _mm_cvtss_f32(h) / 127.0f;
    const __m256 inverse = _mm256_set1_ps(q8Inverse(scale));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < kSuper / 16; ++g) {
        // Under the default rounding (nearest even), as the scalar (v + 1.5 * 2^23) - 1.5 * 2^23.
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g), inverse));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + 8), inverse));
        const __m256i q16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);  // 16 int16 in order
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * g),
                         _mm_packs_epi16(_mm256_castsi256_si128(q16), _mm256_extracti128_si256(q16, 1)));
        const __m256i pairs = _mm256_madd_epi16(q16, ones);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
    }
    *d = scale;
}

// The batch's token panels [p0, p1) (GemmInt8::pack).
template <int64_t kTokens>
void packInt8X(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0, int64_t p1, const MatrixView& w,
               uint8_t* packed)
{
    constexpr int64_t kBlockBytes = gemmInt8XBlockBytes(kTokens);
    const int64_t blocks = cols / kQ8Block;
    const Int8Kind kind = int8KindOf(w);
    const int32_t shift = int8ShiftOf(w);
    alignas(32) int8_t qs[kSuper];
    float dk = 0.0f;
    int16_t bsums[kSuper / 16];
    for (int64_t p = p0; p < p1; ++p) {
        uint8_t* panel = packed + p * blocks * kBlockBytes;
        for (int64_t i = 0; i < kTokens; ++i) {
            const int64_t t = p * kTokens + i;
            for (int64_t b = 0; b < blocks; ++b) {
                uint8_t* out = panel + b * kBlockBytes;
                const int8_t* q = qs;
                float d = 0.0f;
                int32_t start = 0, more = 0;  // more: Min's msum as bits, or Halves' high start
                if (t >= n) {
                    std::memset(qs, 0, sizeof qs);
                } else if (!isK(kind)) {
                    float sum8 = 0.0f;
                    quantizeQ8X86(x + t * lda + b * kQ8Block, kQ8Block, qs, &d, &sum8);
                    int32_t sum = 0;
                    for (int64_t k = 0; k < kQ8Block; ++k) sum += qs[k];
                    start = -shift * sum;
                    if (kind == Int8Kind::PlainMin) {
                        // d_x sum(qx) (sum8 / 8, exact) rounded to fp16, as the decode kernels
                        // (llama.cpp's block_q8_1) keep it.
                        const float s = _cvtsh_ss(_cvtss_sh(sum8 * 0.125f, _MM_FROUND_TO_NEAREST_INT));
                        std::memcpy(&more, &s, 4);
                    }
                } else {
                    // Q8_K, as decode quantizes one token: once per super-block.
                    const int64_t j = b % (kSuper / kQ8Block);
                    if (j == 0) quantizeQ8KBlockX86(x + t * lda + b * kQ8Block, qs, &dk, bsums);
                    q = qs + j * kQ8Block;
                    d = dk;
                    if (isHalves(kind)) {
                        start = -shift * bsums[2 * j];
                        more = -shift * bsums[2 * j + 1];
                    } else if (isSingle(kind)) {
                        start = -shift * (bsums[2 * j] + bsums[2 * j + 1]);
                    } else if (kind == Int8Kind::Min16) {
                        const float lo = static_cast<float>(bsums[2 * j]), hi = static_cast<float>(bsums[2 * j + 1]);
                        std::memcpy(&start, &lo, 4);
                        std::memcpy(&more, &hi, 4);
                    } else {
                        const float msum = static_cast<float>(bsums[2 * j] + bsums[2 * j + 1]);  // exact
                        std::memcpy(&more, &msum, 4);
                    }
                }
                for (int64_t g = 0; g < kInt8Groups; ++g) std::memcpy(out + (g * kTokens + i) * 4, q + g * 4, 4);
                std::memcpy(out + (kInt8Groups * kTokens + i) * 4, &d, 4);
                std::memcpy(out + (kInt8Groups * kTokens + kTokens + i) * 4, &start, 4);
                std::memcpy(out + (kInt8Groups * kTokens + 2 * kTokens + i) * 4, &more, 4);
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
// repacked into `panel`, then `Tiles::run<kind>` (x panel, weight panel, blocks, y, ldc, tokens,
// rows) over every token panel (a template, so each call is direct).
template <int64_t kRows, int64_t kTokens, class Tiles, Int8Kind K>
void int8RowsOf(const uint8_t* packedX, int64_t n, const MatrixView& w, int64_t r0, int64_t r1, float* y,
                int64_t ldc, uint8_t* panel)
{
    const int64_t blocks = w.cols / kQ8Block;
    if constexpr (!isK(K)) packInt8Rows<kRows>(w, r0, r1, panel);
    else packKRows<kRows, K>(w, r0, r1, panel);
    for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
        const int64_t tokens = n - t0 < kTokens ? n - t0 : kTokens;
        Tiles::template run<K>(packedX + t0 / kTokens * blocks * gemmInt8XBlockBytes(kTokens), panel, blocks,
                               y + t0 * ldc + r0, ldc, tokens, r1 - r0);
    }
}
template <int64_t kRows, int64_t kTokens, class Tiles>
void int8Rows(const uint8_t* packedX, int64_t n, const MatrixView& w, int64_t r0, int64_t r1, float* y, int64_t ldc,
              uint8_t* panel)
{
    using K = Int8Kind;
#define SPILLWAY_INT8_KIND(kind) return int8RowsOf<kRows, kTokens, Tiles, K::kind>(packedX, n, w, r0, r1, y, ldc, panel)
    switch (int8KindOf(w)) {
    case K::Plain: SPILLWAY_INT8_KIND(Plain);
    case K::PlainMin: SPILLWAY_INT8_KIND(PlainMin);
    case K::Min4: SPILLWAY_INT8_KIND(Min4);
    case K::Min5: SPILLWAY_INT8_KIND(Min5);
    case K::Halves: SPILLWAY_INT8_KIND(Halves);
    case K::HalvesWide: SPILLWAY_INT8_KIND(HalvesWide);
    case K::Single: SPILLWAY_INT8_KIND(Single);
    case K::SingleWide: SPILLWAY_INT8_KIND(SingleWide);
    case K::SingleFull:
        if constexpr (Tiles::kVnni) SPILLWAY_INT8_KIND(SingleFull);
        else return;  // never taken (int8TypesOf)
    case K::Min16: SPILLWAY_INT8_KIND(Min16);
    }
#undef SPILLWAY_INT8_KIND
}
template <int64_t kRows, int64_t kTokens, class Tiles>
GemmInt8 int8Product(const char* name)
{
    static_assert(kDTypeCount <= 32, "one bit a type");
    GemmInt8 g;
    g.name = name;
    g.tokens = kTokens;
    g.rowsPerBlock = kRows;
    g.types = int8TypesOf(Tiles::kVnni);
    g.pack = packInt8X<kTokens>;
    g.rows = int8Rows<kRows, kTokens, Tiles>;
    return g;
}

// Integer sums that start at 0 (Min16, whose x words there are floats).
alignas(64) inline constexpr int32_t kZeroStarts[16] = {};

// The tile's view of one block of a token panel.
template <int64_t kTokens>
struct Int8XBlock {
    const int32_t* words;  // [g][t]
    const float* d;        // [t]
    const int32_t* start;  // [t]
    const float* msum;     // [t] (Min, PlainMin; Min16: the high half's sum of qx)
    const int32_t* startHi;  // [t] (Halves: the high half's start)
    const float* bsumLo;     // [t] (Min16: the low half's sum of qx)
    explicit Int8XBlock(const uint8_t* x)
        : words(reinterpret_cast<const int32_t*>(x)),
          d(reinterpret_cast<const float*>(x + kInt8Groups * kTokens * 4)),
          start(reinterpret_cast<const int32_t*>(x + kInt8Groups * kTokens * 4 + kTokens * 4)),
          msum(reinterpret_cast<const float*>(x + kInt8Groups * kTokens * 4 + 2 * kTokens * 4)),
          startHi(reinterpret_cast<const int32_t*>(x + kInt8Groups * kTokens * 4 + 2 * kTokens * 4)),
          bsumLo(reinterpret_cast<const float*>(x + kInt8Groups * kTokens * 4 + kTokens * 4))
    {
    }
};

// The 6-token x 8-row tiles of the AVX2 set (gemm_int8_avxvnni.cpp, gemm_int8_avx2.cpp) for one
// kind of weights: `Sums::block(wp, words, g0, g1, start, acc)` leaves in acc[t] token t's 8 rows'
// integer sums of groups [g0, g1) from start[t]; the float operations are the AVX-512 tile's.
template <int64_t kRows, int64_t kTokens, class Sums, Int8Kind K>
void ymmTile(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc, int64_t tokens, int64_t rows)
{
    static_assert(kRows == 8, "one ymm of rows");
    __m256 c[kTokens];
    for (int64_t t = 0; t < kTokens; ++t) c[t] = _mm256_setzero_ps();
    // Groups [g0, g1) of one block, scaled by `scale` (times xs[t] where xs is given: Plain) and
    // added to `into`.
    const auto groups = [&](const uint8_t* w, const int32_t* words, int64_t g0, int64_t g1, const int32_t* start,
                            const float* scale, const float* xs, __m256 (&into)[kTokens]) {
        __m256i acc[kTokens];
        Sums::template block<kTokens, K>(w, words, g0, g1, start, acc);
        const __m256 d = _mm256_loadu_ps(scale);
        for (int64_t t = 0; t < kTokens; ++t)
            into[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), xs ? _mm256_mul_ps(d, _mm256_set1_ps(xs[t])) : d,
                                      into[t]);
    };
    constexpr int64_t kWBytes = wBlockBytesOf(K, kRows);
    if constexpr (!isK(K)) {
        for (int64_t b = 0; b < blocks; ++b, x += gemmInt8XBlockBytes(kTokens), wp += kWBytes) {
            const Int8XBlock<kTokens> xb(x);
            const float* dw = reinterpret_cast<const float*>(wp + kInt8Groups * kRows * 4);
            groups(wp, xb.words, 0, kInt8Groups, xb.start, dw, xb.d, c);
            if constexpr (K == Int8Kind::PlainMin) {
                const __m256 m = _mm256_loadu_ps(dw + kRows);
                for (int64_t t = 0; t < kTokens; ++t) c[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(xb.msum[t]), c[t]);
            }
        }
    } else {
        for (int64_t b0 = 0; b0 < blocks; b0 += kSuper / kQ8Block) {
            __m256 cs[kTokens];
            for (int64_t t = 0; t < kTokens; ++t) cs[t] = _mm256_setzero_ps();
            const float* dx = nullptr;
            for (int64_t b = 0; b < kSuper / kQ8Block; ++b, x += gemmInt8XBlockBytes(kTokens), wp += kWBytes) {
                const Int8XBlock<kTokens> xb(x);
                dx = xb.d;
                const float* dw = reinterpret_cast<const float*>(wp + kInt8Groups * kRows * 4);
                if constexpr (isHalves(K)) {
                    groups(wp, xb.words, 0, kInt8Groups / 2, xb.start, dw, nullptr, cs);
                    groups(wp, xb.words, kInt8Groups / 2, kInt8Groups, xb.startHi, dw + kRows, nullptr, cs);
                } else if constexpr (K == Int8Kind::Min16) {
                    groups(wp, xb.words, 0, kInt8Groups / 2, kZeroStarts, dw, nullptr, cs);
                    groups(wp, xb.words, kInt8Groups / 2, kInt8Groups, kZeroStarts, dw + kRows, nullptr, cs);
                    const __m256 mLo = _mm256_loadu_ps(dw + 2 * kRows), mHi = _mm256_loadu_ps(dw + 3 * kRows);
                    for (int64_t t = 0; t < kTokens; ++t) {
                        cs[t] = _mm256_fnmadd_ps(mLo, _mm256_set1_ps(xb.bsumLo[t]), cs[t]);
                        cs[t] = _mm256_fnmadd_ps(mHi, _mm256_set1_ps(xb.msum[t]), cs[t]);
                    }
                } else {
                    groups(wp, xb.words, 0, kInt8Groups, xb.start, dw, nullptr, cs);
                    if constexpr (hasMin(K)) {
                        const __m256 m = _mm256_loadu_ps(dw + kRows);
                        for (int64_t t = 0; t < kTokens; ++t)
                            cs[t] = _mm256_fnmadd_ps(m, _mm256_set1_ps(xb.msum[t]), cs[t]);
                    }
                }
            }
            for (int64_t t = 0; t < kTokens; ++t) c[t] = _mm256_fmadd_ps(cs[t], _mm256_set1_ps(dx[t]), c[t]);
        }
    }
    storeInt8Tile(c, y, ldc, tokens, rows);
}

}  // namespace
}  // namespace spillway::gpu::cpu
