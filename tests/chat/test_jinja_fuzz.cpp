// Templates are untrusted input: random bytes, token soup and random mutations of the real chat
// templates must parse or fail cleanly, and render or fail cleanly, within bounded time.

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "chat_test_util.h"
#include "core/chat/jinja.h"

namespace spillway::jinja {
namespace {

using chat::test::chatTestDir;
using chat::test::readFile;

// Small limits keep each render short whatever the template does.
Limits fuzzLimits()
{
    Limits l;
    l.maxSteps = 20000;
    l.maxOutputBytes = 1 << 16;
    l.maxWorkBytes = 1 << 22;
    return l;
}

const Value& conversation()
{
    // A failure (and an empty conversation) if the JSON below does not parse.
    static const Value v = [] {
        auto parsed = Value::fromJson(R"({
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi <think>"},
            {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello!",
             "tool_calls": [{"id": "abc123XYZ", "function": {"name": "f", "arguments": {"a": 1}}}]},
            {"role": "tool", "content": "{\"r\": 1}", "tool_call_id": "abc123XYZ"},
            {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image"}]}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
        EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
        return parsed.ok() ? *parsed : Value();
    }();
    return v;
}

struct Tally {
    int parsed = 0, rendered = 0, total = 0;
};

void exercise(const std::string& source, Tally& tally)
{
    ++tally.total;
    auto t = Template::parse(source, Syntax{}, fuzzLimits());
    if (!t.ok()) {
        EXPECT_FALSE(t.error().message.empty());
        return;
    }
    ++tally.parsed;
    auto out = t->render(conversation());
    if (out.ok()) {
        ++tally.rendered;
        EXPECT_LE(out->size(), fuzzLimits().maxOutputBytes);
    } else {
        EXPECT_FALSE(out.error().message.empty());
    }
}

const std::vector<std::string>& fragments()
{
    static const std::vector<std::string> f = {
        "{{",
        "}}",
        "{%",
        "%}",
        "{#",
        "#}",
        "{%-",
        "-%}",
        "{{-",
        "-}}",
        " ",
        "\n",
        "'",
        "\"",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "|",
        ".",
        ",",
        ":",
        "=",
        "~",
        "+",
        "-",
        "*",
        "/",
        "//",
        "%",
        "**",
        "<",
        ">",
        "==",
        "!=",
        "not ",
        " in ",
        " is ",
        " and ",
        " or ",
        " if ",
        " else ",
        "for ",
        "endfor",
        "if ",
        "endif",
        "elif ",
        "else",
        "set ",
        "endset",
        "macro ",
        "endmacro",
        "call",
        "endcall",
        "raw",
        "endraw",
        "filter ",
        "endfilter",
        "break",
        "continue",
        "namespace(",
        "range(",
        "loop",
        "loop.index",
        "messages",
        "message",
        "m",
        "x",
        "ns",
        "ns.x",
        "tools",
        "caller()",
        "varargs",
        "0",
        "1",
        "-1",
        "1.5",
        "1e9",
        "'abc'",
        "\"\\n\"",
        "none",
        "true",
        "false",
        "|length",
        "|tojson",
        "|trim",
        "|join(', ')",
        "|map(attribute='role')",
        "|selectattr('role', 'equalto', 'user')",
        "|list",
        "|items",
        "|default('d')",
        "|int",
        "|string",
        "|upper",
        "|replace('a', 'b')",
        "|indent(2)",
        "|sort",
        "|unique",
        "|reverse",
        "[::-1]",
        "[1:]",
        "[0]",
        "['role']",
        ".content",
        ".split('x')",
        ".strip()",
        ".startswith('a')",
        ".get('k')",
        ".items()",
        " is defined",
        " is string",
        " is mapping",
        " is iterable",
        "raise_exception('boom')",
        "strftime_now('%d')",
        "é",
        "😀",
    };
    return f;
}

TEST(JinjaFuzz, RandomBytesNeverCrash)
{
    std::mt19937 rng(1234);
    const std::string alphabet = "{}%#-+ \n\t'\"()[]|.,:=~!<>*/abcxyzif0123456789_\\";
    Tally tally;
    for (int i = 0; i < 3000; ++i) {
        std::string s;
        const size_t length = rng() % 120;
        for (size_t k = 0; k < length; ++k) {
            const unsigned r = rng() % 10;
            s += r < 8 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256);
        }
        exercise(s, tally);
    }
    EXPECT_GT(tally.parsed, 0);
}

TEST(JinjaFuzz, TokenSoupNeverCrashes)
{
    std::mt19937 rng(99);
    const auto& f = fragments();
    Tally tally;
    for (int i = 0; i < 4000; ++i) {
        std::string s;
        const size_t count = 1 + rng() % 40;
        for (size_t k = 0; k < count; ++k) s += f[rng() % f.size()];
        exercise(s, tally);
        // The same fragments inside well-formed expression tags reach the evaluator more often.
        std::string expr = "{{ ";
        for (size_t k = 0; k < 1 + rng() % 8; ++k) expr += f[60 + rng() % (f.size() - 60)];
        exercise(expr + " }}", tally);
    }
    EXPECT_GT(tally.rendered, 100);
}

TEST(JinjaFuzz, MutatedRealTemplatesNeverCrash)
{
    std::vector<std::string> templates;
    const std::string dir = chatTestDir() + "/templates";
    std::error_code ec;
    std::filesystem::directory_iterator entries(dir, ec);
    ASSERT_FALSE(ec) << "cannot list " << dir << ": " << ec.message();
    for (const auto& entry : entries) templates.push_back(readFile(entry.path().string()));
    ASSERT_GE(templates.size(), 10u);
    std::mt19937 rng(4321);
    const auto& f = fragments();
    Tally tally;
    for (const std::string& original : templates) {
        exercise(original, tally);
        for (int i = 0; i < 250; ++i) {
            std::string s = original;
            for (unsigned edits = 1 + rng() % 4; edits > 0 && !s.empty(); --edits) {
                const size_t at = rng() % s.size();
                switch (rng() % 5) {
                case 0: s.erase(at, 1 + rng() % 20); break;
                case 1: s.insert(at, f[rng() % f.size()]); break;
                case 2: s[at] = static_cast<char>(rng() % 256); break;
                case 3: {
                    const size_t from = rng() % s.size();
                    s.insert(at, s.substr(from, 1 + rng() % 60));
                    break;
                }
                default: s.erase(at, s.size() - at); break;
                }
            }
            exercise(s, tally);
        }
    }
    EXPECT_GT(tally.rendered, 100);
}

}  // namespace
}  // namespace spillway::jinja
