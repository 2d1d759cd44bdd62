#include "transcript_view.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QRegularExpression>
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

// Links under a message: "msg://<action>/<index>[/<number>]".
QString actionLink(const QString& action, int index, const QString& label, const QColor& color, int number = 0)
{
    QString href = QStringLiteral("msg://%1/%2").arg(action).arg(index);
    if (number > 0) href += QStringLiteral("/%1").arg(number);
    return QStringLiteral("<a href=\"%1\" style=\"color:%2; text-decoration:none\">%3</a>").arg(href, color.name(), label);
}

}  // namespace

TranscriptView::TranscriptView(QWidget* parent) : QTextBrowser(parent)
{
    setReadOnly(true);
    setOpenLinks(false);
    connect(this, &QTextBrowser::anchorClicked, this, &TranscriptView::onAnchor);
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

void TranscriptView::setMessages(const QVector<MessageItem>& messages)
{
    m_messages = messages;
    m_streaming = -1;
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
    render();
    QTextCursor end(document());
    end.movePosition(QTextCursor::End);
    m_streamStart = end.position();
    QTextCharFormat format;
    format.setForeground(palette().color(QPalette::Text));
    end.insertText(m_messages[index].content, format);
    ensureCursorVisible();
}

void TranscriptView::appendReplyText(const QString& text)
{
    if (m_streaming < 0) return;
    m_messages[m_streaming].content += text;
    QTextCursor cursor(document());
    cursor.movePosition(QTextCursor::End);
    QTextCharFormat format;
    format.setForeground(palette().color(QPalette::Text));
    cursor.insertText(text, format);
    ensureCursorVisible();
}

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
    clear();
    for (int i = 0; i < m_messages.size(); ++i) renderMessage(i);
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

    const int start = cursor.position();
    if (!user && looksLikeMarkdown(m.content)) {
        cursor.insertBlock();
        cursor.insertMarkdown(m.content);
    } else {
        cursor.insertText(m.content, plain);
    }
    const QString tip = figures(m);
    QTextCharFormat withTip;  // the figures on hover over the reply and its actions
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
        actions << actionLink(QStringLiteral("edit"), index, tr("Edit"), muted);
    } else {
        actions << actionLink(QStringLiteral("copy"), index, tr("Copy"), muted);
        if (last) {
            actions << actionLink(QStringLiteral("regenerate"), index, tr("Regenerate"), muted);
            if (m_canContinue) actions << actionLink(QStringLiteral("continue"), index, tr("Continue"), muted);
        }
    }
    if (m.versionCount > 1) {
        QString versions;
        if (m.versionNumber > 1) versions += actionLink(QStringLiteral("version"), index, QStringLiteral("&nbsp;&nbsp;‹&nbsp;&nbsp;"), muted, m.versionNumber - 1);
        versions += QStringLiteral("%1/%2").arg(m.versionNumber).arg(m.versionCount);
        if (m.versionNumber < m.versionCount)
            versions += actionLink(QStringLiteral("version"), index, QStringLiteral("&nbsp;&nbsp;›&nbsp;&nbsp;"), muted, m.versionNumber + 1);
        actions << versions;
    }
    cursor.insertBlock();
    QString footer = QStringLiteral("<span style=\"color:%1; font-size:small\">%2</span>")
                         .arg(muted.name(), actions.join(QStringLiteral(" · ")));
    cursor.insertHtml(footer);
    if (!tip.isEmpty()) {
        QTextCursor line(cursor.block());
        line.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
        line.mergeCharFormat(withTip);
    }
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
    } else if (action == QLatin1String("version") && parts.size() == 2) {
        const int number = parts[1].toInt(&ok);
        if (ok) emit versionRequested(index, number);
    }
}

}  // namespace spillway::ui
