#pragma once
// The Tuning view: the measured machine, the controls (compute device, device and RAM budgets, context length,
// KV precision, compression variant, prefetch depth, CPU threads) and the planner's answer for
// them: a large stacked bar with a line per tier, the predicted tokens/s, and what the last
// change of a control did to them. It only shows and collects values;
// ChatWindow sends them to the TuningWorker on every change and applies the plan.

#include <QJsonObject>
#include <QVector>
#include <QWidget>

#include "model_worker.h"
#include "tuning_worker.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace spillway::ui {

class TierBar;

class TuningPanel : public QWidget {
    Q_OBJECT
public:
    explicit TuningPanel(QWidget* parent = nullptr);

    QDoubleSpinBox* vramBudgetBox() const { return m_vram; }  // MiB, 0 = default
    QDoubleSpinBox* ramBudgetBox() const { return m_ram; }
    QSpinBox* contextBox() const { return m_ctx; }
    QComboBox* kvTypeBox() const { return m_kvType; }      // item data: "f32", "f16", "q8"
    QSpinBox* neuronCacheBox() const { return m_neuronCache; }  // bundles per layer, 0 = off
    QComboBox* neuronModeBox() const { return m_neuronMode; }   // item data: "exact", "predicted"
    QComboBox* coldNeuronsBox() const { return m_coldNeurons; }  // item data: "auto", "ship", "cpu"
    QComboBox* variantBox() const { return m_variant; }    // item data: the model's path
    QComboBox* backendBox() const { return m_backend; }    // item data: "auto", "cpu", "cuda", "vulkan"
    QSpinBox* prefetchBox() const { return m_prefetch; }
    QSpinBox* threadsBox() const { return m_threads; }
    QPushButton* applyButton() const { return m_apply; }

    // The controls' values, for `modelPath` when no variant is chosen.
    TuningSettings settings(const QString& modelPath) const;
    QString hardwareSummary() const;
    QString predictionText() const;
    QString lastChangeText() const;  // "Last change (context 256 → 2,048): 8.1 → 7.9 tokens/s, ..."
    void setHardware(const QString& summary);
    void showPrediction(const TuningPrediction& prediction, bool canApply);
    void showNoPlan(const QString& message);
    // A reply measured lane by lane: shown in the lane table's last column while the prediction
    // shown is of the same placement (planKey), else the table says the last run used another.
    void showMeasured(const RunLanes& run);
    // The lane table as plain text, a line per lane: "SSD reads: probe 1.20 ms, predicted 1.10 ms,
    // last run 1.15 ms" (the probe's column only once runs calibrated it, the run's once there is one).
    QString lanesText() const;
    bool hasPlan() const { return m_shown.plan != nullptr; }  // false after showNoPlan
    // The controls' choices as JSON (the compute device, budgets, context, KV and neuron-cache
    // settings, prefetch, threads; not the variant, which belongs to the running model), and
    // back: values the controls do not offer are left as they are. restoreState emits changed()
    // once.
    QJsonObject saveState() const;
    void restoreState(const QJsonObject& state);
    // The compression variants of the running model: itself and the packages made from it (or
    // its source and siblings). Keeps the choice when it is still listed.
    void setVariants(const QVector<ModelItem>& catalog, const QString& currentPath);

signals:
    void changed();  // a control moved: ask the planner again
    void applyClicked();

private:
    QLabel* m_hardware = nullptr;
    QDoubleSpinBox* m_vram = nullptr;
    QDoubleSpinBox* m_ram = nullptr;
    QSpinBox* m_ctx = nullptr;
    QLabel* m_contextNote = nullptr;  // a context above the model's trained one
    QComboBox* m_kvType = nullptr;
    QSpinBox* m_neuronCache = nullptr;
    QComboBox* m_neuronMode = nullptr;
    QComboBox* m_coldNeurons = nullptr;
    QComboBox* m_variant = nullptr;
    QString m_variantsOf;  // the running model the variants were listed for
    QComboBox* m_backend = nullptr;
    QSpinBox* m_prefetch = nullptr;
    QSpinBox* m_threads = nullptr;
    TierBar* m_tierBar = nullptr;
    QLabel* m_prediction = nullptr;
    QLabel* m_speed = nullptr;         // "8.1 tokens/s predicted", large
    QLabel* m_tierLines[3] = {};       // device, RAM, SSD: what each holds
    QLabel* m_change = nullptr;        // what the last change did
    QLabel* m_lanes = nullptr;         // per lane: the probe's figure, the prediction, the last run
    QString m_lanesPlain;              // lanesText()
    TuningPrediction m_shown;          // the prediction the lane table is of (its plan kept)
    RunLanes m_run;                    // the last reply measured (tokens 0: none yet)
    void showLanes();
    TuningPrediction m_previous;       // the prediction before (its plan dropped)
    bool m_havePrevious = false;
    QPushButton* m_apply = nullptr;
};

// What moved between two predictions' settings and what it did to the speed and the bytes per
// tier ("Last change (context 256 → 2,048): 8.1 → 7.9 tokens/s, KV cache 1 MiB → 8 MiB"); empty
// when no setting differs.
QString describeChange(const TuningPrediction& before, const TuningPrediction& after);
// Whole percentages of `parts` that add up to 100 (largest remainder), each at most 100.
QList<int> wholeShares(const QList<qint64>& parts);
// "2,048", or for 0 (the default) "trained (2,048)": `defaultContext`, what 0 resolves to.
QString contextText(int context, int defaultContext);

// One stacked bar: the model's weights on the device, in pinned RAM and on the SSD.
class TierBar : public QWidget {
public:
    explicit TierBar(QWidget* parent = nullptr);
    void set(double device, double ram, double ssd);

protected:
    void paintEvent(QPaintEvent*) override;

private:
    double m_parts[3] = {0, 0, 0};
};

}  // namespace spillway::ui
