#pragma once
// Split GGUF: one model in several files, as llama.cpp's llama-gguf-split writes them
// (NAME-00001-of-00003.gguf, NAME-00002-of-00003.gguf, ...). Each part is a GGUF file of its own,
// with its own header, tensor table and data section; the first holds the model's metadata, and
// every part says where it belongs with three keys: split.no (uint16, 0-based), split.count
// (uint16) and split.tensors.count (int32, the tensors of all parts together).
//
// SplitFile opens a model's GGUF whether it is one file or split: given any part, it finds the
// others by their names, reads and checks every part's header, and gives each tensor with the
// part that holds it. Every check is made before anything is handed out: a missing part, parts
// of two models, a part number out of range, a tensor in two parts or in none, a truncated part
// each give one Error naming the file (and the tensor), and nothing is opened half.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/formats/gguf.h"

namespace spillway::gguf {

// The keys llama-gguf-split writes into every part.
inline constexpr std::string_view kSplitNo = "split.no";
inline constexpr std::string_view kSplitCount = "split.count";
inline constexpr std::string_view kSplitTensorsCount = "split.tensors.count";
// Whether `key` is one of the three (a joined or re-split model drops them).
bool isSplitKey(std::string_view key);

// The most parts llama-gguf-split's names (five digits) and split.count (uint16) can number.
inline constexpr int kMaxSplitParts = 65535;

// "dir/NAME-00002-of-00003.gguf" -> {"dir/NAME", 2, 3}; nullopt for any other name.
struct SplitName {
    std::string prefix;  // the path before "-00002-of-00003.gguf"
    int number = 0;      // 1-based, as in the name
    int count = 0;
};
std::optional<SplitName> parseSplitName(std::string_view path);
// The name of part `number` (1-based) of `count`: PREFIX-%05d-of-%05d.gguf, llama.cpp's
// llama_split_path.
std::string splitPartPath(std::string_view prefix, int number, int count);

// A tensor of the model with the part that holds it.
struct PartTensor {
    const TensorInfo* info = nullptr;  // in parts()[part]; its `data` points into that mapping
    uint32_t part = 0;                 // index into parts() (split.no)
    uint64_t fileOffset = 0;           // from the start of that part's file
};

class SplitFile {
public:
    // `path`: a GGUF file, or any part of a split one. A file without split.count (or with a
    // split.count of 1) is a model of one part.
    static Result<std::unique_ptr<SplitFile>> open(const std::string& path);

    // The first part's path: the name that stands for the model whichever part was opened.
    const std::string& path() const { return m_parts.front()->path(); }
    bool isSplit() const { return m_parts.size() > 1; }
    const std::vector<std::unique_ptr<File>>& parts() const { return m_parts; }
    std::vector<std::string> partPaths() const;
    uint64_t totalBytes() const;  // of every part's file

    // The model's metadata: the first part's (split.* keys included).
    const Metadata& meta() const { return m_parts.front()->meta(); }
    // Every tensor, in part order and each part's table order.
    const std::vector<PartTensor>& tensors() const { return m_tensors; }

private:
    SplitFile() = default;
    std::vector<std::unique_ptr<File>> m_parts;  // by split.no
    std::vector<PartTensor> m_tensors;
};

// How to cut a model into parts (llama-gguf-split's --split-max-size / --split-max-tensors): a
// new part starts when the next tensor would take this one's data past maxBytes (each tensor
// counted padded to the alignment), or when it holds maxTensors tensors. A tensor larger than
// maxBytes gets a part of its own. 0: no limit of that kind.
struct SplitPlan {
    uint64_t maxBytes = 0;
    int maxTensors = 0;
};
// For each tensor of `tensorBytes` (in order), the part (0-based) it goes into.
std::vector<int> assignParts(std::span<const uint64_t> tensorBytes, const SplitPlan& plan, uint64_t alignment = 32);

// A tensor to write: as Writer::addTensor takes it.
struct TensorSource {
    std::string name;
    gpu::DType type = gpu::DType::F32;
    std::vector<int64_t> dims;  // GGUF order
    Writer::FillFn fill;
};
// Writes a model as the parts of a split GGUF, splitPartPath(prefix, i, N) for i = 1..N (N from
// `plan`; one part is still named -00001-of-00001.gguf and has the split keys, as
// llama-gguf-split writes it): the first part holds every key of `metadata` but the split.* ones,
// every part split.no, split.count (uint16) and split.tensors.count (int32) and its tensors. Each
// part goes through Writer (temp file + rename); a failure removes the parts written before it.
// Returns the parts' paths.
Result<std::vector<std::string>> writeSplit(const std::vector<KeyValue>& metadata,
                                            const std::vector<TensorSource>& tensors, const std::string& prefix,
                                            const SplitPlan& plan, uint64_t alignment = 32);

}  // namespace spillway::gguf
