#include "gpu/cpu/cpu_memory.h"

#include <sched.h>
#include <sys/mman.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace spillway::gpu::cpu {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeThreshold = size_t{4} << 20;

// Reads a "Key:   123 kB" line of /proc/meminfo, in bytes; 0 when absent.
uint64_t memInfoField(const std::string& text, const std::string& key)
{
    const size_t at = text.find(key + ":");
    if (at == std::string::npos) return 0;
    std::istringstream line(text.substr(at + key.size() + 1, 64));
    uint64_t kib = 0;
    line >> kib;
    return kib * 1024;
}

std::string readFile(const char* path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

void* allocateHostMemory(size_t bytes)
{
    // Refuse up front what the machine cannot hold: an absurd size must be an error value, and
    // some allocators (AddressSanitizer's) abort instead of returning null.
    static const uint64_t totalMemory = readHostMemoryInfo().total;
    if (totalMemory != 0 && bytes > totalMemory) return nullptr;
    const size_t alignment = bytes >= kHugeThreshold ? kHugePage : 4096;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, bytes == 0 ? 64 : bytes) != 0) return nullptr;
    if (bytes >= kHugeThreshold) madvise(p, bytes & ~(kHugePage - 1), MADV_HUGEPAGE);
    return p;
}

void freeHostMemory(void* p) { std::free(p); }

HostMemoryInfo readHostMemoryInfo()
{
    const std::string text = readFile("/proc/meminfo");
    HostMemoryInfo info;
    info.total = memInfoField(text, "MemTotal");
    info.available = memInfoField(text, "MemAvailable");
    return info;
}

std::string cpuModelName()
{
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) break;
        size_t begin = line.find_first_not_of(" \t", colon + 1);
        if (begin == std::string::npos) break;
        return line.substr(begin);
    }
    return "x86-64 CPU";
}

int onlineCores()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace spillway::gpu::cpu
