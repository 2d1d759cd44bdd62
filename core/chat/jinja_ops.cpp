// Operations on values as Python and Jinja define them: arithmetic (floor division and modulo
// rounding toward negative infinity, overflow as an error rather than a big integer),
// comparisons, `in`, attribute and item lookup (attribute first for `.`, item first for `[]`,
// missing ones Undefined), slicing, iteration and calls.

#include <algorithm>
#include <cmath>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja::detail {

const Value* Scope::lookup(const std::string& name) const
{
    for (const Scope* s = this; s; s = s->parent) {
        auto it = s->vars.find(name);
        if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
}

void undefinedError(const Value& undefined)
{
    runtimeError(undefined.str().empty() ? "undefined value" : undefined.str());
}

Value makeFunction(std::string name, std::function<Value(Interpreter&, CallArgs&)> call)
{
    auto fn = std::make_shared<Function>();
    fn->name = std::move(name);
    fn->call = std::move(call);
    return Value::fromObject(Value::Kind::Function, std::move(fn));
}

const Value* CallArgs::get(size_t position, std::string_view name) const
{
    if (position < positional.size()) return &positional[position];
    for (const auto& [key, value] : named)
        if (key == name) return &value;
    return nullptr;
}

void CallArgs::expectAtMost(std::string_view what, size_t maxPositional,
                            std::initializer_list<std::string_view> allowed) const
{
    if (positional.size() > maxPositional)
        runtimeError(std::string(what) + " takes at most " + std::to_string(maxPositional) +
                     " positional argument(s), got " + std::to_string(positional.size()));
    for (const auto& [key, value] : named)
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
            runtimeError(std::string(what) + " got an unexpected keyword argument '" + key + "'");
}

namespace {

bool intLike(const Value& v)
{
    return v.isInt() || v.isBool();
}
int64_t intOf(const Value& v)
{
    return v.isBool() ? (v.boolValue() ? 1 : 0) : v.intValue();
}

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b)
{
    runtimeError("unsupported operand type(s) for " + std::string(op) + ": '" + typeName(a) +
                 "' and '" + typeName(b) + "'");
}

[[noreturn]] void overflow()
{
    runtimeError("integer result is too large");
}

int64_t floorDiv(int64_t a, int64_t b)
{
    if (b == 0) runtimeError("integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) overflow();
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
}

int64_t floorMod(int64_t a, int64_t b)
{
    if (b == 0) runtimeError("integer division or modulo by zero");
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// CPython's float divmod.
void floatDivMod(double a, double b, double* floorDiv, double* mod)
{
    if (b == 0.0) runtimeError("float division by zero");
    double m = std::fmod(a, b);
    double div = (a - m) / b;
    if (m != 0.0) {
        if ((b < 0) != (m < 0)) {
            m += b;
            div -= 1.0;
        }
    } else {
        m = std::copysign(0.0, b);
    }
    double fd;
    if (div != 0.0) {
        fd = std::floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = std::copysign(0.0, a / b);
    }
    *floorDiv = fd;
    *mod = m;
}

Value intPow(int64_t base, int64_t exponent)
{
    if (exponent < 0) {
        if (base == 0) runtimeError("0.0 cannot be raised to a negative power");
        return Value(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    }
    int64_t result = 1;
    int64_t b = base;
    while (exponent > 0) {
        if (exponent & 1) {
            if (__builtin_mul_overflow(result, b, &result)) overflow();
        }
        exponent >>= 1;
        if (exponent > 0 && __builtin_mul_overflow(b, b, &b)) overflow();
    }
    return Value(result);
}

}  // namespace

Value Interpreter::binary(BinaryOp op, const Value& a, const Value& b)
{
    if (a.isUndefined()) undefinedError(a);
    if (b.isUndefined()) undefinedError(b);
    static constexpr const char* kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
    const char* symbol = kSymbols[static_cast<int>(op)];

    if (a.isNumber() && b.isNumber()) {
        const bool ints = intLike(a) && intLike(b);
        const int64_t x = ints ? intOf(a) : 0;
        const int64_t y = ints ? intOf(b) : 0;
        const double fx = a.numberValue();
        const double fy = b.numberValue();
        int64_t r = 0;
        switch (op) {
        case BinaryOp::Add:
            if (!ints) return Value(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) overflow();
            return Value(r);
        case BinaryOp::Sub:
            if (!ints) return Value(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) overflow();
            return Value(r);
        case BinaryOp::Mul:
            if (!ints) return Value(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) overflow();
            return Value(r);
        case BinaryOp::Div:
            if (fy == 0.0) runtimeError("division by zero");
            return Value(fx / fy);
        case BinaryOp::FloorDiv:
        case BinaryOp::Mod: {
            if (ints) return Value(op == BinaryOp::FloorDiv ? floorDiv(x, y) : floorMod(x, y));
            double fd = 0, m = 0;
            floatDivMod(fx, fy, &fd, &m);
            return Value(op == BinaryOp::FloorDiv ? fd : m);
        }
        case BinaryOp::Pow: {
            if (ints) return intPow(x, y);
            if (fx == 0.0 && fy < 0) runtimeError("0.0 cannot be raised to a negative power");
            if (fx < 0 && std::floor(fy) != fy) runtimeError("complex results are not supported");
            return Value(std::pow(fx, fy));
        }
        }
    }
    if (op == BinaryOp::Add && a.isString() && b.isString()) {
        checkStringSize(a.str().size() + b.str().size());
        return string(a.str() + b.str());
    }
    if (op == BinaryOp::Add && a.isList() && b.isList() && a.isTuple() == b.isTuple() &&
        !a.isGenerator() && !b.isGenerator()) {
        std::vector<Value> items = a.items();
        charge(b.items().size() * sizeof(Value));
        items.insert(items.end(), b.items().begin(), b.items().end());
        return list(std::move(items), a.isTuple());
    }
    const bool repeatable = (a.isString() || b.isString() || a.isList() || b.isList()) &&
                            !a.isGenerator() && !b.isGenerator();
    if (op == BinaryOp::Mul && (intLike(a) || intLike(b)) && repeatable) {
        const Value& seq = intLike(a) ? b : a;
        const int64_t count = std::max<int64_t>(0, intOf(intLike(a) ? a : b));
        if (seq.isString()) {
            const uint64_t size = seq.str().size();
            uint64_t total = 0;
            if (__builtin_mul_overflow(size, static_cast<uint64_t>(count), &total))
                total = UINT64_MAX;
            checkStringSize(total);
            std::string out;
            out.reserve(size * static_cast<uint64_t>(count));
            for (int64_t i = 0; i < count; ++i) out += seq.str();
            return string(std::move(out));
        }
        const uint64_t size = seq.items().size();
        uint64_t total = 0;
        if (__builtin_mul_overflow(size * sizeof(Value), static_cast<uint64_t>(count), &total))
            total = UINT64_MAX;
        charge(total);
        std::vector<Value> items;
        items.reserve(size * static_cast<uint64_t>(count));
        for (int64_t i = 0; i < count; ++i)
            items.insert(items.end(), seq.items().begin(), seq.items().end());
        return list(std::move(items), seq.isTuple());
    }
    if (op == BinaryOp::Mod && a.isString())
        runtimeError("%-formatting of strings is not supported");
    unsupported(symbol, a, b);
}

Value Interpreter::unary(ExprKind kind, const Value& v)
{
    if (v.isUndefined()) undefinedError(v);
    if (!v.isNumber())
        runtimeError(std::string("bad operand type for unary ") +
                     (kind == ExprKind::Neg ? "-" : "+") + ": '" + typeName(v) + "'");
    if (v.isFloat()) return Value(kind == ExprKind::Neg ? -v.floatValue() : v.floatValue());
    const int64_t x = intOf(v);
    if (kind == ExprKind::Pos) return Value(x);
    if (x == INT64_MIN) overflow();
    return Value(-x);
}

bool Interpreter::compare(CompareOp op, const Value& a, const Value& b)
{
    switch (op) {
    case CompareOp::Eq: return equals(a, b);
    case CompareOp::Ne: return !equals(a, b);
    case CompareOp::In: return contains(b, a);
    case CompareOp::NotIn: return !contains(b, a);
    default: break;
    }
    if (a.isUndefined()) undefinedError(a);
    if (b.isUndefined()) undefinedError(b);
    if (a.isNumber() && b.isNumber() && !(intLike(a) && intLike(b))) {
        const double x = a.numberValue(), y = b.numberValue();
        switch (op) {
        case CompareOp::Lt: return x < y;
        case CompareOp::Le: return x <= y;
        case CompareOp::Gt: return x > y;
        default: return x >= y;
        }
    }
    switch (op) {
    case CompareOp::Lt: return lessThan(a, b, "<");
    case CompareOp::Le: return lessThan(a, b, "<=") || equals(a, b);
    case CompareOp::Gt: return lessThan(b, a, ">");
    default: return lessThan(b, a, ">=") || equals(a, b);
    }
}

bool Interpreter::contains(const Value& container, const Value& item)
{
    switch (container.kind()) {
    case Value::Kind::String:
        if (!item.isString())
            runtimeError("'in <string>' requires string as left operand, not " + typeName(item));
        return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
        for (const Value& element :
             container.isGenerator() ? iterate(container) : container.items()) {
            step();
            if (equals(element, item)) return true;
        }
        return false;
    case Value::Kind::Dict: {
        const std::string key = hashKey(item);
        if (key.empty()) runtimeError("unhashable type: '" + typeName(item) + "'");
        return static_cast<const DictData*>(container.object().get())->find(key) != nullptr;
    }
    case Value::Kind::Undefined: return false;
    default: runtimeError("argument of type '" + typeName(container) + "' is not iterable");
    }
}

Value stringMethod(Interpreter& in, const Value& self, const std::string& name);
Value dictMethod(Interpreter& in, const Value& self, const std::string& name);

Value Interpreter::getAttr(const Value& object, const std::string& name)
{
    switch (object.kind()) {
    case Value::Kind::Undefined: undefinedError(object);
    case Value::Kind::String: return stringMethod(*this, object, name);
    case Value::Kind::List:
        if (!object.isGenerator() && (name == "count" || name == "index")) {
            return makeFunction("list." + name, [object, name](Interpreter& in, CallArgs& args) {
                const Value* x = args.get(0, "value");
                if (!x) runtimeError(name + "() takes exactly one argument (0 given)");
                int64_t count = 0;
                for (size_t i = 0; i < object.items().size(); ++i) {
                    in.step();
                    if (!equals(object.items()[i], *x)) continue;
                    if (name == "index") return Value(static_cast<int64_t>(i));
                    ++count;
                }
                if (name == "index") runtimeError(repr(*x, 200) + " is not in list");
                return Value(count);
            });
        }
        return Value::undefined(
            cat("'", typeName(object), " object' has no attribute '", name, "'"));
    case Value::Kind::Dict: {
        Value method = dictMethod(*this, object, name);
        if (!method.isUndefined()) return method;
        if (const Value* v = object.find(name)) return *v;
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::Namespace:
        if (const Value* v = object.find(name)) return *v;
        return Value::undefined("'Namespace' object has no attribute '" + name + "'");
    default:
        return Value::undefined(
            cat("'", typeName(object), " object' has no attribute '", name, "'"));
    }
}

Value Interpreter::getItem(const Value& object, const Value& key)
{
    switch (object.kind()) {
    case Value::Kind::Undefined: undefinedError(object);
    case Value::Kind::List:
    case Value::Kind::String: {
        if (object.isGenerator()) runtimeError("'generator' object is not subscriptable");
        if (!intLike(key)) {
            if (key.isString()) return getAttr(object, key.str());
            break;
        }
        int64_t index = intOf(key);
        if (object.isList()) {
            const auto n = static_cast<int64_t>(object.items().size());
            if (index < 0) index += n;
            if (index >= 0 && index < n) return object.items()[static_cast<size_t>(index)];
        } else {
            std::vector<std::string_view> chars = splitChars(object.str());
            const auto n = static_cast<int64_t>(chars.size());
            if (index < 0) index += n;
            if (index >= 0 && index < n)
                return string(std::string(chars[static_cast<size_t>(index)]));
        }
        return Value::undefined(
            cat("'", typeName(object), " object' has no element ", std::to_string(intOf(key))));
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
        const std::string hash = hashKey(key);
        if (!hash.empty()) {
            if (const Value* v = static_cast<const DictData*>(object.object().get())->find(hash))
                return *v;
        }
        if (key.isString()) {
            if (object.isDict()) {
                Value method = dictMethod(*this, object, key.str());
                if (!method.isUndefined()) return method;
            }
            return Value::undefined(
                cat("'", typeName(object), " object' has no attribute '", key.str(), "'"));
        }
        break;
    }
    default: break;
    }
    return Value::undefined(cat("'", typeName(object), " object' has no element ", repr(key, 200)));
}

Value Interpreter::slice(const Value& object, const Value& start, const Value& stop,
                         const Value& stride)
{
    // Jinja compiles a slice to Python's own subscript: anything but a sequence fails.
    if (object.isUndefined()) undefinedError(object);
    if (object.isDict() || object.isNamespace()) runtimeError("unhashable type: 'slice'");
    if ((!object.isList() && !object.isString()) || object.isGenerator())
        runtimeError(cat("'", typeName(object), "' object is not subscriptable"));
    auto index = [](const Value& v, bool* given) -> int64_t {
        *given = !(v.isNone() || v.isUndefined());
        if (!*given) return 0;
        if (!intLike(v)) runtimeError("slice indices must be integers or None");
        return intOf(v);
    };
    bool hasStart = false, hasStop = false, hasStep = false;
    int64_t first = index(start, &hasStart);
    int64_t last = index(stop, &hasStop);
    int64_t by = index(stride, &hasStep);
    if (!hasStep) by = 1;
    if (by == 0) runtimeError("slice step cannot be zero");

    std::vector<std::string_view> chars;
    if (object.isString()) chars = splitChars(object.str());
    const int64_t n = object.isString() ? static_cast<int64_t>(chars.size())
                                        : static_cast<int64_t>(object.items().size());
    auto adjust = [&](int64_t i, bool given, bool isStart) {
        if (!given) return by < 0 ? (isStart ? n - 1 : -1) : (isStart ? 0 : n);
        if (i < 0) {
            i += n;
            if (i < 0) i = by < 0 ? -1 : 0;
        } else if (i >= n) {
            i = by < 0 ? n - 1 : n;
        }
        return i;
    };
    first = adjust(first, hasStart, true);
    last = adjust(last, hasStop, false);

    std::vector<size_t> picked;
    for (int64_t i = first; by > 0 ? i < last : i > last; i += by) {
        step();
        picked.push_back(static_cast<size_t>(i));
    }
    if (object.isString()) {
        std::string out;
        for (size_t i : picked) out.append(chars[i]);
        return string(std::move(out));
    }
    std::vector<Value> items;
    items.reserve(picked.size());
    for (size_t i : picked) items.push_back(object.items()[i]);
    return list(std::move(items), object.isTuple());
}

std::vector<Value> Interpreter::iterate(const Value& v)
{
    switch (v.kind()) {
    case Value::Kind::List: {
        auto* data = static_cast<ListData*>(v.object().get());
        if (data->generator) {
            if (data->consumed) return {};
            data->consumed = true;
            if (!data->pendingError.empty()) runtimeError(data->pendingError);
        }
        charge(data->items.size() * sizeof(Value));
        return data->items;
    }
    case Value::Kind::Dict: {
        std::vector<Value> keys;
        for (const auto& entry : v.entries()) keys.push_back(entry.first);
        charge(keys.size() * sizeof(Value));
        return keys;
    }
    case Value::Kind::String: {
        std::vector<Value> chars;
        for (std::string_view ch : splitChars(v.str())) chars.emplace_back(ch);
        charge(chars.size() * sizeof(Value) + v.str().size());
        return chars;
    }
    case Value::Kind::Undefined: return {};
    default: runtimeError("'" + typeName(v) + "' object is not iterable");
    }
}

int64_t Interpreter::length(const Value& v)
{
    switch (v.kind()) {
    case Value::Kind::String: return static_cast<int64_t>(charCount(v.str()));
    case Value::Kind::List:
        if (v.isGenerator()) runtimeError("object of type 'generator' has no len()");
        [[fallthrough]];
    case Value::Kind::Dict: return static_cast<int64_t>(v.size());
    case Value::Kind::Undefined: return 0;
    default: runtimeError("object of type '" + typeName(v) + "' has no len()");
    }
}

Value Interpreter::call(const Value& callee, CallArgs& args)
{
    if (callee.isCallable())
        return static_cast<const Function*>(callee.object().get())->call(*this, args);
    if (callee.isUndefined()) undefinedError(callee);
    runtimeError(cat("'", typeName(callee), "' object is not callable"));
}

}  // namespace spillway::jinja::detail
