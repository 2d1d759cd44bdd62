#pragma once
// Helpers shared by the Qt tests of ui/: the window's widgets by object name (chat_window.h lists
// them), as a user's script would find them, and its texts.

#include <QAbstractItemModel>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QTest>

#include "storage/chat_db.h"
#include "ui/chat_controller.h"
#include "ui/chat_window.h"
#include "ui/prompt_edit.h"
#include "ui/transcript_view.h"

// The window's widget named `name`, of type T; a missing one ends the program with its name (a
// renamed widget fails every test that looks for it, not with a null pointer).
template <class T>
T* part(const QObject& window, const char* name)
{
    T* found = window.findChild<T*>(QString::fromLatin1(name));
    if (!found) qFatal("no widget named '%s' of the expected type", name);
    return found;
}

inline spillway::ui::PromptEdit* promptOf(const QObject& w) { return part<spillway::ui::PromptEdit>(w, "prompt"); }
inline QPushButton* sendButtonOf(const QObject& w) { return part<QPushButton>(w, "send"); }
inline QPushButton* stopButtonOf(const QObject& w) { return part<QPushButton>(w, "stop"); }
inline spillway::ui::TranscriptView* transcriptOf(const QObject& w)
{
    return part<spillway::ui::TranscriptView>(w, "transcript");
}
inline QString statusTextOf(const QObject& w) { return part<QLabel>(w, "statusLine")->text(); }
// The inline error line; empty when there is none (or it shows a notice).
inline QString errorTextOf(const QObject& w)
{
    const QLabel* line = part<QLabel>(w, "inlineError");
    return line->isHidden() || line->property("notice").toBool() ? QString() : line->text();
}
// The inline notice (a fallback to the CPU, ...); empty when there is none.
inline QString noticeTextOf(const QObject& w)
{
    const QLabel* line = part<QLabel>(w, "inlineError");
    return line->isHidden() || !line->property("notice").toBool() ? QString() : line->text();
}
// A list view's rows: how many, and row i's text and data.
inline int rowsOf(const QObject& w, const char* list) { return part<QListView>(w, list)->model()->rowCount(); }
inline QString rowTextOf(const QObject& w, const char* list, int row)
{
    const QAbstractItemModel* m = part<QListView>(w, list)->model();
    return m->index(row, 0).data(Qt::DisplayRole).toString();
}
inline qint64 rowIdOf(const QObject& w, const char* list, int row)
{
    const QAbstractItemModel* m = part<QListView>(w, list)->model();
    return m->index(row, 0).data(Qt::UserRole).toLongLong();  // IdRole of both lists
}

// The conversation's messages as stored (current versions), opened beside the window's own
// connection (WAL allows both); empty when it cannot be read.
inline std::vector<spillway::storage::Message> storedMessages(const QString& folder, qint64 conversation)
{
    auto db = spillway::storage::ChatDatabase::open(folder.toStdString());
    if (!db) return {};
    auto messages = db->messages(conversation);
    return messages ? *messages : std::vector<spillway::storage::Message>{};
}

// Waits up to timeoutMs for `window` (a ChatWindow) to load its model. A load that fails ends the
// wait at once and fails the test with the window's error line (a missing or unreadable model
// file, an unknown architecture), instead of waiting out the timeout and every wait after it.
#define SPILLWAY_WAIT_FOR_MODEL(window, timeoutMs)                                                   \
    do {                                                                                              \
        QTRY_VERIFY_WITH_TIMEOUT((window).controller()->isModelReady() || !errorTextOf(window).isEmpty(), \
                                 (timeoutMs));                                                        \
        QVERIFY2((window).controller()->isModelReady(),                                               \
                 qPrintable(QStringLiteral("the model did not load: ") + errorTextOf(window)));       \
    } while (0)
