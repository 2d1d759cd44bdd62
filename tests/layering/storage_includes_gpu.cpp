// Compiled as part of the storage layer: must not see gpu/ headers.
#include "gpu/device.h"
int layeringProbe() { return 0; }
