#pragma once
// What the backend conformance tests share (test_backend_conformance*.cpp, built together once
// per backend: tests/gpu/CMakeLists.txt): the device under test and the CPU device it is held to,
// random inputs in every stored layout, device buffers, the fixture.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/block_fields.h"

#include "core/compress/bitmap_sparse.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/registry.h"

#ifndef SPILLWAY_TEST_BACKEND
#error "SPILLWAY_TEST_BACKEND must name the backend under test (tests/gpu/CMakeLists.txt)"
#endif

namespace conformance {
using namespace spillway;
using namespace spillway::gpu;
}  // namespace conformance

namespace conformance {

inline const std::string kBackend = SPILLWAY_TEST_BACKEND;

struct Devices {
    std::unique_ptr<Device> gpu;
    std::unique_ptr<Device> cpu;
    std::string reason;  // why there is no device of the backend
};

inline Devices& devices()
{
    static Devices d = [] {
        Devices d;
        auto gpu = createDevice(kBackend, {});
        if (gpu.ok()) d.gpu = std::move(gpu.value());
        else d.reason = gpu.error().message;
        d.cpu = createCpuDevice(2);
        return d;
    }();
    return d;
}

inline double relL2(const std::vector<float>& got, const std::vector<float>& want)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double diff = static_cast<double>(got[i]) - want[i];
        num += diff * diff;
        den += static_cast<double>(want[i]) * want[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline size_t unwritten(const std::vector<float>& v)
{
    size_t n = 0;
    for (float f : v) n += std::isnan(f) ? 1 : 0;
    return n;
}

inline std::vector<float> randomFloats(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f)
{
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
}

// Random weights in the stored layout of gpu/dtype.h; `padding` bytes after each row.
inline std::vector<uint8_t> randomMatrix(DType type, int64_t rows, int64_t cols, size_t stride, std::mt19937_64& rng)
{
    std::vector<uint8_t> bytes(stride * rows, 0xcd);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), scale(0.001f, 0.1f);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = bytes.data() + r * stride;
        for (int64_t c = 0; c < cols && (type == DType::F32 || type == DType::F16 || type == DType::BF16); ++c) {
            const float v = unit(rng);
            if (type == DType::F32) {
                std::memcpy(row + 4 * c, &v, 4);
            } else {
                const uint16_t h = type == DType::F16 ? fp32ToFp16(v) : fp32ToBf16(v);
                std::memcpy(row + 2 * c, &h, 2);
            }
        }
        if (type == DType::F32 || type == DType::F16 || type == DType::BF16) continue;
        // Quantized blocks: random bytes, then a small finite scale in the block's scale fields
        // (gpu/block_fields.h).
        const DTypeTraits& traits = dtypeTraits(type);
        for (int64_t b = 0; b < cols / traits.blockSize; ++b) {
            uint8_t* block = row + b * traits.blockBytes;
            for (int i = 0; i < traits.blockBytes; ++i) block[i] = static_cast<uint8_t>(byte(rng));
            setBlockScale(type, block, scale(rng));
        }
    }
    return bytes;
}

// A device buffer holding `bytes` of host data, or uninitialised. An allocation that fails is a
// test failure and ends the test (an exception, which gtest reports with the message): no op
// runs on a buffer that is not there.
struct DeviceData {
    Buffer buffer;
    DeviceData(Device& d, size_t bytes)
    {
        auto b = d.allocate(bytes);
        if (!b.ok()) throw std::runtime_error("device allocation of " + std::to_string(bytes) + " bytes failed: " +
                                              b.error().message);
        buffer = std::move(b.value());
    }
    template <class T>
    DeviceData(Device& d, const std::vector<T>& host) : DeviceData(d, host.size() * sizeof(T))
    {
        if (buffer) d.upload(buffer.data(), host.data(), host.size() * sizeof(T));
    }
    float* f(size_t offset = 0) const { return buffer.as<float>() + offset; }
};

inline std::vector<float> download(Device& d, const float* p, size_t n)
{
    std::vector<float> v(n);
    d.download(v.data(), p, n * sizeof(float));
    return v;
}

inline void poison(Device& d, float* p, size_t n)
{
    std::vector<float> nan(n, std::nanf(""));
    d.upload(p, nan.data(), n * sizeof(float));
}

class BackendConformance : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!devices().gpu) GTEST_SKIP() << "no usable " << kBackend << " device: " << devices().reason;
    }
    // The device under test.
    Device& gpu() { return *devices().gpu; }
    Device& cpu() { return *devices().cpu; }
    void expectHealthy()
    {
        EXPECT_EQ(gpu().info().name.find("[failed"), std::string::npos) << gpu().info().name;
    }
    std::mt19937_64 rng{20240611};
};

}  // namespace conformance
