#pragma once
// The CPU backend: always built, the reference every other backend is compared with.
// Multi-threaded (a persistent worker pool) and vectorized (AVX2/FMA/F16C kernels chosen at run
// time; the binary still runs on any x86-64). What the rest of the program may use of it is in
// gpu/host.h; this folder is the backend's inside.

#include "gpu/device.h"
#include "gpu/host.h"
#include "gpu/sparse_format.h"

// (Everything it declared is public now: gpu/host.h. Code of this folder and the tests of the
// CPU backend keep including this header.)
