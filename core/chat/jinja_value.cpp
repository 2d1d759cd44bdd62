// Values, and the Python semantics of truth, equality, ordering and dict-key hashing that the
// evaluator gives them.

#include "core/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/chat/jinja_internal.h"

namespace spillway::jinja {

using detail::runtimeError;

namespace {

const std::string& emptyString()
{
    static const std::string empty;
    return empty;
}

const std::vector<Value>& emptyItems()
{
    static const std::vector<Value> empty;
    return empty;
}

const std::vector<std::pair<Value, Value>>& emptyEntries()
{
    static const std::vector<std::pair<Value, Value>> empty;
    return empty;
}

}  // namespace

// ---- Value ---------------------------------------------------------------------------------

Value::Value(std::string s) : m_kind(Kind::String)
{
    m_object = std::make_shared<std::string>(std::move(s));
}

Value Value::undefined(std::string hint)
{
    Value v;
    if (!hint.empty()) v.m_object = std::make_shared<std::string>(std::move(hint));
    return v;
}

Value Value::list(std::vector<Value> items)
{
    auto data = std::make_shared<ListData>();
    for (const Value& item : items) data->depth = std::max(data->depth, item.depth() + 1);
    data->items = std::move(items);
    return fromObject(Kind::List, std::move(data));
}

Value Value::tuple(std::vector<Value> items)
{
    Value v = list(std::move(items));
    static_cast<ListData*>(v.m_object.get())->tuple = true;
    return v;
}

Value Value::dict()
{
    return fromObject(Kind::Dict, std::make_shared<DictData>());
}

Value Value::fromObject(Kind kind, std::shared_ptr<void> object)
{
    Value v;
    v.m_kind = kind;
    v.m_object = std::move(object);
    return v;
}

bool Value::isTuple() const
{
    return isList() && static_cast<const ListData*>(m_object.get())->tuple;
}

bool Value::isGenerator() const
{
    return isList() && static_cast<const ListData*>(m_object.get())->generator;
}

double Value::numberValue() const
{
    switch (m_kind) {
    case Kind::Bool: return m_scalar.b ? 1.0 : 0.0;
    case Kind::Int: return static_cast<double>(m_scalar.i);
    case Kind::Float: return m_scalar.f;
    default: return 0.0;
    }
}

const std::string& Value::str() const
{
    if ((m_kind == Kind::String || m_kind == Kind::Undefined) && m_object)
        return *static_cast<const std::string*>(m_object.get());
    return emptyString();
}

const std::vector<Value>& Value::items() const
{
    return isList() ? static_cast<const ListData*>(m_object.get())->items : emptyItems();
}

const std::vector<std::pair<Value, Value>>& Value::entries() const
{
    if (isDict() || isNamespace()) return static_cast<const DictData*>(m_object.get())->entries;
    return emptyEntries();
}

const Value* Value::find(std::string_view key) const
{
    if (!isDict() && !isNamespace()) return nullptr;
    return static_cast<const DictData*>(m_object.get())->find(detail::cat("s", key));
}

size_t Value::size() const
{
    switch (m_kind) {
    case Kind::String: return str().size();
    case Kind::List: return items().size();
    case Kind::Dict:
    case Kind::Namespace: return entries().size();
    default: return 0;
    }
}

void Value::push(Value v)
{
    if (!isList()) return;
    auto* data = static_cast<ListData*>(m_object.get());
    data->depth = std::max(data->depth, v.depth() + 1);
    data->items.push_back(std::move(v));
}

void Value::set(const Value& key, Value v)
{
    if (!isDict() && !isNamespace()) return;
    std::string hash = hashKey(key);
    if (hash.empty()) return;
    auto* data = static_cast<DictData*>(m_object.get());
    if (isDict()) data->depth = std::max(data->depth, v.depth() + 1);
    data->set(std::move(hash), key, std::move(v));
}

int Value::depth() const
{
    if (isList()) return static_cast<const ListData*>(m_object.get())->depth;
    if (isDict()) return static_cast<const DictData*>(m_object.get())->depth;
    return 0;
}

const Value* DictData::find(const std::string& hashKey) const
{
    auto it = index.find(hashKey);
    return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictData::set(std::string hashKey, Value key, Value value)
{
    auto [it, inserted] = index.emplace(std::move(hashKey), entries.size());
    if (inserted)
        entries.emplace_back(std::move(key), std::move(value));
    else
        entries[it->second].second = std::move(value);
}

std::string hashKey(const Value& key)
{
    switch (key.kind()) {
    case Value::Kind::Undefined: return "U";  // Jinja's Undefined hashes by its type
    case Value::Kind::None: return "N";
    case Value::Kind::Bool: return key.boolValue() ? "i1" : "i0";
    case Value::Kind::Int: return detail::cat("i", std::to_string(key.intValue()));
    case Value::Kind::Float: {
        const double f = key.floatValue();
        if (std::floor(f) == f && std::fabs(f) < 9.2e18)
            return detail::cat("i", std::to_string(static_cast<int64_t>(f)));
        return detail::cat("f", detail::formatFloat(f));
    }
    case Value::Kind::String: return "s" + key.str();
    case Value::Kind::List: {
        if (!key.isTuple()) return {};
        std::string h = "t";
        for (const Value& item : key.items()) {
            std::string part = hashKey(item);
            if (part.empty()) return {};
            h += std::to_string(part.size()) + ":" + part;
        }
        return h;
    }
    default: return {};
    }
}

namespace {

Value fromJsonNode(const nlohmann::ordered_json& j, int depth)
{
    if (depth > 100) runtimeError("JSON nests deeper than 100 levels");
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(nullptr);
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const uint64_t u = j.get<uint64_t>();
        if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
        return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
        std::vector<Value> items;
        items.reserve(j.size());
        for (const auto& element : j) items.push_back(fromJsonNode(element, depth + 1));
        return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
        Value d = Value::dict();
        for (const auto& [key, element] : j.items()) d.set(key, fromJsonNode(element, depth + 1));
        return d;
    }
    default: runtimeError("unsupported JSON value");
    }
}

}  // namespace

Result<Value> Value::fromJson(std::string_view json)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(json, nullptr, false);
    if (j.is_discarded())
        return makeError(ErrorCode::InvalidArgument, "variables are not valid JSON");
    try {
        return fromJsonNode(j, 0);
    } catch (const detail::TemplateError& e) {
        return makeError(ErrorCode::InvalidArgument, "variables: " + e.message);
    }
}

namespace detail {

void checkWalkDepth(int depth)
{
    if (depth > kMaxWalkDepth)
        runtimeError("value nests too deeply to print or compare (a namespace holding itself?)");
}

void fail(TemplateError::Kind kind, uint32_t offset, std::string message)
{
    throw TemplateError{kind, std::move(message), offset};
}

std::string typeName(const Value& v)
{
    switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.isGenerator() ? "generator" : v.isTuple() ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Function: return "function";
    }
    return "object";
}

bool truthy(const Value& v)
{
    switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.boolValue();
    case Value::Kind::Int: return v.intValue() != 0;
    case Value::Kind::Float: return v.floatValue() != 0.0;
    case Value::Kind::List: return v.isGenerator() || v.size() != 0;
    case Value::Kind::String:
    case Value::Kind::Dict: return v.size() != 0;
    case Value::Kind::Namespace:
    case Value::Kind::Function: return true;
    }
    return false;
}

// ---- comparison ------------------------------------------------------------------------------

namespace {

bool intLike(const Value& v)
{
    return v.isInt() || v.isBool();
}
int64_t intOf(const Value& v)
{
    return v.isBool() ? (v.boolValue() ? 1 : 0) : v.intValue();
}

bool equalsAt(const Value& a, const Value& b, int depth)
{
    checkWalkDepth(depth);
    if (a.isNumber() && b.isNumber()) {
        if (intLike(a) && intLike(b)) return intOf(a) == intOf(b);
        return a.numberValue() == b.numberValue();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
        if (a.isGenerator() || b.isGenerator()) return a.object() == b.object();
        if (a.isTuple() != b.isTuple() || a.items().size() != b.items().size()) return false;
        for (size_t i = 0; i < a.items().size(); ++i)
            if (!equalsAt(a.items()[i], b.items()[i], depth + 1)) return false;
        return true;
    }
    case Value::Kind::Dict: {
        if (a.entries().size() != b.entries().size()) return false;
        const auto* bd = static_cast<const DictData*>(b.object().get());
        for (const auto& [key, value] : a.entries()) {
            const Value* other = bd->find(hashKey(key));
            if (!other || !equalsAt(value, *other, depth + 1)) return false;
        }
        return true;
    }
    default: return a.object() == b.object();
    }
}

}  // namespace

bool equals(const Value& a, const Value& b)
{
    return equalsAt(a, b, 0);
}

bool lessThan(const Value& a, const Value& b, std::string_view op)
{
    if (a.isNumber() && b.isNumber()) {
        if (intLike(a) && intLike(b)) return intOf(a) < intOf(b);
        return a.numberValue() < b.numberValue();
    }
    if (a.isString() && b.isString()) return a.str() < b.str();
    if (a.isList() && b.isList() && a.isTuple() == b.isTuple() && !a.isGenerator() &&
        !b.isGenerator()) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equals(x[i], y[i])) continue;
            return lessThan(x[i], y[i], op);
        }
        return x.size() < y.size();
    }
    runtimeError("'" + std::string(op) + "' not supported between instances of '" + typeName(a) +
                 "' and '" + typeName(b) + "'");
}

}  // namespace detail
}  // namespace spillway::jinja
