// Python's str and dict methods as templates call them (`content.strip()`, `d.get('k')`,
// `text.split('</think>')`), and the letter case rules they share with the filters.

#include <algorithm>

#include "core/chat/jinja_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway::jinja::detail {

// ---- str methods ---------------------------------------------------------------------------

namespace {

using StrMethod = Value (*)(Interpreter& in, const std::string& s, CallArgs& args);

std::string argString(const CallArgs& args, size_t position, std::string_view name,
                      std::string_view method)
{
    const Value* v = args.get(position, name);
    if (!v || !v->isString())
        runtimeError(std::string(method) + "() argument '" + std::string(name) + "' must be str");
    return v->str();
}

int64_t argInt(const CallArgs& args, size_t position, std::string_view name, int64_t fallback)
{
    const Value* v = args.get(position, name);
    if (!v || v->isNone()) return fallback;
    if (!v->isInt() && !v->isBool()) runtimeError("'" + std::string(name) + "' must be an integer");
    return v->isBool() ? v->boolValue() : v->intValue();
}

bool isLineBreak(std::string_view s, size_t pos, size_t* length)
{
    const unsigned char c = static_cast<unsigned char>(s[pos]);
    *length = 1;
    if (c == '\r') {
        if (pos + 1 < s.size() && s[pos + 1] == '\n') *length = 2;
        return true;
    }
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) return true;
    if (c < 0x80) return false;
    const size_t n = utf8::sequenceLength(s, pos);
    if (n == 0) return false;
    const char32_t cp = utf8::decodeAt(s, pos, n);
    *length = n;
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

std::vector<Value> splitText(Interpreter& in, std::string_view s, const Value* sep,
                             int64_t maxsplit, bool fromRight)
{
    std::vector<std::string> parts;
    if (!sep || sep->isNone()) {
        // Runs of whitespace separate; whitespace at the ends yields no empty parts.
        std::vector<std::pair<size_t, size_t>> words;  // byte ranges
        size_t length = 0;
        for (size_t pos = 0; pos < s.size();) {
            if (isSpaceChar(s, pos, &length)) {
                pos += length;
                continue;
            }
            size_t end = pos;
            while (end < s.size() && !isSpaceChar(s, end, &length)) end += utf8::charLength(s, end);
            words.emplace_back(pos, end);
            pos = end;
        }
        const size_t limit = maxsplit < 0 ? words.size() : static_cast<size_t>(maxsplit) + 1;
        if (words.size() <= limit) {
            for (const auto& [b, e] : words) parts.emplace_back(s.substr(b, e - b));
        } else if (!fromRight) {
            for (size_t i = 0; i + 1 < limit; ++i)
                parts.emplace_back(s.substr(words[i].first, words[i].second - words[i].first));
            parts.emplace_back(s.substr(words[limit - 1].first));
        } else {
            const size_t head = words.size() - limit + 1;  // words merged into the first part
            parts.emplace_back(s.substr(0, words[head - 1].second));
            for (size_t i = head; i < words.size(); ++i)
                parts.emplace_back(s.substr(words[i].first, words[i].second - words[i].first));
        }
    } else {
        if (!sep->isString()) runtimeError("must be str or None, not " + typeName(*sep));
        const std::string& d = sep->str();
        if (d.empty()) runtimeError("empty separator");
        std::vector<size_t> cuts;
        for (size_t p = s.find(d); p != std::string::npos; p = s.find(d, p + d.size()))
            cuts.push_back(p);
        if (maxsplit >= 0 && cuts.size() > static_cast<size_t>(maxsplit)) {
            if (fromRight)
                cuts.erase(cuts.begin(), cuts.end() - maxsplit);
            else
                cuts.resize(static_cast<size_t>(maxsplit));
        }
        size_t start = 0;
        for (size_t cut : cuts) {
            parts.emplace_back(s.substr(start, cut - start));
            start = cut + d.size();
        }
        parts.emplace_back(s.substr(start));
    }
    std::vector<Value> values;
    values.reserve(parts.size());
    for (std::string& part : parts) values.push_back(in.string(std::move(part)));
    return values;
}

bool matchesAffix(Interpreter& in, const std::string& s, const Value* affix, bool prefix,
                  std::string_view method)
{
    if (!affix) runtimeError(std::string(method) + "() takes at least 1 argument (0 given)");
    auto test = [&](const Value& v) {
        if (!v.isString())
            runtimeError(std::string(method) + " first arg must be str or a tuple of str, not " +
                         typeName(v));
        const std::string& a = v.str();
        if (a.size() > s.size()) return false;
        return prefix ? s.compare(0, a.size(), a) == 0
                      : s.compare(s.size() - a.size(), a.size(), a) == 0;
    };
    if (affix->isList() && affix->isTuple()) {
        for (const Value& item : affix->items()) {
            in.step();
            if (test(item)) return true;
        }
        return false;
    }
    return test(*affix);
}

template <typename Predicate>
Value allChars(const std::string& s, Predicate p)
{
    if (s.empty()) return Value(false);
    for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
        const char32_t c = decodeChar(s, pos, &n);
        if (!p(c, pos)) return Value(false);
    }
    return Value(true);
}

Value findText(const std::string& s, CallArgs& args, bool fromRight, bool raise)
{
    const std::string sub = argString(args, 0, "sub", "find");
    const size_t p = fromRight ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
        if (raise) runtimeError("substring not found");
        return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(charCount(std::string_view(s).substr(0, p))));
}

Value replaceText(Interpreter& in, const std::string& s, const std::string& from,
                  const std::string& to, int64_t count)
{
    std::vector<size_t> hits;  // byte offsets of the replaced parts
    if (from.empty()) {
        for (size_t pos = 0;; pos += utf8::charLength(s, pos)) {
            if (count >= 0 && static_cast<int64_t>(hits.size()) >= count) break;
            hits.push_back(pos);
            if (pos >= s.size()) break;
            in.step();
        }
    } else {
        for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + from.size())) {
            if (count >= 0 && static_cast<int64_t>(hits.size()) >= count) break;
            in.step();
            hits.push_back(p);
        }
    }
    const uint64_t size =
        s.size() - hits.size() * from.size() + hits.size() * static_cast<uint64_t>(to.size());
    in.checkStringSize(size);
    std::string out;
    out.reserve(size);
    size_t start = 0;
    for (size_t hit : hits) {
        out.append(s, start, hit - start);
        out += to;
        start = hit + from.size();
    }
    out.append(s, std::min(start, s.size()), std::string::npos);
    return in.string(std::move(out));
}

}  // namespace

Value replaceString(Interpreter& in, const std::string& s, const std::string& from,
                    const std::string& to, int64_t count)
{
    return replaceText(in, s, from, to, count);
}

Value stringMethod(Interpreter& in, const Value& self, const std::string& name)
{
    static const std::unordered_map<std::string, StrMethod> kMethods = {
        {"strip", [](Interpreter& in, const std::string& s,
                     CallArgs& a) { return in.string(pyStrip(s, a.get(0, "chars"), true, true)); }},
        {"lstrip",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return in.string(pyStrip(s, a.get(0, "chars"), true, false));
         }},
        {"rstrip",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return in.string(pyStrip(s, a.get(0, "chars"), false, true));
         }},
        {"split",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return in.list(splitText(in, s, a.get(0, "sep"), argInt(a, 1, "maxsplit", -1), false));
         }},
        {"rsplit",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return in.list(splitText(in, s, a.get(0, "sep"), argInt(a, 1, "maxsplit", -1), true));
         }},
        {"splitlines",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const Value* keep = a.get(0, "keepends");
             const bool keepEnds = keep && truthy(*keep);
             std::vector<Value> lines;
             size_t start = 0, length = 0;
             for (size_t pos = 0; pos < s.size();) {
                 if (isLineBreak(s, pos, &length)) {
                     lines.push_back(
                         in.string(s.substr(start, pos - start + (keepEnds ? length : 0))));
                     pos += length;
                     start = pos;
                 } else {
                     pos += utf8::charLength(s, pos);
                 }
             }
             if (start < s.size()) lines.push_back(in.string(s.substr(start)));
             return in.list(std::move(lines));
         }},
        {"startswith",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return Value(matchesAffix(in, s, a.get(0, "prefix"), true, "startswith"));
         }},
        {"endswith",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return Value(matchesAffix(in, s, a.get(0, "suffix"), false, "endswith"));
         }},
        {"upper",
         [](Interpreter& in, const std::string& s, CallArgs&) { return in.string(upperText(s)); }},
        {"lower",
         [](Interpreter& in, const std::string& s, CallArgs&) { return in.string(lowerText(s)); }},
        {"casefold",
         [](Interpreter& in, const std::string& s, CallArgs&) { return in.string(lowerText(s)); }},
        {"title", [](Interpreter& in, const std::string& s,
                     CallArgs&) { return in.string(pyTitleText(s)); }},
        {"capitalize", [](Interpreter& in, const std::string& s,
                          CallArgs&) { return in.string(capitalizeText(s)); }},
        {"replace",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             return replaceText(in, s, argString(a, 0, "old", "replace"),
                                argString(a, 1, "new", "replace"), argInt(a, 2, "count", -1));
         }},
        {"find", [](Interpreter&, const std::string& s,
                    CallArgs& a) { return findText(s, a, false, false); }},
        {"rfind", [](Interpreter&, const std::string& s,
                     CallArgs& a) { return findText(s, a, true, false); }},
        {"index", [](Interpreter&, const std::string& s,
                     CallArgs& a) { return findText(s, a, false, true); }},
        {"rindex", [](Interpreter&, const std::string& s,
                      CallArgs& a) { return findText(s, a, true, true); }},
        {"count",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const std::string sub = argString(a, 0, "sub", "count");
             if (sub.empty()) return Value(static_cast<int64_t>(charCount(s) + 1));
             int64_t n = 0;
             for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) {
                 in.step();
                 ++n;
             }
             return Value(n);
         }},
        {"join",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const Value* items = a.get(0, "iterable");
             if (!items) runtimeError("join() takes exactly one argument");
             std::string out;
             size_t i = 0;
             for (const Value& item : in.iterate(*items)) {
                 if (!item.isString())
                     runtimeError("sequence item " + std::to_string(i) +
                                  ": expected str instance, " + typeName(item) + " found");
                 if (i++) out += s;
                 out += item.str();
                 in.checkStringSize(out.size());
             }
             return in.string(std::move(out));
         }},
        {"removeprefix",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const std::string p = argString(a, 0, "prefix", "removeprefix");
             return in.string(
                 s.compare(0, p.size(), p) == 0 && p.size() <= s.size() ? s.substr(p.size()) : s);
         }},
        {"removesuffix",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const std::string p = argString(a, 0, "suffix", "removesuffix");
             const bool match = !p.empty() && p.size() <= s.size() &&
                                s.compare(s.size() - p.size(), p.size(), p) == 0;
             return in.string(match ? s.substr(0, s.size() - p.size()) : s);
         }},
        {"partition",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const std::string d = argString(a, 0, "sep", "partition");
             if (d.empty()) runtimeError("empty separator");
             const size_t p = s.find(d);
             if (p == std::string::npos) return in.list({in.string(s), Value(""), Value("")}, true);
             return in.list(
                 {in.string(s.substr(0, p)), Value(d), in.string(s.substr(p + d.size()))}, true);
         }},
        {"rpartition",
         [](Interpreter& in, const std::string& s, CallArgs& a) {
             const std::string d = argString(a, 0, "sep", "rpartition");
             if (d.empty()) runtimeError("empty separator");
             const size_t p = s.rfind(d);
             if (p == std::string::npos) return in.list({Value(""), Value(""), in.string(s)}, true);
             return in.list(
                 {in.string(s.substr(0, p)), Value(d), in.string(s.substr(p + d.size()))}, true);
         }},
        {"isdigit",
         [](Interpreter&, const std::string& s, CallArgs&) {
             return allChars(s, [](char32_t c, size_t) { return c >= '0' && c <= '9'; });
         }},
        {"isalpha",
         [](Interpreter&, const std::string& s, CallArgs&) {
             return allChars(s, [](char32_t c, size_t) { return isCased(c) || c >= 0x3040; });
         }},
        {"isalnum",
         [](Interpreter&, const std::string& s, CallArgs&) {
             return allChars(s, [](char32_t c, size_t) {
                 return isCased(c) || c >= 0x3040 || (c >= '0' && c <= '9');
             });
         }},
        {"isspace",
         [](Interpreter&, const std::string& s, CallArgs&) {
             return allChars(s, [&s](char32_t, size_t pos) {
                 size_t n = 0;
                 return isSpaceChar(s, pos, &n);
             });
         }},
        {"isupper",
         [](Interpreter&, const std::string& s, CallArgs&) {
             bool cased = false;
             for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
                 const char32_t c = decodeChar(s, pos, &n);
                 if (upperOf(c) != c || c == 0xdf) return Value(false);
                 cased = cased || lowerOf(c) != c;
             }
             return Value(cased);
         }},
        {"islower",
         [](Interpreter&, const std::string& s, CallArgs&) {
             bool cased = false;
             for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
                 const char32_t c = decodeChar(s, pos, &n);
                 if (lowerOf(c) != c) return Value(false);
                 cased = cased || upperOf(c) != c || c == 0xdf;
             }
             return Value(cased);
         }},
        {"format",
         [](Interpreter&, const std::string&, CallArgs&) -> Value {
             runtimeError("str.format() is not supported");
         }},
    };
    auto it = kMethods.find(name);
    if (it == kMethods.end())
        return Value::undefined("'str object' has no attribute '" + name + "'");
    const StrMethod method = it->second;
    return makeFunction("str." + name, [method, self](Interpreter& in, CallArgs& args) {
        return method(in, self.str(), args);
    });
}

// ---- dict methods --------------------------------------------------------------------------

Value dictMethod(Interpreter&, const Value& self, const std::string& name)
{
    if (name == "get") {
        return makeFunction("dict.get", [self](Interpreter&, CallArgs& args) {
            const Value* key = args.get(0, "key");
            if (!key) runtimeError("get expected at least 1 argument, got 0");
            const std::string hash = hashKey(*key);
            if (hash.empty()) runtimeError("unhashable type: '" + typeName(*key) + "'");
            if (const Value* v = static_cast<const DictData*>(self.object().get())->find(hash))
                return *v;
            const Value* fallback = args.get(1, "default");
            return fallback ? *fallback : Value(nullptr);
        });
    }
    if (name == "items" || name == "keys" || name == "values") {
        return makeFunction("dict." + name, [self, name](Interpreter& in, CallArgs&) {
            std::vector<Value> out;
            for (const auto& [key, value] : self.entries()) {
                if (name == "items")
                    out.push_back(in.list({key, value}, true));
                else
                    out.push_back(name == "keys" ? key : value);
            }
            return in.list(std::move(out));
        });
    }
    if (name == "copy")
        return makeFunction("dict.copy", [self](Interpreter&, CallArgs&) { return self; });
    static constexpr std::string_view kMutating[] = {"pop", "popitem", "update", "setdefault",
                                                     "clear"};
    if (std::find(std::begin(kMutating), std::end(kMutating), name) != std::end(kMutating)) {
        return makeFunction("dict." + name, [name](Interpreter&, CallArgs&) -> Value {
            runtimeError("dict." + name + "() is not available: template values are read-only");
        });
    }
    return Value();
}

}  // namespace spillway::jinja::detail
