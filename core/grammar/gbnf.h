#pragma once
// GBNF, the grammar format llama.cpp's `grammar` field and --grammar-file take, to a Grammar.
//
//   root  ::= "yes" | "no" | answer    # a comment
//   answer ::= [A-Z] [a-z]* ("," ws [a-z]+){0,3} "."
//   ws    ::= [ \t\n]*
//
// Understood: rules `name ::= alternatives` (names of letters, digits and '-'; `root` is the text
// as a whole; a rule goes on over new lines inside parentheses), sequences, `|`, grouping,
// string literals with the escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH (written as UTF-8),
// character classes `[a-z_]` and `[^"\\]` with ranges and the same escapes, `.` (any character),
// the repetitions `*`, `+`, `?`, `{m}`, `{m,}` and `{m,n}`, and `#` comments. A negated class and
// `.` take any UTF-8 character beyond ASCII too; a class that names characters beyond ASCII
// itself is refused by name (not supported yet). Refused with the line and column: a syntax
// error, a rule used and not defined or defined twice, no `root`, left recursion (`a ::= a "x"`,
// directly or through other rules), a repetition over 10,000.

#include <string_view>

#include "base/result.h"
#include "core/grammar/grammar.h"

namespace spillway::grammar {

// InvalidArgument with what is wrong and where ("line 2, column 9: ...").
Result<Grammar> parseGbnf(std::string_view text);

}  // namespace spillway::grammar
