#pragma once
// The first-launch screen: what this machine is (the probe, with a progress bar while it
// measures), what it can run, and the demo model that is ready to chat. Shown once; the
// Tuning view keeps the summary afterwards.

#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;

namespace spillway::ui {

class WelcomePage : public QWidget {
    Q_OBJECT
public:
    explicit WelcomePage(QWidget* parent = nullptr);

    QProgressBar* progressBar() const { return m_progress; }
    QPushButton* startButton() const { return m_start; }
    QString summaryText() const;
    QString modelLine() const;  // "Ready to chat: …" once measured, else what is loaded and what is still measured

    void setProgress(double fraction, const QString& stage);
    void setSummary(const QString& hardware, const QString& capabilities);
    void setModel(const QString& description);
    void setFailed(const QString& message);

signals:
    void startClicked();

private:
    QLabel* m_stage = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_hardware = nullptr;
    QLabel* m_capabilities = nullptr;
    QLabel* m_model = nullptr;
    QPushButton* m_start = nullptr;
    QString m_modelDescription;  // the model loaded ("" until one is)
    bool m_measured = false;     // the summary is in (or the measurement failed)
    void showModel();
};

}  // namespace spillway::ui
