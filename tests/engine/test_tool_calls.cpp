// Tool calls (core/engine/tool_calls.h) in each family's own syntax, checked on the families'
// real chat templates (tests/chat/templates, from the models' Hugging Face repositories): a
// conversation whose assistant turn holds calls is rendered by the template, the turn's text is
// what the model was trained to write, and reading it back (whole and cut into pieces as tokens
// come) gives the same calls. Malformed and truncated calls come back as text.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/engine/chat_format.h"
#include "core/engine/reply_parser.h"
#include "core/engine/tool_calls.h"

using namespace spillway;
using engine::ReplyMarkup;
using engine::ReplyParser;
using engine::ReplyPart;
using engine::ToolCall;
using engine::ToolSyntax;
using nlohmann::json;

namespace {

std::string readTemplate(const std::string& name)
{
    std::ifstream in(SPILLWAY_TEST_DATA_DIR "/../chat/templates/" + name, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

const std::string kTools = R"([
 {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                 "required": ["city"]}}},
 {"type": "function", "function": {"name": "book_table", "description": "Books a table",
  "parameters": {"type": "object", "properties": {"restaurant": {"type": "string"}, "party": {"type": "object"},
                 "code": {"type": "string"}}}}}])";

struct Read {
    std::string content, reasoning;
    std::vector<ToolCall> calls;   // from the parser
    std::vector<ToolCall> pieces;  // as the parts gave them (ToolName opens a call)
};

Read readReply(ReplyMarkup markup, const engine::ToolSet& tools, const std::string& prompt, const std::string& reply,
               size_t piece)
{
    ReplyParser parser(markup, prompt, false, tools);
    Read r;
    auto sink = [&](ReplyPart part, std::string_view t) {
        if (part == ReplyPart::ToolName) r.pieces.push_back({{}, std::string(t), {}});
        if (part == ReplyPart::ToolCall) {
            EXPECT_FALSE(r.pieces.empty());
            if (!r.pieces.empty()) r.pieces.back().arguments += t;
        }
        return true;
    };
    for (size_t i = 0; i < reply.size(); i += piece) parser.feed(reply.substr(i, piece), sink);
    parser.finish(sink);
    r.content = parser.content();
    r.reasoning = parser.reasoning();
    r.calls = parser.toolCalls();
    return r;
}

struct Family {
    const char* file;
    ToolSyntax syntax;
    const char* bos;
    const char* eos;
    bool parallel;  // the template renders more than one call in a turn
};

const Family kFamilies[] = {
    {"qwen3.jinja", ToolSyntax::Tag, "", "<|im_end|>", true},
    {"qwen2.5-instruct.jinja", ToolSyntax::Tag, "", "<|im_end|>", true},
    {"hermes3-tool-use.jinja", ToolSyntax::Tag, "<|begin_of_text|>", "<|im_end|>", true},
    {"qwen3.5.jinja", ToolSyntax::Tag, "", "<|im_end|>", true},
    {"qwen3-coder.jinja", ToolSyntax::Tag, "", "<|im_end|>", true},
    {"glm4.7-flash.jinja", ToolSyntax::Tag, "", "<|endoftext|>", true},
    {"deepseek-v3.1.jinja", ToolSyntax::DeepSeek, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", true},
    {"mistral-small-3.2.jinja", ToolSyntax::Mistral, "<s>", "</s>", true},
    {"mistral-nemo.jinja", ToolSyntax::Mistral, "<s>", "</s>", true},
    {"llama3.1-instruct.jinja", ToolSyntax::Llama3Json, "<|begin_of_text|>", "<|eot_id|>", false},
    {"gpt-oss.jinja", ToolSyntax::Harmony, "<|startoftext|>", "<|return|>", false},
};

// The assistant turn's text as the template writes it: what follows the prompt the template
// gives for the conversation before it, up to the turn's end.
std::string assistantText(const engine::ChatFormat& format, const std::vector<engine::Message>& before,
                          const engine::Message& turn, const engine::PromptOptions& options, std::string* prompt)
{
    auto head = format.render(before, options);
    std::vector<engine::Message> all = before;
    all.push_back(turn);
    all.push_back({"tool", "{\"ok\": true}", {}, {}, turn.toolCalls.front().id});
    auto whole = format.render(all, options);
    EXPECT_TRUE(head && whole) << (head ? whole.error().message : head.error().message);
    if (!head || !whole) return {};
    size_t common = 0;
    while (common < head->text.size() && common < whole->text.size() && head->text[common] == whole->text[common])
        ++common;
    // Where the generation prompt and the turn part inside a marker (GLM's `<think>` against the
    // history's `</think>`), the turn starts at the marker.
    if (common < head->text.size())
        if (const size_t lt = whole->text.rfind('<', common); lt != std::string::npos && whole->text.find('>', lt) >= common)
            common = lt;
    *prompt = head->text;
    std::string text = whole->text.substr(common);
    size_t end = std::string::npos;
    for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<｜end▁of▁sentence｜>",
                               "<|observation|>", "<|user|>", "<|call|>", "<|endoftext|>", "[TOOL_RESULTS]",
                               "<｜tool▁output▁begin｜>"})
        end = std::min(end, text.find(marker));
    return text.substr(0, end);
}

}  // namespace

TEST(ToolCalls, SyntaxOfEachFamilysTemplate)
{
    for (const Family& f : kFamilies) {
        const std::string source = readTemplate(f.file);
        ASSERT_FALSE(source.empty()) << f.file;
        EXPECT_EQ(engine::toolSyntaxOf(source), f.syntax) << f.file;
        // DeepSeek's writes calls but not the tools: they go in the system prompt.
        EXPECT_EQ(engine::templateKnowsTools(source), f.syntax != ToolSyntax::DeepSeek) << f.file;
    }
    // Templates that know no tools get the generic Tag syntax, with Spillway's instructions.
    for (const char* plain : {"zephyr.jinja", "gemma3-it.jinja", "phi3-mini-instruct.jinja"}) {
        const std::string source = readTemplate(plain);
        EXPECT_EQ(engine::toolSyntaxOf(source), ToolSyntax::Tag) << plain;
        EXPECT_FALSE(engine::templateKnowsTools(source)) << plain;
    }
}

// Each template's own call text, read back as the same calls, whatever the pieces it comes in.
TEST(ToolCalls, EachFamilysCallsReadBackAsTheTemplateWroteThem)
{
    const json party = {{"adults", 2}, {"names", {"Ann", "Bo"}}};
    for (const Family& f : kFamilies) {
        SCOPED_TRACE(f.file);
        auto format = engine::ChatFormat::fromSource(readTemplate(f.file), f.bos, f.eos);
        ASSERT_TRUE(format) << format.error().message;
        engine::PromptOptions options;
        options.tools = kTools;
        std::vector<ToolCall> calls = {{"abc123XYZ", "get_weather", R"({"city":"Paris","days":3})"}};
        if (f.parallel)
            calls.push_back({"def456UVW", "book_table",
                             json{{"restaurant", "Chez L'Ami"}, {"party", party}, {"code", "0042"}}.dump()});
        engine::Message turn{"assistant", "", {}, calls, {}};
        std::string prompt;
        const std::string text = assistantText(*format, {{"user", "Weather in Paris, and a table?"}}, turn, options, &prompt);
        ASSERT_FALSE(text.empty());
        const engine::ToolSet tools = format->tools(kTools);
        EXPECT_EQ(tools.syntax, f.syntax);
        for (size_t piece : {size_t(1), size_t(3), size_t(7), text.size()}) {
            SCOPED_TRACE("pieces of " + std::to_string(piece) + ": " + text);
            const Read r = readReply(format->markup(), tools, prompt, text, piece);
            EXPECT_EQ(r.content, "");
            ASSERT_EQ(r.calls.size(), calls.size());
            ASSERT_EQ(r.pieces.size(), calls.size());
            for (size_t i = 0; i < calls.size(); ++i) {
                EXPECT_EQ(r.calls[i].name, calls[i].name);
                EXPECT_EQ(json::parse(r.calls[i].arguments), json::parse(calls[i].arguments)) << r.calls[i].arguments;
                EXPECT_EQ(r.pieces[i].name, calls[i].name);
                EXPECT_EQ(json::parse(r.pieces[i].arguments), json::parse(calls[i].arguments));
            }
        }
    }
}

// What a Qwen3.5 model writes: its thinking, a sentence, then a call; a string parameter whose
// value reads as a number stays a string, as its schema says.
TEST(ToolCalls, ThinkingThenTextThenACall)
{
    auto format = engine::ChatFormat::fromSource(readTemplate("qwen3.5.jinja"), "", "<|im_end|>");
    ASSERT_TRUE(format) << format.error().message;
    const std::string reply =
        "<think>\nThe user wants the weather.\n</think>\n\nLet me look.\n\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\n1984\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";
    for (size_t piece : {size_t(1), size_t(5), reply.size()}) {
        const Read r = readReply(format->markup(), format->tools(kTools), "<|im_start|>assistant\n", reply, piece);
        EXPECT_EQ(r.reasoning, "The user wants the weather.");
        EXPECT_EQ(r.content, "Let me look.\n\n");
        ASSERT_EQ(r.calls.size(), 1u);
        EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "1984"}, {"days", 2}}));
    }
}

// Without tools in the request, the same text is the answer.
TEST(ToolCalls, NoToolsOfferedMeansNoCallsRead)
{
    const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    const Read r = readReply(ReplyMarkup::Plain, {}, "", reply, 4);
    EXPECT_EQ(r.content, reply);
    EXPECT_TRUE(r.calls.empty());
}

// A call that does not parse, or that the reply leaves unfinished, is given back as the text it
// was, with whatever came before and after it.
TEST(ToolCalls, MalformedAndTruncatedCallsComeBackAsText)
{
    const engine::ToolSet tag = engine::toolSetOf(ToolSyntax::Tag, kTools);
    const std::vector<std::string> bad = {
        "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call> Done.",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",              // no name
        "<tool_call>\n{\"name\": \"get_weather\", \"argu",             // cut off
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo", // XML cut off
        "<tool_call>get_weather<arg_key>city</arg_key>Oslo</tool_call>", // a key without its value
        "<tool_call>",
        "<tool_ca",
    };
    for (const std::string& text : bad)
        for (size_t piece : {size_t(1), size_t(4), text.size()}) {
            const Read r = readReply(ReplyMarkup::Plain, tag, "", text, piece);
            EXPECT_EQ(r.content, text) << piece;
            EXPECT_TRUE(r.calls.empty()) << text;
        }
    // A good call between a malformed one and text: each as it was.
    const std::string mixed = "<tool_call>{oops}</tool_call><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> after";
    const Read r = readReply(ReplyMarkup::Plain, tag, "", mixed, 2);
    EXPECT_EQ(r.content, "<tool_call>{oops}</tool_call> after");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "f");
    // A Tag call whose closing tag never came but whose JSON is whole (the turn ended) is a call.
    const Read open = readReply(ReplyMarkup::Plain, tag, "", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n", 3);
    ASSERT_EQ(open.calls.size(), 1u);
    EXPECT_EQ(open.content, "");
    // Each other syntax's malformed text, and Llama 3 prose that begins with a brace.
    const std::vector<std::pair<ToolSyntax, std::string>> others = {
        {ToolSyntax::Mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": "},
        {ToolSyntax::Mistral, "[TOOL_CALLS][{\"name\": \"f\"}, 7]"},
        {ToolSyntax::DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\"<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
        {ToolSyntax::Llama3Json, "{curly} braces are fine in prose"},
        {ToolSyntax::Llama3Json, "{\"name\": \"f\", \"parameters\": {}} and then prose"},
    };
    for (const auto& [syntax, text] : others) {
        const Read o = readReply(ReplyMarkup::Plain, engine::toolSetOf(syntax, kTools), "", text, 3);
        EXPECT_EQ(o.content, text) << engine::toolSyntaxName(syntax);
        EXPECT_TRUE(o.calls.empty()) << text;
    }
}

// A template that knows no tools is given them in its system prompt, its tool results as user
// turns and its earlier calls as Tag text; the calls its model writes are read in that syntax.
TEST(ToolCalls, ATemplateWithoutToolsGetsThemInTheSystemPrompt)
{
    auto format = engine::ChatFormat::fromSource(readTemplate("zephyr.jinja"), "<s>", "</s>");
    ASSERT_TRUE(format) << format.error().message;
    engine::PromptOptions options;
    options.tools = kTools;
    const std::vector<engine::Message> messages = {
        {"user", "Weather in Oslo?"},
        {"assistant", "", {}, {{"c1", "get_weather", R"({"city":"Oslo"})"}}, {}},
        {"tool", "{\"sky\": \"clear\"}", {}, {}, "c1"}};
    auto prompt = format->render(messages, options);
    ASSERT_TRUE(prompt) << prompt.error().message;
    EXPECT_NE(prompt->text.find("<tools>"), std::string::npos) << prompt->text;
    EXPECT_NE(prompt->text.find("\"name\":\"get_weather\""), std::string::npos) << prompt->text;
    EXPECT_NE(prompt->text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>"),
              std::string::npos)
        << prompt->text;
    EXPECT_NE(prompt->text.find("<tool_response>\n{\"sky\": \"clear\"}\n</tool_response>"), std::string::npos);
    // Without tools, the same template renders as it always did.
    auto plain = format->render(std::vector<engine::Message>{{"user", "Hi"}});
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->text.find("<tools>"), std::string::npos);
}

// The results of calls go back through a template that knows tools with their ids, and the
// function's name found from the call they answer.
TEST(ToolCalls, ToolResultsGoBackThroughTheTemplate)
{
    auto format = engine::ChatFormat::fromSource(readTemplate("qwen3.jinja"), "", "<|im_end|>");
    ASSERT_TRUE(format) << format.error().message;
    engine::PromptOptions options;
    options.tools = kTools;
    const std::vector<engine::Message> messages = {
        {"user", "Weather in Oslo?"},
        {"assistant", "", "I should call the tool.", {{"c1", "get_weather", R"({"city":"Oslo"})"}}, {}},
        {"tool", "{\"sky\": \"clear\"}", {}, {}, "c1"}};
    auto prompt = format->render(messages, options);
    ASSERT_TRUE(prompt) << prompt.error().message;
    EXPECT_NE(prompt->text.find("<tool_response>\n{\"sky\": \"clear\"}\n</tool_response>"), std::string::npos)
        << prompt->text;
    EXPECT_NE(prompt->text.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"), std::string::npos)
        << prompt->text;
    EXPECT_NE(prompt->text.find("# Tools"), std::string::npos);
    // The thinking switch reaches the template.
    options.thinking = false;
    auto off = format->render(messages, options);
    ASSERT_TRUE(off);
    EXPECT_TRUE(off->text.ends_with("<think>\n\n</think>\n\n")) << off->text;
}
