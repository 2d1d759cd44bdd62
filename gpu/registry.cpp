#include "gpu/registry.h"

#include "gpu/cpu/cpu_device.h"

namespace spillway::gpu {

// The only place that knows which backends this binary was built with.
std::vector<BackendStatus> backendStatus()
{
    std::vector<BackendStatus> list;
    list.push_back({"cpu", true, true, ""});
    list.push_back({"cuda", false, false, "the CUDA backend is not part of this build yet (issue 8)"});
    list.push_back({"vulkan", false, false, "the Vulkan backend is not part of this build yet (issue 8)"});
    return list;
}

Result<std::unique_ptr<Device>> createDevice(const std::string& backend, const DeviceOptions& options)
{
    if (backend == "cpu" || backend == "auto") return createCpuDevice(options.threads);
    for (const auto& b : backendStatus()) {
        if (b.name == backend && !b.usable)
            return makeError(ErrorCode::BackendUnavailable, "backend '" + backend + "': " + b.reason);
    }
    return makeError(ErrorCode::InvalidArgument,
                     "unknown backend '" + backend + "' (known: cpu, cuda, vulkan, auto)");
}

}  // namespace spillway::gpu
