// The parser's statements ({% if %}, {% for %}, {% set %}, macros...) and the token stream;
// expressions are in jinja_expressions.cpp.

#include "core/chat/jinja_parser.h"

namespace spillway::jinja::detail {

namespace {

constexpr std::string_view kUnsupportedTags[] = {
    "extends", "include", "import", "from", "block", "endblock", "do",
};

}  // namespace

Body Parser::parseTemplate()
{
    return subparse({});
}

bool Parser::isName(std::string_view name) const
{
    return cur().type == TokenType::Name && cur().text == name;
}

bool Parser::isOp(std::string_view op) const
{
    return cur().type == TokenType::Operator && cur().text == op;
}

bool Parser::skipName(std::string_view name)
{
    if (!isName(name)) return false;
    next();
    return true;
}

std::string Parser::describe(const Token& t)
{
    switch (t.type) {
    case TokenType::Text: return "template data";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::Name:
    case TokenType::Operator: return "'" + t.text + "'";
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer";
    case TokenType::Float: return "float";
    case TokenType::End: return "end of template";
    }
    return "token";
}

void Parser::error(uint32_t offset, std::string message) const
{
    fail(TemplateError::Kind::Syntax, offset, std::move(message));
}

void Parser::unexpected(std::string_view expected) const
{
    error(cur().offset, "expected " + std::string(expected) + ", got " + describe(cur()));
}

void Parser::expectOp(std::string_view op)
{
    if (!isOp(op)) unexpected("'" + std::string(op) + "'");
    next();
}

std::string Parser::expectName()
{
    if (cur().type != TokenType::Name) unexpected("a name");
    std::string name = cur().text;
    next();
    return name;
}

void Parser::expectEndTag(std::string_view name)
{
    if (!isName(name)) unexpected("'" + std::string(name) + "'");
    next();
}

void Parser::expectBlockEnd()
{
    if (cur().type != TokenType::BlockEnd) unexpected("end of statement block");
    next();
}

ExprPtr Parser::node(ExprKind kind, uint32_t offset) const
{
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
}

ExprPtr Parser::seal(ExprPtr e) const
{
    int height = 0;
    auto see = [&](const ExprPtr& child) {
        if (child) height = std::max(height, child->depth);
    };
    see(e->a);
    see(e->b);
    see(e->c);
    see(e->dynArgs);
    see(e->dynKwargs);
    for (const auto& arg : e->args) see(arg);
    for (const auto& [name, arg] : e->kwargs) see(arg);
    for (const auto& [op, arg] : e->comparisons) see(arg);
    e->depth = height + 1;
    if (e->depth > m_maxHeight)
        error(e->offset,
              "expression nests more than " + std::to_string(m_maxHeight) + " levels deep");
    return e;
}

Body Parser::subparse(std::initializer_list<std::string_view> endTags)
{
    Body body;
    while (true) {
        const Token& t = cur();
        switch (t.type) {
        case TokenType::Text: {
            auto s = std::make_unique<Stmt>();
            s->kind = StmtKind::Text;
            s->offset = t.offset;
            s->text = t.text;
            body.push_back(std::move(s));
            next();
            break;
        }
        case TokenType::VariableBegin: {
            const uint32_t offset = t.offset;
            next();
            auto s = std::make_unique<Stmt>();
            s->kind = StmtKind::Print;
            s->offset = offset;
            s->expr = parseTuple(false, true, {}, false);
            if (cur().type != TokenType::VariableEnd) unexpected("end of print statement");
            next();
            body.push_back(std::move(s));
            break;
        }
        case TokenType::BlockBegin: {
            next();
            if (cur().type == TokenType::Name &&
                std::find(endTags.begin(), endTags.end(), cur().text) != endTags.end())
                return body;
            body.push_back(parseStatement());
            expectBlockEnd();
            break;
        }
        case TokenType::End: {
            if (endTags.size() != 0) {
                std::string wanted;
                for (std::string_view tag : endTags)
                    wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
                error(t.offset, "unexpected end of template, expected " + wanted);
            }
            return body;
        }
        default: unexpected("template data or a tag");
        }
    }
}

StmtPtr Parser::newStmt(StmtKind kind, uint32_t offset) const
{
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->offset = offset;
    return s;
}

StmtPtr Parser::parseStatement()
{
    const Token& t = cur();
    if (t.type != TokenType::Name) unexpected("a tag name");
    Nest nest(*this, t.offset);
    const std::string& tag = t.text;
    if (tag == "for") return parseFor();
    if (tag == "if") return parseIf();
    if (tag == "set") return parseSet();
    if (tag == "macro") return parseMacro();
    if (tag == "call") return parseCallBlock();
    if (tag == "filter") return parseFilterBlock();
    if (tag == "with") return parseWith();
    if (tag == "print") {
        auto s = newStmt(StmtKind::Print, t.offset);
        next();
        s->expr = parseTuple(false, true, {}, false);
        return s;
    }
    if (tag == "break" || tag == "continue") {
        if (m_loopDepth == 0) error(t.offset, "'" + tag + "' outside a for loop");
        auto s = newStmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, t.offset);
        next();
        return s;
    }
    if (tag == "generation" || tag == "autoescape") {
        // transformers' {% generation %} marks assistant text; it renders in place.
        const std::string end = "end" + tag;
        auto s = newStmt(StmtKind::Scope, t.offset);
        next();
        if (tag == "autoescape") s->expr = parseExpression(true);
        expectBlockEnd();
        s->body = subparse({end});
        expectEndTag(end);
        return s;
    }
    for (std::string_view unsupported : kUnsupportedTags)
        if (tag == unsupported)
            error(t.offset,
                  "the '" + tag + "' tag is not supported (a chat template stands alone)");
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif")
        error(t.offset, "unexpected '" + tag + "' (no open block it could close)");
    error(t.offset, "unknown tag '" + tag + "'");
}

StmtPtr Parser::parseFor()
{
    auto s = newStmt(StmtKind::For, cur().offset);
    next();
    s->target = parseAssignTarget({"in"}, false);
    expectEndTag("in");
    s->expr = parseTuple(false, false, {"recursive"}, false);
    if (skipName("if")) s->test = parseExpression(true);
    if (isName("recursive")) error(cur().offset, "recursive for loops are not supported");
    expectBlockEnd();
    ++m_loopDepth;
    m_loops.push_back(s.get());
    s->body = subparse({"endfor", "else"});
    m_loops.pop_back();
    --m_loopDepth;
    if (skipName("else")) {
        expectBlockEnd();
        s->elseBody = subparse({"endfor"});
    }
    expectEndTag("endfor");
    return s;
}

StmtPtr Parser::parseIf()
{
    auto s = newStmt(StmtKind::If, cur().offset);
    next();
    while (true) {
        ExprPtr test = parseTuple(false, false, {}, false);
        expectBlockEnd();
        Body body = subparse({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(test), std::move(body));
        if (skipName("elif")) continue;
        if (skipName("else")) {
            expectBlockEnd();
            s->elseBody = subparse({"endif"});
        }
        expectEndTag("endif");
        return s;
    }
}

StmtPtr Parser::parseSet()
{
    const uint32_t offset = cur().offset;
    next();
    ExprPtr target = parseAssignTarget({}, true);
    if (isOp("=")) {
        next();
        auto s = newStmt(StmtKind::Set, offset);
        s->target = std::move(target);
        s->expr = parseTuple(false, true, {}, false);
        return s;
    }
    auto s = newStmt(StmtKind::SetBlock, offset);
    s->target = std::move(target);
    if (isOp("|")) s->expr = parseFilter(nullptr, false);
    expectBlockEnd();
    s->body = subparse({"endset"});
    expectEndTag("endset");
    return s;
}

void Parser::parseSignature(Stmt& s)
{
    expectOp("(");
    while (!isOp(")")) {
        if (!s.params.empty()) expectOp(",");
        s.params.push_back(expectName());
        if (isOp("=")) {
            next();
            s.defaults.push_back(parseExpression(true));
        } else if (!s.defaults.empty()) {
            error(cur().offset, "non-default argument follows default argument");
        }
    }
    expectOp(")");
}

Body Parser::parseCallableBody(Stmt& s, std::string_view endTag)
{
    const int loopDepth = m_loopDepth;
    std::vector<Stmt*> loops = std::move(m_loops);
    m_loopDepth = 0;
    m_loops.clear();
    m_callables.push_back(&s);
    Body body = subparse({endTag});
    m_callables.pop_back();
    m_loops = std::move(loops);
    m_loopDepth = loopDepth;
    return body;
}

StmtPtr Parser::parseMacro()
{
    auto s = newStmt(StmtKind::Macro, cur().offset);
    next();
    s->name = expectName();
    parseSignature(*s);
    expectBlockEnd();
    s->body = parseCallableBody(*s, "endmacro");
    expectEndTag("endmacro");
    return s;
}

StmtPtr Parser::parseCallBlock()
{
    auto s = newStmt(StmtKind::CallBlock, cur().offset);
    next();
    if (isOp("(")) parseSignature(*s);
    s->expr = parseExpression(true);
    if (s->expr->kind != ExprKind::Call) error(s->offset, "expected a call after 'call'");
    expectBlockEnd();
    s->body = parseCallableBody(*s, "endcall");
    expectEndTag("endcall");
    return s;
}

StmtPtr Parser::parseFilterBlock()
{
    auto s = newStmt(StmtKind::FilterBlock, cur().offset);
    next();
    s->expr = parseFilter(nullptr, true);
    expectBlockEnd();
    s->body = subparse({"endfilter"});
    expectEndTag("endfilter");
    return s;
}

StmtPtr Parser::parseWith()
{
    auto s = newStmt(StmtKind::With, cur().offset);
    next();
    while (cur().type != TokenType::BlockEnd) {
        if (!s->assignments.empty()) expectOp(",");
        ExprPtr target = parseAssignTarget({}, false);
        expectOp("=");
        s->assignments.emplace_back(std::move(target), parseExpression(true));
    }
    expectBlockEnd();
    s->body = subparse({"endwith"});
    expectEndTag("endwith");
    return s;
}

Body parseTokens(const std::vector<Token>& tokens, const Limits& limits)
{
    return Parser(tokens, limits).parseTemplate();
}

}  // namespace spillway::jinja::detail
