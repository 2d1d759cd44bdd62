// Where each fixed table of the IQ and non-linear block types lies in the device's table buffer
// (one storage buffer of 32-bit words, uploaded once when the device is created: vulkan_tables.cpp
// fills it from gpu/iq_grids.h, whose grids are gpu/iq_grids.inc as read out of ggml; nothing here
// is typed by hand). Shaders get the buffer's address in their push constants ("tables").
// The offsets are words; a 64-bit grid entry is two words, low first. This file is both GLSL and
// C++ (vulkan_tables.cpp includes the offsets); the functions below are GLSL only.

#define IQ_TABLE_IQ2XXS 0u      // kIq2xxsGrid: 256 x 8 bytes
#define IQ_TABLE_IQ2XS 512u     // kIq2xsGrid: 512 x 8 bytes
#define IQ_TABLE_IQ2S 1536u     // kIq2sGrid: 1024 x 8 bytes
#define IQ_TABLE_IQ3XXS 3584u   // kIq3xxsGrid: 256 x 4 bytes
#define IQ_TABLE_IQ3S 3840u     // kIq3sGrid: 512 x 4 bytes
#define IQ_TABLE_IQ1S 4352u     // kIq1sGrid: 2048 x 8 bytes (int8 -1, 0, 1)
#define IQ_TABLE_IQ4NL 8448u    // kIq4nlValues: 16 ints
#define IQ_TABLE_MXFP4 8464u    // kMxfp4Values: 16 ints
#define IQ_TABLE_WORDS 8480u

#ifndef __cplusplus
// Word i of a table.
uint tableWord(uint64_t tables, uint i) { return Words(tables).v[i]; }

// Grid entry `index` of a table of 64-bit entries: its 8 bytes as two words (values 0..3, 4..7).
uvec2 gridEntry(uint64_t tables, uint table, uint index)
{
    return uvec2(tableWord(tables, table + 2u * index), tableWord(tables, table + 2u * index + 1u));
}

// Entry n (0..15) of IQ4_NL's or MXFP4's 16 levels.
int levelValue(uint64_t tables, uint table, uint n) { return int(tableWord(tables, table + n)); }

// The 8 signs of IQ2_XXS / IQ2_XS / IQ3_XXS from 7 stored bits: the 8th is their parity
// (gpu::iqSigns). Bit j set: value j is negative.
uint iqSigns(uint seven)
{
    seven &= 127u;
    return seven | ((uint(bitCount(seven)) & 1u) << 7);
}

// Four bytes g (each 1..127) with bytes whose bit in `signs4` is set negated (as int8): no carry
// crosses a byte, since ~g + 1 <= 255 for g >= 1 (iq_expand.h's signedGrid).
uint signedBytes(uint g, uint signs4)
{
    uint m = 0u;
    for (uint t = 0u; t < 4u; ++t)
        if (((signs4 >> t) & 1u) != 0u) m |= 0xffu << (8u * t);
    return (g ^ m) + (m & 0x01010101u);
}

// MXFP4's scale, an E8M0 exponent e as 2^(e - 127) / 2 (gpu::e8m0Half; e = 0 and 1 are
// subnormals).
float e8m0Half(uint e)
{
    return uintBitsToFloat(e >= 2u ? (e - 1u) << 23 : (e == 1u ? 0x00400000u : 0x00200000u));
}

// e8m0Half(e) * float(q) as the CPU's float product gives it, whatever the driver does with
// subnormals: for e >= 2 the product of two normal floats (exact: |q| <= 12 has 2 significant
// bits); below, |q| 2^(e - 128) built from its bits (a subnormal: |q| 2^(e + 21) units of 2^-149)
// or from two normal factors.
float mxfp4Value(uint e, int q)
{
    if (e >= 2u || q == 0) {
        precise const float p = e8m0Half(e) * float(q);
        return p;
    }
    const uint units = uint(abs(q)) << (e + 21u);
    const float magnitude = units < 0x00800000u ? uintBitsToFloat(units)
                                                : (float(abs(q)) * 5.421010862427522e-20) *  // 2^-64
                                                      uintBitsToFloat((e + 63u) << 23);      // 2^(e - 64)
    return q < 0 ? -magnitude : magnitude;
}
#endif
