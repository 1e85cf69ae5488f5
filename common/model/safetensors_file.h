// SafetensorsFile: one memory-mapped `.safetensors` file with a validated
// header (see safetensors_header.h). Tensor views point into the map and stay
// valid while the SafetensorsFile lives.
// Thread rule: immutable after Open; safe to read from any thread.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/mapped_file.h"
#include "common/model/safetensors_header.h"
#include "common/model/weights.h"

namespace tandem::model {

class SafetensorsFile {
 public:
  // Maps and validates `path`; errors name the file (and the tensor).
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // NotFound naming the file and the tensor.
  StatusOr<TensorView> Get(const std::string& name) const;
  bool Contains(const std::string& name) const { return index_.count(name) != 0; }
  // MappedFile::WillNeed over the tensor's bytes; nothing for an unknown name.
  void WillNeed(const std::string& name) const;
  // Tensor names in file (offset) order.
  std::vector<std::string> Names() const;
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const std::string& path() const { return file_->path(); }

 private:
  SafetensorsFile(std::unique_ptr<MappedFile> file, SafetensorsHeader header);

  std::unique_ptr<MappedFile> file_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in header_.tensors
};

}  // namespace tandem::model
