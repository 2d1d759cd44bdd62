#include "core/tokenizer/special_tokens.h"

#include <algorithm>

namespace spillway {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocabulary& vocab,
                                         std::initializer_list<TokenType> types)
{
    for (size_t id = 0; id < vocab.tokens.size() && id < vocab.types.size(); ++id) {
        const std::string& text = vocab.tokens[id];
        if (text.empty() || std::find(types.begin(), types.end(), vocab.types[id]) == types.end())
            continue;
        m_byFirstByte[static_cast<uint8_t>(text[0])].push_back(
            Candidate{text, static_cast<int32_t>(id)});
        ++m_count;
    }
    for (auto& list : m_byFirstByte) {
        std::stable_sort(list.begin(), list.end(), [](const Candidate& a, const Candidate& b) {
            return a.text.size() > b.text.size();
        });
    }
}

std::vector<TextFragment> SpecialTokenMatcher::split(std::string_view text) const
{
    std::vector<TextFragment> fragments;
    size_t textStart = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        const auto& candidates = m_byFirstByte[static_cast<uint8_t>(text[pos])];
        const Candidate* match = nullptr;
        for (const Candidate& c : candidates) {
            if (text.compare(pos, c.text.size(), c.text) == 0) {
                match = &c;
                break;
            }
        }
        if (!match) {
            ++pos;
            continue;
        }
        if (pos > textStart) fragments.push_back({text.substr(textStart, pos - textStart), -1});
        fragments.push_back({{}, match->token});
        pos += match->text.size();
        textStart = pos;
    }
    if (textStart < text.size()) fragments.push_back({text.substr(textStart), -1});
    return fragments;
}

}  // namespace spillway
