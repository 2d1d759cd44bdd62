#include "gpu/registry.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/cpu/cpu_device.h"
#include "gpu/cuda/cuda_module.h"
#include "gpu/vulkan/vulkan_module.h"

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
#ifdef SPILLWAY_VULKAN_MODULE_BUILT
constexpr bool kVulkanBuilt = true;
#else
constexpr bool kVulkanBuilt = false;
#endif

// ---- the CUDA module, loaded at run time ------------------------------------------------------
// No executable links a CUDA library (it would fail to start without an NVIDIA driver); the
// backend lives in libspillway_cuda.so, found at $SPILLWAY_CUDA_MODULE, else beside the
// executable in ../lib/ (build tree) or ../lib/spillway/ (installed). The driver is looked at
// first, so the reason a user sees names the most basic thing missing. Modules stay loaded
// for the life of the process (a CUDA runtime must not be unloaded under its own threads).

// A backend module as loaded: usable, or why not.
struct BackendModule {
    bool usable = false;
    std::string reason;  // why not, when not usable
    SpillwayCudaCreateFn create = nullptr;  // the Vulkan module's has the same signature
};

static_assert(std::is_same_v<SpillwayCudaCreateFn, SpillwayVulkanCreateFn> &&
                  std::is_same_v<SpillwayCudaProbeFn, SpillwayVulkanProbeFn> &&
                  std::is_same_v<SpillwayCudaAbiFn, SpillwayVulkanAbiFn> &&
                  std::is_same_v<SpillwayCudaInterfaceFn, SpillwayVulkanInterfaceFn>,
              "the modules' entry points must share their signatures");

// What tells the modules apart: the entry points are <prefix>_abi, _interface, _probe, _create.
struct ModuleSpec {
    const char* label;   // "CUDA"
    const char* prefix;  // "spillway_cuda"
    const char* envVar;  // "SPILLWAY_CUDA_MODULE"
    const char* file;    // "libspillway_cuda.so"
    int abi;             // SPILLWAY_CUDA_MODULE_ABI
};

std::string executableDir()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

// $<envVar>, else <exe dir>/../lib/<file> (build tree), else <exe dir>/../lib/spillway/<file>.
std::vector<std::string> moduleCandidates(const char* envVar, const std::string& file)
{
    if (const char* forced = std::getenv(envVar); forced && *forced) return {forced};
    const std::string dir = executableDir();
    return {dir + "/../lib/" + file, dir + "/../lib/spillway/" + file};
}

// The first readable candidate; "" with *reason naming them all when there is none.
std::string findModule(const std::vector<std::string>& candidates, std::string* reason)
{
    for (const std::string& c : candidates)
        if (access(c.c_str(), R_OK) == 0) return c;
    *reason = "module not found at " + candidates[0];
    for (size_t i = 1; i < candidates.size(); ++i) *reason += " or " + candidates[i];
    return "";
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

// Finds, loads and checks a module, then asks it for devices.
BackendModule loadModuleFile(const ModuleSpec& spec)
{
    BackendModule m;
    const std::string path = findModule(moduleCandidates(spec.envVar, spec.file), &m.reason);
    if (path.empty()) return m;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        m.reason = "module " + path + " could not be loaded: " + (why ? why : "unknown error");
        return m;
    }
    const std::string prefix = spec.prefix;
    auto abi = reinterpret_cast<SpillwayCudaAbiFn>(dlsym(handle, (prefix + "_abi").c_str()));
    auto interface = reinterpret_cast<SpillwayCudaInterfaceFn>(dlsym(handle, (prefix + "_interface").c_str()));
    auto probe = reinterpret_cast<SpillwayCudaProbeFn>(dlsym(handle, (prefix + "_probe").c_str()));
    m.create = reinterpret_cast<SpillwayCudaCreateFn>(dlsym(handle, (prefix + "_create").c_str()));
    if (!abi || !interface || !probe || !m.create) {
        m.reason = "module " + path + " is not a Spillway " + spec.label + " module (entry points missing)";
        return m;
    }
    if (abi() != spec.abi || std::strcmp(interface(), SPILLWAY_GPU_INTERFACE_HASH) != 0) {
        m.reason = "module " + path + " was built for another version of Spillway (ABI " +
                   std::to_string(abi()) + ", interface " + interface() + "; this program: ABI " +
                   std::to_string(spec.abi) + ", interface " + SPILLWAY_GPU_INTERFACE_HASH + ")";
        return m;
    }
    char err[512] = {};
    const int devices = probe(err, sizeof err);
    if (devices <= 0) {
        m.reason = err[0] ? std::string(err) : "no " + std::string(spec.label) + " device";
        return m;
    }
    m.usable = true;
    return m;
}

BackendModule loadCudaModule()
{
    BackendModule m;
    if (!kCudaBuilt) {
        m.reason = "not part of this build (configured without nvcc, or with SPILLWAY_CUDA=OFF)";
        return m;
    }
    if (std::string driver = checkDriver(); !driver.empty()) {
        m.reason = driver;
        return m;
    }
    return loadModuleFile({"CUDA", "spillway_cuda", "SPILLWAY_CUDA_MODULE", "libspillway_cuda.so",
                           SPILLWAY_CUDA_MODULE_ABI});
}

// Probed once per process (loading the driver takes a while); thread-safe.
const BackendModule& cudaModule()
{
    static const BackendModule module = loadCudaModule();
    return module;
}

// ---- the Vulkan module, loaded at run time ----------------------------------------------------
// As the CUDA one: lib/libspillway_vulkan.so (or $SPILLWAY_VULKAN_MODULE) links libvulkan, so no
// executable does; the loader is looked for first, so the reason names the most basic thing
// missing.

BackendModule loadVulkanModule()
{
    BackendModule m;
    if (!kVulkanBuilt) {
        m.reason = "not part of this build (configured without the Vulkan SDK or glslc, or with SPILLWAY_VULKAN=OFF)";
        return m;
    }
    void* loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!loader) {
        m.reason = "no Vulkan loader (libvulkan.so.1 not found)";
        return m;
    }
    dlclose(loader);  // the module loads it again, as its own dependency
    return loadModuleFile({"Vulkan", "spillway_vulkan", "SPILLWAY_VULKAN_MODULE", "libspillway_vulkan.so",
                           SPILLWAY_VULKAN_MODULE_ABI});
}

// Probed once per process (creating a Vulkan instance takes a while); thread-safe.
const BackendModule& vulkanModule()
{
    static const BackendModule module = loadVulkanModule();
    return module;
}

}  // namespace

// The only place that knows which backends this binary was built with.
std::vector<BackendStatus> backendStatus()
{
    std::vector<BackendStatus> list;
    list.push_back({"cpu", true, true, ""});
    const BackendModule& cuda = cudaModule();
    list.push_back({"cuda", kCudaBuilt, cuda.usable, cuda.reason});
    const BackendModule& vulkan = vulkanModule();
    list.push_back({"vulkan", kVulkanBuilt, vulkan.usable, vulkan.reason});
    return list;
}

namespace {

Result<std::unique_ptr<Device>> createModuleDevice(const std::string& backend, const DeviceOptions& options)
{
    const BackendModule& module = backend == "cuda" ? cudaModule() : vulkanModule();
    if (!module.usable) return makeError(ErrorCode::BackendUnavailable, "backend '" + backend + "': " + module.reason);
    char err[512] = {};
    Device* device = module.create(&options, err, sizeof err);
    if (!device)
        return makeError(ErrorCode::BackendUnavailable,
                         "backend '" + backend + "': " + (err[0] ? err : "device creation failed"));
    return std::unique_ptr<Device>(device);
}

}  // namespace

Result<DeviceChoice> chooseDevice(const std::string& backend, const DeviceOptions& options)
{
    if (backend != "auto") {
        auto made = createDevice(backend, options);
        if (!made) return made.error();
        return DeviceChoice{std::move(made.value()), ""};
    }
    std::string why;
    for (const char* gpu : {"cuda", "vulkan"}) {
        auto made = createModuleDevice(gpu, options);
        if (!made) {
            why += (why.empty() ? "" : "; ") + made.error().message;
            continue;
        }
        if ((*made)->info().caps.emulated) {  // as fast as the CPU device at best
            why += (why.empty() ? "" : "; ") + std::string("backend '") + gpu + "': " + (*made)->info().name +
                   " runs on the CPU";
            continue;
        }
        return DeviceChoice{std::move(made.value()), why};
    }
    return DeviceChoice{createCpuDevice(options.threads, options.memoryLimit), why};
}

Result<std::unique_ptr<Device>> createDevice(const std::string& backend, const DeviceOptions& options)
{
    if (backend == "cpu") return createCpuDevice(options.threads, options.memoryLimit);
    if (backend == "cuda" || backend == "vulkan") return createModuleDevice(backend, options);
    if (backend == "auto") {
        auto chosen = chooseDevice(backend, options);
        if (!chosen) return chosen.error();
        return std::move(chosen->device);
    }
    for (const auto& b : backendStatus()) {
        if (b.name == backend && !b.usable)
            return makeError(ErrorCode::BackendUnavailable, "backend '" + backend + "': " + b.reason);
    }
    return makeError(ErrorCode::InvalidArgument,
                     "unknown backend '" + backend + "' (known: cpu, cuda, vulkan, auto)");
}

}  // namespace spillway::gpu
