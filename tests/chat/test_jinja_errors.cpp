// Errors name where they happened, and hostile templates stop at a limit with a clear message
// instead of running, growing or recursing without end.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "chat_test_util.h"
#include "core/chat/jinja.h"

namespace spillway::jinja {
namespace {

using chat::test::renderOrError;

Error parseError(const std::string& source, const Limits& limits = {})
{
    auto t = Template::parse(source, Syntax{}, limits);
    EXPECT_FALSE(t.ok()) << source;
    return t.ok() ? Error{} : t.error();
}

Error renderError(const std::string& source, const Limits& limits = {},
                  const std::string& vars = "{}")
{
    auto t = Template::parse(source, Syntax{}, limits);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    if (!t.ok()) return t.error();
    auto values = Value::fromJson(vars);
    EXPECT_TRUE(values.ok()) << (values.ok() ? "" : values.error().message);
    if (!values.ok()) return values.error();
    auto out = t->render(*values);
    EXPECT_FALSE(out.ok()) << source;
    return out.ok() ? Error{} : out.error();
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

TEST(JinjaErrors, SyntaxErrorsGiveLineAndColumn)
{
    Error e = parseError("{% if x %}\n  {{ y + }}\n{% endif %}");
    EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.message, "template syntax error at line 2, column 10")) << e.message;
    EXPECT_TRUE(contains(e.message, "end of print statement")) << e.message;

    e = parseError("line one\n{% for x in items %}\n{{ x }}\n");
    EXPECT_TRUE(contains(e.message, "expected 'endfor' or 'else'")) << e.message;

    e = parseError("ok\n  {% frobnicate %}");
    EXPECT_TRUE(contains(e.message, "line 2, column 6: unknown tag 'frobnicate'")) << e.message;

    e = parseError("{{ x | nosuchfilter }}");
    EXPECT_TRUE(contains(e.message, "column 8: no filter named 'nosuchfilter'")) << e.message;

    e = parseError("{{ (1 }}");
    EXPECT_TRUE(contains(e.message, "unexpected '}', expected ')'")) << e.message;

    e = parseError("é{{ 'unterminated }}");
    EXPECT_TRUE(contains(e.message, "line 1, column 5: unexpected character '''")) << e.message;

    e = parseError("{# never closed");
    EXPECT_TRUE(contains(e.message, "missing end of comment tag")) << e.message;
    e = parseError("{% endif %}");
    EXPECT_TRUE(contains(e.message, "unexpected 'endif'")) << e.message;
    e = parseError("{% include 'x.html' %}");
    EXPECT_TRUE(contains(e.message, "'include' tag is not supported")) << e.message;
    e = parseError("{% break %}");
    EXPECT_TRUE(contains(e.message, "'break' outside a for loop")) << e.message;
}

TEST(JinjaErrors, RuntimeErrorsGiveTheirPosition)
{
    Error e = renderError("a\nb\n  {{ 1 // 0 }}");
    EXPECT_TRUE(contains(e.message, "template error at line 3")) << e.message;
    EXPECT_TRUE(contains(e.message, "division or modulo by zero")) << e.message;

    e = renderError("{{ d.missing.deeper }}", {}, R"({"d": {}})");
    EXPECT_TRUE(contains(e.message, "'dict object' has no attribute 'missing'")) << e.message;

    e = renderError("{{ 1 < 'a' }}");
    EXPECT_TRUE(contains(e.message, "'<' not supported between instances of 'int' and 'str'"))
        << e.message;

    e = renderError("{% for x in 5 %}{% endfor %}");
    EXPECT_TRUE(contains(e.message, "'int' object is not iterable")) << e.message;
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage)
{
    Error e = renderError(
        "{% if true %}\n{{ raise_exception('Conversation roles must alternate!') }}{% endif %}");
    EXPECT_EQ(e.code, ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.message, "template raised an error at line 2")) << e.message;
    EXPECT_TRUE(contains(e.message, ": Conversation roles must alternate!")) << e.message;
}

TEST(JinjaErrors, HugeLoopStopsAtTheStepLimit)
{
    Error e = renderError(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}");
    // 10^10 iterations would run for hours: the step limit, not the clock, ends it (a timed
    // assertion would fail on a loaded machine).
    EXPECT_TRUE(contains(e.message, "template stopped at line 1")) << e.message;
    EXPECT_TRUE(contains(e.message, "steps")) << e.message;

    Limits small;
    small.maxSteps = 1000;
    e = renderError("{% for i in range(1000) %}x{% endfor %}", small);
    EXPECT_TRUE(contains(e.message, "more than 1000 steps")) << e.message;
}

TEST(JinjaErrors, OutputAndStringsAreBounded)
{
    Limits small;
    small.maxOutputBytes = 1000;
    Error e = renderError("{% for i in range(2000) %}x{% endfor %}", small);
    EXPECT_TRUE(contains(e.message, "rendered text is longer than the limit of 1000 bytes"))
        << e.message;

    e = renderError("{{ 'a' * 1000000000000 }}");
    EXPECT_TRUE(contains(e.message, "longer than the limit")) << e.message;

    // Doubling a string in a loop runs into the limits long before memory does.
    e = renderError(
        "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}");
    EXPECT_TRUE(contains(e.message, "template stopped")) << e.message;

    e = renderError("{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyyyyyyyyyyyyyy') }}");
    EXPECT_TRUE(contains(e.message, "longer than the limit")) << e.message;

    e = renderError("{{ [1] * 1000000000000 }}");
    EXPECT_TRUE(contains(e.message, "bytes of strings and lists")) << e.message;

    e = renderError("{{ range(1000000) }}");
    EXPECT_TRUE(contains(e.message, "Range too big")) << e.message;

    Limits work;
    work.maxWorkBytes = 10000;
    e = renderError(
        "{% for i in range(1000) %}{% set s = 'abcdefghijklmnopqrstuvwxyz' ~ i %}{% endfor %}",
        work);
    EXPECT_TRUE(contains(e.message, "more than 10000 bytes of strings and lists")) << e.message;
}

TEST(JinjaErrors, RecursionIsBounded)
{
    Error e = renderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    EXPECT_TRUE(contains(e.message, "macro calls nest deeper than 50")) << e.message;

    // Deeply nested source is refused by the parser.
    e = parseError("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}");
    EXPECT_TRUE(contains(e.message, "nests more than")) << e.message;
    e = parseError("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}");
    EXPECT_TRUE(contains(e.message, "nests more than")) << e.message;
    e = parseError("{{ " + std::string(100000, '-') + "1 }}");
    EXPECT_TRUE(contains(e.message, "nests more than")) << e.message;
    std::string notChain = "{{ ";
    for (int i = 0; i < 50000; ++i) notChain += "not ";
    e = parseError(notChain + "x }}");
    EXPECT_TRUE(contains(e.message, "nests more than")) << e.message;
    std::string ifs;
    for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
    e = parseError(ifs);
    EXPECT_TRUE(contains(e.message, "nests more than")) << e.message;

    // Chains built in loops (a + a + ..., x|f|f|..., a.b.c...) too.
    std::string sum = "{{ 1";
    for (int i = 0; i < 50000; ++i) sum += " + 1";
    e = parseError(sum + " }}");
    EXPECT_TRUE(contains(e.message, "expression nests more than")) << e.message;
    std::string filters = "{{ 'x'";
    for (int i = 0; i < 50000; ++i) filters += "|trim";
    e = parseError(filters + " }}");
    EXPECT_TRUE(contains(e.message, "expression nests more than")) << e.message;
    std::string attrs = "{{ x";
    for (int i = 0; i < 50000; ++i) attrs += ".a";
    e = parseError(attrs + " }}");
    EXPECT_TRUE(contains(e.message, "expression nests more than")) << e.message;
}

TEST(JinjaErrors, SelfReferenceAndDeepValuesAreRefused)
{
    Error e = renderError("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
    EXPECT_TRUE(contains(e.message, "nests too deeply")) << e.message;
    e = renderError(
        "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns.me }}{{ [ns]|tojson }}");
    EXPECT_TRUE(contains(e.message, "not JSON serializable")) << e.message;
    e = renderError(
        "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor "
        "%}");
    EXPECT_TRUE(contains(e.message, "nest deeper than 100 levels")) << e.message;
    // A long chain of namespaces is freed without recursing through it.
    EXPECT_EQ(renderOrError("{% set ns = namespace(p=none) %}{% for i in range(50000) %}"
                            "{% set ns.p = namespace(p=ns.p) %}{% endfor %}done"),
              "done");
}

TEST(JinjaErrors, SourceSizeIsBounded)
{
    Limits small;
    small.maxSourceBytes = 100;
    Error e = parseError(std::string(101, 'x'), small);
    EXPECT_TRUE(contains(e.message, "more than the limit of 100")) << e.message;
}

}  // namespace
}  // namespace spillway::jinja
