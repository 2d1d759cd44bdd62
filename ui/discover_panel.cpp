#include "discover_panel.h"

#include <QCheckBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "discover_controller.h"
#include "palette_colors.h"
#include "readable.h"

namespace spillway::ui {

namespace {

QString bytesText(double bytes) { return QLocale().formattedDataSize(qint64(bytes)); }

enum FileColumn { FileName, FileSize, FileDevice, FileRam, FileSsd, FileSpeed, FileVerdict, FileColumns };

QTableWidget* table(QWidget* parent, const char* name, const QStringList& headers)
{
    auto* t = new QTableWidget(0, int(headers.size()), parent);
    t->setObjectName(QString::fromLatin1(name));
    t->setHorizontalHeaderLabels(headers);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->setSelectionMode(QAbstractItemView::SingleSelection);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->verticalHeader()->setVisible(false);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setWordWrap(false);
    return t;
}

QTableWidgetItem* cell(const QString& text, bool right = false)
{
    auto* item = new QTableWidgetItem(text);
    if (right) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

}  // namespace

DiscoverPanel::DiscoverPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    m_search = new QLineEdit(this);
    m_search->setObjectName("discoverSearch");
    m_search->setPlaceholderText(tr("Search Hugging Face for GGUF models (e.g. qwen 7b, llama 3.1 8b instruct)"));
    m_search->setClearButtonEnabled(true);
    m_search->setAccessibleName(tr("Search models"));
    auto* go = new QPushButton(tr("Search"), this);
    go->setObjectName("discoverSearchButton");
    m_token = new QPushButton(tr("Access token…"), this);
    m_token->setObjectName("discoverToken");
    m_token->setToolTip(tr("A Hugging Face access token, for gated repositories (Meta's Llama, Google's Gemma, …)"));
    top->addWidget(m_search, 1);
    top->addWidget(go);
    top->addWidget(m_token);
    layout->addLayout(top);
    m_searchNote = new QLabel(this);
    m_searchNote->setObjectName("discoverSearchNote");
    m_searchNote->setAccessibleName(tr("Search result"));
    m_searchNote->setWordWrap(true);
    m_searchNote->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_searchNote->hide();
    layout->addWidget(m_searchNote);

    auto* split = new QSplitter(Qt::Horizontal, this);
    m_repos = new QListWidget(split);
    m_repos->setObjectName("discoverRepos");
    m_repos->setAccessibleName(tr("Repositories found"));
    m_repos->setWordWrap(true);
    m_repos->setSpacing(3);
    m_repos->setTextElideMode(Qt::ElideMiddle);
    auto* right = new QWidget(split);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    m_repoTitle = new QLabel(tr("Search, then pick a repository: each of its GGUF files is judged for this machine "
                                "from its header alone, before anything is downloaded."),
                             right);
    m_repoTitle->setObjectName("discoverRepoTitle");
    m_repoTitle->setWordWrap(true);
    m_files = table(right, "discoverFiles",
                    {tr("File"), tr("Size"), tr("Device"), tr("RAM"), tr("SSD"), tr("Predicted"), tr("Verdict")});
    m_files->setAccessibleName(tr("Files with the planner's verdict"));
    m_files->horizontalHeaderItem(FileDevice)
        ->setToolTip(tr("Bytes in the computing device's memory (the GPU's; on the CPU device, RAM it computes from)"));
    m_files->horizontalHeaderItem(FileRam)->setToolTip(tr("Bytes in RAM, sent to the device as they are needed"));
    m_files->horizontalHeaderItem(FileSsd)->setToolTip(
        tr("Bytes left on the SSD (the token embedding table stays there: a token reads one row of it)"));
    m_files->horizontalHeaderItem(FileSpeed)->setToolTip(tr("The planner's prediction for this machine, as measured"));
    auto* pick = new QHBoxLayout;
    m_minSpeed = new QDoubleSpinBox(right);
    m_minSpeed->setObjectName("discoverMinSpeed");
    m_minSpeed->setRange(0.1, 1000);
    m_minSpeed->setDecimals(1);
    m_minSpeed->setValue(5.0);
    m_minSpeed->setSuffix(tr(" tokens/s"));
    m_minSpeed->setToolTip(tr("The recommendation: the largest file predicted at least this fast here"));
    m_minSpeed->setAccessibleName(tr("Speed the recommendation must reach"));
    m_download = new QPushButton(tr("Download"), right);
    m_download->setObjectName("discoverDownload");
    m_download->setDefault(true);
    pick->addWidget(new QLabel(tr("Recommend the largest at or above"), right));
    pick->addWidget(m_minSpeed);
    pick->addStretch(1);
    pick->addWidget(m_download);
    rightLayout->addWidget(m_repoTitle);
    rightLayout->addWidget(m_files, 1);
    rightLayout->addLayout(pick);
    split->addWidget(m_repos);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    split->setSizes({300, 800});
    layout->addWidget(split, 3);

    auto* queueTitle = new QLabel(tr("<b>Downloads</b> — resumable, each file checked against its SHA-256 before it "
                                     "joins the library"),
                                  this);
    layout->addWidget(queueTitle);
    m_queue = table(this, "discoverQueue", {tr("Model"), tr("Progress"), tr("Status")});
    m_queue->setAccessibleName(tr("Downloads"));
    layout->addWidget(m_queue, 1);
    auto* actions = new QHBoxLayout;
    m_pause = new QPushButton(tr("Pause"), this);
    m_pause->setObjectName("discoverPause");
    m_resume = new QPushButton(tr("Resume"), this);
    m_resume->setObjectName("discoverResume");
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName("discoverCancel");
    m_cancel->setToolTip(tr("Stop and delete what was downloaded of it"));
    m_clear = new QPushButton(tr("Clear finished"), this);
    m_clear->setObjectName("discoverClear");
    m_status = new QLabel(this);
    m_status->setObjectName("discoverStatus");
    m_status->setAccessibleName(tr("Discover messages"));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    actions->addWidget(m_status, 1);
    actions->addWidget(m_pause);
    actions->addWidget(m_resume);
    actions->addWidget(m_cancel);
    actions->addWidget(m_clear);
    layout->addLayout(actions);

    auto search = [this] {
        if (!m_controller || m_search->text().trimmed().isEmpty()) return;
        m_searchNote->setStyleSheet(QString());
        m_searchNote->setText(tr("Searching %1 …").arg(m_controller->endpoint()));
        m_searchNote->show();
        m_controller->search(m_search->text());
    };
    connect(m_search, &QLineEdit::returnPressed, this, search);
    connect(go, &QPushButton::clicked, this, search);
    connect(m_token, &QPushButton::clicked, this, &DiscoverPanel::askToken);
    connect(m_repos, &QListWidget::currentRowChanged, this, [this](int row) {
        if (!m_controller || row < 0 || size_t(row) >= m_controller->repositories().size()) return;
        showMessage(QString(), false);
        m_picked = false;
        m_controller->openRepository(QString::fromStdString(m_controller->repositories()[size_t(row)].id));
    });
    connect(m_minSpeed, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        if (m_controller) m_controller->setMinTokensPerSecond(v);
    });
    connect(m_files, &QTableWidget::itemSelectionChanged, this, [this] {
        m_picked = true;  // showModels' own selection is made with the signals blocked
        updateButtons();
    });
    connect(m_queue, &QTableWidget::itemSelectionChanged, this, &DiscoverPanel::updateButtons);
    connect(m_download, &QPushButton::clicked, this, [this] {
        if (m_controller && m_controller->download(selectedModel())) showMessage(QString(), false);
    });
    connect(m_pause, &QPushButton::clicked, this, [this] { m_controller->pause(selectedDownload()); });
    connect(m_resume, &QPushButton::clicked, this, [this] { m_controller->resume(selectedDownload()); });
    connect(m_cancel, &QPushButton::clicked, this, [this] { m_controller->cancel(selectedDownload()); });
    connect(m_clear, &QPushButton::clicked, this, [this] { m_controller->clearFinished(); });
    setController(nullptr);
}

void DiscoverPanel::setController(DiscoverController* controller)
{
    m_controller = controller;
    setEnabled(controller != nullptr);
    if (!controller) return;
    m_minSpeed->setValue(controller->minTokensPerSecond());
    connect(controller, &DiscoverController::searched, this, [this](const QString& query) {
        showRepositories();
        const bool none = m_controller->repositories().empty();
        m_searchNote->setStyleSheet(QString());
        m_searchNote->setText(none ? tr("No GGUF repositories match '%1' on %2.").arg(query, m_controller->endpoint()) : QString());
        m_searchNote->setVisible(none);
    });
    // A search that found nothing because it got no answer: beside the search box, the cause and
    // what to do; the empty list says it too.
    connect(controller, &DiscoverController::searchFailed, this, [this](const QString& query, const QString& message) {
        showRepositories();
        m_searchNote->setStyleSheet(colorStyle(errorColor(palette())));
        // "Search for 'qwen': could not connect to huggingface.co: this computer seems to be offline, …"
        QString text = message.contains(query) ? message : tr("The search for '%1' failed: %2").arg(query, message);
        if (!text.isEmpty()) text[0] = text[0].toUpper();
        m_searchNote->setText(text);
        m_searchNote->show();
        auto* item = new QListWidgetItem(tr("No results: the search got no answer (see above)"), m_repos);
        item->setFlags(Qt::NoItemFlags);
    });
    connect(controller, &DiscoverController::modelsChanged, this, &DiscoverPanel::showModels);
    connect(controller, &DiscoverController::queueChanged, this, &DiscoverPanel::showQueue);
    connect(controller, &DiscoverController::failed, this, [this](const QString& message) { showMessage(message, true); });
    m_token->setText(controller->hasOwnToken() ? tr("Access token ✓") : tr("Access token…"));
    showQueue();
}

int DiscoverPanel::selectedModel() const
{
    const auto rows = m_files->selectionModel()->selectedRows();
    return rows.isEmpty() ? -1 : rows.first().row();
}

QString DiscoverPanel::selectedDownload() const
{
    const auto rows = m_queue->selectionModel()->selectedRows();
    if (rows.isEmpty() || !m_controller || rows.first().row() >= m_controller->queue().size()) return QString();
    return m_controller->queue()[rows.first().row()].key;
}

void DiscoverPanel::showMessage(const QString& text, bool error)
{
    m_status->setText(text);
    m_status->setStyleSheet(error ? colorStyle(errorColor(palette())) : QString());
}

void DiscoverPanel::showRepositories()
{
    QSignalBlocker block(m_repos);
    m_repos->clear();
    for (const auto& m : m_controller->repositories()) {
        QString line = QString::fromStdString(m.id) + QLatin1Char('\n') +
                       tr("%1 downloads · %2 likes").arg(QLocale().toString(m.downloads), QLocale().toString(m.likes));
        if (m.gated) line += tr(" · gated: needs an access token");
        auto* item = new QListWidgetItem(line, m_repos);
        item->setToolTip(QString::fromStdString(m.id));
    }
}

void DiscoverPanel::showModels()
{
    const auto& models = m_controller->models();
    const int best = m_controller->recommended();
    const int keep = m_picked ? selectedModel() : -1;
    if (m_controller->repository().isEmpty()) return;
    QString title = QStringLiteral("<b>%1</b>").arg(m_controller->repository().toHtmlEscaped());
    if (m_controller->isJudging()) title += tr(" — reading each file's header and planning it for this machine …");
    else if (models.empty() && m_controller->otherFiles() > 0)
        title += tr(" — no GGUF files (%n other file(s)): a safetensors repository converts with "
                    "`spillway-cli convert` once downloaded",
                    nullptr, m_controller->otherFiles());
    else if (best >= 0)
        title += tr(" — recommended here: <b>%1</b>").arg(QString::fromStdString(models[size_t(best)].file.path).toHtmlEscaped());
    m_repoTitle->setText(title);
    QSignalBlocker block(m_files);
    m_files->setRowCount(int(models.size()));
    for (int i = 0; i < int(models.size()); ++i) {
        const server::FileVerdict& v = models[size_t(i)];
        QString name = QString::fromStdString(v.file.path);
        if (v.parts.size() > 1) name += tr(" (%n parts)", nullptr, int(v.parts.size()));
        m_files->setItem(i, FileName, cell(name));
        m_files->setItem(i, FileSize, cell(bytesText(double(v.bytes)), true));
        QString verdict;
        if (v.planned) {
            m_files->setItem(i, FileDevice, cell(bytesText(double(v.tiers[0])), true));
            m_files->setItem(i, FileRam, cell(bytesText(double(v.tiers[1])), true));
            m_files->setItem(i, FileSsd, cell(bytesText(double(v.tiers[2])), true));
            m_files->setItem(i, FileSpeed, cell(tr("%1 tokens/s").arg(readable(v.tokensPerSecond)), true));
            verdict = v.fits ? tr("Fits in memory") : tr("Streams weights from the SSD");
            if (i == best) verdict = tr("★ Recommended · ") + verdict;
        } else {
            for (int c : {FileDevice, FileRam, FileSsd, FileSpeed}) m_files->setItem(i, c, cell(QStringLiteral("—"), true));
            verdict = !v.why.empty() ? tr("No verdict: %1").arg(QString::fromStdString(v.why))
                      : m_controller->isJudging() ? tr("Reading its header …")
                                                  : tr("Judged once the machine is measured");
        }
        auto* verdictCell = cell(verdict);
        verdictCell->setToolTip(verdict);
        if (i == best) {
            QFont bold = verdictCell->font();
            bold.setBold(true);
            for (int c = 0; c < FileColumns; ++c)
                if (auto* item = m_files->item(i, c)) item->setFont(bold);
            verdictCell->setFont(bold);
        }
        m_files->setItem(i, FileVerdict, verdictCell);
    }
    m_files->resizeColumnsToContents();
    if (keep >= 0 && keep < int(models.size())) m_files->selectRow(keep);
    else if (best >= 0) m_files->selectRow(best);
    else m_files->clearSelection();
    updateButtons();
}

void DiscoverPanel::showQueue()
{
    const auto& queue = m_controller->queue();
    const QString keep = selectedDownload();
    QSignalBlocker block(m_queue);
    m_queue->setRowCount(int(queue.size()));
    for (int i = 0; i < int(queue.size()); ++i) {
        const DownloadEntry& e = queue[i];
        auto* name = cell(e.fileName());
        name->setToolTip(e.key);
        m_queue->setItem(i, 0, name);
        auto* bar = qobject_cast<QProgressBar*>(m_queue->cellWidget(i, 1));
        if (!bar) {
            bar = new QProgressBar;
            m_queue->setCellWidget(i, 1, bar);
        }
        bar->setRange(0, 1000);
        bar->setValue(e.total > 0 ? int(1000 * e.done / e.total) : 0);
        bar->setFormat(tr("%1 of %2").arg(bytesText(double(e.done)), bytesText(double(e.total))));
        QString status;
        switch (e.state) {
        case DownloadEntry::State::Queued: status = tr("Queued"); break;
        case DownloadEntry::State::Downloading:
            status = e.bytesPerSecond > 0 ? tr("Downloading · %1/s · %2 s left")
                                                .arg(bytesText(e.bytesPerSecond), readable(e.secondsLeft))
                                          : tr("Downloading …");
            break;
        case DownloadEntry::State::Paused: status = tr("Paused (resumes where it stopped)"); break;
        case DownloadEntry::State::Failed: status = tr("Failed: %1").arg(e.message); break;
        case DownloadEntry::State::Done: status = e.message.isEmpty() ? tr("Done") : e.message; break;
        }
        auto* statusCell = cell(status);
        statusCell->setToolTip(status);
        m_queue->setItem(i, 2, statusCell);
        if (e.key == keep) m_queue->selectRow(i);
    }
    m_queue->resizeColumnToContents(0);
    m_queue->setColumnWidth(1, 240);
    updateButtons();
}

void DiscoverPanel::updateButtons()
{
    if (!m_controller) return;
    m_download->setEnabled(selectedModel() >= 0);
    const int at = m_controller->entry(selectedDownload());
    const auto state = at >= 0 ? m_controller->queue()[at].state : DownloadEntry::State::Done;
    using S = DownloadEntry::State;
    m_pause->setEnabled(at >= 0 && (state == S::Downloading || state == S::Queued));
    m_resume->setEnabled(at >= 0 && (state == S::Paused || state == S::Failed));
    m_cancel->setEnabled(at >= 0 && state != S::Done);
    bool finished = false;
    for (const auto& e : m_controller->queue()) finished |= e.state == S::Done || e.state == S::Failed;
    m_clear->setEnabled(finished);
}

void DiscoverPanel::askToken()
{
    if (!m_controller) return;
    QDialog dialog(this);
    dialog.setObjectName("tokenDialog");
    dialog.setWindowTitle(tr("Hugging Face access token"));
    auto* form = new QFormLayout(&dialog);
    auto* intro = new QLabel(tr("Gated repositories (Llama, Gemma, …) need a token of an account that accepted their "
                                "terms: huggingface.co → Settings → Access Tokens (read). Without one here, the token "
                                "huggingface-cli keeps is used, if any."),
                             &dialog);
    intro->setWordWrap(true);
    form->addRow(intro);
    auto* token = new QLineEdit(&dialog);
    token->setObjectName("hubToken");
    token->setEchoMode(QLineEdit::Password);
    token->setPlaceholderText(QStringLiteral("hf_…"));
    form->addRow(tr("Token:"), token);
    auto* remember = new QCheckBox(tr("Remember it on this computer (readable by you alone)"), &dialog);
    remember->setObjectName("rememberToken");
    remember->setChecked(true);
    form->addRow(remember);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    form->addRow(buttons);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    if (dialog.exec() != QDialog::Accepted) return;
    const QString why = m_controller->setToken(token->text(), remember->isChecked());
    m_token->setText(m_controller->hasOwnToken() ? tr("Access token ✓") : tr("Access token…"));
    showMessage(why.isEmpty() ? (m_controller->hasOwnToken() ? tr("The token is used for this Hub from now on.")
                                                             : tr("The token is forgotten."))
                              : why,
                !why.isEmpty());
}

}  // namespace spillway::ui
