#include "tools/make_model/tokenizer_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/model/json_limits.h"
#include "tools/make_model/tiny_tokenizer.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kTinyMerges = 240;
constexpr size_t kMaxTokenizerBytes = 256 << 20;

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text << "\n";
  return out.good() ? Status::Ok() : UnavailableError(path + ": write failed");
}

// bos_token / eos_token in tokenizer_config.json: a string or {"content": ...}.
std::string TokenContent(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

// content -> id of every token in tokenizer.json (model vocab and added tokens); max id.
Status ReadTokenIds(const std::string& path, std::map<std::string, int>* ids, int* max_id) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path, kMaxTokenizerBytes));
  TANDEM_ASSIGN_OR_RETURN(json root, model::ParseJsonText(text, kMaxTokenizerBytes, 64, path));
  *max_id = -1;
  auto note = [&](const std::string& content, const json& id) {
    if (!id.is_number_integer()) return;
    (*ids)[content] = id.get<int>();
    *max_id = std::max(*max_id, id.get<int>());
  };
  if (root.contains("model") && root["model"].is_object() && root["model"].contains("vocab") &&
      root["model"]["vocab"].is_object()) {
    for (const auto& [content, id] : root["model"]["vocab"].items()) note(content, id);
  }
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& token : root["added_tokens"]) {
      if (token.is_object() && token.contains("content") && token["content"].is_string() && token.contains("id")) {
        note(token["content"].get<std::string>(), token["id"]);
      }
    }
  }
  return Status::Ok();
}

Status ApplySpecialIds(const std::string& config_path, const std::map<std::string, int>& ids,
                       model::ModelConfig* config) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(config_path, kMaxTokenizerBytes));
  TANDEM_ASSIGN_OR_RETURN(json root, model::ParseJsonText(text, kMaxTokenizerBytes, 64, config_path));
  if (!root.is_object()) return InvalidArgumentError(config_path + ": not a JSON object");
  auto bos = ids.find(TokenContent(root, "bos_token"));
  if (bos != ids.end()) config->bos_token_id = bos->second;
  auto eos = ids.find(TokenContent(root, "eos_token"));
  if (eos != ids.end()) {
    auto& list = config->eos_token_ids;
    if (std::find(list.begin(), list.end(), eos->second) == list.end()) list = {eos->second};
  }
  return Status::Ok();
}

}  // namespace

Status WriteTinyTokenizer(const std::string& dir, model::ModelConfig* config) {
  TinyTokenizer tokenizer = BuildTinyTokenizer(kTinyMerges, config->max_position_embeddings);
  if (tokenizer.num_tokens > config->vocab_size) {
    return InvalidArgumentError("the built-in tokenizer has " + std::to_string(tokenizer.num_tokens) +
                                " tokens but vocab_size is " + std::to_string(config->vocab_size) +
                                "; raise --vocab-size or pass --tokenizer-dir");
  }
  TANDEM_RETURN_IF_ERROR(WriteText(dir + "/tokenizer.json", tokenizer.tokenizer_json));
  TANDEM_RETURN_IF_ERROR(WriteText(dir + "/tokenizer_config.json", tokenizer.tokenizer_config_json));
  TANDEM_RETURN_IF_ERROR(WriteText(dir + "/special_tokens_map.json", tokenizer.special_tokens_map_json));
  config->bos_token_id = tokenizer.bos_token_id;
  config->eos_token_ids = tokenizer.eos_token_ids;
  return Status::Ok();
}

Status CopyTokenizer(const std::string& source_dir, const std::string& dir, model::ModelConfig* config) {
  const std::string tokenizer_json = source_dir + "/tokenizer.json";
  if (!fs::exists(tokenizer_json) && !fs::exists(source_dir + "/tokenizer.model")) {
    return NotFoundError(source_dir + ": has neither tokenizer.json nor tokenizer.model");
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                           "tokenizer.model"}) {
    fs::path from = fs::path(source_dir) / name;
    if (!fs::exists(from)) continue;
    std::error_code ec;
    fs::copy_file(from, fs::path(dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return UnavailableError(from.string() + ": copy failed: " + ec.message());
  }
  if (!fs::exists(tokenizer_json)) return Status::Ok();
  std::map<std::string, int> ids;
  int max_id = -1;
  TANDEM_RETURN_IF_ERROR(ReadTokenIds(tokenizer_json, &ids, &max_id));
  if (max_id >= config->vocab_size) {
    return InvalidArgumentError(tokenizer_json + ": has token id " + std::to_string(max_id) + " but vocab_size is " +
                                std::to_string(config->vocab_size));
  }
  if (!fs::exists(source_dir + "/tokenizer_config.json")) return Status::Ok();
  return ApplySpecialIds(source_dir + "/tokenizer_config.json", ids, config);
}

}  // namespace tandem::tools
