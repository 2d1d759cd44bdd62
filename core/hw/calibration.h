#pragma once
// Every run calibrates (issue 33). The planner predicts from the probe's figures; a run measures
// what each lane and the whole token took. Those measurements go back into the hardware profile
// as rows of measured/predicted (HardwareProfile::observed, kept in the probe's cache file beside
// its figures, never replacing them), and the planner scales its next prediction for the same
// device, regime (the predicted bottleneck), model size class and weight format (a bitmap-sparse
// package's kernels are not a dense F16 model's) by their weighted geometric mean:
// recent runs and longer runs count more. A run whose SSD reads ran more than 2x faster or slower
// than the probe measured marks the profile suspect, with the figures, until it is measured again.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/hw/probe.h"

namespace spillway::hw {

inline constexpr int kCalibrationRows = 8;  // kept per key (backend, lane, size class, format)

// log4 of the weights' MiB, from 0: 1 MiB..4 MiB is 0, a 2 GiB model 5. Runs calibrate models
// of their own class only: a tiny model's fixed costs say nothing of a big one's bandwidth.
int modelSizeClass(uint64_t weightBytes);

struct Calibration {
    double ratio = 1.0;  // measured / predicted, to multiply the prediction by
    int runs = 0;        // rows it comes from (0: none, ratio 1)
};
// The weighted geometric mean of the rows of this key: each row weighs min(tokens, 256), halved
// for each newer row of the key.
Calibration calibrationFor(const HardwareProfile& profile, const std::string& backend, const std::string& lane,
                           int sizeClass, const std::string& format = "");

// Adds the rows to the profile (dropping the oldest past kCalibrationRows per key).
void addObservations(HardwareProfile& profile, const std::vector<Observation>& rows);

// One run's figures: what the planner predicted from the probe alone and what was measured, per
// lane (seconds per token) and for the whole token.
struct RunMeasurement {
    std::string backend;
    uint64_t weightBytes = 0;
    std::string format;      // Observation::format (plan::PlanResult::weightFormat)
    int tokens = 0;
    std::string bottleneck;  // the predicted bottleneck lane ("ssd", "copy", "device", "cpu")
    double predictedSecondsPerToken = 0, measuredSecondsPerToken = 0;
    struct Lane {
        std::string lane;
        double predicted = 0, measured = 0;  // seconds per token
    };
    std::vector<Lane> lanes;
    // The SSD's sequential read rate during the run (0: it read too little to say).
    double measuredSsdBytesPerSecond = 0;
};
// The rows a run adds (lanes that were busy under 2 % of the token, or predicted idle, say
// nothing), and why the profile is suspect after it ("" when it is not).
std::vector<Observation> observationsOf(const RunMeasurement& run, int64_t nowMs);
std::string suspicionOf(const HardwareProfile& profile, const RunMeasurement& run);

// The profile in the probe's cache file ("" = defaultProbeCacheFile()), as it is: no measuring.
Result<HardwareProfile> readCachedProfile(const std::string& cacheFile = "");

// Adds a run to the cached profile in probeCacheFileFor(`cacheFile`, the profile's threads), written
// atomically, when that file still holds `profile` (the same fingerprint and measurement time):
// a profile measured since is left alone, and so is a quick one (ProbeOptions::quick, tests). Returns the updated profile's calibration of the run's
// key, for the caller to say what changed.
Result<Calibration> recordRun(const HardwareProfile& profile, const RunMeasurement& run, const std::string& cacheFile = "");

}  // namespace spillway::hw
