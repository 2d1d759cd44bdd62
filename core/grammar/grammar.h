#pragma once
// Constrained decoding: a context-free grammar over bytes, the set of parse stacks a text so far
// leaves (GrammarState), and the tokens of a vocabulary that may come next (TokenMasker).
//
// A grammar is rules of alternatives, each a sequence of byte classes and rule references. A
// state is every way the text so far can go on: a set of stacks, each the positions to return
// to and, on top, the byte class that must come next (an empty stack: the text may end here).
// Repetition is written as right recursion; a reference in tail position replaces its rule's
// frame instead of stacking on it, so a long array does not deepen the stacks. Left recursion
// is not allowed (the builder never writes it).
// A text that nests deeper than 1024 or grows more than 4096 ways at once (or 16,384 stack
// entries) is not followed further: such a grammar is a client's mistake or an attack.
//
// The mask for a token must not cost a walk over the whole vocabulary at each step. The
// masker keeps the vocabulary as a byte trie, and for each stack top it has seen, once, the
// tokens that top decides alone: those its rule accepts without finishing (inside a string,
// nearly every token) and those it rejects. Only the tokens that finish the top's rule (a
// closing quote, say) are checked against the whole state at a step.

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spillway::grammar {

// A set of bytes.
struct ByteClass {
    std::array<uint64_t, 4> bits{};
    bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
    ByteClass& add(uint8_t b)
    {
        bits[b >> 6] |= uint64_t(1) << (b & 63);
        return *this;
    }
    ByteClass& add(uint8_t from, uint8_t to)
    {
        for (unsigned b = from; b <= to; ++b) add(uint8_t(b));
        return *this;
    }
    ByteClass& invert()
    {
        for (uint64_t& w : bits) w = ~w;
        return *this;
    }
    static ByteClass of(std::string_view bytes)
    {
        ByteClass c;
        for (char b : bytes) c.add(uint8_t(b));
        return c;
    }
};

class Grammar {
public:
    struct Symbol {
        bool isRule = false;
        uint32_t index = 0;  // a rule's id, or a byte class's
    };
    static Symbol rule(int id) { return {true, uint32_t(id)}; }

    int addRule(std::string name);
    void addAlternative(int rule, std::vector<Symbol> sequence);
    Symbol bytes(const ByteClass& c);
    // The sequence of one-byte classes spelling `text`.
    std::vector<Symbol> literal(std::string_view text);
    int ruleCount() const { return int(m_rules.size()); }
    const std::string& ruleName(int id) const { return m_rules[size_t(id)].name; }
    // The rule the text must match as a whole (the first added, by default).
    int root = 0;

    // Positions: an index into the flat list of every alternative's symbols, each alternative
    // ending in an End.
    struct Flat {
        bool end = false;
        Symbol symbol;
    };
    const std::vector<Flat>& flat() const { return m_flat; }
    const std::vector<uint32_t>& alternativesOf(uint32_t rule) const { return m_rules[rule].alternatives; }
    const ByteClass& byteClass(uint32_t i) const { return m_classes[i]; }

private:
    struct Rule {
        std::string name;
        std::vector<uint32_t> alternatives;  // where each starts in m_flat
    };
    std::vector<Rule> m_rules;
    std::vector<Flat> m_flat;
    std::vector<ByteClass> m_classes;
};

using Stack = std::vector<uint32_t>;

// Every way the bytes so far can go on.
class GrammarState {
public:
    // The state before any byte: the root's alternatives, expanded.
    static GrammarState start(const Grammar& g);
    // Each stack's top as a state of its own, its rule's end marked (for the masker's cache).
    static GrammarState ofTop(const Grammar& g, uint32_t top);

    // False (the state unchanged) when the byte cannot come next.
    bool advance(const Grammar& g, uint8_t byte);
    // Whether the text may end here.
    bool accepting() const;
    // Whether no more bytes can come (the text is whole).
    bool finished() const { return accepting() && m_stacks.size() == 1; }
    bool dead() const { return m_stacks.empty(); }
    // A stack of ofTop() that finished its rule (then the rest of the real stack decides).
    bool leftTop() const { return m_leftTop; }
    const std::vector<Stack>& stacks() const { return m_stacks; }
    // The stacks and flags as bytes: equal for equal states (the masker's interning key).
    std::string key() const;

private:
    void expand(const Grammar& g, Stack s, std::vector<Stack>& out, int depth);
    std::vector<Stack> m_stacks;
    bool m_topOnly = false;  // ofTop(): a stack that empties has left the top's rule
    bool m_leftTop = false;
};

// The tokens a grammar allows next, for a vocabulary given by each token's bytes ("" for a
// token that ends the reply, which the grammar allows where the text may end).
//
// The states it meets are interned, each with its transitions by byte filled as they are first
// taken, so that walking the vocabulary's trie, or a token's bytes, is a table lookup per byte
// once a state has been seen (a string's characters lead back to the same state).
class TokenMasker {
public:
    TokenMasker(std::shared_ptr<const Grammar> grammar, std::vector<std::string> tokenBytes, std::vector<bool> endTokens);

    // Whether `token` may come in `state`.
    bool allows(const GrammarState& state, int32_t token);
    // Every token `state` allows, as a bit per token.
    std::vector<uint64_t> mask(const GrammarState& state);
    // The same on interned states (what a decoder keeps between tokens): the state's id, the
    // id after a token (-1 where it is not allowed), a token allowed, the mask.
    int32_t idOf(const GrammarState& state) { return intern(state); }
    int32_t after(int32_t id, int32_t token);
    bool allows(int32_t id, int32_t token) { return token >= 0 && size_t(token) < m_bytes.size() && allowsFrom(id, token); }
    std::vector<uint64_t> mask(int32_t id);
    bool accepting(int32_t id) const { return m_states[size_t(id)].state.accepting(); }
    // Advances `state` by the token's bytes; false where it does not allow it.
    bool accept(GrammarState& state, int32_t token) const;
    const Grammar& grammar() const { return *m_grammar; }
    size_t cachedTops() const { return m_tops.size(); }
    size_t internedStates() const { return m_states.size(); }

private:
    struct TrieNode {
        std::vector<std::pair<uint8_t, uint32_t>> children;  // byte, node
        std::vector<int32_t> tokens;                         // tokens that end here
    };
    struct TopSets {
        std::vector<uint64_t> accepted;  // decided by the top alone: allowed
        std::vector<int32_t> undecided;  // finish the top's rule: checked against the whole state
    };
    static constexpr int32_t kUnknown = -2, kDead = -1;
    struct Interned {
        GrammarState state;
        std::array<int32_t, 256> next;
    };
    int32_t intern(GrammarState state);
    int32_t next(int32_t id, uint8_t byte);
    bool allowsFrom(int32_t id, int32_t token);
    const TopSets& topSets(uint32_t top);
    void walk(uint32_t node, int32_t state, TopSets& out);

    std::shared_ptr<const Grammar> m_grammar;
    std::vector<std::string> m_bytes;
    std::vector<bool> m_end;
    std::vector<TrieNode> m_trie;
    std::unordered_map<uint32_t, TopSets> m_tops;
    std::deque<Interned> m_states;  // a deque: a state stays where it is as more come (no moves, no copies)
    std::unordered_map<std::string, int32_t> m_ids;
};

}  // namespace spillway::grammar
