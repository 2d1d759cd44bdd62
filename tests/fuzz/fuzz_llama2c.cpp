// libFuzzer target: a llama2.c checkpoint and its tokenizer.bin from arbitrary bytes. The first
// byte picks the architecture (bit 0: llama / relu-llama) and the tokenizer's form (bit 1:
// tokenizer.bin / a decode<vocab>.tok table), the next 4 (little-endian) where the checkpoint
// ends and the tokenizer begins. importCheckpoint must fail cleanly (a message that
// names a file) or give a tensor table whose every tensor lies inside its file or buffer at the
// size its type and shape call for.
// run_fuzz: -max_len=65536

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "core/formats/llama2c.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_llama2c: %s\n", why.c_str());
    std::abort();
}

std::string writeTemp(const char* name, const uint8_t* data, size_t size)
{
    static const std::string dir = [] {
        char tmpl[] = "/tmp/fuzz_llama2c-XXXXXX";
        const char* d = mkdtemp(tmpl);
        if (!d) fail("no temp dir");
        return std::string(d);
    }();
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fail("cannot write " + path);
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size < 5) return 0;
    const bool relu = data[0] & 1;
    const bool table = data[0] & 2;
    uint32_t split;
    std::memcpy(&split, data + 1, 4);
    const size_t rest = size - 5;
    const size_t n = rest ? split % (rest + 1) : 0;
    const std::string model = writeTemp("model.bin", data + 5, n);
    const std::string tokenizer = writeTemp(table ? "decode.tok" : "tokenizer.bin", data + 5 + n, rest - n);
    (void)llama2c::looksLikeCheckpoint(model);
    llama2c::ImportOptions o;
    o.architecture = relu ? "relu-llama" : "llama";
    o.tokenizerPath = tokenizer;
    auto imported = llama2c::importCheckpoint(model, o);
    if (!imported) {
        const std::string& msg = imported.error().message;
        if (msg.find(model) == std::string::npos && msg.find(tokenizer) == std::string::npos)
            fail("message names no file: " + msg);
        return 0;
    }
    volatile uint64_t sink = 0;
    for (const ModelTensor& t : (*imported)->tensors) {
        uint64_t elements = 1;
        for (int64_t d : t.dims) elements *= uint64_t(d);
        const auto& tr = gpu::dtypeTraits(t.type);
        if (elements % uint64_t(tr.blockSize) != 0 || elements / uint64_t(tr.blockSize) * uint64_t(tr.blockBytes) != t.bytes)
            fail("tensor " + t.name + ": bytes do not match its shape");
        if (t.file != kInMemoryTensor && t.fileOffset + t.bytes > n) fail("tensor " + t.name + " reaches past the file");
        if (t.bytes) sink = sink + t.data[0] + t.data[t.bytes - 1];  // ASan checks the ends
    }
    return 0;
}
