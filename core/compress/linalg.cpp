#include "core/compress/linalg.h"

#include <cblas.h>

#include <climits>
#include <stdexcept>

#define SPILLWAY_LINALG_LANES 4  // the baseline set's kernels (SSE2) are defined here too
#define SPILLWAY_LINALG_SUFFIX Scalar
#include "core/compress/linalg_kernels.h"
#include "core/compress/sparse_gemv.h"  // activeSparseKernelSet: the CPU's set, or the one forced

namespace spillway::compress::linalg {

namespace {
int blasInt(int64_t v)
{
    if (v < 0 || v > INT_MAX) throw std::length_error("linalg::gemm: dimension out of range");
    return int(v);
}
}  // namespace

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (k == 0) {  // BLAS leaves C alone only for beta = 1; scale it as the contract says
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                blasInt(m), blasInt(n), blasInt(k), alpha, a, blasInt(lda), b, blasInt(ldb), beta, c,
                blasInt(ldc));
}

int threadCount()
{
    return openblas_get_num_threads();
}

ThreadScope::ThreadScope(int threads) : m_before(openblas_get_num_threads())
{
    if (threads > 0) openblas_set_num_threads(threads);
}

ThreadScope::~ThreadScope()
{
    openblas_set_num_threads(m_before);
}

void logisticResidual(float* z, const uint8_t* y, size_t count, float wPos)
{
    switch (activeSparseKernelSet()) {
    case gpu::CpuKernelSet::Avx512: detail::logisticResidualAvx512(z, y, count, wPos); return;
    case gpu::CpuKernelSet::Avx2: detail::logisticResidualAvx2(z, y, count, wPos); return;
    case gpu::CpuKernelSet::Scalar: break;
    }
    detail::logisticResidualScalar(z, y, count, wPos);
}

void matvec(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y)
{
    switch (activeSparseKernelSet()) {
    case gpu::CpuKernelSet::Avx512: detail::matvecAvx512(m, rows, cols, v, bias, y); return;
    case gpu::CpuKernelSet::Avx2: detail::matvecAvx2(m, rows, cols, v, bias, y); return;
    case gpu::CpuKernelSet::Scalar: break;
    }
    detail::matvecScalar(m, rows, cols, v, bias, y);
}

}  // namespace spillway::compress::linalg
