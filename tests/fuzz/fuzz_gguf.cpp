// libFuzzer target: arbitrary bytes as a GGUF file. gguf::File::open must fail cleanly (an Error
// naming the file, one line) or give a File whose every tensor lies inside the file with the
// size its type and dims call for; the metadata is then walked, turned into JSON and into a
// config.json, as the importers and the package writer would.
// run_fuzz: -max_len=65536
// run_fuzz seeds: tests/data/models/*.gguf tests/data/models/moe/*.gguf

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/formats/gguf.h"
#include "core/formats/hf_config.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_gguf: %s\n", why.c_str());
    std::abort();
}

// One memory file for all runs: no disk I/O, and a path that File::open can map.
const std::string& memoryFilePath()
{
    static const std::string path = [] {
        const int fd = ::memfd_create("fuzz.gguf", 0);
        if (fd < 0) fail("memfd_create failed");
        return "/proc/self/fd/" + std::to_string(fd);
    }();
    return path;
}

void writeMemoryFile(const uint8_t* data, size_t size)
{
    const int fd = std::stoi(memoryFilePath().substr(14));
    if (::ftruncate(fd, 0) != 0) fail("ftruncate failed");
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pwrite(fd, data + done, size - done, off_t(done));
        if (n <= 0) fail("pwrite failed");
        done += size_t(n);
    }
}

uint64_t walk(const gguf::Value& v)
{
    uint64_t h = uint64_t(v.type);
    if (auto i = v.asInt()) h += uint64_t(*i);
    if (auto f = v.asFloat()) h += uint64_t(*f == *f);
    if (const std::string* s = v.asString()) h += s->size();
    if (const gguf::Array* a = v.asArray())
        for (const gguf::Value& e : a->values) h += walk(e);
    return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string& path = memoryFilePath();
    writeMemoryFile(data, size);
    auto opened = gguf::File::open(path);
    if (!opened.ok()) {
        const std::string& m = opened.error().message;
        if (m.rfind(path + ": ", 0) != 0) fail("error does not name the file: " + m);
        if (m.find('\n') != std::string::npos) fail("error spans lines: " + m);
        return 0;
    }
    const gguf::File& f = **opened;
    volatile uint64_t sink = 0;
    for (const gguf::KeyValue& kv : f.metadata()) {
        if (f.find(kv.key) != &kv.value) fail("find() misses key " + kv.key);
        sink = sink + walk(kv.value);
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        if (f.tensor(t.name) != &t) fail("tensor() misses " + t.name);
        const gguf::GgmlTypeInfo* info = gguf::ggmlTypeInfo(t.ggmlType);
        if (!info) fail("tensor " + t.name + " has an unknown type");
        const int64_t n = t.elements();
        if (n < 0 || n % info->blockSize != 0 ||
            uint64_t(n / info->blockSize) * uint64_t(info->blockBytes) != t.bytes)
            fail("tensor " + t.name + ": size does not match dims and type");
        if (t.offset > f.fileSize() || f.dataOffset() > f.fileSize() - t.offset ||
            t.bytes > f.fileSize() - t.offset - f.dataOffset())
            fail("tensor " + t.name + " reaches past the end of the file");
        sink = sink + uint64_t(t.rows()) + uint64_t(t.cols());
        if (t.bytes > 0) sink = sink + t.data[0] + t.data[t.bytes - 1];  // ASan checks the ends
    }
    // Strings that are not UTF-8 (a GGUF string is any bytes) are replaced, never thrown on
    // (regression_* seed: general.name = "\x8c").
    sink = sink + gguf::metadataToJson(f.meta(), [](std::string_view) { return true; }).size();
    auto config = hfConfigFromMetadata(f.meta(), f.tensor("output.weight") == nullptr);
    if (config.ok()) sink = sink + config->size();
    return 0;
}
