#include "eliding_label.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <QStyle>

namespace spillway::ui {

ElidingLabel::ElidingLabel(QWidget* parent) : QLabel(parent)
{
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    setTextFormat(Qt::PlainText);
}

QSize ElidingLabel::minimumSizeHint() const { return {fontMetrics().averageCharWidth() * 8, QLabel::minimumSizeHint().height()}; }

void ElidingLabel::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QRect area = contentsRect();
    m_shown = fontMetrics().elidedText(text(), Qt::ElideRight, area.width());
    style()->drawItemText(&p, area, int(alignment() | Qt::AlignVCenter), palette(), isEnabled(), m_shown, foregroundRole());
}

bool ElidingLabel::event(QEvent* event)
{
    // Where the line does not fit, its tooltip starts with the whole of it.
    if (event->type() == QEvent::ToolTip && !m_shown.isEmpty() && m_shown != text()) {
        const auto* help = static_cast<QHelpEvent*>(event);
        QToolTip::showText(help->globalPos(), toolTip().isEmpty() ? text() : text() + QStringLiteral("\n\n") + toolTip(), this);
        return true;
    }
    return QLabel::event(event);
}

}  // namespace spillway::ui
