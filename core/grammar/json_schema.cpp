#include "core/grammar/json_schema.h"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace spillway::grammar {

using json = nlohmann::ordered_json;  // properties in the schema's order
using Symbol = Grammar::Symbol;

namespace {

constexpr int kMaxDigits = 16;
constexpr int kMaxIndent = 20;
constexpr int kMaxBound = 1024;  // minItems, maxItems, minLength, maxLength written out

const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "format", "deprecated", "readOnly", "writeOnly",
                                            "$defs", "definitions", "strict", "name"};
const std::set<std::string> kUnderstood = {"type", "properties", "required", "additionalProperties", "items",
                                           "prefixItems", "minItems", "maxItems", "enum", "const", "anyOf",
                                           "oneOf", "$ref", "minLength", "maxLength"};

}  // namespace

struct SchemaGrammar::Impl {
    SchemaGrammar& owner;
    Grammar& g;
    SchemaOptions options;
    json root;
    std::map<std::string, int> refs;
    int ws = -1, value = -1, object = -1, string = -1, character = -1, number = -1, integer = -1;

    Symbol cls(const ByteClass& c) { return g.bytes(c); }
    Symbol ref(int rule) { return Grammar::rule(rule); }

    int rule(const std::string& name, std::vector<std::vector<Symbol>> alternatives)
    {
        const int r = g.addRule(name);
        for (auto& a : alternatives) g.addAlternative(r, std::move(a));
        return r;
    }

    // `s` repeated min to max times (max < 0: no bound).
    int repeat(const std::string& name, Symbol s, int min, int max)
    {
        int tail;
        if (max < 0) {
            tail = g.addRule(name + "*");
            g.addAlternative(tail, {});
            g.addAlternative(tail, {s, ref(tail)});
        } else {
            tail = rule(name + "?0", {{}});
            for (int k = 1; k <= max - min; ++k) tail = rule(name + "?" + std::to_string(k), {{}, {s, ref(tail)}});
        }
        std::vector<Symbol> seq(size_t(min), s);
        seq.push_back(ref(tail));
        return rule(name + "{" + std::to_string(min) + "," + std::to_string(max) + "}", {seq});
    }

    int whitespace()
    {
        if (ws >= 0) return ws;
        const int indent = repeat("indent", cls(ByteClass::of(" \t")), 0, kMaxIndent);
        const int spaces = repeat("spaces", cls(ByteClass::of(" \t")), 0, 4);
        ws = rule("ws", {{ref(spaces)}, {cls(ByteClass::of("\n")), ref(indent)}});
        return ws;
    }

    // One character of a JSON string: printable ASCII but `"` and `\`, an escape, or a UTF-8
    // sequence.
    int stringCharacter()
    {
        if (character >= 0) return character;
        ByteClass plain;
        plain.add(0x20, 0x7f);
        plain.bits[0x22 >> 6] &= ~(uint64_t(1) << (0x22 & 63));
        plain.bits[0x5c >> 6] &= ~(uint64_t(1) << (0x5c & 63));
        ByteClass hex;
        hex.add('0', '9').add('a', 'f').add('A', 'F');
        ByteClass cont;
        cont.add(0x80, 0xbf);
        const Symbol h = cls(hex), c = cls(cont);
        character = rule("char", {{cls(plain)},
                                  {cls(ByteClass::of("\\")), cls(ByteClass::of("\"\\/bfnrt"))},
                                  {cls(ByteClass::of("\\")), cls(ByteClass::of("u")), h, h, h, h},
                                  {cls(ByteClass().add(0xc2, 0xdf)), c},
                                  {cls(ByteClass().add(0xe0, 0xef)), c, c},
                                  {cls(ByteClass().add(0xf0, 0xf4)), c, c, c}});
        return character;
    }

    int stringRule(int min, int max)
    {
        if (options.maxStringLength > 0 && (max < 0 || max > options.maxStringLength)) max = options.maxStringLength;
        if (min == 0 && max < 0 && string >= 0) return string;
        const Symbol quote = cls(ByteClass::of("\""));
        const int chars = repeat("chars", ref(stringCharacter()), min, max);
        const int r = rule("string", {{quote, ref(chars), quote}});
        if (min == 0 && max < 0) string = r;
        return r;
    }

    int digits(int min, int max) { return repeat("digits", cls(ByteClass().add('0', '9')), min, max); }

    int integerRule()
    {
        if (integer >= 0) return integer;
        const int sign = rule("sign", {{}, {cls(ByteClass::of("-"))}});
        const int whole = rule("whole", {{cls(ByteClass::of("0"))},
                                         {cls(ByteClass().add('1', '9')), ref(digits(0, kMaxDigits - 1))}});
        integer = rule("integer", {{ref(sign), ref(whole)}});
        return integer;
    }

    int numberRule()
    {
        if (number >= 0) return number;
        const int fraction = rule("fraction", {{}, {cls(ByteClass::of(".")), ref(digits(1, kMaxDigits))}});
        const int expSign = rule("exp-sign", {{}, {cls(ByteClass::of("+-"))}});
        const int exponent = rule("exponent", {{}, {cls(ByteClass::of("eE")), ref(expSign), ref(digits(1, 3))}});
        number = rule("number", {{ref(integerRule()), ref(fraction), ref(exponent)}});
        return number;
    }

    std::vector<Symbol> lit(std::string_view text) { return g.literal(text); }

    // "[" ws (item (ws "," ws item){min-1,max-1})? ws "]".
    int arrayRule(int item, int min, int max)
    {
        const Symbol w = ref(whitespace());
        std::vector<Symbol> comma = {w, cls(ByteClass::of(",")), w, ref(item)};
        const int more = g.addRule("more-items");
        g.addAlternative(more, comma);
        const int next = repeat("items", ref(more), std::max(0, min - 1), max < 0 ? -1 : std::max(0, max - 1));
        std::vector<std::vector<Symbol>> alternatives;
        if (min == 0) alternatives.push_back({cls(ByteClass::of("[")), w, cls(ByteClass::of("]"))});
        if (max != 0) alternatives.push_back({cls(ByteClass::of("[")), w, ref(item), ref(next), w, cls(ByteClass::of("]"))});
        return rule("array", alternatives);
    }

    // "{" ws (string ws ":" ws value (ws "," ws ...)*)? ws "}" for any keys, values of `valueRule`.
    int freeObject(int valueRule)
    {
        const Symbol w = ref(whitespace());
        const int member = rule("member", {{ref(stringRule(0, -1)), w, cls(ByteClass::of(":")), w, ref(valueRule)}});
        const int members = arrayLike(member);
        return rule("object", {{cls(ByteClass::of("{")), w, cls(ByteClass::of("}"))},
                               {cls(ByteClass::of("{")), w, ref(member), ref(members), w, cls(ByteClass::of("}"))}});
    }

    // (ws "," ws item)*.
    int arrayLike(int item)
    {
        const Symbol w = ref(whitespace());
        const int more = g.addRule("more");
        g.addAlternative(more, {w, cls(ByteClass::of(",")), w, ref(item)});
        return repeat("more", ref(more), 0, -1);
    }

    int anyValue()
    {
        if (value >= 0) return value;
        value = g.addRule("value");  // filled after its parts, which refer to it
        const int array = arrayRule(value, 0, -1);
        object = freeObject(value);
        for (std::vector<Symbol> alt : std::vector<std::vector<Symbol>>{
                 {ref(object)}, {ref(array)}, {ref(stringRule(0, -1))}, {ref(numberRule())}, lit("true"), lit("false"), lit("null")})
            g.addAlternative(value, alt);
        return value;
    }

    Error unsupported(const std::string& what, const std::string& path) const
    {
        return Error{ErrorCode::InvalidArgument,
                     "the schema's " + what + " at " + (path.empty() ? std::string("/") : path) + " is not supported"};
    }

    static int bound(const json& s, const char* key, int otherwise)
    {
        auto it = s.find(key);
        if (it == s.end() || !it->is_number_integer()) return otherwise;
        return int(std::clamp<int64_t>(it->get<int64_t>(), 0, kMaxBound));
    }

    Result<int> literalValue(const json& v)
    {
        const int r = g.addRule("const");
        g.addAlternative(r, lit(v.dump()));
        return r;
    }

    Result<int> objectRule(const json& s, const std::string& path)
    {
        auto props = s.find("properties");
        auto extra = s.find("additionalProperties");
        if (props == s.end() || !props->is_object()) {
            if (extra != s.end() && extra->is_object()) {
                auto v = compile(*extra, path + "/additionalProperties");
                if (!v) return v.error();
                return freeObject(*v);
            }
            if (extra != s.end() && extra->is_boolean() && !extra->get<bool>())
                return rule("empty-object", {{cls(ByteClass::of("{")), ref(whitespace()), cls(ByteClass::of("}"))}});
            anyValue();
            return object;
        }
        if (strictOnly(extra != s.end() && !(extra->is_boolean())))
            return unsupported("'additionalProperties' beside 'properties'", path);
        std::set<std::string> required;
        if (auto r = s.find("required"); r != s.end() && r->is_array())
            for (const json& k : *r)
                if (k.is_string()) required.insert(k.get<std::string>());
        for (const std::string& k : required)
            if (!props->contains(k) && options.strict) return unsupported("required '" + k + "' without a property", path);
        struct Prop {
            std::string key;
            int value;
            bool required;
        };
        std::vector<Prop> list;
        for (const auto& [key, schema] : props->items()) {
            auto v = compile(schema, path + "/properties/" + key);
            if (!v) return v.error();
            list.push_back({key, *v, required.contains(key)});
        }
        if (list.empty())  // "properties": {} names none: no members
            return rule("empty-object", {{cls(ByteClass::of("{")), ref(whitespace()), cls(ByteClass::of("}"))}});
        // after[i][first]: the members from property i on, `first` when none came before.
        const Symbol w = ref(whitespace());
        std::vector<std::array<int, 2>> after(list.size() + 1);
        after[list.size()] = {rule("end", {{}}), rule("end", {{}})};
        for (size_t i = list.size(); i-- > 0;) {
            for (int first = 0; first < 2; ++first) {
                std::vector<Symbol> member;
                if (!first) member = {w, cls(ByteClass::of(",")), w};
                for (Symbol c : lit(json(list[i].key).dump())) member.push_back(c);
                for (Symbol c : {w, cls(ByteClass::of(":")), w, ref(list[i].value), ref(after[i + 1][0])}) member.push_back(c);
                std::vector<std::vector<Symbol>> alternatives = {member};
                if (!list[i].required) alternatives.push_back({ref(after[i + 1][first])});
                after[i][first] = rule("props-" + list[i].key, alternatives);
            }
        }
        return rule("object", {{cls(ByteClass::of("{")), w, ref(after[0][1]), w, cls(ByteClass::of("}"))}});
    }

    bool strictOnly(bool condition) const { return condition && options.strict; }

    Result<int> arrayOf(const json& s, const std::string& path)
    {
        const int min = bound(s, "minItems", 0), max = bound(s, "maxItems", -1);
        if (max >= 0 && max < min) return unsupported("maxItems below minItems", path);
        if (auto prefix = s.find("prefixItems"); prefix != s.end() && prefix->is_array()) {
            const Symbol w = ref(whitespace());
            std::vector<Symbol> seq = {cls(ByteClass::of("[")), w};
            for (size_t i = 0; i < prefix->size(); ++i) {
                auto v = compile((*prefix)[i], path + "/prefixItems/" + std::to_string(i));
                if (!v) return v.error();
                if (i) for (Symbol c : {w, cls(ByteClass::of(",")), w}) seq.push_back(c);
                seq.push_back(ref(*v));
            }
            for (Symbol c : {w, cls(ByteClass::of("]"))}) seq.push_back(c);
            return rule("tuple", {seq});
        }
        int item;
        if (auto items = s.find("items"); items != s.end()) {
            auto v = compile(*items, path + "/items");
            if (!v) return v.error();
            item = *v;
        } else {
            item = anyValue();
        }
        return arrayRule(item, min, max);
    }

    Result<int> typed(const json& s, const std::string& type, const std::string& path)
    {
        if (type == "object") return objectRule(s, path);
        if (type == "array") return arrayOf(s, path);
        if (type == "string") {
            const int min = bound(s, "minLength", 0), max = bound(s, "maxLength", -1);
            if (max >= 0 && max < min) return unsupported("maxLength below minLength", path);
            return stringRule(min, max);
        }
        if (type == "integer") return integerRule();
        if (type == "number") return numberRule();
        if (type == "boolean") return rule("boolean", {lit("true"), lit("false")});
        if (type == "null") return rule("null", {lit("null")});
        return unsupported("type '" + type + "'", path);
    }

    Result<int> compile(const json& s, const std::string& path)
    {
        if (s.is_boolean()) {
            if (s.get<bool>()) return anyValue();
            return unsupported("false schema (nothing validates)", path);
        }
        if (!s.is_object()) return Error{ErrorCode::InvalidArgument, "the schema at " + path + " is not an object"};
        for (const auto& [key, v] : s.items())
            if (!kUnderstood.contains(key) && !kAnnotations.contains(key) && options.strict)
                return unsupported("'" + key + "'", path);
        if (auto r = s.find("$ref"); r != s.end()) {
            if (!r->is_string()) return unsupported("'$ref' that is not a string", path);
            const std::string target = r->get<std::string>();
            if (auto known = refs.find(target); known != refs.end()) return known->second;
            json::json_pointer pointer;
            try {
                if (!target.starts_with("#")) throw std::invalid_argument("remote");
                pointer = json::json_pointer(target.substr(1));
            } catch (const std::exception&) {
                return unsupported("'$ref' " + target + " (only #/$defs/... and #/definitions/...)", path);
            }
            if (!root.contains(pointer)) return unsupported("'$ref' " + target + ", which names nothing", path);
            const int placeholder = g.addRule("ref " + target);
            refs[target] = placeholder;
            auto v = compile(root.at(pointer), target.substr(1));
            if (!v) return v.error();
            g.addAlternative(placeholder, {ref(*v)});
            return placeholder;
        }
        if (auto c = s.find("const"); c != s.end()) return literalValue(*c);
        if (auto e = s.find("enum"); e != s.end()) {
            if (!e->is_array() || e->empty()) return unsupported("'enum' that is not a non-empty list", path);
            const int r = g.addRule("enum");
            for (const json& v : *e) g.addAlternative(r, lit(v.dump()));
            return r;
        }
        for (const char* key : {"anyOf", "oneOf"})
            if (auto any = s.find(key); any != s.end()) {
                if (!any->is_array() || any->empty()) return unsupported(std::string("'") + key + "' that is not a non-empty list", path);
                const int r = g.addRule(key);
                for (size_t i = 0; i < any->size(); ++i) {
                    auto v = compile((*any)[i], path + "/" + key + "/" + std::to_string(i));
                    if (!v) return v.error();
                    g.addAlternative(r, {ref(*v)});
                }
                return r;
            }
        auto type = s.find("type");
        if (type == s.end()) {
            if (s.contains("properties") || s.contains("additionalProperties")) return objectRule(s, path);
            if (s.contains("items") || s.contains("prefixItems")) return arrayOf(s, path);
            return anyValue();
        }
        if (type->is_string()) return typed(s, type->get<std::string>(), path);
        if (!type->is_array() || type->empty()) return unsupported("'type' that is not a name or a list of names", path);
        const int r = g.addRule("types");
        for (const json& t : *type) {
            if (!t.is_string()) return unsupported("'type' list with a non-string", path);
            auto v = typed(s, t.get<std::string>(), path);
            if (!v) return v.error();
            g.addAlternative(r, {ref(*v)});
        }
        return r;
    }
};

SchemaGrammar::SchemaGrammar(SchemaOptions options)
    : m_options(options), m(std::make_shared<Impl>(Impl{*this, m_g, options, {}, {}}))
{
}

Result<int> SchemaGrammar::schema(const json& s)
{
    m->root = s;
    m->refs.clear();
    return m->compile(s, "");
}

int SchemaGrammar::anyValue() { return m->anyValue(); }
int SchemaGrammar::anyObject()
{
    m->anyValue();
    return m->object;
}
int SchemaGrammar::whitespace() { return m->whitespace(); }
int SchemaGrammar::sequence(std::vector<Grammar::Symbol> symbols)
{
    const int r = m_g.addRule("sequence");
    m_g.addAlternative(r, std::move(symbols));
    return r;
}

namespace {

Grammar wrap(SchemaGrammar& b, int value)
{
    // The root is the first rule: it is added last, so it swaps in as the grammar's root.
    const int ws = b.whitespace();
    const int root = b.sequence({Grammar::rule(ws), Grammar::rule(value), Grammar::rule(ws)});
    Grammar g = b.take();
    g.root = root;
    return g;
}

}  // namespace

Result<Grammar> jsonSchemaGrammar(std::string_view schemaJson, SchemaOptions options)
{
    json s = json::parse(schemaJson.begin(), schemaJson.end(), nullptr, false);
    if (s.is_discarded()) return makeError(ErrorCode::InvalidArgument, "the schema is not valid JSON");
    SchemaGrammar b(options);
    auto value = b.schema(s);
    if (!value) return value.error();
    return wrap(b, *value);
}

Grammar jsonObjectGrammar()
{
    SchemaGrammar b;
    return wrap(b, b.anyObject());
}

}  // namespace spillway::grammar
