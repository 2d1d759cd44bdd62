// tokenizer.model -> GGUF tokenizer metadata through libsentencepiece. The processor gives the
// pieces, scores and special ids; the piece types, the model type and add_dummy_prefix are
// read from the same serialized ModelProto with a small protobuf wire-format reader, since
// Debian's libsentencepiece-dev ships no generated sentencepiece_model.pb.h (and the
// processor's API has no IsUserDefined).

#include "core/tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <optional>
#include <string_view>
#include <vector>

#include "core/formats/gguf.h"
#include "storage/mapped_file.h"

namespace spillway {

namespace {

constexpr uint64_t kMaxModelBytes = 1ull << 30;

// sentencepiece_model.proto, the fields we read.
namespace proto {
constexpr uint32_t kModelPieces = 1;          // repeated SentencePiece
constexpr uint32_t kModelTrainerSpec = 2;     // TrainerSpec
constexpr uint32_t kModelNormalizerSpec = 3;  // NormalizerSpec
constexpr uint32_t kPieceType = 3;            // SentencePiece.type (enum, default NORMAL = 1)
constexpr uint32_t kTrainerModelType = 3;     // TrainerSpec.model_type (default UNIGRAM = 1)
constexpr uint32_t kNormalizerAddDummyPrefix = 3;  // NormalizerSpec.add_dummy_prefix (true)
constexpr uint64_t kModelTypeUnigram = 1, kModelTypeBpe = 2;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
}  // namespace proto

// Protocol buffers wire format over a byte range; every read is bounds-checked.
class WireReader {
public:
    explicit WireReader(std::string_view bytes)
        : m_pos(reinterpret_cast<const uint8_t*>(bytes.data())), m_end(m_pos + bytes.size()) {}

    bool atEnd() const { return m_pos == m_end; }

    bool varint(uint64_t& value)
    {
        value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_pos == m_end) return false;
            const uint8_t byte = *m_pos++;
            value |= uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return true;
        }
        return false;
    }

    // The next field's number and wire type.
    bool tag(uint32_t& field, uint32_t& wireType)
    {
        uint64_t key = 0;
        if (!varint(key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return false;
        field = uint32_t(key >> 3);
        wireType = uint32_t(key & 7);
        return true;
    }

    bool lengthDelimited(std::string_view& bytes)
    {
        uint64_t length = 0;
        if (!varint(length) || length > uint64_t(m_end - m_pos)) return false;
        bytes = std::string_view(reinterpret_cast<const char*>(m_pos), size_t(length));
        m_pos += length;
        return true;
    }

    bool skip(uint32_t wireType)
    {
        uint64_t ignored = 0;
        std::string_view bytes;
        switch (wireType) {
        case proto::kVarint: return varint(ignored);
        case proto::kLengthDelimited: return lengthDelimited(bytes);
        case proto::kFixed64: return advance(8);
        case proto::kFixed32: return advance(4);
        default: return false;  // groups (3, 4) are not used by this proto
        }
    }

private:
    bool advance(size_t n)
    {
        if (size_t(m_end - m_pos) < n) return false;
        m_pos += n;
        return true;
    }
    const uint8_t* m_pos;
    const uint8_t* m_end;
};

// The value of varint field `field` in a message (the last one, as protobuf merges), or
// `fallback` when absent; nullopt when the message is malformed.
std::optional<uint64_t> varintField(std::string_view message, uint32_t field, uint64_t fallback)
{
    WireReader reader(message);
    uint64_t value = fallback;
    while (!reader.atEnd()) {
        uint32_t number = 0, wireType = 0;
        if (!reader.tag(number, wireType)) return std::nullopt;
        if (number == field && wireType == proto::kVarint) {
            if (!reader.varint(value)) return std::nullopt;
        } else if (!reader.skip(wireType)) {
            return std::nullopt;
        }
    }
    return value;
}

struct ModelInfo {
    std::vector<int32_t> types;  // per piece
    uint64_t modelType = proto::kModelTypeUnigram;
    bool addDummyPrefix = true;
};

std::optional<ModelInfo> readModelInfo(std::string_view model)
{
    ModelInfo info;
    WireReader reader(model);
    while (!reader.atEnd()) {
        uint32_t field = 0, wireType = 0;
        if (!reader.tag(field, wireType)) return std::nullopt;
        if (wireType != proto::kLengthDelimited ||
            (field != proto::kModelPieces && field != proto::kModelTrainerSpec &&
             field != proto::kModelNormalizerSpec)) {
            if (!reader.skip(wireType)) return std::nullopt;
            continue;
        }
        std::string_view message;
        if (!reader.lengthDelimited(message)) return std::nullopt;
        std::optional<uint64_t> value;
        switch (field) {
        case proto::kModelPieces:
            value = varintField(message, proto::kPieceType, 1);
            if (!value) return std::nullopt;
            info.types.push_back(int32_t(std::min<uint64_t>(*value, INT32_MAX)));
            break;
        case proto::kModelTrainerSpec:
            value = varintField(message, proto::kTrainerModelType, info.modelType);
            if (!value) return std::nullopt;
            info.modelType = *value;
            break;
        case proto::kModelNormalizerSpec:
            value = varintField(message, proto::kNormalizerAddDummyPrefix, info.addDummyPrefix);
            if (!value) return std::nullopt;
            info.addDummyPrefix = *value != 0;
            break;
        }
    }
    return info;
}

Status fromModel(const std::string& path, const std::string& bytes, gguf::Metadata& out)
{
    const auto invalid = [&](const std::string& problem) {
        return makeError(ErrorCode::ModelFileInvalid, path + ": " + problem);
    };
    sentencepiece::SentencePieceProcessor processor;
    const auto loaded = processor.LoadFromSerializedProto(bytes);
    if (!loaded.ok())
        return invalid(std::string("not a SentencePiece model: ") + loaded.ToString());
    const std::optional<ModelInfo> info = readModelInfo(bytes);
    if (!info) return invalid("malformed SentencePiece model protobuf");
    if (info->modelType != proto::kModelTypeBpe) {
        const char* name = info->modelType == proto::kModelTypeUnigram ? "Unigram"
                           : info->modelType == 3                     ? "word"
                           : info->modelType == 4                     ? "char"
                                                                      : "unknown";
        return makeError(ErrorCode::UnsupportedModel,
                         path + ": SentencePiece " + name +
                             " models are not supported (Spillway runs BPE models)");
    }
    const int n = processor.GetPieceSize();
    if (n <= 0 || size_t(n) != info->types.size())
        return invalid("the model lists " + std::to_string(info->types.size()) +
                       " pieces but SentencePiece loaded " + std::to_string(n));

    using gguf::Value;
    using gguf::ValueType;
    std::vector<Value> tokens, scores, types;
    tokens.reserve(size_t(n));
    scores.reserve(size_t(n));
    types.reserve(size_t(n));
    for (int id = 0; id < n; ++id) {
        const int32_t type = info->types[size_t(id)];
        if (type < 1 || type > 6)
            return invalid("piece " + std::to_string(id) + " has type " + std::to_string(type));
        tokens.push_back(Value::ofString(processor.IdToPiece(id)));
        scores.push_back(Value::ofFloat(ValueType::Float32, processor.GetScore(id)));
        types.push_back(Value::ofInt(ValueType::Int32, type));
    }
    const auto tokenId = [&](int id) {
        return Value::ofUInt(ValueType::UInt32, id >= 0 && id < n ? uint64_t(id) : UINT32_MAX);
    };
    std::vector<gguf::KeyValue> kvs;
    kvs.push_back({"tokenizer.ggml.model", Value::ofString("llama")});
    kvs.push_back({"tokenizer.ggml.tokens", Value::ofArray(ValueType::String, std::move(tokens))});
    kvs.push_back({"tokenizer.ggml.scores", Value::ofArray(ValueType::Float32, std::move(scores))});
    kvs.push_back(
        {"tokenizer.ggml.token_type", Value::ofArray(ValueType::Int32, std::move(types))});
    kvs.push_back({"tokenizer.ggml.bos_token_id", tokenId(processor.bos_id())});
    kvs.push_back({"tokenizer.ggml.eos_token_id", tokenId(processor.eos_id())});
    kvs.push_back({"tokenizer.ggml.unknown_token_id", tokenId(processor.unk_id())});
    kvs.push_back({"tokenizer.ggml.padding_token_id", tokenId(processor.pad_id())});
    kvs.push_back({"tokenizer.ggml.add_bos_token", Value::ofBool(true)});
    kvs.push_back({"tokenizer.ggml.add_eos_token", Value::ofBool(false)});
    kvs.push_back({"tokenizer.ggml.add_space_prefix", Value::ofBool(info->addDummyPrefix)});
    for (const gguf::KeyValue& kv : kvs)
        if (out.indexOf(kv.key) != SIZE_MAX)
            return makeError(ErrorCode::InvalidArgument,
                             path + ": the metadata holds " + kv.key + " already");
    for (gguf::KeyValue& kv : kvs) out.add(std::move(kv));
    return {};
}

}  // namespace

Status tokenizerMetadataFromSentencePiece(const std::string& tokenizerModelPath,
                                          gguf::Metadata& out)
{
    auto mapping = storage::MappedFile::open(tokenizerModelPath);
    if (!mapping) return mapping.error();
    const uint64_t size = mapping.value()->size();
    if (size == 0)
        return makeError(ErrorCode::ModelFileInvalid, tokenizerModelPath + ": empty file");
    if (size > kMaxModelBytes)
        return makeError(ErrorCode::ModelFileInvalid,
                         tokenizerModelPath + ": " + std::to_string(size) +
                             " bytes, too large for a tokenizer model");
    try {
        const std::string bytes(reinterpret_cast<const char*>(mapping.value()->data()), size);
        return fromModel(tokenizerModelPath, bytes, out);
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, tokenizerModelPath + ": out of memory");
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, tokenizerModelPath + ": " + e.what());
    }
}

}  // namespace spillway
