#include "core/runtime/layer_step.h"

#include <algorithm>
#include <cmath>

#include "core/runtime/row_split.h"
#include "core/runtime/sparse_ffn.h"

namespace spillway {

namespace {

// Softmax in place as ggml's: exp(v - max), summed in double, times 1 / sum.
void softmax(float* v, int n)
{
    const float top = *std::max_element(v, v + n);
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
        v[k] = std::exp(v[k] - top);
        sum += v[k];
    }
    const float inv = float(1.0 / sum);
    for (int k = 0; k < n; ++k) v[k] *= inv;
}

}  // namespace


LayerStep::LayerStep(const LlamaConfig& config, gpu::Device& device, const Buffers& buffers, const KvCache& kv,
                     const gpu::RopeParams& rope, RowSplit& matvec, SparseFfn* sparse)
    : m_c(config), m_device(device), m_buf(buffers), m_kv(kv), m_rope(rope), m_matvec(matvec), m_sparse(sparse)
{
    if (config.moe()) m_expertCounts.assign(size_t(config.nLayers) * size_t(config.nExperts), 0);
}

size_t LayerStep::xbFloats(const LlamaConfig& c) { return size_t(std::max({c.dim, c.qDim(), c.embeddingDim()})); }

void LayerStep::shiftedRelu(gpu::Device& device, float* v, int n, float shift)
{
    gpu::PointwiseArgs relu;
    relu.op = gpu::PointwiseOp::ShiftedRelu;
    relu.x = relu.out = v;
    relu.n = n;
    relu.shift = shift;
    device.pointwise(relu);
}

Status LayerStep::run(const LlamaLayerWeights& L, int layer, float* x, int n, int pos)
{
    const LlamaConfig& c = m_c;
    Status failed;
    gpu::Device& d = m_device;
    const size_t dim = size_t(c.dim), qDim = size_t(c.qDim());
    const size_t ffn = size_t(c.hiddenFloats()), xbStride = size_t(xbFloats(c));
    auto xOf = [&](int i) { return x + size_t(i) * dim; };
    auto xbOf = [&](int i) { return m_buf.xb + size_t(i) * xbStride; };
    auto qOf = [&](int i) { return m_buf.q + size_t(i) * qDim; };
    auto attOf = [&](int i) { return m_buf.att + size_t(i) * qDim; };
    auto hbOf = [&](int i) { return m_buf.hb + size_t(i) * ffn; };
    auto hb2Of = [&](int i) { return m_buf.hb2 + size_t(i) * ffn; };
    // An F32 cache takes the tokens' K and V straight from the projections; other types get
    // them in fp32 scratch, and the attention op converts them into the cache (kv_cache.h).
    auto kOf = [&](int i) { return m_kv.newKey(layer, pos, i); };
    auto vOf = [&](int i) { return m_kv.newValue(layer, pos, i); };
    std::vector<gpu::MatvecJob>& jobs = m_jobs;

    // A block's input is norm(x) in xb (pre-norm) or x itself (post-norm: normed after the add).
    auto inputOf = [&](int i) -> const float* { return c.postNorm ? xOf(i) : xbOf(i); };
    auto normInputs = [&](const float* weight, const float* bias) {
        if (c.postNorm) return;
        for (int i = 0; i < n; ++i) {
            norm(xOf(i), weight, bias, xbOf(i));
            if (c.normReluShift >= 0.0f) shiftedRelu(d, xbOf(i), c.dim, c.normReluShift);  // relu-llama
        }
    };

    // Attention, or a linear layer's mixer.
    normInputs(L.attnNorm, L.attnNormBias);
    if (c.linearLayer(layer)) {
        if (m_sparse) failed = m_sparse->startFetch(layer, inputOf(0));
        linearAttention(L, layer, x, n, pos);
    } else {
        jobs.clear();
        // A gated attention's q projection holds each head's gate beside it: into hb, then parted.
        for (int i = 0; i < n; ++i) jobs.push_back({L.wq, inputOf(i), c.attentionOutputGate ? hbOf(i) : qOf(i)});
        for (int i = 0; i < n; ++i) jobs.push_back({L.wk, inputOf(i), kOf(i)});
        for (int i = 0; i < n; ++i) jobs.push_back({L.wv, inputOf(i), vOf(i)});
        m_matvec.run(jobs);
        // A neuron cache whose predictors read the attention's input starts this layer's reads now.
        if (m_sparse) failed = m_sparse->startFetch(layer, inputOf(0));
        if (c.attentionOutputGate)
            for (int i = 0; i < n; ++i) splitGatedQuery(hbOf(i), qOf(i), hb2Of(i));
        for (int i = 0; i < n; ++i) {
            float* q = qOf(i);
            float* k = kOf(i);
            float* v = vOf(i);
            if (L.qBias) d.add(q, L.qBias, c.qDim());
            if (L.kBias) d.add(k, L.kBias, c.kvDim());
            if (L.vBias) d.add(v, L.vBias, c.kvDim());
            if (L.qNorm && c.qkNormWhole) {  // OLMoE: the whole projection normalized
                d.rmsnorm(q, L.qNorm, q, c.qDim(), c.normEps);
                d.rmsnorm(k, L.kNorm, k, c.kvDim(), c.normEps);
            } else if (L.qNorm) {  // Qwen3: each head normalized on its own
                for (int h = 0; h < c.nHeads; ++h) d.rmsnorm(q + h * c.headDim, L.qNorm, q + h * c.headDim, c.headDim, c.normEps);
                if (L.kNorm)
                    for (int h = 0; h < c.nKvHeads; ++h)
                        d.rmsnorm(k + h * c.headDim, L.kNorm, k + h * c.headDim, c.headDim, c.normEps);
            }
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
        {
            // The batch's queries at once (causal: token i sees positions up to pos + i).
            gpu::AttentionArgs a;
            m_kv.describe(a, layer, pos, 0);
            a.q = qOf(0);
            a.out = attOf(0);
            a.scores = m_buf.scores;
            a.nHeads = c.nHeads;
            a.nKvHeads = c.nKvHeads;
            a.headDim = c.headDim;
            a.nPos = pos + n;
            // YaRN's magnitude correction scales q and k alike: their product by its square.
            a.scale = c.yarnAttnFactor * c.yarnAttnFactor / std::sqrt(float(c.headDim));
            a.sinks = L.attnSinks;
            if (c.attentionKind(layer) == LlamaConfig::AttentionKind::SlidingWindow) a.window = c.slidingWindow;
            if (n == 1)
                d.attention(a);
            else
                d.attentionBatch(a, n, qDim);
            // A ring's window before each position of the batch is in it now (snapshots wanted).
            if (m_state && m_state->ringLayer(layer))
                for (int i = 0; i < n; ++i) m_state->tokenDone(layer, pos + i + 1);
        }
        if (c.attentionOutputGate)  // the output times sigmoid(gate), before wo
            for (int i = 0; i < n; ++i) {
                gpu::PointwiseArgs gate;
                gate.op = gpu::PointwiseOp::SigmoidMul;
                gate.x = attOf(i);
                gate.y = hb2Of(i);
                gate.out = attOf(i);
                gate.n = c.qDim();
                d.pointwise(gate);
            }
        jobs.clear();
        for (int i = 0; i < n; ++i) jobs.push_back({L.wo, attOf(i), xbOf(i)});
        m_matvec.run(jobs);
        for (int i = 0; i < n; ++i) {
            if (L.oBias) d.add(xbOf(i), L.oBias, c.dim);
            d.add(xOf(i), xbOf(i), c.dim);
            if (c.postNorm) norm(xOf(i), L.attnNorm, L.attnNormBias, xOf(i));
        }
    }

    // FFN.
    normInputs(L.ffnNorm, L.ffnNormBias);
    if (c.moe()) return experts(L, layer, x, n);
    if (m_sparse) {
        Status ran = m_sparse->run(L, layer, inputOf(0), xOf(0));
        if (failed) failed = std::move(ran);
        if (c.postNorm) norm(xOf(0), L.ffnNorm, L.ffnNormBias, xOf(0));
        return failed;
    }
    jobs.clear();
    if (c.ffnGated)
        for (int i = 0; i < n; ++i) jobs.push_back({L.gate, inputOf(i), hbOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.up, inputOf(i), c.ffnGated ? hb2Of(i) : hbOf(i)});
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) {
        if (!c.ffnGated) {
            if (L.upBias) d.add(hbOf(i), L.upBias, c.ffnDim);
            shiftedRelu(d, hbOf(i), c.ffnDim, c.ffnReluShift);
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
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) {
        if (L.downBias) d.add(xbOf(i), L.downBias, c.dim);
        d.add(xOf(i), xbOf(i), c.dim);
        if (c.postNorm && !c.ffnGated) norm(xOf(i), L.ffnNorm, L.ffnNormBias, xOf(i));
    }
    return failed;
}

// A mixture of experts' FFN for n tokens, as llama.cpp's build_moe_ffn computes it. The router's
// logits come to the host (one small download per token), which picks each token's experts
// (softmax over all, the top nExpertsUsed by probability, renormalized where the architecture
// says so); then every expert's tokens go to it in one dispatch (jobs grouped by expert, so a
// prompt reads each chosen expert once and the CPU's matrix product takes its run of tokens).
// Per token, in hb and hb2 (hiddenFloats each): the routed experts' hidden values side by side,
// the shared expert's behind them; in hb2 past those, the experts' outputs (dim each). The weighted sum
// goes to xb (each output times its weight, added in the order of the choice, the shared
// expert's last, scaled by sigmoid of its gate), then onto the residual stream.
Status LayerStep::experts(const LlamaLayerWeights& L, int layer, float* x, int n)
{
    const LlamaConfig& c = m_c;
    gpu::Device& d = m_device;
    const int experts = c.nExperts, used = c.nExpertsUsed, width = c.expertFfnDim;
    const int shared = L.sharedUp.data ? c.sharedExpertFfnDim : 0;
    const size_t dim = size_t(c.dim), hidden = size_t(c.hiddenFloats()), xbStride = size_t(xbFloats(c));
    auto xbOf = [&](int i) { return m_buf.xb + size_t(i) * xbStride; };
    auto hbOf = [&](int i) { return m_buf.hb + size_t(i) * hidden; };
    auto hb2Of = [&](int i) { return m_buf.hb2 + size_t(i) * hidden; };
    std::vector<gpu::MatvecJob>& jobs = m_jobs;

    // The router (and the shared expert's gate) for every token, to the host.
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.router, xbOf(i), hb2Of(i)});
    if (shared)
        for (int i = 0; i < n; ++i) jobs.push_back({L.sharedRouter, xbOf(i), hb2Of(i) + experts});
    m_matvec.run(jobs);
    const size_t logitsPerToken = size_t(experts) + (shared ? 1 : 0);
    m_routerLogits.resize(size_t(n) * logitsPerToken);
    if (L.routerBias)  // gpt-oss: the router's bias, added on the device as the matrices' others
        for (int i = 0; i < n; ++i) d.add(hb2Of(i), L.routerBias, experts);
    for (int i = 0; i < n; ++i)
        d.download(m_routerLogits.data() + size_t(i) * logitsPerToken, hb2Of(i), logitsPerToken * sizeof(float));

    m_choice.resize(size_t(n) * size_t(used));
    m_weight.resize(size_t(n) * size_t(used));
    m_sharedWeight.resize(size_t(n));
    std::vector<float>& probs = m_probs;
    std::vector<int>& order = m_order;
    probs.resize(size_t(experts));
    order.resize(size_t(experts));
    const bool ofChosen = c.routerWeights == LlamaConfig::RouterWeights::SoftmaxOfChosen;
    for (int i = 0; i < n; ++i) {
        const float* logits = m_routerLogits.data() + size_t(i) * logitsPerToken;
        // The probabilities (gpt-oss: the logits; its top k are softmaxed below).
        std::copy(logits, logits + experts, probs.begin());
        if (!ofChosen) softmax(probs.data(), experts);
        // The top `used` in order of probability (ties: the lower index first), or `used` drawn.
        const auto likelier = [&](int a, int b) {
            return probs[size_t(a)] > probs[size_t(b)] || (probs[size_t(a)] == probs[size_t(b)] && a < b);
        };
        if (m_draw) {
            m_draw->draw(layer, {order.data(), size_t(used)});
            std::sort(order.begin(), order.begin() + used, likelier);
        } else {
            for (int e = 0; e < experts; ++e) order[size_t(e)] = e;
            std::partial_sort(order.begin(), order.begin() + used, order.end(), likelier);
        }
        float chosen = 0.0f;
        for (int j = 0; j < used; ++j) {
            const int e = order[size_t(j)];
            m_choice[size_t(i * used + j)] = e;
            m_weight[size_t(i * used + j)] = probs[size_t(e)];
            chosen += probs[size_t(e)];
            ++m_expertCounts[size_t(layer) * size_t(experts) + size_t(e)];
        }
        if (ofChosen) {
            softmax(m_weight.data() + size_t(i * used), used);
        } else if (c.expertWeightsNormalized) {
            for (int j = 0; j < used; ++j) m_weight[size_t(i * used + j)] /= chosen;
        }
        if (shared) m_sharedWeight[size_t(i)] = 1.0f / (1.0f + std::exp(-logits[experts]));
    }

    // The distinct experts chosen, in order, and where each one's matrices are: sliced from the
    // layer's stacks, or in the expert cache's slots (a layer whose experts lie on the SSD), in
    // groups of at most its slots.
    m_picked.assign(size_t(experts), 0);
    for (int e : m_choice) m_picked[size_t(e)] = 1;
    m_distinct.clear();
    for (int e = 0; e < experts; ++e)
        if (m_picked[size_t(e)]) m_distinct.push_back(e);
    const bool cached = m_experts && m_experts->serves(layer);
    const size_t groupSize = cached ? size_t(m_experts->slotsOf(layer)) : m_distinct.size();
    m_views.resize(m_distinct.size());
    const size_t sharedAt = size_t(used) * size_t(width), outAt = sharedAt + size_t(shared);
    Status failed;
    for (size_t g0 = 0; g0 < m_distinct.size(); g0 += groupSize) {
        const size_t g1 = std::min(m_distinct.size(), g0 + groupSize);
        const std::span<const int> group(m_distinct.data() + g0, g1 - g0);
        if (cached) {
            Status fetched = m_experts->fetch(layer, group, {m_views.data() + g0, group.size()});
            if (!fetched) {
                failed = std::move(fetched);
                break;
            }
        } else {
            for (size_t k = g0; k < g1; ++k)
                m_views[k] = {expertMatrix(L.expertGate, experts, m_distinct[k]),
                              expertMatrix(L.expertUp, experts, m_distinct[k]),
                              expertMatrix(L.expertDown, experts, m_distinct[k])};
        }
        const bool first = g0 == 0, whole = g0 == 0 && g1 == m_distinct.size();
        if (first && n == 1 && m_experts) {
            // Router lookahead (decode): the next layer's experts guessed from this input, their
            // reads started before this layer's experts compute.
            const float* in = xbOf(0);
            if (!d.info().caps.hostPointers) {
                m_hostInput.resize(dim);
                d.download(m_hostInput.data(), in, dim * sizeof(float));
                in = m_hostInput.data();
            }
            m_experts->lookahead(layer, in);
        }
        // Each expert's tokens one after another (a prompt reads the expert once for all).
        auto byExpert = [&](auto&& job) {
            for (size_t k = g0; k < g1; ++k)
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < used; ++j)
                        if (m_choice[size_t(i * used + j)] == m_distinct[k]) jobs.push_back(job(m_views[k], i, j));
        };
        jobs.clear();
        byExpert([&](const ExpertViews& v, int i, int j) {
            return gpu::MatvecJob{v.gate, xbOf(i), hbOf(i) + size_t(j) * size_t(width)};
        });
        byExpert([&](const ExpertViews& v, int i, int j) {
            return gpu::MatvecJob{v.up, xbOf(i), hb2Of(i) + size_t(j) * size_t(width)};
        });
        if (shared && first) {
            for (int i = 0; i < n; ++i) jobs.push_back({L.sharedGate, xbOf(i), hbOf(i) + sharedAt});
            for (int i = 0; i < n; ++i) jobs.push_back({L.sharedUp, xbOf(i), hb2Of(i) + sharedAt});
        }
        m_matvec.run(jobs);
        // Each chosen expert's bias rows on its gate and up values (gpt-oss).
        const auto eachChoice = [&](auto&& f) {
            for (size_t k = g0; k < g1; ++k)
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < used; ++j)
                        if (m_choice[size_t(i * used + j)] == m_distinct[k]) f(m_distinct[k], i, j);
        };
        if (L.expertGateBias || L.expertUpBias)
            eachChoice([&](int e, int i, int j) {
                const size_t at = size_t(j) * size_t(width), row = size_t(e) * size_t(width);
                if (L.expertGateBias) d.add(hbOf(i) + at, L.expertGateBias + row, width);
                if (L.expertUpBias) d.add(hb2Of(i) + at, L.expertUpBias + row, width);
            });
        if (whole) {  // one activation over all of a token's experts
            for (int i = 0; i < n; ++i) activate(hbOf(i), hb2Of(i), int(sharedAt) + shared);
        } else {
            eachChoice([&](int, int i, int j) {
                activate(hbOf(i) + size_t(j) * size_t(width), hb2Of(i) + size_t(j) * size_t(width), width);
            });
            if (shared && first)
                for (int i = 0; i < n; ++i) activate(hbOf(i) + sharedAt, hb2Of(i) + sharedAt, shared);
        }
        // Down into hb2 past the up values (a later group's are still to come): routed outputs
        // at outAt + j * dim, the shared one's at outAt + used * dim.
        jobs.clear();
        byExpert([&](const ExpertViews& v, int i, int j) {
            return gpu::MatvecJob{v.down, hbOf(i) + size_t(j) * size_t(width), hb2Of(i) + outAt + size_t(j) * dim};
        });
        if (shared && first)
            for (int i = 0; i < n; ++i)
                jobs.push_back({L.sharedDown, hbOf(i) + sharedAt, hb2Of(i) + outAt + size_t(used) * dim});
        m_matvec.run(jobs);
        if (L.expertDownBias)
            eachChoice([&](int e, int i, int j) {
                d.add(hb2Of(i) + outAt + size_t(j) * dim, L.expertDownBias + size_t(e) * dim, c.dim);
            });
    }
    if (!failed) return failed;

    for (int i = 0; i < n; ++i) {
        gpu::PointwiseArgs sum;
        sum.n = c.dim;
        sum.out = xbOf(i);
        for (int j = 0; j < used; ++j) {
            sum.op = j == 0 ? gpu::PointwiseOp::Scale : gpu::PointwiseOp::ScaledAdd;
            sum.x = hb2Of(i) + outAt + size_t(j) * dim;
            sum.y = xbOf(i);
            sum.factor = m_weight[size_t(i * used + j)];
            d.pointwise(sum);
        }
        if (shared) {
            sum.op = gpu::PointwiseOp::ScaledAdd;
            sum.x = hb2Of(i) + outAt + size_t(used) * dim;
            sum.factor = m_sharedWeight[size_t(i)];
            d.pointwise(sum);
        }
        d.add(x + size_t(i) * dim, xbOf(i), c.dim);
    }
    return {};
}

void LayerStep::splitGatedQuery(const float* projected, float* q, float* gates)
{
    const int hd = m_c.headDim;
    gpu::PointwiseArgs copy;  // x * 1: an exact copy on every device
    copy.op = gpu::PointwiseOp::Scale;
    copy.factor = 1.0f;
    copy.n = hd;
    for (int h = 0; h < m_c.nHeads; ++h) {
        copy.x = projected + size_t(2 * h) * hd;
        copy.out = q + size_t(h) * hd;
        m_device.pointwise(copy);
        copy.x = projected + size_t(2 * h + 1) * hd;
        copy.out = gates + size_t(h) * hd;
        m_device.pointwise(copy);
    }
}

// A Gated DeltaNet mixer for n tokens (LlamaConfig's ssm* fields; gpu::DeltaNetArgs says the
// math). Per token, in hb the projection the convolution reads ([q | k | v], or Qwen3-Next's
// ssm_in with z inside), in hb2 z (unfused), then beta and alpha (or ssm_ba's pairs), then the
// mixer's output; the device runs the tokens in order, in one call from one wanted snapshot
// position to the next (the snapshot is taken after the token that reaches it; a prompt's batch
// takes the delta rule's chunked form there), then ssm_out for all and the residual add.
void LayerStep::linearAttention(const LlamaLayerWeights& L, int layer, float* x, int n, int pos)
{
    const LlamaConfig& c = m_c;
    gpu::Device& d = m_device;
    const size_t hidden = size_t(c.hiddenFloats()), xbStride = size_t(xbFloats(c));
    const size_t value = size_t(c.ssmValueDim()), heads = size_t(c.ssmVHeads);
    auto xbOf = [&](int i) { return m_buf.xb + size_t(i) * xbStride; };
    auto hbOf = [&](int i) { return m_buf.hb + size_t(i) * hidden; };
    auto hb2Of = [&](int i) { return m_buf.hb2 + size_t(i) * hidden; };
    auto outOf = [&](int i) { return hb2Of(i) + value + 2 * heads; };
    std::vector<gpu::MatvecJob>& jobs = m_jobs;
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.ssmQkv, xbOf(i), hbOf(i)});
    if (!c.ssmFusedInput)
        for (int i = 0; i < n; ++i) jobs.push_back({L.ssmGate, xbOf(i), hb2Of(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.ssmBeta, xbOf(i), hb2Of(i) + value});
    if (!c.ssmFusedInput)
        for (int i = 0; i < n; ++i) jobs.push_back({L.ssmAlpha, xbOf(i), hb2Of(i) + value + heads});
    m_matvec.run(jobs);
    gpu::DeltaNetArgs a;
    a.convWeight = L.ssmConv;
    a.dtBias = L.ssmDtBias;
    a.a = L.ssmA;
    a.normWeight = L.ssmNorm;
    a.convState = m_state->convState(layer);
    a.state = m_state->ssmState(layer);
    a.kHeads = c.ssmKHeads;
    a.vHeads = c.ssmVHeads;
    a.stateDim = c.ssmStateDim;
    a.headVDim = c.ssmHeadVDim;
    a.kernel = c.ssmConvKernel;
    a.fused = c.ssmFusedInput;
    a.tiled = c.ssmTiledHeads;
    a.eps = c.normEps;
    a.stride = hidden;
    for (int i = 0; i < n;) {
        // Up to the next position a snapshot is wanted at (or the batch's end) in one call.
        const int end = m_state->nextWanted(pos + i, pos + n) - pos;
        a.qkv = hbOf(i);
        a.z = c.ssmFusedInput ? nullptr : hb2Of(i);
        a.beta = hb2Of(i) + value;
        a.alpha = c.ssmFusedInput ? nullptr : hb2Of(i) + value + heads;
        a.out = outOf(i);
        a.n = end - i;
        d.deltaNet(a);
        m_state->tokenDone(layer, pos + end);
        i = end;
    }
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.ssmOut, outOf(i), xbOf(i)});
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) d.add(x + size_t(i) * size_t(c.dim), xbOf(i), c.dim);
}

void LayerStep::activate(float* gate, const float* up, int n)
{
    if (!m_c.clampedSwiglu) {
        m_device.swiglu(gate, up, gate, n);
        return;
    }
    gpu::PointwiseArgs a;
    a.op = gpu::PointwiseOp::ClampedSwiglu;
    a.x = gate;
    a.y = up;
    a.out = gate;
    a.n = n;
    a.factor = m_c.swigluAlpha;
    a.hi = m_c.swigluLimit;
    m_device.pointwise(a);
}

void LayerStep::norm(const float* x, const float* weight, const float* bias, float* out)
{
    const LlamaConfig& c = m_c;
    if (c.layerNorm)
        m_device.layernorm(x, weight, bias, out, c.dim, c.normEps);
    else
        m_device.rmsnorm(x, weight, out, c.dim, c.normEps);
}

}  // namespace spillway
