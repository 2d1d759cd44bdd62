#pragma once
// A Jinja2-compatible template engine for the chat templates models carry (GGUF
// `tokenizer.chat_template`, `chat_template` in Hugging Face's tokenizer_config.json). It is a
// real interpreter (lexer, parser, syntax tree, evaluator) of the language as transformers runs
// it: trim_blocks and lstrip_blocks on, loop controls (break/continue), tojson as json.dumps
// with ensure_ascii=False, and the raise_exception(), strftime_now(), namespace() and range()
// globals. Std only.
//
// Templates are untrusted input: every size, nesting level and amount of work is bounded
// (Limits), and any failure, from a syntax error to raise_exception(), is an Error whose message
// says where in the template it happened. Nothing crashes and nothing runs unbounded.
//
// Supported: {{ }}, {% %}, {# #}, whitespace control (- and +), raw, if/elif/else, for (loop.*,
// else, `for x in y if cond`, tuple targets), break/continue, set (with tuples, blocks and
// namespace attributes), macros (defaults, varargs, kwargs, caller), call and filter blocks,
// with, generation; Python expressions on None/bool/int/float/str/list/tuple/dict with
// subscripts and slices; Jinja's filters and tests, str and dict methods (see
// jinja_filters.cpp, jinja_builtins.cpp, jinja_methods.cpp). Undefined names and attributes are
// Jinja's default Undefined: false, printed as nothing, an error once used further.
//
// Not supported: extends/block/include/import (a template stands alone), recursive loops,
// Python's %-formatting and str.format(). Known differences from Python, none of which the
// chat templates of common models meet: integers are 64-bit (overflow is an error),
// dict.items()/keys()/values() and range() give lists, generators print as
// "<generator object>", letter case covers Latin, Greek and Cyrillic, `-x ** y` is
// `(-x) ** y` (Jinja's generated Python makes it `-(x ** y)` unless both are constants), and
// slicing a non-sequence is an error (Jinja gives Undefined when it folds constants).

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/chat/jinja_value.h"

namespace spillway::jinja {

// Lexer options, named as in jinja2.Environment; the defaults are those transformers uses.
struct Syntax {
    bool trimBlocks = true;            // drop the first newline after a block tag
    bool lstripBlocks = true;          // drop spaces and tabs before a block tag on its line
    bool keepTrailingNewline = false;  // Jinja drops one newline at the end of a template
};

// Bounds against hostile templates. Going past one is an InvalidArgument error naming it.
struct Limits {
    size_t maxSourceBytes = 1u << 20;      // template text
    size_t maxOutputBytes = 16u << 20;     // rendered text, and any one string made on the way
    uint64_t maxSteps = 5'000'000;         // expressions and statements evaluated, per render
    uint64_t maxWorkBytes = 256ull << 20;  // bytes of all strings and lists made, per render
    int maxNesting = 100;                  // blocks and expressions inside one another
    int maxCallDepth = 50;                 // macro calls inside macro calls
};

struct RenderOptions {
    // The time strftime_now() formats; the current local time when empty.
    std::optional<std::tm> now;
};

namespace detail {
struct Program;
}

class Template {
public:
    // Lexes and parses. InvalidArgument "template syntax error at line L, column C: ..." for a
    // template that does not parse, or one past the limits.
    static Result<Template> parse(std::string_view source, const Syntax& syntax = {},
                                  const Limits& limits = {});

    // Renders with `variables` (a dict: name -> value; Undefined for none) on top of the
    // globals. Errors: InvalidArgument with "line L, column C: ..." for a runtime error, the
    // raise_exception() message for a template that raises, the limit for one past a limit.
    // A Template may render on several threads at once.
    Result<std::string> render(const Value& variables, const RenderOptions& options = {}) const;

private:
    explicit Template(std::shared_ptr<const detail::Program> program);
    std::shared_ptr<const detail::Program> m_program;
};

}  // namespace spillway::jinja
