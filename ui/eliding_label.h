#pragma once
// A one-line label that fits its text to its width with "…" at the end (the whole text first in
// its tooltip, and in text()), for lines as long as the status line's after a reply; a QLabel would
// cut it off at the window's edge.

#include <QLabel>

namespace spillway::ui {

class ElidingLabel : public QLabel {
    Q_OBJECT
public:
    explicit ElidingLabel(QWidget* parent = nullptr);
    QSize minimumSizeHint() const override;
    // What the last paint showed ("" before the first).
    QString shownText() const { return m_shown; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    QString m_shown;
};

}  // namespace spillway::ui
