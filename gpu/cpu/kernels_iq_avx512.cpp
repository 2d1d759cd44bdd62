// The AVX-512 set's row kernels of the types of iq_expand.h.

#include "gpu/cpu/kernels_iq_x86.h"

namespace spillway::gpu::cpu {

void fillAvx512IqKernels(Kernels& k) { fillIqKernels<Avx512Dot>(k); }

}  // namespace spillway::gpu::cpu
