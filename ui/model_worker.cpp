#include "model_worker.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <filesystem>

#include "core/calibrate/compress_model.h"
#include "core/formats/llama2c.h"
#include "core/model/llama_model.h"
#include "gpu/host.h"
#include "server/openai_client.h"

namespace spillway::ui {

namespace {

// Bytes on disk: a file, or every file of a folder.
qint64 sizeOnDisk(const std::filesystem::path& path)
{
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) return qint64(std::filesystem::file_size(path, ec));
    uint64_t bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
        if (e.is_regular_file(ec)) bytes += e.file_size(ec);
    return qint64(bytes);
}

ModelItem describe(const LlamaModel& m)
{
    ModelItem item;
    item.path = QString::fromStdString(m.path());
    // A llama2.c checkpoint reaches the library as its descriptor (LibraryController::addModel).
    item.format = m.isPackage()                     ? QStringLiteral("package")
                  : llama2c::isDescriptor(m.path()) ? QStringLiteral("llama2.c")
                                                    : QStringLiteral("gguf");
    item.architecture = QString::fromStdString(m.config().architecture);
    item.parameters = qint64(m.parameterCount());
    item.sizeBytes = sizeOnDisk(m.path());
    std::error_code ec;
    if (std::filesystem::is_regular_file(m.path(), ec) && m.dataFiles().size() > 1) {  // a split GGUF: every part
        item.sizeBytes = 0;
        for (const std::string& part : m.dataFiles()) item.sizeBytes += sizeOnDisk(part);
    }
    return item;
}

}  // namespace

ModelWorker::ModelWorker(QObject* parent) : QObject(parent) { qRegisterMetaType<ModelItem>(); }

void ModelWorker::inspect(const QString& path)
{
    auto model = LlamaModel::load(path.toStdString());
    if (!model) return emit rejected(path, QString::fromStdString(model.error().message));
    emit inspected(describe(**model));
}

void ModelWorker::inspectEndpoint(const QString& url, const QString& apiKey)
{
    server::EndpointOptions o;
    o.url = url.toStdString();
    o.apiKey = apiKey.toStdString();
    o.timeoutSeconds = 30;
    auto client = server::OpenAiClient::open(o);
    if (!client) return emit rejected(url, QString::fromStdString(client.error().message));
    auto ids = (*client)->models();
    if (!ids) return emit rejected(url, QString::fromStdString(ids.error().message));
    if (ids->empty()) return emit rejected(url, tr("%1 answers but lists no model").arg(url));
    QStringList models;
    for (const std::string& id : *ids) models << QString::fromStdString(id);
    emit endpointListed(url, models);
}

void ModelWorker::compress(qint64 sourceId, const QString& sourcePath, const QString& outDir, const QString& preset)
{
    const auto p = compress::presetFromName(preset.toStdString());
    if (!p) return emit compressFailed(tr("unknown preset '%1'").arg(preset), false);
    auto source = LlamaModel::load(sourcePath.toStdString());
    if (!source) return emit compressFailed(QString::fromStdString(source.error().message), false);
    compress::CompressOptions options = compress::presetOptions(*p);
    options.progress = [this](const compress::CompressProgress& pr) {
        emit compressProgress(pr.fraction, QString::fromStdString(pr.stage), qint64(pr.bytesDone),
                              qint64(pr.bytesTotal), pr.etaSeconds);
        return !m_cancel.load();
    };
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(outDir.toStdString()).parent_path(), ec);
    auto device = gpu::createCpuDevice(0);
    auto report = compress::compressModel(**source, outDir.toStdString(), options, *device);
    if (!report)
        return emit compressFailed(QString::fromStdString(report.error().message),
                                   report.error().code == ErrorCode::Cancelled);
    // The package has the source's architecture and shapes; compressModel already read it back.
    ModelItem item = describe(**source);
    item.path = outDir;
    item.format = QStringLiteral("package");
    item.sizeBytes = sizeOnDisk(outDir.toStdString());
    item.parentId = sourceId;
    if (report->quality) {
        // The quality report, with the preset that made it (the library recommends a preset by it).
        QJsonObject quality = QJsonDocument::fromJson(QByteArray::fromStdString(report->quality->toJson())).object();
        quality.insert(QStringLiteral("preset"), preset);
        item.qualityJson = QString::fromUtf8(QJsonDocument(quality).toJson(QJsonDocument::Compact));
    }
    QString summary = tr("weights %1 → %2 (%3%)")
                          .arg(QLocale().formattedDataSize(qint64(report->sourceBytes)),
                               QLocale().formattedDataSize(qint64(report->outputBytes)))
                          .arg(100.0 * double(report->outputBytes) / double(std::max<uint64_t>(1, report->sourceBytes)), 0,
                               'f', 1);
    if (report->quality)
        summary += tr("; mean KL %1, top-1 agreement %2%")
                       .arg(report->quality->meanKl, 0, 'g', 3)
                       .arg(100.0 * report->quality->top1Agreement, 0, 'f', 1);
    emit compressed(sourceId, item, summary);
}

}  // namespace spillway::ui
