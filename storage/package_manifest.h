#pragma once
// manifest.json of a model package, to and from text (internal to storage; nlohmann_json stays
// out of every public header).
//
// Layout (version 1):
//   {
//     "format": "spillway-package", "version": 1, "architecture": "llama",
//     "hyperParameters": {...}, "tokenizer": {...}, "chatTemplate": "...", "quality": {...},
//     "shards": [{"file": "shard-00000.bin", "bytes": 8192}, ...],
//     "tensors": [{"name": "blk.0.attn_q.weight", "shape": [4096, 4096], "format": "f16",
//                  "tierHint": "ssd", "shard": 0, "offset": 0, "bytes": 33554432,
//                  "xxh3": "0123456789abcdef", "extra": {...}}, ...]
//   }
// The opaque JSON texts are embedded as JSON values (objects), absent when empty; the checksum
// is 16 lowercase hex digits (a JSON number cannot carry 64 bits to every reader).

#include <string>

#include "base/result.h"
#include "storage/package.h"

namespace spillway::storage {

// InvalidArgument when an opaque JSON text is not a JSON object.
Result<std::string> manifestToJson(const PackageManifest& manifest);

// Parses and checks every field's presence and type. `file` names the manifest in errors
// (ModelFileInvalid).
Result<PackageManifest> parseManifest(const std::string& text, const std::string& file);

// Checks the layout against manifest.shardSizes: shard indices, 4096-aligned offsets, every
// tensor inside its shard, no two tensors overlapping, unique names (ModelFileInvalid).
Status checkManifestLayout(const PackageManifest& manifest, const std::string& file);

}  // namespace spillway::storage
