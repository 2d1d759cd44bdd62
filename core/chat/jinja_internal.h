#pragma once
// Internals of the template engine shared by its source files: the error it unwinds with, the
// tokens, the syntax tree, callables and the Python-semantics helpers. Not a public interface:
// include core/chat/jinja.h instead.
//
// Inside the engine an error unwinds as a TemplateError exception (the interpreter is a deep
// recursion, and Jinja itself works this way); Template::parse() and Template::render() catch
// every one and return it as an Error, so none crosses the module's interface.

#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/chat/jinja.h"

namespace spillway::jinja::detail {

constexpr uint32_t kNoOffset = UINT32_MAX;

struct TemplateError {
    enum class Kind { Syntax, Runtime, Raised, Limit };
    Kind kind = Kind::Runtime;
    std::string message;
    uint32_t offset = kNoOffset;  // byte offset in the newline-normalized source
};

// Joins strings into one. (GCC 12 misreports `"literal" + std::string&&` under -Wrestrict.)
template <typename... Parts>
std::string cat(const Parts&... parts)
{
    std::string out;
    (out.append(std::string_view(parts)), ...);
    return out;
}

[[noreturn]] void fail(TemplateError::Kind kind, uint32_t offset, std::string message);
[[noreturn]] inline void runtimeError(std::string message)
{
    fail(TemplateError::Kind::Runtime, kNoOffset, std::move(message));
}

// ---- tokens -------------------------------------------------------------------------------

enum class TokenType : uint8_t {
    Text,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    End,
};

struct Token {
    TokenType type = TokenType::End;
    uint32_t offset = 0;
    std::string text;  // Text: the data; Name; String: the decoded value; Operator: "+", "//"...
    int64_t intValue = 0;
    double floatValue = 0;
};

// `source` with its newlines already normalized to "\n" (normalizeSource()).
std::vector<Token> tokenize(std::string_view source, const Syntax& syntax);
// "\r\n" and "\r" become "\n"; one trailing newline goes unless keepTrailingNewline (as Jinja).
std::string normalizeSource(std::string_view source, bool keepTrailingNewline);

// ---- syntax tree --------------------------------------------------------------------------

enum class ExprKind : uint8_t {
    Const,
    Name,
    NsRef,
    List,
    Tuple,
    Dict,
    Getattr,
    Getitem,
    Slice,
    Call,
    Filter,
    Test,
    Not,
    Neg,
    Pos,
    Binary,
    Concat,
    And,
    Or,
    Compare,
    CondExpr,
};
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One node kind with the fields its kind uses:
//   Const: constant          Name: name              NsRef: name.attr (a set target)
//   List/Tuple: args         Dict: args (key, value, key, value...)
//   Getattr: a.name          Getitem: a[b] (b may be a Slice)   Slice: a:b:c (null parts)
//   Call: a(args, kwargs, *dynArgs, **dynKwargs)
//   Filter: a | name(args...) (a is null in filter blocks)     Test: a is name(args...)
//   Not/Neg/Pos: a           Binary: a op b          Concat: args joined with ~
//   And/Or: a, b             Compare: a, then (op, operand) pairs
//   CondExpr: b if a else c (c null: undefined)
struct Expr {
    ExprKind kind = ExprKind::Const;
    BinaryOp binaryOp = BinaryOp::Add;
    uint32_t offset = 0;
    int depth = 1;  // height of this subtree, bounded by Limits::maxNesting
    Value constant;
    std::string name;
    std::string attr;
    ExprPtr a, b, c;
    ExprPtr dynArgs, dynKwargs;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    std::vector<std::pair<CompareOp, ExprPtr>> comparisons;
};

enum class StmtKind : uint8_t {
    Text,
    Print,
    If,
    For,
    Set,
    SetBlock,
    Macro,
    CallBlock,
    FilterBlock,
    With,
    Break,
    Continue,
    Scope,  // a body rendered in place ({% generation %}, {% autoescape %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
    StmtKind kind = StmtKind::Text;
    uint32_t offset = 0;
    std::string text;  // Text
    ExprPtr expr;    // Print; Set value; For iterable; CallBlock call; SetBlock/FilterBlock filter
    ExprPtr target;  // Set, SetBlock and For targets: Name, NsRef or Tuple of Names
    ExprPtr test;    // For ... if test
    std::vector<std::pair<ExprPtr, Body>> branches;  // If and its elifs
    Body body, elseBody;
    // Macro and CallBlock signatures.
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // for the last defaults.size() params
    bool usesVarargs = false, usesKwargs = false, usesCaller = false;
    bool usesLoop = false;                                 // For: the body reads `loop`
    std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // With
};

Body parseTokens(const std::vector<Token>& tokens, const Limits& limits);

struct Program {
    std::string source;  // newline-normalized
    Body body;
    Limits limits;
    std::vector<uint32_t> lineStarts;  // offsets where lines begin
};

// "line 3, column 7" (column in characters, both from 1) for an offset in program.source.
std::string describePosition(const Program& program, uint32_t offset);

// ---- callables ----------------------------------------------------------------------------

class Interpreter;

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;

    // The argument at `position` or named `name`; nullptr when not given.
    const Value* get(size_t position, std::string_view name) const;
    // Fails for positional arguments past `maxPositional` or names not in `allowed`.
    void expectAtMost(std::string_view what, size_t maxPositional,
                      std::initializer_list<std::string_view> allowed) const;
};

struct Function {
    std::string name;
    std::function<Value(Interpreter&, CallArgs&)> call;
};

Value makeFunction(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);

// ---- Python semantics for values (jinja_value.cpp) -------------------------------------------

// Printing, comparing or serializing deeper than this fails: only a namespace that holds itself
// (directly or through lists and dicts) gets there.
constexpr int kMaxWalkDepth = 200;
void checkWalkDepth(int depth);

bool truthy(const Value& v);
// str(v): what {{ v }} prints ("" for Undefined); fails past maxBytes.
std::string toStr(const Value& v, size_t maxBytes = SIZE_MAX);
std::string repr(const Value& v, size_t maxBytes = SIZE_MAX);  // repr(v), as inside a list
std::string typeName(const Value& v);  // Python's name of the type: 'int', 'str', 'NoneType'...
bool equals(const Value& a, const Value& b);
// a < b as Python orders numbers, strings, lists and tuples; fails for other pairs.
bool lessThan(const Value& a, const Value& b, std::string_view op);
std::string formatFloat(double v);  // repr(float): "1.0", "0.1", "1e+16", "inf"

struct JsonStyle {
    int indent = -1;         // < 0: one line
    std::string indentText;  // used instead of `indent` spaces when not empty
    std::string itemSeparator = ", ";
    std::string keySeparator = ": ";
    bool sortKeys = false;
    bool ensureAscii = false;
};
// json.dumps(v) with transformers' defaults (ensure_ascii=False); fails for values JSON cannot
// hold (Undefined, callables) and when the text would pass `maxBytes`.
std::string toJson(const Value& v, const JsonStyle& style, size_t maxBytes);

// Python's str on UTF-8 text: characters are code points, an invalid byte counts as one.
size_t charCount(std::string_view s);
std::vector<std::string_view> splitChars(std::string_view s);
bool isSpaceChar(std::string_view s, size_t pos, size_t* length);  // str.isspace() of one char
std::string pyStrip(std::string_view s, const Value* chars, bool left, bool right);

// Text case as Python's str methods change it (ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic letters; other characters are left as they are).
std::string upperText(std::string_view s);
std::string lowerText(std::string_view s);
std::string capitalizeText(std::string_view s);  // str.capitalize()
std::string pyTitleText(std::string_view s);     // str.title()
std::string jinjaTitleText(std::string_view s);  // the title filter (words split at -, space, ([{<)
// str.replace(): `count` < 0 for all; checks the size of the result before building it.
Value replaceString(Interpreter& in, const std::string& s, const std::string& from,
                    const std::string& to, int64_t count);
char32_t upperOf(char32_t c);
char32_t lowerOf(char32_t c);
bool isCased(char32_t c);
// The code point at s[pos] and its length in bytes (U+FFFD and 1 for an invalid byte).
char32_t decodeChar(std::string_view s, size_t pos, size_t* length);

// ---- the evaluator (jinja_eval.cpp, jinja_ops.cpp) ----------------------------------------

struct Scope {
    explicit Scope(Scope* p = nullptr) : parent(p) {}
    const Value* lookup(const std::string& name) const;

    Scope* parent;
    std::unordered_map<std::string, Value> vars;
};

enum class Flow { Normal, Break, Continue };

// The error an Undefined stands for ("'x' is undefined"), raised when one is used.
[[noreturn]] void undefinedError(const Value& undefined);

class Interpreter {
public:
    Interpreter(const Program& program, const RenderOptions& options);
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;

    std::string render(const Value& variables);
    uint32_t lastOffset() const { return m_offset; }

    const Limits& limits() const { return m_limits; }
    std::tm now() const;

    // Work accounting: every operation is a step; every string or list made is charged.
    void step();
    void charge(uint64_t bytes);
    // Fails when one string of `bytes` would pass the output limit (checked before building).
    void checkStringSize(uint64_t bytes) const;
    Value string(std::string s);
    Value list(std::vector<Value> items, bool tuple = false);
    Value generator(std::vector<Value> items);
    Value dictOf(std::vector<std::pair<Value, Value>> entries);
    std::string str(const Value& v);
    Value newNamespace();

    // Python and Jinja operations (jinja_ops.cpp).
    Value binary(BinaryOp op, const Value& a, const Value& b);
    Value unary(ExprKind kind, const Value& v);
    bool compare(CompareOp op, const Value& a, const Value& b);
    bool contains(const Value& container, const Value& item);
    Value getAttr(const Value& object, const std::string& name);
    Value getItem(const Value& object, const Value& key);
    Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
    std::vector<Value> iterate(const Value& v);
    int64_t length(const Value& v);
    Value call(const Value& callee, CallArgs& args);

    // Built-ins by name (jinja_builtins.cpp).
    Value applyFilter(const std::string& name, const Value& input, CallArgs& args);
    bool applyTest(const std::string& name, const Value& input, CallArgs& args);

private:
    Flow exec(const Body& body, Scope& scope, std::string& out);
    Flow execStmt(const Stmt& s, Scope& scope, std::string& out);
    void execFor(const Stmt& s, Scope& scope, std::string& out);
    void execCallBlock(const Stmt& s, Scope& scope, std::string& out);
    Value eval(const Expr& e, Scope& scope);
    Value evalCall(const Expr& e, Scope& scope, const Value* caller);
    Value evalFilterChain(const Expr& e, Scope& scope, const Value& input);
    void collectArgs(const Expr& e, Scope& scope, CallArgs& args);
    void assign(const Expr& target, const Value& value, Scope& scope);
    void emit(std::string& out, std::string_view text);
    Value defineMacro(const Stmt& s);
    Value callMacro(const Stmt& s, CallArgs& args, Scope* callerScope);
    Value makeLoop(size_t index, const std::vector<Value>& items);

    struct DepthGuard;

    const Program& m_program;
    const RenderOptions& m_options;
    const Limits& m_limits;
    Scope m_globals;
    Scope m_context{&m_globals};
    Scope m_root{&m_context};
    uint64_t m_steps = 0;
    uint64_t m_work = 0;
    int m_depth = 0;      // eval/exec recursion
    int m_callDepth = 0;  // macro calls
    uint32_t m_offset = 0;
    std::vector<std::shared_ptr<DictData>> m_namespaces;
};

void addGlobals(Scope& globals);
// Whether a filter or test of that name exists (Jinja rejects unknown ones when it compiles).
bool filterExists(const std::string& name);
bool testExists(const std::string& name);

}  // namespace spillway::jinja::detail
