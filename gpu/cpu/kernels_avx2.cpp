// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; chosen at run time only on CPUs
// that have them). No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/exp_x86.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"
#include "gpu/cpu/kquant_blocks.h"

namespace spillway::gpu::cpu {

namespace {

// Integer dot products with maddubs (unsigned x signed bytes, pairs summed to int16) and madd
// (pairs of int16 summed to int32).
struct Avx2Isa {
    // Q8_0: the sign trick gives maddubs an unsigned operand: |w| times x carrying w's sign.
    // No int16 saturation: |w| <= 128 and |x| <= 127 give pairs <= 32512.
    struct Q8Shared {
        __m256i x;
    };
    static Q8Shared q8Shared(__m256i x) { return {x}; }
    static __m256i q8Dot(__m256i w, const Q8Shared& s)
    {
        const __m256i pairs =
            _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(s.x, w));
        return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    }

    // Q4_0: nibbles are unsigned already; pairs <= 2 * 15 * 127, two of them still fit int16.
    struct Q4Shared {
        __m256i xlo, xhi;
        __m256i offset;  // int32 lanes: 8 * (sum of the x values feeding that lane)
    };
    static Q4Shared q4Shared(__m256i xlo, __m256i xhi)
    {
        const __m256i eights = _mm256_set1_epi8(8);
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(eights, xlo),
                                               _mm256_maddubs_epi16(eights, xhi));
        return {xlo, xhi, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))};
    }
    static __m256i q4Dot(__m256i lo, __m256i hi, const Q4Shared& s)
    {
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, s.xlo),
                                               _mm256_maddubs_epi16(hi, s.xhi));
        return _mm256_sub_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), s.offset);
    }
};

// ---- float weight types: 8 values per step, 4 independent accumulators ------------------------

struct LoadF32 {
    static constexpr int kBytes = 4;  // per value
    static __m256 load8(const uint8_t* row, int64_t c)
    {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
    }
    static float load1(const uint8_t* row, int64_t c)
    {
        float v;
        __builtin_memcpy(&v, row + 4 * c, 4);
        return v;
    }
};

struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* row, int64_t c)
    {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    }
    static float load1(const uint8_t* row, int64_t c) { return _cvtsh_ss(loadU16(row + 2 * c)); }
};

struct LoadBf16 {
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* row, int64_t c)
    {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float load1(const uint8_t* row, int64_t c)
    {
        const uint32_t u = static_cast<uint32_t>(loadU16(row + 2 * c)) << 16;
        float v;
        __builtin_memcpy(&v, &u, 4);
        return v;
    }
};

// For the attention dots (short vectors, in cache): no prefetch.
template <class Load>
float dotRow(const uint8_t* row, const float* x, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
        a0 = _mm256_fmadd_ps(Load::load8(row, c), _mm256_loadu_ps(x + c), a0);
        a1 = _mm256_fmadd_ps(Load::load8(row, c + 8), _mm256_loadu_ps(x + c + 8), a1);
        a2 = _mm256_fmadd_ps(Load::load8(row, c + 16), _mm256_loadu_ps(x + c + 16), a2);
        a3 = _mm256_fmadd_ps(Load::load8(row, c + 24), _mm256_loadu_ps(x + c + 24), a3);
    }
    for (; c + 8 <= n; c += 8)
        a0 = _mm256_fmadd_ps(Load::load8(row, c), _mm256_loadu_ps(x + c), a0);
    float tail = 0.0f;
    for (; c < n; ++c) tail += Load::load1(row, c) * x[c];
    return hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// R rows at once, 16 values per step, so that each load of x serves R rows, and each row's
// prefetch running on into the same stream's row of the next group (`next` bytes on); see the
// AVX-512 version in kernels_avx512.cpp for the measurements behind both.
template <class Load, int R>
void dotRows(const uint8_t* const* rows, const float* x, int64_t n, float* out, size_t next)
{
    const size_t rowBytes = size_t(n) * Load::kBytes;
    __m256 acc[R][2];
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        const __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            if (Load::kBytes == 4 || (c & 31) == 0) {
                const size_t at = size_t(c) * Load::kBytes + kPrefetchAhead;
                prefetchLine(at < rowBytes ? rows[j] + at : rows[j] + next + (at - rowBytes));
            }
            acc[j][0] = _mm256_fmadd_ps(Load::load8(rows[j], c), x0, acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(Load::load8(rows[j], c + 8), x1, acc[j][1]);
        }
    }
    for (; c + 8 <= n; c += 8) {
        const __m256 xv = _mm256_loadu_ps(x + c);
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j)
            acc[j][0] = _mm256_fmadd_ps(Load::load8(rows[j], c), xv, acc[j][0]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) {
        float tail = 0.0f;
        for (int64_t k = c; k < n; ++k) tail += Load::load1(rows[j], k) * x[k];
        out[j] = hsum256(_mm256_add_ps(acc[j][0], acc[j][1])) + tail;
    }
}

template <class Load>
void matvecFloat(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    constexpr int R = 4;
    int64_t r = r0;
    for (; r + R <= r1; r += R) {
        const uint8_t* rows[R];
        for (int j = 0; j < R; ++j) rows[j] = rowPointer(w, r + j);
        dotRows<Load, R>(rows, in.x, w.cols, y + r, size_t(R) * w.rowStride);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        dotRows<Load, 1>(rows, in.x, w.cols, y + r, w.rowStride);
    }
}

// ---- helpers for attention and the bandwidth probe -------------------------------------------

float dotAvx2(const float* a, const float* b, int n)
{
    return dotRow<LoadF32>(reinterpret_cast<const uint8_t*>(a), b, n);
}

void axpyAvx2(float a, const float* x, float* y, int n)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 r = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
        _mm256_storeu_ps(y + i, r);
    }
    for (; i < n; ++i) y[i] += a * x[i];
}

uint64_t readAllAvx2(const void* data, size_t bytes)
{
    const __m256i* p = static_cast<const __m256i*>(data);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    __m256i s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (size_t i = 0; i < bytes / 32; i += 8) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + i));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + i + 1));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + i + 2));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + i + 3));
        s4 = _mm256_add_epi64(s4, _mm256_load_si256(p + i + 4));
        s5 = _mm256_add_epi64(s5, _mm256_load_si256(p + i + 5));
        s6 = _mm256_add_epi64(s6, _mm256_load_si256(p + i + 6));
        s7 = _mm256_add_epi64(s7, _mm256_load_si256(p + i + 7));
    }
    const __m256i s03 = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    const __m256i s47 = _mm256_add_epi64(_mm256_add_epi64(s4, s5), _mm256_add_epi64(s6, s7));
    const __m256i s = _mm256_add_epi64(s03, s47);
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return static_cast<uint64_t>(_mm_cvtsi128_si64(t)) ^
           static_cast<uint64_t>(_mm_extract_epi64(t, 1));
}

}  // namespace

// ---- rows to floats, for the prompt path's matrix products ----------------------------------

void dequantF16Avx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        int64_t c = 0;
        for (; c + 8 <= w.cols; c += 8)
            _mm256_storeu_ps(out + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c))));
        for (; c < w.cols; ++c) out[c] = _cvtsh_ss(loadU16(row + 2 * c));
    }
}

void dequantBf16Avx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        int64_t c = 0;
        for (; c + 8 <= w.cols; c += 8) {
            const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
            _mm256_storeu_ps(out + c, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        }
        for (; c < w.cols; ++c) {
            const uint32_t bits = uint32_t(loadU16(row + 2 * c)) << 16;
            std::memcpy(out + c, &bits, 4);
        }
    }
}

// 32 int8 values times d into out[0..32).
static inline void scaled32(const int8_t* q, float d, float* out)
{
    const __m256 vd = _mm256_set1_ps(d);
    for (int i = 0; i < 32; i += 8) {
        const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(v)));
    }
}

void dequantQ8_0Avx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / 32; ++b)
            scaled32(reinterpret_cast<const int8_t*>(row + b * 34 + 2), _cvtsh_ss(loadU16(row + b * 34)), out + b * 32);
    }
}

void dequantQ8_0ScalesLastAvx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / 32; ++b)
            scaled32(reinterpret_cast<const int8_t*>(row + b * 32), _cvtsh_ss(loadU16(row + w.cols + 2 * b)), out + b * 32);
    }
}

void dequantQ4_0Avx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / 32; ++b) {
            const uint8_t* block = row + b * 18;
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(loadU16(block)));
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
            const __m128i lo = _mm_sub_epi8(_mm_and_si128(packed, low), eight);                     // values 0..15
            const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), low), eight);  // values 16..31
            float* o = out + b * 32;
            for (int half = 0; half < 2; ++half) {
                const __m128i v = half ? hi : lo;
                _mm256_storeu_ps(o + 16 * half, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
                _mm256_storeu_ps(o + 16 * half + 8,
                                 _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))));
            }
        }
    }
}

// 32 unsigned byte codes q to floats: q * a - b, (a0, b0) for the first 16 and (a1, b1) for the
// rest (one FMA-rounded step: within an ulp of ggml's separate multiply and subtract).
static inline void affine32(__m256i q, float a0, float b0, float a1, float b1, float* out)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m256 A0 = _mm256_set1_ps(a0), B0 = _mm256_set1_ps(b0), A1 = _mm256_set1_ps(a1), B1 = _mm256_set1_ps(b1);
    auto eight = [](__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); };
    _mm256_storeu_ps(out, _mm256_fmsub_ps(eight(lo), A0, B0));
    _mm256_storeu_ps(out + 8, _mm256_fmsub_ps(eight(_mm_srli_si128(lo, 8)), A0, B0));
    _mm256_storeu_ps(out + 16, _mm256_fmsub_ps(eight(hi), A1, B1));
    _mm256_storeu_ps(out + 24, _mm256_fmsub_ps(eight(_mm_srli_si128(hi, 8)), A1, B1));
}

static inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Q4_K (withHigh false) and Q5_K: value = (d * scale) * q - dmin * min per 32-value sub-block
// (kquant_blocks.h has the layout).
template <bool withHigh>
void dequantQ4_5KAvx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    const __m256i nibble = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    constexpr int kBytes = withHigh ? 176 : 144;
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / kQK; ++b) {
            const uint8_t* block = row + b * kBytes;
            const uint8_t* nibbles = block + (withHigh ? 48 : 16);
            const float d = _cvtsh_ss(loadU16(block)), dmin = _cvtsh_ss(loadU16(block + 2));
            const __m256i high = withHigh ? load32(block + 16) : _mm256_setzero_si256();
            float* o = out + b * kQK;
            for (int c = 0; c < 4; ++c) {
                int sc0, m0, sc1, m1;
                kScaleMin(2 * c, block + 4, sc0, m0);
                kScaleMin(2 * c + 1, block + 4, sc1, m1);
                const __m256i q = load32(nibbles + 32 * c);
                __m256i lo = _mm256_and_si256(q, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
                if (withHigh) {
                    const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(high, s0), one), 4));
                    hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(high, s1), one), 4));
                }
                const float a0 = d * float(sc0), b0 = dmin * float(m0), a1 = d * float(sc1), b1 = dmin * float(m1);
                affine32(lo, a0, b0, a0, b0, o + 64 * c);
                affine32(hi, a1, b1, a1, b1, o + 64 * c + 32);
            }
        }
    }
}

// Q6_K: value = d * scale * (q - 32), q six bits from ql's nibble and two bits of qh.
void dequantQ6_KAvx2(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    const __m256i nibble = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(3);
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / kQK; ++b) {
            const uint8_t* block = row + b * 210;
            const float d = _cvtsh_ss(loadU16(block + 208));
            const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
            float* o = out + b * kQK;
            for (int h = 0; h < 2; ++h) {
                const __m256i ql0 = load32(block + 64 * h), ql1 = load32(block + 64 * h + 32), qh = load32(block + 128 + 32 * h);
                auto top = [&](int shift) {
                    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), two), 4);
                };
                const __m256i v[4] = {
                    _mm256_or_si256(_mm256_and_si256(ql0, nibble), top(0)),
                    _mm256_or_si256(_mm256_and_si256(ql1, nibble), top(2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble), top(4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble), top(6)),
                };
                for (int part = 0; part < 4; ++part) {
                    const float s0 = d * float(scales[8 * h + 2 * part]), s1 = d * float(scales[8 * h + 2 * part + 1]);
                    affine32(v[part], s0, 32.0f * s0, s1, 32.0f * s1, o + 128 * h + 32 * part);
                }
            }
        }
    }
}

// Q4_1 and Q5_0: 32-value blocks, decoded as getRow does (kquant_blocks.h).
template <int kBytes, void (*decode)(const uint8_t*, const float*, float*)>
void dequantBlocks32(const MatrixView& w, int64_t r0, int64_t r1, float* out)
{
    const float* table = fp16Table();
    for (int64_t r = r0; r < r1; ++r, out += w.cols) {
        const uint8_t* row = rowPointer(w, r);
        for (int64_t b = 0; b < w.cols / 32; ++b) decode(row + b * kBytes, table, out + b * 32);
    }
}

void fillAvx2Dequant(Kernels& k)
{
    k.dequant[static_cast<int>(DType::Q4_K)] = dequantQ4_5KAvx2<false>;
    k.dequant[static_cast<int>(DType::Q5_K)] = dequantQ4_5KAvx2<true>;
    k.dequant[static_cast<int>(DType::Q6_K)] = dequantQ6_KAvx2;
    k.dequant[static_cast<int>(DType::Q4_1)] = dequantBlocks32<20, decodeQ4_1>;
    k.dequant[static_cast<int>(DType::Q5_0)] = dequantBlocks32<22, decodeQ5_0>;
    k.dequant[static_cast<int>(DType::F16)] = dequantF16Avx2;
    k.dequant[static_cast<int>(DType::BF16)] = dequantBf16Avx2;
    k.dequant[static_cast<int>(DType::Q8_0)] = dequantQ8_0Avx2;
    k.dequant[static_cast<int>(DType::Q4_0)] = dequantQ4_0Avx2;
    k.dequantQ8_0ScalesLast = dequantQ8_0ScalesLastAvx2;
}

void fillAvx2Kernels(Kernels& k)
{
    fillAvx2Dequant(k);
    k.set = CpuKernelSet::Avx2;
    k.matvec[static_cast<int>(DType::F32)] = matvecFloat<LoadF32>;
    k.matvec[static_cast<int>(DType::F16)] = matvecFloat<LoadF16>;
    k.matvec[static_cast<int>(DType::BF16)] = matvecFloat<LoadBf16>;
    k.matvec[static_cast<int>(DType::Q8_0)] = matvecQ8_0X86<Avx2Isa>;
    k.matvecQ8_0ScalesLast = matvecQ8_0ScalesLastScalar;  // not reordered for this set
    k.matvec[static_cast<int>(DType::Q4_0)] = matvecQ4_0X86<Avx2Isa>;
    k.matvec[static_cast<int>(DType::BitmapSparse)] = matvecBitmapAvx2;
    k.quantizeQ8 = quantizeQ8X86;
    k.dot = dotAvx2;
    k.axpy = axpyAvx2;
    k.readAll = readAllAvx2;
    k.expSum = [](float* x, int n, float shift) { return expSumAvx2(x, n, shift); };
    k.swiglu = [](const float* g, const float* u, float* o, int n) { swigluAvx2(g, u, o, n); };
    k.packGemmX = packGemmXAvx2;
    k.gemmRows = gemmRowsAvx2;
}

}  // namespace spillway::gpu::cpu
