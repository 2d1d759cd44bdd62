#pragma once
// A Device that passes every call on to another one: the base of wrappers that watch or change
// a few ops (calibration recorders, test doubles). A subclass overrides what it needs and calls
// the inner device itself; a subclass that overrides matvec(span) adds `using Device::matvec;`
// to keep the single-job form visible.

#include <memory>

#include "gpu/device.h"

namespace spillway::gpu {

class ForwardingDevice : public Device {
public:
    explicit ForwardingDevice(Device& inner) : m_inner(inner) {}
    // Owning form: the inner device lives as long as this one.
    explicit ForwardingDevice(std::unique_ptr<Device> inner)
        : m_owned(std::move(inner)), m_inner(*m_owned)
    {
    }
    Device& inner() const { return m_inner; }

    const DeviceInfo& info() const override { return m_inner.info(); }
    bool supports(DType type) const override { return m_inner.supports(type); }
    Result<Buffer> allocate(size_t bytes) override { return m_inner.allocate(bytes); }
    Result<Buffer> allocateHost(size_t bytes) override { return m_inner.allocateHost(bytes); }
    MemoryStats memoryStats() const override { return m_inner.memoryStats(); }
    void resetPeak() override { m_inner.resetPeak(); }
    void upload(void* dst, const void* src, size_t bytes) override { m_inner.upload(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { m_inner.download(dst, src, bytes); }
    Result<UploadedMatrix> uploadMatrix(const MatrixView& src, size_t bytes) override
    {
        return m_inner.uploadMatrix(src, bytes);
    }
    void synchronize() override { m_inner.synchronize(); }
    void mark() override { m_inner.mark(); }
    size_t takeMarks(std::span<uint64_t> out) override { return m_inner.takeMarks(out); }
    Status lastError() const override { return m_inner.lastError(); }

    using Device::matvec;
    void matvec(std::span<const MatvecJob> jobs) override { m_inner.matvec(jobs); }
    void getRow(const MatrixView& w, int64_t row, float* out) override { m_inner.getRow(w, row, out); }
    void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) override
    {
        m_inner.rmsnorm(x, weight, out, n, eps);
    }
    void layernorm(const float* x, const float* weight, const float* bias, float* out, int n,
                   float eps) override
    {
        m_inner.layernorm(x, weight, bias, out, n, eps);
    }
    void rope(float* x, int nHeads, int headDim, int pos, const RopeParams& p) override
    {
        m_inner.rope(x, nHeads, headDim, pos, p);
    }
    void attention(const AttentionArgs& a) override { m_inner.attention(a); }
    void attentionBatch(const AttentionArgs& a, int queries, size_t rowStride) override
    {
        m_inner.attentionBatch(a, queries, rowStride);
    }
    void swiglu(const float* gate, const float* up, float* out, int n) override
    {
        m_inner.swiglu(gate, up, out, n);
    }
    void add(float* y, const float* x, int n) override { m_inner.add(y, x, n); }
    void pointwise(const PointwiseArgs& a) override { m_inner.pointwise(a); }
    void deltaNet(const DeltaNetArgs& a) override { m_inner.deltaNet(a); }
    void scatterRows(const ScatterRowsArgs& a) override { m_inner.scatterRows(a); }
    void rowSum(const RowSumArgs& a) override { m_inner.rowSum(a); }

protected:
    std::unique_ptr<Device> m_owned;  // declared first: m_inner may refer to it
    Device& m_inner;
};

}  // namespace spillway::gpu
