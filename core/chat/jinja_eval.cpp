// The evaluator: runs the syntax tree against a stack of scopes, counting every step and every
// byte it makes so that no template runs or grows without bound.
//
// Scoping follows Jinja: a for loop gives each iteration a fresh scope (a `set` inside does not
// outlive the iteration), `if` shares its enclosing scope, a macro sees the template's
// top-level names as they are when it is called.

#include <algorithm>
#include <ctime>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja::detail {

namespace {

// eval()/exec() frames nested at once. Real templates need a few dozen; the bound keeps the
// C++ stack within a few MiB on any thread.
constexpr int kMaxEvalDepth = 600;
// Lists and dicts inside one another, so that printing, comparing and freeing them stays
// within the stack too.
constexpr int kMaxValueDepth = 100;

}  // namespace

struct Interpreter::DepthGuard {
    explicit DepthGuard(Interpreter& interpreter) : in(interpreter)
    {
        if (++in.m_depth > kMaxEvalDepth)
            fail(TemplateError::Kind::Limit, in.m_offset,
                 "template recursion is deeper than " + std::to_string(kMaxEvalDepth) + " levels");
    }
    ~DepthGuard() { --in.m_depth; }
    Interpreter& in;
};

Interpreter::Interpreter(const Program& program, const RenderOptions& options)
    : m_program(program), m_options(options), m_limits(program.limits)
{
}

Interpreter::~Interpreter()
{
    // Namespaces may hold one another (even themselves); emptying them all breaks every cycle
    // and every long chain before the values are freed.
    for (const auto& ns : m_namespaces) {
        std::vector<std::pair<Value, Value>> entries = std::move(ns->entries);
        ns->entries.clear();
        ns->index.clear();
    }
}

std::string Interpreter::render(const Value& variables)
{
    addGlobals(m_globals);
    for (const auto& [key, value] : variables.entries())
        if (key.isString()) m_context.vars[key.str()] = value;
    std::string out;
    exec(m_program.body, m_root, out);
    return out;
}

std::tm Interpreter::now() const
{
    if (m_options.now) return *m_options.now;
    const std::time_t t = std::time(nullptr);
    std::tm local{};
    localtime_r(&t, &local);
    return local;
}

// ---- accounting ------------------------------------------------------------------------------

void Interpreter::step()
{
    if (++m_steps > m_limits.maxSteps)
        fail(TemplateError::Kind::Limit, m_offset,
             "template ran more than " + std::to_string(m_limits.maxSteps) +
                 " steps (a loop that does not end?)");
}

void Interpreter::charge(uint64_t bytes)
{
    if (bytes <= m_limits.maxWorkBytes - std::min(m_work, m_limits.maxWorkBytes)) {
        m_work += bytes;
        return;
    }
    fail(TemplateError::Kind::Limit, m_offset,
         "template made more than " + std::to_string(m_limits.maxWorkBytes) +
             " bytes of strings and lists");
}

void Interpreter::checkStringSize(uint64_t bytes) const
{
    if (bytes > m_limits.maxOutputBytes)
        fail(TemplateError::Kind::Limit, m_offset,
             "a string of " + std::to_string(bytes) + " bytes is longer than the limit of " +
                 std::to_string(m_limits.maxOutputBytes));
}

Value Interpreter::string(std::string s)
{
    checkStringSize(s.size());
    charge(s.size());
    return Value(std::move(s));
}

Value Interpreter::list(std::vector<Value> items, bool tuple)
{
    charge(items.size() * sizeof(Value));
    Value v = tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    if (v.depth() > kMaxValueDepth)
        runtimeError("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth) +
                     " levels");
    return v;
}

Value Interpreter::generator(std::vector<Value> items)
{
    Value v = list(std::move(items));
    static_cast<ListData*>(v.object().get())->generator = true;
    return v;
}

Value Interpreter::dictOf(std::vector<std::pair<Value, Value>> entries)
{
    charge(entries.size() * 2 * sizeof(Value));
    Value d = Value::dict();
    for (auto& [key, value] : entries) {
        if (hashKey(key).empty()) runtimeError("unhashable type: '" + typeName(key) + "'");
        d.set(key, std::move(value));
    }
    if (d.depth() > kMaxValueDepth)
        runtimeError("lists and dicts nest deeper than " + std::to_string(kMaxValueDepth) +
                     " levels");
    return d;
}

std::string Interpreter::str(const Value& v)
{
    std::string s = toStr(v, m_limits.maxOutputBytes);
    charge(s.size());
    return s;
}

Value Interpreter::newNamespace()
{
    auto data = std::make_shared<DictData>();
    m_namespaces.push_back(data);
    return Value::fromObject(Value::Kind::Namespace, std::move(data));
}

void Interpreter::emit(std::string& out, std::string_view text)
{
    if (out.size() + text.size() > m_limits.maxOutputBytes)
        fail(TemplateError::Kind::Limit, m_offset,
             "rendered text is longer than the limit of " +
                 std::to_string(m_limits.maxOutputBytes) + " bytes");
    charge(text.size());
    out.append(text);
}

// ---- statements ------------------------------------------------------------------------------

Flow Interpreter::exec(const Body& body, Scope& scope, std::string& out)
{
    for (const StmtPtr& s : body) {
        const Flow flow = execStmt(*s, scope, out);
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

Flow Interpreter::execStmt(const Stmt& s, Scope& scope, std::string& out)
{
    DepthGuard guard(*this);
    step();
    m_offset = s.offset;
    switch (s.kind) {
    case StmtKind::Text: emit(out, s.text); break;
    case StmtKind::Print: {
        const Value v = eval(*s.expr, scope);
        emit(out, v.isString() ? v.str() : str(v));
        break;
    }
    case StmtKind::If:
        for (const auto& [test, body] : s.branches)
            if (truthy(eval(*test, scope))) return exec(body, scope, out);
        return exec(s.elseBody, scope, out);
    case StmtKind::For: execFor(s, scope, out); break;
    case StmtKind::Set: assign(*s.target, eval(*s.expr, scope), scope); break;
    case StmtKind::SetBlock: {
        std::string captured;
        Scope inner(&scope);
        exec(s.body, inner, captured);
        Value v = string(std::move(captured));
        if (s.expr) v = evalFilterChain(*s.expr, scope, v);
        assign(*s.target, v, scope);
        break;
    }
    case StmtKind::Macro: scope.vars[s.name] = defineMacro(s); break;
    case StmtKind::CallBlock: execCallBlock(s, scope, out); break;
    case StmtKind::FilterBlock: {
        std::string captured;
        Scope inner(&scope);
        exec(s.body, inner, captured);
        const Value v = evalFilterChain(*s.expr, scope, string(std::move(captured)));
        emit(out, str(v));
        break;
    }
    case StmtKind::With: {
        Scope inner(&scope);
        std::vector<Value> values;
        for (const auto& [target, value] : s.assignments) values.push_back(eval(*value, scope));
        for (size_t i = 0; i < values.size(); ++i)
            assign(*s.assignments[i].first, values[i], inner);
        return exec(s.body, inner, out);
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Scope: return exec(s.body, scope, out);
    }
    return Flow::Normal;
}

void Interpreter::execFor(const Stmt& s, Scope& scope, std::string& out)
{
    std::vector<Value> items = iterate(eval(*s.expr, scope));
    if (s.test) {
        std::vector<Value> kept;
        for (Value& item : items) {
            step();
            Scope filter(&scope);
            assign(*s.target, item, filter);
            if (truthy(eval(*s.test, filter))) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        exec(s.elseBody, scope, out);
        return;
    }
    // As Jinja compiles it, the else block also runs when no iteration reached the end of the
    // body (each one ended in continue or break).
    bool completed = false;
    for (size_t i = 0; i < items.size(); ++i) {
        step();
        m_offset = s.offset;
        Scope iteration(&scope);
        assign(*s.target, items[i], iteration);
        if (s.usesLoop) iteration.vars["loop"] = makeLoop(i, items);
        const Flow flow = exec(s.body, iteration, out);
        if (flow == Flow::Normal) completed = true;
        if (flow == Flow::Break) break;
    }
    if (!completed) exec(s.elseBody, scope, out);
}

Value Interpreter::makeLoop(size_t index, const std::vector<Value>& items)
{
    const auto n = static_cast<int64_t>(items.size());
    const auto i = static_cast<int64_t>(index);
    std::vector<std::pair<Value, Value>> entries = {
        {"index", Value(i + 1)},    {"index0", Value(i)},
        {"revindex", Value(n - i)}, {"revindex0", Value(n - i - 1)},
        {"first", Value(i == 0)},   {"last", Value(i == n - 1)},
        {"length", Value(n)},       {"depth", Value(1)},
        {"depth0", Value(0)},
    };
    if (i > 0) entries.emplace_back("previtem", items[index - 1]);
    if (i + 1 < n) entries.emplace_back("nextitem", items[index + 1]);
    entries.emplace_back("cycle", makeFunction("loop.cycle", [index](Interpreter&, CallArgs& args) {
                             if (args.positional.empty())
                                 runtimeError("no items for cycling given");
                             return args.positional[index % args.positional.size()];
                         }));
    return dictOf(std::move(entries));
}

void Interpreter::assign(const Expr& target, const Value& value, Scope& scope)
{
    switch (target.kind) {
    case ExprKind::Name: scope.vars[target.name] = value; return;
    case ExprKind::NsRef: {
        const Value* ns = scope.lookup(target.name);
        if (!ns || !ns->isNamespace())
            runtimeError("cannot assign attribute on non-namespace object '" + target.name + "'");
        static_cast<DictData*>(ns->object().get())
            ->set("s" + target.attr, Value(target.attr), value);
        return;
    }
    case ExprKind::Tuple: {
        const std::vector<Value> items = iterate(value);
        const size_t want = target.args.size();
        if (items.size() > want)
            runtimeError("too many values to unpack (expected " + std::to_string(want) + ")");
        if (items.size() < want)
            runtimeError("not enough values to unpack (expected " + std::to_string(want) +
                         ", got " + std::to_string(items.size()) + ")");
        for (size_t i = 0; i < want; ++i) assign(*target.args[i], items[i], scope);
        return;
    }
    default: runtimeError("cannot assign to this expression");
    }
}

// ---- macros and call blocks ------------------------------------------------------------------

Value Interpreter::defineMacro(const Stmt& s)
{
    const Stmt* macro = &s;
    return makeFunction(s.name, [macro](Interpreter& in, CallArgs& args) {
        return in.callMacro(*macro, args, nullptr);
    });
}

Value Interpreter::callMacro(const Stmt& s, CallArgs& args, Scope* parent)
{
    struct CallGuard {
        explicit CallGuard(Interpreter& interpreter) : in(interpreter)
        {
            if (++in.m_callDepth > in.m_limits.maxCallDepth)
                fail(TemplateError::Kind::Limit, in.m_offset,
                     "macro calls nest deeper than " + std::to_string(in.m_limits.maxCallDepth));
        }
        ~CallGuard() { --in.m_callDepth; }
        Interpreter& in;
    } guard(*this);

    const std::string& name = s.kind == StmtKind::Macro ? s.name : std::string("caller");
    Scope local(parent ? parent : &m_root);
    const size_t nparams = s.params.size();
    std::vector<bool> bound(nparams, false);
    std::vector<Value> extra;
    for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < nparams) {
            local.vars[s.params[i]] = args.positional[i];
            bound[i] = true;
        } else {
            extra.push_back(args.positional[i]);
        }
    }
    if (!extra.empty() && !s.usesVarargs)
        runtimeError("macro '" + name + "' takes not more than " + std::to_string(nparams) +
                     " argument(s)");
    std::vector<std::pair<Value, Value>> extraNamed;
    Value caller;
    for (auto& [key, value] : args.named) {
        size_t index = 0;
        while (index < nparams && s.params[index] != key) ++index;
        if (index < nparams) {
            if (bound[index])
                runtimeError("macro '" + name + "' got multiple values for argument '" + key + "'");
            local.vars[key] = value;
            bound[index] = true;
        } else if (key == "caller" && s.usesCaller) {
            caller = value;
        } else if (s.usesKwargs) {
            extraNamed.emplace_back(Value(key), value);
        } else {
            runtimeError("macro '" + name + "' takes no keyword argument '" + key + "'");
        }
    }
    const size_t firstDefault = nparams - s.defaults.size();
    for (size_t i = 0; i < nparams; ++i) {
        if (bound[i]) continue;
        local.vars[s.params[i]] =
            i >= firstDefault
                ? eval(*s.defaults[i - firstDefault], local)
                : Value::undefined("parameter '" + s.params[i] + "' was not provided");
    }
    if (s.usesVarargs) local.vars["varargs"] = list(std::move(extra), true);
    if (s.usesKwargs) local.vars["kwargs"] = dictOf(std::move(extraNamed));
    if (s.usesCaller)
        local.vars["caller"] = caller.isUndefined() ? Value::undefined("No caller defined") : caller;
    std::string out;
    exec(s.body, local, out);
    return string(std::move(out));
}

void Interpreter::execCallBlock(const Stmt& s, Scope& scope, std::string& out)
{
    // The caller renders the block's body in the scope of the call site, which lives only as
    // long as this statement: afterwards (had it been stored away) it refuses to run.
    auto alive = std::make_shared<bool>(true);
    const Stmt* block = &s;
    Scope* site = &scope;
    const Value caller =
        makeFunction("caller", [block, site, alive](Interpreter& in, CallArgs& args) {
            if (!*alive) runtimeError("caller() used after its call block ended");
            return in.callMacro(*block, args, site);
        });
    struct Expire {
        ~Expire() { *flag = false; }
        std::shared_ptr<bool> flag;
    } expire{alive};
    const Value result = evalCall(*s.expr, scope, &caller);
    emit(out, str(result));
}

// ---- expressions -----------------------------------------------------------------------------

void Interpreter::collectArgs(const Expr& e, Scope& scope, CallArgs& args)
{
    for (const ExprPtr& arg : e.args) args.positional.push_back(eval(*arg, scope));
    if (e.dynArgs) {
        for (Value& item : iterate(eval(*e.dynArgs, scope)))
            args.positional.push_back(std::move(item));
    }
    for (const auto& [key, arg] : e.kwargs) args.named.emplace_back(key, eval(*arg, scope));
    if (e.dynKwargs) {
        const Value extra = eval(*e.dynKwargs, scope);
        if (!extra.isDict())
            runtimeError("argument after ** must be a mapping, not " + typeName(extra));
        for (const auto& [key, value] : extra.entries()) {
            if (!key.isString()) runtimeError("keywords must be strings");
            args.named.emplace_back(key.str(), value);
        }
    }
}

Value Interpreter::evalCall(const Expr& e, Scope& scope, const Value* caller)
{
    const Value callee = eval(*e.a, scope);
    CallArgs args;
    collectArgs(e, scope, args);
    if (caller) args.named.emplace_back("caller", *caller);
    m_offset = e.offset;
    return call(callee, args);
}

Value Interpreter::evalFilterChain(const Expr& e, Scope& scope, const Value& input)
{
    const Value operand = e.a ? evalFilterChain(*e.a, scope, input) : input;
    CallArgs args;
    collectArgs(e, scope, args);
    m_offset = e.offset;
    return applyFilter(e.name, operand, args);
}

Value Interpreter::eval(const Expr& e, Scope& scope)
{
    DepthGuard guard(*this);
    step();
    m_offset = e.offset;
    switch (e.kind) {
    case ExprKind::Const: return e.constant;
    case ExprKind::Name: {
        const Value* v = scope.lookup(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
        std::vector<Value> items;
        items.reserve(e.args.size());
        for (const ExprPtr& arg : e.args) items.push_back(eval(*arg, scope));
        return list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
        std::vector<std::pair<Value, Value>> entries;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
            Value key = eval(*e.args[i], scope);
            entries.emplace_back(std::move(key), eval(*e.args[i + 1], scope));
        }
        return dictOf(std::move(entries));
    }
    case ExprKind::Getattr: {
        const Value object = eval(*e.a, scope);
        m_offset = e.offset;
        return getAttr(object, e.name);
    }
    case ExprKind::Getitem: {
        const Value object = eval(*e.a, scope);
        if (e.b->kind == ExprKind::Slice) {
            const Expr& sl = *e.b;
            const Value start = sl.a ? eval(*sl.a, scope) : Value(nullptr);
            const Value stop = sl.b ? eval(*sl.b, scope) : Value(nullptr);
            const Value stride = sl.c ? eval(*sl.c, scope) : Value(nullptr);
            m_offset = e.offset;
            return slice(object, start, stop, stride);
        }
        const Value key = eval(*e.b, scope);
        m_offset = e.offset;
        return getItem(object, key);
    }
    case ExprKind::Call: return evalCall(e, scope, nullptr);
    case ExprKind::Filter:
    case ExprKind::Test: {
        const Value input = e.a ? eval(*e.a, scope) : Value();
        CallArgs args;
        collectArgs(e, scope, args);
        m_offset = e.offset;
        if (e.kind == ExprKind::Filter) return applyFilter(e.name, input, args);
        return Value(applyTest(e.name, input, args));
    }
    case ExprKind::Not: return Value(!truthy(eval(*e.a, scope)));
    case ExprKind::Neg:
    case ExprKind::Pos: return unary(e.kind, eval(*e.a, scope));
    case ExprKind::Binary: {
        const Value left = eval(*e.a, scope);
        const Value right = eval(*e.b, scope);
        m_offset = e.offset;
        return binary(e.binaryOp, left, right);
    }
    case ExprKind::Concat: {
        std::string text;
        for (const ExprPtr& arg : e.args) {
            const Value part = eval(*arg, scope);
            if (part.isString()) {
                checkStringSize(text.size() + part.str().size());
                text += part.str();
            } else {
                text += toStr(part, m_limits.maxOutputBytes - text.size());
            }
        }
        return string(std::move(text));
    }
    case ExprKind::And: {
        Value left = eval(*e.a, scope);
        return truthy(left) ? eval(*e.b, scope) : left;
    }
    case ExprKind::Or: {
        Value left = eval(*e.a, scope);
        return truthy(left) ? left : eval(*e.b, scope);
    }
    case ExprKind::Compare: {
        Value left = eval(*e.a, scope);
        for (const auto& [op, operand] : e.comparisons) {
            Value right = eval(*operand, scope);
            m_offset = e.offset;
            if (!compare(op, left, right)) return Value(false);
            left = std::move(right);
        }
        return Value(true);
    }
    case ExprKind::CondExpr:
        if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
        return e.c ? eval(*e.c, scope)
                   : Value::undefined("the condition was false and there is no else");
    case ExprKind::NsRef:
    case ExprKind::Slice: break;
    }
    runtimeError("this expression cannot be evaluated here");
}

}  // namespace spillway::jinja::detail
