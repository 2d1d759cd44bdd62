#include "calibration.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>

#include "core/hw/measure.h"

namespace spillway::hw {

int modelSizeClass(uint64_t weightBytes)
{
    int c = 0;
    for (uint64_t mib = weightBytes >> 20; mib >= 4; mib >>= 2) ++c;
    return c;
}

Calibration calibrationFor(const HardwareProfile& profile, const std::string& backend, const std::string& lane,
                           int sizeClass, const std::string& format)
{
    double weight = 0, logSum = 0, recency = 1;
    Calibration c;
    for (auto it = profile.observed.rbegin(); it != profile.observed.rend(); ++it) {  // newest first
        if (it->backend != backend || it->lane != lane || it->sizeClass != sizeClass || it->format != format) continue;
        const double w = std::min(it->tokens, 256.0) * recency;
        weight += w;
        logSum += w * std::log(it->ratio);
        recency *= 0.5;
        ++c.runs;
    }
    if (weight > 0) c.ratio = std::exp(logSum / weight);
    return c;
}

void addObservations(HardwareProfile& profile, const std::vector<Observation>& rows)
{
    for (const Observation& r : rows) {
        if (!(r.ratio > 0) || !std::isfinite(r.ratio) || r.tokens <= 0) continue;
        profile.observed.push_back(r);
        int kept = 0;  // of this key, newest first: the oldest past the limit go
        for (size_t i = profile.observed.size(); i-- > 0;) {
            const Observation& o = profile.observed[i];
            if (o.backend != r.backend || o.lane != r.lane || o.sizeClass != r.sizeClass || o.format != r.format) continue;
            if (++kept > kCalibrationRows) profile.observed.erase(profile.observed.begin() + std::ptrdiff_t(i));
        }
    }
}

std::vector<Observation> observationsOf(const RunMeasurement& run, int64_t nowMs)
{
    std::vector<Observation> rows;
    if (run.tokens <= 0 || run.predictedSecondsPerToken <= 0 || run.measuredSecondsPerToken <= 0) return rows;
    const int size = modelSizeClass(run.weightBytes);
    auto row = [&](const std::string& lane, double ratio) {
        Observation o;
        o.backend = run.backend;
        o.lane = lane;
        o.sizeClass = size;
        o.format = run.format;
        o.ratio = ratio;
        o.tokens = run.tokens;
        o.atMs = nowMs;
        rows.push_back(o);
    };
    row("token/" + run.bottleneck, run.measuredSecondsPerToken / run.predictedSecondsPerToken);
    for (const auto& l : run.lanes)
        if (l.predicted > 0.02 * run.predictedSecondsPerToken && l.measured > 0.02 * run.measuredSecondsPerToken)
            row(l.lane, l.measured / l.predicted);
    return rows;
}

std::string suspicionOf(const HardwareProfile& profile, const RunMeasurement& run)
{
    const double probe = profile.storage.sequentialBytesPerSecond;
    const double seen = run.measuredSsdBytesPerSecond;
    if (probe <= 0 || seen <= 0 || (seen <= 2 * probe && seen >= 0.5 * probe)) return {};
    char text[320];
    std::snprintf(text, sizeof text,
                  "SSD reads ran at %.2f GB/s during a run, the probe measured %.2f GB/s (%s): the machine may have "
                  "been busy while it was measured; measure it again (spillway-cli probe --remeasure)",
                  seen / 1e9, probe / 1e9, profile.measuredAt.c_str());
    return text;
}

Result<HardwareProfile> readCachedProfile(const std::string& cacheFile)
{
    auto text = detail::readCacheText(cacheFile.empty() ? defaultProbeCacheFile() : cacheFile);
    if (!text) return text.error();
    return profileFromJson(*text);
}

Result<Calibration> recordRun(const HardwareProfile& profile, const RunMeasurement& run, const std::string& cacheFile)
{
    // A quick profile's figures are rough on purpose (tests): nothing to calibrate.
    if (profile.quick) return makeError(ErrorCode::InvalidArgument, "a quick hardware profile is not calibrated");
    const std::string file = probeCacheFileFor(cacheFile, profile.host.threads);
    auto cached = readCachedProfile(file);
    if (!cached) return cached.error();
    if (cached->fingerprint != profile.fingerprint || cached->measuredAt != profile.measuredAt)
        return makeError(ErrorCode::InvalidArgument, file + " holds another measurement of the machine now");
    const auto nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    addObservations(*cached, observationsOf(run, int64_t(nowMs)));
    if (std::string why = suspicionOf(*cached, run); !why.empty()) cached->suspect = why;
    SPILLWAY_TRY(detail::saveProfileCache(file, *cached));
    return calibrationFor(*cached, run.backend, "token/" + run.bottleneck, modelSizeClass(run.weightBytes), run.format);
}

}  // namespace spillway::hw
