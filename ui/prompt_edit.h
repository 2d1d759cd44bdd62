#pragma once
// The prompt box: Enter sends, Shift+Enter adds a line, a pasted text keeps its lines (pasted as
// plain text). It grows with its text from one line to kMaxLines, then scrolls. text(), setText()
// and clear() as QLineEdit's, for the window and its tests.

#include <QPlainTextEdit>

namespace spillway::ui {

class PromptEdit : public QPlainTextEdit {
    Q_OBJECT
public:
    static constexpr int kMaxLines = 8;

    explicit PromptEdit(QWidget* parent = nullptr);

    QString text() const { return toPlainText(); }
    void setText(const QString& text);

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    // Enter (or the keypad's) without Shift: the user sends what is typed.
    void submitted();

protected:
    void keyPressEvent(QKeyEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;  // a new width wraps the lines anew
    void insertFromMimeData(const QMimeData* source) override;

private:
    // The height of `lines` lines of text with the frame and margins.
    int heightFor(int lines) const;
    void fitHeight();
};

}  // namespace spillway::ui
