#include "welcome_page.h"

#include <algorithm>

#include "palette_colors.h"

#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace spillway::ui {

WelcomePage::WelcomePage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(32, 24, 32, 24);
    auto* title = new QLabel(tr("<h2>Welcome to Spillway</h2>"
                                "<p>Spillway runs language models bigger than your GPU's memory by keeping each "
                                "weight where it is cheapest to read: device memory, RAM or the SSD. First it "
                                "measures this machine.</p>"),
                             this);
    title->setWordWrap(true);
    m_stage = new QLabel(tr("Measuring this machine …"), this);
    m_stage->setObjectName("probeStage");
    m_progress = new QProgressBar(this);
    m_progress->setObjectName("probeProgress");
    m_progress->setRange(0, 100);
    m_progress->setValue(0);
    m_hardware = new QLabel(this);
    m_hardware->setObjectName("welcomeHardware");
    m_hardware->setAccessibleName(tr("This machine"));
    m_hardware->setWordWrap(true);
    m_hardware->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_capabilities = new QLabel(this);
    m_capabilities->setObjectName("welcomeCapabilities");
    m_capabilities->setAccessibleName(tr("What it can run"));
    m_capabilities->setWordWrap(true);
    m_capabilities->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_model = new QLabel(tr("Loading the demo model …"), this);
    m_model->setWordWrap(true);
    m_start = new QPushButton(tr("Start chatting"), this);
    m_start->setObjectName("startChatting");
    m_start->setDefault(true);
    auto* hint = new QLabel(tr("Drop a GGUF model anywhere on the window to add it; the Tuning view shows where its "
                               "weights would live and how fast it would run."),
                            this);
    hint->setWordWrap(true);
    hint->setStyleSheet(colorStyle(mutedColor(palette())));
    layout->addWidget(title);
    layout->addWidget(m_stage);
    layout->addWidget(m_progress);
    layout->addWidget(m_hardware);
    layout->addWidget(m_capabilities);
    layout->addWidget(m_model);
    layout->addWidget(hint);
    layout->addWidget(m_start, 0, Qt::AlignLeft);
    layout->addStretch(1);
    connect(m_start, &QPushButton::clicked, this, &WelcomePage::startClicked);
}

QString WelcomePage::summaryText() const { return m_hardware->text() + "\n" + m_capabilities->text(); }

void WelcomePage::setProgress(double fraction, const QString& stage)
{
    // The bar only goes forward while the machine is measured (a second measurement goes on
    // from where the first stopped).
    m_progress->setValue(std::max(m_progress->value(), int(fraction * 100.0 + 0.5)));
    m_stage->setText(fraction >= 1.0 ? tr("Measured.") : tr("Measuring: %1 …").arg(stage));
    showModel();
}

void WelcomePage::setSummary(const QString& hardware, const QString& capabilities)
{
    m_measured = true;
    m_progress->setValue(100);
    m_stage->setText(tr("This machine:"));
    m_hardware->setText(hardware);
    m_capabilities->setText(capabilities);
    showModel();
}

void WelcomePage::setModel(const QString& description)
{
    m_modelDescription = description;
    showModel();
}

QString WelcomePage::modelLine() const { return m_model->text(); }

void WelcomePage::showModel()
{
    if (m_modelDescription.isEmpty()) return m_model->clear();
    m_model->setText(m_measured ? tr("Ready to chat: %1").arg(m_modelDescription)
                                : tr("Loaded: %1. You can start chatting now; the measurement (%2%) goes on beside it.")
                                      .arg(m_modelDescription)
                                      .arg(m_progress->value()));
}

void WelcomePage::setFailed(const QString& message)
{
    m_measured = true;
    m_stage->setText(tr("The measurement failed: %1. Chatting works all the same; the Tuning view needs the measurement for its predictions.").arg(message));
    showModel();
}

}  // namespace spillway::ui
