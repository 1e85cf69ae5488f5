#include "common/model/safetensors_file.h"

namespace tandem::model {

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  TANDEM_ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensorsHeader(file->data(), file->size(), path));
  return std::unique_ptr<SafetensorsFile>(new SafetensorsFile(std::move(file), std::move(header)));
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<MappedFile> file, SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

StatusOr<TensorView> SafetensorsFile::Get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return NotFoundError(path() + ": no tensor '" + name + "'");
  const SafetensorsEntry& entry = header_.tensors[it->second];
  TensorView view;
  view.name = entry.name;
  view.dtype = entry.dtype;
  view.shape = entry.shape;
  view.num_bytes = entry.end - entry.begin;
  // ParseSafetensorsHeader proved [data_offset + begin, data_offset + end) lies in the file.
  view.data = file_->data() + header_.data_offset + entry.begin;
  return view;
}

void SafetensorsFile::WillNeed(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  const SafetensorsEntry& entry = header_.tensors[it->second];
  file_->WillNeed(file_->data() + header_.data_offset + entry.begin, entry.end - entry.begin);
}

std::vector<std::string> SafetensorsFile::Names() const {
  std::vector<std::string> names;
  names.reserve(header_.tensors.size());
  for (const SafetensorsEntry& entry : header_.tensors) names.push_back(entry.name);
  return names;
}

}  // namespace tandem::model
