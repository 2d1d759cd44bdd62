// spillway: the desktop app. Wiring only: options, the demo model's path, the window.

#include <QApplication>
#include <QCommandLineParser>
#include <QLineEdit>
#include <QPixmap>
#include <QStandardPaths>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ui/chat_window.h"

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

// --screenshot: send one prompt, wait for the reply, save the window as PNG, quit.
void driveScreenshot(spillway::ui::ChatWindow& window, const QString& prompt, const QString& out)
{
    auto fail = [](const QString& why) {
        std::fprintf(stderr, "spillway: screenshot failed: %s\n", qPrintable(why));
        QCoreApplication::exit(1);
    };
    using spillway::ui::ChatWindow;
    QObject::connect(&window, &ChatWindow::modelReady, &window, [&window, prompt] {
        window.promptEdit()->setText(prompt);
        window.send();
    });
    QObject::connect(&window, &ChatWindow::errorShown, &window, fail);
    QObject::connect(&window, &ChatWindow::replyFinished, &window, [&window, out, fail] {
        if (!window.grab().save(out, "PNG"))
            return fail(QStringLiteral("cannot write %1").arg(out));
        std::printf("spillway: wrote %s\n", qPrintable(out));
        QCoreApplication::exit(0);
    });
    QTimer::singleShot(60'000, &window, [fail] { fail(QStringLiteral("no reply within 60 s")); });
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
    QApplication::setApplicationVersion(SPILLWAY_VERSION);
    QGuiApplication::setDesktopFileName(QStringLiteral("io.spillway.Spillway"));  // packaging/linux

    QCommandLineParser parser;
    parser.setApplicationDescription("Spillway: chat locally with language models.");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption modelOption("model", "GGUF model file or model package folder (default: the bundled demo model).",
                                   "PATH", QString::fromStdString(demoModelPath()));
    QCommandLineOption screenshotOption(
        "screenshot", "Send --prompt, wait for the reply, save the window to OUT.png, exit.",
        "OUT.png");
    QCommandLineOption promptOption("prompt", "Prompt for --screenshot.", "TEXT");
    QCommandLineOption dataOption("data-dir",
                                  "Folder of the chat history (default: the user's data folder; "
                                  "--screenshot keeps none).",
                                  "DIR");
    parser.addOptions({modelOption, screenshotOption, promptOption, dataOption});
    parser.process(app);

    if (parser.isSet(screenshotOption) && parser.value(promptOption).isEmpty()) {
        std::fprintf(stderr, "spillway: --screenshot needs --prompt TEXT\n");
        return 2;
    }

    QString dataDir = parser.value(dataOption);
    if (dataDir.isEmpty() && !parser.isSet(screenshotOption))
        dataDir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    spillway::ui::ChatWindow window(parser.value(modelOption), dataDir);
    if (parser.isSet(screenshotOption))
        driveScreenshot(window, parser.value(promptOption), parser.value(screenshotOption));
    window.show();
    return app.exec();
}
