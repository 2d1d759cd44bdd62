#pragma once
// One conversation's state on a device: activation buffers and the KV cache, all allocated up
// front; forward() allocates nothing.

#include <memory>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "gpu/device.h"

namespace spillway {

class LlamaSession {
public:
    // contextLength <= 0: the model's trained context, capped at 4096 tokens.
    static Result<std::unique_ptr<LlamaSession>> create(const LlamaModel& model, gpu::Device& device,
                                                        int contextLength);

    int contextLength() const { return m_ctx; }
    const LlamaModel& model() const { return m_model; }

    // Runs token `token` at position `pos` (0 <= pos < contextLength(); positions before it
    // must have been run in this session) and returns the logits (vocabSize floats), valid until
    // the next call.
    const float* forward(int token, int pos);

private:
    LlamaSession(const LlamaModel& model, gpu::Device& device) : m_model(model), m_device(device) {}
    const LlamaModel& m_model;
    gpu::Device& m_device;
    int m_ctx = 0;
    gpu::RopeParams m_rope;

    // Activations for the current token (device memory).
    gpu::Buffer m_x;       // (dim) residual stream
    gpu::Buffer m_xb;      // (dim) normed input / attention output projected
    gpu::Buffer m_q;       // (qDim)
    gpu::Buffer m_att;     // (qDim) attention output before wo
    gpu::Buffer m_scores;  // (nHeads, ctx)
    gpu::Buffer m_hb;      // (ffnDim) gate, then silu(gate) * up
    gpu::Buffer m_hb2;     // (ffnDim) up
    gpu::Buffer m_logits;  // (vocab)
    gpu::Buffer m_keys;    // (layer, ctx, kvDim)
    gpu::Buffer m_values;  // (layer, ctx, kvDim)
};

}  // namespace spillway
