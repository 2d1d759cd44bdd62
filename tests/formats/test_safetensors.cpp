// safetensors: writer -> reader round trips (single files and sharded folders), the file
// layout the Python library produces, and corrupt or hostile files, each of which must give
// a clear error naming the file, never a crash.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <random>
#include <stdexcept>
#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/formats/safetensors.h"

using namespace spillway;
namespace st = spillway::safetensors;
namespace fs = std::filesystem;

namespace {

// Removes the tests' folders when the run ends.
class TempFolders : public testing::Environment {
public:
    static std::vector<std::string>& list()
    {
        static std::vector<std::string> folders;
        return folders;
    }
    void TearDown() override
    {
        for (const std::string& dir : list()) {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }
};
[[maybe_unused]] testing::Environment* const kTempFolders =
    testing::AddGlobalTestEnvironment(new TempFolders);

// A fresh folder per test under GoogleTest's temp dir.
std::string tempFolder(const std::string& name)
{
    const fs::path dir = fs::path(testing::TempDir()) /
                         ("spillway_safetensors_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    TempFolders::list().push_back(dir.string());
    return dir.string();
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed)
{
    std::vector<uint8_t> out(bytes);
    for (size_t i = 0; i < bytes; ++i) out[i] = uint8_t(seed + i * 7);
    return out;
}

// The file's bytes; "" and a test failure when it cannot be opened.
std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << path;
        return {};
    }
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string& path, const std::string& bytes)
{
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// 8-byte little-endian length, the header text, then `data`.
std::string rawFile(const std::string& header, const std::string& data = {})
{
    std::string out(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    return out + header + data;
}

std::vector<std::string> partialFiles(const std::string& dir)
{
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().filename().string().find(".partial") != std::string::npos)
            found.push_back(entry.path().string());
    return found;
}

struct Sample {
    std::string name;
    gpu::DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

std::vector<Sample> samples()
{
    return {
        {"scalar", gpu::DType::F32, {}, pattern(4, 1)},
        {"model.embed.weight", gpu::DType::F16, {5}, pattern(10, 2)},
        {"layers.0.w", gpu::DType::BF16, {2, 3, 4}, pattern(48, 3)},
        {"empty", gpu::DType::F32, {0, 4}, {}},
        {"odd.f16", gpu::DType::F16, {3}, pattern(6, 4)},  // leaves the next offset at 2 mod 4
        {"after", gpu::DType::F32, {2, 2}, pattern(16, 5)},
    };
}

TEST(Safetensors, RoundTripsTensorsAndMetadata)
{
    const std::string dir = tempFolder("roundtrip");
    const std::string path = dir + "/model.safetensors";
    st::Writer writer;
    writer.setMetadata("format", "pt");
    writer.setMetadata("note", "caf\u00e9 \"quoted\"");
    for (const Sample& s : samples()) writer.addTensor(s.name, s.type, s.shape, s.bytes);
    // An I64 tensor (position ids): listed on reading, refused only when used.
    writer.addTensor("position_ids", "I64", {3}, [](std::span<uint8_t> out) {
        const int64_t ids[3] = {0, 1, 2};
        std::memcpy(out.data(), ids, sizeof ids);
    });
    ASSERT_TRUE(writer.write(path).ok());
    EXPECT_EQ(fs::file_size(path), writer.fileBytes());
    EXPECT_TRUE(partialFiles(dir).empty());

    auto file = st::File::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->metadata().at("format"), "pt");
    EXPECT_EQ(file->metadata().at("note"), "caf\u00e9 \"quoted\"");
    EXPECT_EQ(file->dataOffset() % 8, 0u);
    ASSERT_EQ(file->tensors().size(), samples().size() + 1);
    for (const Sample& s : samples()) {
        const st::Tensor* t = file->tensor(s.name);
        ASSERT_NE(t, nullptr) << s.name;
        EXPECT_EQ(t->dtypeName, st::dtypeName(s.type));
        ASSERT_TRUE(t->dtype.has_value());
        EXPECT_EQ(*t->dtype, s.type);
        EXPECT_EQ(t->shape, s.shape);
        EXPECT_EQ(t->bytes, s.bytes.size());
        EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->bytes), s.bytes) << s.name;
        auto type = st::requireSupported(*t, path);
        ASSERT_TRUE(type.ok()) << type.error().message;
        EXPECT_EQ(*type, s.type);
        const std::string raw = readFile(path);
        ASSERT_GE(raw.size(), t->fileOffset + t->bytes) << path;
        EXPECT_EQ(raw.substr(t->fileOffset, t->bytes),
                  std::string(s.bytes.begin(), s.bytes.end()));
    }
    EXPECT_EQ(file->tensor("scalar")->elements(), 1);
    EXPECT_EQ(file->tensor("empty")->elements(), 0);

    const st::Tensor* ids = file->tensor("position_ids");
    ASSERT_NE(ids, nullptr);
    EXPECT_EQ(ids->dtypeName, "I64");
    EXPECT_FALSE(ids->dtype.has_value());
    auto refused = st::requireSupported(*ids, path);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(refused.error().message.find("'position_ids'"), std::string::npos);
    EXPECT_NE(refused.error().message.find("I64"), std::string::npos);
}

TEST(Safetensors, WritesThePythonLibraryLayout)
{
    const std::string dir = tempFolder("layout");
    const std::string path = dir + "/a.safetensors";
    st::Writer writer;
    writer.setMetadata("format", "pt");
    for (const Sample& s : samples()) writer.addTensor(s.name, s.type, s.shape, s.bytes);
    ASSERT_TRUE(writer.write(path).ok());

    const std::string raw = readFile(path);
    ASSERT_GE(raw.size(), 8u) << path;
    uint64_t headerBytes = 0;
    std::memcpy(&headerBytes, raw.data(), 8);
    EXPECT_EQ(headerBytes % 8, 0u);
    const std::string header = raw.substr(8, headerBytes);
    ASSERT_FALSE(header.empty()) << path;
    EXPECT_EQ(header.front(), '{');
    const size_t end = header.find_last_not_of(' ');
    ASSERT_NE(end, std::string::npos) << "a header of spaces only";
    EXPECT_EQ(header[end], '}');  // padded with spaces only
    EXPECT_LT(header.size() - end - 1, 8u);

    // "__metadata__" first, tensors in the order given, offsets back to back from 0.
    const auto json = nlohmann::ordered_json::parse(header);
    auto it = json.begin();
    EXPECT_EQ(it.key(), "__metadata__");
    uint64_t offset = 0;
    for (const Sample& s : samples()) {
        ++it;
        ASSERT_NE(it, json.end());
        EXPECT_EQ(it.key(), s.name);
        EXPECT_EQ((*it)["data_offsets"][0].get<uint64_t>(), offset);
        offset += s.bytes.size();
        EXPECT_EQ((*it)["data_offsets"][1].get<uint64_t>(), offset);
        EXPECT_EQ((*it)["shape"].get<std::vector<int64_t>>(), s.shape);
    }
    EXPECT_EQ(raw.size(), 8 + headerBytes + offset);
}

TEST(Safetensors, ShardedIndexRoundTrip)
{
    const std::string dir = tempFolder("sharded");
    const auto all = samples();
    std::map<std::string, std::string> weightMap;
    uint64_t total = 0;
    for (int shard = 0; shard < 2; ++shard) {
        const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
        st::Writer writer;
        writer.setMetadata("format", "pt");
        for (size_t i = size_t(shard); i < all.size(); i += 2) {
            writer.addTensor(all[i].name, all[i].type, all[i].shape, all[i].bytes);
            weightMap[all[i].name] = name;
            total += all[i].bytes.size();
        }
        ASSERT_TRUE(writer.write(dir + "/" + name).ok());
    }
    const std::string index = dir + "/model.safetensors.index.json";
    ASSERT_TRUE(st::writeIndex(index, weightMap, total, {{"source", "test"}}).ok());

    const auto json = nlohmann::json::parse(readFile(index));
    EXPECT_EQ(json["metadata"]["total_size"].get<uint64_t>(), total);
    EXPECT_EQ(json["weight_map"].size(), all.size());

    auto table = st::openIndexed(index);
    ASSERT_TRUE(table.ok()) << table.error().message;
    ASSERT_EQ(table->files.size(), 2u);
    ASSERT_EQ(table->paths.size(), 2u);
    EXPECT_EQ(table->metadata.at("total_size"), std::to_string(total));
    EXPECT_EQ(table->metadata.at("source"), "test");
    ASSERT_EQ(table->tensors.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
        const st::Tensor* t = table->find(all[i].name);
        ASSERT_NE(t, nullptr) << all[i].name;
        EXPECT_EQ(t->shard, uint32_t(i % 2));
        EXPECT_EQ(t->shape, all[i].shape);
        EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->bytes), all[i].bytes);
        // The absolute offset reads the same bytes from the shard file (for direct I/O).
        ASSERT_LT(t->shard, table->paths.size());
        const std::string raw = readFile(table->paths[t->shard]);
        ASSERT_GE(raw.size(), t->fileOffset + t->bytes) << table->paths[t->shard];
        EXPECT_EQ(raw.substr(t->fileOffset, t->bytes),
                  std::string(all[i].bytes.begin(), all[i].bytes.end()));
    }

    // A single file as a one-shard table.
    auto single = st::openSingle(table->paths[0]);
    ASSERT_TRUE(single.ok()) << single.error().message;
    EXPECT_EQ(single->tensors.size(), 3u);
    EXPECT_EQ(single->metadata.at("format"), "pt");
}

Error indexError(const std::string& dir, const std::string& indexText)
{
    const std::string index = dir + "/bad.index.json";
    writeFile(index, indexText);
    auto table = st::openIndexed(index);
    EXPECT_FALSE(table.ok());
    return table.ok() ? Error{} : table.error();
}

TEST(Safetensors, BadShardedIndexes)
{
    const std::string dir = tempFolder("badindex");
    for (const char* name : {"a.safetensors", "b.safetensors"}) {
        st::Writer writer;
        writer.addTensor(std::string("t.") + name, gpu::DType::F32, {1}, pattern(4, 9));
        writer.addTensor("shared", gpu::DType::F32, {1}, pattern(4, 9));
        ASSERT_TRUE(writer.write(dir + "/" + name).ok());
    }
    {
        st::Writer writer;
        writer.addTensor("only", gpu::DType::F32, {1}, pattern(4, 9));
        ASSERT_TRUE(writer.write(dir + "/c.safetensors").ok());
    }
    Error e = indexError(dir, R"({"weight_map": {"x": "missing-1.safetensors",
                                                 "y": "missing-2.safetensors",
                                                 "only": "c.safetensors"}})");
    EXPECT_EQ(e.code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(e.message.find("missing-1.safetensors"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("missing-2.safetensors"), std::string::npos) << e.message;

    e = indexError(dir, R"({"weight_map": {"shared": "a.safetensors",
                                           "t.b.safetensors": "b.safetensors"}})");
    EXPECT_NE(e.message.find("'shared' is in both"), std::string::npos) << e.message;

    e = indexError(dir, R"({"weight_map": {"only": "a.safetensors",
                                           "t.a.safetensors": "a.safetensors",
                                           "shared": "a.safetensors"}})");
    EXPECT_NE(e.message.find("'only'"), std::string::npos) << e.message;

    e = indexError(dir, R"({"weight_map": {"x": "../c.safetensors"}})");
    EXPECT_NE(e.message.find("not a file beside the index"), std::string::npos) << e.message;
    e = indexError(dir, R"({"weight_map": {"x": 3}})");
    EXPECT_NE(e.message.find("not a file name"), std::string::npos) << e.message;
    e = indexError(dir, R"({"metadata": {}})");
    EXPECT_NE(e.message.find("weight_map"), std::string::npos) << e.message;
    e = indexError(dir, "{\"weight_map\": ");
    EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
    e = indexError(dir, "[1, 2]");
    EXPECT_NE(e.message.find("not a JSON object"), std::string::npos) << e.message;
}

// Opens `bytes` as a safetensors file; expects ModelFileInvalid whose message names the file
// and contains `expected`.
void expectInvalid(const std::string& dir, const std::string& bytes, const std::string& expected)
{
    const std::string path = dir + "/corrupt.safetensors";
    writeFile(path, bytes);
    auto file = st::File::open(path);
    ASSERT_FALSE(file.ok()) << "accepted; expected: " << expected;
    EXPECT_EQ(file.error().code, ErrorCode::ModelFileInvalid) << file.error().message;
    EXPECT_EQ(file.error().message.rfind(path + ": ", 0), 0u) << file.error().message;
    EXPECT_NE(file.error().message.find(expected), std::string::npos)
        << "message: " << file.error().message << "\nexpected: " << expected;
}

std::string tensorHeader(const std::string& entry)
{
    return "{\"t\": " + entry + "}";
}

TEST(Safetensors, CorruptFilesGiveClearErrors)
{
    const std::string dir = tempFolder("corrupt");
    const std::string data(64, 'x');
    expectInvalid(dir, "", "too short");
    expectInvalid(dir, "\x05\x00\x00", "too short");
    {
        std::string huge(8, '\0');
        const uint64_t n = 200'000'000;
        std::memcpy(huge.data(), &n, 8);
        expectInvalid(dir, huge + "{}", "exceeds the limit");
    }
    {
        std::string past = rawFile("{}");
        const uint64_t n = 1000;
        std::memcpy(past.data(), &n, 8);
        expectInvalid(dir, past, "truncated: the header needs 1000 bytes");
    }
    expectInvalid(dir, rawFile("{\"t\": {\"dtype\": "), "not valid JSON");
    expectInvalid(dir, rawFile("[1, 2, 3]"), "not an object");
    expectInvalid(dir, rawFile("\"text\""), "not an object");
    expectInvalid(dir, rawFile("{\"__metadata__\": {\"a\": 1}}"), "'a' is a JSON number");
    expectInvalid(dir, rawFile("{\"__metadata__\": [1]}"), "__metadata__ is a JSON array");
    expectInvalid(dir, rawFile(tensorHeader("3")), "tensor 't' is a JSON number");
    expectInvalid(dir, rawFile(tensorHeader(R"({"shape": [1], "data_offsets": [0, 4]})")),
                  "no dtype");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "Q4", "shape": [1],
                                              "data_offsets": [0, 4]})"), data),
                  "unknown dtype 'Q4'");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "data_offsets": [0, 4]})")),
                  "no shape");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [-1],
                                              "data_offsets": [0, 4]})"), data),
                  "shape entry 0 (-1) is not a dimension");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1.5],
                                              "data_offsets": [0, 4]})"), data),
                  "is not a dimension");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [99999999999999999999],
                                              "data_offsets": [0, 4]})"), data),
                  "is not a dimension");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32",
                                              "shape": [4294967296, 4294967296],
                                              "data_offsets": [0, 4]})"), data),
                  "overflows 64 bits");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F64",
                                              "shape": [1152921504606846976, 4],
                                              "data_offsets": [0, 4]})"), data),
                  "overflows");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1]})"), data),
                  "no data_offsets");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1],
                                              "data_offsets": [0]})"), data),
                  "no data_offsets");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1],
                                              "data_offsets": [-4, 0]})"), data),
                  "are not integers >= 0");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1],
                                              "data_offsets": [8, 4]})"), data),
                  "end before they begin");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [2],
                                              "data_offsets": [60, 68]})"), data),
                  "reach past the data section of 64 bytes");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [1],
                                              "data_offsets": [18446744073709551615,
                                                               18446744073709551615]})"), data),
                  "reach past the data section");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F32", "shape": [2, 3],
                                              "data_offsets": [0, 16]})"), data),
                  "span 16 bytes but F32 shape [2,3] needs 24");
    expectInvalid(dir, rawFile(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                   "b": {"dtype": "F16", "shape": [4], "data_offsets": [8, 16]}})",
                               data),
                  "tensors 'a' and 'b' overlap");
    expectInvalid(dir, rawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                   "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                               data),
                  "names 'a' twice");
    expectInvalid(dir, rawFile(R"({"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                               data),
                  "empty name");
    expectInvalid(dir, rawFile(tensorHeader(R"({"dtype": "F4", "shape": [3],
                                              "data_offsets": [0, 1]})"), data),
                  "not a whole number of bytes");

    // Empty tensors at any offset inside the data overlap nothing; a sub-byte type with a whole
    // number of bytes is fine.
    const std::string path = dir + "/fine.safetensors";
    writeFile(path, rawFile(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                               "e": {"dtype": "BF16", "shape": [0, 7], "data_offsets": [8, 8]},
                               "f": {"dtype": "F4", "shape": [4], "data_offsets": [16, 18]}})",
                            data));
    auto fine = st::File::open(path);
    ASSERT_TRUE(fine.ok()) << fine.error().message;
    EXPECT_EQ(fine->tensors().size(), 3u);
    ASSERT_NE(fine->tensor("f"), nullptr);
    auto f4 = st::requireSupported(*fine->tensor("f"), path);
    ASSERT_FALSE(f4.ok()) << "F4 accepted";
    EXPECT_EQ(f4.error().code, ErrorCode::UnsupportedModel);

    auto missing = st::File::open(dir + "/no-such-file.safetensors");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::Io);
}

TEST(Safetensors, EveryTruncationAndRandomCorruptionIsSafe)
{
    const std::string dir = tempFolder("fuzz");
    const std::string good = dir + "/good.safetensors";
    st::Writer writer;
    writer.setMetadata("format", "pt");
    for (const Sample& s : samples()) writer.addTensor(s.name, s.type, s.shape, s.bytes);
    ASSERT_TRUE(writer.write(good).ok());
    const std::string bytes = readFile(good);
    ASSERT_FALSE(bytes.empty()) << good;  // the corruptions below pick positions modulo its size
    const std::string path = dir + "/cut.safetensors";
    for (size_t n = 0; n < bytes.size(); ++n) {
        writeFile(path, bytes.substr(0, n));
        auto file = st::File::open(path);
        EXPECT_FALSE(file.ok()) << "a file cut at " << n << " of " << bytes.size()
                                << " bytes was accepted";
    }
    std::mt19937 rng(42);
    int accepted = 0;
    for (int i = 0; i < 1500; ++i) {
        std::string mutated = bytes;
        const int flips = 1 + int(rng() % 4);
        for (int f = 0; f < flips; ++f) {
            // Mostly in the header, where the structure is.
            const size_t at = rng() % 4 ? rng() % std::min<size_t>(bytes.size(), 400)
                                        : rng() % bytes.size();
            mutated[at] = char(rng() % 2 ? rng() % 256 : "{}[]\",:0123456789 -eE"[rng() % 21]);
        }
        writeFile(path, mutated);
        auto file = st::File::open(path);
        if (!file.ok()) {
            EXPECT_EQ(file.error().code, ErrorCode::ModelFileInvalid) << file.error().message;
            continue;
        }
        ++accepted;
        for (const st::Tensor& t : file->tensors()) {  // whatever was accepted is in bounds
            ASSERT_LE(t.fileOffset + t.bytes, file->fileSize());
            volatile uint8_t sink = 0;
            for (uint64_t b = 0; b < t.bytes; ++b) sink = sink + t.data[b];
        }
    }
    std::printf("random corruption: %d of 1500 files still valid\n", accepted);
}

TEST(Safetensors, WriterFailuresLeaveNoPartialOutput)
{
    const std::string dir = tempFolder("failures");
    const std::string path = dir + "/out.safetensors";
    writeFile(path, "previous contents");

    st::Writer throwing;
    throwing.addTensor("a", gpu::DType::F32, {4}, pattern(16, 1));
    throwing.addTensor("b", gpu::DType::F32, {1 << 20}, [](std::span<uint8_t>) {
        throw std::runtime_error("simulated read error");
    });
    Status status = throwing.write(path);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::Internal);
    EXPECT_NE(status.error().message.find("simulated read error"), std::string::npos);
    EXPECT_EQ(readFile(path), "previous contents");  // the target is untouched
    EXPECT_TRUE(partialFiles(dir).empty());

    const auto expectInvalidArgument = [&](const st::Writer& w, const std::string& expected) {
        const Status s = w.write(path);
        ASSERT_FALSE(s.ok()) << expected;
        EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument) << s.error().message;
        EXPECT_NE(s.error().message.find(expected), std::string::npos) << s.error().message;
        EXPECT_EQ(readFile(path), "previous contents");
        EXPECT_TRUE(partialFiles(dir).empty());
    };
    st::Writer duplicate;
    duplicate.addTensor("a", gpu::DType::F32, {1}, pattern(4, 1));
    duplicate.addTensor("a", gpu::DType::F32, {1}, pattern(4, 1));
    expectInvalidArgument(duplicate, "duplicate tensor 'a'");
    st::Writer wrongSize;
    wrongSize.addTensor("a", gpu::DType::F16, {3}, pattern(4, 1));
    expectInvalidArgument(wrongSize, "has 4 bytes of data but its dtype and shape need 6");
    st::Writer negative;
    negative.addTensor("a", "F32", {-2}, [](std::span<uint8_t>) {});
    expectInvalidArgument(negative, "negative");
    st::Writer quantized;
    quantized.addTensor("q", gpu::DType::Q8_0, {32}, [](std::span<uint8_t>) {});
    expectInvalidArgument(quantized, "Q8_0");
    st::Writer unknown;
    unknown.addTensor("u", "F12", {1}, [](std::span<uint8_t>) {});
    expectInvalidArgument(unknown, "'F12'");
    st::Writer reserved;
    reserved.addTensor("__metadata__", gpu::DType::F32, {1}, pattern(4, 1));
    expectInvalidArgument(reserved, "__metadata__");

    st::Writer fine;
    fine.addTensor("a", gpu::DType::F32, {1}, pattern(4, 1));
    const Status noFolder = fine.write(dir + "/no/such/folder/out.safetensors");
    ASSERT_FALSE(noFolder.ok());
    EXPECT_EQ(noFolder.error().code, ErrorCode::Io);

    const Status noIndexFolder = st::writeIndex(dir + "/no/such/index.json", {}, 0);
    ASSERT_FALSE(noIndexFolder.ok());
    EXPECT_EQ(noIndexFolder.error().code, ErrorCode::Io);
}

TEST(Safetensors, WriteIntoReadOnlyFolderFails)
{
    if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
    const std::string dir = tempFolder("readonly");
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    st::Writer writer;
    writer.addTensor("a", gpu::DType::F32, {1}, pattern(4, 1));
    const Status status = writer.write(dir + "/out.safetensors");
    fs::permissions(dir, fs::perms::owner_all);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::Io);
    EXPECT_FALSE(fs::exists(dir + "/out.safetensors"));
    EXPECT_TRUE(partialFiles(dir).empty());
}

TEST(Safetensors, WriteErrorMidFileLeavesNoPartialOutput)
{
    // A file size limit makes write() fail part way (EFBIG), as a full disk would (ENOSPC),
    // even for root.
    const std::string dir = tempFolder("fsize");
    st::Writer writer;
    writer.addTensor("big", gpu::DType::F32, {1 << 18}, [](std::span<uint8_t> out) {
        std::fill(out.begin(), out.end(), uint8_t{1});
    });
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    const auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = old;
    limited.rlim_cur = 64 * 1024;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
    const Status status = writer.write(dir + "/out.safetensors");
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, oldHandler);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::Io) << status.error().message;
    EXPECT_NE(status.error().message.find("out.safetensors"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir + "/out.safetensors"));
    EXPECT_TRUE(partialFiles(dir).empty());
}

}  // namespace
