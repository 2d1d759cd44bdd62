// Remote endpoints as models and the app's own server (issue 29), tested against Spillway's own
// server on loopback: the inference worker chats with an endpoint's model (the same greedy text
// as the local model, stop, a missing model, an unreachable address, an API key), the window's
// library adds an endpoint's models through its dialog (the key kept only with consent, 0600,
// never in the history or an export) and the visualizer says the compute is remote; the Server
// menu's toggle serves the loaded model to an OpenAI client while the chat goes on beside it.

#include <QDialog>
#include <QDialogButtonBox>
#include <QCheckBox>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QAction>
#include <sys/stat.h>
#include <thread>

#include "ui_test_util.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "server/openai_client.h"
#include "server/server.h"
#include "ui/bottleneck_view.h"
#include "ui/generation_worker.h"
#include "ui/library_controller.h"
#include "ui/model_catalog_model.h"
#include "ui/remote_endpoint.h"
#include "ui/server_control.h"

using namespace spillway;
using spillway::ui::GenerationWorker;
using spillway::ui::MessageItem;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
const char* const kPrompt = "Once upon a time";
constexpr int kTokens = 24;

// Spillway's own server on a free loopback port, over its own engine of the demo model.
struct Endpoint {
    explicit Endpoint(const std::string& apiKey = {})
    {
        auto model = LlamaModel::load(kModel.toStdString());
        if (!model) qFatal("%s", model.error().message.c_str());
        engine::EngineOptions options;
        options.backend = "cpu";
        options.threads = 1;
        auto opened = engine::Engine::open(std::move(*model), options);
        if (!opened) qFatal("%s", opened.error().message.c_str());
        engine = std::move(*opened);
        server::ServerOptions o;
        o.port = 0;
        o.apiKey = apiKey;
        o.modelId = "stories260K.gguf";
        server = std::make_unique<server::Server>(*engine, o);
        auto bound = server->start();
        if (!bound) qFatal("%s", bound.error().message.c_str());
        port = *bound;
    }
    QString url() const { return QStringLiteral("http://127.0.0.1:%1/v1").arg(port); }
    QString modelPath() const { return ui::endpointPath(url(), QStringLiteral("stories260K.gguf")); }
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<server::Server> server;  // declared after the engine: goes first
    int port = 0;
};

MessageItem userMessage(const QString& text)
{
    MessageItem m;
    m.role = QStringLiteral("user");
    m.content = text;
    return m;
}

struct Reply {
    QString text;
    QString end;
    int tokens = 0;
    double ttftMs = 0, tokensPerSecond = 0;
    QString error;
};

// The worker's greedy reply to the prompt (generate runs on this thread: the worker was not moved).
Reply replyOf(GenerationWorker& worker, int tokens = kTokens, const std::function<void(const QString&)>& onText = {})
{
    Reply r;
    QObject ctx;
    QObject::connect(&worker, &GenerationWorker::tokens, &ctx, [&](const QString& t) {
        r.text += t;
        if (onText) onText(t);
    });
    QObject::connect(&worker, &GenerationWorker::finished, &ctx, [&](double tps, double ttft, int n, const QString& end) {
        r.tokensPerSecond = tps;
        r.ttftMs = ttft;
        r.tokens = n;
        r.end = end;
    });
    QObject::connect(&worker, &GenerationWorker::failed, &ctx, [&](const QString& m) { r.error = m; });
    worker.generate({userMessage(QString::fromUtf8(kPrompt))}, tokens, 0.0);
    return r;
}

// The local model's greedy reply, the reference for every remote one.
QString localText()
{
    static const QString text = [] {
        GenerationWorker worker;
        worker.setBackend(QStringLiteral("cpu"));
        worker.loadModel(kModel);
        return replyOf(worker).text;
    }();
    return text;
}

}  // namespace

class TestRemoteAndServer : public QObject {
    Q_OBJECT
private slots:
    void endpointAddressesAreNormalized();
    void keysAreKeptOnlyWithConsentAndPrivately();
    void workerChatsWithAnEndpointAsWithTheLocalModel();
    void workerStopsARemoteReplyAndRefusesWhatCannotBeReached();
    void workerSendsTheEndpointsKey();
    void workerServesTheLocalModelBesideTheChat();
    void windowAddsAnEndpointAndChatsWithIt();
    void windowServerToggleServesTheLoadedModel();
};

void TestRemoteAndServer::endpointAddressesAreNormalized()
{
    using ui::normalizeEndpointUrl;
    QCOMPARE(normalizeEndpointUrl(QStringLiteral("localhost:8080")), QStringLiteral("http://localhost:8080/v1"));
    QCOMPARE(normalizeEndpointUrl(QStringLiteral(" http://127.0.0.1:8080/ ")), QStringLiteral("http://127.0.0.1:8080/v1"));
    QCOMPARE(normalizeEndpointUrl(QStringLiteral("http://h:11434/v1/")), QStringLiteral("http://h:11434/v1"));
    QCOMPARE(normalizeEndpointUrl(QStringLiteral("https://api.example.com/openai/v1")),
             QStringLiteral("https://api.example.com/openai/v1"));
    QVERIFY(normalizeEndpointUrl(QStringLiteral("ftp://h/v1")).isEmpty());
    QVERIFY(normalizeEndpointUrl(QStringLiteral("http://user:secret@h/v1")).isEmpty());  // no credentials in a path
    QVERIFY(normalizeEndpointUrl(QStringLiteral("   ")).isEmpty());
    const auto ref = ui::parseEndpointPath(ui::endpointPath(QStringLiteral("http://h:1/v1"), QStringLiteral("m#1")));
    QVERIFY(ref);
    QCOMPARE(ref->url, QStringLiteral("http://h:1/v1"));
    QCOMPARE(ref->model, QStringLiteral("m#1"));
    QVERIFY(!ui::parseEndpointPath(kModel));
    QCOMPARE(ui::endpointHost(QStringLiteral("http://127.0.0.1:8080/v1")), QStringLiteral("127.0.0.1:8080"));
}

void TestRemoteAndServer::keysAreKeptOnlyWithConsentAndPrivately()
{
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("endpoint-keys.json"));
    {
        ui::EndpointKeys keys(file);
        QVERIFY(keys.set(QStringLiteral("http://a/v1"), QStringLiteral("session-only"), false).isEmpty());
        QCOMPARE(keys.key(QStringLiteral("http://a/v1")), QStringLiteral("session-only"));
        QVERIFY(!QFile::exists(file));  // nothing on disk without consent
        QVERIFY(keys.set(QStringLiteral("http://b/v1"), QStringLiteral("kept-key"), true).isEmpty());
        QVERIFY(QFile::exists(file));
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(file).constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray bytes = f.readAll();
        QVERIFY(bytes.contains("kept-key"));
        QVERIFY(!bytes.contains("session-only"));
    }
    // A copy with wider permissions is made private again, and its keys are known after a restart.
    QVERIFY(::chmod(QFile::encodeName(file).constData(), 0644) == 0);
    ui::EndpointKeys again(file);
    struct stat st {};
    QCOMPARE(::stat(QFile::encodeName(file).constData(), &st), 0);
    QCOMPARE(int(st.st_mode & 0777), 0600);
    QCOMPARE(again.key(QStringLiteral("http://b/v1")), QStringLiteral("kept-key"));
    QVERIFY(again.key(QStringLiteral("http://a/v1")).isEmpty());
    // Forgetting it (an empty key) takes it off the disk.
    QVERIFY(again.set(QStringLiteral("http://b/v1"), QString(), false).isEmpty());
    QFile f(file);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(!f.readAll().contains("kept-key"));
}

void TestRemoteAndServer::workerChatsWithAnEndpointAsWithTheLocalModel()
{
    const QString expected = localText();
    QVERIFY(!expected.isEmpty());
    Endpoint endpoint;
    GenerationWorker worker;
    worker.setBackend(QStringLiteral("cpu"));
    worker.loadModel(kModel);  // a local model first: the remote one replaces it
    QSignalSpy loaded(&worker, &GenerationWorker::modelLoaded);
    QSignalSpy unloaded(&worker, &GenerationWorker::unloaded);
    QSignalSpy device(&worker, &GenerationWorker::deviceChanged);
    worker.loadModel(endpoint.modelPath());
    QCOMPARE(loaded.count(), 1);
    QVERIFY2(loaded.at(0).at(0).toString().contains(QStringLiteral("remote")), qPrintable(loaded.at(0).at(0).toString()));
    QCOMPARE(unloaded.count(), 1);
    QCOMPARE(unloaded.at(0).at(0).toString(), QStringLiteral("stories260K.gguf"));
    QCOMPARE(device.count(), 1);
    QCOMPARE(device.at(0).at(0).toString(), QStringLiteral("remote"));

    const Reply r = replyOf(worker);
    QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
    QCOMPARE(r.text, expected);
    QCOMPARE(r.end, QStringLiteral("limit"));
    QCOMPARE(r.tokens, kTokens);
    QVERIFY(r.ttftMs > 0);
    QVERIFY(r.tokensPerSecond > 0);
    // History: a second turn carries the first (the endpoint sees the whole conversation).
    QString second;
    QObject ctx;
    QObject::connect(&worker, &GenerationWorker::tokens, &ctx, [&](const QString& t) { second += t; });
    MessageItem assistant;
    assistant.role = QStringLiteral("assistant");
    assistant.content = r.text;
    worker.generate({userMessage(QString::fromUtf8(kPrompt)), assistant, userMessage(QStringLiteral("Then"))}, 8, 0.0);
    QVERIFY(!second.isEmpty());
    // A plan is for local models: said, and the remote one goes on.
    QSignalSpy failed(&worker, &GenerationWorker::failed);
    worker.applyPlan({});
    QCOMPARE(failed.count(), 1);
    QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("remote")));
    // Back to the local file: it answers again, the same text.
    worker.loadModel(kModel);
    QCOMPARE(replyOf(worker).text, expected);
}

void TestRemoteAndServer::workerStopsARemoteReplyAndRefusesWhatCannotBeReached()
{
    Endpoint endpoint;
    GenerationWorker worker;
    worker.loadModel(endpoint.modelPath());
    // Stop after the first text: the reply ends there, said as stopped.
    const Reply r = replyOf(worker, 0, [&](const QString&) { worker.requestStop(); });
    QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
    QCOMPARE(r.end, QStringLiteral("stopped"));
    QVERIFY(!r.text.isEmpty());
    worker.clearStop();
    // A stop asked before the request (a long prompt on the endpoint, before any text) ends it
    // at once, without text.
    worker.requestStop();
    const Reply early = replyOf(worker, 0);
    QVERIFY2(early.error.isEmpty(), qPrintable(early.error));
    QCOMPARE(early.end, QStringLiteral("stopped"));
    QVERIFY(early.text.isEmpty());
    worker.clearStop();

    // A model the endpoint does not list, an address nobody answers: errors, and the remote
    // model loaded before still answers.
    QSignalSpy failed(&worker, &GenerationWorker::failed);
    QSignalSpy loaded(&worker, &GenerationWorker::modelLoaded);
    worker.loadModel(ui::endpointPath(endpoint.url(), QStringLiteral("no-such-model")));
    QCOMPARE(failed.count(), 1);
    QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("no-such-model")), qPrintable(failed.at(0).at(0).toString()));
    worker.loadModel(ui::endpointPath(QStringLiteral("http://127.0.0.1:1/v1"), QStringLiteral("m")));
    QCOMPARE(failed.count(), 2);
    QVERIFY(!failed.at(1).at(0).toString().isEmpty());
    QCOMPARE(loaded.count(), 0);
    QCOMPARE(replyOf(worker).text, localText());
}

void TestRemoteAndServer::workerSendsTheEndpointsKey()
{
    Endpoint endpoint("sekrit-key");
    ui::EndpointKeys keys;
    GenerationWorker worker;
    worker.setEndpointKeys(&keys);
    QSignalSpy failed(&worker, &GenerationWorker::failed);
    worker.loadModel(endpoint.modelPath());
    QCOMPARE(failed.count(), 1);  // no key: refused by the endpoint, and said so
    QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("401")) ||
                 failed.at(0).at(0).toString().contains(QStringLiteral("API key")),
             qPrintable(failed.at(0).at(0).toString()));
    QVERIFY2(!failed.at(0).at(0).toString().contains(QStringLiteral("sekrit")), "the key is never in a message");
    keys.set(endpoint.url(), QStringLiteral("sekrit-key"), false);
    QSignalSpy loaded(&worker, &GenerationWorker::modelLoaded);
    worker.loadModel(endpoint.modelPath());
    QCOMPARE(loaded.count(), 1);
    QVERIFY(!loaded.at(0).at(0).toString().contains(QStringLiteral("sekrit")));
    QCOMPARE(replyOf(worker).text, localText());
}

void TestRemoteAndServer::workerServesTheLocalModelBesideTheChat()
{
    const QString expected = localText();
    GenerationWorker worker;
    worker.setBackend(QStringLiteral("cpu"));
    QSignalSpy started(&worker, &GenerationWorker::serverStarted);
    QSignalSpy stopped(&worker, &GenerationWorker::serverStopped);
    // Asked before a model: it says why it cannot.
    worker.startServer(QStringLiteral("127.0.0.1"), 0, 2, QString());
    QCOMPARE(stopped.count(), 1);
    QVERIFY(!stopped.at(0).at(0).toString().isEmpty());
    // Another address than loopback without a key is refused.
    worker.loadModel(kModel);
    worker.startServer(QStringLiteral("0.0.0.0"), 0, 1, QString());
    QCOMPARE(stopped.count(), 2);
    QVERIFY2(stopped.at(1).at(0).toString().contains(QStringLiteral("API key")), qPrintable(stopped.at(1).at(0).toString()));

    worker.startServer(QStringLiteral("127.0.0.1"), 0, 2, QString());
    QCOMPARE(started.count(), 1);
    const QString url = started.at(0).at(0).toString();
    QCOMPARE(started.at(0).at(1).toString(), QStringLiteral("stories260K.gguf"));
    QVERIFY2(url.startsWith(QStringLiteral("http://127.0.0.1:")) && url.endsWith(QStringLiteral("/v1")), qPrintable(url));

    // A client streams from the server while the chat replies on this thread: they take turns at
    // the one engine, and both get the greedy text.
    std::string clientText, clientError;
    std::thread client([&] {
        server::EndpointOptions o;
        o.url = url.toStdString();
        auto c = server::OpenAiClient::open(o);
        if (!c) {
            clientError = c.error().message;
            return;
        }
        SamplerSettings greedy;
        greedy.temperature = 0;
        const std::vector<engine::Message> messages = {{"user", kPrompt}};
        for (int i = 0; i < 3; ++i) {  // long enough to overlap the chat's reply
            auto reply = (*c)->chat(messages, greedy, kTokens, {});
            if (!reply) {
                clientError = reply.error().message;
                return;
            }
            clientText = reply->text;
        }
    });
    QString chatText;
    for (int i = 0; i < 3; ++i) chatText = replyOf(worker).text;
    client.join();
    QVERIFY2(clientError.empty(), clientError.c_str());
    QCOMPARE(QString::fromStdString(clientText), expected);
    QCOMPARE(chatText, expected);

    // Another model (a copy under another name): the server stops while it loads and starts
    // again on it, at the same address.
    QTemporaryDir dir;
    const QString other = dir.filePath(QStringLiteral("other.gguf"));
    QVERIFY(QFile::copy(kModel, other));
    worker.loadModel(other);
    QCOMPARE(started.count(), 2);
    QCOMPARE(started.at(1).at(0).toString(), url);
    QCOMPARE(started.at(1).at(1).toString(), QStringLiteral("other.gguf"));
    // A remote model: the server serves local models only, it stops and says so.
    {
        Endpoint endpoint;
        worker.loadModel(endpoint.modelPath());
        QCOMPARE(stopped.count(), 3);
        QVERIFY2(stopped.at(2).at(0).toString().contains(QStringLiteral("remote")), qPrintable(stopped.at(2).at(0).toString()));
    }
    // Turned off: the address answers no more.
    worker.loadModel(kModel);
    worker.startServer(QStringLiteral("127.0.0.1"), 0, 1, QString());
    QCOMPARE(started.count(), 3);
    const QString last = started.at(2).at(0).toString();
    worker.stopServer();
    QCOMPARE(stopped.count(), 4);
    QVERIFY(stopped.at(3).at(0).toString().isEmpty());
    server::EndpointOptions o;
    o.url = last.toStdString();
    o.timeoutSeconds = 5;
    auto c = server::OpenAiClient::open(o);
    QVERIFY(c);
    QVERIFY(!(*c)->models());
}

void TestRemoteAndServer::windowAddsAnEndpointAndChatsWithIt()
{
    const QString expected = localText();
    Endpoint endpoint("window-key-123");
    QTemporaryDir data;
    {
        ui::ChatWindow window(kModel, data.path());
        window.skipWelcome();
        window.show();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 1, 10'000);
        window.showView(ui::ChatWindow::View::Models);

        // The dialog, as a user fills it: the address as typed (no /v1), the key, consent to keep it.
        QTest::mouseClick(part<QPushButton>(window, "addEndpoint"), Qt::LeftButton);
        QDialog* dialog = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((dialog = window.findChild<QDialog*>(QStringLiteral("endpointDialog"))) != nullptr, 5'000);
        auto* ok = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
        QVERIFY(!ok->isEnabled());
        part<QLineEdit>(*dialog, "endpointUrl")->setText(QStringLiteral("127.0.0.1:%1").arg(endpoint.port));
        part<QLineEdit>(*dialog, "endpointKey")->setText(QStringLiteral("window-key-123"));
        part<QCheckBox>(*dialog, "rememberKey")->setChecked(true);
        QTest::mouseClick(ok, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 2, 10'000);
        int row = rowTextOf(window, "models", 0).contains(QStringLiteral("Remote")) ? 0 : 1;
        QVERIFY2(rowTextOf(window, "models", row).contains(endpoint.url()), qPrintable(rowTextOf(window, "models", row)));
        QVERIFY(!rowTextOf(window, "models", row).contains(QStringLiteral("window-key")));
        // Kept with consent, readable by the user alone.
        const QString keyFile = QDir(data.path()).filePath(QStringLiteral("endpoint-keys.json"));
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(keyFile).constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);

        // Chat with it: the greedy text of the local model, the visualizer says where it runs.
        part<QListView>(window, "models")->setCurrentIndex(part<QListView>(window, "models")->model()->index(row, 0));
        QVERIFY(!part<QPushButton>(window, "compress")->isEnabled());  // its weights are not here
        QSignalSpy ready(&window, &ui::ChatWindow::modelReady);
        QTest::mouseClick(part<QPushButton>(window, "chatWithModel"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30'000);
        QCOMPARE(window.activeBackend(), QStringLiteral("remote"));
        auto* view = part<ui::BottleneckView>(window, "bottleneck");
        QVERIFY2(view->headline().contains(QStringLiteral("remote")), qPrintable(view->headline()));
        QCOMPARE(view->remote(), QStringLiteral("127.0.0.1:%1").arg(endpoint.port));
        window.controller()->setTemperature(0);
        window.controller()->setMaxTokens(kTokens);
        QSignalSpy finished(&window, &ui::ChatWindow::replyFinished);
        promptOf(window)->setText(QString::fromUtf8(kPrompt));
        QTest::mouseClick(sendButtonOf(window), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
        const auto& messages = window.controller()->messages();
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages.at(1).content, expected);
        QVERIFY2(view->detailLine().contains(QStringLiteral("time to first token")), qPrintable(view->detailLine()));
        QVERIFY2(statusTextOf(window).contains(QStringLiteral("tokens/s")), qPrintable(statusTextOf(window)));
        QSignalSpy stored(&window, &ui::ChatWindow::replyStored);
        QTRY_VERIFY_WITH_TIMEOUT(!storedMessages(data.path(), window.controller()->currentConversation()).empty(), 10'000);
        window.close();
    }
    // The key is in no file but its own: not in the history database (nor its WAL).
    QDir dir(data.path());
    for (const QString& name : dir.entryList(QDir::Files)) {
        if (name == QLatin1String("endpoint-keys.json")) continue;
        QFile f(dir.filePath(name));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY2(!f.readAll().contains("window-key-123"), qPrintable(name));
    }
    // A restart knows the key: the endpoint's model answers without asking again.
    ui::EndpointKeys keys(dir.filePath(QStringLiteral("endpoint-keys.json")));
    QCOMPARE(keys.key(endpoint.url()), QStringLiteral("window-key-123"));
}

void TestRemoteAndServer::windowServerToggleServesTheLoadedModel()
{
    const QString expected = localText();
    QTemporaryDir data;
    ui::ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    ui::ServerControl* control = window.server();
    QVERIFY(!control->toggle()->isChecked());  // off by default
    QVERIFY(part<QLabel>(window, "serverStatus")->isHidden());
    control->setPort(0);  // any free port (the test's machine may have 8080 taken)
    QSignalSpy started(control, &ui::ServerControl::started);
    control->toggle()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 10'000);
    const QString url = control->url();
    const QLabel* label = part<QLabel>(window, "serverStatus");
    QVERIFY(!label->isHidden());
    QVERIFY2(label->text().contains(url) && label->text().contains(QStringLiteral("stories260K.gguf")), qPrintable(label->text()));

    // An OpenAI client on this machine gets the model and its greedy text.
    server::EndpointOptions o;
    o.url = url.toStdString();
    auto c = server::OpenAiClient::open(o);
    QVERIFY(c);
    auto ids = (*c)->models();
    QVERIFY(ids);
    QCOMPARE(ids->size(), size_t(1));
    // (The server runs on the inference thread's engine; this thread only waits for it.)
    SamplerSettings greedy;
    greedy.temperature = 0;
    const std::vector<engine::Message> messages = {{"user", kPrompt}};
    auto reply = (*c)->chat(messages, greedy, kTokens, {});
    QVERIFY2(reply, reply ? "" : reply.error().message.c_str());
    const std::string text = reply->text;
    QCOMPARE(QString::fromStdString(text), expected);

    // Off: the label goes, the address answers no more, and the choice is kept.
    QSignalSpy stopped(control, &ui::ServerControl::stopped);
    control->toggle()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(stopped.count(), 1, 10'000);
    QVERIFY(stopped.at(0).at(0).toString().isEmpty());
    QVERIFY(label->isHidden());
    QVERIFY(!(*c)->models());
    QCOMPARE(control->state().value("on").toBool(), false);
}

QTEST_MAIN(TestRemoteAndServer)
#include "test_remote_and_server.moc"
