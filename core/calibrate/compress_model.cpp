#include "core/calibrate/compress_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <cmath>
#include <filesystem>
#include <functional>

#include "core/calibrate/predictor_training.h"
#include "core/calibrate/prune_calibration.h"
#include "core/compress/bitmap_sparse.h"
#include "core/compress/ffn_bundles.h"
#include "core/compress/ffn_predictor.h"
#include "core/compress/group_quant.h"
#include "core/compress/prune.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"
#include "storage/package.h"

namespace spillway::compress {

namespace {

// What one source tensor becomes.
enum class Action { Copy, Q8_0, Bitmap };

struct Job {
    const ModelTensor* tensor = nullptr;
    gpu::MatrixView view;   // layer matrices only
    Action action = Action::Copy;
    std::string tierHint;
};

bool isLayerMatrix(const std::string& name)
{
    static const char* kSuffixes[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                                      ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"};
    if (name.rfind("blk.", 0) != 0) return false;
    for (const char* s : kSuffixes)
        if (name.size() > std::string_view(s).size() && name.ends_with(s)) return true;
    return false;
}

// The streaming unit a tensor belongs to, for the package's order: -1 for what no layer owns
// (the embedding, the final norm), the layer's index, then the output head last.
int64_t streamingUnit(const std::string& name)
{
    if (name == "output.weight") return std::numeric_limits<int64_t>::max();
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::strtoll(name.c_str() + 4, nullptr, 10);
}

Status checkOptions(const CompressOptions& o)
{
    auto bad = [](const std::string& why) { return makeError(ErrorCode::InvalidArgument, "compress: " + why); };
    const PruneSpec& p = o.prune;
    if (p.method != PruneMethod::None) {
        if (p.m > 0 ? (p.n < 0 || p.n > p.m) : !(p.ratio >= 0.0 && p.ratio <= 1.0))
            return bad("pruning needs a ratio in [0, 1] or n:m with 0 <= n <= m");
    }
    if (o.quant.bits != 0 && !validQuantParams(o.quant.bits, o.quant.group))
        return bad("quantization is int8 or int4 with group 32, 64 or 128");
    if (o.calibrationTokens < 1) return bad("calibration tokens must be >= 1");
    if (o.shardBytes == 0) return bad("shard size must be > 0");
    if (o.predictorRank < 0 || o.predictorRank > 4096) return bad("predictor rank must be 0..4096");
    return {};
}

// Bytes a job's output will take, for the free-space check (bitmap: from the ratio asked).
uint64_t estimateBytes(const Job& j, const CompressOptions& o)
{
    const ModelTensor& t = *j.tensor;
    if (j.action == Action::Copy) return t.bytes;
    const uint64_t rows = uint64_t(j.view.rows), cols = uint64_t(j.view.cols);
    if (j.action == Action::Q8_0) return rows * gpu::rowBytes(gpu::DType::Q8_0, int64_t(cols));
    double keep = 1.0;
    if (o.prune.method != PruneMethod::None) keep = o.prune.m > 0 ? double(o.prune.n) / o.prune.m : 1.0 - o.prune.ratio;
    const double valueBytes = o.quant.bits == 0 ? 2.0 : o.quant.bits / 8.0 + 2.0 / o.quant.group;
    return uint64_t(double(rows * cols) * keep * valueBytes) + rows * ((cols + 63) / 64 * 8) + (rows + 1) * 8 + 256;
}

std::string tensorExtra(int64_t zeros, int64_t weights, double relError)
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "{\"sparsity\":%.6f,\"relError\":%.6g}", weights ? double(zeros) / double(weights) : 0.0,
                  relError);
    return buf;
}

// Writes layer `layer`'s row-column bundles (ffn_bundles.h) and, for int8 columns, the table
// of their scales.
Status writeBundles(const LlamaModel& source, int layer, storage::PackageWriter& writer, uint64_t& written)
{
    auto layout = ffnBundleLayout(source);
    if (!layout) return layout.error();
    const FfnBundles& b = *layout;
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    std::vector<float> scales(ffnBundleScaleCount(b));
    storage::PackageTensor meta;
    meta.name = prefix + "ffn_bundle";
    meta.shape = {b.neurons, int64_t(b.parts) * b.dim};
    meta.format = bundleFormatName(b.rowType, b.column);
    meta.bytes = uint64_t(b.stride) * uint64_t(b.neurons);
    meta.tierHint = "ssd";
    SPILLWAY_TRY(writer.addTensor(meta, [&](uint8_t* dst, size_t bytes) -> Status {
        if (bytes != b.stride * size_t(b.neurons)) return makeError(ErrorCode::Internal, "bundle size mismatch");
        return buildFfnBundles(source, layer, dst, scales.data());
    }));
    written += meta.bytes;
    if (!scales.empty()) {
        storage::PackageTensor st;
        st.name = prefix + "ffn_bundle_scales";
        st.shape = {b.neurons / b.column.group, b.dim};
        st.format = "f32";
        st.tierHint = "device";
        SPILLWAY_TRY(writer.addTensor(st, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scales.data()),
                                                                   scales.size() * sizeof(float))));
        written += scales.size() * sizeof(float);
    }
    return {};
}

}  // namespace

const char* presetName(Preset p)
{
    switch (p) {
    case Preset::Fast: return "fast";
    case Preset::Balanced: return "balanced";
    case Preset::Smallest: return "smallest";
    case Preset::Sparse: return "sparse";
    }
    return "?";
}

std::optional<Preset> presetFromName(const std::string& name)
{
    for (Preset p : {Preset::Fast, Preset::Balanced, Preset::Smallest, Preset::Sparse})
        if (name == presetName(p)) return p;
    return std::nullopt;
}

CompressOptions presetOptions(Preset preset)
{
    CompressOptions o;
    switch (preset) {
    case Preset::Fast: o.quant = {8, 32}; break;
    case Preset::Balanced: o.prune = {PruneMethod::Wanda, 0.5, 0, 0}; break;
    case Preset::Smallest:
        o.prune = {PruneMethod::Wanda, 0.5, 0, 0};
        o.quant = {8, 64};
        break;
    case Preset::Sparse:
        o.bundles = true;
        o.predictorRank = 64;
        o.predictorInput = PredictorInput::Attention;
        o.qualityCheck = false;
        break;
    }
    return o;
}

Result<CompressReport> compressModel(const LlamaModel& source, const std::string& outDir,
                                     const CompressOptions& options, gpu::Device& device)
{
    SPILLWAY_TRY(checkOptions(options));
    if (source.config().moe())
        return makeError(ErrorCode::UnsupportedModel,
                         "compress: " + source.path() + " is a mixture of experts, which compress does not take yet "
                         "(its pruning, quantization and calibration know dense FFNs only); run the GGUF as it is");
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    const bool pruning = options.prune.method != PruneMethod::None;
    const bool wanda = options.prune.method == PruneMethod::Wanda;
    // Each stage's share of one progress fraction (set once the jobs are known, below).
    double calibShare = 0.0, writeShare = 0.0, predictShare = 0.0, bundleShare = 0.0, verifyShare = 0.0,
           qualityShare = 0.0;

    CompressReport report;
    auto tell = [&](const std::string& stage, double fraction, const std::string& tensor) -> Status {
        if (!options.progress) return {};
        CompressProgress p;
        p.stage = stage;
        p.fraction = std::clamp(fraction, 0.0, 1.0);
        p.bytesDone = report.sourceBytes;
        p.tensor = tensor;
        const double t = elapsed();
        if (p.fraction > 0.01 && t > 0.5) p.etaSeconds = t / p.fraction * (1.0 - p.fraction);
        if (!options.progress(p)) return makeError(ErrorCode::Cancelled, "compression cancelled");
        return {};
    };

    // Which matrices change, and how.
    std::map<std::string, gpu::MatrixView> layerViews;
    for (const NamedMatrix& m : linearMatrices(source))
        if (!m.head) layerViews[m.name] = m.view;
    std::vector<Job> jobs;
    uint64_t totalBytes = 0, estimate = 0, bundleEstimate = 0;
    for (const ModelTensor& t : source.tensors()) {
        Job j;
        j.tensor = &t;
        const auto it = layerViews.find(t.name);
        const plan::TensorPlacement* placed = options.placement ? options.placement->find(t.name) : nullptr;
        if (placed) j.tierHint = plan::tierName(placed->tier);
        if (it != layerViews.end() && isLayerMatrix(t.name)) {
            j.view = it->second;
            // A device that cannot compute on bitmap sparse weights cannot run them from any tier:
            // streamed layers are computed on it too (LlamaSession refuses such a model).
            const bool denseOnly = !options.deviceSupportsBitmap;
            // Q8_0 blocks are 32 columns: other widths (stories260K's 172) stay bitmap int8.
            const bool q8 = options.quant.bits == 8 && (options.quant.group == 32 || denseOnly) && j.view.cols % 32 == 0;
            if (!pruning && options.quant.bits == 0) j.action = Action::Copy;
            else if ((!pruning || denseOnly) && q8) j.action = Action::Q8_0;
            else if (denseOnly) j.action = Action::Copy;
            else j.action = Action::Bitmap;
            if (j.action == Action::Q8_0 && t.type == gpu::DType::Q8_0) j.action = Action::Copy;
        }
        totalBytes += t.bytes;
        estimate += estimateBytes(j, options);
        jobs.push_back(j);
    }
    if (source.tensors().empty()) return makeError(ErrorCode::InvalidArgument, "compress: the model has no tensors");
    // Written unit by unit (sources such as llama2.c checkpoints group by role instead), so the
    // matrices a streamed layer needs are one contiguous run of the file: one large read.
    std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
        return streamingUnit(a.tensor->name) < streamingUnit(b.tensor->name);
    });
    if (options.bundles) {
        // Bundles repeat the FFN's own bytes: the matrices must reach the package unchanged.
        const LlamaConfig& c = source.config();
        if (!(c.ffnRelu || !c.ffnGated))
            return makeError(ErrorCode::UnsupportedModel,
                             "compress: row-column bundles (--bundles, or the sparse preset) are for ReLU models; " +
                                 source.path() + " has a SwiGLU FFN (no exact zeros to skip)");
        for (const Job& j : jobs) {
            const std::string& n = j.tensor->name;
            const bool ffn = n.ends_with(".ffn_gate.weight") || n.ends_with(".ffn_up.weight") ||
                             n.ends_with(".ffn_down.weight");
            if (ffn && j.action != Action::Copy)
                return makeError(ErrorCode::InvalidArgument,
                                 "compress --bundles: the FFN matrices must stay as they are (use --prune none "
                                 "and --quant none, or int8 on a q8_0 model); '" + n + "' would change");
            if (ffn && j.tensor->type == gpu::DType::BitmapSparse)
                return makeError(ErrorCode::InvalidArgument, "compress --bundles: '" + n + "' is bitmap sparse");
        }
        for (const LlamaLayerWeights& L : source.weights().layers)
            bundleEstimate += gpu::matrixBytes(L.up) * (c.ffnGated ? 2 : 1) +
                              uint64_t(c.ffnDim) * (bundleColumnFor(L.down.type).bytes(c.dim) + sizeof(float));
        estimate += bundleEstimate;
    }

    PredictorOptions po;
    po.rank = options.predictorRank;
    po.continueTokens = options.predictorContinueTokens;
    po.input = options.predictorInput;
    po.maxTokensPerPrompt = options.calibrationTokens;
    {
        // The shares follow each stage's rough seconds, counted as estimatePredictorWork counts
        // (prompt tokens in batches, matrix products at 50 GFLOP/s), with bytes written at 1 GB/s
        // and read back at 2 GB/s: wrong on any given machine, but in about the right ratios, so
        // that an ETA extrapolated from the fraction holds across stages (a fixed split made it
        // 20x short while predictors trained). A matrix that is pruned or quantized costs about
        // 35 ns per weight (dequantize, select, encode, decode, compare: 36 s for
        // TinyLlama-1.1B's 1.0 G layer weights on 2 cores); one that is copied, its bytes at 1 GB/s.
        constexpr double kTransformSecondsPerWeight = 35e-9;
        const double modelBytes = double(totalBytes);
        const double prompts = double(builtinCalibrationPrompts().size());
        const double calib =
            wanda ? prompts * options.calibrationTokens * modelBytes / (kNominalReadBytesPerSecond * kNominalBatchedSpeedup) : 0.0;
        double write = 0.0;
        for (const Job& j : jobs)
            write += j.action == Action::Copy ? double(j.tensor->bytes) / 1e9
                                              : double(j.view.rows) * double(j.view.cols) * kTransformSecondsPerWeight;
        const double predict = options.predictorRank > 0 ? estimatePredictorWork(source, po).total() : 0.0;
        const double bundle = double(bundleEstimate) / 1e9;
        const double verify = double(estimate) / 2e9;
        double qualityTokens = 0.0;  // both models run every prompt token and the perplexity text
        if (options.qualityCheck) {
            const size_t cut = size_t(std::max(options.quality.maxPromptTokens, 1));
            for (const char* prompt : qualityPrompts())
                qualityTokens += double(std::min(source.tokenizer().encode(prompt, true).size(), cut));
            qualityTokens = 2.0 * (qualityTokens + options.quality.perplexityTokens);
        }
        // Batched too, but the candidate (often bitmap sparse) computes slower: about 2x.
        const double quality = qualityTokens * modelBytes / (kNominalReadBytesPerSecond * 2.0);
        const double total = calib + write + predict + bundle + verify + quality;
        calibShare = calib / total;
        writeShare = write / total;
        predictShare = predict / total;
        bundleShare = bundle / total;
        verifyShare = verify / total;
        qualityShare = quality / total;
    }

    ActivationNorms norms;
    if (wanda) {
        SPILLWAY_TRY(tell("calibrating", 0.0, ""));
        auto n = collectActivationNorms(source, device, builtinCalibrationPrompts(), options.calibrationTokens);
        if (!n) return n.error();
        norms = std::move(*n);
        SPILLWAY_TRY(tell("calibrating", calibShare, ""));
    }

    storage::PackageWriterOptions wo;
    wo.shardBytes = options.shardBytes;
    wo.expectedBytes = estimate + estimate / 20;  // 5% margin over the estimate
    auto writer = storage::PackageWriter::create(outDir, wo);
    if (!writer) return writer.error();

    int64_t zeros = 0, weights = 0;
    // Reused from matrix to matrix (fresh multi-MiB buffers cost page faults and zeroing each).
    std::vector<float> dense, original, row;
    for (const Job& j : jobs) {
        const ModelTensor& t = *j.tensor;
        SPILLWAY_TRY(tell("compressing", calibShare + writeShare * double(report.sourceBytes) / double(totalBytes), t.name));
        storage::PackageTensor meta;
        meta.name = t.name;
        meta.shape.assign(t.dims.rbegin(), t.dims.rend());
        meta.tierHint = j.tierHint;
        const bool layer = j.view.data != nullptr;
        if (j.action == Action::Copy) {
            meta.format = packageFormatName(t.type, t.data);
            SPILLWAY_TRY(writer->addTensor(meta, std::span<const uint8_t>(t.data, t.bytes)));
            if (layer) ++report.denseTensors;
        } else {
            SPILLWAY_TRY(denseRowsF32(j.view, dense));
            original.assign(dense.begin(), dense.end());
            const int64_t rows = j.view.rows, cols = j.view.cols;
            if (pruning) {
                const auto nit = norms.find(t.name);
                const float* columnNorms = wanda && nit != norms.end() ? nit->second.data() : nullptr;
                if (wanda && !columnNorms)
                    return makeError(ErrorCode::InvalidArgument, "compress: no calibration statistics for '" + t.name + "'");
                if (j.action == Action::Bitmap) {
                    if (options.prune.m > 0)
                        SPILLWAY_TRY(pruneNM(dense.data(), rows, cols, options.prune.n, options.prune.m, columnNorms));
                    else
                        SPILLWAY_TRY(pruneMagnitude(dense.data(), rows, cols, options.prune.ratio, columnNorms));
                }
            }
            // The encoded matrix against the original, a decoded row at a time (into one reused
            // row: the whole decoded matrix would be another rows x cols floats).
            std::vector<uint8_t> bytes;
            std::function<void(int64_t, float*)> decodeRowInto;
            std::optional<BitmapSparseMatrix> encoded;
            if (j.action == Action::Q8_0) {
                auto q = quantize(dense.data(), rows, cols, 8, 32);  // [fp16 scale][32 x int8] = Q8_0 blocks
                if (!q) return q.error();
                bytes = std::move(q->data);
                meta.format = packageFormatName(gpu::DType::Q8_0);
                decodeRowInto = [&](int64_t r, float* out) { dequantizeRow(QuantizedMatrix{8, 32, rows, cols, bytes}, r, out); };
                ++report.denseTensors;
            } else {
                const ValueFormat values = options.quant.bits == 8   ? ValueFormat::Int8
                                           : options.quant.bits == 4 ? ValueFormat::Int4
                                           : t.type == gpu::DType::BF16 ? ValueFormat::BF16
                                                                        : ValueFormat::F16;
                auto m = encode(dense.data(), rows, cols, values, options.quant.bits ? options.quant.group : 0);
                if (!m) return m.error();
                encoded = std::move(*m);
                bytes = serialize(*encoded);
                meta.format = packageFormatName(gpu::DType::BitmapSparse, bytes.data());
                decodeRowInto = [&](int64_t r, float* out) { decodeRow(*encoded, r, out); };
                ++report.bitmapTensors;
            }
            double err = 0, ref = 0;
            int64_t z = 0;
            row.resize(size_t(cols));
            for (int64_t r = 0; r < rows; ++r) {
                decodeRowInto(r, row.data());
                const float* o = original.data() + size_t(r) * size_t(cols);
                for (int64_t c = 0; c < cols; ++c) {
                    const double d = double(o[c]) - double(row[size_t(c)]);
                    err += d * d;
                    ref += double(o[c]) * double(o[c]);
                    z += row[size_t(c)] == 0.0f;
                }
            }
            zeros += z;
            weights += int64_t(original.size());
            meta.extraJson = tensorExtra(z, int64_t(original.size()), ref > 0 ? std::sqrt(err / ref) : 0.0);
            SPILLWAY_TRY(writer->addTensor(meta, std::span<const uint8_t>(bytes)));
        }
        const uint64_t written = writer->tensors().back().bytes;
        report.sourceBytes += t.bytes;
        report.outputBytes += written;
        if (layer) {
            report.layerSourceBytes += t.bytes;
            report.layerOutputBytes += written;
        }
    }
    report.sparsity = weights ? double(zeros) / double(weights) : 0.0;

    if (options.predictorRank > 0) {
        SPILLWAY_TRY(tell("training predictors", calibShare + writeShare, ""));
        po.progress = [&](double f) {
            return static_cast<bool>(tell("training predictors", calibShare + writeShare + predictShare * f, ""));
        };
        auto predictors = trainFfnPredictors(source, device, po);
        if (!predictors) return predictors.error();
        for (const FfnPredictor& p : *predictors) {
            const std::string b = "blk." + std::to_string(p.layer) + ".";
            auto f32 = [](const std::vector<float>& v) {
                return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
            };
            storage::PackageTensor a;
            a.name = b + kPredictorA;
            a.shape = {p.rank, p.dim};
            a.format = "f32";
            a.extraJson = predictorExtra(p);
            SPILLWAY_TRY(writer->addTensor(a, f32(p.a)));
            storage::PackageTensor bt;
            bt.name = b + kPredictorB;
            bt.shape = {p.neurons, p.rank};
            bt.format = "f32";
            SPILLWAY_TRY(writer->addTensor(bt, f32(p.b)));
            storage::PackageTensor bias;
            bias.name = b + kPredictorBias;
            bias.shape = {p.neurons};
            bias.format = "f32";
            SPILLWAY_TRY(writer->addTensor(bias, f32(p.bias)));
            std::vector<float> activity(p.frequency);
            activity.insert(activity.end(), p.predictedFrequency.begin(), p.predictedFrequency.end());
            if (activity.size() == 2 * size_t(p.neurons)) {
                storage::PackageTensor act;
                act.name = b + kNeuronActivity;
                act.shape = {2, p.neurons};
                act.format = "f32";
                SPILLWAY_TRY(writer->addTensor(act, f32(activity)));
                report.outputBytes += activity.size() * sizeof(float);
            }
            report.outputBytes += (p.a.size() + p.b.size() + p.bias.size()) * sizeof(float);
            report.predictorRecall += p.recall;
            report.predictorPrecision += p.precision;
            ++report.predictors;
        }
        if (report.predictors > 0) {
            report.predictorRecall /= report.predictors;
            report.predictorPrecision /= report.predictors;
        }
    }

    if (options.bundles) {
        for (int l = 0; l < source.config().nLayers; ++l) {
            const double done = bundleShare * double(l) / double(source.config().nLayers);
            SPILLWAY_TRY(tell("writing bundles", calibShare + writeShare + predictShare + done,
                              "blk." + std::to_string(l) + ".ffn_bundle"));
            SPILLWAY_TRY(writeBundles(source, l, *writer, report.bundleBytes));
        }
        report.outputBytes += report.bundleBytes;
    }

    storage::PackageManifest manifest;
    const gguf::Metadata& meta = source.metadata();
    manifest.architecture = source.config().architecture;
    manifest.hyperParametersJson = gguf::metadataToJson(meta, [](std::string_view k) {
        return k.rfind("tokenizer.", 0) != 0 && k != "general.alignment";
    });
    manifest.tokenizerJson = gguf::metadataToJson(meta, [](std::string_view k) {
        return k.rfind("tokenizer.", 0) == 0 && k != "tokenizer.chat_template";
    });
    if (auto chat = meta.getString("tokenizer.chat_template")) manifest.chatTemplate = *chat;
    SPILLWAY_TRY(writer->seal(std::move(manifest)));
    {
        // Read back what reached the disk: every tensor's checksum, before anything uses it.
        auto written = storage::Package::open(writer->temporaryDir());
        if (!written) return written.error();
        const double base = calibShare + writeShare + predictShare + bundleShare;
        SPILLWAY_TRY(written->verify([&](const storage::PackageProgress& p) {
            const double done = p.bytesTotal > 0 ? double(p.bytesDone) / double(p.bytesTotal) : 0.0;
            return static_cast<bool>(tell("verifying", base + verifyShare * done, ""));
        }));
    }

    if (options.qualityCheck) {
        const double base = 1.0 - qualityShare;
        SPILLWAY_TRY(tell("checking quality", base, ""));
        auto candidate = LlamaModel::load(writer->temporaryDir());
        if (!candidate) return candidate.error();
        QualityOptions q = options.quality;
        bool cancelled = false;
        q.progress = [&](double f) {
            cancelled = !tell("checking quality", base + qualityShare * f, "");
            return !cancelled;
        };
        auto quality = compareModels(source, **candidate, device, q);
        if (!quality) return quality.error();
        SPILLWAY_TRY(writer->setQuality(quality->toJson()));
        report.quality = *quality;
    }
    SPILLWAY_TRY(writer->publish());
    report.seconds = elapsed();
    if (options.progress) (void)tell("done", 1.0, "");
    return report;
}

}  // namespace spillway::compress
