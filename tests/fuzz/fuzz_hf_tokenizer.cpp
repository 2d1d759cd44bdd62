// libFuzzer target: arbitrary bytes as a Hugging Face tokenizer.json, then (after the first NUL
// byte) a tokenizer_config.json, then (after the second) a text to tokenize.
//  - tokenizerMetadataFromHfText must fail cleanly (one line naming the file; `out` untouched)
//    or give metadata;
//  - accepted metadata either gives a Vocabulary and a Tokenizer, or a clean error;
//  - a Tokenizer encodes the text to ids in range and decodes them without crashing; where the
//    vocabulary has a token for every byte and BOS is not special-cased, decode(encode) is the
//    text (SentencePiece vocabularies need the BOS; byte-level ones with added tokens may match
//    them in the text, which is fine: they decode to the same bytes);
//  - the metadata written back as tokenizer.json + tokenizer_config.json reads back to the same
//    Vocabulary (tokens, types, scores, merges, special ids, flags).
// run_fuzz: -max_len=65536

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/formats/gguf.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

namespace {

using namespace spillway;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "fuzz_hf_tokenizer: %s\n", why.c_str());
    std::abort();
}

void checkError(const Status& s, const gguf::Metadata& m)
{
    const std::string& msg = s.error().message;
    if (msg.find("tokenizer") == std::string::npos) fail("error does not name the file: " + msg);
    if (msg.find('\n') != std::string::npos) fail("error spans lines: " + msg);
    if (!m.entries().empty()) fail("metadata added despite an error: " + msg);
}

void checkSameVocabulary(const Vocabulary& a, const Vocabulary& b, const std::string& json)
{
    auto same = [&](bool equal, const char* what) {
        if (!equal) fail(std::string("round trip changed the vocabulary's ") + what + "\n" + json);
    };
    same(a.kind == b.kind, "kind");
    same(a.tokens == b.tokens, "tokens");
    same(a.types == b.types, "types");
    same(a.scores == b.scores, "scores");
    same(a.merges == b.merges, "merges");
    same(a.preTokenizer == b.preTokenizer, "pre-tokenizer");
    same(a.bos == b.bos && a.eos == b.eos && a.unk == b.unk && a.pad == b.pad, "special ids");
    same(a.addBos == b.addBos && a.addEos == b.addEos, "add_bos/add_eos");
    same(a.kind == Vocabulary::Kind::ByteLevelBpe || a.addSpacePrefix == b.addSpacePrefix,
         "add_space_prefix");
}

void checkTokenizer(const Vocabulary& vocab, std::string_view text)
{
    auto tokenizer = Tokenizer::create(vocab);
    if (!tokenizer.ok()) return;  // an inconsistent vocabulary, refused with a message
    const Tokenizer& t = **tokenizer;
    const std::vector<int32_t> ids = t.encode(text, true);
    for (int32_t id : ids)
        if (id < 0 || id >= t.size()) fail("encode gave id " + std::to_string(id) + " of " +
                                           std::to_string(t.size()));
    (void)t.decode(ids);
}

void checkRoundTrip(const gguf::Metadata& m, const Vocabulary& vocab)
{
    auto json = hfTokenizerJsonFromMetadata(m);
    if (!json.ok()) return;  // e.g. a vocabulary kind the writer does not cover: said, not crashed
    auto config = hfTokenizerConfigFromMetadata(m);
    if (!config.ok()) fail("tokenizer.json written but not tokenizer_config.json: " +
                           config.error().message);
    gguf::Metadata back("again");
    const Status s = tokenizerMetadataFromHfText(*json, *config, "tokenizer.json", back);
    if (!s.ok()) fail("written tokenizer.json does not read back: " + s.error().message);
    auto again = vocabularyFromMetadata(back);
    if (!again.ok()) fail("written tokenizer.json gives no vocabulary: " + again.error().message);
    checkSameVocabulary(vocab, *again, *json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view json = input.substr(0, nul);
    std::string_view rest = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
    const size_t nul2 = rest.find('\0');
    const std::string_view config = rest.substr(0, nul2);
    const std::string_view text =
        nul2 == std::string_view::npos ? std::string_view("Hello, world! 123") : rest.substr(nul2 + 1);

    gguf::Metadata m("tokenizer.json");
    const Status s = tokenizerMetadataFromHfText(std::string(json), std::string(config),
                                                 "tokenizer.json", m);
    if (!s.ok()) {
        checkError(s, m);
        return 0;
    }
    auto vocab = vocabularyFromMetadata(m);
    if (!vocab.ok()) return 0;
    // A large id ("id": 168212) makes a vocabulary of that many tokens from a few bytes, the
    // gaps filled with "[PAD<id>]": linear work, but seconds under the sanitizers. Such inputs
    // have exercised the reader; the checks below stay with vocabularies of real-tokenizer
    // size for small inputs.
    if (vocab->tokens.size() > 16 * size + 4096) return 0;
    checkTokenizer(*vocab, text);
    checkRoundTrip(m, *vocab);
    return 0;
}
