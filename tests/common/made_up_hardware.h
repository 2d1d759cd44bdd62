#pragma once
// A hardware profile with round, made-up figures (8 GiB RAM at 20 GB/s, a 1 GB/s SSD, a CPU
// device with 4 GiB free and 20 GB/s matvec for F32/F16/Q8_0), so planner tests do not depend on
// the machine they run on.

#include "core/hw/probe.h"

namespace spillway::testing_support {

inline hw::HardwareProfile madeUpHardware()
{
    hw::HardwareProfile p;
    p.host.ramAvailable = uint64_t(8) << 30;
    p.host.memoryReadBytesPerSecond = 20e9;
    p.storage.sequentialBytesPerSecond = 1e9;
    hw::DeviceProfile d;
    d.backend = "cpu";
    d.name = "test device";
    d.freeMemory = uint64_t(4) << 30;
    d.caps.hostPointers = true;
    d.hostToDevicePinned = 10e9;
    for (gpu::DType t : {gpu::DType::F32, gpu::DType::F16, gpu::DType::Q8_0}) d.matvec.push_back({t, 20e9});
    p.devices.push_back(d);
    return p;
}

}  // namespace spillway::testing_support
