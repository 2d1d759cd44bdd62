// libFuzzer target: arbitrary bytes as the parts of a split GGUF. The input is cut at each
// "SPLITPRT" (at most 4 pieces); piece k is written as m-0000k-of-0000N.gguf (N pieces) in a
// folder of its own, and gguf::SplitFile::open is given the first part and the last. It must fail
// cleanly (one line naming a file of that folder) or give a model whose every tensor is in one
// part, once, lying inside that part's file, and whose parts are where their headers say.
// run_fuzz: -max_len=65536
// Seeds: corpus/fuzz_gguf_split/ (make_seeds.py: a tiny llama split as llama-gguf-split writes
// it, and near misses); the real split models of tests/data are too large to fuzz at speed.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/formats/gguf.h"
#include "core/formats/gguf_split.h"

namespace {

using namespace spillway;

constexpr std::string_view kSeparator = "SPLITPRT";
constexpr size_t kMaxParts = 4;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_gguf_split: %s\n", why.c_str());
    std::abort();
}

// One folder for all runs, on tmpfs where there is one, removed at exit. Never destroyed: the
// exit handler runs after the destructors of statics made before it was registered (a static
// std::string here was freed by then: the harness's own use-after-free, found by the first run).
const std::string& folder()
{
    static const std::string* const path = [] {
        auto* p = new std::string((std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp") +
                                  std::string("/fuzz-split-XXXXXX"));
        if (!::mkdtemp(p->data())) fail("mkdtemp failed");
        std::atexit([] { std::error_code ec; std::filesystem::remove_all(folder(), ec); });
        return p;
    }();
    return *path;
}

void check(const std::string& open)
{
    auto split = gguf::SplitFile::open(open);
    if (!split.ok()) {
        const std::string& m = split.error().message;
        if (m.rfind(folder() + "/", 0) != 0) fail("error does not name a part: " + m);
        if (m.find('\n') != std::string::npos) fail("error spans lines: " + m);
        return;
    }
    const gguf::SplitFile& s = **split;
    if (s.parts().empty()) fail("no parts");
    std::set<std::string_view> names;
    volatile uint64_t sink = 0;
    for (const gguf::PartTensor& t : s.tensors()) {
        if (t.part >= s.parts().size()) fail("tensor " + t.info->name + " in a part past the last");
        const gguf::File& f = *s.parts()[t.part];
        if (!names.insert(t.info->name).second) fail("tensor " + t.info->name + " twice");
        if (t.fileOffset < f.dataOffset() || t.fileOffset > f.fileSize() || t.info->bytes > f.fileSize() - t.fileOffset)
            fail("tensor " + t.info->name + " reaches past the end of its part");
        if (t.info->bytes > 0) sink = sink + t.info->data[0] + t.info->data[t.info->bytes - 1];
    }
    if (s.isSplit()) {
        for (size_t i = 0; i < s.parts().size(); ++i)
            if (s.parts()[i]->getInt(gguf::kSplitNo) != int64_t(i)) fail("part " + std::to_string(i) + " out of place");
        const auto count = s.meta().getInt(gguf::kSplitTensorsCount);
        if (count && uint64_t(*count) != s.tensors().size()) fail("split.tensors.count differs from the tensors held");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> pieces;
    size_t at = 0;
    while (pieces.size() + 1 < kMaxParts) {
        const size_t next = input.find(kSeparator, at);
        if (next == std::string_view::npos) break;
        pieces.push_back(input.substr(at, next - at));
        at = next + kSeparator.size();
    }
    pieces.push_back(input.substr(at));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(folder(), ec)) std::filesystem::remove(e.path(), ec);
    const int count = int(pieces.size());
    for (int i = 0; i < count; ++i) {
        std::ofstream out(gguf::splitPartPath(folder() + "/m", i + 1, count), std::ios::binary);
        out.write(pieces[size_t(i)].data(), std::streamsize(pieces[size_t(i)].size()));
        if (!out) fail("cannot write a part");
    }
    check(gguf::splitPartPath(folder() + "/m", 1, count));
    if (count > 1) check(gguf::splitPartPath(folder() + "/m", count, count));
    return 0;
}
