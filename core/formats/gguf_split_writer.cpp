// Split GGUF writer: a model's tensors cut into parts (assignParts) and each part written by
// gguf::Writer with llama-gguf-split's keys and names.

#include <algorithm>
#include <filesystem>

#include "core/formats/gguf_split.h"

namespace spillway::gguf {

Result<std::vector<std::string>> writeSplit(const std::vector<KeyValue>& metadata,
                                            const std::vector<TensorSource>& tensors, const std::string& prefix,
                                            const SplitPlan& plan, uint64_t alignment)
{
    std::vector<uint64_t> bytes;
    bytes.reserve(tensors.size());
    for (const TensorSource& t : tensors) {
        const auto& traits = gpu::dtypeTraits(t.type);
        uint64_t rows = 1;
        for (size_t d = 1; d < t.dims.size(); ++d) rows *= uint64_t(std::max<int64_t>(t.dims[d], 1));
        const int64_t cols = t.dims.empty() ? 0 : t.dims[0];
        bytes.push_back(traits.blockSize > 0 ? uint64_t(cols / traits.blockSize) * uint64_t(traits.blockBytes) * rows : 0);
    }
    const std::vector<int> partOf = assignParts(bytes, plan, alignment);
    const int count = partOf.empty() ? 1 : partOf.back() + 1;
    if (count > kMaxSplitParts)
        return makeError(ErrorCode::InvalidArgument, prefix + ": " + std::to_string(count) + " parts, more than the " +
                                                         std::to_string(kMaxSplitParts) + " a split GGUF can number");
    if (tensors.size() > size_t(INT32_MAX))
        return makeError(ErrorCode::InvalidArgument, prefix + ": too many tensors for split.tensors.count");
    std::vector<Writer> writers;
    writers.reserve(size_t(count));
    for (int i = 0; i < count; ++i) {
        Writer& w = writers.emplace_back(alignment);
        if (i == 0)
            for (const KeyValue& kv : metadata)
                if (!isSplitKey(kv.key)) w.setValue(kv.key, kv.value);
        w.setUInt16(std::string(kSplitNo), uint16_t(i));
        w.setUInt16(std::string(kSplitCount), uint16_t(count));
        w.setInt32(std::string(kSplitTensorsCount), int32_t(tensors.size()));
    }
    for (size_t t = 0; t < tensors.size(); ++t)
        writers[size_t(partOf[t])].addTensor(tensors[t].name, tensors[t].type, tensors[t].dims, tensors[t].fill);
    std::vector<std::string> written;
    for (int i = 0; i < count; ++i) {
        const std::string path = splitPartPath(prefix, i + 1, count);
        if (Status s = writers[size_t(i)].write(path); !s) {
            std::error_code ec;
            for (const std::string& p : written) std::filesystem::remove(p, ec);
            return s.error();
        }
        written.push_back(path);
    }
    return written;
}

}  // namespace spillway::gguf
