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

// vpdpbusd multiplies unsigned by signed bytes and adds groups of 4 into int32 lanes, without
// the int16 saturation of maddubs. Signed weights take the sign trick: |w| times x with w's sign.
struct Avx512VnniIsa {
    static __m256i dotI8(__m256i w, __m256i x)
    {
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w),
                                   _mm256_sign_epi8(x, w));
    }
    static __m256i dotU8I8(__m256i u, __m256i x)
    {
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
    }
};

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
    k.matvec[static_cast<int>(DType::Q8_0)] = matvecQ8_0X86<Avx512VnniIsa>;
    k.matvec[static_cast<int>(DType::Q4_0)] = matvecQ4_0X86<Avx512VnniIsa>;
    k.quantizeQ8 = quantizeQ8X86;
    k.dot = dotAvx512;
    k.axpy = axpyAvx512;
    k.readAll = readAllAvx512;
}

}  // namespace spillway::gpu::cpu
