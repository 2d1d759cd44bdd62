#pragma once
// The desktop app's server (issue 29): the Server menu's "Serve the model over the OpenAI API"
// toggle (off by default), its settings (port, conversation slots) and the status bar's address.
// The server itself runs on the inference worker, on the engine the chat uses
// (GenerationWorker::startServer): editors, scripts and Open WebUI on this machine talk to the
// model the window has loaded, and the visualizer shows their replies too. It listens on
// 127.0.0.1 only (spillway-cli serve is the way to other machines, with an API key).
//
// Its state (port, slots, on) is kept as the setting "ui.server"; a server that was on when the
// app quit starts again once a local model is loaded.

#include <QJsonObject>
#include <QObject>
#include <QString>

class QAction;
class QLabel;
class QWidget;

namespace spillway::ui {

class GenerationWorker;

class ServerControl : public QObject {
    Q_OBJECT
public:
    // Talks to `worker` by queued signals; the widgets are parented to `window`.
    ServerControl(GenerationWorker* worker, QWidget* window);

    QAction* toggle() const { return m_toggle; }            // "serveToggle", checkable
    QAction* settingsAction() const { return m_settings; }  // "Server settings…" (dialog "serverSettings")
    QLabel* statusLabel() const { return m_label; }         // "serverStatus": the address, when serving
    bool isServing() const { return !m_url.isEmpty(); }
    QString url() const { return m_url; }  // "http://127.0.0.1:8080/v1" while serving
    int port() const { return m_port; }
    int parallel() const { return m_parallel; }
    // Port 0: any free port. Restarts a running server on the new settings.
    void setPort(int port);
    void setParallel(int parallel);
    void setServing(bool on);

    QJsonObject state() const;
    void restoreState(const QJsonObject& state);
    // A model answers now; `local`: on this machine (the server serves only those). Starts a
    // server that was wanted on (restored, or asked for before a model was ready).
    void modelLoaded(bool local);

signals:
    void started(const QString& url);
    void stopped(const QString& why);  // "" when the user turned it off
    void changed();                    // the state to keep changed
    // To the worker (queued).
    void startRequested(const QString& host, int port, int parallel, const QString& apiKey);
    void stopRequested();

private:
    void onStarted(const QString& url, const QString& model);
    void onStopped(const QString& why);
    void showSettings();
    void request();
    void apply(int port, int parallel);
    void showState();

    QWidget* m_window;
    QAction* m_toggle = nullptr;
    QAction* m_settings = nullptr;
    QLabel* m_label = nullptr;
    QString m_url, m_model;
    int m_port = 8080;
    int m_parallel = 2;
    bool m_wanted = false;       // the user turned it on (it may wait for a local model)
    bool m_localModel = false;   // the model answering is on this machine
};

}  // namespace spillway::ui
