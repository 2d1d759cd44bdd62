// The AVX2 set's row kernels of the types of iq_expand.h.

#include "gpu/cpu/kernels_iq_x86.h"

namespace spillway::gpu::cpu {

void fillAvx2IqKernels(Kernels& k) { fillIqKernels<Avx2Dot>(k); }

}  // namespace spillway::gpu::cpu
