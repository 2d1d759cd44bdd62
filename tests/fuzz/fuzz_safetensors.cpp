// libFuzzer target: arbitrary bytes as a .safetensors file. File::open must fail cleanly (a
// message naming the file) or give tensors that each lie inside the data section, at the size
// their dtype and shape call for, without overlapping.
// run_fuzz: -max_len=65536

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "core/formats/safetensors.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_safetensors: %s\n", why.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static const std::string path = [] {
        char tmpl[] = "/tmp/fuzz_safetensors-XXXXXX";
        const char* d = mkdtemp(tmpl);
        if (!d) fail("no temp dir");
        return std::string(d) + "/model.safetensors";
    }();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fail("cannot write " + path);
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
    auto file = safetensors::File::open(path);
    if (!file) {
        if (file.error().message.find(path) == std::string::npos) fail("message names no file: " + file.error().message);
        return 0;
    }
    volatile uint64_t sink = 0;
    uint64_t lastEnd = file->dataOffset();
    for (const safetensors::Tensor& t : file->tensors()) {  // in data-offset order
        const auto* info = safetensors::dtypeInfo(t.dtypeName);
        if (!info) fail("tensor " + t.name + " has an unknown dtype");
        if (uint64_t(t.elements()) * uint64_t(info->bits) != t.bytes * 8 && info->bits % 8 == 0)
            fail("tensor " + t.name + ": bytes do not match its shape");
        if (t.fileOffset < lastEnd || t.fileOffset + t.bytes > size) fail("tensor " + t.name + " overlaps or reaches past the end");
        lastEnd = t.fileOffset + t.bytes;
        if (t.bytes) sink = sink + t.data[0] + t.data[t.bytes - 1];
    }
    return 0;
}
