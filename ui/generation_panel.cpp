#include "generation_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QInputDialog>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "palette_colors.h"

namespace spillway::ui {

GenerationPanel::GenerationPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 0, 0, 0);
    m_preset = new QComboBox(this);
    m_preset->setObjectName("preset");
    m_preset->setAccessibleName(tr("Preset"));
    m_system = new QPlainTextEdit(this);
    m_system->setObjectName("systemPrompt");
    m_system->setAccessibleName(tr("System prompt"));
    m_system->setPlaceholderText(tr("System prompt (how the model should answer in this chat)"));
    m_system->setTabChangesFocus(true);
    auto spin = [this](const char* name, const QString& label, int lo, int hi, int value) {
        auto* box = new QSpinBox(this);
        box->setObjectName(name);
        box->setAccessibleName(label);
        box->setRange(lo, hi);
        box->setValue(value);
        return box;
    };
    auto real = [this](const char* name, const QString& label, double lo, double hi, double step, int decimals) {
        auto* box = new QDoubleSpinBox(this);
        box->setObjectName(name);
        box->setAccessibleName(label);
        box->setRange(lo, hi);
        box->setSingleStep(step);
        box->setDecimals(decimals);
        return box;
    };
    m_maxTokens = spin("maxTokens", tr("Max tokens"), 0, 1 << 20, 0);
    m_maxTokens->setSpecialValueText(tr("until the end"));
    m_maxTokens->setToolTip(tr("0: until the model ends its turn or the context is full"));
    m_temperature = real("temperature", tr("Temperature"), 0, 5, 0.05, 2);
    m_temperature->setToolTip(tr("0: always the most likely token (greedy)"));
    m_topK = spin("topK", tr("Top-k"), 0, 1 << 20, 40);
    m_topK->setSpecialValueText(tr("off"));
    m_topP = real("topP", tr("Top-p"), 0, 1, 0.01, 2);
    m_minP = real("minP", tr("Min-p"), 0, 1, 0.01, 2);
    m_repeat = real("repeatPenalty", tr("Repetition penalty"), 0.5, 3, 0.05, 2);
    m_seed = spin("seed", tr("Seed"), -1, 2147483647, -1);
    m_seed->setSpecialValueText(tr("random"));
    m_thinking = new QCheckBox(tr("Think before answering"), this);
    m_thinking->setObjectName("thinking");
    m_thinking->setToolTip(tr("The model's template takes a thinking switch (enable_thinking)"));
    m_effort = new QComboBox(this);
    m_effort->setObjectName("reasoningEffort");
    m_effort->setAccessibleName(tr("Reasoning effort"));
    m_effort->addItem(tr("the model's default"), QString());
    m_effort->addItem(tr("low"), QStringLiteral("low"));
    m_effort->addItem(tr("medium"), QStringLiteral("medium"));
    m_effort->addItem(tr("high"), QStringLiteral("high"));
    m_effort->setToolTip(tr("How hard the model reasons (its template's reasoning_effort)"));
    m_budget = spin("reasoningBudget", tr("Thinking budget"), -1, 1 << 20, -1);
    m_budget->setSpecialValueText(tr("no limit"));
    m_budget->setSuffix(tr(" tokens"));
    m_budget->setToolTip(tr("The most tokens the model thinks for; then its thinking is closed and it answers "
                            "(0: it answers at once)"));
    m_save = new QPushButton(tr("Save as preset…"), this);
    m_save->setObjectName("savePreset");

    auto* form = m_form = new QFormLayout;
    form->addRow(tr("Preset"), m_preset);
    form->addRow(tr("Max tokens"), m_maxTokens);
    form->addRow(tr("Temperature"), m_temperature);
    form->addRow(tr("Top-k"), m_topK);
    form->addRow(tr("Top-p"), m_topP);
    form->addRow(tr("Min-p"), m_minP);
    form->addRow(tr("Repetition penalty"), m_repeat);
    form->addRow(tr("Seed"), m_seed);
    form->addRow(tr("Thinking"), m_thinking);
    form->addRow(tr("Reasoning effort"), m_effort);
    form->addRow(tr("Thinking budget"), m_budget);
    m_systemNote = new QLabel(this);
    m_systemNote->setObjectName("systemPromptNote");
    m_systemNote->setWordWrap(true);
    m_systemNote->setStyleSheet(colorStyle(noticeColor(palette())));
    m_systemNote->hide();
    layout->addWidget(new QLabel(tr("System prompt"), this));
    layout->addWidget(m_system, 1);
    layout->addWidget(m_systemNote);
    layout->addLayout(form);
    layout->addWidget(m_save);

    connect(m_system, &QPlainTextEdit::textChanged, this, &GenerationPanel::emitChanged);
    for (QSpinBox* box : {m_maxTokens, m_topK, m_seed})
        connect(box, &QSpinBox::valueChanged, this, &GenerationPanel::emitChanged);
    for (QDoubleSpinBox* box : {m_temperature, m_topP, m_minP, m_repeat})
        connect(box, &QDoubleSpinBox::valueChanged, this, &GenerationPanel::emitChanged);
    connect(m_budget, &QSpinBox::valueChanged, this, &GenerationPanel::emitChanged);
    connect(m_thinking, &QCheckBox::toggled, this, [this](bool on) {
        m_budget->setEnabled(on);
        emitChanged();
    });
    connect(m_effort, &QComboBox::currentIndexChanged, this, &GenerationPanel::emitChanged);
    connect(m_preset, &QComboBox::activated, this, [this](int index) {
        if (index > 0) emit presetChosen(m_preset->itemText(index));
    });
    connect(m_save, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const QString name = QInputDialog::getText(this, tr("Save as preset"), tr("Name:"), QLineEdit::Normal, QString(), &ok);
        if (ok && !name.trimmed().isEmpty()) emit savePresetRequested(name.trimmed());
    });
    setSettings(GenerationSettings{});
    setThinkingOptions({});
}

void GenerationPanel::setThinkingOptions(const ThinkingOptions& options)
{
    m_form->setRowVisible(m_thinking, options.switchable);
    m_form->setRowVisible(m_effort, options.effort);
    m_form->setRowVisible(m_budget, options.budget);
}

void GenerationPanel::setBaseModel(bool base, int defaultReplyTokens)
{
    m_systemNote->setText(base ? tr("This model has no chat template: it continues your text and does not read a "
                                    "system prompt.")
                               : QString());
    m_systemNote->setVisible(base);
    m_maxTokens->setSpecialValueText(base ? tr("%1 (a base model's default)").arg(defaultReplyTokens) : tr("until the end"));
    m_maxTokens->setToolTip(base ? tr("0: %1 tokens, as a base model never ends a turn itself (Continue goes on)")
                                       .arg(defaultReplyTokens)
                                 : tr("0: until the model ends its turn or the context is full"));
}

void GenerationPanel::setSettings(const GenerationSettings& s)
{
    m_showing = true;
    if (m_system->toPlainText() != s.systemPrompt) m_system->setPlainText(s.systemPrompt);
    m_maxTokens->setValue(s.maxTokens);
    m_temperature->setValue(s.temperature);
    m_topK->setValue(s.topK);
    m_topP->setValue(s.topP);
    m_minP->setValue(s.minP);
    m_repeat->setValue(s.repeatPenalty);
    m_seed->setValue(int(std::min<qint64>(s.seed, 2147483647)));
    m_thinking->setChecked(s.thinking);
    m_budget->setEnabled(s.thinking);
    m_effort->setCurrentIndex(std::max(0, m_effort->findData(s.reasoningEffort)));
    m_budget->setValue(s.reasoningBudget);
    // The preset these settings are (its system prompt aside), else "this chat's own".
    int shown = 0;
    for (int i = 0; i < m_presets.size(); ++i) {
        GenerationSettings p = m_presets[i].settings.withThinkingOf(s);
        p.systemPrompt = s.systemPrompt;
        if (p == s) {
            shown = i + 1;
            break;
        }
    }
    m_preset->setCurrentIndex(shown);
    m_showing = false;
}

GenerationSettings GenerationPanel::settings() const
{
    GenerationSettings s;
    s.systemPrompt = m_system->toPlainText();
    s.maxTokens = m_maxTokens->value();
    s.temperature = m_temperature->value();
    s.topK = m_topK->value();
    s.topP = m_topP->value();
    s.minP = m_minP->value();
    s.repeatPenalty = m_repeat->value();
    s.seed = m_seed->value();
    s.thinking = m_thinking->isChecked();
    s.reasoningEffort = m_effort->currentData().toString();
    s.reasoningBudget = m_budget->value();
    return s;
}

void GenerationPanel::setPresets(const QVector<GenerationPreset>& presets)
{
    const GenerationSettings shown = settings();
    m_presets = presets;
    m_showing = true;
    m_preset->clear();
    m_preset->addItem(tr("(this chat's own)"));
    for (const GenerationPreset& p : presets) m_preset->addItem(p.name);
    m_showing = false;
    setSettings(shown);
}

void GenerationPanel::emitChanged()
{
    if (!m_showing) emit changed(settings());
}

}  // namespace spillway::ui
