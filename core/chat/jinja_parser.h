#pragma once
// The parser of the template engine, shared by jinja_parser.cpp (statements) and
// jinja_expressions.cpp (expressions). Internal: see core/chat/jinja.h.

#include <algorithm>
#include <initializer_list>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja::detail {

// Tokens to a syntax tree, after jinja2/parser.py: the same precedence and the same quirks
// (filters and tests bind tighter than arithmetic, `-x ** 2` is `(-x) ** 2`, an `if` test is
// parsed without conditional expressions). Nesting is bounded by Limits::maxNesting so that a
// hostile template cannot exhaust the stack, here or in the evaluator.
class Parser {
public:
    Parser(const std::vector<Token>& tokens, const Limits& limits)
        : m_tokens(tokens), m_limits(limits), m_maxHeight(std::max(4 * limits.maxNesting, 8))
    {
    }

    Body parseTemplate();

private:
    // ---- token stream ----

    const Token& cur() const { return m_tokens[m_pos]; }
    const Token& peek() const { return m_tokens[std::min(m_pos + 1, m_tokens.size() - 1)]; }
    void next()
    {
        if (m_pos + 1 < m_tokens.size()) ++m_pos;
    }
    bool isName(std::string_view name) const;
    bool isOp(std::string_view op) const;
    bool skipName(std::string_view name);
    static std::string describe(const Token& t);
    [[noreturn]] void error(uint32_t offset, std::string message) const;
    [[noreturn]] void unexpected(std::string_view expected) const;
    void expectOp(std::string_view op);
    std::string expectName();
    void expectEndTag(std::string_view name);
    void expectBlockEnd();

    // Counts nested blocks and parser recursion.
    struct Nest {
        Nest(Parser& p, uint32_t offset) : parser(p)
        {
            if (++parser.m_nesting > parser.m_limits.maxNesting)
                parser.error(offset, "template nests more than " +
                                         std::to_string(parser.m_limits.maxNesting) +
                                         " blocks or expressions deep");
        }
        ~Nest() { --parser.m_nesting; }
        Parser& parser;
    };
    ExprPtr node(ExprKind kind, uint32_t offset) const;

    // Records the height of a finished node; left-deep chains (a + b + c..., x|f|g...) are
    // built in loops, so the recursion guard alone does not bound them.
    ExprPtr seal(ExprPtr e) const;

    // ---- statements ----

    Body subparse(std::initializer_list<std::string_view> endTags);
    StmtPtr newStmt(StmtKind kind, uint32_t offset) const;
    StmtPtr parseStatement();
    StmtPtr parseFor();
    StmtPtr parseIf();
    StmtPtr parseSet();
    void parseSignature(Stmt& s);

    // Bodies of macros and call blocks: loops outside them do not count, and their use of
    // varargs/kwargs/caller is recorded.
    Body parseCallableBody(Stmt& s, std::string_view endTag);
    StmtPtr parseMacro();
    StmtPtr parseCallBlock();
    StmtPtr parseFilterBlock();
    StmtPtr parseWith();

    // ---- expressions ----

    static bool assignable(const Expr& e);
    ExprPtr parseAssignTarget(std::initializer_list<std::string_view> extraEnd, bool withNamespace);
    bool isTupleEnd(std::initializer_list<std::string_view> extraEnd) const;
    ExprPtr parseTuple(bool simplified, bool withCondexpr,
                       std::initializer_list<std::string_view> extraEnd, bool explicitParens,
                       bool withNamespace = false);
    ExprPtr parseExpression(bool withCondexpr);
    ExprPtr parseCondExpr();
    ExprPtr parseBinaryChain(ExprKind kind, std::string_view word, ExprPtr (Parser::*operand)());
    ExprPtr parseOr() { return parseBinaryChain(ExprKind::Or, "or", &Parser::parseAnd); }
    ExprPtr parseAnd() { return parseBinaryChain(ExprKind::And, "and", &Parser::parseNot); }

    ExprPtr parseNot();
    ExprPtr parseCompare();
    ExprPtr parseArithmetic(std::initializer_list<std::pair<std::string_view, BinaryOp>> ops,
                            ExprPtr (Parser::*operand)());
    ExprPtr parseMath1();
    ExprPtr parseConcat();
    ExprPtr parseMath2();
    ExprPtr parsePow()
    {
        return parseArithmetic({{"**", BinaryOp::Pow}}, &Parser::parseUnaryFiltered);
    }
    ExprPtr parseUnaryFiltered() { return parseUnary(true); }

    ExprPtr parseUnary(bool withFilter);
    ExprPtr parsePrimary(bool withNamespace);
    ExprPtr parseList();
    ExprPtr parseDict();
    ExprPtr parsePostfix(ExprPtr e);
    ExprPtr parseFilterExpr(ExprPtr e);
    ExprPtr parseSubscript(ExprPtr object);
    ExprPtr parseSubscribed();
    void parseCallArgs(Expr& e);
    ExprPtr parseCall(ExprPtr callee);
    std::string parseDottedName();

    // `| name(args)...`; with startInline the first filter has no `|` (filter blocks).
    ExprPtr parseFilter(ExprPtr operand, bool startInline);
    ExprPtr parseTest(ExprPtr operand);

    const std::vector<Token>& m_tokens;
    const Limits& m_limits;
    const int m_maxHeight;
    size_t m_pos = 0;
    int m_nesting = 0;
    int m_loopDepth = 0;
    std::vector<Stmt*> m_callables;  // macros and call blocks being parsed, innermost last
    std::vector<Stmt*> m_loops;      // for loops whose bodies are being parsed, innermost last
};

}  // namespace spillway::jinja::detail
