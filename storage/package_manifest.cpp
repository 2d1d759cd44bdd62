#include "storage/package_manifest.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace spillway::storage {

namespace {

using nlohmann::json;

constexpr const char* kFormatTag = "spillway-package";

std::string hex64(uint64_t v)
{
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

bool parseHex64(const std::string& s, uint64_t& out)
{
    if (s.size() != 16) return false;
    uint64_t v = 0;
    for (const char c : s) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return false;
        v = (v << 4) | static_cast<uint64_t>(d);
    }
    out = v;
    return true;
}

// An opaque JSON object text as a JSON value to embed (false: not a JSON object).
bool embedObject(const std::string& text, json& out)
{
    if (text.empty()) return true;
    json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!v.is_object()) return false;
    out = std::move(v);
    return true;
}

// Reads typed fields of one JSON object; the first problem becomes the error, naming the
// manifest file and the field's path ("tensors[3].offset").
class FieldReader {
public:
    FieldReader(const std::string& file, const json& obj, std::string where)
        : m_file(file), m_obj(obj), m_where(std::move(where)) {}

    Error bad(const std::string& key, const std::string& problem) const
    {
        std::string path = m_where;
        if (!key.empty()) path += (path.empty() ? "" : ".") + key;
        return makeError(ErrorCode::ModelFileInvalid,
                         m_file + ": " + (path.empty() ? "" : path + ": ") + problem);
    }

    // nullptr when absent (and not required).
    Result<const json*> field(const char* key, bool required) const
    {
        const auto it = m_obj.find(key);
        if (it == m_obj.end()) {
            if (required) return bad(key, "missing");
            return static_cast<const json*>(nullptr);
        }
        return &*it;
    }

    Result<uint64_t> unsignedField(const char* key) const
    {
        auto f = field(key, true);
        if (!f) return f.error();
        if (!(*f)->is_number_unsigned()) return bad(key, "expected a non-negative integer");
        return (*f)->get<uint64_t>();
    }

    Result<std::string> stringField(const char* key, bool required) const
    {
        auto f = field(key, required);
        if (!f) return f.error();
        if (!*f) return std::string();
        if (!(*f)->is_string()) return bad(key, "expected a string");
        return (*f)->get<std::string>();
    }

    // An embedded object, returned as text ("" when absent or null).
    Result<std::string> objectTextField(const char* key) const
    {
        auto f = field(key, false);
        if (!f) return f.error();
        if (!*f || (*f)->is_null()) return std::string();
        if (!(*f)->is_object()) return bad(key, "expected a JSON object");
        return (*f)->dump();
    }

private:
    const std::string& m_file;
    const json& m_obj;
    std::string m_where;
};

Result<PackageTensor> parseTensor(const json& j, const std::string& file, size_t index)
{
    const std::string where = "tensors[" + std::to_string(index) + "]";
    const FieldReader r(file, j, where);
    if (!j.is_object()) return r.bad("", "expected a JSON object");
    PackageTensor t;
    auto name = r.stringField("name", true);
    if (!name) return name.error();
    if (name->empty()) return r.bad("name", "empty");
    t.name = std::move(*name);

    auto shape = r.field("shape", true);
    if (!shape) return shape.error();
    if (!(*shape)->is_array()) return r.bad("shape", "expected an array of integers");
    for (const json& d : **shape) {
        const bool fits = d.is_number_unsigned() &&
                          d.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max());
        if (!fits) return r.bad("shape", "expected an array of non-negative integers");
        t.shape.push_back(d.get<int64_t>());
    }
    auto format = r.stringField("format", true);
    if (!format) return format.error();
    t.format = std::move(*format);
    auto tier = r.stringField("tierHint", false);
    if (!tier) return tier.error();
    t.tierHint = std::move(*tier);

    auto shard = r.unsignedField("shard");
    if (!shard) return shard.error();
    if (*shard > std::numeric_limits<uint32_t>::max()) return r.bad("shard", "out of range");
    t.shard = static_cast<uint32_t>(*shard);
    auto offset = r.unsignedField("offset");
    if (!offset) return offset.error();
    t.offset = *offset;
    auto bytes = r.unsignedField("bytes");
    if (!bytes) return bytes.error();
    t.bytes = *bytes;

    auto sum = r.stringField("xxh3", true);
    if (!sum) return sum.error();
    if (!parseHex64(*sum, t.xxh3)) return r.bad("xxh3", "expected 16 hex digits");
    auto extra = r.objectTextField("extra");
    if (!extra) return extra.error();
    t.extraJson = std::move(*extra);
    return t;
}

}  // namespace

Result<std::string> manifestToJson(const PackageManifest& m)
{
    json j = json::object();
    j["format"] = kFormatTag;
    j["version"] = m.version;
    j["architecture"] = m.architecture;
    const std::pair<const char*, const std::string*> objects[] = {
        {"hyperParameters", &m.hyperParametersJson},
        {"tokenizer", &m.tokenizerJson},
        {"quality", &m.qualityJson},
    };
    for (const auto& [key, text] : objects) {
        json v;
        if (!embedObject(*text, v))
            return makeError(ErrorCode::InvalidArgument,
                             std::string("package manifest: ") + key + " is not a JSON object");
        if (!text->empty()) j[key] = std::move(v);
    }
    if (!m.chatTemplate.empty()) j["chatTemplate"] = m.chatTemplate;

    json shards = json::array();
    for (size_t i = 0; i < m.shardSizes.size(); ++i)
        shards.push_back({{"file", packageShardFileName(static_cast<uint32_t>(i))},
                          {"bytes", m.shardSizes[i]}});
    j["shards"] = std::move(shards);

    json tensors = json::array();
    for (const PackageTensor& t : m.tensors) {
        json jt = {{"name", t.name},     {"shape", t.shape},   {"format", t.format},
                   {"shard", t.shard},   {"offset", t.offset}, {"bytes", t.bytes},
                   {"xxh3", hex64(t.xxh3)}};
        if (!t.tierHint.empty()) jt["tierHint"] = t.tierHint;
        json extra;
        if (!embedObject(t.extraJson, extra))
            return makeError(ErrorCode::InvalidArgument,
                             "package manifest: tensor '" + t.name +
                                 "': extra is not a JSON object");
        if (!t.extraJson.empty()) jt["extra"] = std::move(extra);
        tensors.push_back(std::move(jt));
    }
    j["tensors"] = std::move(tensors);
    return j.dump(1) + "\n";
}

Result<PackageManifest> parseManifest(const std::string& text, const std::string& file)
{
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::ModelFileInvalid, file + ": not valid JSON: " + e.what());
    }
    const FieldReader r(file, j, "");
    if (!j.is_object()) return r.bad("", "expected a JSON object");
    auto tag = r.stringField("format", true);
    if (!tag) return tag.error();
    if (*tag != kFormatTag) return r.bad("format", "not \"" + std::string(kFormatTag) + "\"");
    auto version = r.unsignedField("version");
    if (!version) return version.error();
    if (*version != uint64_t(kPackageVersion))
        return r.bad("version", "unsupported version " + std::to_string(*version) +
                                    " (this build reads " + std::to_string(kPackageVersion) + ")");
    PackageManifest m;
    m.version = kPackageVersion;
    auto arch = r.stringField("architecture", true);
    if (!arch) return arch.error();
    m.architecture = std::move(*arch);
    const std::pair<const char*, std::string*> objects[] = {
        {"hyperParameters", &m.hyperParametersJson},
        {"tokenizer", &m.tokenizerJson},
        {"quality", &m.qualityJson},
    };
    for (const auto& [key, out] : objects) {
        auto v = r.objectTextField(key);
        if (!v) return v.error();
        *out = std::move(*v);
    }
    auto chat = r.stringField("chatTemplate", false);
    if (!chat) return chat.error();
    m.chatTemplate = std::move(*chat);

    auto shards = r.field("shards", true);
    if (!shards) return shards.error();
    if (!(*shards)->is_array()) return r.bad("shards", "expected an array");
    for (size_t i = 0; i < (*shards)->size(); ++i) {
        const json& s = (**shards)[i];
        const FieldReader sr(file, s, "shards[" + std::to_string(i) + "]");
        if (!s.is_object()) return sr.bad("", "expected a JSON object");
        auto name = sr.stringField("file", true);
        if (!name) return name.error();
        // Shard names are fixed, so a manifest can never point outside its folder.
        if (*name != packageShardFileName(static_cast<uint32_t>(i)))
            return sr.bad("file", "expected \"" + packageShardFileName(uint32_t(i)) + "\"");
        auto bytes = sr.unsignedField("bytes");
        if (!bytes) return bytes.error();
        m.shardSizes.push_back(*bytes);
    }

    auto tensors = r.field("tensors", true);
    if (!tensors) return tensors.error();
    if (!(*tensors)->is_array()) return r.bad("tensors", "expected an array");
    m.tensors.reserve((*tensors)->size());
    for (size_t i = 0; i < (*tensors)->size(); ++i) {
        auto t = parseTensor((**tensors)[i], file, i);
        if (!t) return t.error();
        m.tensors.push_back(std::move(*t));
    }
    return m;
}

Status checkManifestLayout(const PackageManifest& m, const std::string& file)
{
    auto bad = [&](const PackageTensor& t, const std::string& problem) {
        return makeError(ErrorCode::ModelFileInvalid,
                         file + ": tensor '" + t.name + "': " + problem);
    };
    std::unordered_set<std::string> names;
    std::vector<std::vector<const PackageTensor*>> byShard(m.shardSizes.size());
    for (const PackageTensor& t : m.tensors) {
        if (!names.insert(t.name).second) return bad(t, "duplicate name");
        if (t.shard >= m.shardSizes.size())
            return bad(t, "shard " + std::to_string(t.shard) + " does not exist (" +
                              std::to_string(m.shardSizes.size()) + " shards)");
        if (t.offset % kPackageAlignment != 0)
            return bad(t, "offset " + std::to_string(t.offset) + " is not 4096-aligned");
        const uint64_t size = m.shardSizes[t.shard];
        if (t.offset > size || t.bytes > size - t.offset)
            return bad(t, "bytes [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                              ") pass the end of " + packageShardFileName(t.shard) + " (" +
                              std::to_string(size) + " bytes)");
        byShard[t.shard].push_back(&t);
    }
    for (auto& list : byShard) {
        std::sort(list.begin(), list.end(), [](const PackageTensor* a, const PackageTensor* b) {
            return a->offset < b->offset;
        });
        for (size_t i = 1; i < list.size(); ++i) {
            const PackageTensor& prev = *list[i - 1];
            if (prev.offset + prev.bytes > list[i]->offset)
                return bad(*list[i], "overlaps tensor '" + prev.name + "' in " +
                                         packageShardFileName(prev.shard));
        }
    }
    return {};
}

std::string packageShardFileName(uint32_t shard)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "shard-%05u.bin", shard);
    return buf;
}

}  // namespace spillway::storage
