// bench-visualizer: does the bottleneck visualizer stay smooth (>= 30 frames/s) while a model
// decodes? A GenerationWorker decodes a synthetic model (real shapes, random weights) on its own
// thread, part of its layers read from the SSD every token, while the GUI thread shows a live
// BottleneckView and forces a repaint every 16 ms (--frame-ms; 0 leaves the view to repaint
// itself after each drain of the ring, as in the app; live_view_bench.h measures). Reported for
// the decoding window: frames/s against the 30 frames/s target, paint-time percentiles (wall and
// GUI-thread CPU time), intervals between frames, the cost of each drain of the trace ring, the
// lateness of a 1 ms timer (the GUI event loop's latency), and decode tokens/s with the view
// live and hidden (alternating runs). Not a CTest test. Usage: bench-visualizer --help

// planner.h first: it names a member `slots`, a macro once Qt's headers are in.
#include "core/plan/planner.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/model_tensors.h"
#include "live_view_bench.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace spillway;
using bench::Run;

struct Options {
    QString model;             // empty: a synthetic model in modelsDir, made when missing
    QString modelsDir;
    QString preset = "tinyllama-1.1b";
    QString type = "q8_0";
    int layers = 0;            // 0: the preset's
    int ssdLayers = 11;        // layers read from the SSD every token (spread evenly)
    bool staged = false;       // SSD reads through pinned staging + host→device copies
    int tokens = 64;           // new tokens per run
    int repeats = 3;           // pairs of runs (view hidden, view live)
    double targetFps = 30;
    bench::LiveViewSettings view;
    QString json;
    QString png;               // the view after the last live run
};

// Nearest-rank percentiles of a sample, in the sample's unit.
struct Distribution {
    size_t count = 0;
    double p50 = 0, p95 = 0, p99 = 0, max = 0, mean = 0, sum = 0;
};

Distribution distribution(std::vector<double> v)
{
    Distribution d;
    d.count = v.size();
    if (v.empty()) return d;
    std::sort(v.begin(), v.end());
    auto rank = [&](double q) {
        const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
        return v[std::clamp<size_t>(i, 1, v.size()) - 1];
    };
    d.p50 = rank(0.50);
    d.p95 = rank(0.95);
    d.p99 = rank(0.99);
    d.max = v.back();
    d.sum = std::accumulate(v.begin(), v.end(), 0.0);
    d.mean = d.sum / static_cast<double>(v.size());
    return d;
}

QJsonObject toJson(const Distribution& d)
{
    return {{"count", qint64(d.count)}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99},
            {"max", d.max}, {"mean", d.mean}};
}

void printDistribution(const char* what, const Distribution& d)
{
    std::printf("  %-40s %7.2f %7.2f %7.2f %7.2f  (%zu samples)\n", what, d.p50, d.p95, d.p99,
                d.max, d.count);
}

template <typename Member>
std::vector<double> gather(const std::vector<Run>& runs, Member member)
{
    std::vector<double> all;
    for (const Run& r : runs) all.insert(all.end(), (r.*member).begin(), (r.*member).end());
    return all;
}

double median(std::vector<double> v)
{
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<gpu::DType> parseType(const QString& t)
{
    if (t == "f16") return gpu::DType::F16;
    if (t == "bf16") return gpu::DType::BF16;
    if (t == "f32") return gpu::DType::F32;
    if (t == "q8_0") return gpu::DType::Q8_0;
    if (t == "q4_0") return gpu::DType::Q4_0;
    return std::nullopt;
}

// Every weight in RAM (the CPU device's memory) except `ssd` layers, spread evenly over the
// model, that are read from the model file with direct I/O every token (prefetch depth 2).
plan::Placement makePlacement(const LlamaModel& model, int ssd, bool staged)
{
    plan::Placement p = plan::uniformPlacement(model, plan::Tier::Device);
    const int n = model.config().nLayers;
    for (auto& t : p.tensors) {
        const int l = t.unit;
        if (l >= 0 && l < n && ((l + 1) * ssd) / n != (l * ssd) / n) t.tier = plan::Tier::Ssd;
    }
    p.prefetchDepth = 2;
    p.directToDevice = !staged;
    return p;
}

std::string cpuModelName()
{
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

// "1.52 1.31 1.20" (1, 5, 15 minutes): how busy the machine was apart from this bench.
QString loadAverage()
{
    QFile f("/proc/loadavg");
    if (!f.open(QIODevice::ReadOnly)) return "unknown";
    return QString::fromLatin1(f.readAll()).section(' ', 0, 2);
}

int parseOptions(QApplication& app, Options& o)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        "Frames/s of the live bottleneck visualizer while a GenerationWorker decodes.");
    p.addHelpOption();
    auto opt = [&](const char* name, const char* help, const QString& def) {
        const QString text = QString(help) + " (default: " + def + ")";
        p.addOption(QCommandLineOption(name, text, "value", def));
    };
    opt("model", "GGUF model; empty: a synthetic one in --models-dir, made when missing", "");
    opt("models-dir", "Where synthetic models are kept", o.modelsDir);
    opt("preset", "Synthetic preset", o.preset);
    opt("type", "Synthetic matrix type: f16, bf16, f32, q8_0, q4_0", o.type);
    opt("layers", "Synthetic layers (0: the preset's)", QString::number(o.layers));
    opt("ssd-layers", "Layers read from the SSD every token", QString::number(o.ssdLayers));
    p.addOption(
        QCommandLineOption("staged", "SSD reads via pinned staging and host→device copies"));
    opt("tokens", "New tokens per run", QString::number(o.tokens));
    opt("repeats", "Pairs of runs (view hidden, view live)", QString::number(o.repeats));
    opt("threads", "Engine threads (0: one per core)", QString::number(o.view.threads));
    opt("width", "View width, px", QString::number(o.view.width));
    opt("height", "View height, px", QString::number(o.view.height));
    opt("history", "Tokens of span history shown", QString::number(o.view.historyTokens));
    opt("frame-ms", "Forced repaint interval, ms; 0: none, the view repaints when spans arrive",
        QString::number(o.view.frameMs));
    opt("poll-ms", "Recorder drain interval, ms; 0: the view's own",
        QString::number(o.view.pollMs));
    opt("json", "Also write the figures as JSON here", "");
    opt("png", "Also save the view as the last live run left it", "");
    p.process(app);
    auto integer = [&](const char* name, int& out, int lo, int hi) {
        bool ok = false;
        out = p.value(name).toInt(&ok);
        if (ok && out >= lo && out <= hi) return true;
        std::fprintf(stderr, "--%s must be %d..%d\n", name, lo, hi);
        return false;
    };
    o.model = p.value("model");
    o.modelsDir = p.value("models-dir");
    o.preset = p.value("preset");
    o.type = p.value("type");
    o.staged = p.isSet("staged");
    o.json = p.value("json");
    o.png = p.value("png");
    bench::LiveViewSettings& v = o.view;
    const bool ok =
        integer("layers", o.layers, 0, 1024) && integer("ssd-layers", o.ssdLayers, 0, 1024) &&
        integer("tokens", o.tokens, 2, 4096) && integer("repeats", o.repeats, 1, 100) &&
        integer("threads", v.threads, 0, 1024) && integer("width", v.width, 420, 8192) &&
        integer("height", v.height, 220, 8192) && integer("history", v.historyTokens, 1, 1024) &&
        integer("frame-ms", v.frameMs, 0, 1000) && integer("poll-ms", v.pollMs, 0, 1000);
    return ok ? 0 : 2;
}

// The model: given, or synthetic (made once in modelsDir, kept for the next run).
Result<std::string> modelPath(const Options& o)
{
    if (!o.model.isEmpty()) return o.model.toStdString();
    const auto type = parseType(o.type);
    if (!type)
        return makeError(ErrorCode::InvalidArgument, "unknown --type " + o.type.toStdString());
    QDir().mkpath(o.modelsDir);
    const QString name = o.preset + "-" + o.type +
                         (o.layers > 0 ? QString("-%1l").arg(o.layers) : QString()) + ".gguf";
    const std::string path = QDir(o.modelsDir).filePath(name).toStdString();
    if (QFileInfo::exists(QString::fromStdString(path))) return path;
    std::fprintf(stderr, "making %s (synthetic %s, random weights) ...\n", path.c_str(),
                 qPrintable(o.preset));
    SyntheticOptions so;
    so.preset = o.preset.toStdString();
    so.type = *type;
    so.layers = o.layers;
    SPILLWAY_TRY(writeSyntheticModel(so, path));
    return path;
}

}  // namespace

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    Options o;
    o.modelsDir = QDir::cleanPath(QCoreApplication::applicationDirPath() + "/../bench-models");
    if (int rc = parseOptions(app, o)) return rc;
    auto fail = [](const std::string& why) { return std::fprintf(stderr, "%s\n", why.c_str()), 1; };

    auto path = modelPath(o);
    if (!path) return fail(path.error().message);
    auto model = LlamaModel::load(*path);
    if (!model) return fail(model.error().message);
    const LlamaConfig& config = (*model)->config();
    o.ssdLayers = std::min(o.ssdLayers, config.nLayers);
    auto plan = std::make_shared<plan::PlanResult>();
    plan->placement = makePlacement(**model, o.ssdLayers, o.staged);
    const uint64_t ssdBytes = plan->placement.bytesOn(plan::Tier::Ssd);
    const uint64_t modelBytes = ssdBytes + plan->placement.bytesOn(plan::Tier::Device);

    trace::Recorder recorder;
    bench::LiveViewBench bench(o.view, recorder);
    const QString engine = bench.prepare(QString::fromStdString(*path), plan);
    if (!bench.error().isEmpty()) return fail(bench.error().toStdString());

    // A short warm-up pulls the weights into memory; then hidden and live runs alternate.
    std::fprintf(stderr, "warm-up ...\n");
    const QString loadBefore = loadAverage();
    bench.run(false, 4);
    std::vector<Run> hidden, live;
    for (int r = 0; r < o.repeats && bench.error().isEmpty(); ++r) {
        for (bool isLive : {false, true}) {
            Run run = bench.run(isLive, o.tokens);
            std::fprintf(stderr, "run %d, view %s: %.2f tokens/s, %zu frames\n", r + 1,
                         isLive ? "live" : "hidden", run.tokensPerSecond, run.paintMs.size());
            (isLive ? live : hidden).push_back(std::move(run));
        }
    }
    if (!bench.error().isEmpty()) return fail(bench.error().toStdString());
    const QString loadAfter = loadAverage();
    if (!o.png.isEmpty())
        if (Status s = bench.exportPng(o.png); !s) fail(s.error().message);

    // Frames pooled over the live runs; tokens/s the median of each kind.
    double windowMs = 0, spansRecorded = 0, tokensDecoded = 0;
    uint64_t lost = 0;
    size_t frames = 0, maxShown = 0, drawnLast = 0;
    int worstSecond = -1;
    std::vector<double> intervals;
    for (const Run& r : live) {
        windowMs += r.windowMs();
        frames += r.paintMs.size();
        spansRecorded += double(r.spansRecorded);
        tokensDecoded += r.tokens;
        lost += r.spansLost;
        maxShown = std::max(maxShown, r.maxSpansShown);
        drawnLast = r.spansDrawnLastFrame;
        const int worst = r.worstSecondFrames();
        if (worst >= 0) worstSecond = worstSecond < 0 ? worst : std::min(worstSecond, worst);
        const auto gaps = r.frameIntervalsMs();
        intervals.insert(intervals.end(), gaps.begin(), gaps.end());
    }
    const double fps = windowMs > 0 ? double(frames) / (windowMs / 1e3) : 0;
    const Distribution paint = distribution(gather(live, &Run::paintMs));
    const Distribution paintCpu = distribution(gather(live, &Run::paintCpuMs));
    const Distribution update = distribution(gather(live, &Run::updateMs));
    const Distribution interval = distribution(intervals);
    const Distribution poll = distribution(gather(live, &Run::pollMs));
    const Distribution pollCpu = distribution(gather(live, &Run::pollCpuMs));
    const Distribution toScreen = distribution(gather(live, &Run::spanToScreenMs));
    const Distribution lateLive = distribution(gather(live, &Run::lateMs));
    const Distribution lateHidden = distribution(gather(hidden, &Run::lateMs));
    const double frameBudgetMs = 1000.0 / o.targetFps;
    const auto longGaps = std::count_if(intervals.begin(), intervals.end(),
                                        [&](double gap) { return gap > frameBudgetMs; });
    const double guiBusy = windowMs > 0 ? (update.sum + poll.sum) / windowMs : 0;
    std::vector<double> tpsHidden, tpsLive;
    for (const Run& r : hidden) tpsHidden.push_back(r.tokensPerSecond);
    for (const Run& r : live) tpsLive.push_back(r.tokensPerSecond);
    const double hiddenTps = median(tpsHidden), liveTps = median(tpsLive);
    const double spansPerToken = tokensDecoded > 0 ? spansRecorded / tokensDecoded : 0;
    const double headroom = paint.p99 > 0 ? 1000.0 / paint.p99 : 0;
    const double headroomCpu = paintCpu.p99 > 0 ? 1000.0 / paintCpu.p99 : 0;
    const QString platform = QGuiApplication::platformName();
    const bool offscreen = platform == "offscreen";
    const bool smooth = fps >= o.targetFps;
    const bench::LiveViewSettings& v = o.view;

    std::printf("bench-visualizer: the live BottleneckView while a GenerationWorker decodes\n");
    std::printf("%-34s %s%s\n", "Qt platform", qPrintable(platform),
                offscreen ? " (software raster into a QImage; no display, no vsync)" : "");
    std::printf("%-34s %s, %d CPUs; load average %s before, %s after\n", "machine",
                cpuModelName().c_str(), QThread::idealThreadCount(), qPrintable(loadBefore),
                qPrintable(loadAfter));
    std::printf("%-34s %s\n", "model", path->c_str());
    std::printf("%-34s %s, %d layers, %.2f GiB of weights%s\n", "", config.architecture.c_str(),
                config.nLayers, double(modelBytes) / double(1 << 30),
                config.synthetic ? " (SYNTHETIC: random weights)" : "");
    std::printf("%-34s %d of %d layers from the SSD every token (%.0f MiB/token, %s), the rest "
                "in RAM; prefetch 2\n", "placement", o.ssdLayers, config.nLayers,
                double(ssdBytes) / double(1 << 20), o.staged ? "staged + copies" : "direct reads");
    std::printf("%-34s %s\n", "engine", qPrintable(engine));
    const QString forced = v.frameMs > 0
                               ? QString("update() forced every %1 ms").arg(v.frameMs)
                               : QString("repainted only when spans arrive (as in the app)");
    std::printf("%-34s %dx%d, last %d tokens, %s, drained every %d ms%s\n", "view", v.width,
                v.height, v.historyTokens, qPrintable(forced), bench.pollIntervalMs(),
                o.view.pollMs > 0 ? "" : " (the view's own interval)");
    std::printf("%-34s %d new tokens x %d runs each, view hidden and live alternating\n", "runs",
                o.tokens, o.repeats);
    std::printf("%-34s %.1f recorded per new token; at most %zu shown; %zu drawn in the last "
                "frame; %llu lost\n", "spans", spansPerToken, maxShown, drawnLast,
                static_cast<unsigned long long>(lost));

    std::printf("\nframes while decoding (%.1f s of live runs)\n", windowMs / 1e3);
    std::printf("  %-40s %.1f (target %.0f, ratio %.2f) -> %s\n", "achieved frames/s", fps,
                o.targetFps, fps / o.targetFps, smooth ? "smooth" : "BELOW TARGET");
    std::printf("  %-40s %d\n", "fewest frames in any 1 s", worstSecond);
    std::printf("  %-40s %7s %7s %7s %7s\n", "ms", "p50", "p95", "p99", "max");
    printDistribution("paint (paintEvent), wall", paint);
    printDistribution("paint, GUI-thread CPU time", paintCpu);
    printDistribution("whole update (paint + backing store)", update);
    printDistribution("interval between frames", interval);
    printDistribution("drain + reindex (pollRecorder), wall", poll);
    printDistribution("drain + reindex, GUI-thread CPU time", pollCpu);
    printDistribution("span end -> first paint showing it", toScreen);
    std::printf("  %-40s %.0f frames/s (1000 / p99 paint ms, wall; %.1fx the target)\n",
                "paint headroom", headroom, headroom / o.targetFps);
    std::printf("  %-40s %.0f frames/s (1000 / p99 paint ms, CPU; %.1fx the target)\n",
                "paint headroom, CPU time", headroomCpu, headroomCpu / o.targetFps);
    std::printf("  %-40s %lld of %zu (%.1f%%)\n", "intervals over 1000/30 ms",
                static_cast<long long>(longGaps), interval.count,
                interval.count ? 100.0 * double(longGaps) / double(interval.count) : 0);
    std::printf("  %-40s %.1f%% of the window (updates + drains, wall)\n",
                "GUI thread busy with the view", 100 * guiBusy);
    std::printf("\nevent loop: lateness of a 1 ms timer (ms)\n");
    std::printf("  %-40s %7s %7s %7s %7s\n", "", "p50", "p95", "p99", "max");
    printDistribution("view hidden", lateHidden);
    printDistribution("view live", lateLive);
    std::printf("\ndecode tokens/s (median of %d runs each)\n", o.repeats);
    std::printf("  %-40s %.2f\n", "view hidden", hiddenTps);
    std::printf("  %-40s %.2f (%.1f%% of hidden)\n", "view live", liveTps,
                hiddenTps > 0 ? 100 * liveTps / hiddenTps : 0);

    if (o.json.isEmpty()) return 0;
    auto runsJson = [](const std::vector<Run>& runs) {
        QJsonArray a;
        for (const Run& r : runs)
            a.append(QJsonObject{{"tokens_per_s", r.tokensPerSecond},
                                 {"time_to_first_token_ms", r.ttftMs},
                                 {"tokens", r.tokens},
                                 {"window_ms", r.windowMs()},
                                 {"frames", qint64(r.paintMs.size())},
                                 {"fewest_frames_in_1s", r.worstSecondFrames()},
                                 {"spans_recorded", qint64(r.spansRecorded)},
                                 {"spans_drained", qint64(r.spansDrained)}});
        return a;
    };
    const QJsonObject j{
        {"bench", "visualizer"},
        {"qt_platform", platform},
        {"rendering", offscreen ? "software raster (QImage backing store), no display" : "native"},
        {"cpu", QString::fromStdString(cpuModelName())},
        {"cpus", QThread::idealThreadCount()},
        {"load_average_before", loadBefore},
        {"load_average_after", loadAfter},
        {"engine", engine},
        {"model", QString::fromStdString(*path)},
        {"synthetic", config.synthetic},
        {"layers", config.nLayers},
        {"weight_bytes", qint64(modelBytes)},
        {"ssd_layers", o.ssdLayers},
        {"ssd_bytes_per_token", qint64(ssdBytes)},
        {"staged", o.staged},
        {"tokens_per_run", o.tokens},
        {"repeats", o.repeats},
        {"view", QJsonObject{{"width", v.width}, {"height", v.height},
                             {"history_tokens", v.historyTokens},
                             {"forced_update_interval_ms", v.frameMs},
                             {"poll_interval_ms", bench.pollIntervalMs()},
                             {"poll_interval_is_the_views_own", v.pollMs == 0}}},
        {"spans_per_token", spansPerToken},
        {"max_spans_shown", qint64(maxShown)},
        {"spans_lost", qint64(lost)},
        {"target_frames_per_s", o.targetFps},
        {"achieved_frames_per_s", fps},
        {"ratio_to_target", fps / o.targetFps},
        {"fewest_frames_in_1s", worstSecond},
        {"smooth", smooth},
        {"paint_ms", toJson(paint)},
        {"paint_cpu_ms", toJson(paintCpu)},
        {"update_ms", toJson(update)},
        {"frame_interval_ms", toJson(interval)},
        {"intervals_over_budget", qint64(longGaps)},
        {"poll_ms", toJson(poll)},
        {"poll_cpu_ms", toJson(pollCpu)},
        {"span_to_screen_ms", toJson(toScreen)},
        {"paint_headroom_frames_per_s", headroom},
        {"paint_cpu_headroom_frames_per_s", headroomCpu},
        {"gui_busy_fraction", guiBusy},
        {"event_loop_lateness_ms",
         QJsonObject{{"view_hidden", toJson(lateHidden)}, {"view_live", toJson(lateLive)}}},
        {"decode_tokens_per_s",
         QJsonObject{{"view_hidden", hiddenTps}, {"view_live", liveTps},
                     {"ratio", hiddenTps > 0 ? liveTps / hiddenTps : 0}}},
        {"runs", QJsonObject{{"view_hidden", runsJson(hidden)}, {"view_live", runsJson(live)}}},
        {"method", "GUI thread, between the worker's first text (prompt done) and its finished "
                   "signal; frames pooled over the live runs; tokens/s: median per kind"},
    };
    QSaveFile file(o.json);
    if (!file.open(QIODevice::WriteOnly) ||
        file.write(QJsonDocument(j).toJson(QJsonDocument::Indented)) < 0 || !file.commit())
        return fail(o.json.toStdString() + ": " + file.errorString().toStdString());
    return 0;
}
