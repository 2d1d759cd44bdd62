// BottleneckView: layout and painting. One frame touches only the spans inside the visible time
// range (a binary search per lane, then a scan that stops past the right edge), and merges
// spans narrower than 3 px into runs, so the number of rectangles drawn is bounded by the
// plot's width in pixels, not by the number of spans.

#include <QElapsedTimer>
#include <QPaintEvent>
#include <QPainter>
#include <QToolButton>
#include <algorithm>
#include <cmath>

#include "bottleneck_view.h"


namespace spillway::ui {

using trace::Lane;

namespace {

constexpr int kMargin = 8;            // px around the header and the plot
constexpr int kMinWideSpanPx = 3;     // narrower spans are merged into runs
constexpr int kLabelMinSpanPx = 44;   // wide enough to write "L12 read" inside

QColor laneColor(Lane lane)
{
    switch (lane) {
    case Lane::SsdRead: return QColor(0xe0, 0x8a, 0x1e);
    case Lane::HostToDevice: return QColor(0x8e, 0x6b, 0xbf);
    case Lane::Decompress: return QColor(0x1f, 0x9e, 0x89);
    case Lane::DeviceCompute: return QColor(0x3a, 0x9a, 0x3a);
    case Lane::CpuCompute: return QColor(0x35, 0x72, 0xc6);
    case Lane::Stall: return QColor(0xc9, 0x4a, 0x4a);
    case Lane::Count: break;
    }
    return Qt::gray;
}

// A 1, 2 or 5 × 10^k step of at least `minimum` ns.
double niceStep(double minimum)
{
    const double decade = std::pow(10.0, std::floor(std::log10(std::max(minimum, 1.0))));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * decade >= minimum) return m * decade;
    return 10 * decade;
}

// A time axis label: `t` ns after the first span, with as many digits as the grid's `step` needs
// to tell neighbouring labels apart ("1.2345 s" where the step is 100 µs, not "1.23 s" for each).
QString axisLabel(double t, double step)
{
    if (t == 0) return QStringLiteral("0");
    struct Unit {
        double ns;
        const char* name;
    };
    static const Unit units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1, "ns"}};
    const Unit* unit = &units[3];
    for (const Unit& u : units)
        if (std::abs(t) >= u.ns) {
            unit = &u;
            break;
        }
    const double stepInUnit = step / unit->ns;
    const int decimals = stepInUnit >= 1 ? 0 : std::min(9, int(std::ceil(-std::log10(stepInUnit) - 1e-9)));
    return QStringLiteral("%1 %2").arg(t / unit->ns, 0, 'f', decimals).arg(QString::fromUtf8(unit->name));
}

}  // namespace

int BottleneckView::headerHeight() const
{
    QFont bold = font();
    bold.setBold(true);
    return kMargin + QFontMetrics(bold).height() + 2 + fontMetrics().height() + kMargin;
}

QRectF BottleneckView::plotRect() const
{
    const QFontMetrics fm = fontMetrics();
    const int gutter =
        std::max(170, fm.horizontalAdvance(tr("100.00 ms/tok · pred 100.00")) + 2 * kMargin);
    const int top = headerHeight() + fm.height();  // token labels above the lanes
    const int bottom = height() - fm.height() - 6 - cacheStripHeight();  // the time axis below
    return QRectF(gutter, top, std::max(1, width() - gutter - kMargin), std::max(1, bottom - top));
}

int BottleneckView::cacheStripHeight() const
{
    return m_cacheLayers.empty() ? 0 : 2 * fontMetrics().height() + 10;
}

QRectF BottleneckView::cacheStripRect() const
{
    const int h = cacheStripHeight();
    if (h == 0) return {};
    const QRectF plot = plotRect();
    return QRectF(plot.left(), height() - h + 4, plot.width(), h - 6);
}

namespace {

// Red (0%) through amber to green (100%).
QColor hitColor(double rate)
{
    const double t = std::clamp(rate, 0.0, 1.0);
    return QColor::fromHsvF(float(t * 0.33), 0.65f, 0.80f);
}

}  // namespace

QString BottleneckView::laneInfoAt(QPoint pos) const
{
    const QRectF plot = plotRect();
    if (pos.x() >= plot.left()) return {};
    for (size_t l = 0; l < trace::kLaneCount; ++l) {
        const Lane lane = static_cast<Lane>(l);
        const QRectF r = laneRect(lane);
        if (pos.y() < r.top() - 2 || pos.y() >= r.bottom() + 2) continue;
        QString text = tr("%1 · busy %2% · %3 ms per token measured")
                           .arg(laneLabel(lane))
                           .arg(std::lround(100 * utilization(lane)))
                           .arg(measuredMsPerToken(lane), 0, 'f', 2);
        if (m_lanes[l].predictedMs >= 0) text += tr(" · %1 predicted").arg(m_lanes[l].predictedMs, 0, 'f', 2);
        return text;
    }
    return {};
}

QString BottleneckView::cacheStripInfoAt(QPoint pos) const
{
    const QRectF r = cacheStripRect();
    if (r.isEmpty() || !r.contains(pos)) return {};
    const size_t n = m_cacheLayers.size();
    const size_t i = std::min(n - 1, size_t((pos.x() - r.left()) / r.width() * double(n)));
    const CacheLayerStats& l = m_cacheLayers[i];
    const double tokens = double(std::max<uint64_t>(1, m_stats.total.tokens));
    if (m_cacheExperts && l.lookups == 0)
        return tr("layer %1 · its experts are not served by the cache (resident on the device or in RAM)").arg(l.layer);
    if (m_cacheExperts)
        return tr("layer %1 · hit rate %2% (%3 of %4 chosen experts in a slot) · %5 experts missed per token · %6 "
                  "read per token")
            .arg(l.layer)
            .arg(100.0 * l.hitRate(), 0, 'f', 1)
            .arg(l.hits)
            .arg(l.lookups)
            .arg(double(l.lookups - l.hits) / tokens, 0, 'f', 2)
            .arg(formatBytes(uint64_t(double(l.bytes) / tokens)));
    return tr("layer %1 · hit rate %2% (%3 of %4 active neurons resident) · %5 loaded per token")
        .arg(l.layer)
        .arg(100.0 * l.hitRate(), 0, 'f', 1)
        .arg(l.hits)
        .arg(l.lookups)
        .arg(formatBytes(uint64_t(double(l.bytes) / tokens)));
}

QRectF BottleneckView::laneRect(Lane lane) const
{
    const QRectF plot = plotRect();
    const double laneHeight = plot.height() / trace::kLaneCount;
    const double top = plot.top() + static_cast<double>(lane) * laneHeight;
    return QRectF(plot.left(), top + 2, plot.width(), std::max(1.0, laneHeight - 4));
}

void BottleneckView::paintEvent(QPaintEvent*)
{
    QElapsedTimer timer;
    timer.start();
    QPainter p(this);
    const QPalette pal = palette();
    const QFontMetrics fm = fontMetrics();
    QFont bold = font();
    bold.setBold(true);
    p.fillRect(rect(), pal.color(QPalette::Base));

    // Header: the headline, then the breakdown and the whole-token time.
    const QRectF plot = plotRect();
    p.setPen(pal.color(QPalette::Text));
    p.setFont(bold);
    const int line1 = kMargin + QFontMetrics(bold).ascent();
    const int textWidth = std::max(40, width() - 2 * kMargin - (m_export->isVisible() ? m_export->width() + 4 : 0));
    p.drawText(kMargin, line1, QFontMetrics(bold).elidedText(m_headline, Qt::ElideRight, textWidth));
    p.setFont(font());
    const QString detail = detailLine();
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(kMargin, line1 + QFontMetrics(bold).descent() + 2 + fm.ascent(), fm.elidedText(detail, Qt::ElideRight, textWidth));

    // Lanes: stripes, and in the gutter the name, utilization, measured and predicted ms/token.
    for (size_t l = 0; l < trace::kLaneCount; ++l) {
        const Lane lane = static_cast<Lane>(l);
        const QRectF r = laneRect(lane);
        if (l % 2 == 0) p.fillRect(QRectF(0, r.top() - 2, width(), r.height() + 4),
                                   pal.color(QPalette::AlternateBase));
        p.fillRect(QRectF(kMargin, r.top() + 2, 4, r.height() - 4), laneColor(lane));
        const double textLeft = kMargin + 10;
        // Two lines (the name, then the times) where the lane is tall enough; where an expert
        // strip leaves less room, the name alone, so that no line runs into the next lane's.
        const bool twoLines = r.height() + 4 >= QFontMetrics(bold).height() + fm.height();
        const double nameBase = twoLines ? r.center().y() - 2 : r.center().y() + fm.ascent() / 2.0 - 1;
        p.setPen(pal.color(QPalette::Text));
        p.setFont(bold);
        p.drawText(QPointF(textLeft, nameBase), laneLabel(lane));
        p.setFont(font());
        const QString busy = tr("%1%").arg(std::lround(100 * utilization(lane)));
        p.drawText(QPointF(plot.left() - kMargin - fm.horizontalAdvance(busy), nameBase), busy);
        QString times = tr("%1 ms/tok").arg(measuredMsPerToken(lane), 0, 'f', 2);
        const double predicted = m_lanes[l].predictedMs;
        if (predicted >= 0) times += tr(" · pred %1").arg(predicted, 0, 'f', 2);
        p.setPen(pal.color(QPalette::PlaceholderText));
        if (twoLines) p.drawText(QPointF(textLeft, nameBase + fm.height()), times);
    }

    // Time axis and grid, labelled from the first span shown.
    const double perPx = nsPerPixel();
    const double step = niceStep(perPx * 110);
    const double origin = static_cast<double>(m_dataBeginNs);
    const QColor grid = pal.color(QPalette::Mid);
    p.setPen(grid);
    p.drawLine(QPointF(plot.left(), plot.bottom()), QPointF(plot.right(), plot.bottom()));
    m_axisLabels.clear();
    const double firstTick = std::ceil((m_viewBeginNs - origin) / step);
    for (double k = firstTick; origin + k * step <= m_viewEndNs; k += 1) {
        const double t = k * step;  // (a multiple, not a sum: no drift across many steps)
        const double x = xForTime(origin + t);
        p.setPen(grid);
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom() + 3));
        const QString label = axisLabel(t, step);
        if (x + 2 + fm.horizontalAdvance(label) > width()) continue;  // would be cut off
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QPointF(x + 2, plot.bottom() + 3 + fm.ascent()), label);
        m_axisLabels << label;
    }

    // Token boundaries.
    QPen tokenPen(pal.color(QPalette::Text), 1, Qt::DashLine);
    const auto& starts = m_stats.tokenStartsNs;
    double lastLabelEnd = -1e9;
    auto before = [](uint64_t s, double v) { return static_cast<double>(s) < v; };
    for (auto it = std::lower_bound(starts.begin(), starts.end(), m_viewBeginNs, before);
         it != starts.end() && static_cast<double>(*it) <= m_viewEndNs; ++it) {
        const double x = xForTime(static_cast<double>(*it));
        p.setPen(tokenPen);
        p.drawLine(QPointF(x, plot.top() - fm.height() + 2), QPointF(x, plot.bottom()));
        const QString label = tr("token %1").arg(m_stats.tokenIds[it - starts.begin()]);
        if (x > lastLabelEnd) {
            p.setPen(pal.color(QPalette::Text));
            p.drawText(QPointF(x + 3, plot.top() - fm.descent() - 1), label);
            lastLabelEnd = x + 3 + fm.horizontalAdvance(label) + 6;
        }
    }

    // Spans.
    p.save();
    p.setClipRect(plot.adjusted(0, -2, 0, 2));
    const double left = plot.left();
    for (size_t l = 0; l < trace::kLaneCount; ++l) {
        LaneView& lane = m_lanes[l];
        lane.painted = 0;
        m_thinRects.clear();
        m_wideRects.clear();
        m_wideSpans.clear();
        const QRectF r = laneRect(static_cast<Lane>(l));
        const double reach = std::max(static_cast<double>(lane.longestNs), perPx);
        auto it = std::partition_point(lane.order.begin(), lane.order.end(), [&](uint32_t i) {
            return static_cast<double>(m_spans[i].startNs) < m_viewBeginNs - reach;
        });
        double runX0 = 0, runX1 = 0;
        bool runOpen = false;
        for (; it != lane.order.end(); ++it) {
            const trace::Span& s = m_spans[*it];
            const double start = static_cast<double>(s.startNs);
            if (start > m_viewEndNs) break;
            const double end = std::max(static_cast<double>(s.endNs), start);
            if (end < m_viewBeginNs) continue;
            const double x0 = std::max(left + (start - m_viewBeginNs) / perPx, plot.left() - 2);
            double x1 = std::min(left + (end - m_viewBeginNs) / perPx, plot.right() + 2);
            ++lane.painted;
            if (x1 - x0 >= kMinWideSpanPx) {
                m_wideRects.emplace_back(x0, r.top(), x1 - x0, r.height());
                m_wideSpans.push_back(*it);
                continue;
            }
            x1 = std::max(x1, x0 + 1);  // at least one pixel
            if (runOpen && x0 <= runX1 + 0.5) {
                runX1 = std::max(runX1, x1);
                continue;
            }
            if (runOpen) m_thinRects.emplace_back(runX0, r.top(), runX1 - runX0, r.height());
            runX0 = x0;
            runX1 = x1;
            runOpen = true;
        }
        if (runOpen) m_thinRects.emplace_back(runX0, r.top(), runX1 - runX0, r.height());

        const QColor color = laneColor(static_cast<Lane>(l));
        p.setPen(Qt::NoPen);
        p.setBrush(color);
        if (!m_thinRects.empty())
            p.drawRects(m_thinRects.data(), static_cast<int>(m_thinRects.size()));
        p.setPen(color.darker(160));
        if (!m_wideRects.empty())
            p.drawRects(m_wideRects.data(), static_cast<int>(m_wideRects.size()));
        // Zoomed in far enough, write each span's layer inside it.
        p.setPen(Qt::white);
        for (size_t i = 0; i < m_wideRects.size(); ++i) {
            const QRectF& w = m_wideRects[i];
            if (w.width() < kLabelMinSpanPx) continue;
            const trace::Span& s = m_spans[m_wideSpans[i]];
            const QString op = QString::fromUtf8(s.op);
            const QString label = s.layer >= 0 ? tr("L%1 %2").arg(s.layer).arg(op) : op;
            p.drawText(w.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       fm.elidedText(label, Qt::ElideRight, static_cast<int>(w.width()) - 5));
        }
    }
    p.restore();

    // The neuron or expert cache: per layer its hit rate (colour, and the figure where it fits;
    // the expert cache's cells also the experts it missed per token) and, in the gutter, the
    // whole cache's.
    const QRectF cache = cacheStripRect();
    if (!cache.isEmpty()) {
        uint64_t lookups = 0, hits = 0, bytes = 0;
        for (const CacheLayerStats& l : m_cacheLayers) {
            lookups += l.lookups;
            hits += l.hits;
            bytes += l.bytes;
        }
        const double tokens = double(std::max<uint64_t>(1, m_stats.total.tokens));
        p.setPen(pal.color(QPalette::Text));
        p.setFont(bold);
        p.drawText(QPointF(kMargin + 10, cache.top() + fm.ascent()),
                   m_cacheExperts ? tr("expert cache") : tr("neuron cache"));
        p.setFont(font());
        p.setPen(pal.color(QPalette::PlaceholderText));
        const double hitPercent = lookups ? 100.0 * double(hits) / double(lookups) : 100.0;
        p.drawText(QPointF(kMargin + 10, cache.top() + fm.height() + fm.ascent()),
                   m_cacheExperts ? tr("hit %1% · %2 missed/tok")
                                        .arg(hitPercent, 0, 'f', 1)
                                        .arg(double(lookups - hits) / tokens, 0, 'f', 1)
                                  : tr("hit %1% · %2/tok")
                                        .arg(hitPercent, 0, 'f', 1)
                                        .arg(formatBytes(uint64_t(double(bytes) / tokens))));
        const double cell = cache.width() / double(m_cacheLayers.size());
        for (size_t i = 0; i < m_cacheLayers.size(); ++i) {
            const CacheLayerStats& l = m_cacheLayers[i];
            const QRectF c(cache.left() + double(i) * cell, cache.top(), std::max(1.0, cell - 1), cache.height());
            p.fillRect(c, l.lookups ? hitColor(l.hitRate()) : pal.color(QPalette::Mid));
            // (A layer the expert cache does not serve: its experts are resident, no figure.)
            const QString label = l.lookups || !m_cacheExperts ? tr("L%1 %2%").arg(l.layer).arg(std::lround(100 * l.hitRate()))
                                                               : tr("L%1 resident").arg(l.layer);
            // The expert cache's cells: the experts missed per token on a second line.
            const QString missed = tr("%1 missed").arg(double(l.lookups - l.hits) / tokens, 0, 'f', 1);
            p.setPen(Qt::black);
            if (m_cacheExperts && l.lookups && fm.horizontalAdvance(missed) + 4 <= c.width() &&
                c.height() >= 2 * fm.height()) {
                p.drawText(QRectF(c.left(), c.top(), c.width(), c.height() / 2), Qt::AlignCenter, label);
                p.drawText(QRectF(c.left(), c.center().y(), c.width(), c.height() / 2), Qt::AlignCenter, missed);
            } else if (fm.horizontalAdvance(label) + 4 <= c.width()) {
                p.drawText(c, Qt::AlignCenter, label);
            }
        }
    }

    if (!m_remote.isEmpty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap,
                   tr("The model runs on %1: nothing moves or computes on this machine.\nThe header shows each "
                      "reply's time to first token and tokens/s over the network.")
                       .arg(m_remote));
    } else if (m_spans.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(plot, Qt::AlignCenter, m_live ? tr("Waiting for spans from the engine …")
                                                 : tr("No trace loaded"));
    }
    m_lastPaintMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

}  // namespace spillway::ui
