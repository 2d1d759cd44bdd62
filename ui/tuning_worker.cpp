#include "tuning_worker.h"

#include <QDir>
#include <QLocale>
#include <cstdlib>

#include "core/hw/probe.h"
#include "core/model/llama_model.h"
#include "core/plan/planner.h"

namespace spillway::ui {

namespace {

QString bytesText(double bytes) { return QLocale().formattedDataSize(qint64(bytes)); }

QString gbps(double bytesPerSecond) { return QString::number(bytesPerSecond / 1e9, 'f', 1) + " GB/s"; }

}  // namespace

TuningWorker::TuningWorker(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<TuningSettings>();
    qRegisterMetaType<TuningPrediction>();
}

TuningWorker::~TuningWorker() = default;

void TuningWorker::prepare(const QString& modelPath, const QString& storageFolder)
{
    auto model = LlamaModel::load(modelPath.toStdString());
    if (!model) return emit failed(QString::fromStdString(model.error().message));
    QDir().mkpath(storageFolder);
    hw::ProbeOptions probe;
    probe.storagePath = storageFolder.toStdString();
    const char* quick = std::getenv("SPILLWAY_QUICK_PROBE");
    probe.quick = quick && *quick && *quick != '0';
    auto profile = hw::probeHardware(probe);
    if (!profile) return emit failed(QString::fromStdString(profile.error().message));
    m_model = std::move(*model);
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
    qint64 deviceMemory = 0;
    for (const auto& d : p.devices) {
        summary += "\n" + tr("Device %1: %2, %3 memory, host→device %4")
                              .arg(QString::fromStdString(d.backend), QString::fromStdString(d.name),
                                   bytesText(double(d.totalMemory)), gbps(d.hostToDevicePinned));
        if (d.backend == "cpu") deviceMemory = qint64(d.freeMemory);
    }
    summary += "\n" + tr("Model: %1, %2 of weights").arg(QString::fromStdString(m_model->config().architecture),
                                                         bytesText(double(m_model->weightBytesPerToken())));
    emit ready(summary, deviceMemory, qint64(p.host.ramAvailable), m_model->config().trainedContext);
}

void TuningWorker::predict(const TuningSettings& settings)
{
    if (!m_model || !m_profile) return emit failed(tr("the tuning panel is not ready yet"));
    plan::PlannerInput in;
    in.model = m_model.get();
    in.profile = *m_profile;
    in.backend = "cpu";
    in.vramBudget = uint64_t(std::max<qint64>(0, settings.vramBudget));
    in.ramBudget = uint64_t(std::max<qint64>(0, settings.ramBudget));
    in.contextLength = settings.contextLength;
    in.prefetchDepth = settings.prefetchDepth;
    auto planned = plan::planPlacement(in);
    if (!planned) return emit failed(QString::fromStdString(planned.error().message));
    auto plan = std::make_shared<const plan::PlanResult>(std::move(*planned));
    TuningPrediction out;
    out.settings = settings;
    out.tokensPerSecond = plan->tokensPerSecond();
    out.deviceBytes = qint64(plan->deviceWeightBytes);
    out.ramBytes = qint64(plan->hostWeightBytes);
    out.ssdBytesPerToken = qint64(plan->ssdBytes);
    out.modelBytes = qint64(m_model->weightBytesPerToken());
    const plan::LaneTimes& l = plan->lanes;
    out.lanes = tr("per token: SSD %1 ms · host→device %2 ms · compute %3 ms · CPU %4 ms")
                    .arg(l.ssdRead * 1e3, 0, 'f', 2)
                    .arg(l.hostToDevice * 1e3, 0, 'f', 2)
                    .arg(l.deviceCompute * 1e3, 0, 'f', 2)
                    .arg(l.cpuCompute * 1e3, 0, 'f', 2);
    out.plan = std::move(plan);
    emit predicted(out);
}

}  // namespace spillway::ui
