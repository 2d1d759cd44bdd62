// Value c of a stored row (decode.glsl's decodeValue) for the block types of gpu/cpu/iq_blocks.h:
// Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, MXFP4
// (gpu::DType 12..24), in ggml's float operations as iq_blocks.h does them, each rounded on its
// own (`precise`: no fused multiply-add), so that getRow is bit for bit the CPU device's. The
// block layouts are drawn at the top of iq_blocks.h. `block` is the block's byte offset from the
// 4-byte aligned `base`; t the value's index in it. Include after common.glsl and iq_tables.glsl.

// Byte `at` of the block, and its 16 / 32 bits at an even / any offset.
#define B8(at) loadByte(base, block + uint64_t(at))
#define B16(at) loadU16(base, block + uint64_t(at))
#define B32(at) loadU32(base, block + uint64_t(at))

// IQ2's and IQ3_XXS's scale: (d (0.5 + s)) * k, k = 1/4 or 1/2 (as ggml writes it).
float iqHalfStepScale(float d, uint s, float k)
{
    precise const float a = d * (0.5 + float(s));
    precise const float b = a * k;
    return b;
}

// (db g) sign, as the CPU's `db * float(g) * signOf(signs, j)`.
float signedGridValue(float db, uint g, bool negative)
{
    precise const float p = db * float(g);
    precise const float q = p * (negative ? -1.0 : 1.0);
    return q;
}

float decodeIqValue(uint type, uint64_t base, uint64_t block, uint t, uint64_t tables)
{
    const uint ib = t / 32u, l = (t % 32u) / 8u, j = t % 8u;  // IQ: 32-value sub-block, group of 8
    if (type == 12u) {  // Q2_K: (d sc) q - (dmin m), 4-bit scale and min per 16
        const uint sc = B8(t / 16u);
        const uint q = (B8(16u + 32u * (t / 128u) + t % 32u) >> (2u * ((t % 128u) / 32u))) & 3u;
        precise const float dl = halfToFloat(B16(80)) * float(sc & 15u);
        precise const float ml = halfToFloat(B16(82)) * float(sc >> 4);
        precise const float p = dl * float(q);
        precise const float r = p - ml;
        return r;
    }
    if (type == 13u) {  // Q3_K: (d (scale - 32)) (q - 4 [bit 2 of the value clear])
        const uint g = t / 16u, h = t / 128u, jj = (t % 128u) / 32u, i = t % 32u;
        const uint low = g < 8u ? B8(96u + g) & 15u : B8(96u + g - 8u) >> 4;
        const uint high = (B8(104u + g % 4u) >> (2u * (g / 4u))) & 3u;
        const int q = int((B8(32u + 32u * h + i) >> (2u * jj)) & 3u) - ((B8(i) & (1u << (4u * h + jj))) != 0u ? 0 : 4);
        precise const float dl = halfToFloat(B16(108)) * float(int(low | (high << 4)) - 32);
        precise const float p = dl * float(q);
        return p;
    }
    if (type == 14u) {  // Q5_1: q d + m, bit 4 of q from the 32 high bits
        const uint i = t % 16u, qh = B32(4);
        const uint n = t < 16u ? (B8(8u + i) & 15u) | (((qh >> i) & 1u) << 4)
                               : (B8(8u + i) >> 4) | (((qh >> (i + 16u)) & 1u) << 4);
        precise const float p = float(n) * halfToFloat(B16(0));
        precise const float r = p + halfToFloat(B16(2));
        return r;
    }
    if (type == 15u || type == 24u) {  // IQ4_NL: d level; MXFP4: 2^(e-127)/2 level (Q4_0's order)
        const bool nl = type == 15u;
        const uint byte_ = B8((nl ? 2u : 1u) + t % 16u);
        const uint n = t < 16u ? byte_ & 15u : byte_ >> 4;
        if (!nl) return mxfp4Value(B8(0), levelValue(tables, IQ_TABLE_MXFP4, n));
        precise const float p = halfToFloat(B16(0)) * float(levelValue(tables, IQ_TABLE_IQ4NL, n));
        return p;
    }
    if (type == 16u) {  // IQ4_XS: (d (scale - 32)) level, 6-bit scale per 32
        const uint scale = ((B8(4u + ib / 2u) >> (4u * (ib % 2u))) & 15u) | (((B16(2) >> (2u * ib)) & 3u) << 4);
        const uint byte_ = B8(8u + 16u * ib + t % 16u);
        const uint n = t % 32u < 16u ? byte_ & 15u : byte_ >> 4;
        precise const float dl = halfToFloat(B16(0)) * float(int(scale) - 32);
        precise const float p = dl * float(levelValue(tables, IQ_TABLE_IQ4NL, n));
        return p;
    }
    const float d = type == 23u ? 0.0 : halfToFloat(B16(0));
    if (type == 19u) {  // IQ2_XXS: per 32, 4 grid bytes then 4 x 7 sign bits and a 4-bit scale
        const uint aux = B32(2u + 8u * ib + 4u);
        const uint g = gridEntry(tables, IQ_TABLE_IQ2XXS, B8(2u + 8u * ib + l))[j / 4u];
        return signedGridValue(iqHalfStepScale(d, aux >> 28, 0.25), (g >> (8u * (j % 4u))) & 0xffu,
                               ((iqSigns(aux >> (7u * l)) >> j) & 1u) != 0u);
    }
    if (type == 20u || type == 21u) {  // IQ2_XS: 9-bit index + 7 sign bits; IQ2_S: 10-bit index, 8 signs
        const bool xs = type == 20u;
        const uint sc = B8((xs ? 66u : 74u) + ib);
        uint index, signs;
        if (xs) {
            const uint q = B16(2u + 2u * (4u * ib + l));
            index = q & 511u;
            signs = iqSigns(q >> 9);
        } else {
            index = B8(2u + 4u * ib + l) | ((B8(66u + ib) << (8u - 2u * l)) & 0x300u);
            signs = B8(34u + 4u * ib + l);
        }
        const uint g = gridEntry(tables, xs ? IQ_TABLE_IQ2XS : IQ_TABLE_IQ2S, index)[j / 4u];
        return signedGridValue(iqHalfStepScale(d, l < 2u ? sc & 15u : sc >> 4, 0.25), (g >> (8u * (j % 4u))) & 0xffu,
                               ((signs >> j) & 1u) != 0u);
    }
    if (type == 17u) {  // IQ3_XXS: 8 grid bytes (4 values each) per 32, then 4 x 7 signs + scale
        const uint aux = B32(66u + 4u * ib);
        const uint g = tableWord(tables, IQ_TABLE_IQ3XXS + B8(2u + 8u * ib + 2u * l + j / 4u));
        return signedGridValue(iqHalfStepScale(d, aux >> 28, 0.5), (g >> (8u * (j % 4u))) & 0xffu,
                               ((iqSigns(aux >> (7u * l)) >> j) & 1u) != 0u);
    }
    if (type == 18u) {  // IQ3_S: 9-bit indices (bit 8 in qh), 8 signs per 8, odd scales 1 + 2 s
        const uint sc = B8(106u + ib / 2u), qh = B8(66u + ib);
        const uint hi = j / 4u;  // first or second grid entry of the group
        const uint index = B8(2u + 8u * ib + 2u * l + hi) | ((qh << (8u - 2u * l - hi)) & 256u);
        const uint g = tableWord(tables, IQ_TABLE_IQ3S + index);
        precise const float db = d * float(1u + 2u * ((ib % 2u) != 0u ? sc >> 4 : sc & 15u));
        return signedGridValue(db, (g >> (8u * (j % 4u))) & 0xffu, ((B8(74u + 4u * ib + l) >> j) & 1u) != 0u);
    }
    // IQ1_S / IQ1_M: (d (2 s + 1)) (g + delta), g in {-1, 0, 1}, delta +-1/8.
    uint index, s;
    bool negativeDelta;
    float dd = d;
    if (type == 22u) {
        const uint qh = B16(34u + 2u * ib);
        index = B8(2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8);
        s = (qh >> 12) & 7u;
        negativeDelta = (qh & 0x8000u) != 0u;
    } else {
        const uint scaleBits = (B16(48) >> 12) | ((B16(50) >> 8) & 0x00f0u) | ((B16(52) >> 4) & 0x0f00u) |
                               (B16(54) & 0xf000u);
        dd = halfToFloat(scaleBits);
        const uint sc = B16(48u + 2u * (ib / 2u));
        s = (sc >> (6u * (ib % 2u) + 3u * (l / 2u))) & 7u;
        const uint qh = B8(32u + 2u * ib + l / 2u);
        index = B8(4u * ib + l) | ((qh << ((l % 2u) != 0u ? 4u : 8u)) & 0x700u);
        negativeDelta = (qh & ((l % 2u) != 0u ? 0x80u : 0x08u)) != 0u;
    }
    const uint g = gridEntry(tables, IQ_TABLE_IQ1S, index)[j / 4u];
    const int gv = bitfieldExtract(int(g), int(8u * (j % 4u)), 8);
    precise const float dl = dd * float(2u * s + 1u);
    precise const float v = float(gv) + (negativeDelta ? -0.125 : 0.125);
    precise const float p = dl * v;
    return p;
}

#undef B8
#undef B16
#undef B32
