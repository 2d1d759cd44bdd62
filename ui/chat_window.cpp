#include "chat_window.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QStatusBar>
#include <QTextBrowser>
#include <QTextCursor>
#include <QThread>
#include <QVBoxLayout>

#include "generation_worker.h"

namespace spillway::ui {

ChatWindow::ChatWindow(const QString& modelPath, QWidget* parent) : QMainWindow(parent)
{
    setWindowTitle(tr("Spillway"));
    resize(880, 520);

    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    m_transcript = new QTextBrowser(central);
    m_transcript->setObjectName("transcript");
    m_transcript->setReadOnly(true);
    m_transcript->setOpenLinks(false);
    m_error = new QLabel(central);
    m_error->setObjectName("inlineError");
    m_error->setStyleSheet("color: #b00020;");
    m_error->setWordWrap(true);
    m_error->hide();
    m_prompt = new QLineEdit(central);
    m_prompt->setObjectName("prompt");
    m_prompt->setPlaceholderText(tr("Type a prompt and press Enter"));
    m_send = new QPushButton(tr("Send"), central);
    m_send->setObjectName("send");
    m_stop = new QPushButton(tr("Stop"), central);
    m_stop->setObjectName("stop");
    auto* row = new QHBoxLayout;
    row->addWidget(m_prompt, 1);
    row->addWidget(m_send);
    row->addWidget(m_stop);
    layout->addWidget(m_transcript, 1);
    layout->addWidget(m_error);
    layout->addLayout(row);
    setCentralWidget(central);

    m_status = new QLabel(tr("Loading %1 …").arg(modelPath), this);
    m_status->setObjectName("statusLine");
    statusBar()->addWidget(m_status, 1);

    connect(m_send, &QPushButton::clicked, this, &ChatWindow::send);
    connect(m_prompt, &QLineEdit::returnPressed, this, &ChatWindow::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatWindow::stop);

    // The worker has no parent: it moves to the inference thread and is deleted there.
    m_thread = new QThread(this);
    m_thread->setObjectName("inference");
    m_worker = new GenerationWorker;
    m_worker->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(this, &ChatWindow::loadRequested, m_worker, &GenerationWorker::loadModel,
            Qt::QueuedConnection);
    connect(this, &ChatWindow::generateRequested, m_worker, &GenerationWorker::generate,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::modelLoaded, this, &ChatWindow::onModelLoaded,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::failed, this, &ChatWindow::onFailed,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::tokens, this, &ChatWindow::onTokens,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::finished, this, &ChatWindow::onFinished,
            Qt::QueuedConnection);
    m_thread->start();

    updateButtons();
    emit loadRequested(modelPath);
}

ChatWindow::~ChatWindow()
{
    m_worker->requestStop();  // a running generation ends before its next token
    m_thread->quit();
    m_thread->wait();
}

QString ChatWindow::statusText() const { return m_status->text(); }

QString ChatWindow::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

void ChatWindow::send()
{
    const QString prompt = m_prompt->text();
    if (!m_modelReady || m_generating || prompt.trimmed().isEmpty()) return;
    m_generating = true;
    m_error->hide();
    m_error->clear();
    m_prompt->clear();
    updateButtons();

    m_transcript->append(QStringLiteral("<p><b>%1</b> %2</p>")
                             .arg(tr("You:"), prompt.toHtmlEscaped()));
    m_transcript->append(QStringLiteral("<b>%1</b>").arg(tr("Model:")));
    // The model continues the prompt: show the prompt dimmed, then the new text.
    appendToTranscript(" ", false);
    appendToTranscript(prompt, true);
    m_status->setText(tr("%1 — generating …").arg(m_modelDescription));

    m_worker->clearStop();
    emit generateRequested(prompt, m_maxTokens, m_temperature);
}

void ChatWindow::stop()
{
    if (m_generating) m_worker->requestStop();
}

void ChatWindow::onModelLoaded(const QString& description)
{
    m_modelReady = true;
    m_modelDescription = description;
    m_status->setText(description);
    updateButtons();
    emit modelReady();
}

void ChatWindow::onFailed(const QString& message)
{
    m_generating = false;
    m_error->setText(tr("Error: %1").arg(message));
    m_error->show();
    m_status->setText(tr("Error: %1").arg(message));
    updateButtons();
    emit errorShown(message);
}

void ChatWindow::onTokens(const QString& text) { appendToTranscript(text, false); }

void ChatWindow::onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens)
{
    m_generating = false;
    m_status->setText(tr("%1 — %2 tokens, %3 tokens/s, first token %4 ms")
                          .arg(m_modelDescription)
                          .arg(tokens)
                          .arg(tokensPerSecond, 0, 'f', 1)
                          .arg(timeToFirstTokenMs, 0, 'f', 1));
    updateButtons();
    m_prompt->setFocus();
    emit replyFinished();
}

void ChatWindow::appendToTranscript(const QString& text, bool dim)
{
    QTextCursor cursor(m_transcript->document());
    cursor.movePosition(QTextCursor::End);
    QTextCharFormat format;
    format.setForeground(dim ? palette().color(QPalette::PlaceholderText)
                             : palette().color(QPalette::Text));
    cursor.insertText(text, format);
    m_transcript->ensureCursorVisible();
}

void ChatWindow::updateButtons()
{
    m_send->setEnabled(m_modelReady && !m_generating);
    m_prompt->setEnabled(m_modelReady);
    m_stop->setEnabled(m_generating);
}

}  // namespace spillway::ui
