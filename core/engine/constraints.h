#pragma once
// Constrained decoding for front ends: the grammars of a response format (any JSON object, or
// the texts that validate against a JSON Schema) and of a forced tool call in the template's
// syntax, and the constraint a Conversation applies to its answer (ReplyOptions::grammar).
// The grammar applies to the answer only: a thinking model's reasoning before it is free, as
// is gpt-oss's analysis channel (core/grammar/grammar.h has the grammar and the mask).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/engine/tool_calls.h"

namespace spillway {
class Tokenizer;
class TokenConstraint;
namespace grammar { class Grammar; }
}

namespace spillway::engine {

class ChatFormat;
class ReplyParser;
using GrammarPtr = std::shared_ptr<const grammar::Grammar>;

// `schemaJson` "": any JSON object (response_format json_object). InvalidArgument for a schema
// that is not JSON, or (strict) that asks what is not supported, naming it.
Result<GrammarPtr> jsonGrammar(std::string_view schemaJson, bool strict = true);

// A GBNF grammar's text (llama.cpp's `grammar` field, --grammar-file: core/grammar/gbnf.h);
// InvalidArgument naming what is wrong and where.
Result<GrammarPtr> gbnfGrammar(std::string_view text);

// A call of one of the request's functions (of `forced` alone when it is not empty), in the
// syntax `tools` names (a JSON body for Tag), its arguments by their parameter schemas (what a
// schema asks that is not supported leaves the value constrained by its type); more than one
// where `parallel`. Unsupported for Harmony (gpt-oss's calls are not constrained yet) and None.
Result<GrammarPtr> toolCallGrammar(const ToolSet& tools, std::string_view toolsJson, std::string_view forced,
                                   bool parallel);

// The vocabulary as the reply parser reads it: each token's bytes (a control token's its
// markup text where it is markup, else "" and it ends the reply or never comes), the tokens
// that end the turn, and those that open the reasoning.
struct VocabularyBytes {
    std::vector<std::string> bytes;
    std::vector<bool> ends;
    std::vector<int32_t> thinkOpen;
};
VocabularyBytes vocabularyBytes(const Tokenizer& tokenizer, const ChatFormat& format);

// The constraint on the answer `parser` is reading: inactive while the parser is outside it.
std::unique_ptr<TokenConstraint> answerConstraint(GrammarPtr grammar, std::shared_ptr<const VocabularyBytes> vocabulary,
                                                  const ReplyParser& parser);

// A reasoning budget: once the reasoning of a ThinkTags reply `parser` reads has had `budget`
// tokens (0: none), the tokens of `close` (the text that ends it, "\n</think>\n\n") are the only
// ones allowed until they are all written; then the answer goes on under `inner` (null: free).
// Inactive for other markups.
std::unique_ptr<TokenConstraint> reasoningBudget(int budget, std::vector<int32_t> close,
                                                 std::unique_ptr<TokenConstraint> inner, const ReplyParser& parser);

}  // namespace spillway::engine
