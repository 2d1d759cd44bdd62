#pragma once
// JSON Schema to a grammar of the JSON texts that validate against it (response_format's
// json_schema, a tool's parameters), and of any JSON object (json_object).
//
// Understood: type (one or a list), properties, required, additionalProperties (false, true or a
// schema; with properties and no additionalProperties, no others are written), items,
// prefixItems, minItems, maxItems, enum, const, anyOf and oneOf (as alternatives), $ref into
// #/$defs or #/definitions (recursion included), minLength and maxLength of strings, and the
// annotations (title, description, default, examples, $schema, $id, $comment, format is read as
// an annotation, as JSON Schema does by default). Properties come in the schema's order.
// Anything else (pattern, minimum, multipleOf, allOf, not, if/then, dependentSchemas...) is
// refused by name in strict mode, and leaves the value constrained by its type alone otherwise.
//
// Bounds that keep a model from writing forever: white space is at most a newline and 20
// spaces or tabs between tokens, a number has at most 16 digits before its point and 16 after.

#include <memory>
#include <string>
#include <vector>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/result.h"
#include "core/grammar/grammar.h"

namespace spillway::grammar {

struct SchemaOptions {
    bool strict = true;      // refuse what is not understood (else: the type alone)
    int maxStringLength = 0; // > 0: no string longer than this many characters (a guard)
};

// Builds rules for schemas into one grammar; the rules of values (any JSON, a string, a schema)
// can be used in the caller's own rules around them (a tool call's markup).
class SchemaGrammar {
public:
    explicit SchemaGrammar(SchemaOptions options = {});
    SchemaGrammar(const SchemaGrammar&) = delete;
    SchemaGrammar& operator=(const SchemaGrammar&) = delete;
    // The rule of the values that validate against `schema`: InvalidArgument naming what is
    // not understood ("the schema's 'pattern' at /properties/zip is not supported").
    Result<int> schema(const nlohmann::ordered_json& schema);
    int anyValue();
    int anyObject();
    int whitespace();
    // A rule of the sequence given.
    int sequence(std::vector<Grammar::Symbol> symbols);
    Grammar& grammar() { return m_g; }
    Grammar take() { return std::move(m_g); }

    struct Impl;

private:
    Grammar m_g;
    SchemaOptions m_options;
    std::shared_ptr<Impl> m;
};

// The grammar of the whole text: white space, a value of `schema`, white space.
Result<Grammar> jsonSchemaGrammar(std::string_view schemaJson, SchemaOptions options = {});
Grammar jsonObjectGrammar();

}  // namespace spillway::grammar
