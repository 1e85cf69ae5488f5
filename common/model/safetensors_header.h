// The safetensors container format: an 8-byte little-endian header length N,
// N bytes of JSON (`{"name": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {string: string}}`), then the tensor bytes. Offsets are
// relative to the byte after the header.
//
// ParseSafetensorsHeader checks everything that can be checked without reading
// tensor data, so that a view built from an entry can never point outside the
// file. Thread rule: free functions, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::model {

// Largest accepted JSON header (real checkpoints have < 1 MiB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;
// Deepest JSON nesting accepted in a header (a valid one has 3).
inline constexpr int kMaxSafetensorsHeaderDepth = 8;
// Highest tensor rank accepted.
inline constexpr size_t kMaxSafetensorsRank = 16;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offset into the data section
  uint64_t end = 0;    // one past the last byte; end - begin == elements * dtype size
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;                     // 8 + header length: where the data section starts
  std::vector<SafetensorsEntry> tensors;        // sorted by begin offset
  std::map<std::string, std::string> metadata;  // "__metadata__", e.g. {"format": "pt"}
};

// Parses and validates the header of a whole safetensors file held in
// [data, data + size). `file_name` prefixes every error. Fails (never crashes)
// on: truncation, header over kMaxSafetensorsHeaderBytes, non-JSON or non-object
// header, unknown or unsupported dtype, bad shape, offsets out of range,
// overlapping or leaving gaps, and byte sizes that disagree with dtype x shape.
StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const std::byte* data, size_t size, std::string_view file_name);

// "BF16", "F16", "F32", "I32", "I64", "U8" <-> DType. Other safetensors dtypes
// (F64, I8, F8_E4M3, ...) are InvalidArgument "unsupported".
StatusOr<DType> ParseSafetensorsDType(std::string_view name);
std::string_view SafetensorsDTypeName(DType dtype);

}  // namespace tandem::model
