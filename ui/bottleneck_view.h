#pragma once
// The bottleneck visualizer (issue 6): one lane per stage of the token path (SSD read,
// host→device, decompress, device compute, CPU compute, stall) with a span per layer for the
// last N tokens, a header with the headline bottleneck in one sentence, per-lane utilization and
// measured next to predicted milliseconds per token. Pan by dragging, zoom with the wheel around
// the cursor, double-click to fit; hovering a span shows its layer, op, bytes, duration and GB/s.
//
// Live: setRecorder() polls the engine's trace ring on a GUI-thread timer (never a signal per
// span) and keeps the last maxTokens() tokens. Recorded: setSpans() shows a whole trace.
// Painting touches only the spans inside the visible time range, and merges spans narrower than
// a pixel, so a frame stays cheap however long the history is.

#include <QString>
#include <QStringList>
#include <QWidget>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "core/trace/trace.h"
#include "ui/bottleneck_stats.h"

class QTimer;
class QToolButton;

namespace spillway::plan {
// core/plan/planner.h is not included here: it has a member named `slots`, which Qt defines
// as a macro. Include planner.h before any Qt header where the overload below is called.
struct PlanResult;
}  // namespace spillway::plan

namespace spillway::ui {

class BottleneckView : public QWidget {
    Q_OBJECT
public:
    // A stretch of the span clock (trace::nowNs()), in ns.
    struct TimeRange {
        double beginNs = 0;
        double endNs = 0;
        double lengthNs() const { return endNs - beginNs; }
    };

    explicit BottleneckView(QWidget* parent = nullptr);
    ~BottleneckView() override;

    // Live mode. The recorder is not owned and must outlive this view (or be unset with null
    // first). Spans are drained every pollIntervalMs() on the GUI thread; the view takes over
    // the recorder's single-drainer role, so nothing else may drain() it, and clear() belongs
    // on the GUI thread too (snapshot() from anywhere is fine). A drop in token ids (a new
    // session counts from 0 again) starts a fresh history. Null stops polling, keeps the view.
    void setRecorder(trace::Recorder* recorder);
    trace::Recorder* recorder() const { return m_recorder; }
    void setPollIntervalMs(int ms);
    int pollIntervalMs() const;
    // Tokens of history kept in live mode (at least 1; default 64): the headline, the lanes'
    // figures and the exports cover them all; following, the view shows the newest
    // followTokens() of them (zoom out or fit for the rest).
    void setMaxTokens(int tokens);
    int maxTokens() const { return m_maxTokens; }
    static constexpr int followTokens() { return 8; }
    // Drains the recorder now (what the timer does); returns how many spans arrived.
    size_t pollRecorder();
    // A reply starts (live mode): the history starts afresh with its spans (earlier replies' are
    // gone, and the time between replies never counts as a token's), and the view follows it.
    void beginReply();
    // The reply ended: its decode speed as the status line counts it (the generator's own clock),
    // which the header's "overall" figure shows from then on.
    void finishReply(double tokensPerSecond);
    // While the user zooms or pans a live view, the view holds still: new spans wait (the
    // header says so) until fitToData() (double-click) follows the reply again.
    bool isPaused() const { return m_live && !m_follow; }
    // The time axis' labels of the last paint, left to right.
    const QStringList& axisLabels() const { return m_axisLabels; }

    // Recorded mode: shows every given span (no token limit) and fits the view to them.
    void setSpans(std::vector<trace::Span> spans);
    const std::vector<trace::Span>& spans() const { return m_spans; }
    void clear();

    // The planner's per-token prediction, shown beside the measurement. secondsPerToken is the
    // pipeline's whole-token time (0 = not shown).
    void setPrediction(std::span<const trace::LanePrediction> lanes, double secondsPerToken = 0);
    void setPrediction(const plan::PlanResult& plan);  // its lanes and secondsPerToken
    double predictedMsPerToken(trace::Lane lane) const;  // < 0 when not predicted
    void clearPrediction();

    // The device that computes is the host's CPU (a machine without a usable GPU, or the CPU
    // chosen): the device's lane reads "CPU compute" and the CPU lane, which counts the CPU's
    // work beside a GPU (split rows, cold neurons), "CPU beside GPU".
    void setComputeOnHost(bool host);
    bool computeOnHost() const { return m_computeOnHost; }
    // The model answering runs on a remote endpoint (`where`: its host; "" : local again): the
    // local timeline is cleared and the header says so, with the last reply's figures over the
    // network (setRemoteReply).
    void setRemote(const QString& where);
    QString remote() const { return m_remote; }
    void setRemoteReply(double timeToFirstTokenMs, double tokensPerSecond, int tokens);
    QString laneLabel(trace::Lane lane) const;
    // The header's second line: the breakdown, the tokens shown, ms/token in the engine's spans
    // and overall (what the status line's tokens/s counts), lost spans.
    QString detailLine() const;
    // "71% of each token waits on SSD reads"; empty-trace text when nothing was recorded.
    QString headline() const { return m_headline; }
    // "SSD read 61%, host→device 12%, compute 20%, stalls 7%" over the shown tokens.
    QString breakdown() const { return m_breakdown; }
    // Busy fraction of each token's wall time (0..1), and busy ms per token.
    double utilization(trace::Lane lane) const;
    double measuredMsPerToken(trace::Lane lane) const;

    // View control (what the mouse does, callable from code and tests).
    TimeRange visibleRange() const;
    TimeRange dataRange() const;  // earliest start .. latest end of the shown spans
    // factor < 1 zooms in. The time under widget x coordinate anchorX stays where it is.
    void zoomBy(double factor, double anchorX);
    void panByPixels(double dx);  // positive moves the content right (earlier times come in)
    void fitToData();             // also resumes following new spans in live mode
    bool isFollowing() const { return m_follow; }

    // Geometry of the plot, for tests and tools.
    QRectF laneRect(trace::Lane lane) const;
    // Widget x coordinate of a time on the span clock (ns), under the current view.
    double xForTime(double timeNs) const;

    // "layer 3 · read · 4.00 MiB · 1.52 ms · 2.76 GB/s · token 7" for the span under `pos`
    // (the shortest one when several overlap), empty when there is none.
    QString spanInfoAt(QPoint pos) const;

    // Spans inside the visible range drawn by the last paint (merged ones included), per lane.
    int paintedSpanCount(trace::Lane lane) const;
    double lastPaintMs() const { return m_lastPaintMs; }

    // The cache strip below the time axis, shown when a neuron cache or (a mixture of experts)
    // an expert cache ran: one cell per layer, coloured by its hit rate over the shown tokens,
    // with what it loaded per token (bytes; experts).
    const std::vector<CacheLayerStats>& cacheLayers() const { return m_cacheLayers; }
    bool cacheStripShowsExperts() const { return m_cacheExperts; }
    QRectF cacheStripRect() const;  // empty when there is no strip
    // "layer 3 · hit rate 92.1% (… resident) · 12.0 KiB loaded per token" (the neuron cache), or
    // "layer 3 · hit rate 62.5% (5 of 8 chosen experts in a slot) · 0.38 experts missed per token
    // · 1.50 MiB read per token" (the expert cache), for the cell under `pos`, else empty.
    QString cacheStripInfoAt(QPoint pos) const;
    // "SSD read · busy 60% · 0.58 ms per token measured · 0.06 predicted" for the lane whose
    // gutter (left of the plot) is under `pos`, else empty: the figures a short lane cannot show.
    QString laneInfoAt(QPoint pos) const;
    // Chrome trace event JSON of the shown spans (chrome://tracing, Perfetto).
    Status exportChromeTrace(const QString& path) const;
    // The widget as it looks now, as a PNG; written atomically (QSaveFile).
    Status exportPng(const QString& path);

    QSize sizeHint() const override { return {960, 360}; }
    QSize minimumSizeHint() const override { return {420, 220}; }

signals:
    // After new spans arrived or the shown trace changed (headline and stats updated).
    void traceChanged();
    // The header's Export menu: a Chrome trace (json) or a PNG of what is shown.
    void exportRequested(bool chromeTrace);

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    struct LaneView {
        std::vector<uint32_t> order;  // indexes into m_spans of this lane's spans, by start time
        uint64_t longestNs = 0;       // longest span, bounds the backward search when culling
        double predictedMs = -1;      // < 0: no prediction
        int painted = 0;
    };

    void rebuildIndex();   // lanes, data range, token boundaries, headline (on data change)
    void trimToMaxTokens();
    void ingest(const std::vector<trace::Span>& spans);  // new spans into the history
    void updateHeadline();  // headline, breakdown and the accessible description, from m_stats
    void applyFollow();
    QRectF plotRect() const;
    int headerHeight() const;
    int cacheStripHeight() const;  // 0 without a strip
    double nsPerPixel() const;
    const trace::Span* spanAt(QPoint pos) const;

    trace::Recorder* m_recorder = nullptr;
    QTimer* m_timer = nullptr;
    std::vector<trace::Span> m_drained;  // reused drain buffer
    std::vector<trace::Span> m_spans;    // the shown history
    std::vector<trace::Span> m_waiting;  // spans that arrived while the view was paused
    uint64_t m_replyStartNs = 0;         // live: spans before the reply began are not shown
    double m_replyTokensPerSecond = 0;   // the finished reply's decode speed (0: none yet)
    QStringList m_axisLabels;
    QToolButton* m_export = nullptr;
    uint32_t m_newestToken = 0;
    int m_maxTokens = 64;
    bool m_computeOnHost = false;
    QString m_remote;       // the remote endpoint's host, or ""
    QString m_remoteReply;  // the last remote reply's figures
    bool m_live = false;

    std::array<LaneView, trace::kLaneCount> m_lanes;
    TokenStats m_stats;
    std::vector<CacheLayerStats> m_cacheLayers;
    bool m_cacheExperts = false;  // the strip is the expert cache's
    uint64_t m_dropped = 0;  // the recorder's lost spans, shown as a warning
    uint64_t m_dataBeginNs = 0, m_dataEndNs = 0;
    uint64_t m_followBeginNs = 0;  // the earliest start among the newest followTokens() tokens
    double m_viewBeginNs = 0, m_viewEndNs = 0;  // absolute span clock
    bool m_follow = true;

    std::vector<trace::LanePrediction> m_prediction;
    double m_predictedSecondsPerToken = 0;
    QString m_headline;
    QString m_breakdown;

    bool m_dragging = false;
    QPoint m_dragLast;
    double m_lastPaintMs = 0;
    std::vector<QRectF> m_thinRects;  // reused per paint: merged sub-3 px spans of one lane
    std::vector<QRectF> m_wideRects;  // reused per paint: spans drawn one by one, outlined
    std::vector<uint32_t> m_wideSpans;  // parallel to m_wideRects: indexes into m_spans
};

}  // namespace spillway::ui
