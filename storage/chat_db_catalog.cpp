// ChatDatabase: the model catalog (with compressed packages linked to their source model) and
// benchmark runs.

#include "storage/chat_db.h"
#include "storage/chat_db_internal.h"

namespace spillway::storage {

namespace {

#define SPILLWAY_MODEL_COLUMNS                                                                     \
    "id, path, format, architecture, parameter_count, size_bytes, checksum, quality_json, "        \
    "placement_json, parent_id, added_ms"

ModelRecord readModel(const sql::Statement& row)
{
    ModelRecord m;
    m.id = row.int64(0);
    m.path = row.text(1);
    m.format = parseModelFormat(row.text(2)).value_or(ModelFormat::Gguf);  // CHECKed on disk
    m.architecture = row.text(3);
    m.parameterCount = row.int64(4);
    m.sizeBytes = row.int64(5);
    m.checksum = row.text(6);
    m.qualityJson = row.text(7);
    m.placementJson = row.text(8);
    m.parentId = row.optInt64(9);
    m.addedMs = row.int64(10);
    return m;
}

// Binds ?2..?11 (every field but id and addedMs).
void bindModel(sql::Statement& s, const ModelRecord& m)
{
    s.bind(2, m.path).bind(3, modelFormatName(m.format)).bind(4, m.architecture);
    s.bind(5, m.parameterCount).bind(6, m.sizeBytes).bind(7, m.checksum);
    s.bindTextOrNull(8, m.qualityJson).bindTextOrNull(9, m.placementJson).bind(10, m.parentId);
}

Result<std::vector<ModelRecord>> readModels(sql::Statement& s)
{
    std::vector<ModelRecord> out;
    for (;;) {
        auto row = s.step();
        if (!row) return row.error();
        if (!*row) return out;
        out.push_back(readModel(s));
    }
}

Status requireChange(sql::Connection& db, const char* what, int64_t id)
{
    if (db.changes() == 0) return notFound(what, id);
    return {};
}

}  // namespace

Result<int64_t> ChatDatabase::addModel(const ModelRecord& model)
{
    auto existing = modelByPath(model.path);
    if (!existing) return existing.error();
    if (*existing) {
        return makeError(ErrorCode::InvalidArgument, model.path +
                                                         ": already in the model catalog (id " +
                                                         std::to_string((*existing)->id) + ")");
    }
    auto s =
        db().prepare("INSERT INTO models (path, format, architecture, parameter_count, "
                     "size_bytes, checksum, quality_json, placement_json, parent_id, added_ms) "
                     "VALUES (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    if (!s) return s.error();
    bindModel(*s, model);
    s->bind(11, model.addedMs ? model.addedMs : nowMs());
    SPILLWAY_TRY(s->run());
    return db().lastInsertRowid();
}

Status ChatDatabase::updateModel(const ModelRecord& model)
{
    if (model.parentId && *model.parentId == model.id) {
        return makeError(ErrorCode::InvalidArgument,
                         "model " + std::to_string(model.id) + " cannot be its own parent");
    }
    auto s =
        db().prepare("UPDATE models SET path = ?2, format = ?3, architecture = ?4, "
                     "parameter_count = ?5, size_bytes = ?6, checksum = ?7, quality_json = ?8, "
                     "placement_json = ?9, parent_id = ?10 WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, model.id);
    bindModel(*s, model);
    SPILLWAY_TRY(s->run());
    return requireChange(db(), "model", model.id);
}

Result<ModelRecord> ChatDatabase::model(int64_t id)
{
    auto s = db().prepare("SELECT " SPILLWAY_MODEL_COLUMNS " FROM models WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return notFound("model", id);
    return readModel(*s);
}

Result<std::optional<ModelRecord>> ChatDatabase::modelByPath(const std::string& path)
{
    auto s = db().prepare("SELECT " SPILLWAY_MODEL_COLUMNS " FROM models WHERE path = ?1");
    if (!s) return s.error();
    s->bind(1, path);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return std::optional<ModelRecord>();
    return std::optional<ModelRecord>(readModel(*s));
}

Result<std::vector<ModelRecord>> ChatDatabase::models()
{
    auto s = db().prepare("SELECT " SPILLWAY_MODEL_COLUMNS " FROM models ORDER BY id");
    if (!s) return s.error();
    return readModels(*s);
}

Result<std::vector<ModelRecord>> ChatDatabase::packagesOf(int64_t parentId)
{
    auto s = db().prepare("SELECT " SPILLWAY_MODEL_COLUMNS
                          " FROM models WHERE parent_id = ?1 ORDER BY id");
    if (!s) return s.error();
    s->bind(1, parentId);
    return readModels(*s);
}

Status ChatDatabase::setModelPlacement(int64_t id, const std::string& placementJson)
{
    auto s = db().prepare("UPDATE models SET placement_json = ?2 WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id).bindTextOrNull(2, placementJson);
    SPILLWAY_TRY(s->run());
    return requireChange(db(), "model", id);
}

Status ChatDatabase::removeModel(int64_t id)
{
    // ON DELETE SET NULL clears the parent of its packages and the model of conversations,
    // messages, versions and benchmark runs (messages keep the model's name).
    auto s = db().prepare("DELETE FROM models WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    SPILLWAY_TRY(s->run());
    return requireChange(db(), "model", id);
}

// ---- benchmark runs -----------------------------------------------------------------------------

Result<int64_t> ChatDatabase::addBenchmarkRun(const BenchmarkRun& run)
{
    auto s =
        db().prepare("INSERT INTO benchmark_runs (model_id, created_ms, summary_json, trace_path) "
                     "VALUES (?1, ?2, ?3, ?4)");
    if (!s) return s.error();
    s->bind(1, run.modelId).bind(2, run.createdMs ? run.createdMs : nowMs());
    s->bind(3, run.summaryJson.empty() ? std::string("{}") : run.summaryJson);
    s->bindTextOrNull(4, run.tracePath);
    SPILLWAY_TRY(s->run());
    return db().lastInsertRowid();
}

Result<std::vector<BenchmarkRun>> ChatDatabase::benchmarkRuns(std::optional<int64_t> modelId)
{
    auto s = db().prepare("SELECT id, model_id, created_ms, summary_json, trace_path "
                          "FROM benchmark_runs WHERE ?1 IS NULL OR model_id = ?1 "
                          "ORDER BY created_ms DESC, id DESC");
    if (!s) return s.error();
    s->bind(1, modelId);
    std::vector<BenchmarkRun> out;
    for (;;) {
        auto row = s->step();
        if (!row) return row.error();
        if (!*row) return out;
        out.push_back(
            BenchmarkRun{s->int64(0), s->optInt64(1), s->int64(2), s->text(3), s->text(4)});
    }
}

Status ChatDatabase::deleteBenchmarkRun(int64_t id)
{
    auto s = db().prepare("DELETE FROM benchmark_runs WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    SPILLWAY_TRY(s->run());
    return requireChange(db(), "benchmark run", id);
}

}  // namespace spillway::storage
