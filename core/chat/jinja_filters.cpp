// Jinja's built-in filters, as jinja2/filters.py defines them, with transformers' tojson
// (json.dumps with ensure_ascii=False, indent, separators, sort_keys).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/chat/jinja_filters.h"

namespace spillway::jinja::detail {

namespace {

using FilterFn = Value (*)(Interpreter& in, const Value& input, CallArgs& args);

std::string html(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

bool parseInt(std::string_view text, int base, int64_t* out)
{
    std::string s = pyStrip(text, nullptr, true, true);
    size_t i = 0;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    auto prefixed = [&](char p) {
        return i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == p;
    };
    if (base == 0) {
        base = prefixed('x') ? 16 : prefixed('o') ? 8 : prefixed('b') ? 2 : 10;
        if (base != 10) i += 2;
    } else if ((base == 16 && prefixed('x')) || (base == 8 && prefixed('o')) ||
               (base == 2 && prefixed('b'))) {
        i += 2;
    }
    if (base < 2 || base > 36 || i >= s.size()) return false;
    uint64_t v = 0;
    bool any = false;
    for (; i < s.size(); ++i) {
        if (s[i] == '_' && any && i + 1 < s.size() && s[i + 1] != '_') continue;
        const char c = static_cast<char>(s[i] | 0x20);
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
        if (d >= base) return false;
        if (v > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) /
                    static_cast<uint64_t>(base))
            return false;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
        any = true;
    }
    if (!any) return false;
    *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
}

// Python's float(str).
bool parseFloat(std::string_view text, double* out)
{
    std::string s = pyStrip(text, nullptr, true, true);
    std::string lower = lowerText(s);
    const std::string_view body =
        std::string_view(lower).substr(lower[0] == '+' || lower[0] == '-' ? 1 : 0);
    if (body == "inf" || body == "infinity" || body == "nan") {
        const double v = body == "nan" ? NAN : INFINITY;
        *out = lower[0] == '-' ? -v : v;
        return true;
    }
    std::string clean;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_' && i > 0 && i + 1 < s.size() &&
            std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
            std::isdigit(static_cast<unsigned char>(s[i + 1])))
            continue;
        const char c = s[i];
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
              c == '+' || c == '-'))
            return false;
        clean += c;
    }
    if (clean.empty()) return false;
    char* end = nullptr;
    *out = std::strtod(clean.c_str(), &end);
    return end == clean.c_str() + clean.size();
}

Value filterInt(Interpreter&, const Value& input, CallArgs& args)
{
    const Value* fallback = args.get(0, "default");
    const int64_t base = intArg(args, 1, "base", 10);
    if (input.isUndefined()) undefinedError(input);
    if (intLike(input)) return Value(intOf(input));
    if (input.isFloat()) {
        const double f = input.floatValue();
        if (std::isfinite(f) && std::fabs(f) < 9.2e18) return Value(static_cast<int64_t>(f));
    } else if (input.isString()) {
        int64_t v = 0;
        if (parseInt(input.str(), static_cast<int>(base), &v)) return Value(v);
        double f = 0;
        if (parseFloat(input.str(), &f) && std::isfinite(f) && std::fabs(f) < 9.2e18)
            return Value(static_cast<int64_t>(f));
    }
    return fallback ? *fallback : Value(int64_t{0});
}

Value filterFloat(Interpreter&, const Value& input, CallArgs& args)
{
    const Value* fallback = args.get(0, "default");
    if (input.isUndefined()) undefinedError(input);
    if (input.isNumber()) return Value(input.numberValue());
    double f = 0;
    if (input.isString() && parseFloat(input.str(), &f)) return Value(f);
    return fallback ? *fallback : Value(0.0);
}

Value filterDefault(Interpreter&, const Value& input, CallArgs& args)
{
    const Value* fallback = args.get(0, "default_value");
    const bool boolean = flag(args, 1, "boolean", false);
    if (input.isUndefined() || (boolean && !truthy(input))) return fallback ? *fallback : Value("");
    return input;
}

Value filterRound(Interpreter&, const Value& input, CallArgs& args)
{
    const int64_t precision = intArg(args, 0, "precision", 0);
    const Value* method = args.get(1, "method");
    const std::string how = method ? toStr(*method) : "common";
    if (how != "common" && how != "ceil" && how != "floor")
        runtimeError("method must be common, ceil or floor");
    if (!input.isNumber()) runtimeError("round needs a number, not " + typeName(input));
    if (intLike(input) && how == "common") return Value(intOf(input));
    const double value = input.numberValue();
    if (how == "common" && precision >= 0 && precision <= 30 && std::isfinite(value)) {
        // Python's round() rounds the exact binary value half to even, as printf does.
        const int digits = static_cast<int>(precision);
        std::string text(static_cast<size_t>(std::snprintf(nullptr, 0, "%.*f", digits, value)),
                         '\0');
        std::snprintf(text.data(), text.size() + 1, "%.*f", digits, value);
        return Value(std::strtod(text.c_str(), nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = value * scale;
    const double r = how == "ceil"    ? std::ceil(x)
                     : how == "floor" ? std::floor(x)
                                      : std::nearbyint(x);
    return Value(r / scale);
}

Value filterIndent(Interpreter& in, const Value& input, CallArgs& args)
{
    const Value* width = args.get(0, "width");
    const bool first = flag(args, 1, "first", false);
    const bool blank = flag(args, 2, "blank", false);
    if (input.isUndefined()) undefinedError(input);
    if (!input.isString())  // Jinja appends "\n" to the value itself
        runtimeError("unsupported operand type(s) for +=: '" + typeName(input) + "' and 'str'");
    std::string indent = "    ";
    if (width)
        indent = width->isString() ? width->str()
                                   : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                     intArg(args, 0, "width", 4), 0, 1 << 16)),
                                                 ' ');
    const std::string s = toStr(input, in.limits().maxOutputBytes) + "\n";
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t pos = 0; pos < s.size(); ++pos) {
        if (s[pos] == '\n' || s[pos] == '\r') {
            lines.push_back(s.substr(start, pos - start));
            if (s[pos] == '\r' && pos + 1 < s.size() && s[pos + 1] == '\n') ++pos;
            start = pos + 1;
        }
    }
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        in.step();
        if (i) out += "\n";
        if (i && (blank || !lines[i].empty())) out += indent;
        out += lines[i];
        in.checkStringSize(out.size());
    }
    if (first) out = indent + out;
    return in.string(std::move(out));
}

Value filterToJson(Interpreter& in, const Value& input, CallArgs& args)
{
    args.expectAtMost("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonStyle style;
    style.ensureAscii = flag(args, 0, "ensure_ascii", false);
    if (const Value* indent = args.get(1, "indent"); indent && !indent->isNone()) {
        if (indent->isString()) {
            style.indentText = indent->str();
            style.indent = 0;
        } else {
            style.indent =
                static_cast<int>(std::clamp<int64_t>(intArg(args, 1, "indent", 0), 0, 1 << 12));
        }
        style.itemSeparator.pop_back();  // json.dumps: ", " becomes "," when indenting
    }
    if (const Value* separators = args.get(2, "separators"); separators && !separators->isNone()) {
        if (!separators->isList() || separators->items().size() != 2)
            runtimeError("separators must be a pair of strings");
        style.itemSeparator = toStr(separators->items()[0]);
        style.keySeparator = toStr(separators->items()[1]);
    }
    style.sortKeys = flag(args, 3, "sort_keys", false);
    return in.string(toJson(input, style, in.limits().maxOutputBytes));
}

Value filterCenter(Interpreter& in, const Value& input, CallArgs& args)
{
    const std::string s = toStr(input, in.limits().maxOutputBytes);
    const int64_t width = std::min<int64_t>(intArg(args, 0, "width", 80),
                                            static_cast<int64_t>(in.limits().maxOutputBytes));
    const auto length = static_cast<int64_t>(charCount(s));
    if (width <= length) return in.string(s);
    const int64_t margin = width - length;
    const int64_t left = margin / 2 + (margin & width & 1);
    return in.string(std::string(static_cast<size_t>(left), ' ') + s +
                     std::string(static_cast<size_t>(margin - left), ' '));
}

Value filterReplace(Interpreter& in, const Value& input, CallArgs& args)
{
    const Value* from = args.get(0, "old");
    const Value* to = args.get(1, "new");
    if (!from || !to) runtimeError("replace needs the old and new strings");
    const int64_t count = intArg(args, 2, "count", -1);
    return replaceString(in, toStr(input, in.limits().maxOutputBytes), toStr(*from), toStr(*to),
                         count);
}

Value textFilter(Interpreter& in, const Value& input, std::string (*f)(std::string_view))
{
    return in.string(f(toStr(input, in.limits().maxOutputBytes)));
}

Value filterAbs(Interpreter&, const Value& input, CallArgs&)
{
    if (input.isFloat()) return Value(std::fabs(input.floatValue()));
    if (!intLike(input)) runtimeError("bad operand type for abs(): '" + typeName(input) + "'");
    const int64_t x = intOf(input);
    if (x == INT64_MIN) runtimeError("integer result is too large");
    return Value(x < 0 ? -x : x);
}

const std::unordered_map<std::string, FilterFn>& filters()
{
    static const std::unordered_map<std::string, FilterFn> kFilters = {
        {"abs", filterAbs},
        {"attr",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             const Value* name = a.get(0, "name");
             return in.getAttr(v, name ? toStr(*name) : "");
         }},
        {"batch", [](Interpreter& in, const Value& v,
                     CallArgs& a) { return lazily(in, [&] { return filterBatch(in, v, a); }); }},
        {"capitalize", [](Interpreter& in, const Value& v,
                          CallArgs&) { return textFilter(in, v, capitalizeText); }},
        {"center", filterCenter},
        {"count", [](Interpreter& in, const Value& v, CallArgs&) { return Value(in.length(v)); }},
        {"length", [](Interpreter& in, const Value& v, CallArgs&) { return Value(in.length(v)); }},
        {"default", filterDefault},
        {"d", filterDefault},
        {"dictsort", filterDictsort},
        {"escape",
         [](Interpreter& in, const Value& v, CallArgs&) { return textFilter(in, v, html); }},
        {"e", [](Interpreter& in, const Value& v, CallArgs&) { return textFilter(in, v, html); }},
        {"forceescape",
         [](Interpreter& in, const Value& v, CallArgs&) { return textFilter(in, v, html); }},
        {"first",
         [](Interpreter& in, const Value& v, CallArgs&) { return filterFirstLast(in, v, false); }},
        {"last",
         [](Interpreter& in, const Value& v, CallArgs&) { return filterFirstLast(in, v, true); }},
        {"float", filterFloat},
        {"indent", filterIndent},
        {"int", filterInt},
        {"items", [](Interpreter& in, const Value& v,
                     CallArgs& a) { return lazily(in, [&] { return filterItems(in, v, a); }); }},
        {"join", filterJoin},
        {"list", [](Interpreter& in, const Value& v, CallArgs&) { return in.list(in.iterate(v)); }},
        {"lower",
         [](Interpreter& in, const Value& v, CallArgs&) { return textFilter(in, v, lowerText); }},
        {"upper",
         [](Interpreter& in, const Value& v, CallArgs&) { return textFilter(in, v, upperText); }},
        {"title", [](Interpreter& in, const Value& v,
                     CallArgs&) { return textFilter(in, v, jinjaTitleText); }},
        {"map", [](Interpreter& in, const Value& v,
                   CallArgs& a) { return lazily(in, [&] { return filterMap(in, v, a); }); }},
        {"max",
         [](Interpreter& in, const Value& v, CallArgs& a) { return filterMinMax(in, v, a, true); }},
        {"min", [](Interpreter& in, const Value& v,
                   CallArgs& a) { return filterMinMax(in, v, a, false); }},
        {"replace", filterReplace},
        {"reverse", filterReverse},
        {"round", filterRound},
        {"safe", [](Interpreter& in, const Value& v,
                    CallArgs&) { return v.isString() ? v : in.string(in.str(v)); }},
        {"select",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return lazily(in, [&] { return filterSelect(in, v, a, false, true); });
         }},
        {"reject",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return lazily(in, [&] { return filterSelect(in, v, a, false, false); });
         }},
        {"selectattr",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return lazily(in, [&] { return filterSelect(in, v, a, true, true); });
         }},
        {"rejectattr",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return lazily(in, [&] { return filterSelect(in, v, a, true, false); });
         }},
        {"sort", filterSort},
        {"string", [](Interpreter& in, const Value& v,
                      CallArgs&) { return v.isString() ? v : in.string(in.str(v)); }},
        {"sum", filterSum},
        {"tojson", filterToJson},
        {"trim",
         [](Interpreter& in, const Value& v, CallArgs& a) {
             return in.string(
                 pyStrip(toStr(v, in.limits().maxOutputBytes), a.get(0, "chars"), true, true));
         }},
        {"unique", [](Interpreter& in, const Value& v,
                      CallArgs& a) { return lazily(in, [&] { return filterUnique(in, v, a); }); }},
    };
    return kFilters;
}

}  // namespace

Value Interpreter::applyFilter(const std::string& name, const Value& input, CallArgs& args)
{
    const auto& table = filters();
    auto it = table.find(name);
    if (it == table.end()) runtimeError("no filter named '" + name + "'");
    return it->second(*this, input, args);
}

bool filterExists(const std::string& name)
{
    return filters().count(name) != 0;
}

}  // namespace spillway::jinja::detail
