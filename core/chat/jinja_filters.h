#pragma once
// Filters shared between jinja_filters.cpp (the table, text and numbers) and
// jinja_filter_lists.cpp (filters over sequences). Internal: see core/chat/jinja.h.

#include "core/chat/jinja_internal.h"

namespace spillway::jinja::detail {

inline bool intLike(const Value& v)
{
    return v.isInt() || v.isBool();
}
inline int64_t intOf(const Value& v)
{
    return v.isBool() ? (v.boolValue() ? 1 : 0) : v.intValue();
}

inline bool flag(const CallArgs& args, size_t position, std::string_view name, bool fallback)
{
    const Value* v = args.get(position, name);
    return v ? truthy(*v) : fallback;
}

inline int64_t intArg(const CallArgs& args, size_t position, std::string_view name,
                      int64_t fallback)
{
    const Value* v = args.get(position, name);
    if (!v || v->isNone()) return fallback;
    if (!intLike(*v)) {
        if (v->isFloat()) return static_cast<int64_t>(v->floatValue());
        runtimeError("'" + std::string(name) + "' must be an integer, not " + typeName(*v));
    }
    return intOf(*v);
}

// Jinja's generator filters (map, select, items...) run only when their result is iterated, so
// an error in them surfaces there: the result carries the error until then.
template <typename Body>
Value lazily(Interpreter& in, Body body)
{
    try {
        return body();
    } catch (const TemplateError& e) {
        if (e.kind != TemplateError::Kind::Runtime) throw;
        Value g = in.generator({});
        static_cast<ListData*>(g.object().get())->pendingError = e.message;
        return g;
    }
}

// Jinja's make_attrgetter: "a.b.0" looks up each part with getitem (digits as indexes).
Value lookupPath(Interpreter& in, const Value& item, const std::string& path);

Value filterJoin(Interpreter& in, const Value& input, CallArgs& args);
Value filterFirstLast(Interpreter& in, const Value& input, bool last);
// select/reject (byAttribute false) and selectattr/rejectattr.
Value filterSelect(Interpreter& in, const Value& input, CallArgs& args, bool byAttribute,
                   bool keep);
Value filterMap(Interpreter& in, const Value& input, CallArgs& args);
Value filterSort(Interpreter& in, const Value& input, CallArgs& args);
Value filterDictsort(Interpreter& in, const Value& input, CallArgs& args);
Value filterMinMax(Interpreter& in, const Value& input, CallArgs& args, bool max);
Value filterUnique(Interpreter& in, const Value& input, CallArgs& args);
Value filterSum(Interpreter& in, const Value& input, CallArgs& args);
Value filterBatch(Interpreter& in, const Value& input, CallArgs& args);
Value filterReverse(Interpreter& in, const Value& input, CallArgs& args);
Value filterItems(Interpreter& in, const Value& input, CallArgs& args);

}  // namespace spillway::jinja::detail
