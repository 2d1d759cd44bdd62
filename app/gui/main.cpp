// spillway: the desktop app. Wiring only: options, the demo model's path, the window.

#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QPalette>
#include <QPixmap>
#include <QLineEdit>
#include <QListView>
#include <QListWidget>
#include <QTableWidget>
#include <QStandardPaths>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "ui/bottleneck_view.h"
#include "ui/chat_controller.h"
#include "ui/chat_window.h"
#include "ui/discover_controller.h"
#include "ui/prompt_edit.h"
#include "ui/library_controller.h"
#include "ui/model_catalog_model.h"
#include "ui/translation.h"
#include "ui/tuning_panel.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "server/server.h"

namespace {

// The bundled demo model: installed beside the binary, or in the source tree for a build.
std::string demoModelPath()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto installed =
            exe.parent_path().parent_path() / "share/spillway/models/stories260K.gguf";
        if (std::filesystem::exists(installed, ec)) return installed.string();
    }
    return SPILLWAY_DEMO_MODEL_BUILD;
}

bool envSet(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v;
}

bool hasArgument(int argc, char** argv, const char* name)
{
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == name || std::string_view(argv[i]).starts_with(
                std::string(name) + "="))
            return true;
    return false;
}

// --screenshot OUT.png --scene welcome|chat|settings|dark|library|tuning|visualizer|remote|experts|discover: real content, rendered without a display.
//   welcome:    the first-launch screen once the machine is measured;
//   chat:       one prompt and its reply, the conversation in the list;
//   settings:   the same with the chat's settings open beside it (a system prompt typed in);
//   dark:       the chat in a dark palette (Fusion style);
//   library:    the Models view: the demo model compressed with the fast and the balanced presets
//               (the latter flagged below the quality bar); "models" is the same scene;
//   visualizer: the bottleneck dock after that reply (the real trace of the engine);
//   tuning:     the measured machine and the planner's placement under tight budgets, applied,
//               after one reply: the lane table's probe, calibrated and measured columns;
//   remote:     a remote endpoint's model answering (the demo model served on loopback by an
//               in-process server, added through the library as a user adds one), the visualizer
//               saying that the compute is remote;
//   experts:    a mixture of experts (--model) with its experts on the SSD, after one reply: the
//               visualizer's expert cache strip;
//   discover:   the Discover view against the Hub at $HF_ENDPOINT (tests/ui/test_screenshots.sh
//               starts the test tree's): a search, a repository's files with the planner's
//               verdicts, one downloaded into the library and one paused part-way.
// A widget of the window by its object name (chat_window.h lists them).
// A missing one (renamed, or of another type) ends the program saying which, not with a crash.
template <class T>
T* part(QWidget& window, const char* name)
{
    T* found = window.findChild<T*>(QString::fromLatin1(name));
    if (!found) {
        std::fprintf(stderr, "spillway: screenshot failed: no widget named '%s' of the expected type\n", name);
        std::exit(1);
    }
    return found;
}

// The "remote" scene's endpoint: the demo model behind Spillway's own server on a free loopback
// port, on an engine of its own.
struct DemoEndpoint {
    explicit DemoEndpoint(const std::string& model)
    {
        auto loaded = spillway::LlamaModel::load(model);
        if (!loaded) return;
        spillway::engine::EngineOptions options;
        options.backend = "cpu";
        auto opened = spillway::engine::Engine::open(std::move(*loaded), options);
        if (!opened) return;
        engine = std::move(*opened);
        spillway::server::ServerOptions o;
        o.port = 0;
        o.modelId = std::filesystem::path(model).filename().string();
        server = std::make_unique<spillway::server::Server>(*engine, o);
        if (auto port = server->start()) url = QStringLiteral("http://127.0.0.1:%1/v1").arg(*port);
    }
    std::unique_ptr<spillway::engine::Engine> engine;
    std::unique_ptr<spillway::server::Server> server;  // declared after the engine: goes first
    QString url;  // empty when it could not start
};

void driveScreenshot(spillway::ui::ChatWindow& window, const QString& scene, const QString& prompt,
                     const QString& modelPath, const QString& out, const QString& endpointUrl)
{
    auto fail = [](const QString& why) {
        std::fprintf(stderr, "spillway: screenshot failed: %s\n", qPrintable(why));
        QCoreApplication::exit(1);
    };
    auto save = [out, fail](QWidget* widget) {
        if (!widget->grab().save(out, "PNG")) return fail(QStringLiteral("cannot write %1").arg(out));
        std::printf("spillway: wrote %s\n", qPrintable(out));
        QCoreApplication::exit(0);
    };
    using spillway::ui::ChatWindow;
    QObject::connect(&window, &ChatWindow::errorShown, &window, fail);
    if (scene != QLatin1String("welcome")) window.skipWelcome();
    if (scene == QLatin1String("welcome")) {
        QObject::connect(&window, &ChatWindow::tuningReady, &window, [&window, save] {
            QTimer::singleShot(200, &window, [&window, save] { save(&window); });
        });
    } else if (scene == QLatin1String("tuning")) {
        // The model under tight budgets (for the demo model 1 MiB of device memory and 64 KiB of
        // pinned RAM; a model that needs more, such as a hybrid with its recurrent state, gets a
        // quarter more than the planner says streaming everything from the SSD needs), so the plan
        // streams part of it from the SSD; the plan of exactly these budgets applied and one reply
        // written, so the lane table shows the probe's figures, the calibrated prediction and the
        // measured run.
        struct Tight {
            double vram = 1.0, ram = 0.06;  // MiB
            bool applied = false;
        };
        auto tight = std::make_shared<Tight>();
        QObject::connect(&window, &ChatWindow::tuningReady, &window, [&window, tight] {
            window.showView(ChatWindow::View::Tuning);
            part<QSpinBox>(window, "contextLength")->setValue(64);
            part<QDoubleSpinBox>(window, "ramBudget")->setValue(tight->ram);
            part<QDoubleSpinBox>(window, "vramBudget")->setValue(tight->vram);
        });
        QObject::connect(&window, &ChatWindow::tuningPredicted, &window, [&window, tight, fail] {
            if (tight->applied) return;
            auto* tuning = part<spillway::ui::TuningPanel>(window, "tuning");
            if (!tuning->hasPlan()) {
                // "... needs 2.9 MiB of device memory (...) and 1.1 MiB of RAM; the budgets are 1.0 MiB
                // and 0.1 MiB": grow to what it needs, once per budgets tried.
                static const QRegularExpression need(QStringLiteral(
                    "needs ([0-9.]+) MiB of device memory .* and ([0-9.]+) MiB of RAM; the budgets are ([0-9.]+) MiB and ([0-9.]+) MiB"));
                const QRegularExpressionMatch m = need.match(tuning->predictionText());
                if (!m.hasMatch()) return;  // a prediction on the way to the tight budgets, or another failure
                if (std::fabs(m.captured(3).toDouble() - tight->vram) > 0.05 || std::fabs(m.captured(4).toDouble() - tight->ram) > 0.05)
                    return;  // of budgets tried before
                const double vram = std::ceil(m.captured(1).toDouble() * 1.25 * 10) / 10;
                const double ram = std::ceil(m.captured(2).toDouble() * 1.25 * 10) / 10;
                if (vram <= tight->vram && ram <= tight->ram)
                    return fail(QStringLiteral("no plan at the budgets the planner asked for: %1").arg(tuning->predictionText()));
                tight->vram = std::max(vram, tight->vram);
                tight->ram = std::max(ram, tight->ram);
                part<QDoubleSpinBox>(window, "ramBudget")->setValue(tight->ram);
                part<QDoubleSpinBox>(window, "vramBudget")->setValue(tight->vram);
                return;
            }
            const auto& p = window.library()->lastPrediction();
            if (p.settings.vramBudget != qint64(tight->vram * 1024 * 1024) ||
                p.settings.ramBudget != qint64(tight->ram * 1024 * 1024) || p.ssdBytesPerToken <= 0)
                return;
            tight->applied = true;
            part<QPushButton>(window, "applyTuning")->click();
        });
        QObject::connect(&window, &ChatWindow::tuningApplied, &window, [&window, prompt] {
            part<spillway::ui::PromptEdit>(window, "prompt")->setText(prompt);
            window.send();
        });
        QObject::connect(&window, &ChatWindow::replyStored, &window, [&window, save, fail] {
            auto* tuning = part<spillway::ui::TuningPanel>(window, "tuning");
            auto* poll = new QTimer(&window);
            auto waited = std::make_shared<int>(0);
            QObject::connect(poll, &QTimer::timeout, &window, [&window, tuning, poll, waited, save, fail] {
                if (!tuning->lanesText().contains(QLatin1String("last run"))) {
                    if (++*waited > 100) {
                        poll->stop();
                        fail(QStringLiteral("the reply was not measured: %1 (%2)").arg(tuning->lanesText(), tuning->predictionText()));
                    }
                    return;
                }
                poll->stop();
                // What the view says, for the screenshot test to read.
                std::printf("spillway: tuning: %s\n%s\n", qPrintable(tuning->predictionText()),
                            qPrintable(tuning->lanesText()));
                window.showView(ChatWindow::View::Tuning);
                // The placement and the lane table at the panel's foot in view.
                QWidget* apply = part<QWidget>(window, "applyTuning");
                for (QWidget* w = apply; w; w = w->parentWidget())
                    if (auto* area = qobject_cast<QScrollArea*>(w)) area->ensureWidgetVisible(apply);
                QTimer::singleShot(100, &window, [&window, save] { save(&window); });
            });
            poll->start(100);
        });
    } else if (scene == QLatin1String("experts")) {
        // A mixture of experts (--model, e.g. tests/data/models/moe/tiny-mixtral.gguf) under
        // budgets that leave its experts on the SSD: the plan applied, one reply, and the
        // visualizer's expert strip (each layer's hit rate and experts missed per token).
        auto applied = std::make_shared<bool>(false);
        QObject::connect(&window, &ChatWindow::tuningReady, &window, [&window] {
            window.showView(ChatWindow::View::Tuning);
            part<QSpinBox>(window, "contextLength")->setValue(64);
            part<QDoubleSpinBox>(window, "ramBudget")->setValue(0.06);
            part<QDoubleSpinBox>(window, "vramBudget")->setValue(1.6);
        });
        QObject::connect(&window, &ChatWindow::tuningPredicted, &window, [&window, applied, fail] {
            const auto& p = window.library()->lastPrediction();
            if (*applied || p.settings.vramBudget != qint64(1.6 * 1024 * 1024) ||
                p.settings.ramBudget != qint64(0.06 * 1024 * 1024))
                return;
            if (p.ssdBytesPerToken <= 0) return fail(QStringLiteral("--scene experts needs a mixture of experts (--model) "
                                                                    "that these budgets leave on the SSD"));
            *applied = true;
            part<QPushButton>(window, "applyTuning")->click();
        });
        QObject::connect(&window, &ChatWindow::tuningApplied, &window, [&window, prompt] {
            window.showView(ChatWindow::View::Chats);
            part<spillway::ui::PromptEdit>(window, "prompt")->setText(prompt);
            window.send();
        });
        QObject::connect(&window, &ChatWindow::replyStored, &window, [&window, save] {
            QTimer::singleShot(200, &window, [&window, save] {
                // Taller than the dock, so the six lanes keep their room above the strip.
                QWidget* view = part<QWidget>(window, "bottleneck");
                view->resize(view->width(), 420);
                save(view);
            });
        });
    } else if (scene == QLatin1String("discover")) {
        // The Discover view against the Hub at $HF_ENDPOINT (the screenshot script starts the test
        // tree's, tests/data/hub, its content paced): "tiny" searched, the first repository's
        // GGUF files judged for this machine, the recommended one downloaded into the library, a
        // second paused part-way.
        using spillway::ui::DiscoverController;
        using spillway::ui::DownloadEntry;
        DiscoverController* discover = window.discover();
        auto step = std::make_shared<int>(0);  // 0 search, 1 judging, 2 first download, 3 second, 4 paused
        QObject::connect(&window, &ChatWindow::tuningReady, &window, [&window, discover] {
            window.showView(ChatWindow::View::Discover);
            part<QWidget>(window, "bottleneckDock")->hide();  // the view's tables need the room
            part<QLineEdit>(window, "discoverSearch")->setText(QStringLiteral("tiny"));
            discover->search(QStringLiteral("tiny"));
        });
        QObject::connect(discover, &DiscoverController::searched, &window, [&window, discover, step, fail] {
            if (discover->repositories().empty()) return fail(QStringLiteral("the Hub at HF_ENDPOINT found nothing for 'tiny'"));
            *step = 1;
            part<QListWidget>(window, "discoverRepos")->setCurrentRow(0);
        });
        QObject::connect(discover, &DiscoverController::modelsChanged, &window, [&window, discover, step, fail] {
            if (*step != 1 || discover->isJudging() || discover->models().empty()) return;
            if (discover->recommended() < 0) return fail(QStringLiteral("no file was judged"));
            *step = 2;
            part<QPushButton>(window, "discoverDownload")->click();  // the recommended row is selected
        });
        QObject::connect(discover, &DiscoverController::downloadFinished, &window, [discover, step] {
            if (*step != 2) return;
            *step = 3;
            for (int i = 0; i < int(discover->models().size()); ++i)
                if (discover->download(i)) return;  // the first not downloaded yet
        });
        QObject::connect(discover, &DiscoverController::queueChanged, &window, [&window, discover, step, save] {
            if (*step < 3 || discover->queue().size() < 2) return;
            const DownloadEntry& e = discover->queue().last();
            if (*step == 3 && e.state == DownloadEntry::State::Downloading && e.done * 5 >= e.total * 2) {
                *step = 4;
                discover->pause(e.key);
            } else if (*step == 4 && e.state == DownloadEntry::State::Paused) {
                *step = 5;
                part<QTableWidget>(window, "discoverQueue")->selectRow(int(discover->queue().size()) - 1);
                QTimer::singleShot(200, &window, [&window, save] { save(&window); });
            }
        });
    } else if (scene == QLatin1String("library") || scene == QLatin1String("models")) {
        // The Models view: the demo model compressed twice, "fast" (passes the quality bar) and
        // "balanced" (50 % pruning is too much for 260K parameters: its card is flagged).
        QObject::connect(&window, &ChatWindow::modelReady, &window, [&window, modelPath] {
            window.showView(ChatWindow::View::Models);
            window.library()->addModel(modelPath);
        });
        auto presets = std::make_shared<QStringList>(QStringList{QStringLiteral("fast"), QStringLiteral("balanced")});
        auto next = [&window, presets] {
            const QAbstractItemModel* models = part<QListView>(window, "models")->model();
            if (presets->isEmpty() || window.library()->isCompressing() || models->rowCount() == 0) return false;
            window.library()->compressModel(models->index(0, 0).data(spillway::ui::ModelCatalogModel::IdRole).toLongLong(),
                                            presets->takeFirst());
            return true;
        };
        QObject::connect(&window, &ChatWindow::modelsListed, &window, [next](int count) {
            if (count == 1) next();
        });
        // Done when the cards show the planner's prediction before and after the last one.
        QObject::connect(&window, &ChatWindow::compressionCompared, &window, [&window, save, next] {
            if (!next()) QTimer::singleShot(100, &window, [&window, save] { save(&window); });
        });
    } else if (scene == QLatin1String("remote")) {
        // The local model first; then the endpoint's, added as a user adds one, answers.
        if (endpointUrl.isEmpty()) return fail(QStringLiteral("the demo endpoint did not start"));
        auto loads = std::make_shared<int>(0);
        QObject::connect(&window, &ChatWindow::modelReady, &window, [&window, endpointUrl, prompt, loads] {
            if (++*loads == 1) {
                window.library()->addEndpoint(endpointUrl, QString(), false);
                return;
            }
            window.showView(ChatWindow::View::Chats);
            part<spillway::ui::PromptEdit>(window, "prompt")->setText(prompt);
            window.send();
        });
        // Once the library lists the endpoint's model, it answers.
        QObject::connect(&window, &ChatWindow::modelsListed, &window, [&window, loads] {
            if (*loads != 1) return;
            for (const auto& m : window.library()->catalog()->models())
                if (m.format == QLatin1String("endpoint") && window.controller()->loadModel(m.path, m.id)) return;
        });
        QObject::connect(&window, &ChatWindow::replyStored, &window, [&window, save] {
            QTimer::singleShot(200, &window, [&window, save] { save(&window); });
        });
    } else {
        const bool settings = scene == QLatin1String("settings");
        QObject::connect(&window, &ChatWindow::modelReady, &window, [&window, prompt, settings] {
            if (settings) {  // the chat's settings open beside it, with a system prompt
                part<QPushButton>(window, "settingsToggle")->click();
                part<QPlainTextEdit>(window, "systemPrompt")
                    ->setPlainText(QStringLiteral("You tell short, gentle bedtime stories."));
            }
            part<spillway::ui::PromptEdit>(window, "prompt")->setText(prompt);
            window.send();
        });
        const bool visualizer = scene == QLatin1String("visualizer");
        // Wait until the reply is stored and listed, then let the visualizer poll once more.
        QObject::connect(&window, &ChatWindow::replyStored, &window, [&window, save, visualizer] {
            QTimer::singleShot(200, &window, [&window, save, visualizer] {
                save(visualizer ? part<QWidget>(window, "bottleneck") : &window);
            });
        });
    }
    // A first launch measures the machine before the tuning and models scenes can show a plan
    // (about a minute on a loaded 2-core machine); past 5 minutes something is wrong.
    QTimer::singleShot(300'000, &window, [fail] { fail(QStringLiteral("not done within 300 s")); });
}

}  // namespace

int main(int argc, char** argv)
{
    const bool screenshot = hasArgument(argc, argv, "--screenshot");
    const bool haveDisplay =
        envSet("DISPLAY") || envSet("WAYLAND_DISPLAY") || envSet("QT_QPA_PLATFORM");
    // Qt aborts when it finds no display; say why instead, or render offscreen where no window
    // needs to be seen (--screenshot, --help, --version).
    if (!haveDisplay) {
        const bool windowless = screenshot || hasArgument(argc, argv, "--help")
                                || hasArgument(argc, argv, "-h")
                                || hasArgument(argc, argv, "--version");
        if (!windowless) {
            std::fprintf(stderr, "spillway: no display found; set DISPLAY, or run spillway-cli "
                                 "for the terminal\n");
            return 1;
        }
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }

    QApplication app(argc, argv);
    QApplication::setApplicationName("spillway");
    spillway::ui::installTranslation(app);  // the system's language, where there is a translation
    QApplication::setApplicationVersion(SPILLWAY_VERSION);
    QGuiApplication::setDesktopFileName(QStringLiteral("io.spillway.Spillway"));  // packaging/linux

    QCommandLineParser parser;
    parser.setApplicationDescription("Spillway: chat locally with language models.");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption modelOption("model", "GGUF model file or model package folder (default: the bundled demo model).",
                                   "PATH", QString::fromStdString(demoModelPath()));
    QCommandLineOption screenshotOption(
        "screenshot", "Render --scene with real content into OUT.png and exit (no display needed; --size sets the window's).",
        "OUT.png");
    QCommandLineOption promptOption("prompt", "Prompt for --screenshot (chat, visualizer).", "TEXT",
                                    QStringLiteral("Once upon a time"));
    QCommandLineOption sceneOption("scene", "Scene for --screenshot: welcome, chat, settings, dark, library, tuning, visualizer, remote, experts (with a mixture of experts as --model) or discover (with HF_ENDPOINT).", "SCENE",
                                   QStringLiteral("chat"));
    QCommandLineOption dataOption("data-dir",
                                  "Folder of the chat history (default: the user's data folder; "
                                  "--screenshot keeps none).",
                                  "DIR");
    QCommandLineOption backendOption("backend",
                                     "Device that computes: auto (a CUDA GPU, else a Vulkan GPU, else the CPU), "
                                     "cpu, cuda or vulkan (default: auto, or $SPILLWAY_BACKEND).",
                                     "BACKEND");
    QCommandLineOption sizeOption("size", "Window size for --screenshot, e.g. 1366x768 (default 1200x800).", "WxH",
                                  QStringLiteral("1200x800"));
    parser.addOptions({modelOption, screenshotOption, promptOption, sceneOption, dataOption, backendOption, sizeOption});
    parser.addPositionalArgument("files", "Models to add to the library (GGUF files, package folders); the first "
                                          "answers (instead of --model).",
                                 "[FILE...]");
    parser.process(app);
    if (parser.isSet(backendOption)) {
        const QString backend = parser.value(backendOption);
        if (backend != "auto" && backend != "cpu" && backend != "cuda" && backend != "vulkan") {
            std::fprintf(stderr, "spillway: --backend must be auto, cpu, cuda or vulkan\n");
            return 2;
        }
        qputenv("SPILLWAY_BACKEND", backend.toUtf8());  // read by the chat window's inference worker
    }

    const QString scene = parser.value(sceneOption);
    if (parser.isSet(screenshotOption) && scene == QLatin1String("dark")) {
        // The chat as a dark desktop theme shows it: Fusion with a dark palette.
        QApplication::setStyle(QStringLiteral("Fusion"));
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2e));
        dark.setColor(QPalette::WindowText, QColor(0xe6, 0xe6, 0xe6));
        dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x20));
        dark.setColor(QPalette::AlternateBase, QColor(0x2b, 0x2b, 0x2e));
        dark.setColor(QPalette::Text, QColor(0xe6, 0xe6, 0xe6));
        dark.setColor(QPalette::PlaceholderText, QColor(0x9a, 0x9a, 0xa0));
        dark.setColor(QPalette::Button, QColor(0x3a, 0x3a, 0x3e));
        dark.setColor(QPalette::ButtonText, QColor(0xe6, 0xe6, 0xe6));
        dark.setColor(QPalette::Highlight, QColor(0x3d, 0x7e, 0xd6));
        dark.setColor(QPalette::HighlightedText, Qt::white);
        dark.setColor(QPalette::ToolTipBase, QColor(0x3a, 0x3a, 0x3e));
        dark.setColor(QPalette::ToolTipText, QColor(0xe6, 0xe6, 0xe6));
        dark.setColor(QPalette::Link, QColor(0x7a, 0xb3, 0xff));
        for (QPalette::ColorRole role : {QPalette::ButtonText, QPalette::Text, QPalette::WindowText})
            dark.setColor(QPalette::Disabled, role, QColor(0x80, 0x80, 0x86));
        QApplication::setPalette(dark);
    }
    if (parser.isSet(screenshotOption) && scene != "welcome" && scene != "chat" && scene != "settings" &&
        scene != "dark" && scene != "models" && scene != "library" && scene != "visualizer" && scene != "tuning" &&
        scene != "remote" && scene != "experts" && scene != "discover") {
        std::fprintf(stderr, "spillway: --scene must be welcome, chat, settings, dark, library, tuning, visualizer, remote, "
                             "experts or discover\n");
        return 2;
    }

    // A screenshot keeps its chats and packages in a temporary folder (removed on exit).
    QTemporaryDir screenshotData;
    QString dataDir = parser.value(dataOption);
    if (dataDir.isEmpty())
        dataDir = parser.isSet(screenshotOption) ? screenshotData.path()
                                                 : QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    // `spillway FILE...` (and the desktop entry's %F): the files join the library, the first answers.
    QStringList files;
    for (const QString& f : parser.positionalArguments()) files << QFileInfo(f).absoluteFilePath();
    // Neither --model nor a file (and no screenshot): the model used last, else the demo model.
    const bool modelGiven = parser.isSet(modelOption) || !files.isEmpty() || parser.isSet(screenshotOption);
    const QString modelPath = !files.isEmpty() && !parser.isSet(modelOption) ? files.first() : parser.value(modelOption);
    std::unique_ptr<DemoEndpoint> endpoint;  // the remote scene's: outlives the window
    if (parser.isSet(screenshotOption) && scene == QLatin1String("remote"))
        endpoint = std::make_unique<DemoEndpoint>(modelPath.toStdString());
    spillway::ui::ChatWindow window(modelGiven ? modelPath : QString(), dataDir, nullptr, parser.value(modelOption));
    if (window.library())
        for (const QString& f : files) window.library()->addModel(f);
    QSize screenshotSize(1200, 800);
    if (parser.isSet(screenshotOption)) {
        const QStringList wh = parser.value(sizeOption).split(QLatin1Char('x'));
        const int w = wh.size() == 2 ? wh[0].toInt() : 0, h = wh.size() == 2 ? wh[1].toInt() : 0;
        if (w < 640 || h < 480 || w > 7680 || h > 4320) {
            std::fprintf(stderr, "spillway: --size must be WIDTHxHEIGHT, at least 640x480\n");
            return 2;
        }
        screenshotSize = QSize(w, h);
    }
    if (parser.isSet(screenshotOption)) {
        window.resize(screenshotSize);  // (offscreen, the screen is 800x600: the size is the scene's own)
        window.controller()->setTemperature(0.0);
        window.controller()->setMaxTokens(96);
        driveScreenshot(window, scene, parser.value(promptOption), modelPath, parser.value(screenshotOption),
                        endpoint ? endpoint->url : QString());
    }
    window.show();
    return app.exec();
}
