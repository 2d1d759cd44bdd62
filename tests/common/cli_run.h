#pragma once
// Runs a command-line program as a user would (stdin closed, stdout and stderr captured), for
// tests of spillway-cli.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace testing_support {

struct CliRun {
    int exitCode = -1;  // 128 + signal when killed
    std::string out;
    std::string err;
};

inline std::string slurp(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `program args` with `env` (variable assignments put before the command, "NAME='value' "); its
// output goes through files in `scratchDir` (which must exist).
inline CliRun runProgram(const std::string& program, const std::string& args, const std::string& scratchDir,
                         const std::string& env = "")
{
    const std::string out = scratchDir + "/cli.out", err = scratchDir + "/cli.err";
    const std::string cmd = env + "'" + program + "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
    const int status = std::system(cmd.c_str());
    CliRun r;
    if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.exitCode = 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

}  // namespace testing_support
