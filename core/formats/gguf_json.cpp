// GGUF metadata <-> JSON, for model packages: their manifest keeps a GGUF model's hyper-parameters
// and tokenizer as JSON objects keyed like GGUF ("llama.embedding_length": 2048), so the same
// readers (llamaConfigFrom, vocabularyFrom) serve both.

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/formats/gguf.h"

namespace spillway::gguf {

namespace {

nlohmann::json toJson(const Value& v)
{
    if (const auto* a = v.asArray()) {
        nlohmann::json out = nlohmann::json::array();
        for (const Value& e : a->values) out.push_back(toJson(e));
        return out;
    }
    if (const auto* s = v.asString()) return *s;
    if (const auto* b = std::get_if<bool>(&v.v)) return *b;
    if (const auto* i = std::get_if<int64_t>(&v.v)) return *i;
    if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u;
    if (const auto* d = std::get_if<double>(&v.v)) return std::isfinite(*d) ? nlohmann::json(*d) : nlohmann::json();
    return nullptr;
}

// A scalar JSON value as a GGUF value; nullopt for null, objects and arrays.
std::optional<Value> scalarFromJson(const nlohmann::json& j)
{
    if (j.is_boolean()) return Value::ofBool(j.get<bool>());
    if (j.is_number_unsigned()) return Value::ofUInt(ValueType::UInt64, j.get<uint64_t>());
    if (j.is_number_integer()) return Value::ofInt(ValueType::Int64, j.get<int64_t>());
    if (j.is_number_float()) return Value::ofFloat(ValueType::Float64, j.get<double>());
    if (j.is_string()) return Value::ofString(j.get<std::string>());
    return std::nullopt;
}

}  // namespace

std::string metadataToJson(const Metadata& m, const std::function<bool(std::string_view key)>& keep)
{
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const KeyValue& kv : m.entries())
        if (keep(kv.key)) out[kv.key] = toJson(kv.value);
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // non-UTF-8 strings: U+FFFD
}

Status metadataFromJson(const std::string& text, const std::string& what, Metadata& m)
{
    auto bad = [&](const std::string& why) { return makeError(ErrorCode::ModelFileInvalid, what + ": " + why); };
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    for (const auto& [key, value] : j.items()) {
        Value v;
        if (value.is_array()) {
            std::vector<Value> items;
            items.reserve(value.size());
            ValueType element = ValueType::UInt8;
            for (const auto& e : value) {
                auto x = scalarFromJson(e);
                if (!x) return bad("'" + key + "' holds a null, object or array");
                // Integers that JSON reads as unsigned and signed mix in one array: keep Int64.
                if (x->type == ValueType::UInt64) {
                    if (e.get<uint64_t>() > uint64_t(INT64_MAX)) return bad("'" + key + "' holds an integer out of range");
                    x = Value::ofInt(ValueType::Int64, int64_t(e.get<uint64_t>()));
                }
                if (!items.empty() && x->type != element) {
                    // 1 and 1.5 in one array: numbers become Float64.
                    const bool numbers = (x->type == ValueType::Int64 || x->type == ValueType::Float64) &&
                                         (element == ValueType::Int64 || element == ValueType::Float64);
                    if (!numbers) return bad("'" + key + "' mixes element types");
                    element = ValueType::Float64;
                }
                if (items.empty()) element = x->type;
                items.push_back(std::move(*x));
            }
            if (element == ValueType::Float64)
                for (Value& e : items)
                    if (auto f = e.asFloat()) e = Value::ofFloat(ValueType::Float64, *f);
            const ValueType elementType = items.empty() ? ValueType::Int64 : element;  // before the move
            v = Value::ofArray(elementType, std::move(items));
        } else {
            auto x = scalarFromJson(value);
            if (!x) return bad("'" + key + "' is null or an object");
            v = std::move(*x);
        }
        if (!m.add(KeyValue{key, std::move(v)})) return bad("key '" + key + "' appears twice");
    }
    return {};
}

}  // namespace spillway::gguf
