// Jinja's filters over sequences: join, first/last, select/reject(attr), map, sort, dictsort,
// min/max, unique, sum, batch, reverse, items. The generator filters (map, select, items...)
// return values that iterate once and are always true, as Jinja's generators are.

#include <algorithm>

#include "core/chat/jinja_filters.h"

namespace spillway::jinja::detail {

// Jinja's make_attrgetter: "a.b.0" looks up each part with getitem (digits as indexes).
Value lookupPath(Interpreter& in, const Value& item, const std::string& path)
{
    Value v = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part =
            path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return c >= '0' && c <= '9';
        });
        v = digits && part.size() < 18
                ? in.getItem(v, Value(static_cast<int64_t>(std::stoll(part))))
                : in.getItem(v, Value(part));
        if (dot == std::string::npos) return v;
        start = dot + 1;
    }
}

namespace {

// comparison ignores case.
Value sortKey(Interpreter& in, const Value& item, const Value* attribute, bool caseSensitive)
{
    Value key = attribute && !attribute->isNone() ? lookupPath(in, item, toStr(*attribute)) : item;
    if (!caseSensitive && key.isString()) return Value(lowerText(key.str()));
    return key;
}

}  // namespace

Value filterJoin(Interpreter& in, const Value& input, CallArgs& args)
{
    const Value* separator = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    const std::string sep = separator ? toStr(*separator) : "";
    std::string out;
    bool first = true;
    for (const Value& item : in.iterate(input)) {
        in.step();
        if (!first) out += sep;
        first = false;
        const Value v =
            attribute && !attribute->isNone() ? lookupPath(in, item, toStr(*attribute)) : item;
        out += toStr(v, in.limits().maxOutputBytes);
        in.checkStringSize(out.size());
    }
    return in.string(std::move(out));
}

Value filterFirstLast(Interpreter& in, const Value& input, bool last)
{
    if (input.isGenerator()) {
        if (last) runtimeError("'generator' object is not reversible");
        const std::vector<Value> items = in.iterate(input);
        if (!items.empty()) return items.front();
        return Value::undefined("No first item, sequence was empty.");
    }
    if (input.isList() && !input.items().empty())
        return last ? input.items().back() : input.items().front();
    if (input.isDict() && !input.entries().empty())
        return last ? input.entries().back().first : input.entries().front().first;
    if (input.isString() && !input.str().empty()) {
        const std::vector<std::string_view> chars = splitChars(input.str());
        return in.string(std::string(last ? chars.back() : chars.front()));
    }
    if (!input.isList() && !input.isDict() && !input.isString() && !input.isUndefined())
        runtimeError("'" + typeName(input) + "' object is not iterable");
    return Value::undefined(last ? "No last item, sequence was empty."
                                 : "No first item, sequence was empty.");
}

// select/reject (attribute null) and selectattr/rejectattr.
Value filterSelect(Interpreter& in, const Value& input, CallArgs& args, bool byAttribute, bool keep)
{
    if (!truthy(input)) return in.generator({});  // Jinja's `if value:`
    size_t next = 0;
    std::string attribute;
    if (byAttribute) {
        if (args.positional.empty()) runtimeError("selectattr/rejectattr need an attribute name");
        attribute = toStr(args.positional[next++]);
    }
    std::string test;
    if (next < args.positional.size()) test = toStr(args.positional[next++]);
    CallArgs testArgs;
    testArgs.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next),
                               args.positional.end());
    testArgs.named = args.named;
    std::vector<Value> out;
    for (const Value& item : in.iterate(input)) {
        in.step();
        const Value subject = byAttribute ? lookupPath(in, item, attribute) : item;
        CallArgs a = testArgs;
        const bool passed = test.empty() ? truthy(subject) : in.applyTest(test, subject, a);
        if (passed == keep) out.push_back(item);
    }
    return in.generator(std::move(out));
}

Value filterMap(Interpreter& in, const Value& input, CallArgs& args)
{
    if (!truthy(input)) return in.generator({});  // Jinja's `if value:`
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [key, value] : args.named) {
        if (key == "attribute") attribute = &value;
        if (key == "default") fallback = &value;
    }
    std::vector<Value> out;
    if (attribute || args.positional.empty()) {
        if (!attribute) runtimeError("map() needs a filter name or attribute=");
        const std::string path = toStr(*attribute);
        for (const Value& item : in.iterate(input)) {
            in.step();
            Value v = lookupPath(in, item, path);
            if (v.isUndefined() && fallback) v = *fallback;
            out.push_back(std::move(v));
        }
        return in.generator(std::move(out));
    }
    const std::string filter = toStr(args.positional[0]);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.named = args.named;
    for (const Value& item : in.iterate(input)) {
        in.step();
        CallArgs a = rest;
        out.push_back(in.applyFilter(filter, item, a));
    }
    return in.generator(std::move(out));
}

Value filterSort(Interpreter& in, const Value& input, CallArgs& args)
{
    const bool reverse = flag(args, 0, "reverse", false);
    const bool caseSensitive = flag(args, 1, "case_sensitive", false);
    const Value* attribute = args.get(2, "attribute");
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : in.iterate(input))
        keyed.emplace_back(sortKey(in, item, attribute, caseSensitive), item);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        in.step();
        return reverse ? lessThan(y.first, x.first, "<") : lessThan(x.first, y.first, "<");
    });
    std::vector<Value> out;
    for (auto& [key, item] : keyed) out.push_back(std::move(item));
    return in.list(std::move(out));
}

Value filterDictsort(Interpreter& in, const Value& input, CallArgs& args)
{
    if (!input.isDict()) runtimeError("dictsort needs a dict, not " + typeName(input));
    const bool caseSensitive = flag(args, 0, "case_sensitive", false);
    const Value* by = args.get(1, "by");
    const bool byValue = by && toStr(*by) == "value";
    const bool reverse = flag(args, 2, "reverse", false);
    std::vector<std::pair<Value, Value>> entries = input.entries();
    auto key = [&](const std::pair<Value, Value>& e) {
        const Value& k = byValue ? e.second : e.first;
        return !caseSensitive && k.isString() ? Value(lowerText(k.str())) : k;
    };
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
        in.step();
        return reverse ? lessThan(key(y), key(x), "<") : lessThan(key(x), key(y), "<");
    });
    std::vector<Value> out;
    for (auto& [k, v] : entries) out.push_back(in.list({k, v}, true));
    return in.list(std::move(out));
}

Value filterMinMax(Interpreter& in, const Value& input, CallArgs& args, bool max)
{
    const bool caseSensitive = flag(args, 0, "case_sensitive", false);
    const Value* attribute = args.get(1, "attribute");
    const std::vector<Value> items = in.iterate(input);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value bestKey = sortKey(in, items[0], attribute, caseSensitive);
    for (size_t i = 1; i < items.size(); ++i) {
        in.step();
        Value key = sortKey(in, items[i], attribute, caseSensitive);
        if (max ? lessThan(bestKey, key, ">") : lessThan(key, bestKey, "<")) {
            best = i;
            bestKey = std::move(key);
        }
    }
    return items[best];
}

Value filterUnique(Interpreter& in, const Value& input, CallArgs& args)
{
    const bool caseSensitive = flag(args, 0, "case_sensitive", false);
    const Value* attribute = args.get(1, "attribute");
    std::vector<std::string> seen;
    std::vector<Value> out;
    for (const Value& item : in.iterate(input)) {
        in.step();
        const std::string key = hashKey(sortKey(in, item, attribute, caseSensitive));
        if (key.empty()) runtimeError("unhashable type: '" + typeName(item) + "'");
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return in.generator(std::move(out));
}

Value filterSum(Interpreter& in, const Value& input, CallArgs& args)
{
    const Value* attribute = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    Value total = start ? *start : Value(int64_t{0});
    for (const Value& item : in.iterate(input)) {
        const Value v =
            attribute && !attribute->isNone() ? lookupPath(in, item, toStr(*attribute)) : item;
        total = in.binary(BinaryOp::Add, total, v);
    }
    return total;
}

Value filterBatch(Interpreter& in, const Value& input, CallArgs& args)
{
    const int64_t size = intArg(args, 0, "linecount", 0);
    if (size <= 0) runtimeError("batch size must be positive");
    const Value* fill = args.get(1, "fill_with");
    std::vector<Value> out, current;
    for (const Value& item : in.iterate(input)) {
        current.push_back(item);
        if (static_cast<int64_t>(current.size()) == size) {
            out.push_back(in.list(std::move(current)));
            current.clear();
        }
    }
    if (!current.empty()) {
        while (fill && !fill->isNone() && static_cast<int64_t>(current.size()) < size)
            current.push_back(*fill);
        out.push_back(in.list(std::move(current)));
    }
    return in.generator(std::move(out));
}

Value filterReverse(Interpreter& in, const Value& input, CallArgs&)
{
    if (input.isString()) {
        std::vector<std::string_view> chars = splitChars(input.str());
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(*it);
        return in.string(std::move(out));
    }
    // reversed() of a sequence is an iterator; a generator is not reversible, so Jinja turns it
    // into a list first.
    const bool wasGenerator = input.isGenerator();
    std::vector<Value> items = in.iterate(input);
    std::reverse(items.begin(), items.end());
    return wasGenerator ? in.list(std::move(items)) : in.generator(std::move(items));
}

Value filterItems(Interpreter& in, const Value& input, CallArgs&)
{
    if (input.isUndefined()) return in.generator({});
    if (!input.isDict()) runtimeError("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [key, value] : input.entries()) out.push_back(in.list({key, value}, true));
    return in.generator(std::move(out));
}

}  // namespace spillway::jinja::detail
