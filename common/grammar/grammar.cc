#include "common/grammar/grammar.h"

#include <nlohmann/json.hpp>

#include "common/base/json_depth.h"
#include "common/grammar/schema_compiler.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

Status CompileParsed(const Json& spec, std::vector<Node>* nodes, int* root) {
  if (!spec.is_object()) return InvalidArgumentError("response_format: must be a JSON object");
  if (!spec.contains("type") || !spec.at("type").is_string()) {
    return InvalidArgumentError("response_format.type: must be \"json_object\" or \"json_schema\"");
  }
  const std::string type = spec.at("type").get<std::string>();
  for (const auto& [k, v] : spec.items()) {
    if (k != "type" && k != "schema" && k != "name" && k != "strict" && k != "description") {
      return InvalidArgumentError("response_format: unknown field '" + k + "'");
    }
  }
  if (type == "json_object") {
    if (spec.contains("schema")) return InvalidArgumentError("response_format.schema: not allowed with json_object");
    SchemaCompiler compiler(spec);
    *root = compiler.AnyObject();
    *nodes = compiler.TakeNodes();
  } else if (type == "json_schema") {
    if (!spec.contains("schema")) return InvalidArgumentError("response_format.schema: missing");
    SchemaCompiler compiler(spec.at("schema"));
    TANDEM_ASSIGN_OR_RETURN(*root, compiler.CompileRoot());
    *nodes = compiler.TakeNodes();
  } else {
    return InvalidArgumentError("response_format.type: must be \"json_object\" or \"json_schema\", not \"" + type +
                                "\"");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const Grammar>> Grammar::Compile(std::string_view spec_json) {
  if (spec_json.size() > kMaxSpecBytes) {
    return InvalidArgumentError("response_format: larger than " + std::to_string(kMaxSpecBytes) + " bytes");
  }
  if (JsonNestingDepth(spec_json, kMaxSpecNesting) > kMaxSpecNesting) {
    return InvalidArgumentError("response_format: nested deeper than " + std::to_string(kMaxSpecNesting) +
                                " levels");
  }
  try {
    const Json spec = Json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
    if (spec.is_discarded()) return InvalidArgumentError("response_format: malformed JSON");
    std::vector<Node> nodes;
    int root = -1;
    TANDEM_RETURN_IF_ERROR(CompileParsed(spec, &nodes, &root));
    TANDEM_RETURN_IF_ERROR(DeriveGrammar(&nodes, &root));
    return std::shared_ptr<const Grammar>(new Grammar(std::move(nodes), root));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("response_format: ") + e.what());
  }
}

}  // namespace tandem::grammar
