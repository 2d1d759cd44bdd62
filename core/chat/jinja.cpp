// Template::parse() and Template::render(): where the engine's internal errors become Errors.

#include "core/chat/jinja.h"

#include <algorithm>
#include <new>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja {

namespace detail {

std::string describePosition(const Program& program, uint32_t offset)
{
    if (program.lineStarts.empty()) return "line 1, column 1";
    const uint32_t at = std::min<uint32_t>(offset, static_cast<uint32_t>(program.source.size()));
    const auto it = std::upper_bound(program.lineStarts.begin(), program.lineStarts.end(), at);
    const size_t line = static_cast<size_t>(it - program.lineStarts.begin());  // from 1
    const uint32_t lineStart = *(it - 1);
    const size_t column =
        charCount(std::string_view(program.source).substr(lineStart, at - lineStart)) + 1;
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace detail

Template::Template(std::shared_ptr<const detail::Program> program) : m_program(std::move(program))
{
}

Result<Template> Template::parse(std::string_view source, const Syntax& syntax,
                                 const Limits& limits)
{
    if (source.size() > limits.maxSourceBytes || source.size() >= detail::kNoOffset)
        return makeError(ErrorCode::InvalidArgument, "template is " +
                                                         std::to_string(source.size()) +
                                                         " bytes, more than the limit of " +
                                                         std::to_string(limits.maxSourceBytes));
    auto program = std::make_shared<detail::Program>();
    program->limits = limits;
    try {
        program->source = detail::normalizeSource(source, syntax.keepTrailingNewline);
        program->lineStarts.push_back(0);
        for (size_t i = 0; i < program->source.size(); ++i)
            if (program->source[i] == '\n')
                program->lineStarts.push_back(static_cast<uint32_t>(i + 1));
        const std::vector<detail::Token> tokens = detail::tokenize(program->source, syntax);
        program->body = detail::parseTokens(tokens, program->limits);
    } catch (const detail::TemplateError& e) {
        return makeError(ErrorCode::InvalidArgument,
                         "template syntax error at " +
                             detail::describePosition(*program, e.offset) + ": " + e.message);
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, "out of memory while parsing the template");
    }
    return Template(std::move(program));
}

Result<std::string> Template::render(const Value& variables, const RenderOptions& options) const
{
    if (!variables.isUndefined() && !variables.isDict())
        return makeError(ErrorCode::InvalidArgument, "template variables must be a dict");
    detail::Interpreter interpreter(*m_program, options);
    try {
        return interpreter.render(variables);
    } catch (const detail::TemplateError& e) {
        const uint32_t offset = e.offset == detail::kNoOffset ? interpreter.lastOffset() : e.offset;
        const std::string where = detail::describePosition(*m_program, offset);
        switch (e.kind) {
        case detail::TemplateError::Kind::Raised:
            return makeError(ErrorCode::InvalidArgument,
                             "template raised an error at " + where + ": " + e.message);
        case detail::TemplateError::Kind::Limit:
            return makeError(ErrorCode::InvalidArgument,
                             "template stopped at " + where + ": " + e.message);
        default:
            return makeError(ErrorCode::InvalidArgument,
                             "template error at " + where + ": " + e.message);
        }
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, "out of memory while rendering the template");
    } catch (const std::length_error&) {
        return makeError(ErrorCode::OutOfMemory, "out of memory while rendering the template");
    }
}

}  // namespace spillway::jinja
