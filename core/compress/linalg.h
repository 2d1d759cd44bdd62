#pragma once
// Dense float linear algebra for training on the CPU (the activation predictors of
// ffn_predictor.h) and for their per-token use: matrix products through OpenBLAS's SGEMM
// (multi-threaded, with the kernels for this CPU picked by the library at run time), and the
// logistic loss's elementwise step and a one-thread matvec, vectorized here (AVX2 or AVX-512
// where the CPU has them, chosen at run time).

#include <cstddef>
#include <cstdint>

namespace spillway::compress::linalg {

// C (m, n) = alpha op(A) op(B) + beta C, all row-major. op(A) is (m, k): A itself with lda >= k,
// or with transA the transpose of A (k, m), lda >= m; op(B) (k, n) likewise (ldb >= n, or >= k
// transposed); ldc >= n. The same shapes on the same CPU with the same thread count give the
// same bits; another thread count may change the last bits (OpenBLAS then blocks C otherwise).
// beta = 0: C is only written (it may hold anything before).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The threads gemm runs on now.
int threadCount();

// While alive, gemm runs on `threads` threads (0: leaves the count as it is); the count before
// comes back when it goes. The count is the process's: one scope at a time.
class ThreadScope {
public:
    explicit ThreadScope(int threads);
    ~ThreadScope();
    ThreadScope(const ThreadScope&) = delete;
    ThreadScope& operator=(const ThreadScope&) = delete;

private:
    int m_before = 0;
};

// The gradient of a weighted logistic loss with respect to the logits, in place: z[i] becomes
// sigmoid(z[i]) where y[i] == 0 and wPos * (sigmoid(z[i]) - 1) where y[i] != 0. The sigmoid is
// within 1e-6 (relative) of 1 / (1 + exp(-z)) for every finite z.
void logisticResidual(float* z, const uint8_t* y, size_t count, float wPos);

// y[i] = dot(row i of m, v), plus bias[i] where bias is given, for `rows` rows of `cols` floats
// (row-major, leading dimension cols). On the calling thread alone, vectorized (AVX2 / AVX-512
// at run time): the predictors' per-token work during decoding, where a GEMM library's own
// threads would compete with the decode's.
void matvec(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y);

namespace detail {
// The kernels behind logisticResidual and matvec, one per instruction set (tests compare them).
void logisticResidualScalar(float* z, const uint8_t* y, size_t count, float wPos);
void logisticResidualAvx2(float* z, const uint8_t* y, size_t count, float wPos);
void logisticResidualAvx512(float* z, const uint8_t* y, size_t count, float wPos);
void matvecScalar(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y);
void matvecAvx2(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y);
void matvecAvx512(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y);
}  // namespace detail

}  // namespace spillway::compress::linalg
