// Compiled as part of core/formats, which core/tokenizer uses: an include of a tokenizer header
// here would close a cycle (formats -> tokenizer -> formats), so it must not be found.
#include "core/formats/gguf.h"
#include "core/tokenizer/tokenizer.h"
int layeringProbe() { return 0; }
