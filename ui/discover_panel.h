#pragma once
// The Discover view (issue 32): a search box for the Hugging Face Hub, the repositories found,
// the chosen repository's GGUF models in a table with the planner's verdict on each for this
// machine (device, RAM and SSD bytes, predicted tokens/s, whether it fits; the recommended one
// marked, the floor set beside it), Download, and the download queue (progress, speed, time
// left; pause, resume, cancel, clear). It shows its DiscoverController and passes on what the
// user does. Object names: discoverSearch, discoverRepos, discoverFiles, discoverMinSpeed,
// discoverDownload, discoverQueue, discoverPause, discoverResume, discoverCancel, discoverClear,
// discoverToken, discoverStatus.

#include <QWidget>

class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QTableWidget;

namespace spillway::ui {

class DiscoverController;

class DiscoverPanel : public QWidget {
    Q_OBJECT
public:
    explicit DiscoverPanel(QWidget* parent = nullptr);

    // Null: the view says that it needs a data folder.
    void setController(DiscoverController* controller);
    // The selected row of the file table (an index into the controller's models()), or -1.
    int selectedModel() const;
    // The token dialog (object name tokenDialog: hubToken, rememberToken).
    void askToken();

private:
    void showRepositories();
    void showModels();
    void showQueue();
    void showMessage(const QString& text, bool error);
    QString selectedDownload() const;  // the queue's selected key
    void updateButtons();

    DiscoverController* m_controller = nullptr;
    QLineEdit* m_search = nullptr;
    QPushButton* m_token = nullptr;
    QListWidget* m_repos = nullptr;
    QLabel* m_repoTitle = nullptr;
    QTableWidget* m_files = nullptr;
    QDoubleSpinBox* m_minSpeed = nullptr;
    QPushButton* m_download = nullptr;
    QTableWidget* m_queue = nullptr;
    QPushButton* m_pause = nullptr;
    QPushButton* m_resume = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_clear = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_searchNote = nullptr;  // beside the search box: why a search found nothing
    bool m_picked = false;  // the user chose a file row (else the selection follows the recommendation)
};

}  // namespace spillway::ui
