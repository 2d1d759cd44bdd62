#include "core/runtime/row_split.h"

#include <algorithm>

#include "gpu/host.h"

namespace spillway {

RowSplit::RowSplit(gpu::Device& device, const WeightStreamer& streamer, size_t widest)
    : m_device(device), m_streamer(streamer)
{
    if (device.info().caps.hostPointers || !streamer.hasSplits()) return;
    // Two cores stay free for the loader's issuer and completer threads: the pool's workers spin
    // between dispatches and would otherwise delay the next layer's copies.
    m_hostCpu = gpu::createCpuDevice(std::max(1, gpu::cpu::onlineCores() - 2));
    m_hostX = std::make_unique<float[]>(widest);
    m_hostY = std::make_unique<float[]>(widest);
}

RowSplit::~RowSplit() = default;

void RowSplit::run(std::span<const gpu::MatvecJob> jobs)
{
    const auto& splits = m_streamer.hostRows();
    if (splits.empty()) {
        m_device.matvec(jobs);
        return;
    }
    gpu::MatvecJob all[8];
    size_t n = 0;
    const HostRows* hostParts[4] = {};
    const gpu::MatvecJob* hostJobs[4] = {};
    size_t nHost = 0;
    for (const auto& j : jobs) {
        const HostRows* h = nullptr;
        for (const auto& sp : splits)
            if (sp.deviceData == j.w.data) h = &sp;
        if (!h || h->deviceRows > 0) all[n++] = j;
        if (h && nHost < 4) {
            hostParts[nHost] = h;
            hostJobs[nHost++] = &j;
        }
    }
    if (m_device.info().caps.hostPointers) {
        // The device computes on host memory: the host rows join the same dispatch.
        for (size_t i = 0; i < nHost; ++i)
            all[n++] = {hostParts[i]->host, hostJobs[i]->x, hostJobs[i]->y + hostParts[i]->deviceRows};
        m_device.matvec({all, n});
        return;
    }
    if (nHost == 0) {
        m_device.matvec(jobs);
        return;
    }
    // x to the host first, then the device's rows (asynchronous on a GPU) while the CPU computes
    // the others from pinned RAM; their results go up behind.
    for (size_t i = 0; i < nHost; ++i) {
        const gpu::MatvecJob& j = *hostJobs[i];
        const HostRows& h = *hostParts[i];
        m_device.download(m_hostX.get(), j.x, size_t(h.host.cols) * sizeof(float));
        if (i == 0 && n) m_device.matvec({all, n});
        m_hostCpu->matvec(h.host, m_hostX.get(), m_hostY.get());
        m_device.upload(j.y + h.deviceRows, m_hostY.get(), size_t(h.host.rows) * sizeof(float));
    }
}

}  // namespace spillway
