// Jinja's tests (`x is defined`, `x is string`...) and the globals a chat template can call:
// range(), namespace(), dict(), joiner(), and the two transformers adds, raise_exception() and
// strftime_now().

#include <algorithm>
#include <cstdio>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja::detail {

namespace {

using TestFn = bool (*)(Interpreter& in, const Value& input, CallArgs& args);

// The sandbox Jinja runs transformers' templates in refuses longer ranges.
constexpr int64_t kMaxRange = 100000;

const Value& firstArg(const CallArgs& args, std::string_view test)
{
    if (args.positional.empty())
        runtimeError("the '" + std::string(test) + "' test needs an argument");
    return args.positional[0];
}

bool isIterable(const Value& v)
{
    return v.isString() || v.isList() || v.isDict() || v.isUndefined();
}

bool isSequence(const Value& v)
{
    return isIterable(v) && !v.isGenerator();
}  // has len()

int64_t integerOf(const Value& v, std::string_view what)
{
    if (v.isBool()) return v.boolValue();
    if (!v.isInt()) runtimeError(std::string(what) + " needs an integer, not " + typeName(v));
    return v.intValue();
}

const std::unordered_map<std::string, TestFn>& tests()
{
    static const std::unordered_map<std::string, TestFn> kTests = {
        {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.isUndefined(); }},
        {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.isUndefined(); }},
        {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.isNone(); }},
        {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.isBool(); }},
        {"true",
         [](Interpreter&, const Value& v, CallArgs&) { return v.isBool() && v.boolValue(); }},
        {"false",
         [](Interpreter&, const Value& v, CallArgs&) { return v.isBool() && !v.boolValue(); }},
        {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.isInt(); }},
        {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.isFloat(); }},
        {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.isNumber(); }},
        {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.isString(); }},
        {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.isDict(); }},
        {"iterable", [](Interpreter&, const Value& v, CallArgs&) { return isIterable(v); }},
        {"sequence", [](Interpreter&, const Value& v, CallArgs&) { return isSequence(v); }},
        {"callable",
         [](Interpreter&, const Value& v, CallArgs&) { return v.isCallable() || v.isUndefined(); }},
        {"escaped", [](Interpreter&, const Value&, CallArgs&) { return false; }},
        {"sameas",
         [](Interpreter&, const Value& v, CallArgs& a) {
             const Value& other = firstArg(a, "sameas");
             if (v.kind() != other.kind()) return false;
             if (v.isString() || v.isList() || v.isDict() || v.isNamespace() || v.isCallable())
                 return v.object() == other.object();
             return equals(v, other);
         }},
        {"in", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.contains(firstArg(a, "in"), v); }},
        {"eq",
         [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, firstArg(a, "eq")); }},
        {"equalto", [](Interpreter&, const Value& v,
                       CallArgs& a) { return equals(v, firstArg(a, "equalto")); }},
        {"==",
         [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, firstArg(a, "==")); }},
        {"ne",
         [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, firstArg(a, "ne")); }},
        {"!=",
         [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, firstArg(a, "!=")); }},
        {"lt", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Lt, v, firstArg(a, "lt")); }},
        {"lessthan",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return in.compare(CompareOp::Lt, v, firstArg(a, "lessthan"));
         }},
        {"<", [](Interpreter& in, const Value& v,
                 CallArgs& a) { return in.compare(CompareOp::Lt, v, firstArg(a, "<")); }},
        {"le", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Le, v, firstArg(a, "le")); }},
        {"<=", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Le, v, firstArg(a, "<=")); }},
        {"gt", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Gt, v, firstArg(a, "gt")); }},
        {"greaterthan",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return in.compare(CompareOp::Gt, v, firstArg(a, "greaterthan"));
         }},
        {">", [](Interpreter& in, const Value& v,
                 CallArgs& a) { return in.compare(CompareOp::Gt, v, firstArg(a, ">")); }},
        {"ge", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Ge, v, firstArg(a, "ge")); }},
        {">=", [](Interpreter& in, const Value& v,
                  CallArgs& a) { return in.compare(CompareOp::Ge, v, firstArg(a, ">=")); }},
        {"odd", [](Interpreter& in, const Value& v,
                   CallArgs&) { return equals(in.binary(BinaryOp::Mod, v, Value(2)), Value(1)); }},
        {"even", [](Interpreter& in, const Value& v,
                    CallArgs&) { return equals(in.binary(BinaryOp::Mod, v, Value(2)), Value(0)); }},
        {"divisibleby",
         [](Interpreter&, const Value& v, CallArgs& a) {
             const int64_t d = integerOf(firstArg(a, "divisibleby"), "divisibleby");
             if (d == 0) runtimeError("integer division or modulo by zero");
             return d == -1 || integerOf(v, "divisibleby") % d == 0;
         }},
        {"lower",
         [](Interpreter&, const Value& v, CallArgs&) {
             const std::string s = toStr(v);
             return lowerText(s) == s && upperText(s) != s;
         }},
        {"upper",
         [](Interpreter&, const Value& v, CallArgs&) {
             const std::string s = toStr(v);
             return upperText(s) == s && lowerText(s) != s;
         }},
        {"filter", [](Interpreter&, const Value& v,
                      CallArgs&) { return v.isString() && filterExists(v.str()); }},
        {"test", [](Interpreter&, const Value& v,
                    CallArgs&) { return v.isString() && testExists(v.str()); }},
    };
    return kTests;
}

// ---- strftime_now ----------------------------------------------------------------------------

constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                 "Thursday", "Friday", "Saturday"};
constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                   "May",       "June",     "July",     "August",
                                   "September", "October",  "November", "December"};

// Python's strftime in the C locale (English names whatever the process locale is). glibc's
// `-` flag (no padding) is supported as Python on Linux supports it.
std::string formatTime(const std::string& format, const std::tm& t)
{
    std::string out;
    char buf[64];
    for (size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 >= format.size()) {
            out += format[i];
            continue;
        }
        char c = format[++i];
        bool unpadded = false;
        if (c == '-' && i + 1 < format.size()) {
            unpadded = true;
            c = format[++i];
        }
        auto number = [&](int v, int width) {
            if (unpadded)
                std::snprintf(buf, sizeof buf, "%d", v);
            else
                std::snprintf(buf, sizeof buf, "%0*d", width, v);
            out += buf;
        };
        const int wday = std::clamp(t.tm_wday, 0, 6);
        const int mon = std::clamp(t.tm_mon, 0, 11);
        switch (c) {
        case 'a': out += std::string(kDays[wday]).substr(0, 3); break;
        case 'A': out += kDays[wday]; break;
        case 'b':
        case 'h': out += std::string(kMonths[mon]).substr(0, 3); break;
        case 'B': out += kMonths[mon]; break;
        case 'd': number(t.tm_mday, 2); break;
        case 'e':
            std::snprintf(buf, sizeof buf, unpadded ? "%d" : "%2d", t.tm_mday);
            out += buf;
            break;
        case 'm': number(mon + 1, 2); break;
        case 'Y': number(t.tm_year + 1900, 1); break;
        case 'y': number((t.tm_year + 1900) % 100, 2); break;
        case 'H': number(t.tm_hour, 2); break;
        case 'I': number(t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12, 2); break;
        case 'M': number(t.tm_min, 2); break;
        case 'S': number(t.tm_sec, 2); break;
        case 'j': number(t.tm_yday + 1, 3); break;
        case 'p': out += t.tm_hour < 12 ? "AM" : "PM"; break;
        case 'F':
            std::snprintf(buf, sizeof buf, "%d-%02d-%02d", t.tm_year + 1900, mon + 1, t.tm_mday);
            out += buf;
            break;
        case 'T':
            std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", t.tm_hour, t.tm_min, t.tm_sec);
            out += buf;
            break;
        case '%': out += '%'; break;
        default: {
            const char spec[] = {'%', c, '\0'};
            const size_t n = std::strftime(buf, sizeof buf, spec, &t);
            out.append(buf, n);
        }
        }
    }
    return out;
}

// Tests that take an argument besides the value; the others take none.
bool takesArgument(const std::string& name)
{
    static const std::unordered_map<std::string, bool> kWithArgument = {
        {"sameas", true}, {"in", true}, {"eq", true},          {"equalto", true},     {"==", true},
        {"ne", true},     {"!=", true}, {"lt", true},          {"lessthan", true},    {"<", true},
        {"le", true},     {"<=", true}, {"gt", true},          {"greaterthan", true}, {">", true},
        {"ge", true},     {">=", true}, {"divisibleby", true},
    };
    return kWithArgument.count(name) != 0;
}

}  // namespace

bool Interpreter::applyTest(const std::string& name, const Value& input, CallArgs& args)
{
    const auto& table = tests();
    auto it = table.find(name);
    if (it == table.end()) runtimeError("no test named '" + name + "'");
    const size_t given = args.positional.size() + args.named.size();
    const size_t wanted = takesArgument(name) ? 1 : 0;
    if (given > wanted)
        runtimeError("test_" + name + "() takes " + std::to_string(wanted + 1) +
                     " positional argument" + (wanted ? "s" : "") + " but " +
                     std::to_string(given + 1) + " were given");
    return it->second(*this, input, args);
}

bool testExists(const std::string& name)
{
    return tests().count(name) != 0;
}

void addGlobals(Scope& globals)
{
    globals.vars["range"] = makeFunction("range", [](Interpreter& in, CallArgs& args) {
        if (!args.named.empty() || args.positional.empty() || args.positional.size() > 3)
            runtimeError("range expects 1 to 3 integer arguments");
        std::vector<int64_t> n;
        for (const Value& v : args.positional) n.push_back(integerOf(v, "range"));
        const int64_t start = n.size() == 1 ? 0 : n[0];
        const int64_t stop = n.size() == 1 ? n[0] : n[1];
        const int64_t step = n.size() == 3 ? n[2] : 1;
        if (step == 0) runtimeError("range() arg 3 must not be zero");
        // Count the elements without overflowing.
        long double count = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                     : (static_cast<long double>(start) - stop - step - 1) / -step;
        if (count < 0) count = 0;
        if (count > kMaxRange)
            runtimeError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                         std::to_string(kMaxRange) + ").");
        std::vector<Value> items;
        const auto total = static_cast<int64_t>(count);
        for (int64_t i = 0; i < total; ++i) items.emplace_back(start + i * step);
        return in.list(std::move(items));
    });
    auto makeDict = [](Interpreter& in, CallArgs& args, Value target) {
        if (args.positional.size() > 1) runtimeError("expected at most 1 positional argument");
        if (!args.positional.empty()) {
            const Value& from = args.positional[0];
            if (from.isDict() || from.isNamespace()) {
                for (const auto& [key, value] : from.entries()) target.set(key, value);
            } else {
                for (const Value& pair : in.iterate(from)) {
                    if (!pair.isList() || pair.items().size() != 2)
                        runtimeError("dictionary update sequence element has the wrong length");
                    if (hashKey(pair.items()[0]).empty()) runtimeError("unhashable dict key");
                    target.set(pair.items()[0], pair.items()[1]);
                }
            }
        }
        for (auto& [key, value] : args.named) target.set(Value(key), value);
        in.charge(target.size() * 2 * sizeof(Value));
        return target;
    };
    globals.vars["namespace"] =
        makeFunction("namespace", [makeDict](Interpreter& in, CallArgs& args) {
            return makeDict(in, args, in.newNamespace());
        });
    globals.vars["dict"] = makeFunction("dict", [makeDict](Interpreter& in, CallArgs& args) {
        Value d = makeDict(in, args, Value::dict());
        return in.dictOf(d.entries());
    });
    globals.vars["raise_exception"] =
        makeFunction("raise_exception", [](Interpreter&, CallArgs& args) -> Value {
            const Value* message = args.get(0, "message");
            fail(TemplateError::Kind::Raised, kNoOffset,
                 message ? toStr(*message, 4096) : std::string());
        });
    globals.vars["strftime_now"] =
        makeFunction("strftime_now", [](Interpreter& in, CallArgs& args) {
            const Value* format = args.get(0, "format");
            if (!format || !format->isString())
                runtimeError("strftime_now() needs a format string");
            if (format->str().size() > 4096) runtimeError("strftime_now() format is too long");
            return in.string(formatTime(format->str(), in.now()));
        });
    globals.vars["joiner"] = makeFunction("joiner", [](Interpreter&, CallArgs& args) {
        const Value* sep = args.get(0, "sep");
        const std::string separator = sep ? toStr(*sep, 4096) : ", ";
        auto used = std::make_shared<bool>(false);
        return makeFunction("joiner", [separator, used](Interpreter&, CallArgs&) {
            if (!*used) {
                *used = true;
                return Value("");
            }
            return Value(separator);
        });
    });
}

}  // namespace spillway::jinja::detail
