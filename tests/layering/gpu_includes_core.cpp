// Compiled as part of the gpu layer: must not see core/ headers.
#include "core/formats/gguf.h"
int layeringProbe() { return 0; }
