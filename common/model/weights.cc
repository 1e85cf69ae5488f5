// ModelWeights::Open: a single `model.safetensors` or the shards listed in
// `model.safetensors.index.json`, each memory-mapped and validated.
#include "common/model/weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <unordered_map>

#include "common/model/json_limits.h"
#include "common/model/safetensors_file.h"

namespace tandem::model {
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr size_t kMaxIndexBytes = 64 << 20;
constexpr int kMaxIndexDepth = 8;

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Shard names must stay inside the model directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

class SafetensorsWeights : public ModelWeights {
 public:
  using ModelWeights::Get;
  StatusOr<TensorView> Get(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return NotFoundError("model weights: no tensor '" + name + "'");
    return files_[it->second]->Get(name);
  }
  bool Contains(const std::string& name) const override { return tensors_.count(name) != 0; }
  void WillNeed(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it != tensors_.end()) files_[it->second]->WillNeed(name);
  }
  std::vector<std::string> Names() const override {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& [name, file] : tensors_) names.push_back(name);
    return names;
  }

  Status AddFile(const std::string& dir, const std::string& file_name) {
    std::string path = dir + "/" + file_name;
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    for (const std::string& name : file->Names()) {
      if (!tensors_.emplace(name, files_.size()).second) {
        return InvalidArgumentError(path + ": tensor '" + name + "' also appears in another shard");
      }
    }
    files_.push_back(std::move(file));
    file_names_.push_back(file_name);
    return Status::Ok();
  }

  // Every tensor the index lists must be in the shard it names.
  Status CheckIndex(const std::string& index_path,
                    const std::vector<std::pair<std::string, std::string>>& weight_map) const {
    for (const auto& [tensor, shard] : weight_map) {
      auto it = tensors_.find(tensor);
      if (it == tensors_.end() || file_names_[it->second] != shard) {
        return NotFoundError(index_path + ": tensor '" + tensor + "' is not in shard '" + shard + "'");
      }
    }
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> file_names_;    // parallel to files_: name inside the directory
  std::map<std::string, size_t> tensors_;  // name -> index into files_
};

// weight_map of the index, in order, plus the distinct shard names.
Status ReadIndex(const std::string& index_path, std::vector<std::pair<std::string, std::string>>* weight_map,
                 std::vector<std::string>* shards) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path, kMaxIndexBytes));
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json root, ParseJsonText(text, kMaxIndexBytes, kMaxIndexDepth, index_path));
  auto map = root.is_object() ? root.find("weight_map") : root.end();
  if (!root.is_object() || map == root.end() || !map->is_object()) {
    return InvalidArgumentError(index_path + ": needs a 'weight_map' object");
  }
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>())) {
      return InvalidArgumentError(index_path + ": tensor '" + tensor +
                                  "' must map to a file name in the model directory");
    }
    weight_map->emplace_back(tensor, shard.get<std::string>());
    if (std::find(shards->begin(), shards->end(), weight_map->back().second) == shards->end()) {
      shards->push_back(weight_map->back().second);
    }
  }
  if (shards->empty()) return InvalidArgumentError(index_path + ": 'weight_map' is empty");
  return Status::Ok();
}

StatusOr<std::unique_ptr<ModelWeights>> OpenSharded(const std::string& dir) {
  std::string index_path = dir + "/" + kIndexFile;
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::vector<std::string> shards;
  TANDEM_RETURN_IF_ERROR(ReadIndex(index_path, &weight_map, &shards));
  auto weights = std::make_unique<SafetensorsWeights>();
  for (const std::string& shard : shards) {
    std::string path = dir + "/" + shard;
    if (!FileExists(path)) {
      return NotFoundError(
          index_path + ": shard '" + shard + "' (for tensor '" +
          std::find_if(weight_map.begin(), weight_map.end(), [&](const auto& e) { return e.second == shard; })->first +
          "') does not exist");
    }
    TANDEM_RETURN_IF_ERROR(weights->AddFile(dir, shard));
  }
  TANDEM_RETURN_IF_ERROR(weights->CheckIndex(index_path, weight_map));
  return std::unique_ptr<ModelWeights>(std::move(weights));
}

}  // namespace

int64_t TensorView::NumElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

float TensorView::GetFloat(int64_t i) const {
  TANDEM_CHECK(i >= 0 && i < NumElements()) << name << ": index " << i;
  const std::byte* p = data + static_cast<size_t>(i) * DTypeSize(dtype);
  uint16_t half = 0;
  float value = 0;
  switch (dtype) {
    case DType::kF32: std::memcpy(&value, p, 4); return value;
    case DType::kF16: std::memcpy(&half, p, 2); return F16ToF32(half);
    case DType::kBF16: std::memcpy(&half, p, 2); return BF16ToF32(half);
    default: TANDEM_CHECK(false) << name << ": GetFloat on dtype " << DTypeName(dtype);
  }
  return 0;
}

StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Open(const std::string& dir) {
  try {
    if (FileExists(dir + "/" + kIndexFile)) return OpenSharded(dir);
    std::string path = dir + "/" + kSingleFile;
    if (!FileExists(path)) {
      return NotFoundError(dir + ": has neither " + kSingleFile + " nor " + kIndexFile);
    }
    auto weights = std::make_unique<SafetensorsWeights>();
    TANDEM_RETURN_IF_ERROR(weights->AddFile(dir, kSingleFile));
    return std::unique_ptr<ModelWeights>(std::move(weights));
  } catch (const std::exception& e) {  // e.g. std::bad_alloc on a huge index
    return InternalError(dir + ": loading weights failed: " + e.what());
  }
}

StatusOr<TensorView> ModelWeights::Get(const std::string& name, const std::vector<int64_t>& shape) const {
  TANDEM_ASSIGN_OR_RETURN(TensorView view, Get(name));
  if (view.shape != shape) {
    return InvalidArgumentError("model weights: tensor '" + name + "' has shape " + ShapeString(view.shape) +
                                ", expected " + ShapeString(shape));
  }
  return view;
}

}  // namespace tandem::model
