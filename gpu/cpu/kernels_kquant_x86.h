#pragma once
// Matvec rows of ggml's Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and our Q8_G64 for x86 vector sets (layouts
// in kquant_blocks.h, arithmetic as the scalar kernels in kernels_kquant_scalar.cpp). Included
// only by kernels_kquant_avx2.cpp and kernels_kquant_avx512.cpp, which compile it with their own
// flags and integer-dot policy; everything has internal linkage (see kernels_common.h).
//
// All loops go one row at a time (a thread's rows are one sequential stream, which the hardware
// prefetchers follow best; see kernels_quant_avx512.cpp) and prefetch kPrefetchAhead bytes on.
// The integer parts are exact (int8 x int8 products summed in int16 pairs that cannot saturate,
// then int32), so the sets differ from the scalar kernel only in float rounding - except Q8_G64,
// whose float operations they reproduce bit for bit.
//
// Isa provides, on 256-bit vectors:
//   __m256i dotUS(__m256i u, __m256i s);      // 8 int32: sums of 4 adjacent u * s, u in [0, 128]
//   __m256i madd16(__m256i acc, __m256i a, __m256i b);  // acc + sums of adjacent int16 a * b
//   __m256i groupDot64(const uint8_t* w, const int8_t* x);  // 8 int32 summing to the int8 dot
//                                                            // of 64 values (w unaligned)

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"  // hsum256, prefetchLine, kPrefetchAhead
#include "gpu/cpu/kquant_blocks.h"

namespace spillway::gpu::cpu {

// Prefetches the block `bytes` long at `block` + kPrefetchAhead (every cache line it touches).
template <int kBytes>
static inline void prefetchBlock(const uint8_t* block)
{
    const uint8_t* p = block + kPrefetchAhead;
#pragma GCC unroll 4
    for (int o = 0; o < kBytes; o += 64) prefetchLine(p + o);
    if (kBytes % 64 != 0) prefetchLine(p + kBytes - 1);
}

// [low nibbles of the 16 bytes | their high nibbles]: values 0..31 of a Q4_0-style block.
static inline __m256i nibbles32(const uint8_t* p)
{
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

// Byte i is 0xff where bit i of `bits` is set, else 0.
static inline __m256i bytesFromBits(uint32_t bits)
{
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                           0x0303030303030303));  // byte i <- byte i / 8 of bits
    const __m256i select = _mm256_set1_epi64x(0x8040201008040201);  // bit i % 8
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

// Signed int8 dot (8 int32 lanes) via the sign trick: |a| unsigned times b with a's sign.
template <class Isa>
static inline __m256i dotSS(__m256i a, __m256i b)
{
    return Isa::dotUS(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// ---- Q4_1: blocks of 32, y = sum_b (d_w d_x) sum(q x) + m_w (d_x sum x) ------------------------
// Two blocks per step, each with its own accumulators (so that they stay in registers).

template <class Isa>
static inline void q4_1Block(const uint8_t* block, const int8_t* xq, float dx, float sumX,
                             const float* fp16, __m256& acc, float& mins)
{
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i dot = Isa::dotUS(nibbles32(block + 4), x);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(fp16[loadU16(block)] * dx), acc);
    mins += fp16[loadU16(block + 2)] * sumX;
}

template <class Isa>
static void matvecQ4_1X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    const QuantizedX& q = in.q;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        float mins0 = 0.0f, mins1 = 0.0f;  // sum of m_w d_x sum(x); sum8 / 8 = d_x sum(x) exactly
        int64_t b = 0;
        for (; b + 2 <= blocks; b += 2) {
            const uint8_t* block = row + b * 20;
            prefetchLine(block + kPrefetchAhead + 39);  // 40 < 64 bytes per step: every line
            q4_1Block<Isa>(block, q.qs + b * 32, q.d[b], q.sum8[b] * 0.125f, fp16, acc0, mins0);
            q4_1Block<Isa>(block + 20, q.qs + b * 32 + 32, q.d[b + 1], q.sum8[b + 1] * 0.125f,
                           fp16, acc1, mins1);
        }
        if (b < blocks)
            q4_1Block<Isa>(row + b * 20, q.qs + b * 32, q.d[b], q.sum8[b] * 0.125f, fp16, acc0,
                           mins0);
        y[r] = hsum256(_mm256_add_ps(acc0, acc1)) + (mins0 + mins1);
    }
}

// ---- Q5_0: blocks of 32, y = sum_b (d_w d_x) sum((q - 16) x) ----------------------------------
// OR-ing 0xf0 into a nibble whose bit 4 is clear gives nibble - 16 as int8, and a set bit 4 gives
// nibble + 16 - 16: the signed values directly.

template <class Isa>
static inline __m256 q5_0Block(const uint8_t* block, const int8_t* xq, float dx, const float* fp16,
                               __m256 acc)
{
    uint32_t qh;
    std::memcpy(&qh, block + 2, 4);
    const __m256i q = _mm256_or_si256(
        nibbles32(block + 6),
        _mm256_andnot_si256(bytesFromBits(qh), _mm256_set1_epi8(static_cast<char>(0xf0))));
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dotSS<Isa>(q, x)),
                           _mm256_set1_ps(fp16[loadU16(block)] * dx), acc);
}

template <class Isa>
static void matvecQ5_0X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    const QuantizedX& q = in.q;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 2 <= blocks; b += 2) {
            const uint8_t* block = row + b * 22;
            prefetchLine(block + kPrefetchAhead + 43);  // 44 < 64 bytes per step: every line
            acc0 = q5_0Block<Isa>(block, q.qs + b * 32, q.d[b], fp16, acc0);
            acc1 = q5_0Block<Isa>(block + 22, q.qs + b * 32 + 32, q.d[b + 1], fp16, acc1);
        }
        if (b < blocks) acc0 = q5_0Block<Isa>(row + b * 22, q.qs + b * 32, q.d[b], fp16, acc0);
        y[r] = hsum256(_mm256_add_ps(acc0, acc1));
    }
}

// ---- Q4_K / Q5_K: super-blocks of 256 ---------------------------------------------------------
// Per super-block: the 12 scale bytes are unpacked with 32-bit word operations into
// [sc0..sc7 | m0..m7] and widened to int16. The codes give int32 lanes of
// sum_j sc_j sum(q x) (maddubs pairs of each 32-value sub-block, madd with sc_j; two chains),
// times d d_x; the min term dmin d_x sum_j m_j (sum of x over sub-block j) is one madd of the
// 16-value sums of x with [m0, m0, m1, m1, ..., m7, m7], accumulated apart and subtracted at the
// end.

// The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K / Q5_K super-block.
static inline __m128i kScalesMinsBytes(const uint8_t* s)
{
    uint32_t w[3];
    std::memcpy(w, s, 12);
    const uint32_t scLow = w[0] & 0x3f3f3f3fu;
    const uint32_t scHigh = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    const uint32_t minLow = w[1] & 0x3f3f3f3fu;
    const uint32_t minHigh = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    return _mm_setr_epi32(static_cast<int>(scLow), static_cast<int>(scHigh),
                          static_cast<int>(minLow), static_cast<int>(minHigh));
}

template <class Isa, bool kHigh>
static void matvecQ4_5KX86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                           int64_t r1)
{
    constexpr int kBytes = kHigh ? 176 : 144;
    constexpr int kNibbles = kHigh ? 48 : 16;
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQK;
    const __m256i lowMask = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    const __m128i minPairs =
        _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 acc = _mm256_setzero_ps(), accMin = _mm256_setzero_ps();
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * kBytes;
            prefetchBlock<kBytes>(block);
            const int8_t* xq = in.k.qs + b * kQK;
            const __m128i scalesMins = kScalesMinsBytes(block + 4);
            const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scalesMins));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scalesMins, minPairs));
            __m256i high = kHigh ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16))
                                 : _mm256_setzero_si256();
            __m256i sumLo = _mm256_setzero_si256(), sumHi = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m256i raw =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kNibbles + 32 * c));
                __m256i lo = _mm256_and_si256(raw, lowMask);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lowMask);
                if (kHigh) {  // bits 2c and 2c + 1 of qh, moved to bits 0 and 1 by the shift below
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(high, 3), bit4));
                    high = _mm256_srli_epi16(high, 2);
                }
                const __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + 64 * c));
                const __m256i x1 =
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + 64 * c + 32));
                // int16 lanes all holding sc_{2c}, resp. sc_{2c + 1}.
                const __m256i sc0 =
                    _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0100 + 0x0404 * c)));
                const __m256i sc1 =
                    _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0302 + 0x0404 * c)));
                sumLo = Isa::madd16(sumLo, _mm256_maddubs_epi16(lo, x0), sc0);
                sumHi = Isa::madd16(sumHi, _mm256_maddubs_epi16(hi, x1), sc1);
            }
            const __m256i bsums =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.k.bsums + b * (kQK / 16)));
            const float dx = in.k.d[b];
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sumLo, sumHi)),
                                  _mm256_set1_ps(fp16[loadU16(block)] * dx), acc);
            accMin = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums)),
                                     _mm256_set1_ps(fp16[loadU16(block + 2)] * dx), accMin);
        }
        y[r] = hsum256(_mm256_sub_ps(acc, accMin));
    }
}

// ---- Q6_K: super-blocks of 256 ----------------------------------------------------------------
// The 6-bit values are unpacked to 8 vectors of 32 (values in order), each maddubs'ed with x and
// madd'ed with its two 16-value scales; the - 32 offset is 32 sum_g scale_g (sum of x over g),
// from the 16-value sums of x, subtracted in int32.

template <class Isa>
static void matvecQ6_KX86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQK;
    const __m256i lowMask = _mm256_set1_epi8(0x0f), topMask = _mm256_set1_epi8(0x30);
    // Within the int32 holding scales (2c, 2c + 1): low 128-bit lane takes the first, high lane
    // the second, as int16.
    const __m256i pairSplit = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                               2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * 210;
            prefetchBlock<210>(block);
            const int8_t* xq = in.k.qs + b * kQK;
            const __m256i scales = _mm256_cvtepi8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192)));
            __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m256i a =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h));
                const __m256i c =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * h + 32));
                const __m256i top =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 128 + 32 * h));
                const __m256i q[4] = {
                    _mm256_or_si256(_mm256_and_si256(a, lowMask),
                                    _mm256_and_si256(_mm256_slli_epi16(top, 4), topMask)),
                    _mm256_or_si256(_mm256_and_si256(c, lowMask),
                                    _mm256_and_si256(_mm256_slli_epi16(top, 2), topMask)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), lowMask),
                                    _mm256_and_si256(top, topMask)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), lowMask),
                                    _mm256_and_si256(_mm256_srli_epi16(top, 2), topMask)),
                };
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    const int chunk = 4 * h + k;  // values 32 chunk .. 32 chunk + 31
                    const __m256i x =
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + 32 * chunk));
                    const __m256i scale = _mm256_shuffle_epi8(
                        _mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(chunk)), pairSplit);
                    sum = Isa::madd16(sum, _mm256_maddubs_epi16(q[k], x), scale);
                }
            }
            const __m256i bsums = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(in.k.bsums + b * (kQK / 16)));
            const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales, bsums), 5);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, offset)),
                                  _mm256_set1_ps(fp16[loadU16(block + 208)] * in.k.d[b]), acc);
        }
        y[r] = hsum256(acc);
    }
}

// ---- Q8_G64: the thesis' formula, bit for bit -------------------------------------------------
// The int32 group dots are exact in any order; 8 groups at a time are reduced into one vector of
// 8 sums (one transpose-add instead of 8 horizontal sums). The float part is the scalar's:
// ((float)dot * s_w) * s_x, rounded, added to the row's sum one group after the other.

// [sum v0, ..., sum v7] of 8 vectors of 8 int32.
static inline __m256i sum8x8(const __m256i* v)
{
    const __m256i a =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

static inline int32_t hsumInt(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

template <class Isa>
static void matvecQ8_G64X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                            int64_t r1)
{
    const int64_t groups = w.cols / 64;
    const int8_t* xq = in.g64.qs;
    const float* xs = in.g64.s;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float val = 0.0f;
        int64_t g = 0;
        for (; g + 8 <= groups; g += 8) {
            const uint8_t* block = row + g * 68;
            __m256i dots[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                prefetchLine(block + 68 * k + kPrefetchAhead);  // 68 bytes apart: every line
                dots[k] = Isa::groupDot64(block + 68 * k + 4, xq + (g + k) * 64);
            }
            alignas(32) int32_t sums[8];
            _mm256_store_si256(reinterpret_cast<__m256i*>(sums), sum8x8(dots));
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k)
                val += rounded(static_cast<float>(sums[k]) * fp32At(block + 68 * k) * xs[g + k]);
        }
        for (; g < groups; ++g) {
            const uint8_t* block = row + g * 68;
            const int32_t dot = hsumInt(Isa::groupDot64(block + 4, xq + g * 64));
            val += rounded(static_cast<float>(dot) * fp32At(block) * xs[g]);
        }
        y[r] = val;
    }
}

template <class Isa>
static void fillKQuantX86(Kernels& k)
{
    k.matvec[static_cast<int>(DType::Q4_1)] = matvecQ4_1X86<Isa>;
    k.matvec[static_cast<int>(DType::Q5_0)] = matvecQ5_0X86<Isa>;
    k.matvec[static_cast<int>(DType::Q4_K)] = matvecQ4_5KX86<Isa, false>;
    k.matvec[static_cast<int>(DType::Q5_K)] = matvecQ4_5KX86<Isa, true>;
    k.matvec[static_cast<int>(DType::Q6_K)] = matvecQ6_KX86<Isa>;
    k.matvec[static_cast<int>(DType::Q8_G64)] = matvecQ8_G64X86<Isa>;
}

}  // namespace spillway::gpu::cpu
