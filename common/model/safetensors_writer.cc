#include "common/model/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <set>

#include "nlohmann/json.hpp"

#include "common/model/safetensors_header.h"

namespace tandem::model {

uint64_t TensorSpec::NumBytes() const {
  uint64_t n = DTypeSize(dtype);
  for (int64_t dim : shape) n *= static_cast<uint64_t>(dim);
  return n;
}

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(const std::string& path,
                                                                       std::vector<TensorSpec> tensors,
                                                                       std::map<std::string, std::string> metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return InvalidArgumentError(path + ": empty, reserved or duplicate tensor name '" + t.name + "'");
    }
    for (int64_t dim : t.shape) {
      if (dim < 0) return InvalidArgumentError(path + ": tensor '" + t.name + "' has a negative dimension");
    }
    uint64_t end = offset + t.NumBytes();
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // align the data section to 8 bytes
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return UnavailableError(path + ": cannot create: " + std::strerror(errno));
  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter(path, file, offset));
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  if (std::fwrite(len, 1, 8, file) != 8 || std::fwrite(text.data(), 1, text.size(), file) != text.size()) {
    return UnavailableError(path + ": write failed: " + std::strerror(errno));
  }
  return writer;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status SafetensorsWriter::Append(const void* data, size_t num_bytes) {
  if (file_ == nullptr) return FailedPreconditionError(path_ + ": Append after Finish");
  if (num_bytes > data_bytes_ - written_bytes_) {
    return InvalidArgumentError(path_ + ": Append of " + std::to_string(num_bytes) +
                                " bytes goes past the declared tensors");
  }
  if (std::fwrite(data, 1, num_bytes, file_) != num_bytes) {
    return UnavailableError(path_ + ": write failed: " + std::strerror(errno));
  }
  written_bytes_ += num_bytes;
  return Status::Ok();
}

Status SafetensorsWriter::Finish() {
  if (file_ == nullptr) return FailedPreconditionError(path_ + ": Finish called twice");
  if (written_bytes_ != data_bytes_) {
    return FailedPreconditionError(path_ + ": only " + std::to_string(written_bytes_) + " of " +
                                   std::to_string(data_bytes_) + " tensor bytes were written");
  }
  int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) return UnavailableError(path_ + ": close failed: " + std::strerror(errno));
  return Status::Ok();
}

Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorData>& tensors,
                            std::map<std::string, std::string> metadata) {
  std::vector<TensorSpec> specs;
  for (const TensorData& t : tensors) {
    if (t.bytes.size() != t.spec.NumBytes()) {
      return InvalidArgumentError(path + ": tensor '" + t.spec.name + "' has " + std::to_string(t.bytes.size()) +
                                  " bytes, its shape needs " + std::to_string(t.spec.NumBytes()));
    }
    specs.push_back(t.spec);
  }
  TANDEM_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(path, std::move(specs), std::move(metadata)));
  for (const TensorData& t : tensors) TANDEM_RETURN_IF_ERROR(writer->Append(t.bytes.data(), t.bytes.size()));
  return writer->Finish();
}

std::vector<std::byte> EncodeFloats(const std::vector<float>& values, DType dtype) {
  TANDEM_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) << DTypeName(dtype);
  std::vector<std::byte> out(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&out[i * 4], &values[i], 4);
      continue;
    }
    uint16_t h = dtype == DType::kF16 ? F32ToF16(values[i]) : F32ToBF16(values[i]);
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}

}  // namespace tandem::model
