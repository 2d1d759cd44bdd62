#pragma once
// A fresh folder for one test (mkdtemp under $TMPDIR, or /tmp, or a parent given), removed with
// everything in it when the object goes. path() is empty if it could not be made.

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace spillway::testing_support {

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "spillway-test", std::string parent = "")
    {
        if (parent.empty()) {
            const char* t = std::getenv("TMPDIR");
            parent = t && *t ? t : "/tmp";
        }
        std::string tmpl = parent + "/" + prefix + "-XXXXXX";
        if (::mkdtemp(tmpl.data())) m_path = std::filesystem::canonical(tmpl).string();
    }
    ~TempDir()
    {
        std::error_code ec;
        if (!m_path.empty()) std::filesystem::remove_all(m_path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return m_path; }
    std::string operator/(const std::string& name) const { return m_path + "/" + name; }

private:
    std::string m_path;
};

}  // namespace spillway::testing_support
