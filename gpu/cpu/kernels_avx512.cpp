// AVX-512 kernels (compiled with AVX-512 F/BW/VL/DQ/VNNI; chosen at run time only on CPUs that
// have them). Quantized types use VNNI's vpdpbusd on 256-bit vectors (one instruction for the
// multiply-and-add that AVX2 needs two for); float types use 512-bit FMAs. No std containers or
// out-of-line std templates here: see kernels_common.h.

// GCC 12's own AVX-512 headers trip these warnings (_mm512_undefined_* self-initialize).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"

namespace spillway::gpu::cpu {

namespace {

// vpdpbusd multiplies unsigned by signed bytes and adds groups of 4 into int32 lanes, with no
// int16 saturation, on top of an int32 accumulator that can carry a correction term for free.
struct Avx512VnniIsa {
    // Q8_0: w ^ 0x80 is w + 128 as an unsigned byte, so sum (w ^ 0x80) x = sum w x + 128 sum x.
    // The second term depends on x only: computed once per block, it starts the accumulator
    // negated. Per row that leaves one xor and one vpdpbusd.
    struct Q8Shared {
        __m256i x;
        __m256i offset;  // int32 lanes: -128 * (sum of the 4 x values feeding that lane)
    };
    static Q8Shared q8Shared(__m256i x)
    {
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(-128), x);
        return {x, _mm256_sub_epi32(_mm256_setzero_si256(), sums)};
    }
    static __m256i q8Dot(__m256i w, const Q8Shared& s)
    {
        return _mm256_dpbusd_epi32(s.offset, _mm256_xor_si256(w, _mm256_set1_epi8(-128)), s.x);
    }

    // Q4_0: nibbles are unsigned already; the accumulator starts at -8 * sum x.
    struct Q4Shared {
        __m256i xlo, xhi;
        __m256i offset;  // int32 lanes: -8 * (sum of the x values feeding that lane)
    };
    static Q4Shared q4Shared(__m256i xlo, __m256i xhi)
    {
        const __m256i eights = _mm256_set1_epi8(8);
        const __m256i sums = _mm256_dpbusd_epi32(
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), eights, xlo), eights, xhi);
        return {xlo, xhi, _mm256_sub_epi32(_mm256_setzero_si256(), sums)};
    }
    static __m256i q4Dot(__m256i lo, __m256i hi, const Q4Shared& s)
    {
        return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(s.offset, lo, s.xlo), hi, s.xhi);
    }
};

// ---- Q8_0 on 512-bit vectors: two blocks per instruction ------------------------------------------
// The hot spot of decoding Q8_0 models. Per row and block pair: two 32-byte weight loads joined
// into one zmm, one xor + one vpdpbusd (see Avx512VnniIsa), convert, times the pair's d_x, and
// an FMA with the pair's d_w (broadcast from the fp16 table into the two halves). About half the
// instructions of the 256-bit loop, which matters: at two threads the loop must keep up with
// ~40 GB/s of memory per core.

template <int R>
inline void q8_0RowsZmm(const uint8_t* const* rows, size_t ahead, const QuantizedX& q,
                        int64_t blocks, const float* fp16, float* out)
{
    const __m512i bias = _mm512_set1_epi8(-128);
    __m512 acc[R];
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) acc[j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
        const __m512i x = _mm512_load_si512(q.qs + b * 32);
        const __m512i offset =
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, x));
        const __m512 dx = _mm512_mask_broadcastss_ps(_mm512_set1_ps(q.d[b]), 0xff00,
                                                     _mm_load_ss(q.d + b + 1));
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const uint8_t* block = rows[j] + b * 34;
            // Block ends are 34 bytes apart: two prefetches per pair reach every line.
            _mm_prefetch(reinterpret_cast<const char*>(block + ahead + 67), _MM_HINT_T0);
            const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
            const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36));
            const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
            const __m512i sum = _mm512_dpbusd_epi32(offset, _mm512_xor_si512(w, bias), x);
            const __m512 dw = _mm512_mask_broadcastss_ps(_mm512_set1_ps(fp16[loadU16(block)]),
                                                         0xff00,
                                                         _mm_load_ss(fp16 + loadU16(block + 34)));
            acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), dx), dw, acc[j]);
        }
    }
    if (b < blocks) {  // an odd block count: the last block on 256 bits
        const auto x = Avx512VnniIsa::q8Shared(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32)));
        const __m256 dx = _mm256_broadcast_ss(q.d + b);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const uint8_t* block = rows[j] + b * 34;
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
            const __m256 sum =
                _mm256_mul_ps(_mm256_cvtepi32_ps(Avx512VnniIsa::q8Dot(w, x)), dx);
            const __m256 partial = _mm256_mul_ps(sum, _mm256_broadcast_ss(fp16 + loadU16(block)));
            acc[j] = _mm512_add_ps(acc[j], _mm512_zextps256_ps512(partial));
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) out[j] = _mm512_reduce_add_ps(acc[j]);
}

void matvecQ8_0Zmm(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const uint8_t* rows[4] = {rowPointer(w, r), rowPointer(w, r + 1), rowPointer(w, r + 2),
                                  rowPointer(w, r + 3)};
        q8_0RowsZmm<4>(rows, 4 * w.rowStride, in.q, blocks, fp16, y + r);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        q8_0RowsZmm<1>(rows, w.rowStride, in.q, blocks, fp16, y + r);
    }
}

// ---- float weight types: 16 values per step, 4 independent accumulators ------------------------

struct LoadF32 {
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
    }
};

struct LoadF16 {
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
    }
};

struct LoadBf16 {
    static __m512i widen(__m256i h) { return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16); }
    static __m512 load16(const uint8_t* row, int64_t c)
    {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
        return _mm512_castsi512_ps(widen(h));
    }
    static __m512 load16Masked(const uint8_t* row, int64_t c, __mmask16 m)
    {
        return _mm512_castsi512_ps(widen(_mm256_maskz_loadu_epi16(m, row + 2 * c)));
    }
};

template <class Load>
float dotRow(const uint8_t* row, const float* x, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 64 <= n; c += 64) {
        a0 = _mm512_fmadd_ps(Load::load16(row, c), _mm512_loadu_ps(x + c), a0);
        a1 = _mm512_fmadd_ps(Load::load16(row, c + 16), _mm512_loadu_ps(x + c + 16), a1);
        a2 = _mm512_fmadd_ps(Load::load16(row, c + 32), _mm512_loadu_ps(x + c + 32), a2);
        a3 = _mm512_fmadd_ps(Load::load16(row, c + 48), _mm512_loadu_ps(x + c + 48), a3);
    }
    for (; c + 16 <= n; c += 16)
        a0 = _mm512_fmadd_ps(Load::load16(row, c), _mm512_loadu_ps(x + c), a0);
    if (c < n) {  // masked tail: lanes past n load as zero
        const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1u);
        a1 = _mm512_fmadd_ps(Load::load16Masked(row, c, m), _mm512_maskz_loadu_ps(m, x + c), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <class Load>
void matvecFloat(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; ++r) y[r] = dotRow<Load>(rowPointer(w, r), in.x, w.cols);
}

// ---- helpers for attention and the bandwidth probe -------------------------------------------

float dotAvx512(const float* a, const float* b, int n)
{
    return dotRow<LoadF32>(reinterpret_cast<const uint8_t*>(a), b, n);
}

void axpyAvx512(float a, const float* x, float* y, int n)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 r = _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i));
        _mm512_storeu_ps(y + i, r);
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 r =
            _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

uint64_t readAllAvx512(const void* data, size_t bytes)
{
    const __m512i* p = static_cast<const __m512i*>(data);
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < bytes / 64; i += 4) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 3));
    }
    const __m512i s = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
    return static_cast<uint64_t>(_mm512_reduce_add_epi64(s));
}

}  // namespace

void fillAvx512Kernels(Kernels& k)
{
    k.set = CpuKernelSet::Avx512;
    k.matvec[static_cast<int>(DType::F32)] = matvecFloat<LoadF32>;
    k.matvec[static_cast<int>(DType::F16)] = matvecFloat<LoadF16>;
    k.matvec[static_cast<int>(DType::BF16)] = matvecFloat<LoadBf16>;
    k.matvec[static_cast<int>(DType::Q8_0)] = matvecQ8_0Zmm;
    k.matvec[static_cast<int>(DType::Q4_0)] = matvecQ4_0X86<Avx512VnniIsa>;
    k.quantizeQ8 = quantizeQ8X86;
    k.dot = dotAvx512;
    k.axpy = axpyAvx512;
    k.readAll = readAllAvx512;
}

}  // namespace spillway::gpu::cpu
