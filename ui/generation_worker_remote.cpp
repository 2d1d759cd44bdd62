// The inference worker's remote models (an OpenAI-compatible endpoint answers instead of a local
// engine) and the server it runs beside the chat (the local model served over the OpenAI API).

#include <QDir>
#include <QFileInfo>
#include <chrono>
#include <random>

#include "generation_worker.h"
#include "remote_endpoint.h"
#include "core/engine/conversation.h"
#include "core/model/llama_model.h"
#include "server/openai_client.h"
#include "server/server.h"

namespace spillway::ui {

GenerationWorker::GenerationWorker(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<RunLanes>();
    qRegisterMetaType<ThinkingOptions>();
}

// The server goes first: its slots hold conversations on the engine.
GenerationWorker::~GenerationWorker() { m_served.reset(); }

void GenerationWorker::loadEndpoint(const QString& path)
{
    const auto ref = parseEndpointPath(path);
    server::EndpointOptions o;
    o.url = ref->url.toStdString();
    o.model = ref->model.toStdString();
    if (m_keys) o.apiKey = m_keys->key(ref->url).toStdString();
    auto client = server::OpenAiClient::open(o);
    if (!client) return emit failed(QString::fromStdString(client.error().message));
    // The endpoint must answer and list the model before the local one goes.
    auto ids = (*client)->models();
    if (!ids) return emit failed(QString::fromStdString(ids.error().message));
    if (std::find(ids->begin(), ids->end(), o.model) == ids->end())
        return emit failed(tr("%1 no longer lists the model %2 (it lists: %3)")
                               .arg(ref->url, ref->model,
                                    QString::fromStdString(ids->empty() ? std::string("nothing") : ids->front()) +
                                        (ids->size() > 1 ? tr(", …") : QString())));
    // The local model is unloaded: its memory is free while the remote one answers.
    if (m_engine) {
        m_served.reset();  // its slots are on the engine; resumeServer says why it stays off
        const QString name = QFileInfo(QString::fromStdString(m_engine->model().path())).fileName();
        const uint64_t usedBefore = m_engine->device().memoryStats().used;
        m_conversation.reset();
        std::unique_ptr<gpu::Device> device = m_engine->takeDevice();
        m_engine.reset();
        const uint64_t usedAfter = device ? device->memoryStats().used : usedBefore;
        emit unloaded(name, qint64(usedBefore > usedAfter ? usedBefore - usedAfter : 0));
    }
    m_remote = std::move(*client);
    m_remoteDescription = tr("%1 (remote, %2)").arg(ref->model, ref->url);
    emit deviceChanged(QStringLiteral("remote"), m_remoteDescription, QString());
    emit thinkingOffered({});
    emit modelLoaded(m_remoteDescription, true);
    resumeServer();
}

void GenerationWorker::generateRemote(const std::vector<engine::Message>& messages, const GenerationSettings& settings,
                                      bool continueLast)
{
    if (continueLast)
        return emit failed(tr("a remote model cannot go on with a reply: regenerate it, or ask for more in a new message"));
    TextBatcher text([this](const QString& t) { emit tokens(t); });
    const auto onText = [&](std::string_view piece) {
        text.add(piece);
        return true;
    };
    auto reply = m_remote->chat(messages, settings.sampler(std::random_device{}()), settings.maxTokens, onText, &m_stop);
    text.flush();
    if (!reply) return emit failed(QString::fromStdString(reply.error().message));
    const QString end = reply->stopped                          ? QStringLiteral("stopped")
                        : reply->finishReason == "length" ? QStringLiteral("limit")
                                                               : QStringLiteral("turn");
    if (reply->promptTokens + reply->completionTokens > 0)
        emit contextUsed(reply->promptTokens + reply->completionTokens, 0);
    emit finished(reply->tokensPerSecond(), reply->timeToFirstToken * 1e3, reply->completionTokens, end);
}

void GenerationWorker::startServer(const QString& host, int port, int parallel, const QString& apiKey)
{
    m_served.reset();
    m_serve = ServeSettings{host, apiKey, port, std::max(1, parallel)};
    resumeServer();
}

void GenerationWorker::stopServer()
{
    const bool was = m_served || m_serve;
    m_served.reset();
    m_serve.reset();
    if (was) emit serverStopped(QString());
}

void GenerationWorker::suspendServer() { m_served.reset(); }

void GenerationWorker::resumeServer()
{
    if (!m_serve || m_served) return;
    auto off = [this](const QString& why) {
        m_serve.reset();
        emit serverStopped(why);
    };
    if (!m_engine)
        return off(m_remote ? tr("the server serves a local model; the model answering now is remote")
                            : tr("no model is loaded"));
    server::ServerOptions o;
    o.host = m_serve->host.toStdString();
    o.port = m_serve->port;
    o.apiKey = m_serve->apiKey.toStdString();
    o.parallel = m_serve->parallel;
    o.turns = &m_turns;  // the chat and the server take turns at the engine
    const QFileInfo file(QString::fromStdString(m_engine->model().path()));
    o.modelId = (file.fileName().isEmpty() ? QDir(file.filePath()).dirName() : file.fileName()).toStdString();
    if (Status s = server::checkOptions(o); !s) return off(QString::fromStdString(s.error().message));
    auto served = std::make_unique<server::Server>(*m_engine, o);
    auto port = served->start();  // stopped (and its thread joined) when m_served goes
    if (!port) return off(QString::fromStdString(port.error().message));
    m_serve->port = *port;  // a restart (another model) keeps the address clients know
    m_served = std::move(served);
    const QString shownHost = o.host.find(':') != std::string::npos ? "[" + m_serve->host + "]" : m_serve->host;
    emit serverStarted(QStringLiteral("http://%1:%2/v1").arg(shownHost).arg(*port), QString::fromStdString(o.modelId));
}

}  // namespace spillway::ui
