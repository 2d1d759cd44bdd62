#pragma once
// Pruning of linear weights (ENDOR §5.1 prunes with Wanda; Sun et al. 2023, "A Simple and
// Effective Pruning Approach for Large Language Models"):
//   - unstructured: zero the lowest-scoring `ratio` fraction of every row;
//   - N:M (e.g. 2:4): in every run of m consecutive weights of a row keep the n best-scoring.
// The score of weight W[i, j] is |W[i, j]| (magnitude pruning) or |W[i, j]| * ||X_j||_2 (Wanda),
// where ||X_j||_2 is the L2 norm of input feature j over a calibration set
// (collectActivationNorms, calibrate/prune_calibration.h).
//
// Comparison group: one output row. A (rows, cols) matrix computes y = W x, so row i holds the
// weights that feed output i; Wanda (§3, "per output") and ENDOR compare weights only within a
// row, which keeps every output's sparsity equal (and the bitmap sparse rows equally long).
//
// Determinism: scores are compared in double precision; on equal scores the weight with the
// lower column index is kept. Both rules are exact: the number of zeros they make is a function
// of the shape alone (see each function), never of the values.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/device.h"

namespace spillway {
class LlamaModel;
}

namespace spillway::compress {

// Unstructured pruning of w: (rows, cols) row-major, finite. In each row the
// k = floor(ratio * cols + 1e-9) lowest-scoring weights are set to 0 (ratio in [0, 1]; rounding
// down so a ratio never prunes more than asked; the 1e-9 absorbs products a double cannot hold,
// e.g. 0.29 * 100 = 28.999999999999996 gives 29). A row that already held more than cols - k zeros
// keeps them, so it ends with at least k zeros; a row of non-zeros ends with exactly k.
// columnNorms: nullptr (magnitude), or cols finite values >= 0 (Wanda).
// InvalidArgument for a bad shape or ratio, or non-finite w / norms (w is then unchanged).
Status pruneMagnitude(float* w, int64_t rows, int64_t cols, double ratio,
                      const float* columnNorms = nullptr);

// N:M pruning (0 <= n <= m, m >= 1) of w: (rows, cols). Groups are columns [g*m, g*m + m) of a
// row; each keeps its n best-scoring weights and zeroes the other m - n. Tail rule, when cols is
// not a multiple of m: the last group of t = cols % m weights keeps its min(n, t) best, i.e. the
// row is treated as zero-padded to a multiple of m and the padded group obeys n:m too.
// columnNorms as for pruneMagnitude.
Status pruneNM(float* w, int64_t rows, int64_t cols, int n, int m,
               const float* columnNorms = nullptr);

// A weight matrix of the model that a matvec multiplies, named as in the GGUF file.
struct NamedMatrix {
    std::string name;   // "blk.3.attn_q.weight", ..., "output.weight"
    gpu::MatrixView view;
    bool head = false;  // the output head (the token embedding itself when tied); Wanda and
                        // ENDOR leave it dense
};

// Every matvec weight of `model`: per layer attn_q, attn_k, attn_v, attn_output, ffn_gate,
// ffn_up, ffn_down, then the output head ("token_embd.weight" when tied to the embedding).
std::vector<NamedMatrix> linearMatrices(const LlamaModel& model);

// Wanda's input statistics: matrix name -> ||X_j||_2 for each input column j (cols values),
// the square root of the sum of x_j^2 over every calibration token that reached the matrix.
using ActivationNorms = std::map<std::string, std::vector<float>>;

// The matrix as (rows, cols) row-major floats, from F32, F16, BF16, Q8_0 or Q4_0 storage
// (the layouts of gpu/dtype.h); exact for every type (each stored value is an fp32 value).
// InvalidArgument for a null view or a cols that is not a multiple of the type's block size.
Result<std::vector<float>> denseRowsF32(const gpu::MatrixView& view);
// The same into `out` (resized; its memory reused when it is large enough).
Status denseRowsF32(const gpu::MatrixView& view, std::vector<float>& out);

}  // namespace spillway::compress
