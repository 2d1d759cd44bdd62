#include "core/grammar/gbnf.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace spillway::grammar {

namespace {

using Symbol = Grammar::Symbol;
using Sequence = std::vector<Symbol>;

constexpr int kMaxRepeat = 10'000;

void appendUtf8(std::string& out, uint32_t cp)
{
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

class Parser {
public:
    explicit Parser(std::string_view text) : m_text(text) {}

    Result<Grammar> parse()
    {
        space(true);
        while (ok() && m_pos < m_text.size()) {
            parseRule();
            space(true);
        }
        if (!ok()) return *m_error;
        for (const auto& [name, id] : m_ids)
            if (!m_defined.count(name))
                return makeError(ErrorCode::InvalidArgument, "the grammar uses the rule '" + name + "' but does not define it");
        auto root = m_ids.find("root");
        if (root == m_ids.end()) return makeError(ErrorCode::InvalidArgument, "the grammar has no 'root' rule");
        m_grammar.root = root->second;
        if (auto cycle = leftRecursion()) return makeError(ErrorCode::InvalidArgument, *cycle);
        return std::move(m_grammar);
    }

private:
    bool ok() const { return !m_error.has_value(); }
    bool at(char c) const { return m_pos < m_text.size() && m_text[m_pos] == c; }
    char peek(size_t ahead = 0) const { return m_pos + ahead < m_text.size() ? m_text[m_pos + ahead] : '\0'; }

    void fail(const std::string& what)
    {
        if (m_error) return;
        int line = 1, column = 1;
        for (size_t i = 0; i < m_pos && i < m_text.size(); ++i) {
            if (m_text[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        m_error = makeError(ErrorCode::InvalidArgument,
                            "grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
        m_pos = m_text.size();
    }

    // Spaces, tabs and comments; new lines too where `newlines` (inside parentheses, between rules).
    void space(bool newlines)
    {
        while (m_pos < m_text.size()) {
            const char c = m_text[m_pos];
            if (c == ' ' || c == '\t') {
                ++m_pos;
            } else if (c == '#') {
                while (m_pos < m_text.size() && m_text[m_pos] != '\n') ++m_pos;
            } else if (newlines && (c == '\n' || c == '\r')) {
                ++m_pos;
            } else {
                break;
            }
        }
    }

    static bool nameChar(char c)
    {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }

    std::string name()
    {
        const size_t start = m_pos;
        while (m_pos < m_text.size() && nameChar(m_text[m_pos])) ++m_pos;
        return std::string(m_text.substr(start, m_pos - start));
    }

    int ruleId(const std::string& name)
    {
        auto it = m_ids.find(name);
        if (it != m_ids.end()) return it->second;
        const int id = m_grammar.addRule(name);
        m_ids.emplace(name, id);
        return id;
    }

    int anonymous(const std::string& base)
    {
        return m_grammar.addRule(base + "/" + std::to_string(++m_anonymous));  // "/": in no rule name of the text
    }

    void parseRule()
    {
        const std::string n = name();
        if (n.empty()) return fail("expected a rule name");
        space(false);
        if (m_text.substr(m_pos, 3) != "::=") return fail("expected '::=' after '" + n + "'");
        m_pos += 3;
        space(true);
        if (!m_defined.insert(n).second) return fail("the rule '" + n + "' is defined twice");
        m_current = n;
        parseAlternates(ruleId(n), false);
        if (!ok()) return;
        if (at('\r')) ++m_pos;
        if (at('\n')) ++m_pos;
        else if (m_pos < m_text.size()) fail(std::string("expected the end of the rule, not '") + peek() + "'");
    }

    void parseAlternates(int rule, bool nested)
    {
        for (;;) {
            Sequence s = parseSequence(nested);
            if (!ok()) return;
            m_grammar.addAlternative(rule, std::move(s));
            if (!at('|')) return;
            ++m_pos;
            space(true);
        }
    }

    Sequence parseSequence(bool nested)
    {
        Sequence out;
        while (ok() && m_pos < m_text.size()) {
            const char c = peek();
            Sequence atom;
            if (c == '"') {
                atom = m_grammar.literal(literal());
            } else if (c == '[') {
                atom = {characterClass()};
            } else if (c == '.') {
                ++m_pos;
                atom = {anyCharacter(ByteClass())};
            } else if (c == '(') {
                ++m_pos;
                space(true);
                const int group = anonymous(m_current);
                parseAlternates(group, true);
                if (!ok()) return out;
                if (!at(')')) {
                    fail("expected ')'");
                    return out;
                }
                ++m_pos;
                atom = {Grammar::rule(group)};
            } else if (nameChar(c)) {
                const size_t start = m_pos;
                const std::string ref = name();
                // A name followed by ::= begins the next rule (a rule's end needs a new line).
                size_t after = m_pos;
                while (after < m_text.size() && (m_text[after] == ' ' || m_text[after] == '\t')) ++after;
                if (m_text.substr(after, 3) == "::=") {
                    m_pos = start;
                    fail("expected a new line before the rule '" + ref + "'");
                    return out;
                }
                atom = {Grammar::rule(ruleId(ref))};
            } else {
                break;
            }
            if (!ok()) return out;
            space(nested);
            atom = repeated(std::move(atom));
            if (!ok()) return out;
            space(nested);
            out.insert(out.end(), atom.begin(), atom.end());
        }
        return out;
    }

    // The atom with the repetition after it, if any.
    Sequence repeated(Sequence atom)
    {
        int low = 1, high = 1;  // high < 0: no bound
        if (at('*')) {
            low = 0, high = -1;
        } else if (at('+')) {
            low = 1, high = -1;
        } else if (at('?')) {
            low = 0, high = 1;
        } else if (at('{')) {
            ++m_pos;
            space(false);
            const std::optional<int> m = number();
            if (!m) {
                fail("expected a number after '{'");
                return {};
            }
            low = high = *m;
            space(false);
            if (at(',')) {
                ++m_pos;
                space(false);
                const std::optional<int> n = number();
                high = n ? *n : -1;
                space(false);
            }
            if (!at('}')) {
                fail("expected '}'");
                return {};
            }
            if (high >= 0 && high < low) {
                fail("a repetition {m,n} needs m <= n");
                return {};
            }
        } else {
            return atom;
        }
        ++m_pos;
        if (low > kMaxRepeat || high > kMaxRepeat) {
            fail("a repetition of more than " + std::to_string(kMaxRepeat) + " is not supported");
            return {};
        }
        // One symbol for the atom, then: `low` of it, and either a tail of any more (right
        // recursion: star ::= atom star | "") or a chain of (high - low) optional ones.
        Symbol one = atom.size() == 1 ? atom.front() : wrap(atom);
        Sequence out(size_t(low), one);
        if (high < 0) {
            const int star = anonymous(m_current);
            m_grammar.addAlternative(star, {one, Grammar::rule(star)});
            m_grammar.addAlternative(star, {});
            out.push_back(Grammar::rule(star));
        } else if (high > low) {
            int next = -1;  // opt_k ::= atom opt_{k-1} | ""
            for (int k = 0; k < high - low; ++k) {
                const int opt = anonymous(m_current);
                Sequence more{one};
                if (next >= 0) more.push_back(Grammar::rule(next));
                m_grammar.addAlternative(opt, std::move(more));
                m_grammar.addAlternative(opt, {});
                next = opt;
            }
            out.push_back(Grammar::rule(next));
        }
        return out;
    }

    Symbol wrap(const Sequence& s)
    {
        const int r = anonymous(m_current);
        m_grammar.addAlternative(r, s);
        return Grammar::rule(r);
    }

    std::optional<int> number()
    {
        const size_t start = m_pos;
        long v = 0;
        while (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9' && v <= kMaxRepeat)
            v = v * 10 + (m_text[m_pos++] - '0');
        if (m_pos == start) return std::nullopt;
        return int(std::min<long>(v, kMaxRepeat + 1));
    }

    // One character of a literal or class (its escapes), as a code point; raw UTF-8 decoded.
    std::optional<uint32_t> character()
    {
        if (m_pos >= m_text.size()) return std::nullopt;
        const unsigned char c = static_cast<unsigned char>(m_text[m_pos]);
        if (c == '\\') {
            ++m_pos;
            const char e = peek();
            ++m_pos;
            switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case '\\': case '"': case '[': case ']': case '-': case '^': return uint32_t(e);
            case 'x': return hex(2);
            case 'u': return hex(4);
            case 'U': return hex(8);
            default: fail(std::string("unknown escape '\\") + e + "'"); return std::nullopt;
            }
        }
        if (c < 0x80) {
            ++m_pos;
            return c;
        }
        const int length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (length == 0 || m_pos + size_t(length) > m_text.size()) {
            fail("the grammar is not valid UTF-8 here");
            return std::nullopt;
        }
        uint32_t cp = c & (0x7F >> length);
        for (int i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<unsigned char>(m_text[m_pos + size_t(i)]) & 0x3F);
        m_pos += size_t(length);
        return cp;
    }

    std::optional<uint32_t> hex(int digits)
    {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const char h = peek();
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) {
                fail("expected " + std::to_string(digits) + " hexadecimal digits");
                return std::nullopt;
            }
            v = v * 16 + uint32_t(d);
            ++m_pos;
        }
        if (v > 0x10FFFF) {
            fail("a code point above U+10FFFF");
            return std::nullopt;
        }
        return v;
    }

    std::string literal()
    {
        ++m_pos;  // the opening quote
        std::string out;
        while (ok() && !at('"')) {
            if (m_pos >= m_text.size() || at('\n')) {
                fail("a string literal is not closed");
                return {};
            }
            if (auto cp = character()) appendUtf8(out, *cp);
        }
        ++m_pos;
        return out;
    }

    Symbol characterClass()
    {
        ++m_pos;  // '['
        const bool negated = at('^');
        if (negated) ++m_pos;
        ByteClass ascii;
        bool beyond = false;
        while (ok() && !at(']')) {
            if (m_pos >= m_text.size() || at('\n')) {
                fail("a character class is not closed");
                return {};
            }
            const std::optional<uint32_t> from = character();
            if (!from) return {};
            uint32_t to = *from;
            if (at('-') && peek(1) != ']' && peek(1) != '\n' && m_pos + 1 < m_text.size()) {
                ++m_pos;
                const std::optional<uint32_t> t = character();
                if (!t) return {};
                to = *t;
                if (to < *from) {
                    fail("a range in a character class goes backwards");
                    return {};
                }
            }
            if (to >= 0x80) beyond = true;
            if (*from < 0x80) ascii.add(uint8_t(*from), uint8_t(std::min<uint32_t>(to, 0x7F)));
        }
        ++m_pos;
        if (beyond) {
            fail("character classes with characters beyond ASCII are not supported yet");
            return {};
        }
        if (!negated) return m_grammar.bytes(ascii);
        return anyCharacter(ascii);
    }

    // Any character but those of `excluded` (ASCII): an ASCII byte, or a UTF-8 sequence of 2-4 bytes.
    Symbol anyCharacter(const ByteClass& excluded)
    {
        ByteClass allowed;
        for (unsigned b = 0; b < 0x80; ++b)
            if (!excluded.has(uint8_t(b))) allowed.add(uint8_t(b));
        const int r = anonymous("char");
        m_grammar.addAlternative(r, {m_grammar.bytes(allowed)});
        const Symbol cont = m_grammar.bytes(ByteClass().add(0x80, 0xBF));
        m_grammar.addAlternative(r, {m_grammar.bytes(ByteClass().add(0xC2, 0xDF)), cont});
        m_grammar.addAlternative(r, {m_grammar.bytes(ByteClass().add(0xE0, 0xEF)), cont, cont});
        m_grammar.addAlternative(r, {m_grammar.bytes(ByteClass().add(0xF0, 0xF4)), cont, cont, cont});
        return Grammar::rule(r);
    }

    // A rule that can reach itself before a byte is read: named, or nothing.
    std::optional<std::string> leftRecursion() const
    {
        const Grammar& g = m_grammar;
        const size_t rules = size_t(g.ruleCount());
        auto sequenceOf = [&](uint32_t start) {
            Sequence s;
            for (uint32_t i = start; !g.flat()[i].end; ++i) s.push_back(g.flat()[i].symbol);
            return s;
        };
        std::vector<bool> nullable(rules, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < rules; ++r) {
                if (nullable[r]) continue;
                for (uint32_t a : g.alternativesOf(uint32_t(r))) {
                    bool all = true;
                    for (const Symbol& s : sequenceOf(a)) all = all && s.isRule && nullable[s.index];
                    if (all) {
                        nullable[r] = changed = true;
                        break;
                    }
                }
            }
        }
        std::vector<std::vector<uint32_t>> first(rules);  // rules a rule may begin with
        for (size_t r = 0; r < rules; ++r)
            for (uint32_t a : g.alternativesOf(uint32_t(r)))
                for (const Symbol& s : sequenceOf(a)) {
                    if (!s.isRule) break;
                    first[r].push_back(s.index);
                    if (!nullable[s.index]) break;
                }
        std::vector<int> mark(rules, 0);  // 1: on the path, 2: done
        std::optional<std::string> found;
        std::function<void(uint32_t)> visit = [&](uint32_t r) {
            mark[r] = 1;
            for (uint32_t n : first[r]) {
                if (found) return;
                if (mark[n] == 1) found = "left recursion through the rule '" + g.ruleName(int(n)) +
                                          "' (it can reach itself before any character; write it as right recursion or a repetition)";
                else if (mark[n] == 0) visit(n);
            }
            mark[r] = 2;
        };
        for (size_t r = 0; r < rules && !found; ++r)
            if (mark[r] == 0) visit(uint32_t(r));
        return found;
    }

    std::string_view m_text;
    size_t m_pos = 0;
    Grammar m_grammar;
    std::map<std::string, int> m_ids;
    std::set<std::string> m_defined;
    std::string m_current = "rule";
    int m_anonymous = 0;
    std::optional<Error> m_error;
};

}  // namespace

Result<Grammar> parseGbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace spillway::grammar
