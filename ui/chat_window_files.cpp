// ChatWindow's files and dialogs: where exports and imports open (the Documents folder, a chat's
// title as the file name), the Bottleneck dock's export, and the details a llama2.c checkpoint
// needs before it joins the library (the rest of the window is chat_window.cpp).

#include "chat_window.h"

#include <QComboBox>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "bottleneck_view.h"
#include "chat_controller.h"
#include "conversation_list_model.h"
#include "library_controller.h"
#include "palette_colors.h"

namespace spillway::ui {

QString ChatWindow::documentsFile(const QString& name)
{
    QString folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    if (folder.isEmpty() || !QFileInfo(folder).isDir()) folder = QDir::homePath();
    return QDir(folder).filePath(name);
}

QString ChatWindow::fileNameFor(const QString& title)
{
    // Letters, digits, spaces and dashes; at most 60 characters.
    QString name;
    for (const QChar c : title.simplified()) name += c.isLetterOrNumber() || c == QLatin1Char('-') ? c : QLatin1Char(' ');
    name = name.simplified().left(60).trimmed();
    return name.isEmpty() ? QStringLiteral("spillway-chat") : name;
}

void ChatWindow::exportTimeline(bool chromeTrace)
{
    const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyy-MM-dd HHmm"));
    const QString suggested = documentsFile(tr("Spillway timeline %1").arg(stamp) + (chromeTrace ? ".json" : ".png"));
    const QString path = QFileDialog::getSaveFileName(this, chromeTrace ? tr("Export Chrome trace") : tr("Export PNG"), suggested,
                                                      chromeTrace ? tr("Chrome trace (*.json)") : tr("PNG image (*.png)"));
    if (path.isEmpty()) return;
    const Status s = chromeTrace ? m_bottleneck->exportChromeTrace(path) : m_bottleneck->exportPng(path);
    if (!s) showError(QString::fromStdString(s.error().message));
    else m_status->setText(tr("Wrote %1").arg(path));
}

void ChatWindow::exportChats(bool all, const QString& format)
{
    const qint64 id = m_chat->currentConversation();
    if (!all && !id) return showError(tr("This chat is not stored yet: send a message first"));
    const bool json = format == QLatin1String("json");
    // In the Documents folder, named after the chat.
    QString title;
    if (!all) {
        const int row = m_chat->conversations()->rowOf(id);
        if (row >= 0) title = m_chat->conversations()->index(row).data(Qt::DisplayRole).toString();
    }
    const QString suggested = documentsFile((all ? tr("Spillway chats") : fileNameFor(title)) +
                                            (json ? QStringLiteral(".json") : QStringLiteral(".md")));
    const QString path = QFileDialog::getSaveFileName(this, all ? tr("Export all chats") : tr("Export this chat"),
                                                      suggested, json ? tr("JSON (*.json)") : tr("Markdown (*.md)"));
    if (path.isEmpty()) return;
    if (all) m_chat->exportAll(path, format);
    else m_chat->exportConversation(id, path, format);
}


void ChatWindow::askCheckpointDetails(const QString& checkpoint, const QString& found)
{
    // Not modal to the app (tests and scripts fill it in); one per checkpoint.
    auto* dialog = new QDialog(this);
    dialog->setObjectName("checkpointDialog");
    dialog->setWindowTitle(tr("Add a llama2.c checkpoint"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setMinimumWidth(620);
    auto* layout = new QVBoxLayout(dialog);
    auto* intro = new QLabel(tr("%1 is a llama2.c checkpoint. The format does not record the model's activation "
                                "function or its tokenizer: with the wrong ones it runs, but writes gibberish.")
                                 .arg(QFileInfo(checkpoint).fileName()),
                             dialog);
    intro->setWordWrap(true);
    auto* architecture = new QComboBox(dialog);
    architecture->setObjectName("checkpointArchitecture");
    architecture->setAccessibleName(tr("Architecture"));
    architecture->addItem(tr("llama: SiLU (SwiGLU) FFNs, as Karpathy's TinyStories models"), QStringLiteral("llama"));
    architecture->addItem(tr("relu-llama: shifted-ReLU FFNs, as the thesis' sparse models"), QStringLiteral("relu-llama"));
    auto* tokenizer = new QLineEdit(found, dialog);
    tokenizer->setObjectName("checkpointTokenizer");
    tokenizer->setAccessibleName(tr("Tokenizer file"));
    tokenizer->setPlaceholderText(tr("tokenizer.bin (or a decode<vocab>.tok table)"));
    auto* browse = new QPushButton(tr("Browse…"), dialog);
    auto* note = new QLabel(found.isEmpty() ? tr("No tokenizer lies beside it: choose the one it was trained with.")
                                            : tr("Found beside it; choose another if it was trained with another."),
                            dialog);
    note->setWordWrap(true);
    note->setStyleSheet(colorStyle(found.isEmpty() ? noticeColor(palette()) : mutedColor(palette())));
    auto* form = new QFormLayout;
    form->addRow(tr("Architecture"), architecture);
    auto* tokenizerRow = new QHBoxLayout;
    tokenizerRow->addWidget(tokenizer, 1);
    tokenizerRow->addWidget(browse);
    form->addRow(tr("Tokenizer"), tokenizerRow);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, dialog);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Add to the library"));
    layout->addWidget(intro);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(buttons);
    auto valid = [tokenizer, buttons] {
        buttons->button(QDialogButtonBox::Ok)->setEnabled(QFileInfo(tokenizer->text()).isFile());
    };
    valid();
    connect(tokenizer, &QLineEdit::textChanged, dialog, valid);
    connect(browse, &QPushButton::clicked, dialog, [dialog, tokenizer, checkpoint] {
        const QString path = QFileDialog::getOpenFileName(dialog, tr("The checkpoint's tokenizer"), QFileInfo(checkpoint).path(),
                                                          tr("Tokenizers (*.bin *.tok);;All files (*)"));
        if (!path.isEmpty()) tokenizer->setText(path);
    });
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
    connect(buttons, &QDialogButtonBox::accepted, dialog, [this, dialog, checkpoint, architecture, tokenizer] {
        m_models->addCheckpoint(checkpoint, architecture->currentData().toString(), tokenizer->text());
        dialog->accept();
    });
    dialog->open();
}

}  // namespace spillway::ui
