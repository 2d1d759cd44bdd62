#include "core/formats/llama2c.h"

#include <array>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "storage/atomic_file.h"
#include "storage/mapped_file.h"

namespace spillway::llama2c {

namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr size_t kHeaderBytes = 256;
constexpr int kGroup = 64;  // the only v2 group size we compute on (DType::Q8_G64)

struct Params {
    int version = 0;
    int32_t dim = 0, hidden = 0, layers = 0, heads = 0, kvHeads = 0, vocab = 0, seqLen = 0;
    bool shared = true;
    int32_t group = 0;       // v2
    uint64_t dataStart = 0;  // first tensor byte
};

int32_t readI32(const uint8_t* p)
{
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The header's numbers, checked for sense (not yet against the file's size).
Result<Params> readParams(const std::string& path, const uint8_t* data, uint64_t size)
{
    auto bad = [&](const std::string& why) {
        return makeError(ErrorCode::ModelFileInvalid, path + ": " + why);
    };
    Params p;
    if (size < 28) return bad("too small for a llama2.c checkpoint (" + std::to_string(size) + " bytes)");
    uint32_t magic;
    std::memcpy(&magic, data, 4);
    const uint8_t* h = data;
    if (magic == kMagic) {
        if (size < kHeaderBytes) return bad("truncated llama2.c header");
        p.version = readI32(data + 4);
        if (p.version != 1 && p.version != 2)
            return makeError(ErrorCode::UnsupportedModel, path + ": llama2.c export version " + std::to_string(p.version) +
                                                              " is not supported (supported: 0, 1, 2)");
        h = data + 8;
        p.dataStart = kHeaderBytes;
    } else {
        p.version = 0;
        p.dataStart = 28;
    }
    p.dim = readI32(h);
    p.hidden = readI32(h + 4);
    p.layers = readI32(h + 8);
    p.heads = readI32(h + 12);
    p.kvHeads = readI32(h + 16);
    p.vocab = readI32(h + 20);
    p.seqLen = readI32(h + 24);
    if (p.version == 0) {
        p.shared = p.vocab > 0;
        if (p.vocab < 0) p.vocab = p.vocab == INT32_MIN ? 0 : -p.vocab;  // 0: refused below
    } else {
        p.shared = h[28] != 0;
        if (p.version == 2) p.group = readI32(h + 29);
    }
    auto inRange = [](int64_t v, int64_t hi) { return v >= 1 && v <= hi; };
    if (!inRange(p.dim, 1 << 16) || !inRange(p.hidden, 1 << 20) || !inRange(p.layers, 1024) ||
        !inRange(p.heads, 1024) || !inRange(p.kvHeads, 1024) || !inRange(p.vocab, 1 << 22) ||
        !inRange(p.seqLen, 1 << 24))
        return bad("header values out of range (dim " + std::to_string(p.dim) + ", hidden " + std::to_string(p.hidden) +
                   ", layers " + std::to_string(p.layers) + ", heads " + std::to_string(p.heads) + "/" +
                   std::to_string(p.kvHeads) + ", vocab " + std::to_string(p.vocab) + ", seq_len " +
                   std::to_string(p.seqLen) + ")");
    if (p.dim % p.heads != 0 || p.heads % p.kvHeads != 0 || (p.dim / p.heads) % 2 != 0)
        return bad("dim " + std::to_string(p.dim) + " does not split into " + std::to_string(p.heads) +
                   " heads of even size with " + std::to_string(p.kvHeads) + " KV heads");
    if (p.version == 2) {
        if (p.group != kGroup)
            return makeError(ErrorCode::UnsupportedModel,
                             path + ": llama2.c v2 group size " + std::to_string(p.group) + " is not supported (only 64)");
        if (p.dim % kGroup != 0 || p.hidden % kGroup != 0)
            return makeError(ErrorCode::UnsupportedModel, path + ": dim and hidden_dim must be multiples of 64 for v2");
    }
    return p;
}

// Lays the tensors of a checkpoint out, in file order; bytes are counted as stored.
struct Entry {
    std::string name;
    std::vector<int64_t> dims;  // GGUF order
    bool matrix = false;        // stored quantized in v2
    bool skip = false;          // RoPE tables of v0
};

uint64_t elementsOf(const Entry& e)
{
    uint64_t n = 1;
    for (int64_t d : e.dims) n *= uint64_t(d);
    return n;
}

std::vector<Entry> layout(const Params& p)
{
    const int64_t dim = p.dim, hidden = p.hidden, vocab = p.vocab;
    const int64_t kvDim = dim * p.kvHeads / p.heads, head = dim / p.heads;
    std::vector<Entry> out;
    auto perLayer = [&](const char* suffix, std::vector<int64_t> dims, bool matrix) {
        for (int l = 0; l < p.layers; ++l)
            out.push_back({"blk." + std::to_string(l) + "." + suffix, dims, matrix});
    };
    auto weights = [&]() {
        perLayer("attn_q.weight", {dim, dim}, true);
        perLayer("attn_k.weight", {dim, kvDim}, true);
        perLayer("attn_v.weight", {dim, kvDim}, true);
        perLayer("attn_output.weight", {dim, dim}, true);
        perLayer("ffn_gate.weight", {dim, hidden}, true);
        perLayer("ffn_down.weight", {hidden, dim}, true);
        perLayer("ffn_up.weight", {dim, hidden}, true);
    };
    if (p.version == 0) {
        out.push_back({"token_embd.weight", {dim, vocab}, true});
        perLayer("attn_norm.weight", {dim}, false);
        perLayer("attn_q.weight", {dim, dim}, true);
        perLayer("attn_k.weight", {dim, kvDim}, true);
        perLayer("attn_v.weight", {dim, kvDim}, true);
        perLayer("attn_output.weight", {dim, dim}, true);
        perLayer("ffn_norm.weight", {dim}, false);
        perLayer("ffn_gate.weight", {dim, hidden}, true);
        perLayer("ffn_down.weight", {hidden, dim}, true);
        perLayer("ffn_up.weight", {dim, hidden}, true);
        out.push_back({"output_norm.weight", {dim}, false});
        out.push_back({"rope.freq_real", {int64_t(p.seqLen) * head / 2}, false, true});
        out.push_back({"rope.freq_imag", {int64_t(p.seqLen) * head / 2}, false, true});
    } else {
        perLayer("attn_norm.weight", {dim}, false);
        perLayer("ffn_norm.weight", {dim}, false);
        out.push_back({"output_norm.weight", {dim}, false});
        out.push_back({"token_embd.weight", {dim, vocab}, true});
        weights();
    }
    if (!p.shared) out.push_back({"output.weight", {dim, vocab}, true});
    return out;
}

// Bytes an entry takes in the file.
uint64_t storedBytes(const Params& p, const Entry& e)
{
    const uint64_t n = elementsOf(e);
    if (p.version == 2 && e.matrix) return n + n / kGroup * sizeof(float);
    return n * sizeof(float);
}

uint64_t expectedSize(const Params& p)
{
    uint64_t total = p.dataStart;
    for (const Entry& e : layout(p)) total += storedBytes(p, e);
    return total;
}

struct AlignedFree {
    void operator()(void* p) const { std::free(p); }
};

std::string fileStem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

}  // namespace

const char* architectures() { return "llama, relu-llama"; }

namespace {

// A file's first bytes (a v1/v2 header whole, or a legacy one and more) and its size; none when
// it cannot be read or is shorter than any header.
struct Head {
    std::array<uint8_t, 256> bytes{};
    size_t got = 0;
    uint64_t size = 0;
};
std::optional<Head> readHead(const std::string& path)
{
    Head h;
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(h.bytes.data()), h.bytes.size());
    h.got = size_t(in.gcount());
    std::error_code ec;
    h.size = std::filesystem::file_size(path, ec);
    if (ec || h.got < 28) return std::nullopt;
    return h;
}

}  // namespace

std::string tokenizerBeside(const std::string& checkpoint, int vocabSize)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(checkpoint).parent_path();
    std::error_code ec;
    const std::string vocab = std::to_string(vocabSize);
    for (const std::string& name : {std::string("tokenizer.bin"), "tok" + vocab + ".bin", "decode" + vocab + ".tok"})
        if (fs::exists(dir / name, ec)) return (dir / name).string();
    return {};
}

std::string tokenizerBeside(const std::string& checkpoint)
{
    const auto h = readHead(checkpoint);
    if (!h) return {};
    auto p = readParams(checkpoint, h->bytes.data(), h->got);
    return p ? tokenizerBeside(checkpoint, p->vocab) : std::string();
}

bool isDescriptor(const std::string& path) { return path.ends_with(kDescriptorSuffix); }

Result<Descriptor> readDescriptor(const std::string& path)
{
    std::ifstream in(path);
    if (!in) return makeError(ErrorCode::Io, path + ": cannot be read");
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("checkpoint") || !j["checkpoint"].is_string())
        return makeError(ErrorCode::ModelFileInvalid, path + ": not a llama2.c checkpoint descriptor (no \"checkpoint\")");
    Descriptor d;
    d.checkpoint = j["checkpoint"].get<std::string>();
    d.architecture = j.value("architecture", std::string("llama"));
    d.tokenizer = j.value("tokenizer", std::string());
    if (!std::filesystem::exists(d.checkpoint))
        return makeError(ErrorCode::Io, path + ": its checkpoint " + d.checkpoint + " is gone");
    return d;
}

Status writeDescriptor(const std::string& path, const Descriptor& d)
{
    const nlohmann::json j = {{"checkpoint", d.checkpoint}, {"architecture", d.architecture}, {"tokenizer", d.tokenizer}};
    const std::string text = j.dump(2) + "\n";
    auto file = storage::AtomicFile::create(path);
    if (!file) return file.error();
    SPILLWAY_TRY(file->write(text.data(), text.size()));
    return file->commit();
}

bool looksLikeCheckpoint(const std::string& path)
{
    const auto h = readHead(path);
    if (!h) return false;
    uint32_t magic;
    std::memcpy(&magic, h->bytes.data(), 4);
    if (magic == kMagic) return true;
    auto p = readParams(path, h->bytes.data(), h->got);
    return p && expectedSize(*p) == h->size;
}

namespace {

// llama2.c's SentencePiece keys: <unk>, <s>, </s> are ids 0, 1, 2.
void addTokenizerKeys(gguf::Metadata& out, std::vector<gguf::Value> tokens, std::vector<gguf::Value> scores,
                      std::vector<gguf::Value> types)
{
    out.add({"tokenizer.ggml.model", gguf::Value::ofString("llama")});
    out.add({"tokenizer.ggml.tokens", gguf::Value::ofArray(gguf::ValueType::String, std::move(tokens))});
    out.add({"tokenizer.ggml.scores", gguf::Value::ofArray(gguf::ValueType::Float32, std::move(scores))});
    out.add({"tokenizer.ggml.token_type", gguf::Value::ofArray(gguf::ValueType::Int32, std::move(types))});
    out.add({"tokenizer.ggml.unknown_token_id", gguf::Value::ofUInt(gguf::ValueType::UInt32, 0)});
    out.add({"tokenizer.ggml.bos_token_id", gguf::Value::ofUInt(gguf::ValueType::UInt32, 1)});
    out.add({"tokenizer.ggml.eos_token_id", gguf::Value::ofUInt(gguf::ValueType::UInt32, 2)});
}

}  // namespace

Status tokenizerMetadata(const std::string& path, int vocabSize, gguf::Metadata& out)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    const uint8_t* p = (*mapping)->data();
    const uint64_t size = (*mapping)->size();
    auto bad = [&](const std::string& why) {
        return makeError(ErrorCode::ModelFileInvalid, path + ": " + why);
    };
    if (size < 4) return bad("too small for a llama2.c tokenizer");
    const int32_t maxLength = readI32(p);
    if (maxLength < 1 || maxLength > (1 << 16)) return bad("max token length " + std::to_string(maxLength) + " out of range");
    uint64_t at = 4;
    std::vector<gguf::Value> tokens, scores, types;
    tokens.reserve(size_t(vocabSize));
    static const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
    for (int i = 0; i < vocabSize; ++i) {
        if (size - at < 8) return bad("truncated at token " + std::to_string(i) + " of " + std::to_string(vocabSize));
        float score;
        std::memcpy(&score, p + at, 4);
        const int32_t len = readI32(p + at + 4);
        at += 8;
        if (len < 0 || len > maxLength || uint64_t(len) > size - at)
            return bad("token " + std::to_string(i) + " has length " + std::to_string(len));
        std::string piece(reinterpret_cast<const char*>(p + at), size_t(len));
        at += uint64_t(len);
        int32_t type = 1;  // normal
        if (i == 0) {
            type = 2;  // <unk>
        } else if (i == 1 || i == 2) {
            type = 3;  // <s>, </s>
        } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
            type = 6;  // byte
        }
        if (type == 1) {
            std::string spm;
            for (char c : piece) spm += c == ' ' ? kSpace : std::string(1, c);
            piece = std::move(spm);
        }
        tokens.push_back(gguf::Value::ofString(std::move(piece)));
        scores.push_back(gguf::Value::ofFloat(gguf::ValueType::Float32, score == score ? score : 0.0f));
        types.push_back(gguf::Value::ofInt(gguf::ValueType::Int32, type));
    }
    addTokenizerKeys(out, std::move(tokens), std::move(scores), std::move(types));
    return {};
}

Status decodeTableMetadata(const std::string& path, int vocabSize, gguf::Metadata& out)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    const uint8_t* p = (*mapping)->data();
    const uint64_t size = (*mapping)->size();
    auto bad = [&](const std::string& why) {
        return makeError(ErrorCode::ModelFileInvalid, path + ": " + why);
    };
    if (size < 4) return bad("too small for a llama2.c decode table");
    const uint32_t entry = uint32_t(p[0]) | uint32_t(p[1]) << 8;
    const uint32_t count = uint32_t(p[2]) | uint32_t(p[3]) << 8;
    if (entry < 2 || entry > 1024) return bad("entry size " + std::to_string(entry) + " out of range");
    if (int64_t(count) != vocabSize)
        return bad("holds " + std::to_string(count) + " tokens but the checkpoint's vocabulary has " +
                   std::to_string(vocabSize));
    if (size != 4 + uint64_t(count) * entry)
        return bad("size " + std::to_string(size) + " is not 4 + " + std::to_string(count) + " x " +
                   std::to_string(entry) + " bytes");
    static const std::string kSpace = "\xE2\x96\x81";  // U+2581
    std::vector<gguf::Value> tokens, scores, types;
    for (uint32_t i = 0; i < count; ++i) {
        const char* e = reinterpret_cast<const char*>(p + 4 + uint64_t(i) * entry);
        const std::string text(e, strnlen(e, entry));
        std::string piece = text;
        int32_t type = 1;
        float score = 0.0f;
        if (i == 0) {
            type = 2;
        } else if (i <= 2) {
            type = 3;
        } else if (i < 259 && (text.empty() || (text.size() == 1 && uint8_t(text[0]) == i - 3))) {
            // A byte piece: the table holds the byte where it prints (and whitespace), else "".
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", unsigned(i - 3) & 0xFFu);  // tokenizer.bin's byte pieces
            piece = name;
            type = 6;
        } else {
            piece.clear();
            for (char c : text) piece += c == ' ' ? kSpace : std::string(1, c);
            if (i >= 259) score = -float(i - 259);  // BPE merge order (see the header)
        }
        tokens.push_back(gguf::Value::ofString(std::move(piece)));
        scores.push_back(gguf::Value::ofFloat(gguf::ValueType::Float32, score));
        types.push_back(gguf::Value::ofInt(gguf::ValueType::Int32, type));
    }
    addTokenizerKeys(out, std::move(tokens), std::move(scores), std::move(types));
    return {};
}

Result<std::unique_ptr<ImportedModel>> importCheckpoint(const std::string& path, const ImportOptions& options)
{
    namespace fs = std::filesystem;
    if (options.architecture != "llama" && options.architecture != "relu-llama")
        return makeError(ErrorCode::UnsupportedModel, path + ": architecture '" + options.architecture +
                                                          "' is not one a llama2.c checkpoint can hold (supported: " +
                                                          architectures() + ")");
    auto mapped = storage::MappedFile::open(path);
    if (!mapped) return mapped.error();
    std::shared_ptr<storage::MappedFile> mapping = std::move(mapped.value());
    const uint8_t* data = mapping->data();
    const uint64_t size = mapping->size();
    auto params = readParams(path, data, size);
    if (!params) return params.error();
    const Params& p = *params;
    const uint64_t expected = expectedSize(p);
    if (expected != size)
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": llama2.c v" + std::to_string(p.version) + " checkpoint should be " +
                             std::to_string(expected) + " bytes for its header (dim " + std::to_string(p.dim) +
                             ", " + std::to_string(p.layers) + " layers, vocab " + std::to_string(p.vocab) +
                             ") but is " + std::to_string(size) + (expected > size ? " (truncated?)" : ""));

    auto model = std::make_unique<ImportedModel>();
    model->path = path;
    model->metadata = gguf::Metadata(path);
    model->dataFiles.push_back(path);
    model->keepAlive.push_back(mapping);
    gguf::Metadata& m = model->metadata;
    const std::string& arch = options.architecture;
    const std::string a = arch + ".";
    auto u32 = [](int64_t v) { return gguf::Value::ofUInt(gguf::ValueType::UInt32, uint64_t(v)); };
    auto f32 = [](double v) { return gguf::Value::ofFloat(gguf::ValueType::Float32, v); };
    m.add({"general.architecture", gguf::Value::ofString(arch)});
    m.add({"general.name", gguf::Value::ofString(fileStem(path))});
    m.add({"spillway.source_format", gguf::Value::ofString("llama2.c v" + std::to_string(p.version))});
    m.add({a + "context_length", u32(p.seqLen)});
    m.add({a + "embedding_length", u32(p.dim)});
    m.add({a + "block_count", u32(p.layers)});
    m.add({a + "feed_forward_length", u32(p.hidden)});
    m.add({a + "attention.head_count", u32(p.heads)});
    m.add({a + "attention.head_count_kv", u32(p.kvHeads)});
    m.add({a + "attention.layer_norm_rms_epsilon", f32(1e-5)});
    m.add({a + "rope.freq_base", f32(10000.0)});

    std::string tokenizer = options.tokenizerPath;
    if (tokenizer.empty()) {
        tokenizer = tokenizerBeside(path, p.vocab);
        if (tokenizer.empty()) {
            const fs::path dir = fs::path(path).parent_path();
            const std::string vocab = std::to_string(p.vocab);
            return makeError(ErrorCode::ModelFileInvalid,
                             path + ": no tokenizer beside the checkpoint (looked for tokenizer.bin, tok" + vocab +
                                 ".bin and decode" + vocab + ".tok in " +
                                 (dir.empty() ? std::string(".") : dir.string()) + ")");
        }
    }
    if (fs::path(tokenizer).extension() == ".tok")
        SPILLWAY_TRY(decodeTableMetadata(tokenizer, p.vocab, m));
    else
        SPILLWAY_TRY(tokenizerMetadata(tokenizer, p.vocab, m));

    const bool thesisInt4 = arch == "relu-llama" && p.version == 2;
    std::vector<Entry> entries = layout(p);
    // A shared classifier goes through the 4-bit rounding, the embedding rows do not: two tensors.
    const bool splitHead = thesisInt4 && p.shared;
    uint64_t headOffset = 0;
    uint64_t at = p.dataStart;
    for (const Entry& e : entries) {
        if (e.name == "token_embd.weight") headOffset = at;
        at += storedBytes(p, e);
    }
    if (splitHead) entries.push_back({"output.weight", {p.dim, p.vocab}, true});
    at = p.dataStart;
    for (const Entry& e : entries) {
        if (splitHead && e.name == "output.weight") at = headOffset;
        const uint64_t bytes = storedBytes(p, e);
        const uint64_t offset = at;
        at += bytes;
        if (e.skip) continue;
        ModelTensor t;
        t.name = e.name;
        t.dims = e.dims;
        if (p.version == 2 && e.matrix) {
            // All values, then all scales: regroup into blocks of (fp32 scale, 64 x int8).
            const uint64_t n = elementsOf(e), groups = n / kGroup;
            const uint64_t outBytes = groups * (sizeof(float) + kGroup);
            void* raw = std::aligned_alloc(64, (outBytes + 63) / 64 * 64);
            if (!raw) return makeError(ErrorCode::OutOfMemory, path + ": no memory to regroup '" + e.name + "'");
            std::shared_ptr<uint8_t> buffer(static_cast<uint8_t*>(raw), AlignedFree{});
            const uint8_t* values = data + offset;
            const uint8_t* scales = values + n;
            // The thesis' runtime (runq.c of github.com/hongyihuang/llama2.c, which made the
            // reference text) multiplies with the int8 weights rounded to 4 bits,
            // (q >> 4) + ((q >> 3) & 1), times 16: the same values kept as int8 with the 16 in
            // the scale (exact: a power of two). The embedding rows it reads at full int8.
            const bool round4 = thesisInt4 && e.name != "token_embd.weight";
            for (uint64_t g = 0; g < groups; ++g) {
                uint8_t* block = buffer.get() + g * (sizeof(float) + kGroup);
                float scale;
                std::memcpy(&scale, scales + g * sizeof(float), sizeof(float));
                if (round4) scale *= 16.0f;
                std::memcpy(block, &scale, sizeof(float));
                std::memcpy(block + sizeof(float), values + g * kGroup, kGroup);
                if (round4)
                    for (int i = 0; i < kGroup; ++i) {
                        const int8_t q = static_cast<int8_t>(block[sizeof(float) + i]);
                        block[sizeof(float) + i] = static_cast<uint8_t>(int8_t((q >> 4) + ((q >> 3) & 1)));
                    }
            }
            t.type = gpu::DType::Q8_G64;
            t.data = buffer.get();
            t.bytes = outBytes;
            t.file = kInMemoryTensor;
            model->keepAlive.push_back(std::shared_ptr<const void>(buffer, buffer.get()));
        } else {
            t.type = gpu::DType::F32;
            t.data = data + offset;
            t.bytes = bytes;
            t.file = 0;
            t.fileOffset = offset;
        }
        model->tensors.push_back(std::move(t));
    }
    if (arch == "relu-llama") {
        // The thesis' shifted-ReLU model (tests/data/README.md): ReLU(x - 1) after each
        // in-layer RMSNorm, ReLU(gate - 0.25) in the FFN, an int8 KV cache with step 8/127.
        m.add({a + "norm_relu_shift", f32(1.0)});
        m.add({a + "ffn_relu_shift", f32(0.25)});
        m.add({a + "kv_cache_step", f32(8.0 / 127.0)});
        if (thesisInt4) m.add({"spillway.weights_rounded_to_bits", u32(4)});
    }
    return model;
}

}  // namespace spillway::llama2c
