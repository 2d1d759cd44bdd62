#include "gpu/registry.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_device.h"
#include "gpu/cuda/cuda_module.h"

// gpu/CMakeLists.txt defines it; a target compiling this file without it refuses every module.
#ifndef SPILLWAY_GPU_INTERFACE_HASH
#define SPILLWAY_GPU_INTERFACE_HASH "undefined"
#endif

namespace spillway::gpu {

namespace {

#ifdef SPILLWAY_CUDA_MODULE_BUILT
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

// ---- the CUDA module, loaded at run time ------------------------------------------------------
// No executable links a CUDA library (it would fail to start without an NVIDIA driver); the
// backend lives in libspillway_cuda.so, found at $SPILLWAY_CUDA_MODULE, else beside the
// executable in ../lib/ (build tree) or ../lib/spillway/ (installed). The driver is looked at
// first, so the reason a user sees names the most basic thing missing. Modules stay loaded
// for the life of the process (a CUDA runtime must not be unloaded under its own threads).

struct CudaModule {
    bool usable = false;
    std::string reason;  // why not, when not usable
    SpillwayCudaCreateFn create = nullptr;
};

std::string executableDir()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

std::vector<std::string> cudaModuleCandidates()
{
    if (const char* forced = std::getenv("SPILLWAY_CUDA_MODULE"); forced && *forced) return {forced};
    const std::string dir = executableDir();
    return {dir + "/../lib/libspillway_cuda.so", dir + "/../lib/spillway/libspillway_cuda.so"};
}

// CUresult cuInit(unsigned flags); CUresult cuDeviceGetCount(int*). 0 is CUDA_SUCCESS and 100
// CUDA_ERROR_NO_DEVICE, as in cuda.h (not included: the registry builds without the toolkit).
std::string checkDriver()
{
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!driver) return "no NVIDIA driver (libcuda.so.1 not found)";
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
    if (!init || !count) return "the NVIDIA driver's libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    const int status = init(0);
    if (status == 100) return "no CUDA device";
    if (status != 0)
        return "the NVIDIA driver failed to initialise (cuInit error " + std::to_string(status) + ")";
    int devices = 0;
    if (count(&devices) != 0 || devices <= 0) return "no CUDA device";
    return "";
}

CudaModule loadCudaModule()
{
    CudaModule m;
    if (!kCudaBuilt) {
        m.reason = "not part of this build (configured without nvcc, or with SPILLWAY_CUDA=OFF)";
        return m;
    }
    if (std::string driver = checkDriver(); !driver.empty()) {
        m.reason = driver;
        return m;
    }
    const std::vector<std::string> candidates = cudaModuleCandidates();
    std::string path;
    for (const std::string& c : candidates) {
        if (access(c.c_str(), R_OK) == 0) {
            path = c;
            break;
        }
    }
    if (path.empty()) {
        m.reason = "module not found at " + candidates[0];
        for (size_t i = 1; i < candidates.size(); ++i) m.reason += " or " + candidates[i];
        return m;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        m.reason = "module " + path + " could not be loaded: " + (why ? why : "unknown error");
        return m;
    }
    auto abi = reinterpret_cast<SpillwayCudaAbiFn>(dlsym(handle, "spillway_cuda_abi"));
    auto interface = reinterpret_cast<SpillwayCudaInterfaceFn>(dlsym(handle, "spillway_cuda_interface"));
    auto probe = reinterpret_cast<SpillwayCudaProbeFn>(dlsym(handle, "spillway_cuda_probe"));
    m.create = reinterpret_cast<SpillwayCudaCreateFn>(dlsym(handle, "spillway_cuda_create"));
    if (!abi || !interface || !probe || !m.create) {
        m.reason = "module " + path + " is not a Spillway CUDA module (entry points missing)";
        return m;
    }
    if (abi() != SPILLWAY_CUDA_MODULE_ABI ||
        std::strcmp(interface(), SPILLWAY_GPU_INTERFACE_HASH) != 0) {
        m.reason = "module " + path + " was built for another version of Spillway (ABI " +
                   std::to_string(abi()) + ", interface " + interface() + "; this program: ABI " +
                   std::to_string(SPILLWAY_CUDA_MODULE_ABI) + ", interface " +
                   SPILLWAY_GPU_INTERFACE_HASH + ")";
        return m;
    }
    char err[512] = {};
    const int devices = probe(err, sizeof err);
    if (devices < 0) {
        m.reason = err;
        return m;
    }
    if (devices == 0) {
        m.reason = "no CUDA device";
        return m;
    }
    m.usable = true;
    return m;
}

// Probed once per process (loading the driver takes a while); thread-safe.
const CudaModule& cudaModule()
{
    static const CudaModule module = loadCudaModule();
    return module;
}

}  // namespace

// The only place that knows which backends this binary was built with.
std::vector<BackendStatus> backendStatus()
{
    std::vector<BackendStatus> list;
    list.push_back({"cpu", true, true, ""});
    const CudaModule& cuda = cudaModule();
    list.push_back({"cuda", kCudaBuilt, cuda.usable, cuda.reason});
    list.push_back({"vulkan", false, false, "the Vulkan backend is not part of this build yet (issue 8)"});
    return list;
}

Result<std::unique_ptr<Device>> createDevice(const std::string& backend, const DeviceOptions& options)
{
    // "auto" stays the CPU device for now: preferring a usable CUDA device is the lead's call,
    // once the runtime places tensors on it (then: cuda when backendStatus() says usable).
    if (backend == "cpu" || backend == "auto") return createCpuDevice(options.threads, options.memoryLimit);
    if (backend == "cuda") {
        const CudaModule& cuda = cudaModule();
        if (!cuda.usable)
            return makeError(ErrorCode::BackendUnavailable, "backend 'cuda': " + cuda.reason);
        char err[512] = {};
        Device* device = cuda.create(&options, err, sizeof err);
        if (!device)
            return makeError(ErrorCode::BackendUnavailable,
                             std::string("backend 'cuda': ") + (err[0] ? err : "device creation failed"));
        return std::unique_ptr<Device>(device);
    }
    for (const auto& b : backendStatus()) {
        if (b.name == backend && !b.usable)
            return makeError(ErrorCode::BackendUnavailable, "backend '" + backend + "': " + b.reason);
    }
    return makeError(ErrorCode::InvalidArgument,
                     "unknown backend '" + backend + "' (known: cpu, cuda, vulkan, auto)");
}

}  // namespace spillway::gpu
