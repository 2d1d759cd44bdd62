#include "tuning_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/plan/planner.h"
#include "palette_colors.h"
#include "readable.h"

namespace spillway::ui {

TierBar::TierBar(QWidget* parent) : QWidget(parent) { setMinimumHeight(40); }

void TierBar::set(double device, double ram, double ssd)
{
    m_parts[0] = device;
    m_parts[1] = ram;
    m_parts[2] = ssd;
    update();
}

void TierBar::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const double total = m_parts[0] + m_parts[1] + m_parts[2];
    const QString names[] = {TuningPanel::tr("device"), TuningPanel::tr("RAM"), TuningPanel::tr("SSD")};
    double x = 0;
    for (int i = 0; i < 3; ++i) {
        if (total <= 0 || m_parts[i] <= 0) continue;
        const double w = width() * m_parts[i] / total;
        const QRectF r(x, 0, w, height());
        p.fillRect(r, tierColor(i));
        p.setPen(Qt::white);
        if (w > 40) p.drawText(r, Qt::AlignCenter, names[i]);
        x += w;
    }
    p.setPen(palette().color(QPalette::Mid));
    p.drawRect(rect().adjusted(0, 0, -1, -1));
}

TuningPanel::TuningPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    m_hardware = new QLabel(tr("Measuring this machine …"), this);
    m_hardware->setObjectName("hardwareSummary");
    m_hardware->setWordWrap(true);
    auto* form = new QFormLayout;
    const auto mib = [this](double max) {
        auto* box = new QDoubleSpinBox(this);
        box->setRange(0, max);
        box->setDecimals(2);
        box->setSuffix(QStringLiteral(" MiB"));
        box->setSpecialValueText(tr("default"));
        box->setKeyboardTracking(false);
        return box;
    };
    m_vram = mib(1e8);
    m_vram->setObjectName("vramBudget");
    m_vram->setToolTip(tr("Device memory for weights, KV cache and streaming slots (default: all free)"));
    m_ram = mib(1e8);
    m_ram->setObjectName("ramBudget");
    m_ram->setToolTip(tr("Pinned RAM for weights and staging (default: half the available RAM)"));
    m_ctx = new QSpinBox(this);
    m_ctx->setObjectName("contextLength");
    m_ctx->setRange(0, 1 << 20);
    m_ctx->setSpecialValueText(tr("trained (≤ 4096)"));
    m_ctx->setKeyboardTracking(false);
    m_kvType = new QComboBox(this);
    m_kvType->setObjectName("kvType");
    m_kvType->addItem(tr("fp32 (exact)"), QStringLiteral("f32"));
    m_kvType->addItem(tr("fp16 (half the memory)"), QStringLiteral("f16"));
    m_kvType->addItem(tr("int8 (a quarter)"), QStringLiteral("q8"));
    m_kvType->setToolTip(tr("KV cache precision: smaller leaves more device memory for weights"));
    m_neuronCache = new QSpinBox(this);
    m_neuronCache->setObjectName("neuronCache");
    m_neuronCache->setRange(0, 1 << 20);
    m_neuronCache->setSingleStep(64);
    m_neuronCache->setSpecialValueText(tr("off"));
    m_neuronCache->setSuffix(tr(" neurons per layer"));
    m_neuronCache->setKeyboardTracking(false);
    m_neuronCache->setToolTip(tr("ReLU models: compute each FFN over its active neurons only, through a cache of this "
                                 "many neurons per layer that loads only the ones it lacks each token"));
    m_neuronMode = new QComboBox(this);
    m_neuronMode->setObjectName("neuronMode");
    m_neuronMode->addItem(tr("exact (the gate decides)"), QStringLiteral("exact"));
    m_neuronMode->addItem(tr("predicted (approximate, fewer bytes)"), QStringLiteral("predicted"));
    m_neuronMode->setToolTip(tr("Predicted mode trusts the model's stored activation predictors and reads no FFN "
                                "weight of a neuron they leave out"));
    m_coldNeurons = new QComboBox(this);
    m_coldNeurons->setObjectName("coldNeurons");
    m_coldNeurons->addItem(tr("automatic (the faster, per layer)"), QStringLiteral("auto"));
    m_coldNeurons->addItem(tr("ship them to the device"), QStringLiteral("ship"));
    m_coldNeurons->addItem(tr("compute them on the CPU"), QStringLiteral("cpu"));
    m_coldNeurons->setToolTip(tr("Neurons the cache lacks: shipped to its slots, or computed on the CPU where they lie "
                                 "while the slots keep the hottest neurons for good (needs a package with predictors)"));
    m_variant = new QComboBox(this);
    m_variant->setObjectName("variant");
    m_variant->setToolTip(tr("Which compressed version of the model to run (compress it in the Models view)"));
    m_backend = new QComboBox(this);
    m_backend->setObjectName("backend");
    m_backend->addItem(tr("automatic (the fastest usable)"), QStringLiteral("auto"));
    m_backend->addItem(tr("CPU"), QStringLiteral("cpu"));
    m_backend->addItem(tr("CUDA (NVIDIA)"), QStringLiteral("cuda"));
    m_backend->addItem(tr("Vulkan"), QStringLiteral("vulkan"));
    m_backend->setToolTip(tr("Which device computes: automatic takes a CUDA GPU, else a Vulkan GPU, else the CPU"));
    m_prefetch = new QSpinBox(this);
    m_prefetch->setObjectName("prefetch");
    m_prefetch->setRange(0, 16);
    m_prefetch->setValue(2);
    m_threads = new QSpinBox(this);
    m_threads->setObjectName("threads");
    m_threads->setRange(0, 1024);
    m_threads->setSpecialValueText(tr("one per core"));
    form->addRow(tr("Model variant"), m_variant);
    form->addRow(tr("Compute on"), m_backend);
    form->addRow(tr("Device budget"), m_vram);
    form->addRow(tr("RAM budget"), m_ram);
    form->addRow(tr("Context"), m_ctx);
    m_contextNote = new QLabel(this);
    m_contextNote->setObjectName("contextNote");
    m_contextNote->setWordWrap(true);
    m_contextNote->setStyleSheet(colorStyle(noticeColor(palette())));
    m_contextNote->hide();
    form->addRow(QString(), m_contextNote);
    form->addRow(tr("KV cache"), m_kvType);
    form->addRow(tr("Neuron cache"), m_neuronCache);
    form->addRow(tr("Neuron selection"), m_neuronMode);
    form->addRow(tr("Cold neurons"), m_coldNeurons);
    form->addRow(tr("Prefetch depth"), m_prefetch);
    form->addRow(tr("CPU threads"), m_threads);
    m_tierBar = new TierBar(this);
    m_prediction = new QLabel(this);
    m_prediction->setObjectName("prediction");
    m_prediction->setWordWrap(true);
    m_apply = new QPushButton(tr("Apply"), this);
    m_apply->setObjectName("applyTuning");
    m_apply->setEnabled(false);
    // Two columns: the machine and the controls; the placement (a large bar, a line per tier),
    // the predicted speed and what the last change did.
    auto* placementTitle = new QLabel(tr("Placement of the weights"), this);
    QFont bold = placementTitle->font();
    bold.setBold(true);
    placementTitle->setFont(bold);
    QFont big = bold;
    big.setPointSizeF(bold.pointSizeF() * 1.8);
    m_speed = new QLabel(this);
    m_speed->setObjectName("predictedSpeed");
    m_speed->setAccessibleName(tr("Predicted speed"));
    m_speed->setFont(big);
    auto* tiers = new QGridLayout;
    const QString tierNames[] = {tr("Device"), tr("RAM"), tr("SSD")};
    for (int i = 0; i < 3; ++i) {
        auto* swatch = new QLabel(this);
        swatch->setFixedSize(14, 14);
        swatch->setStyleSheet(QStringLiteral("background: %1; border-radius: 3px;").arg(tierColor(i).name()));
        m_tierLines[i] = new QLabel(this);
        m_tierLines[i]->setObjectName(QStringLiteral("tierLine%1").arg(i));
        m_tierLines[i]->setWordWrap(true);
        auto* name = new QLabel(tierNames[i], this);
        name->setFont(bold);
        tiers->addWidget(swatch, i, 0);
        tiers->addWidget(name, i, 1);
        tiers->addWidget(m_tierLines[i], i, 2);
    }
    tiers->setColumnStretch(2, 1);
    m_lanes = new QLabel(this);
    m_lanes->setObjectName("tuningLanes");
    m_lanes->setAccessibleName(tr("Time per token, lane by lane"));
    m_lanes->setTextFormat(Qt::RichText);
    m_lanes->setWordWrap(true);
    m_change = new QLabel(this);
    m_change->setObjectName("lastChange");
    m_change->setAccessibleName(tr("What the last change did"));
    m_change->setWordWrap(true);
    m_change->setStyleSheet(colorStyle(mutedColor(palette())));
    auto* left = new QVBoxLayout;
    left->addWidget(m_hardware);
    left->addLayout(form);
    left->addStretch(1);
    auto* right = new QVBoxLayout;
    right->addWidget(placementTitle);
    right->addWidget(m_tierBar);
    right->addLayout(tiers);
    right->addSpacing(8);
    right->addWidget(m_speed);
    right->addWidget(m_prediction);
    right->addWidget(m_lanes);
    right->addWidget(m_change);
    right->addWidget(m_apply, 0, Qt::AlignLeft);
    right->addStretch(1);
    auto* columns = new QHBoxLayout;
    columns->addLayout(left, 2);
    columns->addSpacing(16);
    columns->addLayout(right, 3);
    layout->addLayout(columns, 1);
    for (QDoubleSpinBox* box : {m_vram, m_ram}) connect(box, &QDoubleSpinBox::valueChanged, this, &TuningPanel::changed);
    for (QSpinBox* box : {m_ctx, m_prefetch, m_threads, m_neuronCache}) connect(box, &QSpinBox::valueChanged, this, &TuningPanel::changed);
    for (QComboBox* box : {m_kvType, m_variant, m_neuronMode, m_coldNeurons, m_backend})
        connect(box, &QComboBox::currentIndexChanged, this, &TuningPanel::changed);
    connect(m_apply, &QPushButton::clicked, this, &TuningPanel::applyClicked);
}

TuningSettings TuningPanel::settings(const QString& modelPath) const
{
    TuningSettings t;
    t.vramBudget = qint64(m_vram->value() * 1024.0 * 1024.0);
    t.ramBudget = qint64(m_ram->value() * 1024.0 * 1024.0);
    t.contextLength = m_ctx->value();
    t.prefetchDepth = m_prefetch->value();
    t.threads = m_threads->value();
    t.kvType = m_kvType->currentData().toString();
    t.neuronCache = m_neuronCache->value();
    t.neuronMode = m_neuronMode->currentData().toString();
    t.coldNeurons = m_coldNeurons->currentData().toString();
    t.backend = m_backend->currentData().toString();
    t.modelPath = m_variant->currentIndex() >= 0 ? m_variant->currentData().toString() : modelPath;
    return t;
}

QString TuningPanel::hardwareSummary() const { return m_hardware->text(); }
QString TuningPanel::predictionText() const
{
    return m_speed->text().isEmpty() ? m_prediction->text() : m_speed->text() + QStringLiteral("\n") + m_prediction->text();
}
void TuningPanel::setHardware(const QString& summary) { m_hardware->setText(summary); }

QList<int> wholeShares(const QList<qint64>& parts)
{
    // Largest remainder: each share rounded down, the points left to the largest remainders.
    qint64 total = 0;
    for (qint64 p : parts) total += std::max<qint64>(0, p);
    QList<int> shares(parts.size(), 0);
    if (total <= 0) return shares;
    QList<std::pair<double, int>> remainders;
    int given = 0;
    for (int i = 0; i < parts.size(); ++i) {
        const double exact = 100.0 * double(std::max<qint64>(0, parts[i])) / double(total);
        shares[i] = int(exact);
        given += shares[i];
        remainders.push_back({exact - shares[i], i});
    }
    std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int k = 0; given < 100 && k < remainders.size(); ++k, ++given) ++shares[remainders[k].second];
    return shares;
}

QString contextText(int context, int defaultContext)
{
    const QLocale locale;
    if (context > 0 || defaultContext <= 0) return locale.toString(context);
    return QObject::tr("trained (%1)").arg(locale.toString(defaultContext));
}

void TuningPanel::showPrediction(const TuningPrediction& prediction, bool canApply)
{
    const qint64 ssd = std::max<qint64>(0, prediction.ssdBytes);
    m_tierBar->set(double(prediction.deviceBytes), double(prediction.ramBytes), double(ssd));
    const QLocale locale;
    const auto size = [&locale](qint64 bytes) { return locale.formattedDataSize(bytes); };
    // The shares of every weight the file holds: each at most 100 %, together 100 %.
    const QList<int> shares = wholeShares({prediction.deviceBytes, prediction.ramBytes, ssd});
    const auto share = [&](int tier) { return QStringLiteral("%1%").arg(shares[tier]); };
    m_tierLines[0]->setText(tr("%1 of the weights (%2), resident; KV cache %3")
                                .arg(size(prediction.deviceBytes), share(0), size(prediction.kvBytes)));
    m_tierLines[1]->setText(tr("%1 (%2) in pinned RAM, copied to the device as each layer runs")
                                .arg(size(prediction.ramBytes), share(1)));
    m_tierLines[2]->setText(tr("%1 (%2) stay on the SSD; %3 read per token")
                                .arg(size(ssd), share(2), size(prediction.ssdBytesPerToken)));
    const int trained = prediction.trainedContext;
    if (prediction.defaultContext > 0) m_ctx->setSpecialValueText(contextText(0, prediction.defaultContext));  // "trained (2,048)"
    const bool beyond = trained > 0 && prediction.settings.contextLength > trained;
    m_contextNote->setText(beyond ? tr("Longer than the %1 tokens the model was trained on: replies past them tend to "
                                       "lose the thread (the memory is planned as asked)")
                                        .arg(locale.toString(trained))
                                  : QString());
    m_contextNote->setVisible(beyond);
    m_speed->setText(tr("%1 tokens/s predicted").arg(readable(prediction.tokensPerSecond)));
    m_prediction->setText(tr("device %1 · RAM %2 · SSD %3 read per token\nKV cache %4")
                              .arg(size(prediction.deviceBytes), size(prediction.ramBytes),
                                   size(prediction.ssdBytesPerToken), size(prediction.kvBytes)) +
                          (prediction.stateBytes > 0
                               ? tr(" · recurrent state %1 (linear-attention layers: the same at any context length)")
                                     .arg(size(prediction.stateBytes))
                               : QString()) +
                          (prediction.note.isEmpty() ? QString() : QStringLiteral("\n") + prediction.note));
    m_shown = prediction;
    showLanes();
    if (m_havePrevious) {
        const QString change = describeChange(m_previous, prediction);
        if (!change.isEmpty()) m_change->setText(change);
    }
    m_previous = prediction;
    m_previous.plan.reset();
    m_havePrevious = true;
    m_apply->setEnabled(prediction.plan != nullptr && canApply);
}

QString TuningPanel::lastChangeText() const { return m_change->text(); }

QString describeChange(const TuningPrediction& before, const TuningPrediction& after)
{
    const TuningSettings &a = before.settings, &b = after.settings;
    const QLocale locale;
    const auto mib = [&locale](qint64 bytes) { return bytes > 0 ? locale.formattedDataSize(bytes) : QObject::tr("default"); };
    QStringList moved;
    if (a.modelPath != b.modelPath) moved << QObject::tr("variant %1").arg(QFileInfo(b.modelPath).fileName());
    if (a.backend != b.backend) moved << QObject::tr("compute on %1 → %2").arg(a.backend, b.backend);
    if (a.vramBudget != b.vramBudget) moved << QObject::tr("device budget %1 → %2").arg(mib(a.vramBudget), mib(b.vramBudget));
    if (a.ramBudget != b.ramBudget) moved << QObject::tr("RAM budget %1 → %2").arg(mib(a.ramBudget), mib(b.ramBudget));
    if (a.contextLength != b.contextLength)
        moved << QObject::tr("context %1 → %2")
                     .arg(contextText(a.contextLength, before.defaultContext), contextText(b.contextLength, after.defaultContext));
    if (a.kvType != b.kvType) moved << QObject::tr("KV cache %1 → %2").arg(a.kvType, b.kvType);
    if (a.neuronCache != b.neuronCache || a.neuronMode != b.neuronMode || a.coldNeurons != b.coldNeurons)
        moved << QObject::tr("neuron cache");
    if (a.prefetchDepth != b.prefetchDepth) moved << QObject::tr("prefetch %1 → %2").arg(a.prefetchDepth).arg(b.prefetchDepth);
    if (a.threads != b.threads) moved << QObject::tr("threads %1 → %2").arg(a.threads).arg(b.threads);
    if (moved.isEmpty()) return QString();
    QStringList effects;
    effects << QObject::tr("%1 → %2 tokens/s").arg(readable(before.tokensPerSecond), readable(after.tokensPerSecond));
    const auto bytes = [&](const QString& what, qint64 x, qint64 y) {
        if (x != y) effects << QObject::tr("%1 %2 → %3").arg(what, locale.formattedDataSize(x), locale.formattedDataSize(y));
    };
    bytes(QObject::tr("on the device"), before.deviceBytes, after.deviceBytes);
    bytes(QObject::tr("in RAM"), before.ramBytes, after.ramBytes);
    bytes(QObject::tr("SSD per token"), before.ssdBytesPerToken, after.ssdBytesPerToken);
    bytes(QObject::tr("KV cache"), before.kvBytes, after.kvBytes);
    return QObject::tr("Last change (%1): %2").arg(moved.join(QStringLiteral(", ")), effects.join(QStringLiteral(", ")));
}

void TuningPanel::showMeasured(const RunLanes& run)
{
    m_run = run;
    showLanes();
}

QString TuningPanel::lanesText() const { return m_lanesPlain; }

void TuningPanel::showLanes()
{
    const plan::PlanResult* plan = m_shown.plan.get();
    if (!plan) {
        m_lanes->clear();
        m_lanesPlain.clear();
        return;
    }
    const bool calibrated = plan->calibrationRuns > 0;
    const bool measured = m_run.tokens > 0 && m_run.planKey == planKey(*plan);
    struct Row {
        QString name;
        double probe, predicted, run;
    };
    const plan::LaneTimes &p = plan->lanes, &q = plan->probeLanes;
    const QList<Row> all = {
        {tr("SSD reads"), q.ssdRead, p.ssdRead, m_run.ssd},
        {tr("Host→device copies"), q.hostToDevice, p.hostToDevice, m_run.copy},
        {tr("Decompression"), q.decompress, p.decompress, m_run.decompress},
        {tr("Device compute"), q.deviceCompute, p.deviceCompute, m_run.device},
        {tr("CPU compute"), q.cpuCompute, p.cpuCompute, m_run.cpu},
    };
    const QLocale locale;
    const auto ms = [&locale](double seconds) { return locale.toString(seconds * 1e3, 'f', seconds < 1e-4 ? 3 : 2) + QStringLiteral(" ms"); };
    QString html = QStringLiteral("<table cellspacing='0' cellpadding='2'><tr><th align='left'>%1</th>").arg(tr("Per token"));
    if (calibrated) html += QStringLiteral("<th align='right'>%1</th>").arg(tr("probe alone"));
    html += QStringLiteral("<th align='right'>%1</th>").arg(calibrated ? tr("calibrated") : tr("predicted"));
    if (measured) html += QStringLiteral("<th align='right'>%1</th>").arg(tr("last run"));
    html += QStringLiteral("</tr>");
    QStringList plain;
    const auto addRow = [&](const QString& name, double probe, double predicted, double run, bool strong) {
        const QString open = strong ? QStringLiteral("<b>") : QString(), close = strong ? QStringLiteral("</b>") : QString();
        html += QStringLiteral("<tr><td>%1%2%3</td>").arg(open, name, close);
        QString line = name + QStringLiteral(":");
        if (calibrated) {
            html += QStringLiteral("<td align='right'>%1</td>").arg(ms(probe));
            line += tr(" probe %1,").arg(ms(probe));
        }
        html += QStringLiteral("<td align='right'>%1%2%3</td>").arg(open, ms(predicted), close);
        line += tr(" predicted %1").arg(ms(predicted));
        if (measured) {
            html += QStringLiteral("<td align='right'>%1%2%3</td>").arg(open, ms(run), close);
            line += tr(", last run %1").arg(ms(run));
        }
        html += QStringLiteral("</tr>");
        plain << line;
    };
    for (const Row& r : all)
        if (r.probe > 0 || r.predicted > 0 || (measured && r.run > 0)) addRow(r.name, r.probe, r.predicted, r.run, false);
    // The token: the lanes overlap in the pipeline, so it is less than their sum.
    addRow(tr("Token"), plan->probeSecondsPerToken, plan->secondsPerToken, m_run.secondsPerToken, true);
    html += QStringLiteral("</table>");
    QString caption;
    const auto rate = [](double secondsPerToken) { return secondsPerToken > 0 ? readable(1.0 / secondsPerToken) : QStringLiteral("?"); };
    if (measured)
        caption = tr("Last run: %1 tokens with this placement, %2 tokens/s measured against %3 predicted then.")
                      .arg(QLocale().toString(m_run.tokens), rate(m_run.secondsPerToken),
                           rate(m_run.predictedSecondsPerToken));
    else if (m_run.tokens > 0)
        caption = tr("The last reply ran with another placement: apply this one and chat to measure it.");
    else
        caption = tr("Measured figures appear here after a reply of 16 tokens or more with an applied plan.");
    html += QStringLiteral("<p style='%1'>%2</p>").arg(colorStyle(mutedColor(palette())), caption.toHtmlEscaped());
    m_lanes->setText(html);
    plain << caption;
    m_lanesPlain = plain.join('\n');
}

void TuningPanel::showNoPlan(const QString& message)
{
    m_prediction->setText(tr("No plan: %1").arg(message));
    m_shown = {};
    showLanes();
    m_speed->clear();
    for (QLabel* line : m_tierLines) line->clear();
    m_tierBar->set(0, 0, 0);
    m_apply->setEnabled(false);
}

QJsonObject TuningPanel::saveState() const
{
    return {{"backend", m_backend->currentData().toString()},
            {"vramMiB", m_vram->value()},
            {"ramMiB", m_ram->value()},
            {"context", m_ctx->value()},
            {"kvType", m_kvType->currentData().toString()},
            {"neuronCache", m_neuronCache->value()},
            {"neuronMode", m_neuronMode->currentData().toString()},
            {"coldNeurons", m_coldNeurons->currentData().toString()},
            {"prefetch", m_prefetch->value()},
            {"threads", m_threads->value()}};
}

void TuningPanel::restoreState(const QJsonObject& state)
{
    {
        const QSignalBlocker a(m_backend), b(m_vram), c(m_ram), d(m_ctx), e(m_kvType), f(m_neuronCache),
            g(m_neuronMode), h(m_coldNeurons), i(m_prefetch), j(m_threads);
        const auto choose = [&](QComboBox* box, const char* key) {
            const int at = box->findData(state.value(QLatin1String(key)).toString());
            if (at >= 0) box->setCurrentIndex(at);
        };
        const auto number = [&](auto* box, const char* key) {
            const QJsonValue v = state.value(QLatin1String(key));
            if (v.isDouble() && v.toDouble() >= box->minimum() && v.toDouble() <= box->maximum()) box->setValue(v.toDouble());
        };
        choose(m_backend, "backend");
        choose(m_kvType, "kvType");
        choose(m_neuronMode, "neuronMode");
        choose(m_coldNeurons, "coldNeurons");
        number(m_vram, "vramMiB");
        number(m_ram, "ramMiB");
        number(m_ctx, "context");
        number(m_neuronCache, "neuronCache");
        number(m_prefetch, "prefetch");
        number(m_threads, "threads");
    }
    emit changed();
}

void TuningPanel::setVariants(const QVector<ModelItem>& catalog, const QString& currentPath)
{
    // The family of the running model: its source (if it is a package) and every package of it.
    qint64 root = 0;
    for (const ModelItem& m : catalog)
        if (m.path == currentPath) root = m.parentId > 0 ? m.parentId : m.id;
    // The user's choice stays while the same model runs; another model answering (picked above
    // the chat) is what the view shows, so Apply never swaps the chat's model unasked.
    const bool sameModel = currentPath == m_variantsOf;
    m_variantsOf = currentPath;
    const QString chosen = sameModel && m_variant->currentIndex() >= 0 ? m_variant->currentData().toString() : currentPath;
    const QSignalBlocker quiet(m_variant);
    m_variant->clear();
    bool listed = false;
    for (const ModelItem& m : catalog) {
        if (!(m.id == root || (root > 0 && m.parentId == root) || m.path == currentPath)) continue;
        QString label = QFileInfo(m.path).fileName();
        label += m.format == QLatin1String("package") ? tr(" (%1)").arg(QLocale().formattedDataSize(m.sizeBytes))
                                                      : tr(" (original, %1)").arg(QLocale().formattedDataSize(m.sizeBytes));
        if (m.path == currentPath) label += tr(" · answers now");
        m_variant->addItem(label, m.path);
        listed |= m.path == currentPath;
    }
    if (!listed) m_variant->insertItem(0, QFileInfo(currentPath).fileName(), currentPath);
    const int keep = m_variant->findData(chosen);
    m_variant->setCurrentIndex(keep >= 0 ? keep : m_variant->findData(currentPath));
}

}  // namespace spillway::ui
