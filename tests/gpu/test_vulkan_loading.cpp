// The Vulkan backend is loaded at run time (lib/libspillway_vulkan.so): the registry says whether
// it is usable and why not, createDevice("vulkan") gives BackendUnavailable with that reason
// where it is not, and a missing or foreign module is named in the reason. The status is probed
// once per process, so the module-path cases run this executable again as a child with
// SPILLWAY_VULKAN_MODULE set (the StatusIsWhole test prints what the child's registry says).

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gpu/registry.h"

using namespace spillway;
using namespace spillway::gpu;

namespace {

BackendStatus vulkanStatus()
{
    for (const BackendStatus& b : backendStatus())
        if (b.name == "vulkan") return b;
    ADD_FAILURE() << "backendStatus() has no vulkan entry";
    return {};
}

// A status says why exactly when the backend is not usable, and nothing not compiled is usable.
// It prints the status too: the child runs of the module-path cases below are read from it.
TEST(VulkanLoading, StatusIsWhole)
{
    const BackendStatus s = vulkanStatus();
    EXPECT_EQ(s.name, "vulkan");
    EXPECT_EQ(s.usable, s.reason.empty()) << s.reason;
    if (!s.compiled) EXPECT_FALSE(s.usable);
    std::printf("vulkan status: compiled %d usable %d reason [%s]\n", s.compiled, s.usable, s.reason.c_str());
}

TEST(VulkanLoading, StatusMatchesTheBuild)
{
    const BackendStatus s = vulkanStatus();
#ifdef SPILLWAY_VULKAN_MODULE_BUILT
    EXPECT_TRUE(s.compiled);
#else
    EXPECT_FALSE(s.compiled);
    EXPECT_FALSE(s.usable);
    EXPECT_NE(s.reason.find("not part of this build"), std::string::npos) << s.reason;
#endif
    if (!s.usable) {
        EXPECT_FALSE(s.reason.empty());
    }
    std::printf("[ INFO     ] vulkan: compiled %d usable %d %s\n", s.compiled, s.usable, s.reason.c_str());
}

TEST(VulkanLoading, UnusableMeansBackendUnavailableWithTheReason)
{
    const BackendStatus s = vulkanStatus();
    void* loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!loader && s.compiled) {
        EXPECT_EQ(s.reason, "no Vulkan loader (libvulkan.so.1 not found)");
    }
    if (loader) dlclose(loader);

    auto made = createDevice("vulkan", {});
    if (s.usable) {
        ASSERT_TRUE(made.ok()) << made.error().message;
        EXPECT_EQ(made.value()->info().backend, "vulkan");
        return;
    }
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.error().code, ErrorCode::BackendUnavailable);
    EXPECT_NE(made.error().message.find(s.reason), std::string::npos) << made.error().message;
}

#ifdef SPILLWAY_VULKAN_MODULE_BUILT
// What `<this executable> --gtest_filter=VulkanLoading.StatusIsWhole` prints with `env` set.
std::string childStatus(const std::string& env)
{
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::string cmd = env + " '" + self + "' --gtest_filter=VulkanLoading.StatusIsWhole 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return "";
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    const int status = pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    return out;
}

// Only meaningful where a loader exists: without one, the loader is the reason given first.
bool haveLoader()
{
    void* loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (loader) dlclose(loader);
    return loader != nullptr;
}

TEST(VulkanLoading, MissingModuleIsNamed)
{
    if (!haveLoader()) GTEST_SKIP() << "no Vulkan loader here";
    const std::string out = childStatus("SPILLWAY_VULKAN_MODULE=/nonexistent/libspillway_vulkan.so");
    EXPECT_NE(out.find("usable 0 reason [module not found at /nonexistent/libspillway_vulkan.so]"), std::string::npos)
        << out;
}

TEST(VulkanLoading, ForeignLibraryIsRefused)
{
    if (!haveLoader()) GTEST_SKIP() << "no Vulkan loader here";
    // A shared library that exists but is no Spillway module: the C library.
    const std::string out = childStatus("SPILLWAY_VULKAN_MODULE=/lib/x86_64-linux-gnu/libc.so.6");
    EXPECT_NE(out.find("is not a Spillway Vulkan module (entry points missing)"), std::string::npos) << out;
}

TEST(VulkanLoading, NoDeviceIsReported)
{
    if (!haveLoader()) GTEST_SKIP() << "no Vulkan loader here";
    // A driver list naming no driver: the loader finds no physical device.
    const std::string out = childStatus("VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json");
    EXPECT_NE(out.find("usable 0"), std::string::npos) << out;
    const bool named = out.find("no Vulkan device") != std::string::npos ||
                       out.find("no Vulkan driver") != std::string::npos;
    EXPECT_TRUE(named) << out;
}

TEST(VulkanLoading, DeviceIndexOutOfRangeIsReported)
{
    if (!vulkanStatus().usable) GTEST_SKIP() << "no usable Vulkan device: " << vulkanStatus().reason;
    const std::string out = childStatus("SPILLWAY_VULKAN_DEVICE=99");
    EXPECT_NE(out.find("SPILLWAY_VULKAN_DEVICE=99 names no device"), std::string::npos) << out;
}
#endif

// "auto" passes over a Vulkan device that runs on the CPU (lavapipe in CI) and says so; a real
// GPU is taken when CUDA is not usable.
TEST(VulkanLoading, AutoSkipsACpuDriverAndSaysWhy)
{
    const BackendStatus s = vulkanStatus();
    bool cudaUsable = false;
    for (const BackendStatus& b : backendStatus())
        if (b.name == "cuda") cudaUsable = b.usable;
    auto chosen = chooseDevice("auto", {});
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    ASSERT_TRUE(chosen->device);
    const std::string backend = chosen->device->info().backend;
    if (cudaUsable) {
        EXPECT_EQ(backend, "cuda");
        return;
    }
    if (!s.usable) {
        EXPECT_EQ(backend, "cpu");
        EXPECT_NE(chosen->why.find("backend 'vulkan': " + s.reason), std::string::npos) << chosen->why;
        return;
    }
    auto vulkan = createDevice("vulkan", {});
    ASSERT_TRUE(vulkan.ok()) << vulkan.error().message;
    const DeviceInfo& v = vulkan.value()->info();
    const bool onCpu = v.name.find("(CPU,") != std::string::npos;
    EXPECT_EQ(v.caps.emulated, onCpu) << v.name;
    if (onCpu) {
        EXPECT_EQ(backend, "cpu");
        EXPECT_NE(chosen->why.find("backend 'vulkan': " + v.name + " runs on the CPU"), std::string::npos)
            << chosen->why;
    } else {
        EXPECT_EQ(backend, "vulkan");
    }
}

}  // namespace
