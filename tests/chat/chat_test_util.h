#pragma once
// Helpers shared by the chat template tests.

#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "core/chat/jinja.h"

namespace spillway::chat::test {

inline std::string chatTestDir()
{
    return std::string(SPILLWAY_SOURCE_DIR) + "/tests/chat";
}

// The file's bytes; "" and a test failure when it cannot be opened.
inline std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << path;
        return {};
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// "2025-03-09T14:30:05" as the std::tm strftime_now() formats (day of week and year filled in).
inline std::tm parseNow(const std::string& iso)
{
    std::tm t{};
    std::istringstream in(iso);
    char sep = 0;
    in >> t.tm_year >> sep >> t.tm_mon >> sep >> t.tm_mday >> sep >> t.tm_hour >> sep >> t.tm_min >>
        sep >> t.tm_sec;
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    t.tm_isdst = -1;
    std::tm copy = t;
    timegm(&copy);  // normalizes and computes tm_wday / tm_yday
    t.tm_wday = copy.tm_wday;
    t.tm_yday = copy.tm_yday;
    return t;
}

// Renders `source` with `variables` (JSON object text); the output, or "ERROR: <message>".
inline std::string renderOrError(const std::string& source, const std::string& variablesJson = "{}",
                                 const jinja::Limits& limits = {})
{
    auto t = jinja::Template::parse(source, jinja::Syntax{}, limits);
    if (!t) return "ERROR: " + t.error().message;
    auto vars = jinja::Value::fromJson(variablesJson);
    if (!vars) return "ERROR: " + vars.error().message;
    jinja::RenderOptions options;
    options.now = parseNow("2025-03-09T14:30:05");
    auto out = t->render(*vars, options);
    if (!out) return "ERROR: " + out.error().message;
    return *out;
}

}  // namespace spillway::chat::test
