#include <gtest/gtest.h>
#include "gpu/cpu/cpu_device.h"
TEST(CpuBackend, Smoke) { auto d = spillway::gpu::createCpuDevice(2); EXPECT_EQ(d->info().backend, "cpu"); }
