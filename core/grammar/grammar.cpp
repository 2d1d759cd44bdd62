#include "core/grammar/grammar.h"

#include <algorithm>

namespace spillway::grammar {

namespace {

constexpr int kMaxDepth = 512;      // nested expansions of one stack in one step
constexpr size_t kMaxStacks = 4096; // ways a text may go on (a guard against runaway ambiguity)
// Guards against a grammar whose text nests without end or grows ambiguous (a GBNF grammar is a
// client's input): a stack deeper than this is not followed, and a step keeps at most this many
// stack entries in all, so one byte costs a bounded copy and sort whatever the grammar.
constexpr size_t kMaxStackLength = 1024;
constexpr size_t kMaxCells = size_t(1) << 14;

void setBit(std::vector<uint64_t>& bits, int32_t t) { bits[size_t(t) >> 6] |= uint64_t(1) << (t & 63); }

}  // namespace

int Grammar::addRule(std::string name)
{
    m_rules.push_back({std::move(name), {}});
    return int(m_rules.size()) - 1;
}

void Grammar::addAlternative(int rule, std::vector<Symbol> sequence)
{
    m_rules[size_t(rule)].alternatives.push_back(uint32_t(m_flat.size()));
    for (const Symbol& s : sequence) m_flat.push_back({false, s});
    m_flat.push_back({true, {}});
}

Grammar::Symbol Grammar::bytes(const ByteClass& c)
{
    for (size_t i = 0; i < m_classes.size(); ++i)
        if (m_classes[i].bits == c.bits) return {false, uint32_t(i)};
    m_classes.push_back(c);
    return {false, uint32_t(m_classes.size() - 1)};
}

std::vector<Grammar::Symbol> Grammar::literal(std::string_view text)
{
    std::vector<Symbol> out;
    for (char c : text) out.push_back(bytes(ByteClass().add(uint8_t(c))));
    return out;
}

void GrammarState::expand(const Grammar& g, Stack s, std::vector<Stack>& out, int depth)
{
    if (depth > kMaxDepth || out.size() > kMaxStacks || s.size() > kMaxStackLength ||
        out.size() * s.size() > kMaxCells)
        return;
    const auto& flat = g.flat();
    for (;;) {
        if (s.empty()) {
            if (m_topOnly) m_leftTop = true;
            else out.push_back(std::move(s));
            return;
        }
        const uint32_t pos = s.back();
        const Grammar::Flat& f = flat[pos];
        if (f.end) {  // the rule is done: on after the reference that called it
            s.pop_back();
            if (s.empty()) continue;
            s.back() += 1;
            continue;
        }
        if (!f.symbol.isRule) {
            out.push_back(std::move(s));
            return;
        }
        const bool tail = flat[pos + 1].end;  // nothing after it: the rule's frame goes
        const auto& alternatives = g.alternativesOf(f.symbol.index);
        for (size_t a = 0; a < alternatives.size(); ++a) {
            Stack n = (a + 1 == alternatives.size()) ? std::move(s) : s;
            if (tail) n.pop_back();
            n.push_back(alternatives[a]);
            expand(g, std::move(n), out, depth + 1);
        }
        return;
    }
}

namespace {

void dedup(std::vector<Stack>& stacks)
{
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

GrammarState GrammarState::start(const Grammar& g)
{
    GrammarState s;
    for (uint32_t a : g.alternativesOf(uint32_t(g.root))) s.expand(g, Stack{a}, s.m_stacks, 0);
    dedup(s.m_stacks);
    return s;
}

GrammarState GrammarState::ofTop(const Grammar&, uint32_t top)
{
    GrammarState s;
    s.m_topOnly = true;
    s.m_stacks.push_back(Stack{top});
    return s;
}

bool GrammarState::advance(const Grammar& g, uint8_t byte)
{
    std::vector<Stack> out;
    const bool wasLeft = m_leftTop;
    m_leftTop = false;
    size_t cells = 0, counted = 0;
    for (const Stack& s : m_stacks) {
        if (cells > kMaxCells) break;
        if (s.empty()) continue;
        const Grammar::Flat& f = g.flat()[s.back()];
        if (!g.byteClass(f.symbol.index).has(byte)) continue;
        Stack n = s;
        n.back() += 1;
        expand(g, std::move(n), out, 0);
        for (; counted < out.size(); ++counted) cells += out[counted].size();
    }
    if (out.empty() && !m_leftTop) {
        m_leftTop = wasLeft;
        return false;
    }
    dedup(out);
    m_stacks = std::move(out);
    return true;
}

std::string GrammarState::key() const
{
    std::string k;
    k += char(m_topOnly);
    k += char(m_leftTop);
    for (const Stack& s : m_stacks) {
        const uint32_t n = uint32_t(s.size());
        k.append(reinterpret_cast<const char*>(&n), sizeof n);
        k.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
    }
    return k;
}

bool GrammarState::accepting() const
{
    return std::any_of(m_stacks.begin(), m_stacks.end(), [](const Stack& s) { return s.empty(); });
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::vector<std::string> tokenBytes,
                         std::vector<bool> endTokens)
    : m_grammar(std::move(grammar)), m_bytes(std::move(tokenBytes)), m_end(std::move(endTokens))
{
    m_end.resize(m_bytes.size(), false);
    m_trie.emplace_back();
    for (size_t t = 0; t < m_bytes.size(); ++t) {
        if (m_bytes[t].empty()) continue;
        uint32_t node = 0;
        for (char c : m_bytes[t]) {
            const uint8_t b = uint8_t(c);
            auto& kids = m_trie[node].children;
            auto it = std::find_if(kids.begin(), kids.end(), [&](const auto& k) { return k.first == b; });
            if (it != kids.end()) {
                node = it->second;
            } else {
                const uint32_t next = uint32_t(m_trie.size());
                m_trie[node].children.emplace_back(b, next);
                m_trie.emplace_back();
                node = next;
            }
        }
        m_trie[node].tokens.push_back(int32_t(t));
    }
}

bool TokenMasker::accept(GrammarState& state, int32_t token) const
{
    if (token < 0 || size_t(token) >= m_bytes.size()) return false;
    const std::string& bytes = m_bytes[size_t(token)];
    if (bytes.empty()) return m_end[size_t(token)] && state.accepting();
    GrammarState next = state;
    for (char c : bytes)
        if (!next.advance(*m_grammar, uint8_t(c))) return false;
    state = std::move(next);
    return true;
}

int32_t TokenMasker::intern(GrammarState state)
{
    std::string key = state.key();
    if (auto it = m_ids.find(key); it != m_ids.end()) return it->second;
    const int32_t id = int32_t(m_states.size());
    Interned in{std::move(state), {}};
    in.next.fill(kUnknown);
    m_states.push_back(std::move(in));
    m_ids.emplace(std::move(key), id);
    return id;
}

int32_t TokenMasker::next(int32_t id, uint8_t byte)
{
    int32_t n = m_states[size_t(id)].next[byte];
    if (n != kUnknown) return n;
    // Most bytes fit no stack's top: no copy for those.
    const GrammarState& current = m_states[size_t(id)].state;
    const bool fits = std::any_of(current.stacks().begin(), current.stacks().end(), [&](const Stack& st) {
        return !st.empty() && m_grammar->byteClass(m_grammar->flat()[st.back()].symbol.index).has(byte);
    });
    if (!fits) return m_states[size_t(id)].next[byte] = kDead;
    GrammarState s = current;
    n = s.advance(*m_grammar, byte) ? intern(std::move(s)) : kDead;
    m_states[size_t(id)].next[byte] = n;
    return n;
}

bool TokenMasker::allowsFrom(int32_t id, int32_t token)
{
    const std::string& bytes = m_bytes[size_t(token)];
    if (bytes.empty()) return m_end[size_t(token)] && m_states[size_t(id)].state.accepting();
    for (char c : bytes)
        if ((id = next(id, uint8_t(c))) < 0) return false;
    return true;
}

bool TokenMasker::allows(const GrammarState& state, int32_t token)
{
    if (token < 0 || size_t(token) >= m_bytes.size()) return false;
    return allowsFrom(intern(state), token);
}

void TokenMasker::walk(uint32_t node, int32_t state, TopSets& out)
{
    for (size_t k = 0; k < m_trie[node].children.size(); ++k) {
        const auto [byte, child] = m_trie[node].children[k];
        const int32_t n = next(state, byte);
        if (n < 0) continue;
        if (m_states[size_t(n)].state.leftTop()) {  // the top's rule is done: the rest of the stack decides
            std::vector<uint32_t> todo{child};
            while (!todo.empty()) {
                const uint32_t t = todo.back();
                todo.pop_back();
                out.undecided.insert(out.undecided.end(), m_trie[t].tokens.begin(), m_trie[t].tokens.end());
                for (const auto& c : m_trie[t].children) todo.push_back(c.second);
            }
            continue;
        }
        for (int32_t t : m_trie[child].tokens) setBit(out.accepted, t);
        walk(child, n, out);
    }
}

const TokenMasker::TopSets& TokenMasker::topSets(uint32_t top)
{
    auto it = m_tops.find(top);
    if (it != m_tops.end()) return it->second;
    TopSets sets;
    sets.accepted.assign((m_bytes.size() + 63) / 64, 0);
    walk(0, intern(GrammarState::ofTop(*m_grammar, top)), sets);
    return m_tops.emplace(top, std::move(sets)).first->second;
}

int32_t TokenMasker::after(int32_t id, int32_t token)
{
    if (token < 0 || size_t(token) >= m_bytes.size()) return kDead;
    const std::string& bytes = m_bytes[size_t(token)];
    if (bytes.empty()) return m_end[size_t(token)] && accepting(id) ? id : kDead;
    for (char c : bytes)
        if ((id = next(id, uint8_t(c))) < 0) return kDead;
    return id;
}

std::vector<uint64_t> TokenMasker::mask(const GrammarState& state) { return mask(intern(state)); }

std::vector<uint64_t> TokenMasker::mask(int32_t id)
{
    const GrammarState& state = m_states[size_t(id)].state;  // (interning below does not move it: a deque)
    std::vector<uint64_t> bits((m_bytes.size() + 63) / 64, 0);
    std::vector<uint32_t> tops;
    for (const Stack& s : state.stacks())
        if (!s.empty()) tops.push_back(s.back());
    std::sort(tops.begin(), tops.end());
    tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
    std::vector<int32_t> undecided;
    for (uint32_t top : tops) {
        const TopSets& sets = topSets(top);
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= sets.accepted[w];
        undecided.insert(undecided.end(), sets.undecided.begin(), sets.undecided.end());
    }
    for (int32_t t : undecided)
        if (!((bits[size_t(t) >> 6] >> (t & 63)) & 1) && allowsFrom(id, t)) setBit(bits, t);
    if (state.accepting())
        for (size_t t = 0; t < m_end.size(); ++t)
            if (m_end[t]) setBit(bits, int32_t(t));
    return bits;
}

}  // namespace spillway::grammar
