#pragma once
// The session's matrix-vector products with HeteGen's CPU/GPU row split: a RAM-tier tensor the
// placement splits by α has its first rows computed by the device from its slot and the others
// by the CPU straight from pinned RAM (WeightStreamer::hostRows names them, per unit acquired).
// Unsplit jobs go to the device as they are.

#include <memory>
#include <span>

#include "core/runtime/weight_streamer.h"
#include "gpu/device.h"

namespace spillway {

class RowSplit {
public:
    // widest: the most floats a job's input or output holds (the host copies' size).
    RowSplit(gpu::Device& device, const WeightStreamer& streamer, size_t widest);
    ~RowSplit();
    RowSplit(const RowSplit&) = delete;
    RowSplit& operator=(const RowSplit&) = delete;

    // Runs the jobs on the device, and the CPU's share of any split tensor among them. At most 3
    // jobs per call have a split tensor (q, k, v), each with one host part.
    void run(std::span<const gpu::MatvecJob> jobs);
    // Whether the unit acquired last has split tensors.
    bool active() const { return !m_streamer.hostRows().empty(); }

private:
    gpu::Device& m_device;
    const WeightStreamer& m_streamer;
    // On a device that cannot compute on host memory: a CPU device for the host rows, and host
    // copies of x and of the host rows' results (made when the placement has splits).
    std::unique_ptr<gpu::Device> m_hostCpu;
    std::unique_ptr<float[]> m_hostX, m_hostY;
};

}  // namespace spillway
