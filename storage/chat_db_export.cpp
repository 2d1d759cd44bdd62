// ChatDatabase: full-text search, and a conversation to Markdown / JSON and back from JSON.
//
// The JSON layout (version 1):
//   {
//     "format": "spillway-conversation", "version": 1,
//     "title": "...", "created": <ms>, "updated": <ms>, "model": "<catalog path>" | null,
//     "messages": [
//       {"role": "user", "created": <ms>, "current": <index into versions>,
//        "versions": [{"kind": "original", "content": "...", "created": <ms>,
//                      "model": "<name>", "modelPath": "<catalog path>" | null,
//                      "tokensPerSecond": 12.5 | null, "firstTokenMs": 340 | null,
//                      "placement": {...} | null,
//                      "reasoning": "..." (absent when none), "reasoningMs": 1200 | null}, ...]}, ...]
//   }
// Model ids are local to one database, so models travel as catalog paths and are looked up
// again on import (left empty when this catalog lacks them).

#include <algorithm>
#include <set>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "storage/chat_db.h"
#include "storage/chat_db_internal.h"

namespace spillway::storage {

using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kExportFormat = "spillway-conversation";
constexpr int kExportVersion = 1;

// Every whitespace-separated word becomes a quoted FTS5 prefix term ("word"*), so quotes,
// AND/OR/NOT, parentheses and column filters in the user's text are searched for literally.
// Words with no letter or digit are dropped (the tokenizer would drop them too).
std::string ftsQuery(const std::string& text)
{
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        size_t j = i;
        while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        const std::string word = text.substr(i, j - i);
        i = j;
        bool searchable = false;
        for (unsigned char c : word) searchable |= std::isalnum(c) || c >= 0x80;
        if (!searchable) continue;
        if (!out.empty()) out += ' ';
        out += '"';
        for (char c : word) {
            if (c == '"') out += '"';
            out += c;
        }
        out += "\"*";
    }
    return out;
}

std::string formatTime(int64_t ms)
{
    const std::time_t t = std::time_t(ms / 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
    return buf;
}

const char* roleHeading(Role role)
{
    switch (role) {
    case Role::System: return "System";
    case Role::User: return "User";
    case Role::Assistant: return "Assistant";
    }
    return "User";
}

// ---- reading the JSON (untrusted) ---------------------------------------------------------------

Error badJson(const std::string& where, const std::string& what)
{
    return makeError(ErrorCode::InvalidArgument, "conversation JSON: " + where + ": " + what);
}

Result<std::string> getString(const Json& obj, const char* key, const std::string& where,
                              bool optional = false)
{
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
        if (optional) return std::string();
        return badJson(where + "." + key, "missing");
    }
    if (!it->is_string()) return badJson(where + "." + key, "not a string");
    return it->get<std::string>();
}

Result<int64_t> getInt(const Json& obj, const char* key, const std::string& where)
{
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer()) {
        return badJson(where + "." + key, "not an integer");
    }
    return it->get<int64_t>();
}

Result<std::optional<double>> getOptNumber(const Json& obj, const char* key,
                                           const std::string& where)
{
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::optional<double>();
    if (!it->is_number()) return badJson(where + "." + key, "not a number");
    return std::optional<double>(it->get<double>());
}

}  // namespace

// ---- search -------------------------------------------------------------------------------------

namespace {

// A hit from a row of (conversation id, message id, title, role, snippet, created ms).
SearchHit hitOf(sql::Statement& row)
{
    SearchHit hit;
    hit.conversationId = row.int64(0);
    hit.messageId = row.int64(1);
    hit.conversationTitle = row.text(2);
    hit.role = parseRole(row.text(3)).value_or(Role::User);
    hit.snippet = row.text(4);
    hit.createdMs = row.int64(5);
    return hit;
}

}  // namespace

Result<std::vector<SearchHit>> ChatDatabase::search(const std::string& query,
                                                    const SearchOptions& options)
{
    const std::string match = ftsQuery(query);
    std::vector<SearchHit> out;
    if (match.empty() || options.limit <= 0) return out;
    auto s =
        db().prepare("SELECT m.conversation_id, m.id, c.title, m.role, "
                     "snippet(messages_fts, 0, ?2, ?3, '…', ?4), m.created_ms "
                     "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
                     "JOIN conversations c ON c.id = m.conversation_id "
                     "WHERE messages_fts MATCH ?1 ORDER BY messages_fts.rank, m.id DESC LIMIT ?5");
    if (!s) return s.error();
    s->bind(1, match).bind(2, options.highlightOpen).bind(3, options.highlightClose);
    s->bind(4, std::clamp(options.snippetTokens, 1, 64)).bind(5, options.limit);
    for (;;) {
        auto row = s->step();
        if (!row) return row.error();
        if (!*row) break;
        out.push_back(hitOf(*s));
    }
    if (int(out.size()) >= options.limit) return out;
    // Earlier versions (not the current one) of messages whose current text did not match (all
    // of those are in `out`: it is under the limit), the best-ranked version of each.
    auto v = db().prepare(
        "SELECT m.conversation_id, m.id, c.title, m.role, "
        "snippet(message_versions_fts, 0, ?2, ?3, '…', ?4), v.created_ms, v.number "
        "FROM message_versions_fts JOIN message_versions v ON v.id = message_versions_fts.rowid "
        "JOIN messages m ON m.id = v.message_id JOIN conversations c ON c.id = m.conversation_id "
        "WHERE message_versions_fts MATCH ?1 AND v.id IS NOT m.current_version_id "
        "ORDER BY message_versions_fts.rank, v.id DESC");  // read until the limit is reached
    if (!v) return v.error();
    v->bind(1, match).bind(2, options.highlightOpen).bind(3, options.highlightClose);
    v->bind(4, std::clamp(options.snippetTokens, 1, 64));
    std::set<int64_t> seen;
    for (const SearchHit& hit : out) seen.insert(hit.messageId);
    while (int(out.size()) < options.limit) {
        auto row = v->step();
        if (!row) return row.error();
        if (!*row) break;
        if (!seen.insert(v->int64(1)).second) continue;  // matched as it reads now, or by a better version
        SearchHit hit = hitOf(*v);
        hit.version = int(v->int64(6));
        out.push_back(std::move(hit));
    }
    return out;
}

// ---- export -------------------------------------------------------------------------------------

Result<std::string> ChatDatabase::exportMarkdown(int64_t conversationId, const std::string& systemPrompt)
{
    auto c = conversation(conversationId);
    if (!c) return c.error();
    auto list = messages(conversationId);
    if (!list) return list.error();

    std::string md =
        "# " + (c->title.empty() ? std::string("Untitled conversation") : c->title) + "\n\n";
    md += "*Exported from Spillway. Started " + formatTime(c->createdMs) + ", " +
          std::to_string(list->size()) + " messages.*\n";
    if (!systemPrompt.empty()) md += "\n## System prompt\n\n" + systemPrompt + "\n";
    for (const Message& m : *list) {
        md += "\n## " + std::string(roleHeading(m.role));
        const Generation& g = m.generation;
        std::string details;
        if (!g.modelName.empty()) details += g.modelName;
        if (g.tokensPerSecond) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%s%.1f tokens/s", details.empty() ? "" : ", ",
                          *g.tokensPerSecond);
            details += buf;
        }
        if (!details.empty()) md += " (" + details + ")";
        md += " · " + formatTime(m.createdMs) + "\n\n";
        // The reasoning as a quote above the answer, with how long it took.
        if (!g.reasoning.empty()) {
            char took[64] = "";
            if (g.reasoningMs) std::snprintf(took, sizeof took, " for %.0f s", *g.reasoningMs / 1000.0);
            md += std::string("> **Thought") + took + "**\n>\n";
            size_t at = 0;
            while (at <= g.reasoning.size()) {
                const size_t end = std::min(g.reasoning.find('\n', at), g.reasoning.size());
                md += "> " + g.reasoning.substr(at, end - at) + "\n";
                at = end + 1;
            }
            md += "\n";
        }
        md += m.content + "\n";
    }
    return md;
}

Result<std::string> ChatDatabase::exportJson(int64_t conversationId, const std::string& systemPrompt)
{
    auto c = conversation(conversationId);
    if (!c) return c.error();
    auto list = messages(conversationId);
    if (!list) return list.error();

    std::map<int64_t, std::string> modelPaths;  // catalog id -> path
    auto pathOf = [&](const std::optional<int64_t>& id) -> Result<Json> {
        if (!id) return Json(nullptr);
        auto it = modelPaths.find(*id);
        if (it == modelPaths.end()) {
            auto m = model(*id);
            if (!m) return m.error();
            it = modelPaths.emplace(*id, m->path).first;
        }
        return Json(it->second);
    };

    Json out;
    out["format"] = kExportFormat;
    out["version"] = kExportVersion;
    out["title"] = c->title;
    out["created"] = c->createdMs;
    out["updated"] = c->updatedMs;
    auto conversationModel = pathOf(c->modelId);
    if (!conversationModel) return conversationModel.error();
    out["model"] = *conversationModel;
    if (!systemPrompt.empty()) out["systemPrompt"] = systemPrompt;
    Json jm = Json::array();
    for (const Message& m : *list) {
        auto vs = versions(m.id);
        if (!vs) return vs.error();
        Json jv = Json::array();
        size_t current = 0;
        for (size_t i = 0; i < vs->size(); ++i) {
            const MessageVersion& v = (*vs)[i];
            if (v.current) current = i;
            Json e;
            e["kind"] = versionKindName(v.kind);
            e["content"] = v.content;
            e["created"] = v.createdMs;
            e["model"] = v.generation.modelName;
            auto path = pathOf(v.generation.modelId);
            if (!path) return path.error();
            e["modelPath"] = *path;
            e["tokensPerSecond"] =
                v.generation.tokensPerSecond ? Json(*v.generation.tokensPerSecond) : Json(nullptr);
            e["firstTokenMs"] =
                v.generation.firstTokenMs ? Json(*v.generation.firstTokenMs) : Json(nullptr);
            // Stored placements are JSON texts; embed them as values (as text if not JSON).
            Json placement = nullptr;
            if (!v.generation.placementJson.empty()) {
                placement = Json::parse(v.generation.placementJson, nullptr, false);
                if (placement.is_discarded()) placement = v.generation.placementJson;
            }
            e["placement"] = std::move(placement);
            if (!v.generation.reasoning.empty()) e["reasoning"] = v.generation.reasoning;
            e["reasoningMs"] = v.generation.reasoningMs ? Json(*v.generation.reasoningMs) : Json(nullptr);
            jv.push_back(std::move(e));
        }
        Json entry;
        entry["role"] = roleName(m.role);
        entry["created"] = m.createdMs;
        entry["current"] = current;
        entry["versions"] = std::move(jv);
        jm.push_back(std::move(entry));
    }
    out["messages"] = std::move(jm);
    return out.dump(2);
}

// ---- import -------------------------------------------------------------------------------------

namespace {

// A chat as a plain list of messages (OpenAI's shape: {"messages": [{"role", "content"}]}, as
// `spillway-cli chat`'s /save writes it) in the export's layout: one original version each, the
// title its first prompt, the times now; a leading system message becomes "systemPrompt".
Result<Json> fromMessageList(const Json& doc)
{
    const Json& list = doc["messages"];
    const int64_t now = int64_t(std::time(nullptr)) * 1000;
    Json out;
    out["format"] = kExportFormat;
    out["version"] = kExportVersion;
    out["created"] = now;
    out["updated"] = now;
    out["model"] = nullptr;
    Json messages = Json::array();
    std::string title;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        const Json& m = list[i];
        if (!m.is_object()) return badJson(where, "not an object");
        auto role = getString(m, "role", where);
        if (!role) return role.error();
        const auto content = m.find("content");
        if (content == m.end() || !content->is_string()) return badJson(where + ".content", "not a string");
        if (*role == "system" && messages.empty() && !out.contains("systemPrompt")) {
            out["systemPrompt"] = *content;
            continue;
        }
        if (*role != "user" && *role != "assistant")
            return badJson(where + ".role", "\"" + *role + "\" is not user or assistant (a system message leads)");
        if (title.empty() && *role == "user") {
            title = content->get<std::string>();
            if (title.size() > 60) {  // at most 60 bytes, cut where a character begins (UTF-8)
                size_t cut = 60;
                while (cut > 0 && (static_cast<unsigned char>(title[cut]) & 0xC0) == 0x80) --cut;
                title.resize(cut);
            }
        }
        messages.push_back({{"role", *role},
                            {"created", now},
                            {"current", 0},
                            {"versions", Json::array({{{"kind", "original"}, {"content", *content}, {"created", now}}})}});
    }
    std::string clean;
    for (char c : title) clean += c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
    out["title"] = clean.empty() ? std::string("Imported chat") : clean;
    out["messages"] = std::move(messages);
    return out;
}

}  // namespace

Result<int64_t> ChatDatabase::importJson(const std::string& text, std::string* systemPrompt)
{
    Json doc = Json::parse(text, nullptr, false);
    if (doc.is_discarded()) return badJson("(document)", "not valid JSON");
    if (!doc.is_object()) return badJson("(document)", "not a JSON object");
    if (!doc.contains("format") && doc.contains("messages") && doc["messages"].is_array()) {
        auto converted = fromMessageList(doc);
        if (!converted) return converted.error();
        doc = std::move(*converted);
    }
    if (systemPrompt) {
        const auto sp = doc.find("systemPrompt");
        *systemPrompt = sp != doc.end() && sp->is_string() ? sp->get<std::string>() : std::string();
    }
    auto format = getString(doc, "format", "(document)");
    if (!format) return format.error();
    if (*format != kExportFormat) {
        return badJson("format", "\"" + *format + "\" is not " + kExportFormat);
    }
    auto version = getInt(doc, "version", "(document)");
    if (!version) return version.error();
    if (*version != kExportVersion) {
        return badJson("version", std::to_string(*version) +
                                      " is not a version this Spillway reads (" +
                                      std::to_string(kExportVersion) + ")");
    }
    auto title = getString(doc, "title", "(document)");
    if (!title) return title.error();
    auto created = getInt(doc, "created", "(document)");
    if (!created) return created.error();
    auto updated = getInt(doc, "updated", "(document)");
    if (!updated) return updated.error();
    auto messagesIt = doc.find("messages");
    if (messagesIt == doc.end() || !messagesIt->is_array()) {
        return badJson("messages", "not an array");
    }

    auto resolve = [&](const Json& obj, const char* key,
                       const std::string& where) -> Result<std::optional<int64_t>> {
        auto path = getString(obj, key, where, true);
        if (!path) return path.error();
        if (path->empty()) return std::optional<int64_t>();
        auto m = modelByPath(*path);
        if (!m) return m.error();
        return *m ? std::optional<int64_t>((*m)->id) : std::nullopt;
    };

    auto tx = sql::Transaction::begin(db());
    if (!tx) return tx.error();
    auto conversationModel = resolve(doc, "model", "(document)");
    if (!conversationModel) return conversationModel.error();
    auto s = db().prepare("INSERT INTO conversations (title, created_ms, updated_ms, model_id) "
                          "VALUES (?1, ?2, ?3, ?4)");
    if (!s) return s.error();
    s->bind(1, *title).bind(2, *created).bind(3, *updated).bind(4, *conversationModel);
    SPILLWAY_TRY(s->run());
    const int64_t conversationId = db().lastInsertRowid();

    for (size_t i = 0; i < messagesIt->size(); ++i) {
        const Json& jm = (*messagesIt)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!jm.is_object()) return badJson(where, "not an object");
        auto roleText = getString(jm, "role", where);
        if (!roleText) return roleText.error();
        const auto role = parseRole(*roleText);
        if (!role) {
            return badJson(where + ".role",
                           "\"" + *roleText + "\" is not system, user or assistant");
        }
        auto messageCreated = getInt(jm, "created", where);
        if (!messageCreated) return messageCreated.error();
        auto current = getInt(jm, "current", where);
        if (!current) return current.error();
        auto vIt = jm.find("versions");
        if (vIt == jm.end() || !vIt->is_array() || vIt->empty()) {
            return badJson(where + ".versions", "not a non-empty array");
        }
        if (*current < 0 || *current >= int64_t(vIt->size())) {
            return badJson(where + ".current", "not an index into versions");
        }
        std::vector<MessageVersion> versionList;
        for (size_t k = 0; k < vIt->size(); ++k) {
            const Json& jv = (*vIt)[k];
            const std::string vw = where + ".versions[" + std::to_string(k) + "]";
            if (!jv.is_object()) return badJson(vw, "not an object");
            MessageVersion v;
            auto kindText = getString(jv, "kind", vw);
            if (!kindText) return kindText.error();
            const auto kind = parseVersionKind(*kindText);
            if (!kind) {
                return badJson(vw + ".kind",
                               "\"" + *kindText + "\" is not original, edit or regeneration");
            }
            v.kind = *kind;
            auto content = getString(jv, "content", vw);
            if (!content) return content.error();
            v.content = std::move(*content);
            auto vCreated = getInt(jv, "created", vw);
            if (!vCreated) return vCreated.error();
            v.createdMs = *vCreated;
            auto name = getString(jv, "model", vw, true);
            if (!name) return name.error();
            v.generation.modelName = *name;
            auto modelId = resolve(jv, "modelPath", vw);
            if (!modelId) return modelId.error();
            v.generation.modelId = *modelId;
            auto tps = getOptNumber(jv, "tokensPerSecond", vw);
            if (!tps) return tps.error();
            v.generation.tokensPerSecond = *tps;
            auto ttft = getOptNumber(jv, "firstTokenMs", vw);
            if (!ttft) return ttft.error();
            v.generation.firstTokenMs = *ttft;
            auto placement = jv.find("placement");
            if (placement != jv.end() && !placement->is_null()) {
                v.generation.placementJson =
                    placement->is_string() ? placement->get<std::string>() : placement->dump();
            }
            auto reasoning = getString(jv, "reasoning", vw, true);
            if (!reasoning) return reasoning.error();
            v.generation.reasoning = *reasoning;
            auto took = getOptNumber(jv, "reasoningMs", vw);
            if (!took) return took.error();
            v.generation.reasoningMs = *took;
            versionList.push_back(std::move(v));
        }
        auto id = insertMessage(db(), conversationId, *role, *messageCreated, versionList,
                                size_t(*current));
        if (!id) return id.error();
    }
    // insertMessage moved updated_ms forward to the newest message; keep the exported value.
    auto keep = db().prepare("UPDATE conversations SET updated_ms = ?2 WHERE id = ?1");
    if (!keep) return keep.error();
    keep->bind(1, conversationId).bind(2, *updated);
    SPILLWAY_TRY(keep->run());
    SPILLWAY_TRY(tx->commit());
    return conversationId;
}

}  // namespace spillway::storage
