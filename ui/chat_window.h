#pragma once
// The chat window: a transcript, a prompt line with Send and Stop, and a status line. All
// engine work happens on the GenerationWorker's "inference" thread; this class only paints.

#include <QMainWindow>
#include <QString>

class QLabel;
class QLineEdit;
class QPushButton;
class QTextBrowser;
class QThread;

namespace spillway::ui {

class GenerationWorker;

class ChatWindow : public QMainWindow {
    Q_OBJECT
public:
    // Starts loading `modelPath` on the inference thread at once.
    explicit ChatWindow(const QString& modelPath, QWidget* parent = nullptr);
    ~ChatWindow() override;

    void setTemperature(double temperature) { m_temperature = temperature; }  // 0 = greedy
    void setMaxTokens(int maxTokens) { m_maxTokens = maxTokens; }
    double temperature() const { return m_temperature; }
    int maxTokens() const { return m_maxTokens; }
    bool isModelReady() const { return m_modelReady; }
    bool isGenerating() const { return m_generating; }

    QTextBrowser* transcript() const { return m_transcript; }
    QLineEdit* promptEdit() const { return m_prompt; }
    QPushButton* sendButton() const { return m_send; }
    QPushButton* stopButton() const { return m_stop; }
    QString statusText() const;  // the status bar line
    QString errorText() const;   // the inline error line; empty when there is none

public slots:
    void send();
    void stop();

signals:
    // Requests to the worker (queued onto the inference thread).
    void loadRequested(const QString& path);
    void generateRequested(const QString& prompt, int maxTokens, double temperature);
    // For callers that drive the window (tests, --screenshot).
    void modelReady();
    void replyFinished();
    void errorShown(const QString& message);

private slots:
    void onModelLoaded(const QString& description);
    void onFailed(const QString& message);
    void onTokens(const QString& text);
    void onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens);

private:
    void appendToTranscript(const QString& text, bool dim);
    void updateButtons();

    QThread* m_thread = nullptr;
    GenerationWorker* m_worker = nullptr;  // lives on m_thread; deleted there
    QTextBrowser* m_transcript = nullptr;
    QLineEdit* m_prompt = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_status = nullptr;
    QString m_modelDescription;
    double m_temperature = 0.8;
    int m_maxTokens = 256;
    bool m_modelReady = false;
    bool m_generating = false;
};

}  // namespace spillway::ui
