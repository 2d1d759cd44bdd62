// The CUDA backend is loaded at run time: on a machine without an NVIDIA driver (CI, this
// project's build machine) the registry says why it is unusable and createDevice("cuda") gives
// BackendUnavailable with that reason; on a machine with one it makes a CUDA device.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "gpu/registry.h"

using namespace spillway;
using namespace spillway::gpu;

namespace {

BackendStatus cudaStatus()
{
    for (const BackendStatus& b : backendStatus())
        if (b.name == "cuda") return b;
    ADD_FAILURE() << "backendStatus() has no cuda entry";
    return {};
}

TEST(CudaLoading, StatusMatchesTheBuild)
{
    const BackendStatus s = cudaStatus();
#ifdef SPILLWAY_CUDA_MODULE_BUILT
    EXPECT_TRUE(s.compiled);
#else
    EXPECT_FALSE(s.compiled);
    EXPECT_FALSE(s.usable);
#endif
    if (!s.usable) {
        EXPECT_FALSE(s.reason.empty());
    }
    std::printf("[ INFO     ] cuda: compiled %d usable %d %s\n", s.compiled, s.usable, s.reason.c_str());
}

TEST(CudaLoading, NoDriverMeansBackendUnavailableWithTheReason)
{
    const BackendStatus s = cudaStatus();
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver && s.compiled) {
        EXPECT_EQ(s.reason, "no NVIDIA driver (libcuda.so.1 not found)");
    }
    if (driver) dlclose(driver);

    auto made = createDevice("cuda", {});
    if (s.usable) {
        ASSERT_TRUE(made.ok()) << made.error().message;
        EXPECT_EQ(made.value()->info().backend, "cuda");
        return;
    }
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.error().code, ErrorCode::BackendUnavailable);
    EXPECT_NE(made.error().message.find(s.reason), std::string::npos) << made.error().message;
}

// "auto" takes a usable CUDA device first; without one it says why CUDA was passed over.
TEST(CudaLoading, AutoTakesCudaWhenUsableElseSaysWhyNot)
{
    const BackendStatus s = cudaStatus();
    auto chosen = chooseDevice("auto", {});
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    ASSERT_TRUE(chosen->device);
    if (s.usable) {
        EXPECT_EQ(chosen->device->info().backend, "cuda");
        EXPECT_EQ(chosen->why, "");
        return;
    }
    EXPECT_NE(chosen->device->info().backend, "cuda");
    EXPECT_NE(chosen->why.find("backend 'cuda': " + s.reason), std::string::npos) << chosen->why;
    auto made = createDevice("auto", {});
    ASSERT_TRUE(made.ok()) << made.error().message;
    EXPECT_EQ(made.value()->info().backend, chosen->device->info().backend);
}

}  // namespace
