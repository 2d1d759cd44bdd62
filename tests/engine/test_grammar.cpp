// Constrained decoding (core/grammar, core/engine/constraints.h): JSON Schema grammars accept
// what validates and nothing else, the cached token mask equals checking every token, and
// replies of the real stories260K under a schema, a forced tool call and json_object parse.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/engine/constraints.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/grammar/gbnf.h"
#include "core/grammar/grammar.h"
#include "core/grammar/json_schema.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/registry.h"

using namespace spillway;
using grammar::GrammarState;
using nlohmann::json;

namespace {

bool matches(const grammar::Grammar& g, std::string_view text)
{
    GrammarState s = GrammarState::start(g);
    for (char c : text)
        if (!s.advance(g, uint8_t(c))) return false;
    return s.accepting();
}

grammar::Grammar compiled(const std::string& schema)
{
    auto g = grammar::jsonSchemaGrammar(schema);
    EXPECT_TRUE(g) << g.error().message;
    return g ? std::move(*g) : grammar::jsonObjectGrammar();
}

const char* const kOrder = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "size": {"enum": ["small", "large", 3]},
    "tags": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["integer", "null"]}},
                "required": ["city"]},
    "ok": {"type": "boolean"}},
  "required": ["name", "tags"]})";

// A small validator for the schemas these tests use (type, properties, required, enum, items,
// minItems, maxItems, maxLength), independent of the grammar.
bool validates(const json& v, const json& s)
{
    if (s.contains("enum")) {
        for (const json& e : s["enum"])
            if (e == v) return true;
        return false;
    }
    if (s.contains("type")) {
        const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
        bool any = false;
        for (const json& t : types) {
            const std::string n = t.get<std::string>();
            any = any || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
                  (n == "string" && v.is_string()) || (n == "integer" && v.is_number_integer()) ||
                  (n == "number" && v.is_number()) || (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null());
        }
        if (!any) return false;
    }
    if (v.is_string() && s.contains("maxLength") && v.get<std::string>().size() > s["maxLength"].get<size_t>() * 4)
        return false;
    if (v.is_object()) {
        for (const json& r : s.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            if (!s.contains("properties")) continue;
            if (!s["properties"].contains(k)) return false;
            if (!validates(x, s["properties"][k])) return false;
        }
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
        for (const json& x : v)
            if (s.contains("items") && !validates(x, s["items"])) return false;
    }
    return true;
}

}  // namespace

TEST(Grammar, ASchemaAcceptsWhatValidatesAndNothingElse)
{
    const grammar::Grammar g = compiled(kOrder);
    for (const char* good : {
             R"({"name": "Ann", "tags": [1]})",
             R"({"name":"Bo","size":"large","tags":[1,-20,3],"address":{"city":"Oslo","zip":null},"ok":true})",
             R"(  {"name": "\u00e9\n", "size": 3, "tags": [0], "address": {"city": "Zürich", "zip": 8001}} )",
             "{\n  \"name\": \"x\",\n  \"tags\": [\n    7\n  ]\n}"}) {
        EXPECT_TRUE(matches(g, good)) << good;
        EXPECT_TRUE(validates(json::parse(good), json::parse(kOrder))) << good;
    }
    for (const char* bad : {
             R"({"tags": [1]})",                                   // name is required
             R"({"name": "Ann"})",                                 // so are the tags
             R"({"name": "Ann", "tags": []})",                     // minItems 1
             R"({"name": "Ann", "tags": [1, 2, 3, 4]})",           // maxItems 3
             R"({"name": "Ann", "tags": [1.5]})",                  // integers
             R"({"name": "Ann", "size": "medium", "tags": [1]})",  // not in the enum
             R"({"name": "Ann", "tags": [1], "extra": 1})",        // no other properties
             R"({"name": "Ann", "tags": [1], "address": {}})",     // city is required
             R"({"name": "Thirteen chars", "tags": [1]})",         // maxLength 12
             R"({"tags": [1], "name": "Ann"})",                    // the schema's order
             R"({"name": "Ann", "tags": [01]})",                   // no leading zeros
             R"({"name": "Ann", "tags": [1]} x)", "{\"name\": \"a\tb\", \"tags\": [1]}", "\xff"}) {
        EXPECT_FALSE(matches(g, bad)) << bad;
    }
    // $ref, recursion, anyOf, const, and any JSON object.
    const grammar::Grammar tree = compiled(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
        "properties": {"v": {"anyOf": [{"type": "number"}, {"const": "leaf"}]},
                       "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}})");
    EXPECT_TRUE(matches(tree, R"({"v": 1.5e3, "kids": [{"v": "leaf"}, {"v": -2, "kids": []}]})"));
    EXPECT_FALSE(matches(tree, R"({"v": "tree"})"));
    const grammar::Grammar any = grammar::jsonObjectGrammar();
    EXPECT_TRUE(matches(any, R"({"a": [1, {"b": null}], "c": "d"})"));
    EXPECT_FALSE(matches(any, "[1]"));
    EXPECT_FALSE(matches(any, R"({"a": })"));
}

TEST(Grammar, WhatIsNotSupportedIsRefusedByName)
{
    for (const auto& [schema, named] : std::vector<std::pair<std::string, std::string>>{
             {R"({"type": "string", "pattern": "^a+$"})", "'pattern'"},
             {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}})", "'minimum' at /properties/n"},
             {R"({"allOf": [{"type": "string"}]})", "'allOf'"},
             {R"({"$ref": "https://example.com/s.json"})", "'$ref' https://example.com/s.json"},
             {R"({"type": "decimal"})", "type 'decimal'"},
             {"{not json", "not valid JSON"}}) {
        auto g = grammar::jsonSchemaGrammar(schema);
        ASSERT_FALSE(g) << schema;
        EXPECT_NE(g.error().message.find(named), std::string::npos) << g.error().message;
    }
    // Lenient (a tool's parameters): the value is constrained by its type alone.
    grammar::SchemaOptions lenient;
    lenient.strict = false;
    auto g = grammar::jsonSchemaGrammar(R"({"type": "integer", "minimum": 3})", lenient);
    ASSERT_TRUE(g);
    EXPECT_TRUE(matches(*g, "1"));
    EXPECT_FALSE(matches(*g, "\"1\""));
}

// The mask the masker keeps by stack top equals asking every token, at every step of texts
// that validate (and the tokens cut the texts at every point).
TEST(Grammar, TheCachedMaskEqualsCheckingEveryToken)
{
    auto g = std::make_shared<const grammar::Grammar>(compiled(kOrder));
    std::mt19937 rng(7);
    const std::string alphabet = "{}[]\":, \n0123456789-.aeOnrstluxyz\\\xc3\xa9";
    std::vector<std::string> tokens = {"{\"", "\"name\"", "\": \"", "\", \"", "tags", "\":[", "],", "}", "\",", " \"",
                                       "true", "null", "12", "\"small\"", "\"size\"", "Oslo", "\\n", "\\u00"};
    while (tokens.size() < 3000) {
        std::string t;
        for (int n = 1 + int(rng() % 5); n > 0; --n) t += alphabet[rng() % alphabet.size()];
        tokens.push_back(t);
    }
    tokens.push_back("");  // an end token
    std::vector<bool> ends(tokens.size(), false);
    ends.back() = true;
    grammar::TokenMasker masker(g, tokens, ends);
    for (const std::string text : {R"({"name":"Ol\n","size":"small","tags":[12,-3],"address":{"city":"x","zip":null}})",
                                   "{ \"name\": \"\xc3\xa9t\\u00e9\", \"tags\": [ 0 ] }"}) {
        GrammarState s = GrammarState::start(*g);
        for (size_t i = 0; i <= text.size(); ++i) {
            const std::vector<uint64_t> bits = masker.mask(s);
            for (size_t t = 0; t < tokens.size(); ++t) {
                const bool inMask = (bits[t >> 6] >> (t & 63)) & 1;
                ASSERT_EQ(inMask, masker.allows(s, int32_t(t))) << "after " << text.substr(0, i) << " token '" << tokens[t] << "'";
            }
            if (i < text.size()) ASSERT_TRUE(s.advance(*g, uint8_t(text[i]))) << text.substr(0, i + 1);
        }
        EXPECT_TRUE(s.accepting());
        EXPECT_TRUE(masker.allows(s, int32_t(tokens.size() - 1)));  // the end, once the text is whole
    }
    EXPECT_GT(masker.cachedTops(), 5u);
}

namespace {

std::unique_ptr<engine::Engine> openStories(const char* templateSource)
{
    auto model = LlamaModel::load(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
    EXPECT_TRUE(model) << model.error().message;
    auto cpu = gpu::createDevice("cpu", {1, 0});
    EXPECT_TRUE(cpu) << cpu.error().message;
    auto opened = engine::Engine::open(std::move(*model), {}, {}, std::move(*cpu));
    EXPECT_TRUE(opened) << opened.error().message;
    if (!opened) return nullptr;
    if (templateSource) {
        auto format = engine::ChatFormat::fromSource(templateSource, "<s>", "</s>");
        EXPECT_TRUE(format) << format.error().message;
        (*opened)->setChatFormat(std::move(*format));
    }
    return std::move(*opened);
}

const char* const kChatML =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{# its tools are called in <tool_call> tags #}<|im_start|>assistant\n";

}  // namespace

// stories260K writes stories: under a schema, 20 seeded replies at temperature 1 all parse and
// validate; without it, none does.
TEST(Grammar, RepliesUnderASchemaValidate)
{
    auto e = openStories(kChatML);
    ASSERT_TRUE(e);
    const std::string schema = R"({"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 20},
        "mood": {"enum": ["happy", "sad"]},
        "people": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                   "age": {"type": "integer"}}, "required": ["name", "age"]}, "maxItems": 3}},
      "required": ["title", "mood", "people"]})";
    auto g = engine::jsonGrammar(schema);
    ASSERT_TRUE(g) << g.error().message;
    engine::Conversation conversation(*e);
    int valid = 0, free = 0;
    for (int seed = 1; seed <= 20; ++seed) {
        engine::ReplyOptions o;
        o.maxNewTokens = 400;
        o.sampling.temperature = 1.0f;
        o.sampling.seed = uint64_t(seed);
        o.grammar = *g;
        auto r = conversation.reply(std::vector<engine::Message>{{"user", "Once upon a time"}}, o);
        ASSERT_TRUE(r) << r.error().message;
        json v = json::parse(r->content, nullptr, false);
        EXPECT_FALSE(v.is_discarded()) << seed << ": " << r->content;
        EXPECT_EQ(r->end, engine::ReplyStats::End::Turn) << r->content;
        if (!v.is_discarded() && validates(v, json::parse(schema))) ++valid;
        o.grammar = nullptr;
        auto plain = conversation.reply(std::vector<engine::Message>{{"user", "Once upon a time"}}, o);
        ASSERT_TRUE(plain);
        if (!json::parse(plain->content, nullptr, false).is_discarded()) ++free;
    }
    EXPECT_EQ(valid, 20);
    EXPECT_EQ(free, 0);
    // json_object: any object.
    auto object = engine::jsonGrammar("");
    ASSERT_TRUE(object);
    engine::ReplyOptions o;
    o.maxNewTokens = 300;
    o.sampling.temperature = 0;
    o.grammar = *object;
    auto r = conversation.reply(std::vector<engine::Message>{{"user", "Once upon a time"}}, o);
    ASSERT_TRUE(r);
    // Greedy decoding of a story model may fill a string until the token limit: it is a prefix
    // of an object then. Either way it starts as one.
    EXPECT_EQ(r->content.substr(r->content.find_first_not_of(" \n"), 1), "{") << r->content;
}

// tool_choice required: the reply is a call of one of the tools in the template's syntax, read
// back as a call with arguments that validate.
TEST(Grammar, ARequiredToolCallComes)
{
    auto e = openStories(kChatML);
    ASSERT_TRUE(e);
    const std::string tools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 16}, "days": {"type": "integer"}}, "required": ["city", "days"]}}},
        {"type": "function", "function": {"name": "stop_rain", "parameters": {"type": "object", "properties": {}}}}])";
    engine::Conversation conversation(*e);
    for (const bool parallel : {false, true}) {
        const engine::ToolSet set = e->chat().tools(tools);
        ASSERT_EQ(set.syntax, engine::ToolSyntax::Tag);
        for (const std::string forced : {"", "get_weather"}) {
            auto g = engine::toolCallGrammar(set, tools, forced, parallel);
            ASSERT_TRUE(g) << g.error().message;
            for (int seed = 1; seed <= 5; ++seed) {
                engine::ReplyOptions o;
                o.maxNewTokens = 300;
                o.sampling.temperature = 1.0f;
                o.sampling.seed = uint64_t(seed);
                o.prompt.tools = tools;
                o.grammar = *g;
                auto r = conversation.reply(std::vector<engine::Message>{{"user", "Weather?"}}, o);
                ASSERT_TRUE(r) << r.error().message;
                ASSERT_FALSE(r->toolCalls.empty()) << r->content;
                // Parallel calls may go on to the token limit: the last, cut off, is text then.
                if (r->end == engine::ReplyStats::End::Limit && parallel)
                    EXPECT_TRUE(r->content.empty() || r->content.substr(r->content.find_first_not_of(" \n")).starts_with("<"))
                        << r->content;
                else
                    EXPECT_EQ(r->content, "") << engine::endName(r->end);
                if (!parallel) EXPECT_EQ(r->toolCalls.size(), 1u);
                for (const engine::ToolCall& c : r->toolCalls) {
                    if (!forced.empty()) EXPECT_EQ(c.name, forced);
                    const json args = json::parse(c.arguments, nullptr, false);
                    ASSERT_TRUE(args.is_object()) << c.arguments;
                    if (c.name == "get_weather") {
                        EXPECT_TRUE(args["city"].is_string() && args["days"].is_number_integer()) << c.arguments;
                    } else {
                        EXPECT_EQ(c.name, "stop_rain");
                    }
                }
            }
        }
    }
    // Harmony's calls cannot be required yet: said, not ignored.
    auto harmony = engine::toolCallGrammar({engine::ToolSyntax::Harmony, {}}, tools, "", false);
    ASSERT_FALSE(harmony);
    EXPECT_NE(harmony.error().message.find("harmony"), std::string::npos);
}

// A reasoning budget: a thinking template's reply reasons for at most that many tokens, then
// the reasoning is closed for it and the answer follows (stories260K never closes it itself);
// with a schema the answer after the budget still validates. Budget 0 answers at once; no
// budget leaves the reasoning open to the token limit.
TEST(Grammar, AReasoningBudgetClosesTheReasoningAndTheAnswerFollows)
{
    const std::string thinking = std::string(kChatML) + "<think>\n{# </think> #}";
    auto e = openStories(thinking.c_str());
    ASSERT_TRUE(e);
    ASSERT_EQ(e->chat().markup(), engine::ReplyMarkup::ThinkTags);
    engine::Conversation conversation(*e);
    const std::vector<engine::Message> story{{"user", "Once upon a time"}};
    const auto tokensOf = [&](const std::string& text) {
        return e->model().tokenizer().encodeContinuation(text).size();
    };
    engine::ReplyOptions o;
    o.maxNewTokens = 60;
    o.sampling.temperature = 0;
    auto open = conversation.reply(story, o);
    ASSERT_TRUE(open) << open.error().message;
    EXPECT_EQ(open->content, "");  // never closed
    EXPECT_FALSE(open->reasoning.empty());
    for (const int budget : {0, 8, 20}) {
        o.reasoningBudget = budget;
        auto r = conversation.reply(story, o);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_FALSE(r->content.empty()) << budget;
        if (budget == 0) {
            EXPECT_EQ(r->reasoning.find_first_not_of(" \n"), std::string::npos) << r->reasoning;
        } else {
            EXPECT_FALSE(r->reasoning.empty());
            // The budget's tokens, as far as the text's tokenization can tell (a token may merge
            // with the next when encoded again).
            EXPECT_LE(tokensOf(r->reasoning), size_t(budget) + 1) << r->reasoning;
            EXPECT_GE(tokensOf(r->reasoning), size_t(budget) / 2) << r->reasoning;
            EXPECT_TRUE(open->reasoning.starts_with(r->reasoning.substr(0, r->reasoning.size() / 2)));
        }
    }
    auto g = engine::jsonGrammar(R"({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}},
                                     "required": ["mood"]})");
    ASSERT_TRUE(g);
    o.grammar = *g;
    o.reasoningBudget = 10;
    o.maxNewTokens = 100;
    auto r = conversation.reply(story, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->reasoning.empty());
    const json v = json::parse(r->content, nullptr, false);
    ASSERT_TRUE(v.is_object()) << r->content;
    EXPECT_TRUE(v["mood"] == "happy" || v["mood"] == "sad") << r->content;
}

// GBNF (llama.cpp's grammar format): what a grammar with every construct accepts, and nothing
// else; each malformed grammar refused with its line and column or the rule at fault.
TEST(Grammar, GbnfAcceptsItsTextsAndRefusesBadGrammarsByName)
{
    const char* const text = R"G(# a list of at most three lower-case words, then a mood
root   ::= "Items: " word ("," ws word){0,2} "." ws mood
word   ::= [a-z]+
ws     ::= [ \t]?
mood   ::= ( "happy"
           | "sad" ) "!"* note?
note   ::= " (" [^)\n]{1,8} ")"
)G";
    auto g = grammar::parseGbnf(text);
    ASSERT_TRUE(g) << g.error().message;
    for (const char* yes : {"Items: a. happy", "Items: ab,cd, ef. sad!!", "Items: x.\tsad (ok)", "Items: x. sad (héllo)",
                            "Items: x. happy! (12345678)"})
        EXPECT_TRUE(matches(*g, yes)) << yes;
    for (const char* no : {"Items: a", "Items: A. happy", "Items: a,b,c,d. sad", "Items: a. glad", "Items: a. sad ()",
                           "Items: a. sad (123456789)", "Items: a.  sad", "items: a. sad"})
        EXPECT_FALSE(matches(*g, no)) << no;
    // Escapes and any character.
    auto e = grammar::parseGbnf(R"G(root ::= "\x41\u00e9\"" . [\x30-\x39] "\n")G");
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_TRUE(matches(*e, "A\xC3\xA9\"\xE2\x82\xAC" "7\n"));
    EXPECT_FALSE(matches(*e, "A\xC3\xA9\"x" "a\n"));

    const std::pair<const char*, const char*> bad[] = {
        {"root ::= \"a\" b\n", "rule 'b'"},
        {"start ::= \"a\"\n", "no 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
        {"root ::= x \"a\"\nx ::= root | \"b\"\n", "left recursion"},
        {"root ::= y\ny ::= z? y \"a\" | \"b\"\nz ::= \"c\"\n", "left recursion"},
        {"root ::= \"a\n", "line 1, column"},
        {"root ::= [a-\n", "not closed"},
        {"root ::= (\"a\" | \"b\"\n", "expected ')'"},
        {"root = \"a\"\n", "'::='"},
        {"root ::= \"a\"{3,2}\n", "m <= n"},
        {"root ::= \"a\"{20000}\n", "10000"},
        {"root ::= [а-я]\n", "beyond ASCII"},
        {"root ::= \"\\q\"\n", "escape"},
        {"root ::= \"a\" other ::= \"b\"\n", "new line"},
        {"root ::= \"a\"\n  \"b\"\nx ::= \"c\"\n", "rule name"},
    };
    for (const auto& [grammarText, why] : bad) {
        auto r = grammar::parseGbnf(grammarText);
        ASSERT_FALSE(r) << grammarText;
        EXPECT_NE(r.error().message.find(why), std::string::npos) << grammarText << " -> " << r.error().message;
    }
}

// stories260K under a GBNF grammar: 20 seeded replies at temperature 1 are all texts of it.
TEST(Grammar, RepliesUnderAGbnfGrammarMatchIt)
{
    auto e = openStories(kChatML);
    ASSERT_TRUE(e);
    const char* const text = "root ::= \"Answer: \" (\"yes\" | \"no\") \", because \" [a-z ]{3,40} \".\"\n";
    auto g = engine::gbnfGrammar(text);
    ASSERT_TRUE(g) << g.error().message;
    auto plain = grammar::parseGbnf(text);
    ASSERT_TRUE(plain);
    engine::Conversation conversation(*e);
    for (int seed = 1; seed <= 20; ++seed) {
        engine::ReplyOptions o;
        o.maxNewTokens = 120;
        o.sampling.temperature = 1.0f;
        o.sampling.seed = uint64_t(seed);
        o.grammar = *g;
        auto r = conversation.reply(std::vector<engine::Message>{{"user", "Once upon a time"}}, o);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_TRUE(matches(*plain, r->content)) << seed << ": " << r->content;
        EXPECT_EQ(r->end, engine::ReplyStats::End::Turn) << r->content;
    }
}
