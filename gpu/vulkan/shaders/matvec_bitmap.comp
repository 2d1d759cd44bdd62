#version 460
// A matrix stored as an ENDOR bitmap sparse blob (gpu/sparse_format.h, DType::BitmapSparse),
// computed on straight from that form: y = W x (mode 0, one workgroup per row), or one row
// decoded to floats (mode 1, getRow: exact, quantized values as scale * code; a row outside the
// matrix fills out with NaN, as on the CPU device).
//
// A workgroup walks its row 64 bitmap words (4096 columns) at a time: invocation i loads word
// i and counts its bits, a scan in shared memory gives each word's first value, then word after
// word invocation i takes column i of it, its value's index being the word's first plus the
// popcount of the bits below i. In each such round the workgroup's value reads fall in one
// contiguous run and its x reads (or row writes) in 64 consecutive floats. Needs no subgroup
// operations and no 8- or 16-bit storage (values are read from words, as common.glsl does).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t header;   // the blob: value format at byte 12, group at byte 16
    uint64_t offsets;  // (rows + 1) u64 byte offsets of each row's values
    uint64_t bitmap;   // (rows, words) u64
    uint64_t values;
    uint64_t x;        // mode 0: (cols) floats
    uint64_t y;        // mode 0: (rows) floats; mode 1: (cols) floats, the row
    uint rows;
    uint cols;
    uint mode;         // 0 matvec, 1 decode row `row`
    uint row;
} pc;

shared uint wordLo[64];
shared uint wordHi[64];
shared uint firstOf[64];  // exclusive scan of the words' popcounts
shared uint scanTmp[64];

// Value k of the row's packed values at `v` (format: gpu::SparseValues).
float valueAt(uint64_t v, uint64_t k, uint format, uint group)
{
    const uint64_t base = alignedBase(v);
    const uint shift = baseShift(v);
    if (format == 0u) return uintBitsToFloat(loadU32(base, uint64_t(shift) + 4ul * k));
    if (format == 1u) return halfToFloat(loadU16(base, uint64_t(shift) + 2ul * k));
    if (format == 2u) return bf16ToFloat(loadU16(base, uint64_t(shift) + 2ul * k));
    const uint64_t g = k / uint64_t(group);
    const uint j = uint(k - g * uint64_t(group));
    // Every group before the row's last is full: 2 bytes of fp16 scale, then its codes.
    const uint64_t at = uint64_t(shift) + g * uint64_t(format == 3u ? 2u + group : 2u + group / 2u);
    const float scale = halfToFloat(loadByte(base, at) | (loadByte(base, at + 1ul) << 8));
    int code;
    if (format == 3u) {
        code = bitfieldExtract(int(loadByte(base, at + 2ul + uint64_t(j))), 0, 8);
    } else {
        const uint byte = loadByte(base, at + 2ul + uint64_t(j / 2u));
        code = bitfieldExtract(int((j & 1u) != 0u ? byte >> 4 : byte & 15u), 0, 4);
    }
    return scale * float(code);
}

#define REDUCE_SIZE 64u
#include "reduce.glsl"

void main()
{
    const uint lane = gl_LocalInvocationID.x;
    const uint row = pc.mode == 0u ? flatWorkGroup() : pc.row;
    if (pc.mode == 0u && row >= pc.rows) return;  // the whole workgroup
    if (pc.mode == 1u && row >= pc.rows) {
        for (uint c = lane; c < pc.cols; c += 64u) Floats(pc.y).v[c] = uintBitsToFloat(0x7fc00000u);
        return;
    }
    const uint format = Words(pc.header).v[3] & 0xffu;
    const uint group = Words(pc.header).v[4];
    const uint words = (pc.cols + 63u) / 64u;
    const uint64_t rowWords = pc.bitmap + uint64_t(row) * uint64_t(words) * 8ul;
    Words offsets = Words(pc.offsets);
    const uint64_t rowOffset = uint64_t(offsets.v[2u * row]) | (uint64_t(offsets.v[2u * row + 1u]) << 32);
    const uint64_t v = pc.values + rowOffset;
    // Bits of a word below bit `lane`.
    const uint maskLo = lane >= 32u ? 0xffffffffu : (1u << lane) - 1u;
    const uint maskHi = lane <= 32u ? 0u : (1u << (lane - 32u)) - 1u;

    float acc = 0.0;
    uint64_t base = 0ul;  // non-zeros of the row before this step
    for (uint w0 = 0u; w0 < words; w0 += 64u) {
        uint lo = 0u, hi = 0u;
        if (w0 + lane < words) {
            const uint i = 2u * (w0 + lane);
            lo = Words(rowWords).v[i];
            hi = Words(rowWords).v[i + 1u];
        }
        wordLo[lane] = lo;
        wordHi[lane] = hi;
        uint scan = uint(bitCount(lo) + bitCount(hi));
        scanTmp[lane] = scan;
        barrier();
        for (uint offset = 1u; offset < 64u; offset *= 2u) {
            const uint add = lane >= offset ? scanTmp[lane - offset] : 0u;
            barrier();
            scan += add;
            scanTmp[lane] = scan;
            barrier();
        }
        firstOf[lane] = scan - uint(bitCount(lo) + bitCount(hi));
        barrier();
        const uint n = min(64u, words - w0);
        for (uint j = 0u; j < n; ++j) {
            const uint c = (w0 + j) * 64u + lane;
            if (c >= pc.cols) continue;
            const uint wl = wordLo[j], wh = wordHi[j];
            const bool set = ((lane < 32u ? wl >> lane : wh >> (lane - 32u)) & 1u) != 0u;
            float value = 0.0;
            if (set) {
                const uint k = firstOf[j] + uint(bitCount(wl & maskLo) + bitCount(wh & maskHi));
                value = valueAt(v, base + uint64_t(k), format, group);
            }
            if (pc.mode == 0u) {
                if (set) acc += value * Floats(pc.x).v[c];
            } else {
                Floats(pc.y).v[c] = value;
            }
        }
        base += uint64_t(scanTmp[63]);
        barrier();  // shared words are rewritten by the next step
    }
    if (pc.mode == 0u) {
        const float total = workgroupSum(vec2(acc, 0.0)).x;
        if (lane == 0u) Floats(pc.y).v[row] = total;
    }
}
