// The Discover view (issue 32) against the test tree's Hub in miniature (tests/data/hub served by
// tests/common/fixture_hub.h on 127.0.0.1, HF_ENDPOINT pointing at it): a search typed into the
// view, a repository picked, each GGUF file judged for this machine from its header alone, a file
// picked and downloaded into the library's catalog; a download paused, the window closed and
// opened again, resumed from its .part (bytes sent in all at most 1.1 x the file), and one the
// window's exit interrupted resumed by itself; a cancel that removes the .part; a corrupted
// file caught by its checksum, deleted, with the reason in its row; a gated
// repository that asks for a token (kept 0600 when remembered); a repository without GGUF files.
// Labels ui and download.

#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QListWidget>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <sys/stat.h>

#include "fixture_hub.h"
#include "ui_test_util.h"
#include "ui/discover_controller.h"
#include "ui/library_controller.h"
#include "ui/model_catalog_model.h"

using namespace spillway;
using spillway::ui::ChatWindow;
using spillway::ui::DiscoverController;
using spillway::ui::DownloadEntry;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
const QString kMoe = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/moe/");
const char* const kRepo = "spillway-test/tiny-moe-GGUF";

QByteArray bytesOf(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

bool inCatalog(const ChatWindow& w, const QString& path)
{
    for (const auto& m : w.library()->catalog()->models())
        if (QFileInfo(m.path) == QFileInfo(path)) return true;
    return false;
}

int fileRow(const DiscoverController* d, const QString& name)
{
    for (int i = 0; i < int(d->models().size()); ++i)
        if (QString::fromStdString(d->models()[size_t(i)].file.path) == name) return i;
    return -1;
}

}  // namespace

class TestDiscover : public QObject {
    Q_OBJECT

private:
    std::unique_ptr<testing_support::FixtureHub> m_hub;
    QTemporaryDir m_cache;

    // A window on `data` showing Discover once the machine is measured (check ready() after).
    void openWindow(const QString& data, std::unique_ptr<ChatWindow>& w)
    {
        w = std::make_unique<ChatWindow>(kModel, data);
        w->skipWelcome();
        SPILLWAY_WAIT_FOR_MODEL(*w, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(w->library()->isTuningReady(), 120000);
        w->showView(ChatWindow::View::Discover);
    }
    // Types `query` into the search box and presses Enter; the repositories found.
    QStringList search(ChatWindow& w, const QString& query)
    {
        QSignalSpy searched(w.discover(), &DiscoverController::searched);
        auto* box = part<QLineEdit>(w, "discoverSearch");
        box->clear();
        QTest::keyClicks(box, query);
        QTest::keyClick(box, Qt::Key_Return);
        if (!searched.wait(10000)) return {QStringLiteral("(no answer)")};
        QStringList ids;
        for (const auto& m : w.discover()->repositories()) ids << QString::fromStdString(m.id);
        return ids;
    }
    // Picks row `row` of the repositories and waits for every file's verdict.
    void pickRepository(ChatWindow& w, int row)
    {
        part<QListWidget>(w, "discoverRepos")->setCurrentRow(row);
        QTRY_VERIFY_WITH_TIMEOUT(!w.discover()->isJudging() && !w.discover()->models().empty(), 30000);
    }
    void pickFile(ChatWindow& w, const QString& name)
    {
        const int row = fileRow(w.discover(), name);
        QVERIFY2(row >= 0, qPrintable(name));
        auto* files = part<QTableWidget>(w, "discoverFiles");
        QTest::mouseClick(files->viewport(), Qt::LeftButton, {}, files->visualItemRect(files->item(row, 0)).center());
        QCOMPARE(files->currentRow(), row);
    }

private slots:
    void initTestCase()
    {
        m_hub = std::make_unique<testing_support::FixtureHub>(SPILLWAY_TEST_DATA_DIR "/hub");
        QVERIFY2(m_hub->ok(), m_hub->error().c_str());
        qputenv("HF_ENDPOINT", QByteArray::fromStdString(m_hub->url()));
        qputenv("HF_TOKEN", "");
        qputenv("HF_TOKEN_PATH", QFile::encodeName(m_cache.filePath("no-token")));
        qputenv("XDG_CACHE_HOME", QFile::encodeName(m_cache.path()));  // headers, the machine's profile
        qputenv("SPILLWAY_QUICK_PROBE", "1");
        qputenv("SPILLWAY_BACKEND", "cpu");
    }

    // Search, pick a repository, see the verdicts, pick a file, download it: it is in the
    // models folder, byte for byte the repository's, no .part beside it, in the catalog.
    void searchesPicksAndDownloadsIntoTheCatalog()
    {
        QTemporaryDir data;
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        QCOMPARE(search(*w, QStringLiteral("tiny")),
                 (QStringList{QStringLiteral("spillway-test/tiny-moe-GGUF"), QStringLiteral("spillway-test/gated-tiny-GGUF")}));
        QCOMPARE(part<QListWidget>(*w, "discoverRepos")->count(), 2);
        QVERIFY(part<QListWidget>(*w, "discoverRepos")->item(1)->text().contains(QStringLiteral("gated")));
        pickRepository(*w, 0);
        const auto& models = w->discover()->models();
        QCOMPARE(int(models.size()), 3);  // the README is no GGUF
        QCOMPARE(w->discover()->otherFiles(), 1);
        auto* files = part<QTableWidget>(*w, "discoverFiles");
        QCOMPARE(files->rowCount(), 3);
        for (int i = 0; i < 3; ++i) {
            QVERIFY2(models[size_t(i)].planned, models[size_t(i)].why.c_str());
            QVERIFY(models[size_t(i)].tokensPerSecond > 0);
            QCOMPARE(models[size_t(i)].tiers[0] + models[size_t(i)].tiers[1] + models[size_t(i)].tiers[2] > 0, true);
            QVERIFY2(files->item(i, 5)->text().contains(QStringLiteral("tokens/s")), qPrintable(files->item(i, 5)->text()));
        }
        // All three predicted above the floor: the largest is recommended, marked and selected.
        const int best = w->discover()->recommended();
        QCOMPARE(QString::fromStdString(models[size_t(best)].file.path), QStringLiteral("tiny-qwen2moe.gguf"));
        QVERIFY(files->item(best, 6)->text().contains(QStringLiteral("Recommended")));
        QCOMPARE(files->currentRow(), best);
        // A floor above every prediction: the fastest is recommended instead.
        double fastest = 0;
        int fastestAt = -1;
        for (int i = 0; i < 3; ++i)
            if (models[size_t(i)].tokensPerSecond > fastest) fastest = models[size_t(i)].tokensPerSecond, fastestAt = i;
        w->discover()->setMinTokensPerSecond(fastest * 2);
        QCOMPARE(w->discover()->recommended(), fastestAt);
        part<QDoubleSpinBox>(*w, "discoverMinSpeed")->setValue(1.0);
        QCOMPARE(w->discover()->recommended(), best);

        pickFile(*w, QStringLiteral("tiny-olmoe.gguf"));
        QSignalSpy finished(w->discover(), &DiscoverController::downloadFinished);
        part<QPushButton>(*w, "discoverDownload")->click();
        QVERIFY(finished.wait(30000));
        const QString dest = QDir(w->library()->modelsFolder()).filePath(QStringLiteral("tiny-olmoe.gguf"));
        QCOMPARE(finished.first().at(1).toString(), dest);
        QVERIFY(bytesOf(dest) == bytesOf(kMoe + "tiny-olmoe.gguf"));
        QVERIFY(!QFile::exists(dest + ".part"));
        QTRY_VERIFY_WITH_TIMEOUT(inCatalog(*w, dest), 20000);
        auto* queue = part<QTableWidget>(*w, "discoverQueue");
        QCOMPARE(queue->rowCount(), 1);
        QTRY_VERIFY(queue->item(0, 2)->text().contains(QStringLiteral("added to the library")));
        // Downloading it again: nothing new is queued.
        QVERIFY(!w->discover()->download(fileRow(w->discover(), QStringLiteral("tiny-olmoe.gguf"))));
    }

    // A split GGUF (the fixture's mixtral-split-GGUF: llama-gguf-split's three parts of
    // tiny-mixtral.gguf): one row with one verdict, made from the parts' headers; its download
    // fetches every part (paused in the second part, then resumed), each byte for byte the
    // repository's, and the library gets one entry: the first part, with all the parts' bytes.
    void aSplitModelIsOneRowOneDownloadOneEntry()
    {
        QTemporaryDir data;
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        QCOMPARE(search(*w, QStringLiteral("split")), QStringList{QStringLiteral("spillway-test/mixtral-split-GGUF")});
        pickRepository(*w, 0);
        DiscoverController* d = w->discover();
        QCOMPARE(int(d->models().size()), 1);
        QCOMPARE(int(d->models().front().parts.size()), 3);
        QCOMPARE(part<QTableWidget>(*w, "discoverFiles")->rowCount(), 1);
        QVERIFY2(d->models().front().planned, d->models().front().why.c_str());
        QVERIFY(d->models().front().tokensPerSecond > 0);
        const std::vector<server::HubFile> parts = d->models().front().parts;

        m_hub->setBytesPerSecond(200'000);  // about 5 s for the three parts
        pickFile(*w, QStringLiteral("tiny-mixtral-00001-of-00003.gguf"));
        part<QPushButton>(*w, "discoverDownload")->click();
        QTRY_VERIFY_WITH_TIMEOUT(!d->queue().isEmpty() && d->queue().first().done * 2 >= d->queue().first().total, 20000);
        part<QTableWidget>(*w, "discoverQueue")->selectRow(0);
        part<QPushButton>(*w, "discoverPause")->click();
        QTRY_COMPARE_WITH_TIMEOUT(d->queue().first().state, DownloadEntry::State::Paused, 10000);
        const QDir models(w->library()->modelsFolder());
        const QString first = models.filePath(QStringLiteral("tiny-mixtral-00001-of-00003.gguf"));
        QVERIFY(QFile::exists(first));  // the first part is whole, the second is where it paused
        QVERIFY(QFile::exists(models.filePath(QStringLiteral("tiny-mixtral-00002-of-00003.gguf.part"))));
        QVERIFY(!inCatalog(*w, first));
        m_hub->setBytesPerSecond(0);
        QSignalSpy finished(d, &DiscoverController::downloadFinished);
        part<QPushButton>(*w, "discoverResume")->click();
        QVERIFY(finished.wait(30000));
        QCOMPARE(finished.first().at(1).toString(), first);
        for (const auto& p : parts) {
            const QString name = QString::fromStdString(p.path);
            QVERIFY2(bytesOf(models.filePath(name)) == bytesOf(kMoe + QStringLiteral("split/") + name), qPrintable(name));
            QVERIFY(!QFile::exists(models.filePath(name) + QStringLiteral(".part")));
        }
        QTRY_VERIFY_WITH_TIMEOUT(inCatalog(*w, first), 20000);
        int entries = 0;
        qint64 bytes = 0;
        for (const auto& m : w->library()->catalog()->models())
            if (m.path.contains(QStringLiteral("tiny-mixtral-0000"))) ++entries, bytes = m.sizeBytes;
        QCOMPARE(entries, 1);
        QCOMPARE(bytes, qint64(QFileInfo(models.filePath(QStringLiteral("tiny-mixtral-00001-of-00003.gguf"))).size() +
                               QFileInfo(models.filePath(QStringLiteral("tiny-mixtral-00002-of-00003.gguf"))).size() +
                               QFileInfo(models.filePath(QStringLiteral("tiny-mixtral-00003-of-00003.gguf"))).size()));
    }

    // A paused download and one the window's exit interrupted both survive a restart and
    // resume from their .part: the hub sends at most 1.1 x the file in all.
    void theQueueSurvivesARestart()
    {
        QTemporaryDir data;
        const QString name = QStringLiteral("tiny-mixtral.gguf");
        const qint64 size = QFileInfo(kMoe + name).size();
        m_hub->setBytesPerSecond(200'000);  // about 5 s for the file
        QString dest;
        {
            std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
            QVERIFY(!search(*w, QStringLiteral("tiny moe")).isEmpty());
            pickRepository(*w, 0);
            pickFile(*w, name);
            const uint64_t before = m_hub->contentBytesSent();
            part<QPushButton>(*w, "discoverDownload")->click();
            DiscoverController* d = w->discover();
            QTRY_VERIFY_WITH_TIMEOUT(!d->queue().isEmpty() && d->queue().first().done * 10 >= size * 3, 20000);
            part<QTableWidget>(*w, "discoverQueue")->selectRow(0);
            part<QPushButton>(*w, "discoverPause")->click();
            QTRY_COMPARE_WITH_TIMEOUT(d->queue().first().state, DownloadEntry::State::Paused, 10000);
            dest = QDir(w->library()->modelsFolder()).filePath(name);
            QVERIFY(QFile::exists(dest + ".part"));
            QVERIFY(!QFile::exists(dest));
            QCOMPARE(d->queue().first().done, QFileInfo(dest + ".part").size());
            QVERIFY(m_hub->contentBytesSent() - before < uint64_t(size));
        }
        const uint64_t sentBefore = m_hub->contentBytesSent();
        const qint64 kept = QFileInfo(dest + ".part").size();
        {
            std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
            DiscoverController* d = w->discover();
            QCOMPARE(d->queue().size(), 1);
            QCOMPARE(d->queue().first().state, DownloadEntry::State::Paused);
            QCOMPARE(d->queue().first().done, kept);
            QVERIFY(part<QTableWidget>(*w, "discoverQueue")->item(0, 2)->text().contains(QStringLiteral("Paused")));
            part<QTableWidget>(*w, "discoverQueue")->selectRow(0);
            QSignalSpy finished(d, &DiscoverController::downloadFinished);
            part<QPushButton>(*w, "discoverResume")->click();
            QVERIFY(finished.wait(30000));
            QVERIFY(bytesOf(dest) == bytesOf(kMoe + name));
            QTRY_VERIFY_WITH_TIMEOUT(inCatalog(*w, dest), 20000);
        }
        const uint64_t sent = m_hub->contentBytesSent() - sentBefore;
        qInfo("paused at %lld of %lld bytes; the resume fetched %llu", (long long)kept, (long long)size,
              (unsigned long long)sent);
        QVERIFY(sent <= uint64_t(size - kept) + (64u << 10));

        // The window closes mid-download: the next one resumes it by itself.
        const QString second = QStringLiteral("tiny-olmoe.gguf");
        const QString secondDest = QDir(data.path()).filePath(QStringLiteral("models/") + second);
        {
            std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
            QVERIFY(!search(*w, QStringLiteral("tiny moe")).isEmpty());
            pickRepository(*w, 0);
            pickFile(*w, second);
            part<QPushButton>(*w, "discoverDownload")->click();
            DiscoverController* d = w->discover();
            QTRY_VERIFY_WITH_TIMEOUT(d->queue().size() == 2 && d->queue().last().done > 100'000, 20000);
        }
        QVERIFY(QFile::exists(secondDest + ".part"));
        m_hub->setBytesPerSecond(0);
        {
            std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
            DiscoverController* d = w->discover();
            QTRY_VERIFY_WITH_TIMEOUT(d->queue().size() == 2 && d->queue().last().state == DownloadEntry::State::Done, 30000);
            QVERIFY(bytesOf(secondDest) == bytesOf(kMoe + second));
            QTRY_VERIFY_WITH_TIMEOUT(inCatalog(*w, secondDest), 20000);
            // Clear finished empties the list, and so does the next start.
            part<QPushButton>(*w, "discoverClear")->click();
            QCOMPARE(d->queue().size(), 0);
        }
    }

    // Cancel stops a download and removes its .part; nothing joins the catalog.
    void cancelRemovesThePart()
    {
        QTemporaryDir data;
        m_hub->setBytesPerSecond(150'000);
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        QVERIFY(!search(*w, QStringLiteral("tiny")).isEmpty());
        pickRepository(*w, 0);
        pickFile(*w, QStringLiteral("tiny-qwen2moe.gguf"));
        part<QPushButton>(*w, "discoverDownload")->click();
        DiscoverController* d = w->discover();
        const QString dest = QDir(w->library()->modelsFolder()).filePath(QStringLiteral("tiny-qwen2moe.gguf"));
        QTRY_VERIFY_WITH_TIMEOUT(!d->queue().isEmpty() && d->queue().first().done > 50'000, 20000);
        QVERIFY(QFile::exists(dest + ".part"));
        part<QTableWidget>(*w, "discoverQueue")->selectRow(0);
        part<QPushButton>(*w, "discoverCancel")->click();
        QTRY_VERIFY_WITH_TIMEOUT(d->queue().isEmpty(), 10000);
        m_hub->setBytesPerSecond(0);
        QVERIFY(!QFile::exists(dest + ".part"));
        QVERIFY(!QFile::exists(dest));
        QVERIFY(!inCatalog(*w, dest));
    }

    // A file whose bytes do not match the repository's SHA-256: the row says so, nothing is left
    // in the models folder, nothing joins the catalog; Resume tries again (and fails again).
    void aCorruptDownloadIsDeletedWithTheReason()
    {
        QTemporaryDir data;
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        QVERIFY(m_hub->corrupt(std::string(kRepo) + "/tiny-mixtral.gguf", 500'000));
        QVERIFY(!search(*w, QStringLiteral("tiny")).isEmpty());
        pickRepository(*w, 0);
        pickFile(*w, QStringLiteral("tiny-mixtral.gguf"));
        part<QPushButton>(*w, "discoverDownload")->click();
        DiscoverController* d = w->discover();
        QTRY_VERIFY_WITH_TIMEOUT(!d->queue().isEmpty() && d->queue().first().state == DownloadEntry::State::Failed, 20000);
        QVERIFY(m_hub->corrupt(std::string(kRepo) + "/tiny-mixtral.gguf", 500'000));  // as it was
        const QString status = part<QTableWidget>(*w, "discoverQueue")->item(0, 2)->text();
        QVERIFY2(status.startsWith(QStringLiteral("Failed")) && status.contains(QStringLiteral("corrupt")), qPrintable(status));
        const QString dest = QDir(w->library()->modelsFolder()).filePath(QStringLiteral("tiny-mixtral.gguf"));
        QVERIFY(!QFile::exists(dest));
        QVERIFY(!QFile::exists(dest + ".part"));
        QVERIFY(!inCatalog(*w, dest));
        // Resume: the bytes are right this time.
        part<QTableWidget>(*w, "discoverQueue")->selectRow(0);
        QSignalSpy finished(d, &DiscoverController::downloadFinished);
        part<QPushButton>(*w, "discoverResume")->click();
        QVERIFY(finished.wait(20000));
        QVERIFY(bytesOf(dest) == bytesOf(kMoe + "tiny-mixtral.gguf"));
    }

    // A gated repository says how to add a token; with the token it lists its files; a remembered
    // token is in the keys file, readable by the user alone, and nowhere in the download queue.
    void aGatedRepositoryAsksForAToken()
    {
        QTemporaryDir data;
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        DiscoverController* d = w->discover();
        QSignalSpy failed(d, &DiscoverController::failed);
        d->openRepository(QStringLiteral("spillway-test/gated-tiny-GGUF"));
        QVERIFY(failed.wait(10000));
        const QString message = failed.first().first().toString();
        QVERIFY2(message.contains(QStringLiteral("401")) && message.contains(QStringLiteral("token")), qPrintable(message));
        QCOMPARE(part<QLabel>(*w, "discoverStatus")->text(), message);
        QVERIFY(d->models().empty());

        QCOMPARE(d->setToken(QString::fromStdString(m_hub->token()), true), QString());
        d->openRepository(QStringLiteral("spillway-test/gated-tiny-GGUF"));
        QTRY_VERIFY_WITH_TIMEOUT(!d->isJudging() && d->models().size() == 1, 20000);
        QVERIFY2(d->models().front().planned, d->models().front().why.c_str());
        const QString keys = QDir(data.path()).filePath(QStringLiteral("endpoint-keys.json"));
        QVERIFY(bytesOf(keys).contains(QByteArray::fromStdString(m_hub->token())));
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(keys).constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QSignalSpy finished(d, &DiscoverController::downloadFinished);
        QVERIFY(d->download(0));
        QVERIFY(finished.wait(30000));
        QVERIFY(!bytesOf(QDir(data.path()).filePath(QStringLiteral("downloads.json"))).contains(QByteArray::fromStdString(m_hub->token())));
    }

    // A repository with no GGUF file: no rows, and the view says what it holds instead.
    void aRepositoryWithoutGgufSaysSo()
    {
        QTemporaryDir data;
        std::unique_ptr<ChatWindow> w;
        openWindow(data.path(), w);
        QVERIFY(w->library()->isTuningReady());
        DiscoverController* d = w->discover();
        QVERIFY2(search(*w, QStringLiteral("safetensors")).isEmpty(), "the search asks for GGUF repositories");
        d->openRepository(QStringLiteral("spillway-test/tiny-safetensors"));
        QTRY_VERIFY_WITH_TIMEOUT(!d->isJudging() && d->otherFiles() == 2, 10000);
        QVERIFY(d->models().empty());
        QCOMPARE(part<QTableWidget>(*w, "discoverFiles")->rowCount(), 0);
        QVERIFY(part<QLabel>(*w, "discoverRepoTitle")->text().contains(QStringLiteral("no GGUF files")));
        QCOMPARE(d->recommended(), -1);
        QVERIFY(!d->download(0));
    }
};

QTEST_MAIN(TestDiscover)
#include "test_discover.moc"
