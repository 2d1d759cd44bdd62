#pragma once
// The conversation as shown: one block per message, with its actions underneath (Copy,
// Regenerate and Continue on the last reply, Edit on prompts, ‹ n/m › between a message's versions)
// as icon links with tooltips (Tab reaches them, Enter activates them), and the reply's figures (tokens/s, time to first token, model) on hover. The view keeps the
// messages it shows; a reply streams in as plain text and is rendered (Markdown, code blocks)
// once complete.

#include <QSet>
#include <QTextBrowser>
#include <QVector>

#include "chat_store.h"

namespace spillway::ui {

class TranscriptView : public QTextBrowser {
    Q_OBJECT
public:
    explicit TranscriptView(QWidget* parent = nullptr);

    // Base models continue the prompt: their replies are shown after the prompt, dimmed. Chat
    // models (with a chat template) answer it: only the reply is shown.
    void setContinuation(bool continuation);
    bool continuation() const { return m_continuation; }
    // Whether the last reply offers Continue (a remote model cannot go on with a reply).
    void setCanContinue(bool can);

    // keepPlace: the same conversation shown again (another version of a message): the view stays
    // where the user scrolled it; else (another chat) it shows the newest message.
    void setMessages(const QVector<MessageItem>& messages, bool keepPlace = false);
    const QVector<MessageItem>& messages() const { return m_messages; }
    void appendMessage(const MessageItem& message);
    void setMessageId(int index, qint64 id);
    // Keeps messages [0, count) and removes the rest.
    void truncate(int count);

    // Streaming: the reply at `index` (the last message; appended when index == size()) is
    // shown as text arrives and rendered once finished.
    void beginReply(int index);
    // The reply at `index` streams on after the text it has (Continue).
    void continueReply(int index);
    void appendReplyText(const QString& text);
    // The reply's reasoning, streamed dimmed before its answer; once the reply is finished it
    // folds into one line ("Reasoning · 120 words") that opens and closes it.
    void appendReplyReasoning(const QString& text);
    // How long the streaming reply reasoned (its fold then says "Thought for 12 s").
    void setReplyReasoningTime(double milliseconds);
    void finishReply(double tokensPerSecond, double firstTokenMs, const QString& modelName);
    bool isStreaming() const { return m_streaming >= 0; }
    // Whether the view keeps the newest text in sight: true until the user scrolls up, and again
    // once they scroll back to the bottom (or a reply starts on their action).
    bool followsNewest() const { return m_follow; }
    // The figures shown on hover over a reply ("12.3 tokens/s · first token 45.0 ms · model").
    static QString figures(const MessageItem& message);

signals:
    void copied(int index);
    void editRequested(int index);
    void regenerateRequested(int index);
    void continueRequested(int index);
    void versionRequested(int index, int number);

private:
    // Renders every message again; the view then shows the newest text where it followed it,
    // else the place it showed before.
    void render();
    void scrollToNewest();
    void renderMessage(int index);
    void onAnchor(const QUrl& url);

    QVector<MessageItem> m_messages;
    bool m_continuation = true;
    bool m_canContinue = true;
    int m_streaming = -1;    // index of the reply being streamed, or -1
    int m_streamStart = -1;  // its first character in the document
    bool m_follow = true;    // at the bottom: new text keeps it there
    bool m_rendering = false;  // scrollbar moves made by render(), not by the user
    QSet<int> m_openReasoning;  // replies whose reasoning is unfolded
};

// True for text that uses Markdown blocks or emphasis (code fences, headings, lists, quotes,
// tables, bold): such replies are shown rendered once complete.
bool looksLikeMarkdown(const QString& text);

}  // namespace spillway::ui
