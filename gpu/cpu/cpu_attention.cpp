// A prompt batch's attention as matrix products (Device::attentionBatch on the CPU).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "gpu/cpu/cpu_ops.h"
#include "gpu/half_inline.h"

namespace spillway::gpu::cpu {

namespace {

// Cached rows [0, nPos) of one KV head as floats (Q8: q times the row's scale), headDim apart.
void unpackKvHead(KvType type, const void* cache, const float* scales, int nPos, int nKvHeads, int kvHead,
                  int headDim, float* out)
{
    const size_t kvStride = static_cast<size_t>(nKvHeads) * headDim;
    for (int t = 0; t < nPos; ++t) {
        const size_t first = t * kvStride + static_cast<size_t>(kvHead) * headDim;
        float* row = out + static_cast<size_t>(t) * headDim;
        if (type == KvType::F16) {
            const uint16_t* h = static_cast<const uint16_t*>(cache) + first;
            for (int c = 0; c < headDim; ++c) row[c] = detail::halfToFloat(h[c]);
        } else {
            const int8_t* q = static_cast<const int8_t*>(cache) + first;
            const float d = scales[static_cast<size_t>(t) * nKvHeads + kvHead];
            for (int c = 0; c < headDim; ++c) row[c] = static_cast<float>(q[c]) * d;
        }
    }
}

}  // namespace

void attentionBatchOp(const AttentionArgs& a, int queries, size_t rowStride, ThreadPool& pool, Scratch* perThread)
{
    const size_t kvDim = static_cast<size_t>(a.nKvHeads) * a.headDim;
    if (a.kNew && a.vNew)
        for (int i = 0; i < queries; ++i) {
            AttentionArgs one = a;
            one.nPos = a.nPos - queries + 1 + i;
            one.kNew = a.kNew + i * kvDim;
            one.vNew = a.vNew + i * kvDim;
            storeKvOp(one);
        }
    const int firstPos = a.nPos - queries;  // query 0's position
    const int nPos = a.nPos, headDim = a.headDim, group = a.nHeads / a.nKvHeads;
    const bool f32 = a.kvType == KvType::F32;
    std::atomic<int> next{0};
    auto work = [&](int thread, int) {
        const size_t scoreFloats = static_cast<size_t>(queries) * nPos;
        const size_t headFloats = f32 ? 0 : static_cast<size_t>(nPos) * headDim;
        float* scores = perThread[thread].reserve<float>(scoreFloats + 2 * headFloats);
        float* keys = scores + scoreFloats;
        float* values = keys + headFloats;
        for (int h; (h = next.fetch_add(1, std::memory_order_relaxed)) < a.nHeads;) {
            const int kvHead = h / group;
            const float* k = keys;
            const float* v = values;
            size_t ld = static_cast<size_t>(headDim);
            if (f32) {
                k = static_cast<const float*>(a.kCache) + static_cast<size_t>(kvHead) * headDim;
                v = static_cast<const float*>(a.vCache) + static_cast<size_t>(kvHead) * headDim;
                ld = kvDim;
            } else {
                unpackKvHead(a.kvType, a.kCache, a.kScales, nPos, a.nKvHeads, kvHead, headDim, keys);
                unpackKvHead(a.kvType, a.vCache, a.vScales, nPos, a.nKvHeads, kvHead, headDim, values);
            }
            // S = scale * Q K^T (queries x nPos), then each row's softmax over the positions it
            // may see (as attentionOp: exponentials in float, their sum in double), the rest 0.
            const float* q = a.q + static_cast<size_t>(h) * headDim;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, queries, nPos, headDim, a.scale, q,
                        static_cast<blasint>(rowStride), k, static_cast<blasint>(ld), 0.0f, scores, nPos);
            for (int i = 0; i < queries; ++i) {
                float* row = scores + static_cast<size_t>(i) * nPos;
                const int visible = firstPos + i + 1;
                const float maxScore = *std::max_element(row, row + visible);
                double sum = 0.0;
                for (int t = 0; t < visible; ++t) {
                    row[t] = std::exp(row[t] - maxScore);
                    sum += row[t];
                }
                const float inverse = static_cast<float>(1.0 / sum);
                for (int t = 0; t < visible; ++t) row[t] *= inverse;
                std::fill(row + visible, row + nPos, 0.0f);
            }
            // O = P V (queries x headDim), straight into the queries' output rows.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, queries, headDim, nPos, 1.0f, scores, nPos, v,
                        static_cast<blasint>(ld), 0.0f, a.out + static_cast<size_t>(h) * headDim,
                        static_cast<blasint>(rowStride));
        }
    };
    const BlasOnThisThread single;
    pool.run(work);
}

}  // namespace spillway::gpu::cpu
