#include "common/model/safetensors_header.h"

#include <algorithm>
#include <array>
#include <exception>

#include "common/model/json_limits.h"

namespace tandem::model {
namespace {

using nlohmann::json;

struct DTypeSpelling {
  DType dtype;
  std::string_view name;
};
constexpr std::array<DTypeSpelling, 6> kDTypes = {{{DType::kBF16, "BF16"},
                                                   {DType::kF16, "F16"},
                                                   {DType::kF32, "F32"},
                                                   {DType::kI32, "I32"},
                                                   {DType::kI64, "I64"},
                                                   {DType::kU8, "U8"}}};
// Valid in the format but not loadable here.
constexpr std::array<std::string_view, 10> kOtherDTypes = {"F64", "I8",   "I16",     "U16",     "U32",
                                                           "U64", "BOOL", "F8_E4M3", "F8_E5M2", "F4"};

// Names and dtypes come from untrusted input; keep error messages short.
std::string Clip(std::string_view text) {
  constexpr size_t kMax = 128;
  if (text.size() <= kMax) return std::string(text);
  return std::string(text.substr(0, kMax)) + "...";
}

bool ReadOffset(const json& value, uint64_t* out) {
  if (!value.is_number_unsigned()) return false;
  *out = value.get<uint64_t>();
  return true;
}

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view file_name) : file_(file_name) {}

  Status Error(std::string_view tensor, std::string_view problem) const {
    std::string msg = std::string(file_) + ": ";
    if (!tensor.empty()) msg += "tensor '" + Clip(tensor) + "': ";
    return InvalidArgumentError(msg + std::string(problem));
  }

  StatusOr<SafetensorsHeader> Parse(const std::byte* data, size_t size) {
    if (data == nullptr || size < 8) return Error("", "truncated: file is shorter than the 8-byte header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(data[i]);
    if (header_len > kMaxSafetensorsHeaderBytes) {
      return Error("", "header length " + std::to_string(header_len) + " is over the limit of " +
                           std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    }
    if (header_len > size - 8) {
      return Error("", "truncated: header length " + std::to_string(header_len) + " but only " +
                           std::to_string(size - 8) + " bytes follow");
    }
    std::string_view text(reinterpret_cast<const char*>(data) + 8, header_len);
    StatusOr<json> root =
        ParseJsonText(text, kMaxSafetensorsHeaderBytes, kMaxSafetensorsHeaderDepth, std::string(file_) + ": header");
    if (!root.ok()) return root.status();
    if (!root->is_object()) return Error("", "header is not a JSON object");
    SafetensorsHeader header;
    header.data_offset = 8 + header_len;
    uint64_t data_size = size - header.data_offset;
    for (const auto& [name, value] : root->items()) {
      if (name == "__metadata__") {
        TANDEM_RETURN_IF_ERROR(ParseMetadata(value, &header));
        continue;
      }
      TANDEM_ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(name, value, data_size));
      header.tensors.push_back(std::move(entry));
    }
    TANDEM_RETURN_IF_ERROR(CheckLayout(&header, data_size));
    return header;
  }

 private:
  Status ParseMetadata(const json& value, SafetensorsHeader* header) const {
    if (!value.is_object()) return Error("", "__metadata__ must be an object");
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) return Error("", "__metadata__ value of '" + Clip(key) + "' must be a string");
      header->metadata[key] = item.get<std::string>();
    }
    return Status::Ok();
  }

  Status ParseShape(const std::string& name, const json& value, SafetensorsEntry* entry, uint64_t* num_elements) const {
    if (!value.is_array() || value.size() > kMaxSafetensorsRank) {
      return Error(name,
                   "shape must be a list of at most " + std::to_string(kMaxSafetensorsRank) + " non-negative integers");
    }
    *num_elements = 1;
    for (const json& dim_json : value) {
      uint64_t dim = 0;
      if (!ReadOffset(dim_json, &dim) || dim > (1ull << 48)) {
        return Error(name, "shape must contain only non-negative integers below 2^48");
      }
      if (__builtin_mul_overflow(*num_elements, dim, num_elements)) {
        return Error(name, "shape has too many elements");
      }
      entry->shape.push_back(static_cast<int64_t>(dim));
    }
    return Status::Ok();
  }

  StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const json& value, uint64_t data_size) const {
    if (name.empty()) return Error("", "empty tensor name");
    if (!value.is_object()) return Error(name, "entry must be an object");
    SafetensorsEntry entry;
    entry.name = name;
    auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) return Error(name, "missing string 'dtype'");
    StatusOr<DType> parsed = ParseSafetensorsDType(dtype->get<std::string>());
    if (!parsed.ok()) return Error(name, parsed.status().message());
    entry.dtype = *parsed;
    auto shape = value.find("shape");
    if (shape == value.end()) return Error(name, "missing 'shape'");
    uint64_t num_elements = 0;
    TANDEM_RETURN_IF_ERROR(ParseShape(name, *shape, &entry, &num_elements));
    auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !ReadOffset((*offsets)[0], &entry.begin) || !ReadOffset((*offsets)[1], &entry.end)) {
      return Error(name, "'data_offsets' must be [begin, end] with non-negative integers");
    }
    if (entry.begin > entry.end) return Error(name, "data_offsets begin > end");
    if (entry.end > data_size) {
      return Error(name, "data_offsets end " + std::to_string(entry.end) + " is past the data section of " +
                             std::to_string(data_size) + " bytes (truncated file?)");
    }
    uint64_t num_bytes = 0;
    if (__builtin_mul_overflow(num_elements, DTypeSize(entry.dtype), &num_bytes) ||
        num_bytes != entry.end - entry.begin) {
      return Error(name, "data_offsets span " + std::to_string(entry.end - entry.begin) +
                             " bytes but dtype x shape needs " + std::to_string(num_bytes));
    }
    return entry;
  }

  // Entries must tile the data section exactly: no overlap, no gap.
  Status CheckLayout(SafetensorsHeader* header, uint64_t data_size) const {
    auto& tensors = header->tensors;
    std::sort(tensors.begin(), tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expected = 0;
    for (const SafetensorsEntry& entry : tensors) {
      if (entry.begin < expected) {
        return Error(entry.name, "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                     ") overlap the previous tensor");
      }
      if (entry.begin > expected) {
        return Error(entry.name, "gap in the data section before offset " + std::to_string(entry.begin));
      }
      expected = entry.end;
    }
    if (expected != data_size) {
      return Error(
          "", "data section has " + std::to_string(data_size) + " bytes but tensors cover " + std::to_string(expected));
    }
    return Status::Ok();
  }

  std::string_view file_;
};

}  // namespace

StatusOr<DType> ParseSafetensorsDType(std::string_view name) {
  for (const DTypeSpelling& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  for (std::string_view other : kOtherDTypes) {
    if (other == name) return InvalidArgumentError("dtype '" + Clip(name) + "' is not supported");
  }
  return InvalidArgumentError("unknown dtype '" + Clip(name) + "'");
}

std::string_view SafetensorsDTypeName(DType dtype) {
  for (const DTypeSpelling& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const std::byte* data, size_t size, std::string_view file_name) {
  try {  // every access checks types first; this only guards against surprises
    return HeaderParser(file_name).Parse(data, size);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(file_name) + ": bad header: " + e.what());
  }
}

}  // namespace tandem::model
