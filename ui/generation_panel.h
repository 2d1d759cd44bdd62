#pragma once
// The chat's generation settings beside the transcript (a side sheet the Settings button shows):
// a preset (Precise, Balanced, Creative, the user's), the system prompt, the reply's length limit,
// temperature, top-k, top-p, min-p, repetition penalty and seed, and "Save as preset…"; where the
// model's template offers them, its thinking switch, reasoning effort and thinking budget. It
// shows and collects; ChatController keeps the settings with the chat.

#include <QWidget>

#include "generation_settings.h"

class QCheckBox;
class QComboBox;
class QFormLayout;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace spillway::ui {

class GenerationPanel : public QWidget {
    Q_OBJECT
public:
    explicit GenerationPanel(QWidget* parent = nullptr);

    // Shows `settings` (sends no changed()).
    void setSettings(const GenerationSettings& settings);
    GenerationSettings settings() const;
    void setPresets(const QVector<GenerationPreset>& presets);
    // The model answering has no chat template (a base model): it continues the text, reads no
    // system prompt (a note under it says so), and a reply of no set length stops at
    // `defaultReplyTokens` (shown as Max tokens' default).
    void setBaseModel(bool base, int defaultReplyTokens);
    // Shows the thinking rows the model's template offers (none: hidden).
    void setThinkingOptions(const ThinkingOptions& options);

signals:
    void changed(const spillway::ui::GenerationSettings& settings);
    void presetChosen(const QString& name);
    void savePresetRequested(const QString& name);

private:
    void emitChanged();

    QComboBox* m_preset = nullptr;
    QPlainTextEdit* m_system = nullptr;
    QLabel* m_systemNote = nullptr;  // a base model ignores the system prompt
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_topK = nullptr;
    QDoubleSpinBox* m_topP = nullptr;
    QDoubleSpinBox* m_minP = nullptr;
    QDoubleSpinBox* m_repeat = nullptr;
    QSpinBox* m_seed = nullptr;
    QCheckBox* m_thinking = nullptr;
    QComboBox* m_effort = nullptr;
    QSpinBox* m_budget = nullptr;
    QFormLayout* m_form = nullptr;
    QPushButton* m_save = nullptr;
    QVector<GenerationPreset> m_presets;
    bool m_showing = false;  // setSettings is filling the fields
};

}  // namespace spillway::ui
