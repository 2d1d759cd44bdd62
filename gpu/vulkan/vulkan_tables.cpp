// The fixed tables of the IQ and non-linear block types on the device: one storage buffer of
// 32-bit words (layout: shaders/iq_tables.glsl), filled once at device creation from
// gpu/iq_grids.h, whose grids are gpu/iq_grids.inc as gpu/iq_grids_extract.py read them out of
// ggml (the CPU, CUDA and Vulkan code expand the same data; nothing is retyped for the shaders).

#include <cstring>
#include <vector>

#include "gpu/iq_grids.h"
#include "gpu/vulkan/shaders/iq_tables.glsl"
#include "gpu/vulkan/vulkan_device.h"

namespace spillway::gpu::vulkan {

namespace {

template <class T, size_t N> void put(std::vector<uint32_t>& words, uint32_t at, const T (&table)[N])
{
    static_assert(sizeof(T) == 8 || sizeof(T) == 4);
    std::memcpy(words.data() + at, table, sizeof table);  // little-endian: a u64 is low word, high word
}

template <size_t N> void putLevels(std::vector<uint32_t>& words, uint32_t at, const int8_t (&levels)[N])
{
    for (size_t i = 0; i < N; ++i) words[at + i] = static_cast<uint32_t>(static_cast<int32_t>(levels[i]));
}

// Each table ends where the next begins (iq_tables.glsl's offsets).
static_assert(IQ_TABLE_IQ2XS - IQ_TABLE_IQ2XXS == 2 * std::size(kIq2xxsGrid));
static_assert(IQ_TABLE_IQ2S - IQ_TABLE_IQ2XS == 2 * std::size(kIq2xsGrid));
static_assert(IQ_TABLE_IQ3XXS - IQ_TABLE_IQ2S == 2 * std::size(kIq2sGrid));
static_assert(IQ_TABLE_IQ3S - IQ_TABLE_IQ3XXS == std::size(kIq3xxsGrid));
static_assert(IQ_TABLE_IQ1S - IQ_TABLE_IQ3S == std::size(kIq3sGrid));
static_assert(IQ_TABLE_IQ4NL - IQ_TABLE_IQ1S == 2 * std::size(kIq1sGrid));
static_assert(IQ_TABLE_MXFP4 - IQ_TABLE_IQ4NL == std::size(kIq4nlValues));
static_assert(IQ_TABLE_WORDS - IQ_TABLE_MXFP4 == std::size(kMxfp4Values));

}  // namespace

bool VulkanDevice::createIqTables(std::string* error)
{
    std::vector<uint32_t> words(IQ_TABLE_WORDS, 0);
    put(words, IQ_TABLE_IQ2XXS, kIq2xxsGrid);
    put(words, IQ_TABLE_IQ2XS, kIq2xsGrid);
    put(words, IQ_TABLE_IQ2S, kIq2sGrid);
    put(words, IQ_TABLE_IQ3XXS, kIq3xxsGrid);
    put(words, IQ_TABLE_IQ3S, kIq3sGrid);
    put(words, IQ_TABLE_IQ1S, kIq1sGrid);
    putLevels(words, IQ_TABLE_IQ4NL, kIq4nlValues);
    putLevels(words, IQ_TABLE_MXFP4, kMxfp4Values);
    const uint64_t bytes = words.size() * sizeof(uint32_t);
    auto a = makeAllocation(bytes, false);
    if (!a) {
        *error = a.error().message + " (the IQ grid tables)";
        return false;
    }
    m_tables = *a;
    if (m_tables.mapped) std::memcpy(m_tables.mapped, words.data(), bytes);
    else stagedCopy(m_tables, 0, words.data(), bytes, true);
    if (failed()) {
        *error = lastError().error().message + " (uploading the IQ grid tables)";
        return false;
    }
    return true;
}

}  // namespace spillway::gpu::vulkan
