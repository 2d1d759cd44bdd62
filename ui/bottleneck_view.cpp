// BottleneckView: data, view control and interaction. Painting is in bottleneck_view_paint.cpp.

// planner.h first: it names a member `slots`, a macro once Qt's headers are in.
#include "core/plan/planner.h"
#include "bottleneck_view.h"
#include "readable.h"

#include <QHelpEvent>
#include <QImage>
#include <QMenu>
#include <QResizeEvent>
#include <QToolButton>
#include <QMouseEvent>
#include <QSaveFile>
#include <QTimer>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace spillway::ui {

using trace::Lane;

namespace {

constexpr double kMinVisibleNs = 1'000;  // zooming stops at 1 µs across the plot
constexpr double kFitMargin = 0.02;      // of the data range, each side
constexpr int kHoverTolerancePx = 2;     // a span this close to the cursor counts as under it

size_t laneIndex(Lane lane) { return static_cast<size_t>(lane); }

}  // namespace

BottleneckView::BottleneckView(QWidget* parent) : QWidget(parent)
{
    setObjectName("bottleneckView");
    setAttribute(Qt::WA_OpaquePaintEvent);  // paintEvent fills every pixel
    setFocusPolicy(Qt::WheelFocus);
    m_timer = new QTimer(this);
    // 60 Hz: pulls from the ring (no signal per span) and repaints when spans arrived, so a span
    // is on screen within a frame of its end. At 50 ms the live view refreshed at under 20
    // frames/s, below the 30 the visualizer must keep (tests/bench/RESULTS.md).
    m_timer->setInterval(16);
    connect(m_timer, &QTimer::timeout, this, [this] { pollRecorder(); });
    setAccessibleName(tr("Bottleneck timeline"));
    // Export, where it is seen: a button at the header's right (also the right-click menu).
    m_export = new QToolButton(this);
    m_export->setObjectName("exportTimeline");
    m_export->setText(tr("Export"));
    m_export->setToolTip(tr("Save what the timeline shows: a Chrome trace (Perfetto, chrome://tracing) or a PNG"));
    m_export->setPopupMode(QToolButton::InstantPopup);
    m_export->setAutoRaise(true);
    auto* menu = new QMenu(m_export);
    menu->addAction(tr("Chrome trace (JSON)…"), this, [this] { emit exportRequested(true); });
    menu->addAction(tr("Picture (PNG)…"), this, [this] { emit exportRequested(false); });
    m_export->setMenu(menu);
    updateHeadline();
}

void BottleneckView::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    const QSize hint = m_export->sizeHint();
    m_export->setGeometry(width() - hint.width() - 6, 4, hint.width(), hint.height());
}

BottleneckView::~BottleneckView() = default;

// ---- data --------------------------------------------------------------------------------

void BottleneckView::setRecorder(trace::Recorder* recorder)
{
    m_recorder = recorder;
    m_live = recorder != nullptr;
    if (!recorder) {
        m_timer->stop();
        return;
    }
    m_spans.clear();
    m_dropped = 0;
    m_follow = true;
    rebuildIndex();
    m_timer->start();
    update();
}

void BottleneckView::setPollIntervalMs(int ms) { m_timer->setInterval(std::max(1, ms)); }

int BottleneckView::pollIntervalMs() const { return m_timer->interval(); }

void BottleneckView::setComputeOnHost(bool host)
{
    if (host == m_computeOnHost) return;
    m_computeOnHost = host;
    updateHeadline();  // it names the compute's side
    update();
    emit traceChanged();
}

void BottleneckView::setRemote(const QString& where)
{
    if (where == m_remote) return;
    m_remote = where;
    m_remoteReply.clear();
    clear();  // the local spans were another model's
    updateHeadline();
    update();
    emit traceChanged();
}

void BottleneckView::setRemoteReply(double timeToFirstTokenMs, double tokensPerSecond, int tokens)
{
    if (m_remote.isEmpty()) return;
    m_remoteReply = tr("Last reply over the network: time to first token %1 ms, %2 tokens/s (%n token(s))", nullptr, tokens)
                        .arg(timeToFirstTokenMs, 0, 'f', 0)
                        .arg(readable(tokensPerSecond));
    updateHeadline();
    update();
    emit traceChanged();
}

void BottleneckView::updateHeadline()
{
    if (!m_remote.isEmpty()) {
        m_headline = tr("Compute is remote: %1 runs the model; its transfers and compute are on that machine").arg(m_remote);
        m_breakdown.clear();
        const QString detail = detailLine();
        setAccessibleDescription(m_headline + QStringLiteral(". ") + detail);
        return;
    }
    m_headline = headlineFor(m_stats.total, m_computeOnHost);
    m_breakdown = m_stats.total.tokens > 0 ? QString::fromStdString(m_stats.total.text()) : QString();
    // What a screen reader says of the painted timeline: its headline and breakdown in words.
    const QString detail = detailLine();
    setAccessibleDescription(detail.isEmpty() ? m_headline : m_headline + QStringLiteral(". ") + detail);
}

QString BottleneckView::detailLine() const
{
    if (!m_remote.isEmpty()) return m_remoteReply.isEmpty() ? tr("No reply from it yet") : m_remoteReply;
    QString detail = m_breakdown;
    const trace::Summary& total = m_stats.total;
    if (total.tokens > 0) {
        detail += tr(" · %n token(s), %1 ms/token in the engine's spans", nullptr, static_cast<int>(total.tokens))
                      .arg(total.nsPerToken / 1e6, 0, 'f', 2);
        if (m_predictedSecondsPerToken > 0)
            detail += tr(" (predicted %1)").arg(m_predictedSecondsPerToken * 1e3, 0, 'f', 2);
        // What the status line's tokens/s counts: the spans and what passes between them; once
        // the reply ended, the reply's own figure.
        if (m_replyTokensPerSecond > 0)
            detail += tr(", %1 ms/token overall (%2 tokens/s)")
                          .arg(1e3 / m_replyTokensPerSecond, 0, 'f', 2)
                          .arg(readable(m_replyTokensPerSecond));
        else if (m_stats.wallNsPerToken > 0)
            detail += tr(", %1 ms/token overall (%2 tokens/s)")
                          .arg(m_stats.wallNsPerToken / 1e6, 0, 'f', 2)
                          .arg(readable(1e9 / m_stats.wallNsPerToken));
    }
    if (isPaused())
        detail += m_waiting.empty() ? tr(" · paused: double-click to follow the reply")
                                    : tr(" · paused (%n new span(s) waiting): double-click to follow the reply", nullptr,
                                         int(std::min<size_t>(m_waiting.size(), INT32_MAX)));
    if (m_dropped > 0) detail += tr(" · %n span(s) lost: the trace ring overflowed", nullptr,
                                    static_cast<int>(std::min<uint64_t>(m_dropped, INT32_MAX)));
    return detail;
}

QString BottleneckView::laneLabel(trace::Lane lane) const
{
    if (m_computeOnHost && lane == trace::Lane::DeviceCompute) return tr("CPU compute");
    if (m_computeOnHost && lane == trace::Lane::CpuCompute) return tr("CPU beside GPU");
    return QString::fromUtf8(trace::laneName(lane));
}

void BottleneckView::setMaxTokens(int tokens)
{
    m_maxTokens = std::max(1, tokens);
    if (!m_live) return;
    trimToMaxTokens();
    rebuildIndex();
    update();
}

size_t BottleneckView::pollRecorder()
{
    if (!m_recorder) return 0;
    m_drained.clear();
    const size_t arrived = m_recorder->drain(m_drained);
    const uint64_t dropped = m_recorder->dropped();
    if (arrived == 0 && dropped == m_dropped) return 0;
    m_dropped = dropped;
    // Spans of before the reply (a loader's, another session's) are not the reply's.
    if (m_replyStartNs > 0)
        std::erase_if(m_drained, [this](const trace::Span& s) { return s.startNs < m_replyStartNs; });
    // A new generation (token ids start again) makes what the user looks at old news: it follows.
    if (isPaused() && !m_drained.empty() && !m_spans.empty() && m_drained.front().token + 1 < m_newestToken &&
        (m_waiting.empty() || m_drained.front().token + 1 < m_waiting.back().token)) {
        m_waiting.clear();
        m_follow = true;
    }
    if (isPaused()) {
        // The user is looking at what is shown: it holds still; the newest spans wait, as many
        // tokens of them as the view keeps.
        m_waiting.insert(m_waiting.end(), m_drained.begin(), m_drained.end());
        if (!m_waiting.empty()) {
            const uint32_t newest = m_waiting.back().token;
            const uint32_t keep = static_cast<uint32_t>(m_maxTokens);
            if (newest >= 4 * keep) {
                const uint32_t oldest = newest - keep + 1;
                std::erase_if(m_waiting, [oldest](const trace::Span& s) { return s.token < oldest; });
            }
        }
        updateHeadline();
        update();
        return arrived;
    }
    ingest(m_drained);
    update();
    emit traceChanged();
    return arrived;
}

void BottleneckView::ingest(const std::vector<trace::Span>& spans)
{
    for (const trace::Span& s : spans) {
        // Spans come in write order, and the session tags them with its forward-call count, so
        // token ids only grow (give or take one where a loader span races the count). A clear
        // drop means a new session or generation started: its tokens replace the old ones.
        if (m_spans.empty() || s.token + 1 < m_newestToken) {
            if (!m_spans.empty()) m_spans.clear();
            m_newestToken = s.token;
            m_follow = true;  // a zoom or pan on the old tokens does not carry over to new ones
        }
        m_newestToken = std::max(m_newestToken, s.token);
        m_spans.push_back(s);
    }
    trimToMaxTokens();
    rebuildIndex();
}

void BottleneckView::beginReply()
{
    if (!m_live) return;
    if (m_recorder) pollRecorder();  // what came before is the last reply's
    m_replyStartNs = trace::nowNs();
    m_replyTokensPerSecond = 0;
    m_waiting.clear();
    m_spans.clear();
    m_follow = true;
    rebuildIndex();
    update();
    emit traceChanged();
}

void BottleneckView::finishReply(double tokensPerSecond)
{
    if (m_recorder) pollRecorder();
    m_replyTokensPerSecond = tokensPerSecond;
    updateHeadline();
    update();
    emit traceChanged();
}

void BottleneckView::trimToMaxTokens()
{
    if (m_spans.empty()) return;
    const uint32_t keep = static_cast<uint32_t>(m_maxTokens);
    const uint32_t oldest = m_newestToken >= keep ? m_newestToken - keep + 1 : 0;
    std::erase_if(m_spans, [oldest](const trace::Span& s) { return s.token < oldest; });
}

void BottleneckView::setSpans(std::vector<trace::Span> spans)
{
    setRecorder(nullptr);
    m_spans = std::move(spans);
    m_dropped = 0;
    m_follow = true;
    rebuildIndex();
    update();
    emit traceChanged();
}

void BottleneckView::clear()
{
    m_spans.clear();
    m_waiting.clear();
    m_dropped = 0;
    m_follow = true;
    m_replyTokensPerSecond = 0;
    rebuildIndex();
    update();
    emit traceChanged();
}

void BottleneckView::rebuildIndex()
{
    for (LaneView& lane : m_lanes) {
        lane.order.clear();
        lane.longestNs = 0;
    }
    m_dataBeginNs = m_spans.empty() ? 0 : m_spans.front().startNs;
    m_dataEndNs = m_dataBeginNs;
    const uint32_t followFrom = m_newestToken >= uint32_t(followTokens()) ? m_newestToken - followTokens() + 1 : 0;
    m_followBeginNs = UINT64_MAX;
    for (size_t i = 0; i < m_spans.size(); ++i) {
        const trace::Span& s = m_spans[i];
        if (static_cast<size_t>(s.lane) >= trace::kLaneCount) continue;
        const uint64_t end = std::max(s.startNs, s.endNs);
        LaneView& lane = m_lanes[laneIndex(s.lane)];
        lane.order.push_back(static_cast<uint32_t>(i));
        lane.longestNs = std::max(lane.longestNs, end - s.startNs);
        m_dataBeginNs = std::min(m_dataBeginNs, s.startNs);
        m_dataEndNs = std::max(m_dataEndNs, end);
        if (!m_live || s.token >= followFrom) m_followBeginNs = std::min(m_followBeginNs, s.startNs);
    }
    m_followBeginNs = std::min(m_followBeginNs, m_dataEndNs);
    for (LaneView& lane : m_lanes)
        std::sort(lane.order.begin(), lane.order.end(), [this](uint32_t a, uint32_t b) {
            return m_spans[a].startNs < m_spans[b].startNs;
        });
    m_stats = computeTokenStats(m_spans);
    m_cacheLayers = computeCacheStats(m_spans, trace::kNeuronBundlesOp);
    m_cacheExperts = m_cacheLayers.empty();
    if (m_cacheExperts) m_cacheLayers = computeCacheStats(m_spans, trace::kExpertsOp);
    updateHeadline();
    applyFollow();
}

void BottleneckView::setPrediction(std::span<const trace::LanePrediction> lanes,
                                   double secondsPerToken)
{
    m_prediction.assign(lanes.begin(), lanes.end());
    m_predictedSecondsPerToken = secondsPerToken;
    for (LaneView& lane : m_lanes) lane.predictedMs = -1;
    for (const trace::LanePrediction& p : m_prediction)
        if (laneIndex(p.lane) < trace::kLaneCount)
            m_lanes[laneIndex(p.lane)].predictedMs = p.seconds * 1e3;
    update();
}

void BottleneckView::setPrediction(const plan::PlanResult& plan)
{
    const trace::LanePrediction lanes[] = {
        {Lane::SsdRead, plan.lanes.ssdRead},
        {Lane::HostToDevice, plan.lanes.hostToDevice},
        {Lane::Decompress, plan.lanes.decompress},
        {Lane::DeviceCompute, plan.lanes.deviceCompute},
        {Lane::CpuCompute, plan.lanes.cpuCompute},
    };
    setPrediction(lanes, plan.secondsPerToken);
}

void BottleneckView::clearPrediction() { setPrediction({}, 0); }

double BottleneckView::utilization(Lane lane) const
{
    return laneIndex(lane) < trace::kLaneCount ? m_stats.total.lane(lane).busyFraction : 0;
}

double BottleneckView::measuredMsPerToken(Lane lane) const
{
    if (laneIndex(lane) >= trace::kLaneCount || m_stats.total.tokens == 0) return 0;
    return static_cast<double>(m_stats.total.lane(lane).busyNs) / 1e6 / m_stats.total.tokens;
}

double BottleneckView::predictedMsPerToken(Lane lane) const
{
    return laneIndex(lane) < trace::kLaneCount ? m_lanes[laneIndex(lane)].predictedMs : -1;
}

int BottleneckView::paintedSpanCount(Lane lane) const
{
    return laneIndex(lane) < trace::kLaneCount ? m_lanes[laneIndex(lane)].painted : 0;
}

// ---- view control ------------------------------------------------------------------------

BottleneckView::TimeRange BottleneckView::visibleRange() const
{
    return {m_viewBeginNs, m_viewEndNs};
}

BottleneckView::TimeRange BottleneckView::dataRange() const
{
    return {static_cast<double>(m_dataBeginNs), static_cast<double>(m_dataEndNs)};
}

void BottleneckView::applyFollow()
{
    if (!m_follow) return;
    // Live: the newest followTokens() tokens; a recorded trace: all of it.
    const uint64_t begin = m_live ? m_followBeginNs : m_dataBeginNs;
    const double length = std::max(static_cast<double>(m_dataEndNs - begin), kMinVisibleNs);
    m_viewBeginNs = static_cast<double>(begin) - kFitMargin * length;
    m_viewEndNs = m_viewBeginNs + (1 + 2 * kFitMargin) * length;
}

void BottleneckView::fitToData()
{
    const bool resume = isPaused();
    m_follow = true;
    if (resume) {  // what arrived while paused joins the history
        std::vector<trace::Span> waiting;
        waiting.swap(m_waiting);
        ingest(waiting);
        emit traceChanged();
    }
    applyFollow();
    updateHeadline();
    update();
}

double BottleneckView::nsPerPixel() const
{
    return (m_viewEndNs - m_viewBeginNs) / std::max(1.0, plotRect().width());
}

double BottleneckView::xForTime(double timeNs) const
{
    const QRectF plot = plotRect();
    return plot.left() + (timeNs - m_viewBeginNs) / nsPerPixel();
}

void BottleneckView::zoomBy(double factor, double anchorX)
{
    if (!(factor > 0)) return;
    const QRectF plot = plotRect();
    const double fraction =
        std::clamp((anchorX - plot.left()) / std::max(1.0, plot.width()), 0.0, 1.0);
    const double length = m_viewEndNs - m_viewBeginNs;
    const double anchorNs = m_viewBeginNs + fraction * length;
    const double dataLength = static_cast<double>(m_dataEndNs - m_dataBeginNs);
    const double newLength =
        std::clamp(length * factor, kMinVisibleNs, std::max(4 * dataLength, 1e6));
    m_viewBeginNs = anchorNs - fraction * newLength;
    m_viewEndNs = m_viewBeginNs + newLength;
    m_follow = false;
    update();
}

void BottleneckView::panByPixels(double dx)
{
    const double shift = -dx * nsPerPixel();
    m_viewBeginNs += shift;
    m_viewEndNs += shift;
    m_follow = false;
    update();
}

// ---- hover -------------------------------------------------------------------------------

const trace::Span* BottleneckView::spanAt(QPoint pos) const
{
    for (size_t l = 0; l < trace::kLaneCount; ++l) {
        if (!laneRect(static_cast<Lane>(l)).contains(pos)) continue;
        const LaneView& lane = m_lanes[l];
        const double perPx = nsPerPixel();
        const double t = m_viewBeginNs + (pos.x() - plotRect().left()) * perPx;
        const double tolerance = kHoverTolerancePx * perPx;
        // Spans are painted at least 1 px wide: measure distance to that drawn extent.
        const double reach = tolerance + std::max(static_cast<double>(lane.longestNs), perPx);
        const auto from = std::partition_point(
            lane.order.begin(), lane.order.end(),
            [&](uint32_t i) { return static_cast<double>(m_spans[i].startNs) < t - reach; });
        const trace::Span* best = nullptr;
        double bestDistance = tolerance;
        uint64_t bestLength = 0;
        for (auto it = from; it != lane.order.end(); ++it) {
            const trace::Span& s = m_spans[*it];
            const double start = static_cast<double>(s.startNs);
            if (start > t + tolerance) break;
            const double end = std::max(static_cast<double>(s.endNs), start + perPx);
            const double distance = t < start ? start - t : (t > end ? t - end : 0);
            const uint64_t length = s.endNs > s.startNs ? s.endNs - s.startNs : 0;
            if (distance < bestDistance ||
                (distance == bestDistance && (!best || length < bestLength))) {
                best = &s;
                bestDistance = distance;
                bestLength = length;
            }
        }
        return best;
    }
    return nullptr;
}

QString BottleneckView::spanInfoAt(QPoint pos) const
{
    const trace::Span* s = spanAt(pos);
    if (!s) return {};
    const double ns = s->endNs > s->startNs ? static_cast<double>(s->endNs - s->startNs) : 0;
    // "CPU compute · layer 4 · whole layer · 1.52 ms · token 1517", with the bytes and the
    // rate where the span moved or touched any.
    const QString op = QString::fromUtf8(s->op);
    const QString what = op == QLatin1String("layer")          ? tr("whole layer")
                         : op == QLatin1String("prompt layer") ? tr("whole prompt layer (a batch of prompt tokens)")
                                                               : op;
    QStringList parts;
    parts << laneLabel(s->lane);
    if (s->layer >= 0) parts << tr("layer %1").arg(s->layer);
    parts << what;
    if (s->bytes > 0) {
        QString moved = formatBytes(s->bytes);
        if (ns > 0) moved += tr(" at %1 GB/s").arg(static_cast<double>(s->bytes) / ns, 0, 'f', 2);  // bytes/ns = GB/s
        parts << moved;
    }
    parts << formatDuration(ns);
    parts << tr("token %1").arg(s->token);
    return parts.join(QStringLiteral(" · "));
}

// ---- mouse -------------------------------------------------------------------------------

void BottleneckView::wheelEvent(QWheelEvent* event)
{
    const QPoint delta = event->angleDelta();
    if (delta.y() != 0) {
        // 120 = one notch; two notches halve the visible time.
        zoomBy(std::pow(2.0, -delta.y() / 240.0), event->position().x());
    } else if (delta.x() != 0) {
        panByPixels(delta.x() / 2.0);
    }
    event->accept();
}

void BottleneckView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton) return QWidget::mousePressEvent(event);
    m_dragging = true;
    m_dragLast = event->position().toPoint();
    setCursor(Qt::ClosedHandCursor);
    event->accept();
}

void BottleneckView::mouseMoveEvent(QMouseEvent* event)
{
    if (!m_dragging) return QWidget::mouseMoveEvent(event);
    const QPoint pos = event->position().toPoint();
    panByPixels(pos.x() - m_dragLast.x());
    m_dragLast = pos;
    event->accept();
}

void BottleneckView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton || !m_dragging) return QWidget::mouseReleaseEvent(event);
    m_dragging = false;
    unsetCursor();
    event->accept();
}

void BottleneckView::mouseDoubleClickEvent(QMouseEvent* event)
{
    fitToData();
    event->accept();
}

bool BottleneckView::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        QString text = spanInfoAt(help->pos());
        if (text.isEmpty()) text = cacheStripInfoAt(help->pos());
        if (text.isEmpty()) text = laneInfoAt(help->pos());
        if (text.isEmpty()) {
            QToolTip::hideText();
            event->ignore();
        } else {
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(event);
}

// ---- export ------------------------------------------------------------------------------

Status BottleneckView::exportChromeTrace(const QString& path) const
{
    return trace::writeChromeTrace(m_spans, path.toStdString());
}

Status BottleneckView::exportPng(const QString& path)
{
    const QImage image = grab().toImage();
    if (image.isNull())
        return makeError(ErrorCode::Internal, path.toStdString() + ": the view could not be drawn");
    QSaveFile file(path);
    auto ioError = [&](const QString& why) {
        return makeError(ErrorCode::Io, path.toStdString() + ": " + why.toStdString());
    };
    if (!file.open(QIODevice::WriteOnly)) return ioError(file.errorString());
    if (!image.save(&file, "PNG")) {
        file.cancelWriting();
        return ioError(QStringLiteral("cannot write the PNG"));
    }
    if (!file.commit()) return ioError(file.errorString());
    return {};
}

}  // namespace spillway::ui
