// Split GGUF reader: finds a model's parts by their names, opens each (gguf::File checks its
// header, tensor table and sizes), then checks that they are the parts of one model: the same
// split.count and split.tensors.count everywhere, each part where its name says, no tensor twice,
// every tensor somewhere. Each problem is one Error "<path>: <problem>".

#include "core/formats/gguf_split.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>

namespace spillway::gguf {

namespace {

Error invalid(const std::string& path, const std::string& problem)
{
    return makeError(ErrorCode::ModelFileInvalid, path + ": " + problem);
}

// The split keys of one part: absent (a model of one file), or all valid.
struct PartKeys {
    bool present = false;
    int no = 0;                  // 0-based
    int count = 1;
    std::optional<int64_t> tensors;  // split.tensors.count, where written
};

Result<PartKeys> readPartKeys(const File& f)
{
    PartKeys k;
    const Value* no = f.find(kSplitNo);
    const Value* count = f.find(kSplitCount);
    const Value* tensors = f.find(kSplitTensorsCount);
    if (!count) {
        if (no || tensors)
            return invalid(f.path(), "has split.no or split.tensors.count but no split.count (a damaged part of a "
                                     "split model)");
        return k;
    }
    const auto integer = [&](const Value* v, std::string_view key) -> Result<int64_t> {
        const auto i = v->asInt();
        if (!i || v->type == ValueType::Bool)
            return invalid(f.path(), std::string(key) + " has type " + valueTypeName(v->type) + ", expected an integer");
        return *i;
    };
    auto c = integer(count, kSplitCount);
    if (!c) return c.error();
    if (*c < 1 || *c > kMaxSplitParts)
        return invalid(f.path(), "split.count is " + std::to_string(*c) + " (must be 1 to " +
                                     std::to_string(kMaxSplitParts) + ")");
    k.present = true;
    k.count = int(*c);
    if (!no) return invalid(f.path(), "has split.count but no split.no (which part it is)");
    auto n = integer(no, kSplitNo);
    if (!n) return n.error();
    if (*n < 0 || *n >= *c)
        return invalid(f.path(), "part number out of range: split.no is " + std::to_string(*n) + " but split.count is " +
                                     std::to_string(*c) + " (split.no counts from 0)");
    k.no = int(*n);
    if (tensors) {
        auto t = integer(tensors, kSplitTensorsCount);
        if (!t) return t.error();
        if (*t < 0) return invalid(f.path(), "split.tensors.count is " + std::to_string(*t));
        k.tensors = *t;
    }
    return k;
}

// Keys a later part may hold beside the first's (llama-gguf-split writes the split keys alone
// there; our writer adds general.alignment): a key both hold with two values means two models.
Status checkSameModel(const File& first, const File& part)
{
    for (const KeyValue& kv : part.metadata()) {
        if (kv.key == kSplitNo || kv.key == "general.alignment") continue;
        const Value* mine = first.find(kv.key);
        if (mine && !(*mine == kv.value))
            return invalid(part.path(), "is a part of another model than " + first.path() + " (their " +
                                            detail::quoted(kv.key) + " differ)");
    }
    return {};
}

}  // namespace

bool isSplitKey(std::string_view key)
{
    return key == kSplitNo || key == kSplitCount || key == kSplitTensorsCount;
}

std::optional<SplitName> parseSplitName(std::string_view path)
{
    // NAME-NNNNN-of-MMMMM.gguf: 5 + 4 + 5 + 5 characters after NAME.
    constexpr std::string_view kTail = ".gguf";
    if (path.size() < 1 + 6 + 4 + 5 + kTail.size() || !path.ends_with(kTail)) return std::nullopt;
    const std::string_view mark = path.substr(path.size() - kTail.size() - 15, 15);  // -NNNNN-of-MMMMM
    if (mark[0] != '-' || mark.substr(6, 4) != "-of-") return std::nullopt;
    const auto digits = [](std::string_view s, int& out) {
        for (char ch : s)
            if (ch < '0' || ch > '9') return false;
        return std::from_chars(s.data(), s.data() + s.size(), out).ec == std::errc();
    };
    SplitName n;
    if (!digits(mark.substr(1, 5), n.number) || !digits(mark.substr(10, 5), n.count)) return std::nullopt;
    if (n.number < 1 || n.count < 1 || n.number > n.count) return std::nullopt;
    n.prefix = std::string(path.substr(0, path.size() - kTail.size() - 15));
    if (n.prefix.empty() || n.prefix.back() == '/') return std::nullopt;
    return n;
}

std::string splitPartPath(std::string_view prefix, int number, int count)
{
    char tail[32];
    std::snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", number, count);
    return std::string(prefix) + tail;
}

Result<std::unique_ptr<SplitFile>> SplitFile::open(const std::string& path)
{
    auto opened = File::open(path);
    if (!opened) return opened.error();
    auto keys = readPartKeys(**opened);
    if (!keys) return keys.error();
    auto split = std::unique_ptr<SplitFile>(new SplitFile());
    if (!keys->present || keys->count == 1) {
        split->m_parts.push_back(std::move(*opened));
    } else {
        const int count = keys->count;
        const std::string part = std::to_string(keys->no + 1) + " of " + std::to_string(count);
        const auto name = parseSplitName(path);
        if (!name)
            return invalid(path, "is part " + part + " of a split model, but its name does not end in " +
                                     splitPartPath("", keys->no + 1, count) +
                                     ", so its other parts cannot be found (llama-gguf-split names them NAME" +
                                     splitPartPath("", 1, count) + ", ...)");
        if (name->count != count || name->number != keys->no + 1)
            return invalid(path, "its name says part " + std::to_string(name->number) + " of " +
                                     std::to_string(name->count) + " but its header says part " + part +
                                     " (split.no, split.count): renamed, or a part of another model");
        split->m_parts.resize(size_t(count));
        for (int i = 0; i < count; ++i) {
            if (i == keys->no) {
                split->m_parts[size_t(i)] = std::move(*opened);
                continue;
            }
            const std::string p = splitPartPath(name->prefix, i + 1, count);
            std::error_code ec;
            if (!std::filesystem::exists(p, ec))
                return makeError(ErrorCode::Io, p + ": missing: part " + std::to_string(i + 1) + " of " +
                                                    std::to_string(count) + " of the split model " + path +
                                                    " (every part must be in the same folder)");
            auto f = File::open(p);
            if (!f) return f.error();
            split->m_parts[size_t(i)] = std::move(*f);
        }
        // Every part of the same model, each where its name says.
        const File& first = *split->m_parts.front();
        auto firstKeys = readPartKeys(first);
        if (!firstKeys) return firstKeys.error();
        for (int i = 0; i < count; ++i) {
            const File& f = *split->m_parts[size_t(i)];
            auto k = readPartKeys(f);
            if (!k) return k.error();
            if (!k->present)
                return invalid(f.path(), "has no split.count: not a part of the split model " + first.path());
            if (k->count != count)
                return invalid(f.path(), "says it is one of " + std::to_string(k->count) + " parts, but " + path +
                                             " says " + std::to_string(count) + ": parts of two different models");
            if (k->no != i)
                return invalid(f.path(), "says it is part " + std::to_string(k->no + 1) + " (split.no " +
                                             std::to_string(k->no) + "), but its name says part " + std::to_string(i + 1));
            if (k->tensors != firstKeys->tensors)
                return invalid(f.path(), "says the model has " + (k->tensors ? std::to_string(*k->tensors) : "?") +
                                             " tensors (split.tensors.count), but " + first.path() + " says " +
                                             (firstKeys->tensors ? std::to_string(*firstKeys->tensors) : "?") +
                                             ": parts of two different models");
            if (i > 0) SPILLWAY_TRY(checkSameModel(first, f));
        }
    }
    // Each tensor with its part: in one part only.
    std::map<std::string_view, uint32_t> partOf;
    for (uint32_t p = 0; p < split->m_parts.size(); ++p) {
        const File& f = *split->m_parts[p];
        for (const TensorInfo& t : f.tensors()) {
            const auto [it, inserted] = partOf.emplace(t.name, p);
            if (!inserted)
                return invalid(f.path(), "tensor " + detail::quoted(t.name) + " is also in " +
                                             split->m_parts[it->second]->path() + " (a tensor listed twice)");
            split->m_tensors.push_back(PartTensor{&t, p, f.dataOffset() + t.offset});
        }
    }
    if (split->isSplit()) {
        auto k = readPartKeys(*split->m_parts.front());
        if (k && k->tensors && uint64_t(*k->tensors) != split->m_tensors.size())
            return invalid(split->path(), "split.tensors.count says the model has " + std::to_string(*k->tensors) +
                                              " tensors, but its " + std::to_string(split->m_parts.size()) +
                                              " parts hold " + std::to_string(split->m_tensors.size()) +
                                              (uint64_t(*k->tensors) > split->m_tensors.size()
                                                   ? " (a tensor in no part, or a part of another model)"
                                                   : " (a part of another model)"));
    }
    return split;
}

std::vector<std::string> SplitFile::partPaths() const
{
    std::vector<std::string> out;
    for (const auto& p : m_parts) out.push_back(p->path());
    return out;
}

uint64_t SplitFile::totalBytes() const
{
    uint64_t bytes = 0;
    for (const auto& p : m_parts) bytes += p->fileSize();
    return bytes;
}

std::vector<int> assignParts(std::span<const uint64_t> tensorBytes, const SplitPlan& plan, uint64_t alignment)
{
    std::vector<int> part;
    part.reserve(tensorBytes.size());
    int current = 0, inCurrent = 0;
    uint64_t bytes = 0;
    for (uint64_t b : tensorBytes) {
        const uint64_t padded = (b + alignment - 1) / alignment * alignment;
        const bool full = inCurrent > 0 && ((plan.maxBytes > 0 && bytes + padded > plan.maxBytes) ||
                                            (plan.maxTensors > 0 && inCurrent >= plan.maxTensors));
        if (full) {
            ++current;
            inCurrent = 0;
            bytes = 0;
        }
        part.push_back(current);
        ++inCurrent;
        bytes += padded;
    }
    return part;
}

}  // namespace spillway::gguf
