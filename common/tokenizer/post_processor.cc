#include "common/tokenizer/post_processor.h"

#include <string>

namespace tandem::tokenizer {
namespace {

constexpr int kMaxDepth = 16;

// [token, id] pairs of Roberta/Bert processors.
StatusOr<TokenId> PairId(const nlohmann::json& spec, const char* key) {
  const auto it = spec.find(key);
  if (it == spec.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    return InvalidArgumentError(std::string("post_processor needs '") + key + "': [token, id]");
  }
  return (*it)[1].get<TokenId>();
}

}  // namespace

Status PostProcessor::Parse(const nlohmann::json& spec, int depth, PostProcessor* out) {
  if (spec.is_null()) return Status::Ok();
  if (depth > kMaxDepth) return InvalidArgumentError("post_processor nesting too deep");
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return InvalidArgumentError("post_processor must be an object with a string 'type'");
  }
  const std::string type = spec["type"].get<std::string>();
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    const auto it = spec.find("processors");
    if (it == spec.end() || !it->is_array()) {
      return InvalidArgumentError("post_processor Sequence needs a 'processors' array");
    }
    for (const auto& child : *it) TANDEM_RETURN_IF_ERROR(Parse(child, depth + 1, out));
    return Status::Ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    TANDEM_ASSIGN_OR_RETURN(TokenId cls, PairId(spec, "cls"));
    TANDEM_ASSIGN_OR_RETURN(TokenId sep, PairId(spec, "sep"));
    out->has_template_ = true;
    out->prefix_ = {cls};
    out->suffix_ = {sep};
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return InvalidArgumentError("unsupported post_processor type '" + type + "'");
  }
  const auto single = spec.find("single");
  const auto specials = spec.find("special_tokens");
  if (single == spec.end() || !single->is_array()) {
    return InvalidArgumentError("TemplateProcessing needs a 'single' array");
  }
  out->has_template_ = true;
  out->prefix_.clear();
  out->suffix_.clear();
  bool seen_sequence = false;
  for (const auto& item : *single) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const auto st = item.find("SpecialToken");
    if (st == item.end() || !st->is_object() || !st->contains("id") || !(*st)["id"].is_string()) {
      return InvalidArgumentError("TemplateProcessing item must be Sequence or SpecialToken");
    }
    const std::string name = (*st)["id"].get<std::string>();
    if (specials == spec.end() || !specials->is_object() || !specials->contains(name) ||
        !(*specials)[name].contains("ids") || !(*specials)[name]["ids"].is_array()) {
      return InvalidArgumentError("TemplateProcessing special token '" + name + "' has no ids");
    }
    for (const auto& id : (*specials)[name]["ids"]) {
      if (!id.is_number_integer()) return InvalidArgumentError("special token ids must be integers");
      (seen_sequence ? out->suffix_ : out->prefix_).push_back(id.get<TokenId>());
    }
  }
  return Status::Ok();
}

StatusOr<PostProcessor> PostProcessor::FromJson(const nlohmann::json& spec) {
  PostProcessor p;
  TANDEM_RETURN_IF_ERROR(Parse(spec, 0, &p));
  return p;
}

std::vector<TokenId> PostProcessor::Apply(std::vector<TokenId> ids) const {
  if (!has_template_) return ids;
  std::vector<TokenId> out = prefix_;
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace tandem::tokenizer
