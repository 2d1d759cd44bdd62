#include "core/runtime/llama_session.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/plan/model_tensors.h"
#include "core/plan/session_memory.h"
#include "core/trace/trace.h"
#include "gpu/host.h"

namespace spillway {

using plan::resolveContext;

namespace {

// One token's xb: the normed input, the attention output projected, or an embedding row.
uint64_t xbFloats(const LlamaConfig& c) { return uint64_t(std::max({c.dim, c.qDim(), c.embeddingDim()})); }

}  // namespace

uint64_t LlamaSession::workingBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kvType,
                                    bool everyLogits)
{
    return plan::sessionWorkingBytes(c, contextLength, batch, kvType, everyLogits);
}

uint64_t LlamaSession::kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType)
{
    return plan::kvCacheBytes(c, contextLength, kvType);
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
    } else if (c.ropeFactor > 0.0f) {
        // Llama 3: wavelengths longer than original_context / low_freq_factor are slowed by
        // the factor, shorter than original_context / high_freq_factor kept, a ramp between
        // (as transformers' _compute_llama3_parameters and llama.cpp's rope_freqs).
        const int pairs = c.ropeDims / 2;
        std::vector<float> factors(size_t(std::max(pairs, 1)), 1.0f);
        const double lowWavelen = c.ropeOriginalContext / double(c.ropeLowFreqFactor);
        const double highWavelen = c.ropeOriginalContext / double(c.ropeHighFreqFactor);
        for (int i = 0; i < pairs; ++i) {
            const double freq = std::pow(double(c.ropeBase), -2.0 * i / c.ropeDims);
            const double wavelen = 2.0 * M_PI / freq;
            if (wavelen > lowWavelen) {
                factors[size_t(i)] = c.ropeFactor;
            } else if (wavelen >= highWavelen) {
                const double smooth = (c.ropeOriginalContext / wavelen - c.ropeLowFreqFactor) /
                                      (c.ropeHighFreqFactor - c.ropeLowFreqFactor);
                factors[size_t(i)] = float(1.0 / ((1.0 - smooth) / c.ropeFactor + smooth));
            }
        }
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
                              &kv.newKeys,     &kv.newValues};
    const plan::SessionBuffers needs = plan::sessionBuffers(c, ctx, s->m_batch, options.kvType, options.everyLogits);
    for (size_t i = 0; i < needs.size(); ++i) {
        if (needs[i] == 0) continue;
        auto b = device.allocate(needs[i]);
        if (!b) return b.error();
        *buffers[i] = std::move(b.value());
    }
    s->m_kv = KvCache(c, ctx, options.kvType, std::move(kv));

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
    for (std::string& name : neuronCacheTensors(model, options.neuronCache)) streaming.notStreamed.push_back(std::move(name));
    auto streamer = WeightStreamer::create(model, device, placement, streaming);
    if (!streamer) return streamer.error();
    s->m_streamer = std::move(streamer.value());
    if (!device.info().caps.hostPointers) {
        s->m_hostLogits = std::make_unique<float[]>(size_t(c.vocabSize) * size_t(options.everyLogits ? s->m_batch : 1));
        if (s->m_streamer->hasSplits()) {
            const size_t widest = size_t(std::max({c.dim, c.qDim(), c.ffnDim, c.vocabSize}));
            // Two cores stay free for the loader's issuer and completer threads: the pool's
            // workers spin between dispatches and would otherwise delay the next layer's copies.
            s->m_hostCpu = gpu::createCpuDevice(std::max(1, gpu::cpu::onlineCores() - 2));
            s->m_hostX = std::make_unique<float[]>(widest);
            s->m_hostY = std::make_unique<float[]>(widest);
        }
    }
    if (options.neuronCache.capacity > 0) SPILLWAY_TRY(s->createNeuronCache());
    return s;
}



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

void LlamaSession::matvec(std::span<const gpu::MatvecJob> jobs)
{
    const auto& splits = m_streamer->hostRows();
    if (splits.empty()) {
        m_device.matvec(jobs);
        return;
    }
    // At most 3 jobs per call (q, k, v), each with at most one host part.
    gpu::MatvecJob all[8];
    size_t n = 0;
    const HostRows* hostParts[4] = {};
    const gpu::MatvecJob* hostJobs[4] = {};
    size_t nHost = 0;
    for (const auto& j : jobs) {
        const HostRows* h = nullptr;
        for (const auto& sp : splits)
            if (sp.deviceData == j.w.data) h = &sp;
        if (!h || h->deviceRows > 0) all[n++] = j;
        if (h && nHost < 4) {
            hostParts[nHost] = h;
            hostJobs[nHost++] = &j;
        }
    }
    if (m_device.info().caps.hostPointers) {
        // The device computes on host memory: the host rows join the same dispatch.
        for (size_t i = 0; i < nHost; ++i)
            all[n++] = {hostParts[i]->host, hostJobs[i]->x, hostJobs[i]->y + hostParts[i]->deviceRows};
        m_device.matvec({all, n});
        return;
    }
    if (nHost == 0) {
        m_device.matvec(jobs);
        return;
    }
    // x to the host first, then the device's rows (asynchronous on a GPU) while the CPU computes
    // the others from pinned RAM; their results go up behind.
    for (size_t i = 0; i < nHost; ++i) {
        const gpu::MatvecJob& j = *hostJobs[i];
        const HostRows& h = *hostParts[i];
        m_device.download(m_hostX.get(), j.x, size_t(h.host.cols) * sizeof(float));
        if (i == 0 && n) m_device.matvec({all, n});
        m_hostCpu->matvec(h.host, m_hostX.get(), m_hostY.get());
        m_device.upload(j.y + h.deviceRows, m_hostY.get(), size_t(h.host.rows) * sizeof(float));
    }
}

void LlamaSession::shiftedRelu(float* v, int n, float shift)
{
    gpu::PointwiseArgs relu;
    relu.op = gpu::PointwiseOp::ShiftedRelu;
    relu.x = relu.out = v;
    relu.n = n;
    relu.shift = shift;
    m_device.pointwise(relu);
}

void LlamaSession::shiftedNormRelu(float* xb)
{
    const LlamaConfig& c = m_model.config();
    if (c.normReluShift >= 0.0f) shiftedRelu(xb, c.dim, c.normReluShift);
}

// n tokens (at positions pos...) through one layer, step by step: each matrix gets every token's
// job in one dispatch (a device that groups jobs on the same matrix reads it once for all), and
// attention runs token by token in order. A token goes through the same operations in the same
// order whatever n is, so a prompt batch gives the results of one token at a time, bit for bit.
// The neuron cache and HeteGen's splits take one token per call (n = 1).
//   x += wo · attention(rope(wq·n), rope(wk·n), wv·n), n = norm(x)    (pre-norm; post-norm
//   x += down · (act(gate·n) ⊙ up·n), n = norm(x)                      norms after the adds)
void LlamaSession::layerStep(const LlamaLayerWeights& L, int layer, float* x, int n, int pos)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    const size_t dim = size_t(c.dim), qDim = size_t(c.qDim());
    const size_t ffn = size_t(c.ffnDim), xbStride = size_t(xbFloats(c));
    auto xOf = [&](int i) { return x + size_t(i) * dim; };
    auto xbOf = [&](int i) { return m_xb.as<float>() + size_t(i) * xbStride; };
    auto qOf = [&](int i) { return m_q.as<float>() + size_t(i) * qDim; };
    auto attOf = [&](int i) { return m_att.as<float>() + size_t(i) * qDim; };
    auto hbOf = [&](int i) { return m_hb.as<float>() + size_t(i) * ffn; };
    auto hb2Of = [&](int i) { return m_hb2.as<float>() + size_t(i) * ffn; };
    // An F32 cache takes the tokens' K and V straight from the projections; other types get
    // them in fp32 scratch, and the attention op converts them into the cache (kv_cache.h).
    auto kOf = [&](int i) { return m_kv.newKey(layer, pos, i); };
    auto vOf = [&](int i) { return m_kv.newValue(layer, pos, i); };
    std::vector<gpu::MatvecJob>& jobs = m_batchJobs;

    // A block's input is norm(x) in xb (pre-norm) or x itself (post-norm: normed after the add).
    auto inputOf = [&](int i) -> const float* { return c.postNorm ? xOf(i) : xbOf(i); };
    auto normInputs = [&](const float* weight, const float* bias) {
        if (c.postNorm) return;
        for (int i = 0; i < n; ++i) {
            norm(xOf(i), weight, bias, xbOf(i));
            shiftedNormRelu(xbOf(i));
        }
    };

    // Attention.
    normInputs(L.attnNorm, L.attnNormBias);
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.wq, inputOf(i), qOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.wk, inputOf(i), kOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.wv, inputOf(i), vOf(i)});
    matvec(jobs);
    // A neuron cache whose predictors read the attention's input starts this layer's reads now.
    if (m_sparse)
        if (Status s = startNeuronFetch(layer, inputOf(0)); !s && m_ffnError) m_ffnError = std::move(s);
    for (int i = 0; i < n; ++i) {
        float* q = qOf(i);
        float* k = kOf(i);
        float* v = vOf(i);
        if (L.qBias) d.add(q, L.qBias, c.qDim());
        if (L.kBias) d.add(k, L.kBias, c.kvDim());
        if (L.vBias) d.add(v, L.vBias, c.kvDim());
        if (L.qNorm)  // Qwen3: each head normalized on its own
            for (int h = 0; h < c.nHeads; ++h) d.rmsnorm(q + h * c.headDim, L.qNorm, q + h * c.headDim, c.headDim, c.normEps);
        if (L.kNorm)
            for (int h = 0; h < c.nKvHeads; ++h) d.rmsnorm(k + h * c.headDim, L.kNorm, k + h * c.headDim, c.headDim, c.normEps);
        if (!c.learnedPositions) {
            d.rope(q, c.nHeads, c.headDim, pos + i, m_rope);
            d.rope(k, c.nKvHeads, c.headDim, pos + i, m_rope);
        }
        if (c.kvCacheStep > 0.0f) {
            // An int8 cache with one fixed scale: the values it could hold, kept as floats.
            gpu::PointwiseArgs snap;
            snap.op = gpu::PointwiseOp::SnapToGrid;
            snap.n = c.kvDim();
            snap.step = c.kvCacheStep;
            snap.x = snap.out = k;
            d.pointwise(snap);
            snap.x = snap.out = v;
            d.pointwise(snap);
        }
    }
    for (int i = 0; i < n; ++i) {
        gpu::AttentionArgs a;
        m_kv.describe(a, layer, pos, i);
        a.q = qOf(i);
        a.out = attOf(i);
        a.scores = m_scores.as<float>();
        a.nHeads = c.nHeads;
        a.nKvHeads = c.nKvHeads;
        a.headDim = c.headDim;
        a.nPos = pos + i + 1;
        a.scale = 1.0f / std::sqrt(float(c.headDim));
        d.attention(a);
    }
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.wo, attOf(i), xbOf(i)});
    matvec(jobs);
    for (int i = 0; i < n; ++i) {
        if (L.oBias) d.add(xbOf(i), L.oBias, c.dim);
        d.add(xOf(i), xbOf(i), c.dim);
        if (c.postNorm) norm(xOf(i), L.attnNorm, L.attnNormBias, xOf(i));
    }

    // FFN.
    normInputs(L.ffnNorm, L.ffnNormBias);
    if (m_sparse) {
        if (Status s = sparseFfnBlock(L, layer, inputOf(0), xOf(0)); !s && m_ffnError) m_ffnError = std::move(s);
        if (c.postNorm) norm(xOf(0), L.ffnNorm, L.ffnNormBias, xOf(0));
        return;
    }
    jobs.clear();
    if (c.ffnGated)
        for (int i = 0; i < n; ++i) jobs.push_back({L.gate, inputOf(i), hbOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.up, inputOf(i), c.ffnGated ? hb2Of(i) : hbOf(i)});
    matvec(jobs);
    for (int i = 0; i < n; ++i) {
        if (!c.ffnGated) {
            if (L.upBias) d.add(hbOf(i), L.upBias, c.ffnDim);
            shiftedRelu(hbOf(i), c.ffnDim, c.ffnReluShift);
            continue;
        }
        if (L.upBias) d.add(hb2Of(i), L.upBias, c.ffnDim);
        if (c.ffnRelu) {
            gpu::PointwiseArgs glu;
            glu.op = gpu::PointwiseOp::ShiftedReluGlu;
            glu.x = hbOf(i);
            glu.y = hb2Of(i);
            glu.out = hbOf(i);
            glu.n = c.ffnDim;
            glu.shift = c.ffnReluShift;
            d.pointwise(glu);
        } else {
            d.swiglu(hbOf(i), hb2Of(i), hbOf(i), c.ffnDim);
        }
    }
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.down, hbOf(i), xbOf(i)});
    matvec(jobs);
    for (int i = 0; i < n; ++i) {
        if (L.downBias) d.add(xbOf(i), L.downBias, c.dim);
        d.add(xOf(i), xbOf(i), c.dim);
        if (c.postNorm && !c.ffnGated) norm(xOf(i), L.ffnNorm, L.ffnNormBias, xOf(i));
    }
}

void LlamaSession::norm(const float* x, const float* weight, const float* bias, float* out)
{
    const LlamaConfig& c = m_model.config();
    if (c.layerNorm)
        m_device.layernorm(x, weight, bias, out, c.dim, c.normEps);
    else
        m_device.rmsnorm(x, weight, out, c.dim, c.normEps);
}

Result<const float*> LlamaSession::forwardBatch(std::span<const int32_t> tokens, int pos)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    WeightStreamer& ws = *m_streamer;
    trace::Recorder* rec = m_options.streamer.trace;
    const uint32_t pass = m_pass++;
    ws.setPass(pass);
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
            layerStep(**L, l, x, n, pos);
        } else {
            for (int i = 0; i < n; ++i) layerStep(**L, l, x + size_t(i) * dim, 1, pos + i);
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
        if (ws.outputNorm()) norm(xi, ws.outputNorm(), ws.outputNormBias(), xi);
        const float* headIn = xi;
        if (ws.projectOut().data) {
            float* xb = m_xb.as<float>() + size_t(i - first) * size_t(xbFloats(c));
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
