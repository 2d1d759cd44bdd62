// planner.h first: it names a member `slots`, a macro once Qt's headers are in.
#include "core/plan/planner.h"
#include "live_view_bench.h"

#include <QCoreApplication>
#include <QEvent>
#include <QEventLoop>
#include <algorithm>
#include <climits>
#include <ctime>

#include "ui/generation_worker.h"

namespace spillway::bench {

double nowMs() { return static_cast<double>(trace::nowNs()) / 1e6; }

// What the paint path itself costs, apart from the time the GUI thread waited for a core (the
// engine's threads and anything else on the machine compete for it). In a VM, time the host
// takes the virtual CPU away still counts.
double threadCpuMs()
{
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::vector<double> Run::frameIntervalsMs() const
{
    std::vector<double> gaps;
    for (size_t i = 1; i < paintStartMs.size(); ++i)
        gaps.push_back(paintStartMs[i] - paintStartMs[i - 1]);
    return gaps;
}

int Run::worstSecondFrames() const
{
    if (windowMs() < 1000) return -1;
    // The count over [s, s + 1 s) only drops just after a frame, so those starts (and the
    // window's own start) are the only candidates.
    const auto& t = paintStartMs;
    auto framesFrom = [&](double s) {
        return int(std::lower_bound(t.begin(), t.end(), s + 1000) -
                   std::lower_bound(t.begin(), t.end(), s));
    };
    int worst = framesFrom(windowStartMs);
    for (double start : t)
        if (start + 1e-6 + 1000 <= windowEndMs) worst = std::min(worst, framesFrom(start + 1e-6));
    return worst;
}

void MeasuredView::forget()
{
    paintStartMs.clear();
    paintMs.clear();
    paintCpuMs.clear();
    updateMs.clear();
    drainedEndMs.clear();
    spanToScreenMs.clear();
}

void MeasuredView::paintEvent(QPaintEvent* event)
{
    const double t0 = nowMs(), c0 = threadCpuMs();
    BottleneckView::paintEvent(event);
    if (!recording) return;
    paintStartMs.push_back(t0);
    paintMs.push_back(nowMs() - t0);
    paintCpuMs.push_back(threadCpuMs() - c0);
    for (double endMs : drainedEndMs) spanToScreenMs.push_back(t0 - endMs);
    drainedEndMs.clear();
}

bool MeasuredView::event(QEvent* event)
{
    if (event->type() != QEvent::UpdateRequest) return BottleneckView::event(event);
    const double t0 = nowMs();
    const bool handled = BottleneckView::event(event);
    if (recording) updateMs.push_back(nowMs() - t0);
    return handled;
}

LiveViewBench::LiveViewBench(const LiveViewSettings& settings, trace::Recorder& recorder)
    : m_settings(settings), m_recorder(recorder)
{
    m_worker = new ui::GenerationWorker;
    m_worker->setRecorder(&m_recorder);
    m_thread.setObjectName("inference");
    m_worker->moveToThread(&m_thread);
    QObject::connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.start();

    // The view's own timer would drain the recorder; this bench drains it at the same rate from
    // m_poll instead, to time each drain.
    m_poll.setInterval(settings.pollMs > 0 ? settings.pollMs : m_view.pollIntervalMs());
    m_view.setPollIntervalMs(INT_MAX);
    m_view.setMaxTokens(settings.historyTokens);
    m_view.resize(settings.width, settings.height);
    m_view.setWindowTitle("bench-visualizer");
    m_frame.setTimerType(Qt::PreciseTimer);
    m_frame.setInterval(settings.frameMs);
    QObject::connect(&m_frame, &QTimer::timeout, &m_view, [this] { m_view.update(); });
    QObject::connect(&m_poll, &QTimer::timeout, &m_view, [this] { poll(); });
    m_probe.setTimerType(Qt::PreciseTimer);
    m_probe.setInterval(1);
    QObject::connect(&m_probe, &QTimer::timeout, &m_view, [this] { probe(); });
}

LiveViewBench::~LiveViewBench()
{
    m_thread.quit();
    m_thread.wait();
}

QString LiveViewBench::prepare(const QString& modelPath,
                               std::shared_ptr<const plan::PlanResult> plan)
{
    QString text;
    QEventLoop loop;
    auto done = [&](const QString& t) { text = t; loop.quit(); };
    auto fail = [&](const QString& why) { m_error = why; loop.quit(); };
    const QMetaObject::Connection connections[] = {
        QObject::connect(m_worker, &ui::GenerationWorker::modelLoaded, &loop, done),
        QObject::connect(m_worker, &ui::GenerationWorker::planApplied, &loop, done),
        QObject::connect(m_worker, &ui::GenerationWorker::failed, &loop, fail),
    };
    QMetaObject::invokeMethod(m_worker, [w = m_worker, modelPath] { w->loadModel(modelPath); },
                              Qt::QueuedConnection);
    loop.exec();
    if (m_error.isEmpty()) {
        ui::TuningPrediction prediction;
        prediction.settings.threads = m_settings.threads;
        prediction.plan = std::move(plan);
        QMetaObject::invokeMethod(
            m_worker, [w = m_worker, prediction] { w->applyPlan(prediction); },
            Qt::QueuedConnection);
        loop.exec();
    }
    for (const auto& c : connections) QObject::disconnect(c);
    return text.section(QStringLiteral(" — "), 0, 0);  // without "plan applied: …"
}

Run LiveViewBench::run(bool live, int tokens)
{
    m_run = Run{};
    m_run.live = live;
    m_windowOpen = false;
    m_lastProbeMs = 0;
    m_view.recording = false;
    m_view.forget();
    m_recorder.clear();  // nothing drains it between runs: safe on this thread
    if (live) {
        m_view.setRecorder(&m_recorder);
        m_view.show();
        if (m_settings.frameMs > 0) m_frame.start();
        m_poll.start();
    }
    m_probe.start();

    QEventLoop loop;
    const QMetaObject::Connection connections[] = {
        QObject::connect(m_worker, &ui::GenerationWorker::finished, &loop,
                         [&](double tokensPerSecond, double ttftMs, int n) {
                             m_run.tokensPerSecond = tokensPerSecond;
                             m_run.ttftMs = ttftMs;
                             m_run.tokens = n;
                             loop.quit();
                         }),
        QObject::connect(m_worker, &ui::GenerationWorker::failed, &loop,
                         [&](const QString& why) { m_error = why; loop.quit(); }),
        // The chat window would append this text; here it is only counted. The first text
        // means the prompt is done: decoding, the window measured, begins.
        QObject::connect(m_worker, &ui::GenerationWorker::tokens, &loop,
                         [this](const QString& text) {
                             m_textChars += text.size();
                             if (m_windowOpen) return;
                             m_windowOpen = true;
                             m_run.windowStartMs = nowMs();
                             m_view.recording = m_run.live;
                         }),
    };
    ui::MessageItem prompt;
    prompt.role = QStringLiteral("user");
    prompt.content = QStringLiteral("Once upon a time");
    const QVector<ui::MessageItem> conversation{prompt};
    m_worker->clearStop();
    QMetaObject::invokeMethod(
        m_worker, [w = m_worker, conversation, tokens] { w->generate(conversation, tokens, 0.0); },
        Qt::QueuedConnection);
    loop.exec();
    m_run.windowEndMs = nowMs();
    for (const auto& c : connections) QObject::disconnect(c);

    m_probe.stop();
    m_frame.stop();
    m_poll.stop();
    if (!m_windowOpen) m_run.windowStartMs = m_run.windowEndMs;
    m_run.spansRecorded = m_recorder.recorded();
    if (live) {
        m_view.recording = false;
        m_run.paintStartMs = m_view.paintStartMs;
        m_run.paintMs = m_view.paintMs;
        m_run.paintCpuMs = m_view.paintCpuMs;
        m_run.updateMs = m_view.updateMs;
        m_run.spanToScreenMs = m_view.spanToScreenMs;
        for (size_t l = 0; l < trace::kLaneCount; ++l)
            m_run.spansDrawnLastFrame += size_t(m_view.paintedSpanCount(trace::Lane(l)));
        m_run.spansLost = m_recorder.dropped();
        m_view.setRecorder(nullptr);
        m_view.hide();
    }
    QCoreApplication::processEvents();  // let the hide settle before the next run
    return m_run;
}

// Every 1 ms: how late is this tick (inside the window)?
void LiveViewBench::probe()
{
    const double now = nowMs();
    if (m_windowOpen && m_lastProbeMs > 0) m_run.lateMs.push_back(now - m_lastProbeMs - 1.0);
    m_lastProbeMs = now;
}

void LiveViewBench::poll()
{
    const double t0 = nowMs(), c0 = threadCpuMs();
    const size_t arrived = m_view.pollRecorder();
    if (!m_windowOpen) return;
    m_run.pollMs.push_back(nowMs() - t0);
    m_run.pollCpuMs.push_back(threadCpuMs() - c0);
    m_run.spansDrained += arrived;
    // The drained spans are the newest ones the view keeps (appended in write order).
    const auto& shown = m_view.spans();
    for (size_t i = shown.size() - std::min(arrived, shown.size()); i < shown.size(); ++i)
        m_view.drainedEndMs.push_back(static_cast<double>(shown[i].endNs) / 1e6);
    m_run.maxSpansShown = std::max(m_run.maxSpansShown, m_view.spans().size());
}

}  // namespace spillway::bench
