#include "core/runtime/llama_session.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/model/rope_scaling.h"
#include "core/plan/model_tensors.h"
#include "core/plan/session_memory.h"
#include "core/trace/trace.h"
#include "gpu/host.h"

namespace spillway {

using plan::resolveContext;


uint64_t LlamaSession::workingBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kvType,
                                    bool everyLogits)
{
    return plan::sessionWorkingBytes(c, contextLength, batch, kvType, everyLogits);
}

uint64_t LlamaSession::kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType, int batch)
{
    return plan::kvCacheBytes(c, contextLength, kvType, batch);
}

Result<std::unique_ptr<LlamaSession>> LlamaSession::create(const LlamaModel& model, gpu::Device& device,
                                                           int contextLength)
{
    SessionOptions o;
    o.contextLength = contextLength;
    return create(model, device, o);
}

Result<std::unique_ptr<LlamaSession>> LlamaSession::create(const LlamaModel& model, gpu::Device& device,
                                                           const SessionOptions& options)
{
    const LlamaConfig& c = model.config();
    const int ctx = resolveContext(c, options.contextLength);
    if (int(options.kvType) >= gpu::kKvTypeCount)
        return makeError(ErrorCode::InvalidArgument, "unknown KV cache type " + std::to_string(int(options.kvType)));
    if (ctx < 1 || ctx > (1 << 22))
        return makeError(ErrorCode::InvalidArgument, "context length " + std::to_string(ctx) + " is out of range");
    if (options.batch < 1 || options.batch > 4096)
        return makeError(ErrorCode::InvalidArgument, "batch " + std::to_string(options.batch) + " is out of range");
    for (const ModelTensor& t : model.tensors())
        if (t.dims.size() == 2 && !device.supports(t.type))
            return makeError(ErrorCode::UnsupportedModel,
                             model.path() + ": tensor '" + t.name + "' is " + packageFormatName(t.type) + ", which the " +
                                 device.info().backend + " device cannot compute on (run it on the CPU backend, or "
                                 "compress the model for this one: spillway-cli compress --backend " +
                                 device.info().backend + ")");
    // The ops beyond Llama's that the architecture needs, against what this backend has.
    const gpu::DeviceCapabilities& caps = device.info().caps;
    for (auto [needed, has, what] : {std::tuple{c.attentionSinks, caps.attentionSinks, "attention sinks"},
                                     std::tuple{c.slidingWindow > 0, caps.slidingWindow, "sliding-window attention"},
                                     std::tuple{c.clampedSwiglu, caps.clampedSwiglu, "the clamped SwiGLU"},
                                     std::tuple{c.hybrid(), caps.deltaNet, "Gated DeltaNet (linear attention)"},
                                     std::tuple{c.attentionOutputGate, caps.sigmoidGate, "gated attention"}})
        if (needed && !has)
            return makeError(ErrorCode::UnsupportedModel,
                             model.path() + ": " + c.architecture + " needs " + what + ", which the " +
                                 device.info().backend + " device does not have yet (run it on the CPU backend: "
                                 "--backend cpu)");
    if (c.moe() && options.neuronCache.capacity > 0)
        return makeError(ErrorCode::UnsupportedModel,
                         model.path() + ": the neuron cache (activation-sparse FFN) does not take a mixture of "
                                        "experts; run it without --neuron-cache (its experts are its sparsity)");
    auto s = std::unique_ptr<LlamaSession>(new LlamaSession(model, device));
    s->m_ctx = ctx;
    s->m_batch = options.batch;
    s->m_options = options;
    s->m_rope.rotaryDims = c.ropeDims;
    s->m_rope.base = c.ropeBase;
    s->m_rope.freqScale = c.ropeFreqScale;
    s->m_rope.neox = c.ropeNeox;
    const ModelTensor* ropeFreqs = model.tensor("rope_freqs.weight");
    if (ropeFreqs && !c.learnedPositions) {
        // llama.cpp's GGUFs of Llama 3.1+ carry the scaling as these divisors (no metadata keys).
        const int pairs = c.ropeDims / 2;
        if (ropeFreqs->type != gpu::DType::F32 || ropeFreqs->dims.size() != 1 || ropeFreqs->dims[0] != pairs)
            return makeError(ErrorCode::ModelFileInvalid, model.path() + ": rope_freqs.weight should be " +
                                                              std::to_string(pairs) + " F32 values");
        auto b = device.allocate(size_t(pairs) * sizeof(float));
        if (!b) return b.error();
        device.upload(b->data(), ropeFreqs->data, size_t(pairs) * sizeof(float));
        s->m_ropeFactors = std::move(b.value());
        s->m_rope.freqFactors = s->m_ropeFactors.as<float>();
    } else if (std::vector<float> factors = ropeFrequencyFactors(c); !factors.empty()) {
        // Llama 3's or YaRN's scaling (core/model/rope_scaling.h).
        auto b = device.allocate(factors.size() * sizeof(float));
        if (!b) return b.error();
        device.upload(b->data(), factors.data(), factors.size() * sizeof(float));
        s->m_ropeFactors = std::move(b.value());
        s->m_rope.freqFactors = s->m_ropeFactors.as<float>();
    }

    KvCache::Buffers kv;
    gpu::Buffer* buffers[] = {&s->m_x,         &s->m_xb,      &s->m_q,      &s->m_att,
                              &s->m_scores,    &s->m_hb,      &s->m_hb2,    &s->m_logits,
                              &kv.keys,        &kv.values,    &kv.keyScales, &kv.valueScales,
                              &kv.newKeys,     &kv.newValues, &s->m_stateBuffer};
    const plan::SessionBuffers needs = plan::sessionBuffers(c, ctx, s->m_batch, options.kvType, options.everyLogits);
    for (size_t i = 0; i < needs.size(); ++i) {
        if (needs[i] == 0) continue;
        auto b = device.allocate(needs[i]);
        if (!b) return b.error();
        *buffers[i] = std::move(b.value());
    }
    s->m_kv = KvCache(c, ctx, s->m_batch, options.kvType, std::move(kv));
    if (c.hybrid() || s->m_kv.rings()) {
        // Linear layers' states and sliding-window rings: state that cannot be cut back.
        if (options.stateSnapshotInterval < 1)
            return makeError(ErrorCode::InvalidArgument, "the recurrent state's snapshot interval must be positive");
        const int snapshots =
            plan::stateSnapshotCount(plan::stateSnapshotEach(c, ctx, s->m_batch, options.kvType), options.stateSnapshots);
        s->m_state = RecurrentState(c, device, std::move(s->m_stateBuffer), snapshots, &s->m_kv);
        s->m_history.assign(size_t(ctx), 0);
    }

    plan::Placement placement;
    if (options.placement) {
        placement = *options.placement;
    } else {
        placement = plan::uniformPlacement(model, plan::Tier::Device);
        // On a device that computes on host memory the weights could be used straight from the
        // mapped file, but its 4 KiB pages cost about a quarter of the decode speed against the
        // 2 MiB pages of device buffers (TLB misses; the prefetchers stop at page ends): copy
        // them when they take less than half the free memory, map them otherwise.
        const uint64_t weights = placement.bytesOn(plan::Tier::Device);
        placement.mapInPlace = device.info().caps.hostPointers && weights > device.info().freeMemory / 2;
    }
    StreamerOptions streaming = options.streamer;
    for (std::string& name : SparseFfn::servedTensors(model, options.neuronCache))
        streaming.notStreamed.push_back(std::move(name));
    // Experts on the SSD: read as tokens choose them, not streamed as whole stacks.
    std::vector<int> expertLayers;
    if (options.experts.enabled) {
        expertLayers = ExpertCache::servedLayers(model, placement);
        for (std::string& name : ExpertCache::servedTensors(model, placement))
            streaming.notStreamed.push_back(std::move(name));
    }
    auto streamer = WeightStreamer::create(model, device, placement, streaming);
    if (!streamer) return streamer.error();
    s->m_streamer = std::move(streamer.value());
    if (!device.info().caps.hostPointers)
        s->m_hostLogits = std::make_unique<float[]>(size_t(c.vocabSize) * size_t(options.everyLogits ? s->m_batch : 1));
    s->m_split = std::make_unique<RowSplit>(device, *s->m_streamer,
                                            size_t(std::max({c.dim, c.qDim(), c.hiddenFloats(), c.vocabSize})));
    if (options.neuronCache.capacity > 0) {
        SparseFfn::Shared shared;
        shared.hb = s->m_hb.as<float>();
        shared.hb2 = s->m_hb2.as<float>();
        shared.xb = s->m_xb.as<float>();
        shared.matvec = s->m_split.get();
        shared.ioQueueDepth = options.streamer.ioQueueDepth;
        shared.ioChunkBytes = options.streamer.ioChunkBytes;
        shared.trace = options.streamer.trace;
        auto sparse = SparseFfn::create(model, device, options.neuronCache, shared);
        if (!sparse) return sparse.error();
        s->m_sparse = std::move(*sparse);
    }
    LayerStep::Buffers step;
    step.xb = s->m_xb.as<float>();
    step.q = s->m_q.as<float>();
    step.att = s->m_att.as<float>();
    step.hb = s->m_hb.as<float>();
    step.hb2 = s->m_hb2.as<float>();
    step.scores = s->m_scores.as<float>();
    s->m_step = std::make_unique<LayerStep>(c, device, step, s->m_kv, s->m_rope, *s->m_split, s->m_sparse.get());
    if (s->m_state.active()) s->m_step->setRecurrentState(&s->m_state);
    if (options.drawnRouting) {
        if (!options.drawnRouting->fits(c) || options.drawnRouting->empty())
            return makeError(ErrorCode::InvalidArgument,
                             "the routing to draw from is not one of this model's shape (layers, experts, experts used)");
        s->m_step->drawRouting(*options.drawnRouting, 1);
    }
    if (!expertLayers.empty()) {
        ExpertCacheOptions eo = options.experts;
        eo.ioQueueDepth = options.streamer.ioQueueDepth;
        eo.ioChunkBytes = options.streamer.ioChunkBytes;
        eo.trace = options.streamer.trace;
        if (eo.experts.empty()) eo.experts = placement.experts;  // RAM and first slots, as planned
        auto experts = ExpertCache::create(model, device, std::move(expertLayers), eo);
        if (!experts) return experts.error();
        s->m_experts = std::move(*experts);
        s->m_step->setExpertCache(s->m_experts.get());
    }
    return s;
}

LlamaSession::LlamaSession(const LlamaModel& model, gpu::Device& device) : m_model(model), m_device(device) {}
LlamaSession::~LlamaSession() = default;

Result<const float*> LlamaSession::forward(std::span<const int32_t> tokens, int pos)
{
    const LlamaConfig& c = m_model.config();
    if (tokens.empty()) return makeError(ErrorCode::InvalidArgument, "forward: no tokens");
    if (pos < 0 || pos + int64_t(tokens.size()) > m_ctx)
        return makeError(ErrorCode::InvalidArgument,
                         "positions " + std::to_string(pos) + ".." + std::to_string(pos + tokens.size() - 1) +
                             " do not fit the context of " + std::to_string(m_ctx) + " tokens");
    for (int32_t t : tokens)
        if (t < 0 || t >= c.vocabSize)
            return makeError(ErrorCode::InvalidArgument, "token id " + std::to_string(t) + " is out of range");
    if (m_options.everyLogits && tokens.size() > size_t(m_batch))
        return makeError(ErrorCode::InvalidArgument, "forward: every token's logits are kept for at most " +
                                                         std::to_string(m_batch) + " tokens per call, not " +
                                                         std::to_string(tokens.size()));
    if (m_state.active()) {
        // The recurrent state holds [0, position()): go back to pos from a snapshot where it is
        // past it (or lost), then run the ids between again.
        if (pos > m_state.position() && m_state.position() >= 0)
            return makeError(ErrorCode::InvalidArgument,
                             "forward: position " + std::to_string(pos) + " follows positions not run yet (the "
                             "recurrent state holds " + std::to_string(m_state.position()) + " tokens)");
        if (pos != m_state.position() && m_state.resumableAt(pos)) {
            m_state.resumeAt(pos);  // rings that still hold the window before pos
        } else if (pos != m_state.position()) {  // from a snapshot
            const int from = m_state.restoreAtOrBefore(pos);
            for (int done = from; done < pos;) {
                const int n = std::min(pos - done, m_batch);
                auto rerun = forwardBatch({m_history.data() + done, size_t(n)}, done);
                if (!rerun) return rerun;
                done += n;
                m_rerunTokens += uint64_t(n);
            }
        }
        m_state.dropAfter(pos);
        std::copy(tokens.begin(), tokens.end(), m_history.begin() + pos);
        // A long prompt leaves a snapshot every stateSnapshotInterval positions (the newest kept).
        const int every = m_options.stateSnapshotInterval, end = pos + int(tokens.size());
        for (int at = (pos / every + 1) * every; at <= end; at += every) m_state.want(at);
    }
    const float* last = nullptr;  // (no error value built up front: decoding allocates nothing)
    for (size_t done = 0; done < tokens.size();) {
        const size_t n = std::min(tokens.size() - done, size_t(m_batch));
        auto logits = forwardBatch(tokens.subspan(done, n), pos + int(done));
        if (!logits) return logits;
        last = *logits;
        done += n;
    }
    return last;
}

Result<const float*> LlamaSession::forwardBatch(std::span<const int32_t> tokens, int pos)
{
    if (!m_state.active()) return runBatch(tokens, pos);
    // A failed pass leaves the recurrent state part-way: unknown until put back from a snapshot.
    auto logits = runBatch(tokens, pos);
    m_state.finishPass(bool(logits));
    m_state.passRan(pos, int(tokens.size()), bool(logits));
    return logits;
}

Result<const float*> LlamaSession::runBatch(std::span<const int32_t> tokens, int pos)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    WeightStreamer& ws = *m_streamer;
    trace::Recorder* rec = m_options.streamer.trace;
    const uint32_t pass = m_pass++;
    ws.setPass(pass);
    if (m_sparse) m_sparse->setPass(pass);
    if (m_experts) m_experts->setPass(pass);
    const size_t dim = size_t(c.dim);
    const int n = int(tokens.size());
    float* x = m_x.as<float>();
    if (!ws.projectIn().data) {
        for (int i = 0; i < n; ++i) ws.embedding(tokens[size_t(i)], x + size_t(i) * dim);
    } else {
        // opt-350m: narrower embeddings, lifted to the residual stream by proj_in.
        float* row = m_xb.as<float>();
        for (int i = 0; i < n; ++i) {
            ws.embedding(tokens[size_t(i)], row);
            d.matvec(ws.projectIn(), row, x + size_t(i) * dim);
        }
    }
    if (c.learnedPositions) {
        // OPT: x += position_embd[pos + offset] (a row of the resident table, into xb first).
        float* row = m_xb.as<float>();
        for (int i = 0; i < n; ++i) {
            d.getRow(ws.positionEmbedding(), int64_t(pos + i + c.positionOffset), row);
            d.add(x + size_t(i) * dim, row, c.dim);
        }
    }

    // On a GPU the layers' compute is timed by the device's own marks (its ops run after they
    // return): one as the token starts and one after each layer and the head. The spans are
    // recorded once the head is synchronized; a device without marks is timed by the host.
    const bool deviceClock = rec && !d.info().caps.hostPointers;
    if (deviceClock) {
        m_issuedNs.assign(size_t(c.nLayers) + 1, 0);
        m_returnedNs.assign(size_t(c.nLayers) + 1, 0);
        d.mark();
    }
    const char* layerName = n > 1 ? "prompt layer" : "layer";
    for (int l = 0; l < c.nLayers; ++l) {
        auto L = ws.acquireLayer(l);
        if (!L) return L.error();
        const uint64_t t0 = trace::nowNs();
        if (deviceClock) m_issuedNs[size_t(l)] = t0;
        if (!m_sparse && m_streamer->hostRows().empty()) {
            if (Status s = m_step->run(**L, l, x, n, pos); !s && m_ffnError) m_ffnError = std::move(s);
        } else {
            for (int i = 0; i < n; ++i)
                if (Status s = m_step->run(**L, l, x + size_t(i) * dim, 1, pos + i); !s && m_ffnError)
                    m_ffnError = std::move(s);
        }
        if (deviceClock) d.mark();
        ws.release(l);  // synchronizes when the unit's slot is to be reused
        if (!m_ffnError) {
            Status failed = std::move(m_ffnError);
            m_ffnError = Status{};
            return failed.error();
        }
        if (deviceClock) m_returnedNs[size_t(l)] = trace::nowNs();
        else if (rec) rec->record({trace::Lane::DeviceCompute, l, layerName, 0, t0, trace::nowNs(), pass});
    }
    auto head = ws.acquireHead();
    if (!head) return head.error();
    const uint64_t t0 = trace::nowNs();
    // The head: on the last token, or on every token (everyLogits: row i of the logits).
    const int first = m_options.everyLogits ? 0 : n - 1;
    const size_t vocab = size_t(c.vocabSize);
    std::vector<gpu::MatvecJob>& headJobs = m_batchJobs;
    headJobs.clear();
    for (int i = first; i < n; ++i) {
        float* xi = x + size_t(i) * dim;
        if (ws.outputNorm()) m_step->norm(xi, ws.outputNorm(), ws.outputNormBias(), xi);
        const float* headIn = xi;
        if (ws.projectOut().data) {
            float* xb = m_xb.as<float>() + size_t(i - first) * LayerStep::xbFloats(c);
            d.matvec(ws.projectOut(), xi, xb);
            headIn = xb;
        }
        headJobs.push_back({**head, headIn, m_logits.as<float>() + size_t(i - first) * vocab});
    }
    if (m_streamer->hostRows().empty()) {
        matvec(headJobs);
    } else {
        for (const gpu::MatvecJob& job : headJobs) matvec({&job, 1});  // a split head: a token at a time
    }
    if (deviceClock) {
        m_issuedNs[size_t(c.nLayers)] = t0;
        d.mark();
    }
    d.synchronize();
    ws.release(c.nLayers);
    if (Status failed = d.lastError(); !failed) return failed.error();  // e.g. a lost GPU
    if (deviceClock) {
        m_returnedNs[size_t(c.nLayers)] = trace::nowNs();
        recordDeviceSpans(layerName, pass);
    } else if (rec) {
        rec->record({trace::Lane::DeviceCompute, -1, "head", 0, t0, trace::nowNs(), pass});
    }
    if (m_hostLogits) {
        d.download(m_hostLogits.get(), m_logits.data(), size_t(n - first) * vocab * sizeof(float));
        return static_cast<const float*>(m_hostLogits.get());
    }
    return static_cast<const float*>(m_logits.as<float>());
}

// The layers' and the head's spans from the device's marks: mark 0 as the token started, mark
// i + 1 after layer i (the head last). A span starts at the previous mark, or when its ops were
// issued if the device waited for them (for weights still on their way), and ends at its mark.
void LlamaSession::recordDeviceSpans(const char* layerName, uint32_t pass)
{
    trace::Recorder* rec = m_options.streamer.trace;
    const size_t units = m_issuedNs.size();  // layers and the head
    m_marksNs.resize(units + 1);
    const size_t got = m_device.takeMarks(m_marksNs);
    const int layers = int(units) - 1;
    if (got != units + 1) {  // a device without marks: the host's clock, from issue to return
        for (size_t u = 0; u < units; ++u)
            rec->record({trace::Lane::DeviceCompute, int(u) < layers ? int(u) : -1,
                         int(u) < layers ? layerName : "head", 0, m_issuedNs[u], m_returnedNs[u], pass});
        return;
    }
    for (size_t u = 0; u < units; ++u) {
        const uint64_t end = m_marksNs[u + 1];
        const uint64_t start = std::min(end, std::max(m_marksNs[u], m_issuedNs[u]));
        rec->record({trace::Lane::DeviceCompute, int(u) < layers ? int(u) : -1, int(u) < layers ? layerName : "head",
                     0, start, end, pass});
    }
}

}  // namespace spillway
