#include "core/engine/constraints.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/engine/chat_format.h"
#include "core/engine/reply_parser.h"
#include "core/grammar/gbnf.h"
#include "core/grammar/grammar.h"
#include "core/grammar/json_schema.h"
#include "core/runtime/generator.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::engine {

using json = nlohmann::ordered_json;  // properties in the schema's order
using grammar::Grammar;

Result<GrammarPtr> jsonGrammar(std::string_view schemaJson, bool strict)
{
    if (schemaJson.empty()) return std::make_shared<const Grammar>(grammar::jsonObjectGrammar());
    grammar::SchemaOptions options;
    options.strict = strict;
    auto g = grammar::jsonSchemaGrammar(schemaJson, options);
    if (!g) return g.error();
    return std::make_shared<const Grammar>(std::move(*g));
}

Result<GrammarPtr> gbnfGrammar(std::string_view text)
{
    auto g = grammar::parseGbnf(text);
    if (!g) return g.error();
    return std::make_shared<const Grammar>(std::move(*g));
}

Result<GrammarPtr> toolCallGrammar(const ToolSet& tools, std::string_view toolsJson, std::string_view forced, bool parallel)
{
    if (tools.syntax == ToolSyntax::None || tools.syntax == ToolSyntax::Harmony)
        return makeError(ErrorCode::InvalidArgument, std::string("a call cannot be required in the ") +
                                                     toolSyntaxName(tools.syntax) + " tool syntax yet");
    json list = json::parse(toolsJson.begin(), toolsJson.end(), nullptr, false);
    if (!list.is_array()) return makeError(ErrorCode::InvalidArgument, "the tools are not a JSON list");
    grammar::SchemaOptions lenient;
    lenient.strict = false;
    grammar::SchemaGrammar b(lenient);
    Grammar& g = b.grammar();
    // One alternative per function: its name, then its arguments by its parameters' schema.
    const int call = g.addRule("call");
    for (const json& t : list) {
        const json f = t.is_object() ? t.value("function", json::object()) : json::object();
        const std::string name = f.value("name", std::string());
        if (name.empty() || (!forced.empty() && name != forced)) continue;
        auto args = f.contains("parameters") ? b.schema(f["parameters"]) : Result<int>(b.anyObject());
        if (!args) return Error{args.error().code, "the parameters of '" + name + "': " + args.error().message};
        std::vector<Grammar::Symbol> seq;
        auto add = [&](std::string_view text) {
            for (Grammar::Symbol s : g.literal(text)) seq.push_back(s);
        };
        switch (tools.syntax) {
        case ToolSyntax::Tag:
        case ToolSyntax::Mistral:
            add("{\"name\": " + json(name).dump() + ", \"arguments\": ");
            seq.push_back(Grammar::rule(*args));
            add("}");
            break;
        case ToolSyntax::Llama3Json:
            add("{\"name\": " + json(name).dump() + ", \"parameters\": ");
            seq.push_back(Grammar::rule(*args));
            add("}");
            break;
        case ToolSyntax::DeepSeek:
            add("<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>");
            seq.push_back(Grammar::rule(*args));
            add("<｜tool▁call▁end｜>");
            break;
        case ToolSyntax::None:
        case ToolSyntax::Harmony: break;
        }
        g.addAlternative(call, seq);
    }
    if (g.alternativesOf(uint32_t(call)).empty())
        return makeError(ErrorCode::InvalidArgument, forced.empty() ? std::string("no tools to call")
                                                                    : "no tool is named '" + std::string(forced) + "'");
    const Grammar::Symbol ws = Grammar::rule(b.whitespace());
    // The whole answer: the calls in their markup, one or (parallel) more.
    std::vector<Grammar::Symbol> one, more;
    auto lit = [&](std::vector<Grammar::Symbol>& seq, std::string_view text) {
        for (Grammar::Symbol s : g.literal(text)) seq.push_back(s);
    };
    switch (tools.syntax) {
    case ToolSyntax::Tag:
        lit(one, "<tool_call>\n");
        one.push_back(Grammar::rule(call));
        lit(one, "\n</tool_call>");
        more = {ws};
        break;
    case ToolSyntax::Mistral:  // [TOOL_CALLS][{...}, {...}]
        lit(one, "[TOOL_CALLS][");
        one.push_back(Grammar::rule(call));
        break;
    case ToolSyntax::Llama3Json:
        one.push_back(Grammar::rule(call));
        lit(more, "; ");
        break;
    case ToolSyntax::DeepSeek:
        lit(one, "<｜tool▁calls▁begin｜>");
        one.push_back(Grammar::rule(call));
        break;
    case ToolSyntax::None:
    case ToolSyntax::Harmony: break;
    }
    // rest ::= (separator call-in-markup)* then the syntax's end.
    const int single = b.sequence(one);
    const int rest = g.addRule("more-calls");
    g.addAlternative(rest, {});
    if (parallel) {
        std::vector<Grammar::Symbol> next = more;
        if (tools.syntax == ToolSyntax::Mistral) lit(next, ", ");
        next.push_back(tools.syntax == ToolSyntax::Mistral || tools.syntax == ToolSyntax::DeepSeek ? Grammar::rule(call)
                                                                                                  : Grammar::rule(single));
        next.push_back(Grammar::rule(rest));
        g.addAlternative(rest, next);
    }
    std::vector<Grammar::Symbol> whole = {Grammar::rule(single), Grammar::rule(rest)};
    if (tools.syntax == ToolSyntax::Mistral) lit(whole, "]");
    if (tools.syntax == ToolSyntax::DeepSeek) lit(whole, "<｜tool▁calls▁end｜>");
    const int root = b.sequence(whole);
    Grammar out = b.take();
    out.root = root;
    return std::make_shared<const Grammar>(std::move(out));
}

VocabularyBytes vocabularyBytes(const Tokenizer& tokenizer, const ChatFormat& format)
{
    const Vocabulary& v = tokenizer.vocabulary();
    VocabularyBytes out;
    out.bytes.resize(v.tokens.size());
    out.ends.assign(v.tokens.size(), false);
    // A token's bytes as it reads inside a reply: after an ordinary token, not after BOS.
    int32_t ordinary = -1;
    for (size_t t = 0; t < v.tokens.size() && ordinary < 0; ++t)
        if (v.types[t] == TokenType::Normal && int32_t(t) != v.bos) ordinary = int32_t(t);
    const ToolSyntax syntax = format.tools("[]").syntax;
    for (size_t t = 0; t < v.tokens.size(); ++t) {
        const int32_t id = int32_t(t);
        if (v.types[t] == TokenType::Control) {
            const std::string& text = v.tokens[t];
            if (format.endsTurn(text) || id == v.eos || text == "<|return|>" || text == "<|call|>" || text == "<|end|>")
                out.ends[t] = true;
            else if (isToolMarker(syntax, text) || text == "<think>" || text == "</think>")
                out.bytes[t] = text;
        } else {
            out.bytes[t] = tokenizer.decodeToken(ordinary, id);
            if (format.endsTurn(out.bytes[t])) out.ends[t] = true;
        }
        if (id == v.eos) out.ends[t] = true;
        if (out.bytes[t] == "<think>") out.thinkOpen.push_back(id);
    }
    return out;
}

namespace {

class AnswerConstraint final : public TokenConstraint {
public:
    AnswerConstraint(GrammarPtr g, std::shared_ptr<const VocabularyBytes> v, const ReplyParser& parser)
        : m_vocabulary(std::move(v)),
          m_masker(g, m_vocabulary->bytes, m_vocabulary->ends),
          m_state(m_masker.idOf(grammar::GrammarState::start(*g))),
          m_parser(parser)
    {
    }

    bool allows(int32_t token) override
    {
        if (!m_parser.inAnswer()) return true;
        if (opensThinking(token)) return true;
        return m_masker.allows(m_state, token);
    }

    bool mask(std::span<float> logits) override
    {
        if (!m_parser.inAnswer()) return true;
        const std::vector<uint64_t> bits = m_masker.mask(m_state);
        bool any = false;
        for (size_t t = 0; t < logits.size(); ++t) {
            const bool allowed = t < bits.size() * 64 && ((bits[t >> 6] >> (t & 63)) & 1);
            if (allowed || opensThinking(int32_t(t))) any = true;
            else logits[t] = -std::numeric_limits<float>::infinity();
        }
        return any;
    }

    void accept(int32_t token) override
    {
        if (!m_parser.inAnswer() || opensThinking(token)) return;
        if (const int32_t next = m_masker.after(m_state, token); next >= 0) m_state = next;
    }

private:
    bool opensThinking(int32_t token) const
    {
        if (!m_parser.mayOpenThinking()) return false;
        for (int32_t t : m_vocabulary->thinkOpen)
            if (t == token) return true;
        return false;
    }

    std::shared_ptr<const VocabularyBytes> m_vocabulary;
    grammar::TokenMasker m_masker;
    int32_t m_state;  // interned in the masker
    const ReplyParser& m_parser;
};

class ReasoningBudget final : public TokenConstraint {
public:
    ReasoningBudget(int budget, std::vector<int32_t> close, std::unique_ptr<TokenConstraint> inner,
                    const ReplyParser& parser)
        : m_budget(std::max(0, budget)), m_close(std::move(close)), m_inner(std::move(inner)), m_parser(parser)
    {
    }

    bool allows(int32_t token) override
    {
        if (closing()) return token == m_close[m_written];
        return !m_inner || m_inner->allows(token);
    }

    bool mask(std::span<float> logits) override
    {
        if (closing()) {
            const int32_t only = m_close[m_written];
            for (size_t t = 0; t < logits.size(); ++t)
                if (int32_t(t) != only) logits[t] = -std::numeric_limits<float>::infinity();
            return size_t(only) < logits.size();
        }
        return !m_inner || m_inner->mask(logits);
    }

    void accept(int32_t token) override
    {
        if (closing()) {
            ++m_written;
            return;
        }
        if (m_parser.inThinkTags()) ++m_used;
        if (m_inner) m_inner->accept(token);
    }

private:
    // The budget is spent and the reasoning not yet closed (by the model, or by us).
    bool closing() const
    {
        return m_used >= m_budget && m_written < m_close.size() && (m_written > 0 || m_parser.inThinkTags());
    }

    int m_budget;
    int m_used = 0;  // reasoning tokens so far
    std::vector<int32_t> m_close;
    size_t m_written = 0;  // of m_close
    std::unique_ptr<TokenConstraint> m_inner;
    const ReplyParser& m_parser;
};

}  // namespace

std::unique_ptr<TokenConstraint> reasoningBudget(int budget, std::vector<int32_t> close,
                                                 std::unique_ptr<TokenConstraint> inner, const ReplyParser& parser)
{
    return std::make_unique<ReasoningBudget>(budget, std::move(close), std::move(inner), parser);
}

std::unique_ptr<TokenConstraint> answerConstraint(GrammarPtr grammar, std::shared_ptr<const VocabularyBytes> vocabulary,
                                                  const ReplyParser& parser)
{
    return std::make_unique<AnswerConstraint>(std::move(grammar), std::move(vocabulary), parser);
}

}  // namespace spillway::engine
