// libFuzzer target: arbitrary bytes as a Hugging Face config.json (and, after the first NUL
// byte, a generation_config.json). metadataFromHfConfigText must fail cleanly (one line naming
// the file; `out` untouched) or give metadata that goes to config.json and back unchanged
// (hfConfigFromMetadata, hfGenerationConfigFromMetadata). The first line of the input is also
// tried as a tensor name: every name that maps one way must map back.
// run_fuzz: -max_len=16384

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/formats/gguf.h"
#include "core/formats/hf_config.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_hf_config: %s\n", why.c_str());
    std::abort();
}

void checkError(const Status& s, const gguf::Metadata& m)
{
    const std::string& msg = s.error().message;
    if (msg.rfind("config.json: ", 0) != 0 && msg.rfind("generation_config.json: ", 0) != 0)
        fail("error does not name the file: " + msg);
    if (msg.find('\n') != std::string::npos) fail("error spans lines: " + msg);
    if (!m.entries().empty()) fail("metadata added despite an error: " + msg);
}

void checkRoundTrip(const gguf::Metadata& m)
{
    const bool tied = m.getBool("spillway.tied_embeddings").value_or(false);
    auto config = hfConfigFromMetadata(m, tied);
    if (!config.ok()) fail("accepted config cannot be written back: " + config.error().message);
    auto generation = hfGenerationConfigFromMetadata(m);
    if (!generation.ok()) fail("generation_config.json not written: " + generation.error().message);
    gguf::Metadata back("again");
    const Status s = metadataFromHfConfigText(*config, "config.json", *generation,
                                              "generation_config.json", back);
    if (!s.ok())
        fail("written config.json does not read back: " + s.error().message + "\n" + *config);
    if (back.entries().size() != m.entries().size())
        fail("round trip changed the key count\n" + *config);
    for (const gguf::KeyValue& kv : m.entries()) {
        const gguf::Value* v = back.find(kv.key);
        if (!v || !(*v == kv.value)) fail("round trip changed '" + kv.key + "'\n" + *config);
    }
}

void checkTensorName(std::string_view name)
{
    for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "opt"}) {
        if (auto g = ggufTensorName(arch, name)) {
            auto h = hfTensorName(arch, *g);
            // OPT names without "model." come back with it.
            const bool shortOpt =
                std::string_view(arch) == "opt" && name.substr(0, 8) == "decoder.";
            if (!h || (*h != name && !(shortOpt && *h == "model." + std::string(name))))
                fail(std::string(arch) + ": '" + std::string(name) + "' -> '" + *g +
                     "' does not map back");
            (void)hfNeedsRopePermutation(arch, *g);
        }
        if (auto h = hfTensorName(arch, name)) {
            auto g = ggufTensorName(arch, *h);
            if (!g || *g != name)
                fail(std::string(arch) + ": GGUF name '" + std::string(name) +
                     "' does not map back");
        }
        (void)hfTensorIsSkipped(arch, name);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string config(input.substr(0, nul));
    const std::string generation(nul == std::string_view::npos ? std::string_view()
                                                                : input.substr(nul + 1));

    gguf::Metadata m("config.json");
    const Status s = metadataFromHfConfigText(config, "config.json", generation,
                                              "generation_config.json", m);
    if (!s.ok()) checkError(s, m);
    else checkRoundTrip(m);

    checkTensorName(input.substr(0, std::min(input.find('\n'), size_t(200))));
    return 0;
}
