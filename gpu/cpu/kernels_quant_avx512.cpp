// Q8_0 and Q4_0 matvec rows for AVX-512 + VNNI: THE HOT SPOT of decoding quantized models.
// (Compiled with AVX-512 F/BW/VL/DQ/VNNI; chosen at run time only on CPUs that have them.)
//
// Why the loops look the way they do (measured with bench-kernels on a 2-core Zen 5 VM):
// - One row at a time. Rows lie one after another in memory, so a thread's chunk of rows is one
//   sequential stream, which the hardware prefetchers follow best; interleaving 4 rows (4
//   streams, each only a few KiB long) lost up to half the bandwidth even though it shares the
//   x-side work (2 and 4 rows for Q4_0: 65-70% of the read ceiling, against 85% for 1 row).
// - A software prefetch kPrefetchAhead bytes ahead of the block being read, across row ends.
// - The loads are the bottleneck inside the core, so each instruction covers two (Q8_0) or four
//   (Q4_0) blocks, and the block scales come from the loaded weights or one table lookup.
// - vpdpbusd multiplies unsigned by signed bytes. For Q8_0, w ^ 0x80 is w + 128 unsigned, so
//   sum (w ^ 0x80) x = sum w x + 128 sum x; the accumulator starts at -128 sum x (per lane).
//   Q4_0 nibbles are unsigned already; the accumulator starts at -8 sum x.

#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers trip these
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr size_t kPrefetchAhead = 8192;  // bytes

inline void prefetch(const uint8_t* p)
{
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// -128 * (sum of the 4 x values feeding each int32 lane), the Q8_0 accumulator start.
inline __m512i q8Offset(__m512i x)
{
    const __m512i sums =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), x);
    return _mm512_sub_epi32(_mm512_setzero_si512(), sums);
}

// One Q8_0 block on 256 bits (the odd last block of a row): its 32 values and its scale dw.
inline __m256 q8_0Block(const uint8_t* values, const int8_t* xq, float dx, float dw)
{
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i offset = _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(-128), x));
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values));
    const __m256i sum =
        _mm256_dpbusd_epi32(offset, _mm256_xor_si256(w, _mm256_set1_epi8(-128)), x);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dx * dw));
}

}  // namespace

// ---- Q8_0: two 34-byte blocks per iteration ---------------------------------------------------
void matvecQ8_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    const __m512i bias = _mm512_set1_epi8(-128);
    const int8_t* xq = in.q.qs;
    const float* xd = in.q.d;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m512 acc = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 2 <= blocks; b += 2) {
            const uint8_t* block = row + b * 34;
            prefetch(block + kPrefetchAhead + 67);  // one per 68 bytes: every line but 1 in 17
            const __m512i x = _mm512_load_si512(xq + b * 32);
            const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
            const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36));
            const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
            const __m512i sum = _mm512_dpbusd_epi32(q8Offset(x), _mm512_xor_si512(wq, bias), x);
            // Lanes 0..7 belong to block b, lanes 8..15 to block b + 1.
            const __m512 dx = _mm512_mask_broadcastss_ps(_mm512_set1_ps(xd[b]), 0xff00,
                                                         _mm_load_ss(xd + b + 1));
            const __m512 dw = _mm512_mask_broadcastss_ps(_mm512_set1_ps(fp16[loadU16(block)]),
                                                         0xff00,
                                                         _mm_load_ss(fp16 + loadU16(block + 34)));
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), dx), dw, acc);
        }
        if (b < blocks) {
            const uint8_t* block = row + b * 34;
            const __m256 last = q8_0Block(block + 2, xq + b * 32, xd[b], fp16[loadU16(block)]);
            acc = _mm512_add_ps(acc, _mm512_zextps256_ps512(last));
        }
        y[r] = _mm512_reduce_add_ps(acc);
    }
}

// ---- Q8_0 in the Q8_0ScalesLast layout: 64 values (two blocks) per load ---------------------
// The same arithmetic as matvecQ8_0Avx512, in the same order (so the same bits), on rows whose
// values come first and whose fp16 scales come after them. A stored row's 34-byte blocks make
// every other 32-byte load straddle two cache lines and take two scale lookups per pair of
// blocks; here a pair's values are one 64-byte load, and 16 scales are converted at once. On the
// 2-core Zen 5 VM this took the kernel from ~0.9x to ~1.0x the read bandwidth of a plain load
// loop over 1 GiB (dispatched matrix by matrix, as a decode does).

namespace {

constexpr size_t kScalesLastPrefetch = 4096;  // bytes; best of 0, 2, 4, 6 and 8 KiB measured

// `pairs` pairs of a row's blocks from block b on (8, that is 16 blocks, when Full).
template <bool Full>
inline __m512 q8_0PairsScalesLast(const uint8_t* row, const uint16_t* scales, const int8_t* xq,
                                  const float* xd, int64_t b, int pairs, __m512 acc)
{
    const __mmask16 mask = Full ? __mmask16(0xffff) : __mmask16((1u << (2 * pairs)) - 1);
    const __m512 dw16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, scales + b));
    const __m512 dx16 = _mm512_maskz_loadu_ps(mask, xd + b);
    const __m512i bias = _mm512_set1_epi8(-128);
    __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i two = _mm512_set1_epi32(2);
    const int n = Full ? 8 : pairs;
    for (int p = 0; p < n; ++p) {
        const int64_t block = b + 2 * p;
        const uint8_t* values = row + block * kQ8Block;
        prefetch(values + kScalesLastPrefetch);
        const __m512i x = _mm512_load_si512(xq + block * kQ8Block);
        const __m512i w = _mm512_loadu_si512(values);
        const __m512i sum = _mm512_dpbusd_epi32(q8Offset(x), _mm512_xor_si512(w, bias), x);
        const __m512 dx = _mm512_permutexvar_ps(lanes, dx16);
        const __m512 dw = _mm512_permutexvar_ps(lanes, dw16);
        lanes = _mm512_add_epi32(lanes, two);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), dx), dw, acc);
    }
    return acc;
}

}  // namespace

void matvecQ8_0ScalesLastAvx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                                int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    const int64_t paired = blocks & ~int64_t{1};
    const int8_t* xq = in.q.qs;
    const float* xd = in.q.d;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        const uint16_t* scales = reinterpret_cast<const uint16_t*>(row + w.cols);
        __m512 acc = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 16 <= paired; b += 16) acc = q8_0PairsScalesLast<true>(row, scales, xq, xd, b, 8, acc);
        if (b < paired)
            acc = q8_0PairsScalesLast<false>(row, scales, xq, xd, b, int((paired - b) / 2), acc);
        if (paired < blocks) {
            const __m256 last = q8_0Block(row + paired * kQ8Block, xq + paired * kQ8Block, xd[paired],
                                          fp16[loadU16(scales + paired)]);
            acc = _mm512_add_ps(acc, _mm512_zextps256_ps512(last));
        }
        y[r] = _mm512_reduce_add_ps(acc);
    }
}

// ---- Q4_0: four 18-byte blocks per iteration -------------------------------------------------
// A 64-byte load at the group start holds the 4 scales (words 0, 9, 18, 27) and the nibbles of
// blocks 0..2 (words 1..8, 10..17, 19..26); a 16-byte load holds block 3's. Word permutes gather
// the nibbles into [q0 | q1 | q2 | q3] (one block per 128-bit lane) and the scales into
// [d0 x4 | d1 x4 | d2 x4 | d3 x4], matching the int32 lanes the dot products produce.

namespace {

alignas(64) constexpr uint16_t kNibbleWords[32] = {
    1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17,
    19, 20, 21, 22, 23, 24, 25, 26, 32, 33, 34, 35, 36, 37, 38, 39};
alignas(64) constexpr uint16_t kScaleWords[32] = {
    0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27,
    0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  0,  0};
alignas(64) constexpr int32_t kQuarterLanes[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};

// One Q4_0 block on 256 bits: [low nibbles | high nibbles] against x in natural order.
inline __m256 q4_0Block(const uint8_t* block, const int8_t* xq, float dx, const float* fp16)
{
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                             _mm256_set1_epi8(0x0f));
    const __m256i eights = _mm256_set1_epi8(8);
    const __m256i offset = _mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), eights, x));
    const __m256i sum = _mm256_dpbusd_epi32(offset, nibbles, x);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dx * fp16[loadU16(block)]));
}

}  // namespace

void matvecQ4_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    const __m512i nibbleWords = _mm512_load_si512(kNibbleWords);
    const __m512i scaleWords = _mm512_load_si512(kScaleWords);
    const __m512i quarterLanes = _mm512_load_si512(kQuarterLanes);
    const __m512i lowMask = _mm512_set1_epi8(0x0f);
    const __m512i eights = _mm512_set1_epi8(8);
    const int8_t* xq = in.q.qs;
    const float* xd = in.q.d;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m512 acc = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 4 <= blocks; b += 4) {
            const uint8_t* group = row + b * 18;
            prefetch(group + kPrefetchAhead + 35);  // 36 bytes apart: every line
            prefetch(group + kPrefetchAhead + 71);
            const __m512i head = _mm512_loadu_si512(group);
            const __m512i tail = _mm512_castsi128_si512(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 56)));
            const __m512i q = _mm512_permutex2var_epi16(head, nibbleWords, tail);
            const __m512i lo = _mm512_and_si512(q, lowMask);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), lowMask);
            const __m512 dw = _mm512_cvtph_ps(
                _mm512_castsi512_si256(_mm512_permutexvar_epi16(scaleWords, head)));
            // x regrouped like the nibbles: values 0..15 of the 4 blocks, then values 16..31.
            const __m512i x01 = _mm512_load_si512(xq + b * 32);
            const __m512i x23 = _mm512_load_si512(xq + b * 32 + 64);
            const __m512i xlo = _mm512_shuffle_i64x2(x01, x23, 0x88);  // lanes 0, 2 of each
            const __m512i xhi = _mm512_shuffle_i64x2(x01, x23, 0xdd);  // lanes 1, 3 of each
            const __m512i offset = _mm512_sub_epi32(
                _mm512_setzero_si512(),
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, xlo),
                                    eights, xhi));
            const __m512i sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(offset, lo, xlo), hi, xhi);
            const __m512 dx =
                _mm512_permutexvar_ps(quarterLanes, _mm512_castps128_ps512(_mm_loadu_ps(xd + b)));
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), dx), dw, acc);
        }
        __m256 rest = _mm256_setzero_ps();
        for (; b < blocks; ++b)
            rest = _mm256_add_ps(rest, q4_0Block(row + b * 18, xq + b * 32, xd[b], fp16));
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc, _mm512_zextps256_ps512(rest)));
    }
}

}  // namespace spillway::gpu::cpu
