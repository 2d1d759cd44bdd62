// ChatWindow's Models and Tuning views: what the library controller says into the panels, the
// user's choices back to it, and the tuning worker's predictions and the runs that calibrate them
// (the rest of the window is chat_window.cpp).

#include "chat_window.h"

#include <QComboBox>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>

#include "bottleneck_view.h"
#include "chat_controller.h"
#include "chat_store.h"
#include "generation_worker.h"
#include "library_controller.h"
#include "library_panel.h"
#include "model_catalog_model.h"
#include "prompt_edit.h"
#include "tuning_panel.h"
#include "welcome_page.h"
#include "worker_threads.h"

namespace spillway::ui {

void ChatWindow::connectLibraryAndTuning()
{
    LibraryController* models = m_models;
    LibraryPanel* panel = m_library;
    connect(models, &LibraryController::welcomeNeeded, this, &ChatWindow::showWelcome);
    connect(m_welcome, &WelcomePage::startClicked, this, &ChatWindow::closeWelcome);
    connect(models, &LibraryController::modelsListed, this, [this](const QVector<ModelItem>& list) {
        m_tuning->setVariants(list, m_models->modelPath());
        emit modelsListed(int(list.size()));
    });
    connect(models, &LibraryController::modelRejected, this, [this](const QString& path, const QString& message) {
        const QString text = message.contains(path) ? message : path + ": " + message;
        // Where the user added it (the Models view), the error stays until the next add.
        m_library->showError(text);
        // The model the window started with: its failure is reported once, with what answers instead.
        if (path == m_startPath || !m_startFailure.isEmpty()) return;
        showError(text);
    });
    connect(panel, &LibraryPanel::addRequested, models, &LibraryController::addModel);
    connect(panel, &LibraryPanel::addEndpointRequested, models, &LibraryController::addEndpoint);
    connect(models, &LibraryController::endpointAdded, this, [this](const QString& url, int count, const QString& keyNote) {
        m_library->showResult(tr("Added %n model(s) of %1: choose one and Chat with this model", nullptr, count).arg(url));
        if (!keyNote.isEmpty()) showError(tr("the API key could not be kept on disk (%1); it is used until Spillway quits").arg(keyNote));
    });
    connect(models, &LibraryController::checkpointNeedsDetails, this, &ChatWindow::askCheckpointDetails);
    connect(panel, &LibraryPanel::removeRequested, models, &LibraryController::removeModel);
    connect(panel, &LibraryPanel::chatRequested, this, [this](qint64 id) {
        chatWith(id);
        showView(View::Chats);
        m_prompt->setFocus();
    });
    connect(m_picker, &QComboBox::activated, this, [this](int row) { chatWith(m_models->catalog()->idAt(row)); });
    connect(models->catalog(), &QAbstractItemModel::modelReset, this, [this] {
        // The model that answers, once the catalog knows it (the launch model is added to it).
        for (int row = 0; row < m_models->catalog()->rowCount(); ++row) {
            const QModelIndex index = m_models->catalog()->index(row);
            m_chat->identifyModel(index.data(ModelCatalogModel::PathRole).toString(),
                                  index.data(ModelCatalogModel::IdRole).toLongLong());
        }
        showPickedModel();
    });
    connect(panel, &LibraryPanel::compressRequested, models, &LibraryController::compressModel);
    connect(panel, &LibraryPanel::cancelRequested, models, &LibraryController::cancelCompression);
    connect(models, &LibraryController::compressionStarted, panel, [panel](const QString& text) {
        panel->setCompressing(true);
        panel->showResult(text);
    });
    connect(models, &LibraryController::compressionProgress, panel, &LibraryPanel::showProgress);
    connect(models, &LibraryController::compressionFinished, panel, [panel](const QString&, const QString& summary) {
        panel->setCompressing(false);
        panel->showProgressDone();
        panel->showResult(tr("Done: %1").arg(summary));
    });
    connect(models, &LibraryController::compressionCompared, this, [this](const QString& text) {
        m_library->showResult(text);
        emit compressionCompared();
    });
    connect(models, &LibraryController::compressionFailed, this, [this](const QString& message, bool cancelled) {
        m_library->setCompressing(false);
        m_library->clearProgress();
        m_library->showResult(cancelled ? tr("Compression cancelled; nothing was written.") : tr("Compression failed."));
        if (!cancelled) showError(message);
    });

    connect(m_tuning, &TuningPanel::changed, this, &ChatWindow::requestPrediction);
    // Every choice is kept (once the stored ones are back: a change before that is the restore).
    connect(m_tuning, &TuningPanel::changed, this, &ChatWindow::storeTuningChoices);
    connect(m_tuning, &TuningPanel::applyClicked, this, &ChatWindow::applyTuning);
    connect(models, &LibraryController::probeProgress, m_welcome, &WelcomePage::setProgress);
    connect(models, &LibraryController::tuningReady, this, [this](const QString& summary, const QString& capabilities) {
        m_tuning->setHardware(summary);
        m_welcome->setSummary(summary, capabilities);
        emit tuningReady();
        requestPrediction();
    });
    connect(models, &LibraryController::predicted, this, [this](const TuningPrediction& prediction) {
        m_tuning->showPrediction(prediction, !m_chat->isGenerating());
        emit tuningPredicted();
    });
    connect(models, &LibraryController::tuningFailed, this, [this](const QString& message) {
        if (!m_models->isTuningReady()) m_welcome->setFailed(message);
        m_tuning->showNoPlan(message);
        emit tuningPredicted();
    });
    // Every run calibrates: a measured reply shows beside the prediction, and the planner reads the
    // profile it calibrated before predicting again.
    connect(m_workers->generation(), &GenerationWorker::runMeasured, this, [this](const RunLanes& run) {
        m_tuning->showMeasured(run);
        m_models->reloadProfile();
        if (m_models->isTuningReady()) requestPrediction();
    }, Qt::QueuedConnection);
    // A plan for another variant: that model answers now, and the picker and a notice say so.
    connect(m_workers->generation(), &GenerationWorker::variantApplied, this, [this](const QString& path) {
        m_chat->setAnsweringModel(path, m_models->catalog()->idOfPath(path));
        showPickedModel();
        showNotice(tr("The applied plan runs %1: it answers from now on (the model picker shows it)")
                       .arg(QFileInfo(path).fileName()));
    }, Qt::QueuedConnection);
    connect(m_workers->generation(), &GenerationWorker::planApplied, this, [this](const QString& description) {
        m_chat->setModelDescription(description);
        m_status->setText(description);
        emit tuningApplied();
    }, Qt::QueuedConnection);
    connect(this, &ChatWindow::modelReady, models, &LibraryController::startTuning);
    ChatStore* store = m_workers->store();
    connect(this, &ChatWindow::storeReadSetting, store, &ChatStore::readSetting, Qt::QueuedConnection);
    connect(this, &ChatWindow::storeWriteSetting, store, &ChatStore::writeSetting, Qt::QueuedConnection);
    connect(store, &ChatStore::setting, this, &ChatWindow::onSetting, Qt::QueuedConnection);
}

void ChatWindow::requestPrediction()
{
    if (m_models) m_models->predict(m_tuning->settings(m_models->modelPath()));
}

void ChatWindow::applyTuning()
{
    if (!m_models || m_chat->isGenerating() || !m_models->lastPrediction().plan) return;
    m_bottleneck->setPrediction(*m_models->lastPrediction().plan);
    m_models->applyPrediction();
}

}  // namespace spillway::ui
