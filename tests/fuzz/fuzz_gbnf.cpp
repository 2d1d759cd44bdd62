// libFuzzer target: arbitrary bytes as a GBNF grammar (llama.cpp's `grammar` field, --grammar-file).
// parseGbnf must refuse cleanly (a message with the line and column, or the rule at fault) or
// give a grammar whose states take any bytes without crashing, stay bounded, and agree with
// themselves (a byte refused leaves the state as it was).
// run_fuzz: -max_len=4096

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/grammar/gbnf.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_gbnf: %s\n", why.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    // The grammar, then (after the first NUL, if any) a text to run through it.
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const size_t nul = all.find('\0');
    const std::string_view text = all.substr(0, nul);
    // At most 256 bytes of it: a state's cost per byte is bounded (grammar.cpp's guards), not free.
    const std::string_view input =
        nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1, std::min<size_t>(256, size - nul - 1));
    auto g = grammar::parseGbnf(text);
    if (!g) {
        if (g.error().message.empty()) fail("an empty message");
        return 0;
    }
    if (g->root < 0 || g->root >= g->ruleCount()) fail("the root is no rule");
    grammar::GrammarState s = grammar::GrammarState::start(*g);
    for (char c : input) {
        const std::string before = s.key();
        if (!s.advance(*g, uint8_t(c))) {
            if (s.key() != before) fail("a refused byte changed the state");
            break;
        }
        if (s.stacks().size() > 4097) fail("a state of more than 4097 stacks");
    }
    (void)s.accepting();
    return 0;
}
