#include "router/response_format.h"

#include "common/grammar/grammar.h"

namespace tandem::router {
namespace {

using nlohmann::json;

// Compiles `spec` so that its errors reach the client as a 400 on `param`.
ReadError Check(const json& spec, const std::string& param, std::string* out) {
  *out = spec.dump();
  ReadError e = CheckStructuredOutput(*out, param);
  if (e) out->clear();
  return e;
}

ReadError ReadOpenAiFormat(const json& v, std::string* out) {
  if (!v.is_object()) return BadRequest("response_format must be an object with a string \"type\"", "response_format");
  const json* type = FindField(v, "type");
  if (type == nullptr || !type->is_string()) {
    return BadRequest("response_format must be an object with a string \"type\"", "response_format.type");
  }
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return std::nullopt;
  if (kind == "json_object") return Check(json{{"type", "json_object"}}, "response_format", out);
  if (kind != "json_schema") {
    return BadRequest("response_format.type must be \"text\", \"json_object\" or \"json_schema\"",
                      "response_format.type");
  }
  const json* wrapper = FindField(v, "json_schema");
  if (wrapper == nullptr || !wrapper->is_object()) {
    return BadRequest("response_format.json_schema must be an object with a \"name\" and a \"schema\"",
                      "response_format.json_schema");
  }
  const json* name = FindField(*wrapper, "name");
  if (name != nullptr && !name->is_string()) {
    return BadRequest("response_format.json_schema.name must be a string", "response_format.json_schema.name");
  }
  const json* strict = FindField(*wrapper, "strict");
  if (strict != nullptr && !strict->is_null() && !strict->is_boolean()) {
    return BadRequest("response_format.json_schema.strict must be a boolean", "response_format.json_schema.strict");
  }
  const json* schema = FindField(*wrapper, "schema");
  if (schema == nullptr || !schema->is_object()) {
    return BadRequest("response_format.json_schema.schema must be an object (a JSON Schema)",
                      "response_format.json_schema.schema");
  }
  return Check(json{{"type", "json_schema"}, {"schema", *schema}}, "response_format.json_schema", out);
}

// guided_json: a schema object, or a JSON text of one.
ReadError ReadGuidedJson(const json& v, std::string* out) {
  json schema = v;
  if (v.is_string()) {
    schema = json::parse(v.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return BadRequest("guided_json must be a JSON Schema object or its JSON text", "guided_json");
  }
  if (!schema.is_object()) return BadRequest("guided_json must be a JSON Schema object or its JSON text", "guided_json");
  return Check(json{{"type", "json_schema"}, {"schema", schema}}, "guided_json", out);
}

}  // namespace

ReadError CheckStructuredOutput(const std::string& spec, const std::string& param) {
  StatusOr<std::shared_ptr<const grammar::Grammar>> compiled = grammar::Grammar::Compile(spec);
  if (!compiled.ok()) return BadRequest(param + ": " + compiled.status().message(), param);
  return std::nullopt;
}

ReadError ReadResponseFormat(const json& body, std::string* spec) {
  spec->clear();
  const json* format = FindField(body, "response_format");
  if (format != nullptr && !format->is_null()) {
    if (ReadError e = ReadOpenAiFormat(*format, spec)) return e;
  }
  const json* guided = FindField(body, "guided_json");
  if (guided == nullptr || guided->is_null()) return std::nullopt;
  if (!spec->empty()) {
    return BadRequest("response_format and guided_json cannot both ask for a structure", "guided_json");
  }
  return ReadGuidedJson(*guided, spec);
}

}  // namespace tandem::router
