#pragma once
// A CPU device that claims it cannot compute on host memory, as a GPU cannot: the runtime then
// takes the paths a GPU needs (resident copies, staging, logits download, HeteGen's host rows
// computed on a separate CPU device), all checked without a GPU. `injected` makes it fail as a
// GPU does (an asynchronous error, a lost device). For tests of the fallbacks: the tests hand it
// in, and the engine makes one where SPILLWAY_TEST_DEVICE says so (core/engine/engine.h), so
// that spillway-cli and the app can be driven through them too.

#include <atomic>
#include <cstdint>
#include <memory>

#include "gpu/forwarding_device.h"

namespace spillway::gpu {

class OpaqueDevice final : public ForwardingDevice {
public:
    explicit OpaqueDevice(std::unique_ptr<Device> inner) : ForwardingDevice(std::move(inner))
    {
        m_info = m_inner.info();
        m_info.backend = "opaque-cpu";
        m_info.caps.hostPointers = false;
    }
    const DeviceInfo& info() const override { return m_info; }
    void upload(void* d, const void* h, size_t b) override { ++uploads; m_inner.upload(d, h, b); }
    void download(void* h, const void* d, size_t b) override { ++downloads; m_inner.download(h, d, b); }
    Status lastError() const override { return injected; }
    void rmsnorm(const float* x, const float* w, float* o, int n, float e) override
    {
        if (++rmsnorms == stopAfterRmsnorms && stop) stop->store(true);
        if (rmsnorms == failAfterRmsnorms) injected = failWith;
        m_inner.rmsnorm(x, w, o, n, e);
    }
    std::atomic<uint64_t> uploads{0}, downloads{0};
    uint64_t rmsnorms = 0, stopAfterRmsnorms = 0;  // sets *stop at that call (0: never)
    std::atomic<bool>* stop = nullptr;
    uint64_t failAfterRmsnorms = 0;  // `injected` becomes `failWith` at that call (0: never)
    Status failWith;
    Status injected;  // what lastError() reports (a GPU that failed an asynchronous op)

private:
    DeviceInfo m_info;
};

}  // namespace spillway::gpu
