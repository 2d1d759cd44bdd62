#pragma once
// bench-visualizer's harness: a GenerationWorker on its own "inference" thread, recording spans
// into a trace::Recorder, and on the GUI thread a live BottleneckView repainted on a timer, with
// stopwatches around what the GUI thread does for it. One generation per run(); the view is
// either live (drained, shown, repainted) or hidden (the worker records, nothing draws).

#include <QString>
#include <QThread>
#include <QTimer>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"
#include "core/trace/trace.h"
#include "ui/bottleneck_view.h"

namespace spillway::plan {
struct PlanResult;  // planner.h has a member named `slots`, a Qt macro: not included here
}
namespace spillway::ui {
class GenerationWorker;
}

namespace spillway::bench {

double nowMs();        // the spans' clock (trace::nowNs), ms
double threadCpuMs();  // CPU time of the calling thread, ms

struct LiveViewSettings {
    int threads = 0;            // engine threads; 0: one per core (as the app)
    int width = 1200, height = 400;
    int historyTokens = 8;      // tokens of span history the view keeps
    int frameMs = 16;           // update() forced this often; 0: never (the view repaints itself
                                // after each drain that brought spans, as in the app)
    int pollMs = 0;             // recorder drained this often; 0: the view's own interval
};

// What one generation measured, inside its decoding window: from the first text the worker
// sends (the prompt is done) to its finished signal. Times in ms on the GUI thread.
struct Run {
    bool live = false;
    double tokensPerSecond = 0, ttftMs = 0;  // the worker's own figures (decode only)
    int tokens = 0;
    double windowStartMs = 0, windowEndMs = 0;
    uint64_t spansRecorded = 0, spansDrained = 0, spansLost = 0;
    size_t maxSpansShown = 0, spansDrawnLastFrame = 0;
    std::vector<double> paintStartMs;           // when each paintEvent began
    std::vector<double> paintMs, paintCpuMs;    // paintEvent: wall time, GUI-thread CPU time
    std::vector<double> updateMs;               // the window's whole update: paint + backing store
    std::vector<double> pollMs, pollCpuMs;      // BottleneckView::pollRecorder: drain + reindex
    std::vector<double> spanToScreenMs;         // a span's end .. the start of the first paint
                                                // after the drain that brought it
    std::vector<double> lateMs;                 // lateness of each tick of a 1 ms timer

    double windowMs() const { return windowEndMs - windowStartMs; }
    std::vector<double> frameIntervalsMs() const;
    // Fewest frames painted in any 1 s stretch of the window (-1 when the window is shorter).
    int worstSecondFrames() const;
};

// The view under test, unchanged, with a stopwatch around its paint events and around the
// whole update of its window (Qt delivers a window's repaint as QEvent::UpdateRequest: paint
// into the backing store, then flush). Records only while `recording`.
class MeasuredView : public ui::BottleneckView {
public:
    bool recording = false;
    std::vector<double> paintStartMs, paintMs, paintCpuMs, updateMs;
    std::vector<double> drainedEndMs;    // ends of spans drained since the last paint
    std::vector<double> spanToScreenMs;
    void forget();

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;
};

class LiveViewBench {
public:
    // `recorder` must outlive this object.
    LiveViewBench(const LiveViewSettings& settings, trace::Recorder& recorder);
    ~LiveViewBench();

    // Loads the model and applies the plan (its placement) on the worker's thread; returns the
    // worker's description of model and device. On failure error() says why.
    QString prepare(const QString& modelPath, std::shared_ptr<const plan::PlanResult> plan);
    QString error() const { return m_error; }

    // One generation of `tokens` new tokens with the view live or hidden.
    Run run(bool live, int tokens);

    int pollIntervalMs() const { return m_poll.interval(); }

    // The view as the last live run left it (its spans stay after the recorder is unset).
    Status exportPng(const QString& path) { return m_view.exportPng(path); }

private:
    void probe();
    void poll();

    LiveViewSettings m_settings;
    trace::Recorder& m_recorder;
    QThread m_thread;
    ui::GenerationWorker* m_worker = nullptr;  // lives on m_thread, deleted when it ends
    MeasuredView m_view;
    QTimer m_frame, m_poll, m_probe;
    Run m_run;
    bool m_windowOpen = false;
    double m_lastProbeMs = 0;
    qint64 m_textChars = 0;
    QString m_error;
};

}  // namespace spillway::bench
