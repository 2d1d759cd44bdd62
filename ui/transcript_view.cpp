#include "transcript_view.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QPainter>
#include <QPainterPath>
#include <QRegularExpression>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QUrl>

#include "palette_colors.h"
#include "readable.h"

namespace spillway::ui {

bool looksLikeMarkdown(const QString& text)
{
    if (text.contains(QLatin1String("```")) || text.contains(QLatin1String("**"))) return true;
    static const QRegularExpression block(QStringLiteral(R"((^|\n)(#{1,6} |[-*] |\d+\. |> |\|))"));
    return block.match(text).hasMatch();
}

namespace {

bool isUser(const MessageItem& m) { return m.role == QLatin1String("user"); }

// Links under a message: "msg://<action>/<index>[/<number>]", with a tooltip.
QString actionLink(const QString& action, int index, const QString& label, const QColor& color, const QString& tip,
                   int number = 0)
{
    QString href = QStringLiteral("msg://%1/%2").arg(action).arg(index);
    if (number > 0) href += QStringLiteral("/%1").arg(number);
    return QStringLiteral("<a href=\"%1\" title=\"%4\" style=\"color:%2; text-decoration:none\">%3</a>")
        .arg(href, color.name(), label, tip.toHtmlEscaped());
}

// The actions' icons, drawn (no icon theme is needed): copy, regenerate, continue, edit.
QImage actionIcon(const QString& action, const QColor& color, qreal ratio)
{
    const int side = 16;
    QImage image(QSize(side, side) * ratio, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(ratio);
    image.fill(Qt::transparent);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    QPen pen(color, 1.4, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
    p.setPen(pen);
    if (action == QLatin1String("copy")) {
        p.drawRoundedRect(QRectF(5.5, 5.5, 8, 8.5), 1.5, 1.5);
        p.drawPolyline(QPolygonF({QPointF(3, 10.5), QPointF(2.5, 10.5), QPointF(2.5, 2.5), QPointF(10.5, 2.5), QPointF(10.5, 3)}));
    } else if (action == QLatin1String("regenerate")) {
        p.drawArc(QRectF(2.5, 2.5, 11, 11), 60 * 16, 290 * 16);
        p.setBrush(color);
        p.drawPolygon(QPolygonF({QPointF(9.5, 0.8), QPointF(13.8, 3.4), QPointF(9.6, 6.2)}));
    } else if (action == QLatin1String("continue")) {
        p.drawLine(QPointF(2.5, 8), QPointF(11, 8));
        p.drawPolyline(QPolygonF({QPointF(7.5, 4), QPointF(11.5, 8), QPointF(7.5, 12)}));
        p.drawLine(QPointF(14, 3.5), QPointF(14, 12.5));
    } else if (action == QLatin1String("edit")) {
        QPainterPath pencil;
        pencil.moveTo(3, 13);
        pencil.lineTo(3.8, 9.8);
        pencil.lineTo(11, 2.6);
        pencil.lineTo(13.4, 5);
        pencil.lineTo(6.2, 12.2);
        pencil.closeSubpath();
        p.drawPath(pencil);
        p.drawLine(QPointF(9.6, 4), QPointF(12, 6.4));
    }
    return image;
}

// An action as an icon link: "msg://<action>/<index>", the icon from the document's resources.
QString iconLink(const QString& action, int index, const QString& tip)
{
    return QStringLiteral("<a href=\"msg://%1/%2\" title=\"%3\"><img src=\"spillway-icon:%1\" width=\"16\" "
                          "height=\"16\" style=\"vertical-align:middle\"></a>")
        .arg(action)
        .arg(index)
        .arg(tip.toHtmlEscaped());
}

}  // namespace

TranscriptView::TranscriptView(QWidget* parent) : QTextBrowser(parent)
{
    setReadOnly(true);
    setOpenLinks(false);
    // Links (the actions under the messages) are reached with Tab and activated with Enter.
    setTextInteractionFlags(Qt::TextBrowserInteraction);
    connect(this, &QTextBrowser::anchorClicked, this, &TranscriptView::onAnchor);
    // The user's own scrolling decides whether new text keeps the view at the bottom.
    QScrollBar* bar = verticalScrollBar();
    connect(bar, &QScrollBar::valueChanged, this, [this, bar](int value) {
        if (!m_rendering) m_follow = value >= bar->maximum() - 4;
    });
    // The document lays itself out after text is inserted: once its height is known, a view
    // that follows shows the newest text.
    connect(bar, &QScrollBar::rangeChanged, this, [this] {
        if (m_follow) scrollToNewest();
    });
}

void TranscriptView::scrollToNewest()
{
    QScrollBar* bar = verticalScrollBar();
    const bool rendering = m_rendering;
    m_rendering = true;
    bar->setValue(bar->maximum());
    m_rendering = rendering;
}

QString TranscriptView::figures(const MessageItem& m)
{
    if (m.tokensPerSecond <= 0 && m.firstTokenMs <= 0) return QString();
    QString text = tr("%1 tokens/s · first token %2 ms").arg(readable(m.tokensPerSecond), readable(m.firstTokenMs));
    if (!m.modelName.isEmpty()) text += QStringLiteral(" · ") + m.modelName;
    return text;
}

void TranscriptView::setContinuation(bool continuation)
{
    if (m_continuation == continuation) return;
    m_continuation = continuation;
    render();
}

void TranscriptView::setMessages(const QVector<MessageItem>& messages, bool keepPlace)
{
    m_messages = messages;
    m_streaming = -1;
    if (!keepPlace) {
        m_follow = true;
        m_openReasoning.clear();
    }
    render();
}

void TranscriptView::appendMessage(const MessageItem& message)
{
    m_messages.push_back(message);
    renderMessage(int(m_messages.size()) - 1);
}

void TranscriptView::setMessageId(int index, qint64 id)
{
    if (index >= 0 && index < m_messages.size()) m_messages[index].id = id;
}

void TranscriptView::truncate(int count)
{
    if (count >= m_messages.size()) return;
    m_messages.resize(std::max(0, count));
    render();
}

void TranscriptView::beginReply(int index)
{
    m_streaming = startReplyAt(m_messages, index);
    m_follow = true;  // a reply the user asked for: its text is what they want to see
    render();  // the reply's header (and, continuing, its prompt) is the document's end now
    QTextCursor end(document());
    end.movePosition(QTextCursor::End);
    m_streamStart = end.position();
}

void TranscriptView::setCanContinue(bool can)
{
    if (can == m_canContinue) return;
    m_canContinue = can;
    render();
}

void TranscriptView::continueReply(int index)
{
    if (index < 0 || index >= m_messages.size()) return;
    m_streaming = index;
    m_follow = true;
    render();
    QTextCursor end(document());
    end.movePosition(QTextCursor::End);
    m_streamStart = end.position();
    QTextCharFormat format;
    format.setForeground(palette().color(QPalette::Text));
    end.insertText(m_messages[index].content, format);
    if (m_follow) scrollToNewest();
}

void TranscriptView::appendReplyText(const QString& text)
{
    if (m_streaming < 0) return;
    MessageItem& m = m_messages[m_streaming];
    QTextCursor cursor(document());
    cursor.movePosition(QTextCursor::End);
    if (!m.reasoning.isEmpty() && m.content.isEmpty()) cursor.insertBlock();  // the answer under the reasoning
    m.content += text;
    QTextCharFormat format;
    format.setForeground(palette().color(QPalette::Text));
    cursor.insertText(text, format);
    // (Not ensureCursorVisible: the widget's own cursor stays where the user clicked, at the top
    // by default, and brought the view back there at every piece of text.)
    if (m_follow) scrollToNewest();
}

void TranscriptView::appendReplyReasoning(const QString& text)
{
    if (m_streaming < 0) return;
    const bool first = m_messages[m_streaming].reasoning.isEmpty();
    m_messages[m_streaming].reasoning += text;
    QTextCursor cursor(document());
    cursor.movePosition(QTextCursor::End);
    if (first) {  // what streams is the model's thinking, not its answer
        QTextCharFormat label;
        label.setForeground(mutedColor(palette()));
        label.setFontWeight(QFont::Bold);
        cursor.insertText(tr("Thinking…"), label);
        cursor.insertBlock();
    }
    QTextCharFormat format;
    format.setForeground(mutedColor(palette()));
    format.setFontItalic(true);
    cursor.insertText(text, format);
    if (m_follow) scrollToNewest();
}

void TranscriptView::setReplyReasoningTime(double milliseconds)
{
    if (m_streaming >= 0) m_messages[m_streaming].reasoningMs = milliseconds;
}

namespace {

// The reasoning's fold: "Thought for 12 s · 340 words" ("Reasoning · 340 words" untimed).
QString reasoningFold(const MessageItem& m)
{
    const int words = int(m.reasoning.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts).size());
    const QString count = words == 1 ? TranscriptView::tr("1 word") : TranscriptView::tr("%1 words").arg(words);
    if (!(m.reasoningMs > 0)) return TranscriptView::tr("Reasoning · %1").arg(count);
    const double s = m.reasoningMs / 1000;
    const QString time = s < 0.1   ? TranscriptView::tr("under 0.1 s")
                         : s < 10  ? TranscriptView::tr("%1 s").arg(s, 0, 'f', 1)
                         : s < 120 ? TranscriptView::tr("%1 s").arg(qRound(s))
                                   : TranscriptView::tr("%1 min %2 s").arg(int(s) / 60).arg(int(s) % 60);
    return TranscriptView::tr("Thought for %1 · %2").arg(time, count);
}

}  // namespace

void TranscriptView::finishReply(double tokensPerSecond, double firstTokenMs, const QString& modelName)
{
    if (m_streaming < 0) return;
    MessageItem& m = m_messages[m_streaming];
    m.tokensPerSecond = tokensPerSecond;
    m.firstTokenMs = firstTokenMs;
    m.modelName = modelName;
    m_streaming = -1;
    render();
}

void TranscriptView::render()
{
    QScrollBar* bar = verticalScrollBar();
    const int place = bar->value();
    m_rendering = true;
    clear();
    const QColor muted = mutedColor(palette());
    const qreal ratio = devicePixelRatioF();
    for (const char* action : {"copy", "regenerate", "continue", "edit"})
        document()->addResource(QTextDocument::ImageResource, QUrl(QStringLiteral("spillway-icon:") + QLatin1String(action)),
                                actionIcon(QLatin1String(action), muted, ratio));
    for (int i = 0; i < m_messages.size(); ++i) renderMessage(i);
    if (m_follow) scrollToNewest();
    else bar->setValue(std::min(place, bar->maximum()));
    m_rendering = false;
}

void TranscriptView::renderMessage(int index)
{
    const MessageItem& m = m_messages[index];
    const bool user = isUser(m);
    const bool last = index == m_messages.size() - 1;
    QTextCursor cursor(document());
    cursor.movePosition(QTextCursor::End);
    QTextBlockFormat spaced;  // a little air above each message
    spaced.setTopMargin(index > 0 ? 10 : 0);
    if (!document()->isEmpty()) cursor.insertBlock(spaced);
    else cursor.setBlockFormat(spaced);
    QTextCharFormat plain;
    plain.setForeground(palette().color(QPalette::Text));
    QTextCharFormat bold = plain;
    bold.setFontWeight(QFont::Bold);
    cursor.insertText(user ? tr("You:") : tr("Model:"), bold);
    cursor.insertText(QStringLiteral(" "), plain);
    if (!user && m_continuation && index > 0 && isUser(m_messages[index - 1])) {
        // The model continues the prompt: show the prompt dimmed, then the new text.
        QTextCharFormat dim = plain;
        dim.setForeground(palette().color(QPalette::PlaceholderText));
        cursor.insertText(m_messages[index - 1].content, dim);
    }
    if (index == m_streaming) return;  // the text streams in after this point

    if (!user && !m.reasoning.isEmpty()) {
        // The reasoning folded into one line above the answer; a click opens it.
        const bool open = m_openReasoning.contains(index);
        const QColor faint = mutedColor(palette());
        cursor.insertHtml(actionLink(QStringLiteral("reasoning"), index,
                                     (open ? QStringLiteral("▾ ") : QStringLiteral("▸ ")) + reasoningFold(m),
                                     faint, open ? tr("Hide the model's reasoning") : tr("Show the model's reasoning")));
        if (open) {
            cursor.insertBlock();
            QTextCharFormat thought = plain;
            thought.setForeground(faint);
            thought.setFontItalic(true);
            cursor.insertText(m.reasoning, thought);
        }
        cursor.insertBlock();
    }
    const int start = cursor.position();
    if (!user && looksLikeMarkdown(m.content)) {
        cursor.insertBlock();
        cursor.insertMarkdown(m.content);
    } else {
        cursor.insertText(m.content, plain);
    }
    const QString tip = figures(m);
    QTextCharFormat withTip;  // the figures on hover over the reply
    withTip.setToolTip(tip);
    if (!tip.isEmpty()) {
        QTextCursor span(document());
        span.setPosition(start);
        span.setPosition(cursor.position(), QTextCursor::KeepAnchor);
        span.mergeCharFormat(withTip);
    }

    // The actions, small and muted, under the message.
    const QColor muted = mutedColor(palette());
    QStringList actions;
    if (user) {
        actions << iconLink(QStringLiteral("edit"), index, tr("Edit and resend this message"));
    } else {
        actions << iconLink(QStringLiteral("copy"), index, tr("Copy this reply"));
        if (last) {
            actions << iconLink(QStringLiteral("regenerate"), index, tr("Regenerate: write this reply again"));
            if (m_canContinue)
                actions << iconLink(QStringLiteral("continue"), index, tr("Continue: the reply goes on from where it ended"));
        }
    }
    if (m.versionCount > 1) {
        QString versions;
        if (m.versionNumber > 1)
            versions += actionLink(QStringLiteral("version"), index, QStringLiteral("&nbsp;&nbsp;‹&nbsp;&nbsp;"), muted,
                                   tr("Previous version"), m.versionNumber - 1);
        versions += QStringLiteral("%1/%2").arg(m.versionNumber).arg(m.versionCount);
        if (m.versionNumber < m.versionCount)
            versions += actionLink(QStringLiteral("version"), index, QStringLiteral("&nbsp;&nbsp;›&nbsp;&nbsp;"), muted,
                                   tr("Next version"), m.versionNumber + 1);
        actions << versions;
    }
    cursor.insertBlock();
    QString footer = QStringLiteral("<span style=\"color:%1\">%2</span>")
                         .arg(muted.name(), actions.join(QStringLiteral("&nbsp;&nbsp;&nbsp;")));
    cursor.insertHtml(footer);  // (each action has its own tooltip; the figures are on the reply)
}

void TranscriptView::onAnchor(const QUrl& url)
{
    if (url.scheme() != QLatin1String("msg") || m_streaming >= 0) return;
    const QStringList parts = url.path().split(QLatin1Char('/'), Qt::SkipEmptyParts);
    if (parts.isEmpty()) return;
    bool ok = false;
    const int index = parts[0].toInt(&ok);
    if (!ok || index < 0 || index >= m_messages.size()) return;
    const QString action = url.host();
    if (action == QLatin1String("copy")) {
        QGuiApplication::clipboard()->setText(m_messages[index].content);
        emit copied(index);
    } else if (action == QLatin1String("edit")) {
        emit editRequested(index);
    } else if (action == QLatin1String("regenerate")) {
        emit regenerateRequested(index);
    } else if (action == QLatin1String("continue")) {
        emit continueRequested(index);
    } else if (action == QLatin1String("reasoning")) {
        if (!m_openReasoning.remove(index)) m_openReasoning.insert(index);
        render();
    } else if (action == QLatin1String("version") && parts.size() == 2) {
        const int number = parts[1].toInt(&ok);
        if (ok) emit versionRequested(index, number);
    }
}

}  // namespace spillway::ui
