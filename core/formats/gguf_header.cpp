// gguf::headerExtent: the header's size from a prefix of the file (gguf.h).

#include <cstring>

#include "core/formats/gguf.h"

namespace spillway::gguf {

namespace {

// Reads the prefix in order; a read past its end records what is needed at least and stops.
struct Scanner {
    const uint8_t* p;
    size_t size;
    uint64_t pos = 0;
    uint64_t needAtLeast = 0;  // set when the prefix ran out
    bool out = false;

    bool take(uint64_t n, void* into = nullptr)
    {
        if (out) return false;
        if (pos + n > size) {
            needAtLeast = pos + n;
            out = true;
            return false;
        }
        if (into) std::memcpy(into, p + pos, size_t(n));
        pos += n;
        return true;
    }
    template <class T> bool read(T& v) { return take(sizeof(T), &v); }
    bool skipString()
    {
        uint64_t n = 0;
        return read(n) && take(n);
    }
};

// Bytes of one value of a fixed-size type; 0 for strings and arrays; UINT64_MAX for an unknown type.
uint64_t fixedBytes(uint32_t type)
{
    switch (type) {
    case 0: case 1: case 7: return 1;   // u8, i8, bool
    case 2: case 3: return 2;           // u16, i16
    case 4: case 5: case 6: return 4;   // u32, i32, f32
    case 10: case 11: case 12: return 8;  // u64, i64, f64
    case 8: case 9: return 0;           // string, array
    default: return UINT64_MAX;
    }
}

}  // namespace

HeaderExtent headerExtent(const uint8_t* prefix, size_t size)
{
    HeaderExtent r;
    Scanner s{prefix, size};
    const auto needMore = [&](uint64_t extra) {
        r.complete = false;
        r.bytes = s.needAtLeast + extra;
        return r;
    };
    const auto invalid = [&](std::string why) {
        r.complete = true;
        r.error = std::move(why);
        return r;
    };
    char magic[4];
    uint32_t version = 0;
    uint64_t tensors = 0, kvs = 0;
    if (!s.take(4, magic) || !s.read(version) || !s.read(tensors) || !s.read(kvs)) return needMore(0);
    if (std::memcmp(magic, "GGUF", 4) != 0) return invalid("not a GGUF file (no GGUF magic)");
    if (version < 2 || version > 3) return invalid("GGUF version " + std::to_string(version) + " (2 and 3 are read)");
    uint64_t alignment = 32;
    for (uint64_t k = 0; k < kvs; ++k) {
        uint64_t keyLength = 0;
        if (!s.read(keyLength)) return needMore(24 * tensors);
        const uint64_t keyAt = s.pos;
        uint32_t type = 0;
        if (!s.take(keyLength) || !s.read(type)) return needMore(24 * tensors);
        const std::string key(reinterpret_cast<const char*>(prefix + keyAt), size_t(keyLength));
        if (type == 9) {
            uint32_t elementType = 0;
            uint64_t count = 0;
            if (!s.read(elementType) || !s.read(count)) return needMore(24 * tensors);
            if (elementType == 8) {
                for (uint64_t i = 0; i < count; ++i)
                    if (!s.skipString()) return needMore(8 * (count - i - 1) + 24 * tensors);
            } else {
                const uint64_t each = fixedBytes(elementType);
                if (each == 0 || each == UINT64_MAX) return invalid(key + ": an array of an unknown or nested type");
                if (!s.take(each * count)) return needMore(24 * tensors);
            }
        } else if (type == 8) {
            if (!s.skipString()) return needMore(24 * tensors);
        } else {
            const uint64_t each = fixedBytes(type);
            if (each == UINT64_MAX) return invalid(key + ": value type " + std::to_string(type) + " is unknown");
            const uint64_t at = s.pos;
            if (!s.take(each)) return needMore(24 * tensors);
            if (key == "general.alignment" && (type == 4 || type == 5)) {
                uint32_t a = 0;
                std::memcpy(&a, prefix + at, 4);
                if (a == 0 || (a & (a - 1)) != 0) return invalid("general.alignment " + std::to_string(a) + " is not a power of two");
                alignment = a;
            }
        }
    }
    for (uint64_t t = 0; t < tensors; ++t) {
        uint32_t dims = 0;
        if (!s.skipString() || !s.read(dims)) return needMore(24 * (tensors - t - 1));
        if (dims > 8) return invalid("a tensor of " + std::to_string(dims) + " dimensions");
        if (!s.take(8 * uint64_t(dims) + 4 + 8)) return needMore(24 * (tensors - t - 1));
    }
    r.complete = true;
    r.bytes = (s.pos + alignment - 1) / alignment * alignment;
    return r;
}

}  // namespace spillway::gguf
