#include "ui/prompt_edit.h"

#include <QKeyEvent>
#include <QMimeData>
#include <QTextBlock>

#include <algorithm>
#include <cmath>

namespace spillway::ui {

PromptEdit::PromptEdit(QWidget* parent) : QPlainTextEdit(parent)
{
    setTabChangesFocus(true);  // Tab moves on to the Send button, as in a line edit
    setLineWrapMode(QPlainTextEdit::WidgetWidth);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    connect(this, &QPlainTextEdit::textChanged, this, &PromptEdit::fitHeight);
    fitHeight();
}

void PromptEdit::setText(const QString& text)
{
    setPlainText(text);
    moveCursor(QTextCursor::End);
}

int PromptEdit::heightFor(int lines) const
{
    const int line = fontMetrics().lineSpacing();
    const QMargins m = contentsMargins();
    return int(std::ceil(document()->documentMargin() * 2)) + lines * line + m.top() + m.bottom() + 2 * frameWidth();
}

QSize PromptEdit::sizeHint() const
{
    return {QPlainTextEdit::sizeHint().width(), height()};
}

QSize PromptEdit::minimumSizeHint() const
{
    return {fontMetrics().averageCharWidth() * 10, heightFor(1)};
}

// Lines as laid out (a long line wrapped at the width counts as several), one to kMaxLines.
void PromptEdit::fitHeight()
{
    int lines = 0;
    for (QTextBlock b = document()->begin(); b.isValid() && lines < kMaxLines; b = b.next())
        lines += std::max(1, b.layout() ? b.layout()->lineCount() : 1);
    const int h = heightFor(std::clamp(lines, 1, kMaxLines));
    if (h != height()) {
        setFixedHeight(h);
        updateGeometry();
    }
}

void PromptEdit::keyPressEvent(QKeyEvent* event)
{
    const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
    if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
        event->accept();
        emit submitted();
        return;
    }
    if (enter) {  // Shift+Enter: a new line (not Qt's line separator U+2028)
        insertPlainText(QStringLiteral("\n"));
        event->accept();
        return;
    }
    QPlainTextEdit::keyPressEvent(event);
}

void PromptEdit::resizeEvent(QResizeEvent* event)
{
    QPlainTextEdit::resizeEvent(event);
    fitHeight();
}

void PromptEdit::insertFromMimeData(const QMimeData* source)
{
    if (source && source->hasText()) insertPlainText(source->text());  // plain text, lines kept
}

}  // namespace spillway::ui
