#pragma once
// Values of the template language as Jinja templates see them: Python's None, bool, int, float,
// str, list, tuple and dict (keeping insertion order), Jinja's Undefined, namespace() objects
// and callables (built-ins, macros, bound string/dict methods).
//
// Strings, lists and dicts are shared, immutable once built: copying a Value copies a pointer,
// as assigning a Python name does. Only namespace() objects change after creation (by
// `{% set ns.x = ... %}`), and only the template engine makes those.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace spillway::jinja {

class Value;
struct ListData;
struct DictData;
struct Function;  // defined in jinja_internal.h

class Value {
public:
    enum class Kind : uint8_t {
        Undefined,
        None,
        Bool,
        Int,
        Float,
        String,
        List,
        Dict,
        Namespace,
        Function,
    };

    Value() = default;  // Undefined
    Value(std::nullptr_t) : m_kind(Kind::None) {}
    Value(bool b) : m_kind(Kind::Bool) { m_scalar.b = b; }
    Value(int v) : Value(static_cast<int64_t>(v)) {}
    Value(int64_t v) : m_kind(Kind::Int) { m_scalar.i = v; }
    Value(double v) : m_kind(Kind::Float) { m_scalar.f = v; }
    Value(std::string s);
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}

    // An Undefined that remembers what was looked up, for error messages ("'x' is undefined").
    static Value undefined(std::string hint);
    static Value list(std::vector<Value> items = {});
    static Value tuple(std::vector<Value> items);
    static Value dict();
    // JSON text (null, booleans, numbers, strings, arrays, objects in their key order) as a
    // Value. InvalidArgument for text that is not JSON or nests deeper than 100 levels.
    static Result<Value> fromJson(std::string_view json);

    Kind kind() const { return m_kind; }
    bool isUndefined() const { return m_kind == Kind::Undefined; }
    bool isNone() const { return m_kind == Kind::None; }
    bool isBool() const { return m_kind == Kind::Bool; }
    bool isInt() const { return m_kind == Kind::Int; }
    bool isFloat() const { return m_kind == Kind::Float; }
    // Python's bool is an int.
    bool isNumber() const { return isBool() || isInt() || isFloat(); }
    bool isString() const { return m_kind == Kind::String; }
    bool isList() const { return m_kind == Kind::List; }  // a list, tuple or generator
    bool isTuple() const;
    // What Jinja's map/select/items... filters return: iterable once, always true, no len().
    bool isGenerator() const;
    bool isDict() const { return m_kind == Kind::Dict; }
    bool isNamespace() const { return m_kind == Kind::Namespace; }
    bool isCallable() const { return m_kind == Kind::Function; }

    bool boolValue() const { return m_scalar.b; }
    int64_t intValue() const { return m_scalar.i; }
    double floatValue() const { return m_scalar.f; }
    // A number as a double (bool, int or float).
    double numberValue() const;
    // A String's text, or an Undefined's hint ("" for other kinds).
    const std::string& str() const;

    // List, tuple or generator elements (empty for other kinds).
    const std::vector<Value>& items() const;
    // Dict or namespace entries in insertion order (empty for other kinds).
    const std::vector<std::pair<Value, Value>>& entries() const;
    // The value under a string key of a dict or namespace; nullptr when absent.
    const Value* find(std::string_view key) const;
    // Elements of a list, entries of a dict or namespace, bytes of a string; 0 otherwise.
    size_t size() const;

    // Builders. push() appends to a list; set() adds a dict entry or replaces the value of an
    // existing key. They change every copy of this Value (the data is shared).
    void push(Value v);
    void set(const Value& key, Value v);

    // Nesting of lists and dicts inside this value (1 for a flat list, 0 for a scalar).
    int depth() const;

    // The shared data behind a string, list, dict, namespace or callable, for the engine.
    const std::shared_ptr<void>& object() const { return m_object; }
    static Value fromObject(Kind kind, std::shared_ptr<void> object);

private:
    Kind m_kind = Kind::Undefined;
    union {
        bool b;
        int64_t i;
        double f;
    } m_scalar{};
    // String: std::string; List: ListData; Dict and Namespace: DictData; Function: Function;
    // Undefined: std::string (the hint) or null.
    std::shared_ptr<void> m_object;
};

struct ListData {
    std::vector<Value> items;
    bool tuple = false;
    bool generator = false;
    bool consumed = false;     // a generator that was iterated (it yields nothing more)
    std::string pendingError;  // a generator whose making failed fails when iterated, as Python's
    int depth = 1;
};

struct DictData {
    std::vector<std::pair<Value, Value>> entries;
    // Python hashing: keys equal as Python compares them (1, 1.0 and True) share one entry.
    // Maps hashKey(key) to an index in `entries`.
    std::unordered_map<std::string, size_t> index;
    int depth = 1;

    const Value* find(const std::string& hashKey) const;
    void set(std::string hashKey, Value key, Value value);
};

// The key that identifies a dict key as Python's hash and == do: "" for values that are not
// hashable (lists, dicts, namespaces).
std::string hashKey(const Value& key);

}  // namespace spillway::jinja
