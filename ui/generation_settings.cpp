#include "generation_settings.h"

#include <algorithm>

namespace spillway::ui {

QJsonObject GenerationSettings::toJson() const
{
    return QJsonObject{{"systemPrompt", systemPrompt}, {"maxTokens", maxTokens}, {"temperature", temperature},
                       {"topK", topK},   {"topP", topP},     {"minP", minP},
                       {"repeatPenalty", repeatPenalty}, {"seed", seed}, {"thinking", thinking},
                       {"reasoningEffort", reasoningEffort}, {"reasoningBudget", reasoningBudget}};
}

GenerationSettings GenerationSettings::fromJson(const QJsonObject& json)
{
    GenerationSettings s;
    s.systemPrompt = json.value("systemPrompt").toString(s.systemPrompt);
    s.maxTokens = std::clamp(json.value("maxTokens").toInt(s.maxTokens), 0, 1 << 20);
    s.temperature = std::clamp(json.value("temperature").toDouble(s.temperature), 0.0, 5.0);
    s.topK = std::clamp(json.value("topK").toInt(s.topK), 0, 1 << 20);
    s.topP = std::clamp(json.value("topP").toDouble(s.topP), 0.0, 1.0);
    s.minP = std::clamp(json.value("minP").toDouble(s.minP), 0.0, 1.0);
    s.repeatPenalty = std::clamp(json.value("repeatPenalty").toDouble(s.repeatPenalty), 0.5, 3.0);
    s.seed = std::max<qint64>(-1, qint64(json.value("seed").toDouble(double(s.seed))));
    s.thinking = json.value("thinking").toBool(s.thinking);
    const QString effort = json.value("reasoningEffort").toString();
    if (effort == QLatin1String("low") || effort == QLatin1String("medium") || effort == QLatin1String("high"))
        s.reasoningEffort = effort;
    s.reasoningBudget = std::clamp(json.value("reasoningBudget").toInt(s.reasoningBudget), -1, 1 << 20);
    return s;
}

GenerationSettings GenerationSettings::withThinkingOf(const GenerationSettings& other) const
{
    GenerationSettings s = *this;
    s.thinking = other.thinking;
    s.reasoningEffort = other.reasoningEffort;
    s.reasoningBudget = other.reasoningBudget;
    return s;
}

SamplerSettings GenerationSettings::sampler(uint64_t randomSeed) const
{
    SamplerSettings s;
    s.temperature = float(temperature);
    s.topK = topK;
    s.topP = float(topP);
    s.minP = float(minP);
    s.repeatPenalty = float(repeatPenalty);
    s.seed = seed >= 0 ? uint64_t(seed) : randomSeed;
    return s;
}

QVector<GenerationPreset> builtInPresets()
{
    GenerationSettings precise;
    precise.temperature = 0;
    GenerationSettings creative;
    creative.temperature = 1.1;
    creative.topK = 100;
    creative.topP = 0.98;
    creative.minP = 0.02;
    creative.repeatPenalty = 1.1;
    return {{QObject::tr("Precise"), precise, true},
            {QObject::tr("Balanced"), GenerationSettings{}, true},
            {QObject::tr("Creative"), creative, true}};
}

QString chatSettingsKey(qint64 conversation) { return QStringLiteral("chat.%1.generation").arg(conversation); }

}  // namespace spillway::ui
