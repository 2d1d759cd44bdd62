#include "server_control.h"

#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "generation_worker.h"

namespace spillway::ui {

namespace {
const QString kHost = QStringLiteral("127.0.0.1");
}

ServerControl::ServerControl(GenerationWorker* worker, QWidget* window) : QObject(window), m_window(window)
{
    m_toggle = new QAction(this);
    m_toggle->setObjectName("serveToggle");
    m_toggle->setCheckable(true);
    m_settings = new QAction(tr("Server &settings…"), this);
    m_settings->setObjectName("serverSettingsAction");
    m_label = new QLabel(window);
    m_label->setObjectName("serverStatus");
    m_label->setAccessibleName(tr("Server"));
    m_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_label->hide();
    connect(m_toggle, &QAction::triggered, this, [this](bool on) { setServing(on); });
    connect(m_settings, &QAction::triggered, this, &ServerControl::showSettings);
    connect(this, &ServerControl::startRequested, worker, &GenerationWorker::startServer, Qt::QueuedConnection);
    connect(this, &ServerControl::stopRequested, worker, &GenerationWorker::stopServer, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::serverStarted, this, &ServerControl::onStarted, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::serverStopped, this, &ServerControl::onStopped, Qt::QueuedConnection);
    showState();
}

void ServerControl::setServing(bool on)
{
    if (on == m_wanted) return showState();
    m_wanted = on;
    emit changed();
    if (!on) emit stopRequested();
    else if (m_localModel) request();
    showState();
}

void ServerControl::setPort(int port) { apply(port, m_parallel); }

void ServerControl::setParallel(int parallel) { apply(m_port, parallel); }

void ServerControl::apply(int port, int parallel)
{
    parallel = std::max(1, parallel);
    if (port == m_port && parallel == m_parallel) return;
    m_port = port;
    m_parallel = parallel;
    emit changed();
    if (m_wanted && m_localModel) request();  // the worker restarts it on the new settings
    showState();
}

void ServerControl::request() { emit startRequested(kHost, m_port, m_parallel, QString()); }

QJsonObject ServerControl::state() const
{
    return {{"port", m_port}, {"parallel", m_parallel}, {"on", m_wanted}};
}

void ServerControl::restoreState(const QJsonObject& state)
{
    const int port = state.value("port").toInt(m_port);
    m_port = port >= 0 && port <= 65535 ? port : 8080;
    m_parallel = std::clamp(state.value("parallel").toInt(m_parallel), 1, 16);
    m_wanted = state.value("on").toBool(false);
    if (m_wanted && m_localModel && !isServing()) request();
    showState();
}

void ServerControl::modelLoaded(bool local)
{
    m_localModel = local;
    // The worker restarts a running server on the new model itself; one that waited starts now.
    if (m_wanted && local && !isServing()) request();
    showState();
}

void ServerControl::onStarted(const QString& url, const QString& model)
{
    m_url = url;
    m_model = model;
    if (!m_wanted) {  // turned off while it started
        emit stopRequested();
        return;
    }
    showState();
    emit started(url);
}

void ServerControl::onStopped(const QString& why)
{
    m_url.clear();
    if (!why.isEmpty() && m_wanted) {
        m_wanted = false;  // the toggle shows what is: off, and the message says why
        emit changed();
    }
    showState();
    emit stopped(why);
}

void ServerControl::showState()
{
    m_toggle->setChecked(m_wanted);
    m_toggle->setText(tr("&Serve the model over the OpenAI API (%1:%2)").arg(kHost).arg(m_port));
    m_toggle->setToolTip(tr("Editors, scripts and Open WebUI on this computer can use the model the window has "
                            "loaded, at http://%1:%2/v1 (not reachable from other computers)")
                             .arg(kHost)
                             .arg(m_port));
    if (isServing()) {
        m_label->setText(tr("Serving %1 at %2").arg(m_model, m_url));
        m_label->setToolTip(tr("OpenAI-compatible API: %1/chat/completions, %1/models; metrics at %2/metrics")
                                .arg(m_url, m_url.left(m_url.size() - 3)));
        m_label->show();
    } else if (m_wanted) {
        m_label->setText(m_localModel ? tr("Server starting …") : tr("Server waits for a local model"));
        m_label->setToolTip(QString());
        m_label->show();
    } else {
        m_label->hide();
    }
}

void ServerControl::showSettings()
{
    auto* dialog = new QDialog(m_window);
    dialog->setObjectName("serverSettings");
    dialog->setWindowTitle(tr("Server settings"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    auto* layout = new QVBoxLayout(dialog);
    auto* port = new QSpinBox(dialog);
    port->setObjectName("serverPort");
    port->setRange(0, 65535);
    port->setSpecialValueText(tr("any free port"));
    port->setValue(m_port);
    auto* slotCount = new QSpinBox(dialog);
    slotCount->setObjectName("serverSlots");
    slotCount->setRange(1, 16);
    slotCount->setValue(m_parallel);
    slotCount->setToolTip(tr("Conversations the server keeps at once, each with its own context (memory for each)"));
    auto* form = new QFormLayout;
    form->addRow(tr("Port on 127.0.0.1:"), port);
    form->addRow(tr("Conversation slots:"), slotCount);
    auto* note = new QLabel(tr("Only programs on this computer can connect. To serve other computers, run "
                               "spillway-cli serve with --host and an API key."),
                            dialog);
    note->setWordWrap(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, dialog);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
    connect(buttons, &QDialogButtonBox::accepted, dialog, [this, dialog, port, slotCount] {
        apply(port->value(), slotCount->value());
        dialog->accept();
    });
    dialog->show();
}

}  // namespace spillway::ui
