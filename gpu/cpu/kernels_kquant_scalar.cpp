// Baseline x86-64 kernels for ggml's Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and our Q8_G64 (layouts in
// kquant_blocks.h), and the two x quantizations they read. As in llama.cpp, the weights are never
// turned into floats: x is quantized (Q8 blocks of 32 for Q4_1 / Q5_0, blocks of 256 with 16-value
// sums for the K-quants, the thesis' groups of 64 for Q8_G64), each (sub-)block's dot product is
// an exact int32, and only the block scales are float. The AVX2 / AVX-512 kernels
// (kernels_kquant_x86.h) compute the same int32 sums and differ only in float rounding, except
// Q8_G64, whose float operations they reproduce bit for bit.

#include <cmath>
#include <cstring>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kquant_blocks.h"

namespace spillway::gpu::cpu {

// ---- x quantizations (shared by every set) ------------------------------------------------------
// Plain float operations only (no libm calls: at baseline x86-64 nearbyintf and roundf are
// calls, and these run once per matvec over all of x).

namespace {

// Round to nearest even, for |v| < 2^22: adding and subtracting 1.5 * 2^23 leaves the integer.
inline float roundEven(float v)
{
    constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
    return (rounded(v) + kMagic) - kMagic;
}

// C's roundf (half away from zero), for |v| < 2^31.
inline int roundAway(float v)
{
    const int t = static_cast<int>(v);  // toward zero
    const float rest = v - static_cast<float>(t);  // exact
    return rest >= 0.5f ? t + 1 : (rest <= -0.5f ? t - 1 : t);
}

}  // namespace

void quantizeQ8K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums)
{
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float amax = 0.0f;
        for (int i = 0; i < kQK; ++i) {
            const float a = std::fabs(xb[i]);
            amax = a > amax ? a : amax;
        }
        const float scale = amax / 127.0f;
        const float inverse = q8Inverse(scale);
        for (int g = 0; g < kQK / 16; ++g) {
            int sum = 0;
            for (int i = 16 * g; i < 16 * g + 16; ++i) {
                const int q = static_cast<int>(roundEven(xb[i] * inverse));
                qs[b * kQK + i] = static_cast<int8_t>(q);
                sum += q;
            }
            bsums[b * (kQK / 16) + g] = static_cast<int16_t>(sum);
        }
        d[b] = scale;
    }
}

// As the thesis' runtime: wmax by "if (val > wmax) wmax = val", scale = wmax / 127, q = (int8)
// roundf(x / scale) - a true division, as there.
void quantizeG64(const float* x, int64_t n, int8_t* qs, float* s)
{
    for (int64_t g = 0; g < n / 64; ++g) {
        const float* xg = x + g * 64;
        float wmax = 0.0f;
        for (int i = 0; i < 64; ++i) {
            const float v = std::fabs(xg[i]);
            wmax = v > wmax ? v : wmax;
        }
        const float scale = wmax / 127.0f;
        for (int i = 0; i < 64; ++i)
            qs[g * 64 + i] = scale != 0.0f ? static_cast<int8_t>(roundAway(xg[i] / scale)) : 0;
        s[g] = scale;
    }
}

namespace {

// ---- Q4_1: y += (d_w d_x) sum(q x) + m_w (d_x sum x) per block of 32 ---------------------------

void matvecQ4_1(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * 20;
            const int8_t* xq = in.q.qs + b * kQ8Block;
            int sum = 0;
            for (int i = 0; i < 16; ++i)
                sum += (block[4 + i] & 0x0f) * xq[i] + (block[4 + i] >> 4) * xq[i + 16];
            // sum8 / 8 = d_x * sum(q_x) exactly (a power-of-two scaling).
            acc += static_cast<float>(sum) * (fp16[loadU16(block)] * in.q.d[b]) +
                   fp16[loadU16(block + 2)] * (in.q.sum8[b] * 0.125f);
        }
        y[r] = acc;
    }
}

// ---- Q5_0: y += (d_w d_x) sum((q - 16) x) per block of 32 --------------------------------------

void matvecQ5_0(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * 22;
            uint32_t qh;
            std::memcpy(&qh, block + 2, 4);
            const int8_t* xq = in.q.qs + b * kQ8Block;
            int sum = 0;
            for (int i = 0; i < 16; ++i) {
                const int lo = (block[6 + i] & 0x0f) | (((qh >> i) & 1) << 4);
                const int hi = (block[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
                sum += (lo - 16) * xq[i] + (hi - 16) * xq[i + 16];
            }
            acc += static_cast<float>(sum) * (fp16[loadU16(block)] * in.q.d[b]);
        }
        y[r] = acc;
    }
}

// ---- Q4_K / Q5_K: per super-block, d d_x sum_j sc_j sum(q x) - dmin d_x sum_j m_j sum x -------

template <bool kHigh>
void matvecQ4_5K(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    constexpr int kBytes = kHigh ? 176 : 144;
    constexpr int kNibbles = kHigh ? 48 : 16;
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQK;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * kBytes;
            const uint8_t* nibbles = block + kNibbles;
            const uint8_t* high = block + 16;  // Q5_K only
            const int8_t* xq = in.k.qs + b * kQK;
            const int16_t* bsums = in.k.bsums + b * (kQK / 16);
            int scales[8], mins[8];
            kScalesMins(block + 4, scales, mins);
            int sumq = 0, summ = 0;
            for (int c = 0; c < 4; ++c) {
                int lo = 0, hi = 0;
                for (int l = 0; l < 32; ++l) {
                    const uint8_t q = nibbles[32 * c + l];
                    const int h0 = kHigh ? ((high[l] >> (2 * c)) & 1) << 4 : 0;
                    const int h1 = kHigh ? ((high[l] >> (2 * c + 1)) & 1) << 4 : 0;
                    lo += ((q & 0x0f) | h0) * xq[64 * c + l];
                    hi += ((q >> 4) | h1) * xq[64 * c + 32 + l];
                }
                sumq += scales[2 * c] * lo + scales[2 * c + 1] * hi;
                summ += mins[2 * c] * (bsums[4 * c] + bsums[4 * c + 1]) +
                        mins[2 * c + 1] * (bsums[4 * c + 2] + bsums[4 * c + 3]);
            }
            const float dx = in.k.d[b];
            acc += (fp16[loadU16(block)] * dx) * static_cast<float>(sumq) -
                   (fp16[loadU16(block + 2)] * dx) * static_cast<float>(summ);
        }
        y[r] = acc;
    }
}

// ---- Q6_K: per super-block, d d_x (sum_g scale_g sum(q x) - 32 sum_g scale_g sum x) -------------

void matvecQ6_K(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQK;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = row + b * 210;
            const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
            const int8_t* xq = in.k.qs + b * kQK;
            const int16_t* bsums = in.k.bsums + b * (kQK / 16);
            int sum = 0;
            // Values 128 h + 32 p + l (l < 32): low nibble (p < 2) or high nibble of
            // ql[64 h + 32 (p & 1) + l], bits 2p, 2p + 1 of qh[32 h + l]; group (16 values)
            // 8 h + 2 p + l / 16.
            for (int h = 0; h < 2; ++h)
                for (int p = 0; p < 4; ++p) {
                    const uint8_t* low = block + 64 * h + 32 * (p & 1);
                    const uint8_t* top = block + 128 + 32 * h;
                    const int lowShift = p < 2 ? 0 : 4, topShift = 2 * p;
                    for (int k = 0; k < 2; ++k) {
                        const int g = 8 * h + 2 * p + k;
                        int dot = 0;
                        for (int l = 16 * k; l < 16 * k + 16; ++l) {
                            const int q = ((low[l] >> lowShift) & 0x0f) |
                                          (((top[l] >> topShift) & 3) << 4);
                            dot += q * xq[128 * h + 32 * p + l];
                        }
                        sum += scales[g] * (dot - 32 * bsums[g]);
                    }
                }
            acc += (fp16[loadU16(block + 208)] * in.k.d[b]) * static_cast<float>(sum);
        }
        y[r] = acc;
    }
}

// ---- Q8_G64: the thesis' runtime, operation for operation ---------------------------------------
// val += ((float)(int32 group dot) * s_w) * s_x, groups in order; the vector sets give the same
// bits.

void matvecQ8_G64(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const int64_t groups = w.cols / 64;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        float val = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            const uint8_t* block = row + g * 68;
            const int8_t* wq = reinterpret_cast<const int8_t*>(block + 4);
            const int8_t* xq = in.g64.qs + g * 64;
            int32_t dot = 0;
            for (int i = 0; i < 64; ++i) dot += static_cast<int32_t>(wq[i]) * xq[i];
            val += rounded(static_cast<float>(dot) * fp32At(block) * in.g64.s[g]);
        }
        y[r] = val;
    }
}

}  // namespace

void fillScalarKQuantKernels(Kernels& k)
{
    k.matvec[static_cast<int>(DType::Q4_1)] = matvecQ4_1;
    k.matvec[static_cast<int>(DType::Q5_0)] = matvecQ5_0;
    k.matvec[static_cast<int>(DType::Q4_K)] = matvecQ4_5K<false>;
    k.matvec[static_cast<int>(DType::Q5_K)] = matvecQ4_5K<true>;
    k.matvec[static_cast<int>(DType::Q6_K)] = matvecQ6_K;
    k.matvec[static_cast<int>(DType::Q8_G64)] = matvecQ8_G64;
}

}  // namespace spillway::gpu::cpu
