// The parser's expressions, from conditional expressions down to literals, with Jinja's
// precedence: or, and, not, comparisons, + -, ~, * / // %, **, unary - +, then postfix
// (.attr, [index], calls) and filters/tests.

#include "core/chat/jinja_parser.h"

namespace spillway::jinja::detail {

bool Parser::assignable(const Expr& e)
{
    if (e.kind == ExprKind::Name || e.kind == ExprKind::NsRef) return true;
    if (e.kind != ExprKind::Tuple) return false;
    return std::all_of(e.args.begin(), e.args.end(), [](const ExprPtr& item) {
        return item->kind != ExprKind::NsRef && assignable(*item);
    });
}

ExprPtr Parser::parseAssignTarget(std::initializer_list<std::string_view> extraEnd,
                                  bool withNamespace)
{
    const uint32_t offset = cur().offset;
    ExprPtr target = parseTuple(true, true, extraEnd, false, withNamespace);
    if (!assignable(*target)) error(offset, "can't assign to this expression");
    return target;
}

bool Parser::isTupleEnd(std::initializer_list<std::string_view> extraEnd) const
{
    if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || isOp(")"))
        return true;
    for (std::string_view name : extraEnd)
        if (isName(name)) return true;
    return false;
}

ExprPtr Parser::parseTuple(bool simplified, bool withCondexpr,
                           std::initializer_list<std::string_view> extraEnd, bool explicitParens,
                           bool withNamespace)
{
    const uint32_t offset = cur().offset;
    std::vector<ExprPtr> args;
    bool isTuple = false;
    while (true) {
        if (!args.empty()) expectOp(",");
        if (isTupleEnd(extraEnd)) break;
        args.push_back(simplified ? parsePrimary(withNamespace) : parseExpression(withCondexpr));
        if (isOp(",")) {
            isTuple = true;
        } else {
            break;
        }
    }
    if (!isTuple) {
        if (!args.empty()) return std::move(args[0]);
        if (!explicitParens) unexpected("an expression");
    }
    auto e = node(ExprKind::Tuple, offset);
    e->args = std::move(args);
    return seal(std::move(e));
}

ExprPtr Parser::parseExpression(bool withCondexpr)
{
    return withCondexpr ? parseCondExpr() : parseOr();
}

ExprPtr Parser::parseCondExpr()
{
    ExprPtr expr = parseOr();
    while (isName("if")) {
        const uint32_t offset = cur().offset;
        next();
        auto e = node(ExprKind::CondExpr, offset);
        e->a = parseOr();
        e->b = std::move(expr);
        if (skipName("else")) {
            Nest nest(*this, offset);
            e->c = parseCondExpr();
        }
        expr = seal(std::move(e));
    }
    return expr;
}

ExprPtr Parser::parseBinaryChain(ExprKind kind, std::string_view word, ExprPtr (Parser::*operand)())
{
    ExprPtr left = (this->*operand)();
    while (isName(word)) {
        auto e = node(kind, cur().offset);
        next();
        e->a = std::move(left);
        e->b = (this->*operand)();
        left = seal(std::move(e));
    }
    return left;
}

ExprPtr Parser::parseNot()
{
    if (!isName("not")) return parseCompare();
    auto e = node(ExprKind::Not, cur().offset);
    Nest nest(*this, cur().offset);
    next();
    e->a = parseNot();
    return seal(std::move(e));
}

ExprPtr Parser::parseCompare()
{
    const uint32_t offset = cur().offset;
    ExprPtr expr = parseMath1();
    std::vector<std::pair<CompareOp, ExprPtr>> ops;
    while (true) {
        CompareOp op;
        if (isOp("=="))
            op = CompareOp::Eq;
        else if (isOp("!="))
            op = CompareOp::Ne;
        else if (isOp("<"))
            op = CompareOp::Lt;
        else if (isOp("<="))
            op = CompareOp::Le;
        else if (isOp(">"))
            op = CompareOp::Gt;
        else if (isOp(">="))
            op = CompareOp::Ge;
        else if (isName("in"))
            op = CompareOp::In;
        else if (isName("not") && peek().type == TokenType::Name && peek().text == "in") {
            next();
            op = CompareOp::NotIn;
        } else {
            break;
        }
        next();
        ops.emplace_back(op, parseMath1());
    }
    if (ops.empty()) return expr;
    auto e = node(ExprKind::Compare, offset);
    e->a = std::move(expr);
    e->comparisons = std::move(ops);
    return seal(std::move(e));
}

ExprPtr Parser::parseArithmetic(std::initializer_list<std::pair<std::string_view, BinaryOp>> ops,
                                ExprPtr (Parser::*operand)())
{
    ExprPtr left = (this->*operand)();
    while (cur().type == TokenType::Operator) {
        const auto it = std::find_if(ops.begin(), ops.end(),
                                     [&](const auto& op) { return op.first == cur().text; });
        if (it == ops.end()) break;
        auto e = node(ExprKind::Binary, cur().offset);
        e->binaryOp = it->second;
        next();
        e->a = std::move(left);
        e->b = (this->*operand)();
        left = seal(std::move(e));
    }
    return left;
}

ExprPtr Parser::parseMath1()
{
    return parseArithmetic({{"+", BinaryOp::Add}, {"-", BinaryOp::Sub}}, &Parser::parseConcat);
}

ExprPtr Parser::parseConcat()
{
    const uint32_t offset = cur().offset;
    ExprPtr first = parseMath2();
    if (!isOp("~")) return first;
    auto e = node(ExprKind::Concat, offset);
    e->args.push_back(std::move(first));
    while (isOp("~")) {
        next();
        e->args.push_back(parseMath2());
    }
    return seal(std::move(e));
}

ExprPtr Parser::parseMath2()
{
    return parseArithmetic({{"*", BinaryOp::Mul},
                            {"/", BinaryOp::Div},
                            {"//", BinaryOp::FloorDiv},
                            {"%", BinaryOp::Mod}},
                           &Parser::parsePow);
}

ExprPtr Parser::parseUnary(bool withFilter)
{
    ExprPtr e;
    if (isOp("-") || isOp("+")) {
        e = node(isOp("-") ? ExprKind::Neg : ExprKind::Pos, cur().offset);
        Nest nest(*this, cur().offset);
        next();
        e->a = parseUnary(false);
        e = seal(std::move(e));
    } else {
        e = parsePrimary(false);
    }
    e = parsePostfix(std::move(e));
    if (withFilter) e = parseFilterExpr(std::move(e));
    return e;
}

ExprPtr Parser::parsePrimary(bool withNamespace)
{
    const Token& t = cur();
    const uint32_t offset = t.offset;
    switch (t.type) {
    case TokenType::Name: {
        const std::string& name = t.text;
        if (name == "true" || name == "false" || name == "True" || name == "False") {
            auto e = node(ExprKind::Const, offset);
            e->constant = Value(name == "true" || name == "True");
            next();
            return seal(std::move(e));
        }
        if (name == "none" || name == "None") {
            auto e = node(ExprKind::Const, offset);
            e->constant = Value(nullptr);
            next();
            return seal(std::move(e));
        }
        if (!m_callables.empty()) {
            Stmt& callable = *m_callables.back();
            if (name == "varargs") callable.usesVarargs = true;
            if (name == "kwargs") callable.usesKwargs = true;
            if (name == "caller") callable.usesCaller = true;
        }
        if (name == "loop" && !m_loops.empty()) m_loops.back()->usesLoop = true;
        if (withNamespace && peek().type == TokenType::Operator && peek().text == ".") {
            auto e = node(ExprKind::NsRef, offset);
            e->name = name;
            next();
            next();
            e->attr = expectName();
            return seal(std::move(e));
        }
        auto e = node(ExprKind::Name, offset);
        e->name = name;
        next();
        return seal(std::move(e));
    }
    case TokenType::String: {
        std::string text;
        while (cur().type == TokenType::String) {
            text += cur().text;
            next();
        }
        auto e = node(ExprKind::Const, offset);
        e->constant = Value(std::move(text));
        return seal(std::move(e));
    }
    case TokenType::Integer:
    case TokenType::Float: {
        auto e = node(ExprKind::Const, offset);
        e->constant = t.type == TokenType::Integer ? Value(t.intValue) : Value(t.floatValue);
        next();
        return seal(std::move(e));
    }
    case TokenType::Operator: {
        Nest nest(*this, offset);
        if (t.text == "(") {
            next();
            ExprPtr e = parseTuple(false, true, {}, true);
            expectOp(")");
            return e;
        }
        if (t.text == "[") return parseList();
        if (t.text == "{") return parseDict();
        break;
    }
    default: break;
    }
    error(offset, "unexpected " + describe(t));
}

ExprPtr Parser::parseList()
{
    auto e = node(ExprKind::List, cur().offset);
    expectOp("[");
    while (!isOp("]")) {
        if (!e->args.empty()) expectOp(",");
        if (isOp("]")) break;
        e->args.push_back(parseExpression(true));
    }
    expectOp("]");
    return seal(std::move(e));
}

ExprPtr Parser::parseDict()
{
    auto e = node(ExprKind::Dict, cur().offset);
    expectOp("{");
    while (!isOp("}")) {
        if (!e->args.empty()) expectOp(",");
        if (isOp("}")) break;
        e->args.push_back(parseExpression(true));
        expectOp(":");
        e->args.push_back(parseExpression(true));
    }
    expectOp("}");
    return seal(std::move(e));
}

ExprPtr Parser::parsePostfix(ExprPtr e)
{
    while (true) {
        if (isOp(".") || isOp("[")) {
            e = parseSubscript(std::move(e));
        } else if (isOp("(")) {
            e = parseCall(std::move(e));
        } else {
            return e;
        }
    }
}

ExprPtr Parser::parseFilterExpr(ExprPtr e)
{
    while (true) {
        if (isOp("|")) {
            e = parseFilter(std::move(e), false);
        } else if (isName("is")) {
            e = parseTest(std::move(e));
        } else if (isOp("(")) {
            e = parseCall(std::move(e));
        } else {
            return e;
        }
    }
}

ExprPtr Parser::parseSubscript(ExprPtr object)
{
    const uint32_t offset = cur().offset;
    if (isOp(".")) {
        next();
        if (cur().type == TokenType::Name) {
            auto e = node(ExprKind::Getattr, offset);
            e->a = std::move(object);
            e->name = cur().text;
            next();
            return seal(std::move(e));
        }
        if (cur().type != TokenType::Integer) unexpected("a name or number");
        auto index = node(ExprKind::Const, cur().offset);
        index->constant = Value(cur().intValue);
        next();
        auto e = node(ExprKind::Getitem, offset);
        e->a = std::move(object);
        e->b = seal(std::move(index));
        return seal(std::move(e));
    }
    Nest nest(*this, offset);
    expectOp("[");
    std::vector<ExprPtr> args;
    while (!isOp("]")) {
        if (!args.empty()) expectOp(",");
        args.push_back(parseSubscribed());
    }
    expectOp("]");
    auto e = node(ExprKind::Getitem, offset);
    e->a = std::move(object);
    if (args.size() == 1) {
        e->b = std::move(args[0]);
    } else {
        auto tuple = node(ExprKind::Tuple, offset);
        tuple->args = std::move(args);
        e->b = seal(std::move(tuple));
    }
    return seal(std::move(e));
}

ExprPtr Parser::parseSubscribed()
{
    const uint32_t offset = cur().offset;
    ExprPtr start;
    if (isOp(":")) {
        next();
    } else {
        start = parseExpression(true);
        if (!isOp(":")) return start;
        next();
    }
    auto e = node(ExprKind::Slice, offset);
    e->a = std::move(start);
    if (!isOp(":") && !isOp("]") && !isOp(",")) e->b = parseExpression(true);
    if (isOp(":")) {
        next();
        if (!isOp("]") && !isOp(",")) e->c = parseExpression(true);
    }
    return seal(std::move(e));
}

void Parser::parseCallArgs(Expr& e)
{
    const uint32_t offset = cur().offset;
    Nest nest(*this, offset);
    expectOp("(");
    bool requireComma = false;
    auto ensure = [&](bool ok) {
        if (!ok) error(offset, "invalid syntax for function call expression");
    };
    while (!isOp(")")) {
        if (requireComma) {
            expectOp(",");
            if (isOp(")")) break;  // a trailing comma
        }
        if (isOp("*")) {
            ensure(!e.dynArgs && !e.dynKwargs);
            next();
            e.dynArgs = parseExpression(true);
        } else if (isOp("**")) {
            ensure(!e.dynKwargs);
            next();
            e.dynKwargs = parseExpression(true);
        } else if (cur().type == TokenType::Name && peek().type == TokenType::Operator &&
                   peek().text == "=") {
            ensure(!e.dynKwargs);
            std::string key = cur().text;
            next();
            next();
            e.kwargs.emplace_back(std::move(key), parseExpression(true));
        } else {
            ensure(!e.dynArgs && !e.dynKwargs && e.kwargs.empty());
            e.args.push_back(parseExpression(true));
        }
        requireComma = true;
    }
    expectOp(")");
}

ExprPtr Parser::parseCall(ExprPtr callee)
{
    auto e = node(ExprKind::Call, cur().offset);
    e->a = std::move(callee);
    parseCallArgs(*e);
    return seal(std::move(e));
}

std::string Parser::parseDottedName()
{
    std::string name = expectName();
    while (isOp(".")) {
        next();
        name += '.';
        name += expectName();
    }
    return name;
}

ExprPtr Parser::parseFilter(ExprPtr operand, bool startInline)
{
    while (isOp("|") || startInline) {
        if (!startInline) next();
        startInline = false;
        auto e = node(ExprKind::Filter, cur().offset);
        e->name = parseDottedName();
        if (!filterExists(e->name)) error(e->offset, "no filter named '" + e->name + "'");
        if (isOp("(")) parseCallArgs(*e);
        e->a = std::move(operand);
        operand = seal(std::move(e));
    }
    return operand;
}

ExprPtr Parser::parseTest(ExprPtr operand)
{
    const uint32_t offset = cur().offset;
    next();  // is
    const bool negated = skipName("not");
    auto e = node(ExprKind::Test, offset);
    const uint32_t nameOffset = cur().offset;
    e->name = parseDottedName();
    if (!testExists(e->name)) error(nameOffset, "no test named '" + e->name + "'");
    e->a = std::move(operand);
    const Token& t = cur();
    if (isOp("(")) {
        parseCallArgs(*e);
    } else if ((t.type == TokenType::Name || t.type == TokenType::String ||
                t.type == TokenType::Integer || t.type == TokenType::Float || isOp("[") ||
                isOp("{")) &&
               !isName("else") && !isName("or") && !isName("and")) {
        if (isName("is")) error(t.offset, "you cannot chain multiple tests with 'is'");
        Nest nest(*this, t.offset);
        e->args.push_back(parsePostfix(parsePrimary(false)));
    }
    ExprPtr test = seal(std::move(e));
    if (!negated) return test;
    auto n = node(ExprKind::Not, offset);
    n->a = std::move(test);
    return seal(std::move(n));
}

}  // namespace spillway::jinja::detail
