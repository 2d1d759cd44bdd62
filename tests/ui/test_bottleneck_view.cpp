// BottleneckView with a real trace (the demo model decoding with every weight on the SSD tier)
// and with hand-made spans on every lane: which lanes get painted, the headline, hover text,
// zoom and pan, the live recorder with its token limit, and both exports.

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QHelpEvent>
#include <QImage>
#include <QImageReader>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMouseEvent>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>

#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/trace/trace.h"
#include "gpu/cpu/cpu_device.h"
#include "ui/bottleneck_stats.h"
#include "ui/bottleneck_view.h"

using spillway::ui::BottleneckView;
namespace trace = spillway::trace;
using trace::Lane;

namespace {

const std::string kModel = SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf";

constexpr Lane kLanes[] = {Lane::SsdRead,       Lane::HostToDevice, Lane::Decompress,
                           Lane::DeviceCompute, Lane::CpuCompute,   Lane::Stall};

// Decodes a short greedy reply with every weight matrix read from the SSD tier for each pass
// (prefetch depth 2), recording the streamer's and the session's spans.
std::vector<trace::Span> recordRealTrace(QString* error)
{
    using namespace spillway;
    auto model = LlamaModel::load(kModel);
    if (!model) {
        *error = QString::fromStdString(model.error().message);
        return {};
    }
    auto device = gpu::createCpuDevice(2);
    trace::Recorder recorder;
    SessionOptions options;
    options.contextLength = 64;
    options.placement = plan::uniformPlacement(**model, plan::Tier::Ssd);
    options.placement->prefetchDepth = 2;
    options.streamer.trace = &recorder;
    auto session = LlamaSession::create(**model, *device, options);
    if (!session) {
        *error = QString::fromStdString(session.error().message);
        return {};
    }
    SamplerSettings greedy;
    greedy.temperature = 0;
    Sampler sampler((*model)->config().vocabSize, greedy);
    GenerationRequest request;
    request.prompt = "Once upon a time";
    request.maxNewTokens = 16;
    auto stats = generate(**session, sampler, request);
    if (!stats) {
        *error = QString::fromStdString(stats.error().message);
        return {};
    }
    session->reset();  // stops the loader thread before the ring is read
    return recorder.snapshot();
}

// The category the per-token attribution gives most time to, as the words the headline uses.
QString dominantLaneWords(const std::vector<trace::Span>& spans)
{
    std::array<uint64_t, trace::kCategoryCount> ns{};
    uint64_t device = 0, cpu = 0;
    for (const trace::Summary& t : trace::summarizePerToken(spans)) {
        for (size_t c = 0; c < ns.size(); ++c) ns[c] += t.attributedNs[c];
        device += t.lane(Lane::DeviceCompute).busyNs;
        cpu += t.lane(Lane::CpuCompute).busyNs;
    }
    size_t best = static_cast<size_t>(trace::Category::Stalls);
    for (size_t c = 0; c < static_cast<size_t>(trace::Category::Stalls); ++c)
        if (ns[c] > 0 && (best == static_cast<size_t>(trace::Category::Stalls) || ns[c] > ns[best]))
            best = c;
    switch (static_cast<trace::Category>(best)) {
    case trace::Category::Compute: return cpu > device ? "CPU compute" : "device compute";
    case trace::Category::Decompress: return "decompress";
    case trace::Category::HostToDevice: return "host→device";
    case trace::Category::SsdRead: return "SSD read";
    default: return "stall";
    }
}

// Four tokens of 10 ms; per token: six 1 ms SSD reads (layers 0..5), 1 ms host→device,
// 0.5 ms decompress, 1.5 ms device compute, 0.5 ms CPU compute, 0.5 ms stall.
std::vector<trace::Span> syntheticSpans(uint64_t base = 1'000'000'000)
{
    constexpr uint64_t ms = 1'000'000;
    std::vector<trace::Span> spans;
    for (uint32_t token = 0; token < 4; ++token) {
        const uint64_t t0 = base + token * 10 * ms;
        for (int layer = 0; layer < 6; ++layer)
            spans.push_back({Lane::SsdRead, layer, "read", 4u << 20, t0 + layer * ms,
                             t0 + (layer + 1) * ms, token});
        spans.push_back({Lane::HostToDevice, 5, "copy", 2u << 20, t0 + 6 * ms, t0 + 7 * ms, token});
        spans.push_back({Lane::Decompress, 5, "unpack", 2u << 20, t0 + 7 * ms, t0 + 7 * ms + ms / 2,
                         token});
        spans.push_back({Lane::DeviceCompute, 5, "ffn", 0, t0 + 7 * ms + ms / 2, t0 + 9 * ms,
                         token});
        spans.push_back({Lane::CpuCompute, 5, "ffn rows", 1u << 20, t0 + 9 * ms,
                         t0 + 9 * ms + ms / 2, token});
        spans.push_back({Lane::Stall, -1, "wait", 0, t0 + 9 * ms + ms / 2, t0 + 10 * ms, token});
    }
    return spans;
}

int countLane(const std::vector<trace::Span>& spans, Lane lane)
{
    return static_cast<int>(std::count_if(spans.begin(), spans.end(),
                                          [lane](const trace::Span& s) { return s.lane == lane; }));
}

void sendWheel(QWidget* w, QPoint pos, int angleY)
{
    QWheelEvent wheel(QPointF(pos), QPointF(w->mapToGlobal(pos)), QPoint(), QPoint(0, angleY),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(w, &wheel);
}

void sendMouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button,
               Qt::MouseButtons buttons)
{
    QMouseEvent event(type, QPointF(pos), QPointF(w->mapToGlobal(pos)), button, buttons,
                      Qt::NoModifier);
    QApplication::sendEvent(w, &event);
}

}  // namespace

class TestBottleneckView : public QObject {
    Q_OBJECT
private slots:
    void realTraceFromSsdOffload();
    void syntheticTracePaintsEveryLane();
    void zoomPanAndFit();
    void liveRecorderKeepsLastTokens();
    void liveViewFollowsTheNewestOfALongerHistory();
    void paintTimeWithTwentyThousandSpans();
    void neuronCacheStripShowsEachLayersHitRate();
    void expertCacheStripShowsEachLayersHitRate();
    void overallTimePerTokenCountsWhatPassesBetweenTokens();
};

void TestBottleneckView::realTraceFromSsdOffload()
{
    QString error;
    const std::vector<trace::Span> spans = recordRealTrace(&error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(!spans.empty());
    QVERIFY2(countLane(spans, Lane::SsdRead) > 0, "no SSD read spans in the trace");
    QVERIFY2(countLane(spans, Lane::DeviceCompute) > 0, "no device compute spans in the trace");

    BottleneckView view;
    view.resize(1400, 460);
    view.setSpans(spans);
    const QImage image = view.grab().toImage();
    QVERIFY(!image.isNull());
    for (Lane lane : kLanes) {
        const int inTrace = countLane(spans, lane);
        qInfo("%-14s %5d spans, %5d painted", trace::laneName(lane), inTrace,
              view.paintedSpanCount(lane));
        if (inTrace > 0) QVERIFY2(view.paintedSpanCount(lane) > 0, trace::laneName(lane));
        else QCOMPARE(view.paintedSpanCount(lane), 0);
    }
    // The fitted view shows every span.
    for (Lane lane : kLanes) QCOMPARE(view.paintedSpanCount(lane), countLane(spans, lane));

    const QString words = dominantLaneWords(spans);
    qInfo("headline: %s (%s)", qPrintable(view.headline()), qPrintable(view.breakdown()));
    QVERIFY2(view.headline().contains(words), qPrintable(view.headline() + " lacks " + words));
    QVERIFY2(QRegularExpression("^\\d+% of each token ").match(view.headline()).hasMatch(),
             qPrintable(view.headline()));
    QVERIFY(view.utilization(Lane::SsdRead) > 0);
    QVERIFY(view.measuredMsPerToken(Lane::DeviceCompute) > 0);

    // Hover: the longest layer span of device compute, zoomed so it is wide on screen.
    const trace::Span* known = nullptr;
    for (const trace::Span& s : spans)
        if (s.lane == Lane::DeviceCompute && s.layer >= 0 &&
            (!known || s.endNs - s.startNs > known->endNs - known->startNs))
            known = &s;
    QVERIFY(known);
    const double middle = (static_cast<double>(known->startNs) + known->endNs) / 2;
    view.zoomBy(3.0 * (known->endNs - known->startNs) / view.visibleRange().lengthNs(),
                view.xForTime(middle));
    view.grab();
    const QPoint center(static_cast<int>(std::lround(view.xForTime(middle))),
                        static_cast<int>(view.laneRect(Lane::DeviceCompute).center().y()));
    const QString info = view.spanInfoAt(center);
    qInfo("hover: %s", qPrintable(info));
    QVERIFY2(info.contains(QStringLiteral("layer %1 ").arg(known->layer)), qPrintable(info));
    QVERIFY2(info.contains(QString::fromUtf8(known->op)), qPrintable(info));
    QVERIFY2(info.contains(QStringLiteral("token %1").arg(known->token)), qPrintable(info));
    QVERIFY2(view.spanInfoAt(QPoint(center.x(), 2)).isEmpty(), "the header has no span");

    // An SSD read: bytes and GB/s in the hover text.
    const trace::Span* read = nullptr;
    for (const trace::Span& s : spans)
        if (s.lane == Lane::SsdRead && s.bytes > 0 && s.endNs > s.startNs &&
            (!read || s.endNs - s.startNs > read->endNs - read->startNs))
            read = &s;
    QVERIFY(read);
    view.fitToData();
    const double readMiddle = (static_cast<double>(read->startNs) + read->endNs) / 2;
    view.zoomBy(3.0 * (read->endNs - read->startNs) / view.visibleRange().lengthNs(),
                view.xForTime(readMiddle));
    const QString readInfo = view.spanInfoAt(
        QPoint(static_cast<int>(std::lround(view.xForTime(readMiddle))),
               static_cast<int>(view.laneRect(Lane::SsdRead).center().y())));
    qInfo("hover: %s", qPrintable(readInfo));
    QVERIFY2(readInfo.contains("GB/s") && readInfo.contains("read"), qPrintable(readInfo));

    // Exports.
    view.fitToData();
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString png = dir.filePath("bottleneck.png");
    const auto pngStatus = view.exportPng(png);
    QVERIFY2(pngStatus.ok(), pngStatus.ok() ? "" : pngStatus.error().message.c_str());
    QImageReader reader(png);
    QCOMPARE(reader.format(), QByteArray("png"));
    const QImage loaded = reader.read();
    QVERIFY(!loaded.isNull());
    QCOMPARE(loaded.size(), view.size() * view.devicePixelRatio());
    const QString json = dir.filePath("bottleneck.json");
    const auto jsonStatus = view.exportChromeTrace(json);
    QVERIFY2(jsonStatus.ok(), jsonStatus.ok() ? "" : jsonStatus.error().message.c_str());
    QFile file(json);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &parseError);
    QVERIFY2(parseError.error == QJsonParseError::NoError, qPrintable(parseError.errorString()));
    const QJsonArray events = doc.object().value("traceEvents").toArray();
    QVERIFY(events.size() >= static_cast<qsizetype>(spans.size()));
    QVERIFY(!view.exportPng("/nonexistent-dir/x.png").ok());
}

void TestBottleneckView::syntheticTracePaintsEveryLane()
{
    const std::vector<trace::Span> spans = syntheticSpans();
    BottleneckView view;
    view.resize(1200, 420);
    view.setSpans(spans);
    const trace::LanePrediction predicted[] = {{Lane::SsdRead, 0.005},
                                               {Lane::DeviceCompute, 0.002}};
    view.setPrediction(predicted, 0.008);
    view.grab();
    for (Lane lane : kLanes) {
        QVERIFY2(view.paintedSpanCount(lane) > 0, trace::laneName(lane));
        QCOMPARE(view.paintedSpanCount(lane), countLane(spans, lane));
    }
    // SSD reads alone: 6 of every 10 ms.
    QCOMPARE(view.headline(), QStringLiteral("60% of each token waits on SSD reads"));
    QCOMPARE(view.utilization(Lane::SsdRead), 0.6);
    QVERIFY(std::abs(view.measuredMsPerToken(Lane::SsdRead) - 6.0) < 1e-9);
    QVERIFY(std::abs(view.measuredMsPerToken(Lane::CpuCompute) - 0.5) < 1e-9);
    QCOMPARE(view.predictedMsPerToken(Lane::SsdRead), 5.0);
    QVERIFY(view.predictedMsPerToken(Lane::Decompress) < 0);
    QVERIFY2(view.breakdown().startsWith("SSD read 60%"), qPrintable(view.breakdown()));

    // Zoomed into the first 2 ms, only what is visible is drawn.
    const auto data = view.dataRange();
    view.zoomBy(2e6 / view.visibleRange().lengthNs(), view.xForTime(data.beginNs));
    view.grab();
    const int ssd = view.paintedSpanCount(Lane::SsdRead);
    QVERIFY2(ssd > 0 && ssd <= 3, qPrintable(QString::number(ssd)));
    QCOMPARE(view.paintedSpanCount(Lane::DeviceCompute), 0);
    const QString info = view.spanInfoAt(
        QPoint(static_cast<int>(view.xForTime(data.beginNs + 500'000)),
               static_cast<int>(view.laneRect(Lane::SsdRead).center().y())));
    QVERIFY2(info.contains("layer 0 ") && info.contains("4.00 MiB") && info.contains("4.19 GB/s"),
             qPrintable(info));  // 4 MiB in 1 ms

    // A mix of a compute-bound and an empty trace.
    view.setSpans({});
    view.grab();
    QCOMPARE(view.headline(), QStringLiteral("No spans recorded yet"));
    for (Lane lane : kLanes) QCOMPARE(view.paintedSpanCount(lane), 0);
}

void TestBottleneckView::zoomPanAndFit()
{
    BottleneckView view;
    view.resize(1000, 400);
    view.setSpans(syntheticSpans());
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const auto fitted = view.visibleRange();
    QVERIFY(view.isFollowing());

    // Two wheel notches halve the visible time; the time under the cursor stays put.
    const QPoint cursor(static_cast<int>(view.laneRect(Lane::SsdRead).center().x()) + 37,
                        static_cast<int>(view.laneRect(Lane::SsdRead).center().y()));
    const double before = view.visibleRange().beginNs +
                          (cursor.x() - view.laneRect(Lane::SsdRead).left()) *
                              view.visibleRange().lengthNs() / view.laneRect(Lane::SsdRead).width();
    sendWheel(&view, cursor, 240);
    const auto zoomed = view.visibleRange();
    QVERIFY2(std::abs(zoomed.lengthNs() / fitted.lengthNs() - 0.5) < 1e-9,
             qPrintable(QString::number(zoomed.lengthNs() / fitted.lengthNs())));
    QVERIFY(std::abs(view.xForTime(before) - cursor.x()) < 1e-6);
    QVERIFY(!view.isFollowing());
    sendWheel(&view, cursor, -240);
    QVERIFY(std::abs(view.visibleRange().lengthNs() / fitted.lengthNs() - 1.0) < 1e-9);
    sendWheel(&view, cursor, 240);

    // Dragging 100 px to the right shows 100 px worth of earlier time.
    const double perPx = zoomed.lengthNs() / view.laneRect(Lane::SsdRead).width();
    sendMouse(&view, QEvent::MouseButtonPress, cursor, Qt::LeftButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseMove, cursor + QPoint(60, 0), Qt::NoButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseMove, cursor + QPoint(100, 3), Qt::NoButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseButtonRelease, cursor + QPoint(100, 3), Qt::LeftButton,
              Qt::NoButton);
    const auto panned = view.visibleRange();
    QVERIFY(std::abs(panned.beginNs - (zoomed.beginNs - 100 * perPx)) < 1);
    QVERIFY(std::abs(panned.lengthNs() - zoomed.lengthNs()) < 1);

    // Double-click fits again.
    sendMouse(&view, QEvent::MouseButtonDblClick, cursor, Qt::LeftButton, Qt::LeftButton);
    QCOMPARE(view.visibleRange().beginNs, fitted.beginNs);
    QCOMPARE(view.visibleRange().endNs, fitted.endNs);
    QVERIFY(view.isFollowing());

    // The tooltip shows the hover text.
    const QPoint onSpan(static_cast<int>(view.xForTime(view.dataRange().beginNs + 2'500'000)),
                        cursor.y());
    const QString info = view.spanInfoAt(onSpan);
    QVERIFY2(info.contains("layer 2 · read"), qPrintable(info));
    QHelpEvent help(QEvent::ToolTip, onSpan, view.mapToGlobal(onSpan));
    QApplication::sendEvent(&view, &help);
    QTRY_VERIFY(QToolTip::isVisible());
    QCOMPARE(QToolTip::text(), info);
}

void TestBottleneckView::liveRecorderKeepsLastTokens()
{
    trace::Recorder recorder(4096);
    BottleneckView view;
    view.resize(900, 360);
    view.setMaxTokens(3);
    view.setRecorder(&recorder);
    QCOMPARE(view.pollIntervalMs(), 16);  // 60 Hz: live frames stay above 30/s
    view.grab();  // empty: paints the waiting text
    for (const trace::Span& s : syntheticSpans()) recorder.record(s);
    // Tokens 4..9 more, 10 ms each, after the synthetic four.
    for (uint32_t token = 4; token < 10; ++token)
        for (const trace::Span& s : syntheticSpans(1'000'000'000 + token * 10'000'000))
            if (s.token == 0)
                recorder.record({s.lane, s.layer, s.op, s.bytes, s.startNs, s.endNs, token});
    QTRY_VERIFY_WITH_TIMEOUT(!view.spans().empty(), 2'000);  // the timer drained the ring
    QTRY_COMPARE_WITH_TIMEOUT(view.spans().back().token, 9u, 2'000);
    uint32_t oldest = UINT32_MAX;
    for (const trace::Span& s : view.spans()) oldest = std::min(oldest, s.token);
    QCOMPARE(oldest, 7u);
    QCOMPARE(view.spans().size(), size_t{3} * 11);
    view.grab();
    for (Lane lane : kLanes) QCOMPARE(view.paintedSpanCount(lane), countLane(view.spans(), lane));
    QCOMPARE(view.headline(), QStringLiteral("60% of each token waits on SSD reads"));

    // Zoomed in on the old tokens (the view stops following), then a new generation starts
    // again at token 0: the old tokens go, and the view follows the new ones (no empty lanes).
    view.zoomBy(0.01, 450);
    QVERIFY(!view.isFollowing());
    recorder.record({Lane::DeviceCompute, 0, "layer", 0, 2'000'000'000, 2'001'000'000, 0});
    QCOMPARE(view.pollRecorder(), size_t{1});
    QVERIFY(view.isFollowing());
    QVERIFY(view.visibleRange().beginNs <= 2'000'000'000.0 && view.visibleRange().endNs >= 2'001'000'000.0);
    QCOMPARE(view.spans().size(), size_t{1});
    QCOMPARE(view.pollRecorder(), size_t{0});
    view.grab();
    QCOMPARE(view.paintedSpanCount(Lane::DeviceCompute), 1);
    QCOMPARE(view.paintedSpanCount(Lane::SsdRead), 0);
    QVERIFY2(view.headline().contains("device compute"), qPrintable(view.headline()));

    // Panned far to the past while the same generation goes on: the view holds still where the
    // user put it (the new spans wait, the header says so) until a double-click follows again.
    view.panByPixels(1e6);
    QVERIFY(!view.isFollowing());
    const auto held = view.visibleRange();
    for (uint32_t token = 1; token <= 3; ++token)
        recorder.record({Lane::DeviceCompute, 0, "layer", 0, 2'000'000'000 + token * 10'000'000ull,
                         2'001'000'000 + token * 10'000'000ull, token});
    QCOMPARE(view.pollRecorder(), size_t{3});
    QVERIFY(!view.isFollowing());
    QCOMPARE(view.visibleRange().beginNs, held.beginNs);
    QCOMPARE(view.spans().size(), size_t{1});
    QVERIFY2(view.detailLine().contains("3 new span(s) waiting"), qPrintable(view.detailLine()));
    view.fitToData();
    QVERIFY(view.isFollowing());
    QCOMPARE(view.spans().size(), size_t{3});  // the max is 3 tokens
    view.grab();
    QCOMPARE(view.paintedSpanCount(Lane::DeviceCompute), countLane(view.spans(), Lane::DeviceCompute));

    view.setRecorder(nullptr);
    recorder.record({Lane::DeviceCompute, 1, "layer", 0, 2'001'000'000, 2'002'000'000, 0});
    QTest::qWait(150);
    QCOMPARE(view.spans().size(), size_t{3});  // no longer polled
}

// By default the live view keeps 64 tokens (its figures and exports cover them) and, following,
// shows the newest 8; fitting or zooming out brings the rest.
void TestBottleneckView::liveViewFollowsTheNewestOfALongerHistory()
{
    trace::Recorder recorder(1 << 12);
    BottleneckView view;
    view.resize(900, 360);
    QCOMPARE(view.maxTokens(), 64);
    view.setRecorder(&recorder);
    constexpr uint64_t ms = 1'000'000;
    for (uint32_t token = 0; token < 70; ++token)
        recorder.record({Lane::DeviceCompute, 0, "layer", 0, 1'000 * ms + token * 10 * ms, 1'000 * ms + token * 10 * ms + 8 * ms, token});
    QCOMPARE(view.pollRecorder(), size_t{70});
    QCOMPARE(int(view.spans().size()), 64);  // tokens 6..69
    QCOMPARE(view.spans().front().token, 6u);
    const auto visible = view.visibleRange();
    const double newest8 = 1'000.0 * ms + 62 * 10.0 * ms;  // token 62 starts here
    QVERIFY2(visible.beginNs > newest8 - 10.0 * ms && visible.beginNs <= newest8,
             qPrintable(QString::number(visible.beginNs)));
    QVERIFY(visible.endNs >= 1'000.0 * ms + 69 * 10.0 * ms + 8 * ms);
    view.grab();
    QCOMPARE(view.paintedSpanCount(Lane::DeviceCompute), 8);
    QVERIFY2(view.breakdown().contains("compute"), qPrintable(view.breakdown()));
    // Zoomed out to the whole history: all 64 are drawn.
    view.zoomBy(20.0, view.xForTime(visible.endNs));
    view.grab();
    QCOMPARE(view.paintedSpanCount(Lane::DeviceCompute), 64);
}

void TestBottleneckView::paintTimeWithTwentyThousandSpans()
{
    // 250 tokens × 20 layers: SSD read, copy, compute and a CPU share per layer = 20,000 spans.
    constexpr uint64_t us = 1'000;
    std::vector<trace::Span> spans;
    spans.reserve(20'000);
    uint64_t t = 1'000'000'000;
    for (uint32_t token = 0; token < 250; ++token) {
        for (int layer = 0; layer < 20; ++layer) {
            const uint64_t read = t + 300 * us, copied = t + 340 * us;
            spans.push_back({Lane::SsdRead, layer, "read", 8u << 20, t, read, token});
            spans.push_back({Lane::HostToDevice, layer, "copy", 8u << 20, read, copied, token});
            spans.push_back({Lane::DeviceCompute, layer, "layer", 0, copied, t + 400 * us, token});
            spans.push_back({Lane::CpuCompute, layer, "rows", 1u << 20, copied, t + 390 * us,
                             token});
            t += 400 * us;
        }
        t += 200 * us;
    }
    QCOMPARE(spans.size(), size_t{20'000});
    BottleneckView view;
    view.resize(1600, 500);
    QElapsedTimer timer;
    timer.start();
    view.setSpans(spans);
    const double indexMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    double worst = 0, sum = 0;
    constexpr int kFrames = 20;
    for (int i = 0; i < kFrames; ++i) {
        view.grab();
        worst = std::max(worst, view.lastPaintMs());
        sum += view.lastPaintMs();
    }
    int painted = 0;
    for (Lane lane : kLanes) painted += view.paintedSpanCount(lane);
    QCOMPARE(painted, 20'000);
    view.zoomBy(0.01, 800);
    view.grab();
    qInfo("20,000 spans: setSpans (index + per-token stats) %.1f ms; paint of the whole trace "
          "%.2f ms mean, %.2f ms worst over %d frames; zoomed to 1%%: %.2f ms",
          indexMs, sum / kFrames, worst, kFrames, view.lastPaintMs());
}

// relu-stories-260K through a neuron cache of a quarter of each FFN (CPU device, bundles from
// RAM): the trace's bundle spans carry each layer's lookups, and the view's strip adds them up
// to the figures the session reports; its cells say each layer's hit rate. A trace without a
// neuron cache has no strip.
void TestBottleneckView::neuronCacheStripShowsEachLayersHitRate()
{
    using namespace spillway;
    auto model = LlamaModel::load(SPILLWAY_TEST_DATA_DIR "/models/relu-stories-260K/model_qint80.bin",
                                  ModelLoadOptions{"relu-llama", ""});
    QVERIFY2(model.ok(), model ? "" : model.error().message.c_str());
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    trace::Recorder recorder;
    SessionOptions options;
    options.contextLength = 64;
    options.neuronCache.capacity = c.ffnDim / 4;
    options.streamer.trace = &recorder;
    auto session = LlamaSession::create(**model, *device, options);
    QVERIFY2(session.ok(), session ? "" : session.error().message.c_str());
    const int tokens = 12;
    for (int pos = 0; pos < tokens; ++pos) QVERIFY((*session)->forward(pos == 0 ? 1 : 300 + pos, pos).ok());
    std::vector<trace::Span> spans;
    recorder.drain(spans);
    const NeuronCacheReport report = (*session)->neuronCacheReport();

    BottleneckView view;
    view.resize(1200, 460);
    view.setSpans(spans);
    const auto& layers = view.cacheLayers();
    QCOMPARE(int(layers.size()), c.nLayers);
    uint64_t lookups = 0, hits = 0, bytes = 0;
    for (const auto& l : layers) {
        QVERIFY(l.lookups > 0);
        lookups += l.lookups;
        hits += l.hits;
        bytes += l.bytes;
    }
    QCOMPARE(lookups, report.total.active);
    QCOMPARE(hits, report.total.hits);
    // The bytes that moved: neurons without a slot are computed in place, from RAM.
    QCOMPARE(bytes, report.shippedBytes());
    QVERIFY(report.total.slotless > 0 && report.shippedBytes() < report.loadedBytes());
    QVERIFY(hits > 0 && hits < lookups);

    const QRectF strip = view.cacheStripRect();
    QVERIFY(!strip.isEmpty());
    QVERIFY(strip.top() > view.laneRect(Lane::Stall).bottom());
    QVERIFY(strip.bottom() <= view.height());
    const double cell = strip.width() / layers.size();
    const QPoint inLayer2(int(strip.left() + 2.5 * cell), int(strip.center().y()));
    const QString info = view.cacheStripInfoAt(inLayer2);
    QVERIFY2(info.startsWith("layer 2 · hit rate " + QString::number(100.0 * layers[2].hitRate(), 'f', 1) + "%"),
             qPrintable(info));
    QVERIFY(view.cacheStripInfoAt(QPoint(int(strip.left()) - 5, int(strip.center().y()))).isEmpty());
    // The cell is painted in its hit rate's colour (red 0% .. green 100%), not the background.
    const QImage image = view.grab().toImage();
    const QColor painted = image.pixelColor(QPoint(int(strip.left() + 2.5 * cell), int(strip.top()) + 2));
    QVERIFY2(painted != view.palette().color(QPalette::Base), "the layer's cell is not painted");

    QString error;
    BottleneckView plain;
    plain.resize(1200, 460);
    plain.setSpans(recordRealTrace(&error));
    QVERIFY(error.isEmpty());
    QVERIFY(plain.cacheLayers().empty());
    QVERIFY(plain.cacheStripRect().isEmpty());
}

// tiny-mixtral (a mixture of experts, tests/data/models/moe) with its experts on the SSD and an
// expert cache of 3 of the 8 experts per layer: the trace's "experts" spans carry each layer's
// chosen experts and hits, and the strip adds them up to the session's expert cache report; its
// cells and tooltips say each layer's hit rate and the experts it missed per token.
void TestBottleneckView::expertCacheStripShowsEachLayersHitRate()
{
    using namespace spillway;
    auto model = LlamaModel::load(SPILLWAY_TEST_DATA_DIR "/models/moe/tiny-mixtral.gguf");
    QVERIFY2(model.ok(), model ? "" : model.error().message.c_str());
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    trace::Recorder recorder;
    SessionOptions options;
    options.contextLength = 64;
    options.streamer.trace = &recorder;
    options.placement = plan::uniformPlacement(**model, plan::Tier::Device);
    // Layer 0's experts stay on the device (its cell says so); layers 1 and 2 go through the cache.
    for (auto& t : options.placement->tensors)
        if (t.name.find("_exps") != std::string::npos && t.name.rfind("blk.0.", 0) != 0) t.tier = plan::Tier::Ssd;
    options.experts.slotsPerLayer = 3;
    auto session = LlamaSession::create(**model, *device, options);
    QVERIFY2(session.ok(), session ? "" : session.error().message.c_str());
    const int tokens = 16;
    for (int pos = 0; pos < tokens; ++pos) QVERIFY((*session)->forward(pos == 0 ? 1 : 300 + pos, pos).ok());
    std::vector<trace::Span> spans;
    recorder.drain(spans);
    const ExpertCacheReport report = (*session)->expertCacheReport();
    QVERIFY(report.misses > 0 && report.hits > 0);

    BottleneckView view;
    view.resize(1200, 460);
    view.setSpans(spans);
    QVERIFY(view.cacheStripShowsExperts());
    const auto& layers = view.cacheLayers();
    QCOMPARE(int(layers.size()), c.nLayers);
    uint64_t lookups = 0, hits = 0, bytes = 0;
    QCOMPARE(layers[0].lookups, uint64_t(0));
    for (const auto& l : layers) {
        if (l.layer > 0) QCOMPARE(l.lookups, uint64_t(tokens * c.nExpertsUsed));  // every token chose 2 per layer
        lookups += l.lookups;
        hits += l.hits;
        bytes += l.bytes;
    }
    QCOMPARE(lookups, report.hits + report.misses);
    QCOMPARE(hits, report.hits);
    QCOMPARE(bytes, report.ssdBytes);

    const QRectF strip = view.cacheStripRect();
    QVERIFY(!strip.isEmpty());
    QVERIFY(strip.top() > view.laneRect(Lane::Stall).bottom());
    const double cell = strip.width() / double(layers.size());
    const QString info = view.cacheStripInfoAt(QPoint(int(strip.left() + 1.5 * cell), int(strip.center().y())));
    const double missed = double(layers[1].lookups - layers[1].hits) / tokens;
    QVERIFY2(info.startsWith("layer 1 · hit rate " + QString::number(100.0 * layers[1].hitRate(), 'f', 1) + "% (" +
                             QString::number(layers[1].hits) + " of " + QString::number(layers[1].lookups) +
                             " chosen experts in a slot) · " + QString::number(missed, 'f', 2) +
                             " experts missed per token"),
             qPrintable(info));
    const QString resident = view.cacheStripInfoAt(QPoint(int(strip.left() + 0.5 * cell), int(strip.center().y())));
    QVERIFY2(resident.startsWith("layer 0 · its experts are not served by the cache"), qPrintable(resident));
    const QImage image = view.grab().toImage();
    const QColor painted = image.pixelColor(QPoint(int(strip.left() + 1.5 * cell), int(strip.top()) + 2));
    QVERIFY2(painted != view.palette().color(QPalette::Base), "the layer's cell is not painted");

    // As short as the Tuning view's dock: the strip leaves each lane less than two lines, so the
    // gutter shows the lane's name alone and its figures are in the gutter's tooltip.
    view.resize(1200, 270);
    const QRectF ssd = view.laneRect(Lane::SsdRead);
    QVERIFY(ssd.height() + 4 < 2 * view.fontMetrics().height());
    const QString lane = view.laneInfoAt(QPoint(20, int(ssd.center().y())));
    QVERIFY2(lane.startsWith("SSD read · busy " + QString::number(std::lround(100 * view.utilization(Lane::SsdRead))) +
                             "% · " + QString::number(view.measuredMsPerToken(Lane::SsdRead), 'f', 2) +
                             " ms per token measured"),
             qPrintable(lane));
    QVERIFY(view.laneInfoAt(QPoint(int(ssd.left()) + 10, int(ssd.center().y()))).isEmpty());  // the plot has its own
    QVERIFY(view.laneInfoAt(QPoint(20, int(view.cacheStripRect().center().y()))).isEmpty());
}

QTEST_MAIN(TestBottleneckView)
// The header gives the engine's own time per token (the tokens' spans) and the time per token the
// status line's tokens/s counts (from one token's start to the next's, sampling and the GUI
// included); a jump of token ids (the next reply) is not a gap between two tokens.
void TestBottleneckView::overallTimePerTokenCountsWhatPassesBetweenTokens()
{
    constexpr uint64_t ms = 1'000'000;
    std::vector<trace::Span> spans;
    const std::pair<uint32_t, uint64_t> tokens[] = {{0, 0}, {1, 3 * ms}, {2, 6 * ms}, {40, 500 * ms}, {41, 504 * ms}};
    for (const auto& [token, start] : tokens) {
        trace::Span s;
        s.lane = Lane::DeviceCompute;
        s.layer = 0;
        s.op = "ffn";
        s.startNs = 1'000 * ms + start;
        s.endNs = s.startNs + ms;
        s.token = token;
        spans.push_back(s);
    }
    const spillway::ui::TokenStats stats = spillway::ui::computeTokenStats(spans);
    QCOMPARE(stats.total.nsPerToken, double(ms));
    QCOMPARE(stats.wallNsPerToken, double(3 * ms + 3 * ms + 4 * ms) / 3.0);
    BottleneckView view;
    view.resize(1200, 420);
    view.setSpans(spans);
    QVERIFY2(view.accessibleDescription().contains("1.00 ms/token in the engine's spans"), qPrintable(view.accessibleDescription()));
    QVERIFY2(view.accessibleDescription().contains("3.33 ms/token overall (300 tokens/s)"), qPrintable(view.accessibleDescription()));
    spans.resize(1);  // one token: no gap to measure
    QCOMPARE(spillway::ui::computeTokenStats(spans).wallNsPerToken, 0.0);
}

#include "test_bottleneck_view.moc"
