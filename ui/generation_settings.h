#pragma once
// How a chat generates: its system prompt, the reply's length limit and the sampler's settings.
// Each chat keeps its own (stored as JSON in the settings table, key "chat.<id>.generation"), and
// the settings set last (but the system prompt) start the next session's new chat
// ("ui.newChat.generation");
// named presets hold the same fields: three built in, more saved by the user ("ui.presets").

#include <QJsonObject>
#include <QObject>
#include <QMetaType>
#include <QString>
#include <QVector>

#include "core/runtime/sampler.h"

namespace spillway::ui {

struct GenerationSettings {
    QString systemPrompt;       // "" = none
    int maxTokens = 0;          // 0 = until the model ends its turn or the context is full
    double temperature = 0.8;   // 0 = greedy
    int topK = 40;              // 0 = off
    double topP = 0.95;         // 1 = off
    double minP = 0.05;         // 0 = off
    double repeatPenalty = 1.0; // 1 = off
    qint64 seed = -1;           // -1 = a new random seed for every reply
    // Thinking, where the model's template offers it (ThinkingOptions says which): whether it
    // thinks before answering (enable_thinking), how hard (reasoning_effort: "low", "medium",
    // "high"; "" the template's default), and the most tokens it may think for (-1: no limit).
    // The chat's own: a preset leaves them as they are.
    bool thinking = true;
    QString reasoningEffort;
    int reasoningBudget = -1;

    QJsonObject toJson() const;
    // Missing fields keep their defaults; values out of range are clamped.
    static GenerationSettings fromJson(const QJsonObject& json);
    // The sampler's settings (seed: the fixed one, or `randomSeed`).
    SamplerSettings sampler(uint64_t randomSeed) const;
    bool operator==(const GenerationSettings&) const = default;
    // These settings with `other`'s thinking (a preset's sampling, the chat's thinking).
    GenerationSettings withThinkingOf(const GenerationSettings& other) const;
};

// What the model's chat template offers of thinking: a switch (it reads enable_thinking), an
// effort (it reads reasoning_effort) and a budget (it marks its reasoning with <think> tags).
struct ThinkingOptions {
    bool switchable = false;
    bool effort = false;
    bool budget = false;
    bool any() const { return switchable || effort || budget; }
    bool operator==(const ThinkingOptions&) const = default;
};

struct GenerationPreset {
    QString name;
    GenerationSettings settings;
    bool builtIn = false;
};

// "Precise" (greedy), "Balanced" (the defaults), "Creative" (warmer, wider).
QVector<GenerationPreset> builtInPresets();

// The settings key a chat's settings are stored under.
QString chatSettingsKey(qint64 conversation);
inline constexpr const char* kPresetsKey = "ui.presets";
// The settings set last, in any chat, but the system prompt: what a new chat starts with in the
// next session.
inline constexpr const char* kNewChatKey = "ui.newChat.generation";

}  // namespace spillway::ui

Q_DECLARE_METATYPE(spillway::ui::GenerationSettings)
Q_DECLARE_METATYPE(spillway::ui::ThinkingOptions)
