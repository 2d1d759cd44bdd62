#pragma once
// Reference texts: tests/data/reference/*.greedy48.tsv, one "prompt TAB text" per line (the text
// is the prompt followed by its greedy continuation).

#include <fstream>
#include <string>
#include <vector>

namespace spillway::testing_support {

struct ReferenceText {
    std::string prompt;
    std::string text;  // the prompt followed by the continuation
};

inline std::vector<ReferenceText> readReferenceTexts(const std::string& path)
{
    std::vector<ReferenceText> refs;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (const auto tab = line.find('\t'); tab != std::string::npos) refs.push_back({line.substr(0, tab), line.substr(tab + 1)});
    return refs;
}

}  // namespace spillway::testing_support
