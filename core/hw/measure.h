#pragma once
// Internal to core/hw: the micro-benchmarks probe.cpp puts together into a HardwareProfile.

#include <string>
#include <vector>

#include "core/hw/probe.h"
#include "gpu/device.h"

namespace spillway::hw::detail {

// The probe's cache file: its text, and a profile written to it atomically (its folder made).
Result<std::string> readCacheText(const std::string& path);
Status saveProfileCache(const std::string& path, const HardwareProfile& profile);

// Writes a temporary test file of `fileBytes` (0 = automatic) in `folder`, sweeps sequential and
// random direct reads over it, and removes it (also on error, cancel or crash: it is unlinked
// right after it is created, so only the open descriptors keep it alive).
// The best sequential configuration is read three times: its median is the profile's figure, and
// the three go into `spreads` ("disk sequential reads").
Result<StorageProfile> measureStorage(const std::string& folder, uint64_t fileBytes, bool quick,
                                      std::vector<Spread>* spreads = nullptr);

// "ext4 on /dev/vda", from /proc/self/mountinfo; "" when unknown.
std::string describeFilesystem(const std::string& folder);

// Weight bytes/s of matvec per format the device supports: 32 MiB matrices with random contents,
// rotating over 384 MiB of copies so that nothing stays in cache (quick: 2 MiB, 4 MiB).
// Each format's timed passes go into `spreads` as "<backend> matvec <type>".
std::vector<FormatThroughput> measureMatvec(gpu::Device& device, bool quick, std::vector<Spread>* spreads = nullptr);

// Seconds one layer's decode ops take when their arithmetic and bytes are negligible (64-wide
// vectors and matrices): the per-op cost of issuing and finishing them on this device, which a
// token pays per layer on top of its weights' bytes.
double measureLayerOverhead(gpu::Device& device, bool quick, std::vector<Spread>* spreads = nullptr);

// Host memory -> device buffer copy bandwidth (bytes/s) from pinned (allocateHost) and from
// pageable (plain new[]) memory; 256 MiB copies (quick: 8 MiB).
struct UploadBandwidth {
    double pinned = 0, pageable = 0;
};
UploadBandwidth measureUpload(gpu::Device& device, bool quick, std::vector<Spread>* spreads = nullptr);

// The spread of `samples` (seconds per run, or rates) as `what`; quartiles from 5 samples up.
Spread spreadOf(std::string what, std::vector<double> samples, bool judged = true);
// The same, of per-run seconds turned into rates of `units` per second.
Spread rateSpreadOf(std::string what, const std::vector<double>& seconds, double units, bool judged = true);

// Seconds since an arbitrary epoch (steady clock).
double nowSeconds();

}  // namespace spillway::hw::detail
