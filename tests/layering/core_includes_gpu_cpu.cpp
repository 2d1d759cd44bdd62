// Compiled as part of core/runtime: the host CPU's public API is gpu/host.h; the CPU backend's
// inside (gpu/cpu/) must not be found.
#include "gpu/host.h"
#include "gpu/cpu/cpu_kernels.h"
int layeringProbe() { return 0; }
