#include "tuning_worker.h"

#include <QDir>
#include <QLocale>
#include <algorithm>
#include <cstdlib>

#include "core/hw/calibration.h"
#include "core/hw/probe.h"
#include "gpu/registry.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/planner.h"
#include "core/plan/session_memory.h"
#include "core/compress/ffn_predictor.h"
#include "core/engine/engine.h"
#include "core/runtime/llama_session.h"
#include "readable.h"

namespace spillway::ui {

namespace {

QString bytesText(double bytes) { return QLocale().formattedDataSize(qint64(bytes)); }

QString gbps(double bytesPerSecond) { return QString::number(bytesPerSecond / 1e9, 'f', 1) + " GB/s"; }

// The session's neuron-cache options for `settings` on `model`; off (capacity 0) with the reason
// in *note where the model cannot use them. Each layer's cold neurons go where the cost model
// says, from the measured speeds.
NeuronCacheOptions neuronCacheFor(const LlamaModel& model, const TuningSettings& settings,
                                  const hw::HardwareProfile& profile, QString* note)
{
    NeuronCacheOptions o;
    if (settings.neuronCache <= 0) return o;
    const LlamaConfig& c = model.config();
    if (!(c.ffnRelu || !c.ffnGated)) {
        if (note) *note = QObject::tr("The neuron cache is for ReLU models; this model's FFN is SwiGLU: off.");
        return o;
    }
    o.capacity = settings.neuronCache;
    o.source = model.ffnBundles().empty() ? BundleSource::Ram : BundleSource::Ssd;
    if (settings.neuronMode == QLatin1String("predicted")) {
        if (compress::hasFfnPredictors(model))
            o.mode = NeuronCacheMode::Predicted;
        else if (note)
            *note = QObject::tr("This model stores no activation predictors (compress it with the sparse preset): exact mode.");
    }
    const ColdNeurons asked = coldNeuronsOf(settings.coldNeurons.toStdString());
    if (asked == ColdNeurons::Auto) {
        engine::chooseColdNeurons(model, profile,
                                  settings.backend.isEmpty() ? std::string("cpu") : settings.backend.toStdString(), o);
    } else if (asked == ColdNeurons::Cpu && !compress::hasNeuronActivity(model)) {
        // Computing cold neurons on the CPU needs the activity frequencies the predictors recorded.
        if (note)
            *note = QObject::tr("This model records no activity frequencies (compress it with the sparse preset): cold "
                                "neurons are shipped.");
    } else {
        o.coldPerLayer.assign(size_t(c.nLayers), asked);
    }
    return o;
}

Result<plan::PlanResult> planFor(const LlamaModel& model, const hw::HardwareProfile& profile,
                                 const TuningSettings& settings, gpu::KvType kv, const NeuronCacheOptions& cache)
{
    engine::PlanSettings p;
    p.backend = settings.backend.isEmpty() ? std::string("cpu") : settings.backend.toStdString();
    p.vramBudget = uint64_t(std::max<qint64>(0, settings.vramBudget));
    p.ramBudget = uint64_t(std::max<qint64>(0, settings.ramBudget));
    p.contextLength = settings.contextLength;
    p.prefetch = settings.prefetchDepth;
    p.kvType = kv;
    return plan::planPlacement(engine::plannerInput(model, profile, p, cache));
}

double throughputOf(const std::vector<hw::FormatThroughput>& list, gpu::DType type)
{
    for (const auto& f : list)
        if (f.type == type) return f.bytesPerSecond;
    return 0;
}

// What this machine can run: for the shapes of well-known Llama-family models at 8 bits
// (Q8_0, 34 bytes per 32 weights), where the weights would live (RAM up to 80% of the free
// RAM, the rest on the SSD) and a rough decode speed from the measured figures: every weight
// read once per token, SSD reads overlapped with compute. The Tuning view plans a real model
// exactly; this is the first-launch orientation.
QString capabilitiesText(const hw::HardwareProfile& p)
{
    const double cpu = throughputOf(p.host.cpuMatvec, gpu::DType::Q8_0);
    const double ssdRate = p.storage.sequentialBytesPerSecond;
    const double ramRoom = 0.8 * double(p.host.ramAvailable);
    QStringList lines;
    lines << QObject::tr("What this machine can run (8-bit weights, rough estimates from the measured speeds):");
    for (const SyntheticPreset& m : syntheticPresets()) {
        if (m.architecture != "llama") continue;
        // A mixture of experts keeps all its experts (they decide what fits) and reads the chosen
        // ones for each token (they decide the speed).
        const double kvDim = double(m.dim) * m.nKvHeads / m.nHeads;
        const double attention = 2.0 * m.dim * m.dim + 2.0 * m.dim * kvDim;
        const double ffn = 3.0 * m.dim * m.ffnDim;
        const int experts = std::max(1, m.experts), chosen = m.experts > 0 ? m.expertsUsed : 1;
        const double router = m.experts > 0 ? double(m.dim) * m.experts : 0.0;
        const double embeddings = 2.0 * m.vocabSize * m.dim;
        const double params = embeddings + double(m.nLayers) * (attention + router + experts * ffn);
        const double active = embeddings + double(m.nLayers) * (attention + router + chosen * ffn);
        const double bytes = params * 34.0 / 32.0, readPerToken = active * 34.0 / 32.0;
        const double inRam = std::min(bytes, ramRoom), onSsd = bytes - inRam;
        // The share of each token's reads that the SSD serves is the share of the model left there.
        const double ssdRead = readPerToken * onSsd / bytes;
        const double compute = cpu > 0 ? readPerToken / cpu : 0;
        const double reads = ssdRead > 0 && ssdRate > 0 ? ssdRead / ssdRate : 0;
        const double seconds = std::max(compute, reads);
        QString where = onSsd <= 0 ? QObject::tr("fits in RAM")
                                   : QObject::tr("%1 streamed from the SSD each token").arg(bytesText(ssdRead));
        const QString size = m.experts > 0 ? QObject::tr("%1 B parameters, %2 B active per token")
                                                 .arg(params / 1e9, 0, 'f', 1)
                                                 .arg(active / 1e9, 0, 'f', 1)
                                           : QObject::tr("%1 B parameters").arg(params / 1e9, 0, 'f', 1);
        lines << QObject::tr("• %1 (%2, %3): %4, about %5 tokens/s")
                     .arg(QString::fromStdString(m.name), size, bytesText(bytes), where)
                     .arg(readable(seconds > 0 ? 1.0 / seconds : 0.0));
    }
    return lines.join('\n');
}

}  // namespace

TuningWorker::TuningWorker(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<TuningSettings>();
    qRegisterMetaType<TuningPrediction>();
    qRegisterMetaType<RunLanes>();
}

QString planKey(const plan::PlanResult& plan)
{
    return QStringLiteral("%1|%2|%3|%4|%5|%6|%7")
        .arg(QString::fromStdString(plan.deviceName))
        .arg(plan.deviceWeightBytes)
        .arg(plan.hostWeightBytes)
        .arg(plan.ssdBytes)
        .arg(plan.kvCacheBytes)
        .arg(plan.placement.prefetchDepth)
        .arg(plan.slotCount);
}

void TuningWorker::reloadProfile()
{
    if (!m_profile) return;
    auto cached = hw::readCachedProfile();
    if (!cached || cached->fingerprint != m_profile->fingerprint || cached->host.threads != m_profile->host.threads)
        return;
    *m_profile = std::move(*cached);
}

TuningWorker::~TuningWorker() = default;

const LlamaModel* TuningWorker::model(const QString& path, QString* error)
{
    auto it = m_models.find(path);
    if (it != m_models.end()) return it->second.get();
    auto loaded = LlamaModel::load(path.toStdString());
    if (!loaded) {
        *error = QString::fromStdString(loaded.error().message);
        return nullptr;
    }
    return m_models.emplace(path, std::move(*loaded)).first->second.get();
}

hw::ProbeOptions appProbeOptions(const QString& storageFolder)
{
    hw::ProbeOptions probe;
    probe.storagePath = storageFolder.toStdString();
    const char* quick = std::getenv("SPILLWAY_QUICK_PROBE");
    probe.quick = quick && *quick && *quick != '0';
    return probe;
}

void TuningWorker::prepare(const QString& modelPath, const QString& storageFolder)
{
    QString error;
    const LlamaModel* prepared = model(modelPath, &error);
    if (!prepared) return emit failed(error);
    m_modelPath = modelPath;
    QDir().mkpath(storageFolder);
    hw::ProbeOptions probe = appProbeOptions(storageFolder);
    probe.progress = [this](double fraction, const std::string& stage) {
        emit probeProgress(fraction, QString::fromStdString(stage));
    };
    probe.cancelled = [this] { return m_cancelled.load(); };
    auto profile = hw::probeHardware(probe);
    if (!profile) return emit failed(QString::fromStdString(profile.error().message));
    m_profile = std::make_unique<hw::HardwareProfile>(std::move(*profile));

    const hw::HardwareProfile& p = *m_profile;
    QString summary = tr("CPU: %1, %2 cores, RAM %3 (%4 free), read %5")
                          .arg(QString::fromStdString(p.host.cpuName))
                          .arg(p.host.cores)
                          .arg(bytesText(double(p.host.ramTotal)), bytesText(double(p.host.ramAvailable)),
                               gbps(p.host.memoryReadBytesPerSecond));
    summary += "\n" + tr("Disk: %1, %2 free, sequential direct reads %3 (%4)")
                          .arg(QString::fromStdString(p.storage.filesystem), bytesText(double(p.storage.freeBytes)),
                               gbps(p.storage.sequentialBytesPerSecond), QString::fromStdString(p.storage.ioEngine));
    for (const auto& d : p.devices)
        summary += "\n" + tr("Device %1: %2, %3 memory, host→device %4")
                              .arg(QString::fromStdString(d.backend), QString::fromStdString(d.name),
                                   bytesText(double(d.totalMemory)), gbps(d.hostToDevicePinned));
    for (const auto& b : gpu::backendStatus())  // why a backend is missing above
        if (!b.usable)
            summary += "\n" + tr("Backend %1 not usable: %2")
                                  .arg(QString::fromStdString(b.name), QString::fromStdString(b.reason));
    summary += "\n" + tr("Model: %1, %2 of weights").arg(QString::fromStdString(prepared->config().architecture),
                                                         bytesText(double(prepared->weightBytesPerToken())));
    emit ready(summary, capabilitiesText(p));
}

void TuningWorker::predict(const TuningSettings& settings)
{
    if (!m_profile) return emit failed(tr("the tuning panel is not ready yet"));
    QString error;
    const LlamaModel* planned = model(settings.modelPath.isEmpty() ? m_modelPath : settings.modelPath, &error);
    if (!planned) return emit failed(error);
    const auto kv = gpu::parseKvType(settings.kvType.toStdString());
    if (!kv) return emit failed(tr("unknown KV cache type '%1' (f32, f16 or q8)").arg(settings.kvType));
    if (!settings.backend.isEmpty() && settings.backend != QLatin1String("cpu")) {
        bool measured = false;
        for (const auto& d : m_profile->devices) measured |= QString::fromStdString(d.backend) == settings.backend;
        if (!measured) {
            QString why = tr("no %1 device was found on this machine").arg(settings.backend);
            for (const auto& b : gpu::backendStatus())
                if (QString::fromStdString(b.name) == settings.backend && !b.usable)
                    why = tr("%1 is not usable here: %2").arg(settings.backend, QString::fromStdString(b.reason));
            return emit failed(why);
        }
    }
    TuningPrediction out;
    const NeuronCacheOptions cache = neuronCacheFor(*planned, settings, *m_profile, &out.note);
    auto plan = planFor(*planned, *m_profile, settings, *kv, cache);
    if (!plan) return emit failed(QString::fromStdString(plan.error().message));
    out.settings = settings;
    out.settings.modelPath = QString::fromStdString(planned->path());
    for (ColdNeurons cold : cache.coldPerLayer) out.coldOnCpu.push_back(cold == ColdNeurons::Cpu);
    out.settings.neuronCache = cache.capacity;
    out.settings.neuronMode = cache.mode == NeuronCacheMode::Predicted ? QStringLiteral("predicted") : QStringLiteral("exact");
    out.tokensPerSecond = plan->tokensPerSecond();
    out.deviceBytes = qint64(plan->deviceWeightBytes);
    out.ramBytes = qint64(plan->hostWeightBytes);
    out.ssdBytesPerToken = qint64(plan->ssdBytes);
    out.modelBytes = qint64(planned->weightBytesPerToken());
    // What stays on the SSD: every weight the plan placed, less what the device and RAM hold.
    uint64_t placed = 0;
    for (const plan::TensorPlacement& t : plan->placement.tensors) placed += t.bytes;
    out.ssdBytes = qint64(placed > plan->deviceWeightBytes + plan->hostWeightBytes
                              ? placed - plan->deviceWeightBytes - plan->hostWeightBytes
                              : 0);
    out.trainedContext = planned->config().trainedContext;
    out.defaultContext = plan::resolveContext(planned->config(), 0);
    out.kvBytes = qint64(plan->kvCacheBytes);
    out.stateBytes = qint64(plan->recurrentStateBytes);
    if (!plan->expertLayers.empty()) {
        // A mixture of experts: where its experts are, and what the expert cache should hit.
        int cached = 0, resident = 0, inRam = 0, fewest = 0, most = 0;
        double hits = 0, fromRam = 0;
        for (const plan::ExpertLayerPlan& x : plan->expertLayers) {
            if (!x.cached) {
                resident += x.tier == plan::Tier::Device && !x.split;
                continue;
            }
            fewest = cached ? std::min(fewest, x.deviceSlots) : x.deviceSlots;
            most = std::max(most, x.deviceSlots);
            ++cached;
            inRam += x.hostExperts;
            hits += x.hitRate;
            fromRam += x.hostRate;
        }
        const QString experts =
            cached == 0
                ? tr("Experts: on the device in %1 of %2 layers, streamed whole in the others.")
                      .arg(resident)
                      .arg(plan->expertLayers.size())
                : tr("Experts: on the device in %1 of %2 layers, through the expert cache in %3 (%4 slots each on the "
                     "device, %5 experts in RAM in all): %6 % of the choices expected in slots, %7 % from RAM; "
                     "routing %8.")
                      .arg(resident)
                      .arg(plan->expertLayers.size())
                      .arg(cached)
                      .arg(fewest == most ? QString::number(most)
                                          : tr("%1 to %2 (by the routing)").arg(fewest).arg(most))
                      .arg(inRam)
                      .arg(100.0 * hits / cached, 0, 'f', 1)
                      .arg(100.0 * fromRam / cached, 0, 'f', 1)
                      .arg(QString::fromStdString(plan->routing));
        out.note = out.note.isEmpty() ? experts : out.note + QStringLiteral("\n") + experts;
    }
    // Earlier runs on this machine (core/hw/calibration.h), and a profile they found wrong.
    auto addNote = [&out](const QString& line) { out.note = out.note.isEmpty() ? line : out.note + QStringLiteral("\n") + line; };
    if (plan->calibrationRuns > 0 && plan->probeSecondsPerToken > 0)
        addNote((plan->calibrationRuns == 1
                     ? tr("Calibrated by one run of this kind on this machine; the probe's figures alone predict %1 tokens/s.")
                     : tr("Calibrated by %1 runs of this kind on this machine; the probe's figures alone predict %2 tokens/s.")
                           .arg(plan->calibrationRuns))
                    .arg(readable(1.0 / plan->probeSecondsPerToken)));
    if (!m_profile->busy.empty())
        addNote(tr("The machine was busy while it was measured (%1): it is measured again once it is quiet.")
                    .arg(QString::fromStdString(m_profile->busy)));
    if (!m_profile->suspect.empty())
        addNote(tr("The hardware profile looks wrong: %1").arg(QString::fromStdString(m_profile->suspect)));
    out.plan = std::make_shared<const plan::PlanResult>(std::move(*plan));
    emit predicted(out);
}

void TuningWorker::predictModels(const QStringList& paths, const QString& backend)
{
    if (!m_profile) return;
    for (const QString& path : paths) {
        QString error;
        const LlamaModel* m = model(path, &error);
        if (!m) {
            emit modelPredicted(path, 0, tr("Cannot plan: %1").arg(error));
            continue;
        }
        TuningSettings defaults;
        defaults.backend = backend;
        auto plan = planFor(*m, *m_profile, defaults, gpu::KvType::F32,
                            neuronCacheFor(*m, defaults, *m_profile, nullptr));
        if (!plan) {
            emit modelPredicted(path, 0, tr("Does not fit: %1").arg(QString::fromStdString(plan.error().message)));
            continue;
        }
        // Shares of the weights by tier (norms and the embedding included on the device).
        const double device = double(plan->deviceWeightBytes), ram = double(plan->hostWeightBytes);
        const double ssd = double(plan->ssdBytes);
        const double total = std::max(1.0, device + ram + ssd);
        QStringList tiers;
        if (device > 0) tiers << tr("device %1%").arg(int(100.0 * device / total + 0.5));
        if (ram > 0) tiers << tr("RAM %1%").arg(int(100.0 * ram / total + 0.5));
        if (ssd > 0) tiers << tr("SSD %1%").arg(int(100.0 * ssd / total + 0.5));
        emit modelPredicted(path, plan->tokensPerSecond(),
                            tr("Predicted here: %1 tokens/s (%2)")
                                .arg(readable(plan->tokensPerSecond()))
                                .arg(tiers.join(QStringLiteral(", "))));
    }
}

}  // namespace spillway::ui
