// Control: core may include gpu/ and storage/ headers, so this must build.
#include "core/formats/gguf.h"
#include "gpu/device.h"
#include "storage/mapped_file.h"
int layeringProbe() { return 0; }
