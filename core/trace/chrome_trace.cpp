// Chrome trace event format export (the JSON that chrome://tracing and ui.perfetto.dev open).
// Written by hand rather than through a JSON DOM: a full ring is 262,144 spans and the text is
// streamed to the file in 1 MiB pieces.

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/trace/trace.h"
#include "storage/atomic_file.h"

namespace spillway::trace {

namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

void appendEscaped(std::string& out, const char* text)
{
    if (!text) return;
    for (const char* p = text; *p; ++p) {
        const unsigned char c = static_cast<unsigned char>(*p);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);  // UTF-8 passes through ("host→device")
            }
        }
    }
}

// Nanoseconds as microseconds with three decimals: 1234567 ns -> "1234.567".
void appendMicros(std::string& out, int64_t ns)
{
    char buf[32];
    const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", mag / 1000,
                  mag % 1000);
    out += buf;
}

int64_t since(uint64_t t, uint64_t origin)
{
    return t >= origin ? static_cast<int64_t>(t - origin) : -static_cast<int64_t>(origin - t);
}

int laneTid(Lane lane) { return static_cast<int>(lane) + 1; }

void appendMetadata(std::string& out, const ChromeTraceOptions& options)
{
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"";
    appendEscaped(out, options.processName.c_str());
    out += "\"}}";
    for (size_t i = 0; i < kLaneCount; ++i) {
        const Lane lane = static_cast<Lane>(i);
        const std::string tid = std::to_string(laneTid(lane));
        out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
               ",\"args\":{\"name\":\"";
        appendEscaped(out, laneName(lane));
        out += "\"}}";
        // Keep the rows in pipeline order (SSD at the top) rather than by first event.
        out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
               ",\"args\":{\"sort_index\":" + std::to_string(i) + "}}";
    }
}

void appendSpan(std::string& out, const Span& s, uint64_t origin)
{
    out += ",\n{\"name\":\"";
    appendEscaped(out, s.op);
    if (s.layer >= 0) out += " L" + std::to_string(s.layer);
    out += "\",\"cat\":\"";
    appendEscaped(out, laneName(s.lane));
    out += "\",\"ph\":\"X\",\"ts\":";
    appendMicros(out, since(s.startNs, origin));
    out += ",\"dur\":";
    appendMicros(out, s.endNs > s.startNs ? static_cast<int64_t>(s.endNs - s.startNs) : 0);
    out += ",\"pid\":1,\"tid\":" + std::to_string(laneTid(s.lane));
    out += ",\"args\":{\"layer\":" + std::to_string(s.layer) +
           ",\"bytes\":" + std::to_string(s.bytes) + ",\"token\":" + std::to_string(s.token);
    if (s.lookups > 0)
        out += ",\"lookups\":" + std::to_string(s.lookups) + ",\"hits\":" + std::to_string(s.hits);
    out += "}}";
}

void appendCounter(std::string& out, const CounterSample& c, uint64_t origin)
{
    out += ",\n{\"name\":\"";
    appendEscaped(out, c.name);
    out += "\",\"ph\":\"C\",\"ts\":";
    appendMicros(out, since(c.timeNs, origin));
    char value[40];
    std::snprintf(value, sizeof value, "%.17g", c.value);
    out += ",\"pid\":1,\"args\":{\"value\":";
    out += value;
    out += "}}";
}

}  // namespace

Status writeChromeTrace(std::span<const Span> spans, const std::string& path,
                        const ChromeTraceOptions& options)
{
    auto file = storage::AtomicFile::create(path);
    if (!file) return file.error();

    uint64_t origin = options.originNs;
    if (origin == 0) {
        origin = std::numeric_limits<uint64_t>::max();
        for (const Span& s : spans) origin = std::min(origin, s.startNs);
        for (const CounterSample& c : options.counters) origin = std::min(origin, c.timeNs);
        if (origin == std::numeric_limits<uint64_t>::max()) origin = 0;
    }

    std::string text;
    text.reserve(kFlushBytes + 4096);
    text += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    appendMetadata(text, options);
    for (const Span& s : spans) {
        if (static_cast<size_t>(s.lane) >= kLaneCount) continue;  // not a lane we can draw
        appendSpan(text, s, origin);
        if (text.size() >= kFlushBytes) {
            SPILLWAY_TRY(file->write(text.data(), text.size()));
            text.clear();
        }
    }
    for (const CounterSample& c : options.counters) {
        if (!std::isfinite(c.value)) continue;  // JSON has no NaN or infinity
        appendCounter(text, c, origin);
    }
    text += "\n]}\n";
    SPILLWAY_TRY(file->write(text.data(), text.size()));
    // On failure the AtomicFile destructor removes the temporary file.
    return file->commit();
}

}  // namespace spillway::trace
