#include "common/grammar/schema_compiler.h"

#include <algorithm>
#include <set>

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate; they never change which documents are valid.
const std::set<std::string>& IgnoredKeywords() {
  static const std::set<std::string> k = {"description", "title",    "default",  "examples", "$schema",
                                          "$comment",    "$id",      "deprecated", "readOnly", "writeOnly",
                                          "$defs",       "definitions"};
  return k;
}

// Keywords by the type they constrain.
const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeywords = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength"};
const std::set<std::string> kOtherKeywords = {"type", "enum", "const", "anyOf", "oneOf", "$ref"};
const std::set<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

bool IsHandled(const std::string& k) {
  return kObjectKeywords.count(k) || kArrayKeywords.count(k) || kStringKeywords.count(k) || kOtherKeywords.count(k);
}

// The keywords of `schema` other than annotations, except those in `allowed`.
std::string FirstOtherKeyword(const Json& schema, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : schema.items()) {
    if (!IgnoredKeywords().count(k) && !allowed.count(k)) return k;
  }
  return "";
}

bool HasAny(const Json& schema, const std::set<std::string>& keywords) {
  for (const auto& k : keywords) {
    if (schema.contains(k)) return true;
  }
  return false;
}

bool ValueHasType(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (v.is_number_integer()) return true;  // "integer"
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<long long>(d));
  }
  return false;
}

StatusOr<int> ReadCount(const Json& schema, const std::string& path, const char* keyword, int fallback) {
  if (!schema.contains(keyword)) return fallback;
  const Json& v = schema.at(keyword);
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1 << 20)) {
    return InvalidArgumentError(path + "." + keyword + ": must be an integer from 0 to 1048576");
  }
  return static_cast<int>(v.get<long long>());
}

// "~1" -> "/", "~0" -> "~" (JSON Pointer, RFC 6901).
std::string UnescapePointerToken(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out.push_back(token[i + 1] == '0' ? '~' : '/');
      ++i;
    } else {
      out.push_back(token[i]);
    }
  }
  return out;
}

}  // namespace

StatusOr<int> SchemaCompiler::AddNode(Node node) {
  if (nodes_.size() >= kMaxNodes) return InvalidArgumentError("schema: too large (more than 20000 subschemas)");
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size() - 1);
}

int SchemaCompiler::AnyValue() {
  if (any_value_ >= 0) return any_value_;
  // Built directly (bounded count), so AddNode's limit does not apply.
  any_value_ = static_cast<int>(nodes_.size());
  nodes_.emplace_back();  // kAnyOf, alternatives filled below
  Node object;
  object.kind = NodeKind::kObject;
  object.additional = any_value_;
  nodes_.push_back(object);
  any_object_ = static_cast<int>(nodes_.size() - 1);
  Node array;
  array.kind = NodeKind::kArray;
  array.items = any_value_;
  nodes_.push_back(array);
  Node string;
  string.kind = NodeKind::kString;
  nodes_.push_back(string);
  Node number;
  number.kind = NodeKind::kNumber;
  nodes_.push_back(number);
  Node literal;
  literal.kind = NodeKind::kLiteral;
  literal.literals = {"false", "null", "true"};
  nodes_.push_back(literal);
  const int first = any_value_ + 1;
  nodes_[any_value_].alternatives = {first, first + 1, first + 2, first + 3, first + 4};
  return any_value_;
}

int SchemaCompiler::AnyObject() {
  AnyValue();
  return any_object_;
}

StatusOr<int> SchemaCompiler::CompileRoot() { return Compile(root_, "schema"); }

StatusOr<int> SchemaCompiler::Compile(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return AnyValue();
    return InvalidArgumentError(path + ": the schema 'false' allows no value");
  }
  if (!schema.is_object()) return InvalidArgumentError(path + ": a schema must be an object or a boolean");
  if (++depth_ > 64) return InvalidArgumentError(path + ": schema nested too deeply");
  struct DepthGuard {
    int* d;
    ~DepthGuard() { --*d; }
  } guard{&depth_};
  for (const auto& [k, v] : schema.items()) {
    if (!IgnoredKeywords().count(k) && !IsHandled(k)) {
      return InvalidArgumentError(path + ": unsupported keyword '" + k + "'");
    }
  }
  if (schema.contains("$ref")) return CompileRef(schema, path);
  if (schema.contains("anyOf")) return CompileAnyOf(schema, path, "anyOf");
  if (schema.contains("oneOf")) return CompileAnyOf(schema, path, "oneOf");
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> types, ReadTypes(schema, path));
  if (schema.contains("enum") || schema.contains("const")) return CompileEnum(schema, path, types);
  if (types.empty()) {
    // No type: infer it from the keywords, or any value.
    const bool object = HasAny(schema, kObjectKeywords);
    const bool array = HasAny(schema, kArrayKeywords);
    const bool string = HasAny(schema, kStringKeywords);
    if (object + array + string > 1) {
      return InvalidArgumentError(path + ": keywords of several types without 'type'");
    }
    if (!object && !array && !string) return AnyValue();
    types = {object ? "object" : array ? "array" : "string"};
  }
  // Keywords that no listed type uses are mistakes (e.g. minLength on an integer).
  for (const auto& [k, v] : schema.items()) {
    const bool used = (kObjectKeywords.count(k) && std::count(types.begin(), types.end(), "object")) ||
                      (kArrayKeywords.count(k) && std::count(types.begin(), types.end(), "array")) ||
                      (kStringKeywords.count(k) && std::count(types.begin(), types.end(), "string")) ||
                      !IsHandled(k) || kOtherKeywords.count(k);
    if (!used) return InvalidArgumentError(path + ": keyword '" + k + "' does not apply to the schema's type");
  }
  if (types.size() == 1) return CompileType(schema, path, types[0]);
  Node any_of;
  any_of.kind = NodeKind::kAnyOf;
  for (const auto& type : types) {
    TANDEM_ASSIGN_OR_RETURN(int alt, CompileType(schema, path, type));
    any_of.alternatives.push_back(alt);
  }
  return AddNode(std::move(any_of));
}

StatusOr<std::vector<std::string>> SchemaCompiler::ReadTypes(const Json& schema, const std::string& path) {
  std::vector<std::string> types;
  if (!schema.contains("type")) return types;
  const Json& t = schema.at("type");
  const std::string error = path + ".type: must be a type name or a non-empty array of type names";
  if (t.is_string()) {
    types.push_back(t.get<std::string>());
  } else if (t.is_array() && !t.empty()) {
    for (const auto& e : t) {
      if (!e.is_string()) return InvalidArgumentError(error);
      types.push_back(e.get<std::string>());
    }
  } else {
    return InvalidArgumentError(error);
  }
  for (const auto& type : types) {
    if (!kTypes.count(type)) return InvalidArgumentError(path + ".type: unknown type '" + type + "'");
    if (std::count(types.begin(), types.end(), type) > 1) {
      return InvalidArgumentError(path + ".type: type '" + type + "' listed twice");
    }
  }
  return types;
}

StatusOr<int> SchemaCompiler::CompileRef(const Json& schema, const std::string& path) {
  if (std::string other = FirstOtherKeyword(schema, {"$ref"}); !other.empty()) {
    return InvalidArgumentError(path + ": '$ref' cannot be combined with '" + other + "'");
  }
  if (!schema.at("$ref").is_string()) return InvalidArgumentError(path + ".$ref: must be a string");
  const std::string ref = schema.at("$ref").get<std::string>();
  if (auto it = ref_nodes_.find(ref); it != ref_nodes_.end()) return it->second;
  const Json* target = &root_;
  std::string target_path = "schema";
  if (ref != "#") {
    const bool defs = ref.rfind("#/$defs/", 0) == 0;
    const bool definitions = ref.rfind("#/definitions/", 0) == 0;
    if (!defs && !definitions) {
      return InvalidArgumentError(path + ".$ref: only local references '#', '#/$defs/...' and "
                                  "'#/definitions/...' are supported, not '" + ref + "'");
    }
    size_t start = 2;  // after "#/"
    while (start <= ref.size()) {
      size_t end = ref.find('/', start);
      if (end == std::string::npos) end = ref.size();
      const std::string token = UnescapePointerToken(ref.substr(start, end - start));
      if (!target->is_object() || !target->contains(token)) {
        return InvalidArgumentError(path + ".$ref: cannot resolve '" + ref + "'");
      }
      target = &target->at(token);
      target_path += "." + token;
      start = end + 1;
    }
  }
  Node alias;
  alias.kind = NodeKind::kAlias;
  TANDEM_ASSIGN_OR_RETURN(int id, AddNode(std::move(alias)));
  ref_nodes_[ref] = id;
  TANDEM_ASSIGN_OR_RETURN(int resolved, Compile(*target, target_path));
  nodes_[id].target = resolved;
  return id;
}

StatusOr<int> SchemaCompiler::CompileAnyOf(const Json& schema, const std::string& path, const char* keyword) {
  if (std::string other = FirstOtherKeyword(schema, {keyword}); !other.empty()) {
    return InvalidArgumentError(path + ": '" + keyword + "' cannot be combined with '" + other + "'");
  }
  const Json& alts = schema.at(keyword);
  if (!alts.is_array() || alts.empty()) {
    return InvalidArgumentError(path + "." + keyword + ": must be a non-empty array of schemas");
  }
  Node any_of;
  any_of.kind = NodeKind::kAnyOf;
  for (size_t i = 0; i < alts.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(int alt, Compile(alts[i], path + "." + keyword + "[" + std::to_string(i) + "]"));
    any_of.alternatives.push_back(alt);
  }
  return AddNode(std::move(any_of));
}

StatusOr<int> SchemaCompiler::CompileEnum(const Json& schema, const std::string& path,
                                          const std::vector<std::string>& types) {
  if (std::string other = FirstOtherKeyword(schema, {"enum", "const", "type"}); !other.empty()) {
    return InvalidArgumentError(path + ": 'enum'/'const' cannot be combined with '" + other + "'");
  }
  if (schema.contains("enum") && schema.contains("const")) {
    return InvalidArgumentError(path + ": 'enum' and 'const' together");
  }
  std::vector<Json> values;
  if (schema.contains("const")) {
    values.push_back(schema.at("const"));
  } else {
    const Json& e = schema.at("enum");
    if (!e.is_array() || e.empty()) return InvalidArgumentError(path + ".enum: must be a non-empty array");
    if (e.size() > kMaxEnumValues) return InvalidArgumentError(path + ".enum: more than 4096 values");
    values.assign(e.begin(), e.end());
  }
  Node literal;
  literal.kind = NodeKind::kLiteral;
  for (const Json& v : values) {
    const bool typed = types.empty() || std::any_of(types.begin(), types.end(),
                                                    [&](const std::string& t) { return ValueHasType(v, t); });
    if (typed) literal.literals.push_back(v.dump());
  }
  if (literal.literals.empty()) {
    return InvalidArgumentError(path + ": no value of 'enum'/'const' has the schema's type");
  }
  std::sort(literal.literals.begin(), literal.literals.end());
  literal.literals.erase(std::unique(literal.literals.begin(), literal.literals.end()), literal.literals.end());
  return AddNode(std::move(literal));
}

StatusOr<int> SchemaCompiler::CompileType(const Json& schema, const std::string& path, const std::string& type) {
  if (type == "object") return CompileObject(schema, path);
  if (type == "array") return CompileArray(schema, path);
  if (type == "string") return CompileString(schema, path);
  Node node;
  if (type == "number" || type == "integer") {
    node.kind = NodeKind::kNumber;
    node.integer_only = type == "integer";
  } else {
    node.kind = NodeKind::kLiteral;
    node.literals = type == "boolean" ? std::vector<std::string>{"false", "true"} : std::vector<std::string>{"null"};
  }
  return AddNode(std::move(node));
}

StatusOr<int> SchemaCompiler::CompileObject(const Json& schema, const std::string& path) {
  Node node;
  node.kind = NodeKind::kObject;
  if (schema.contains("properties")) {
    const Json& props = schema.at("properties");
    if (!props.is_object()) return InvalidArgumentError(path + ".properties: must be an object");
    for (const auto& [name, sub] : props.items()) {
      Property p;
      const std::string quoted = Json(name).dump();
      p.key = quoted.substr(1, quoted.size() - 2);
      TANDEM_ASSIGN_OR_RETURN(p.node, Compile(sub, path + ".properties." + name));
      node.properties.push_back(std::move(p));
    }
  }
  if (schema.contains("required")) {
    const Json& req = schema.at("required");
    if (!req.is_array()) return InvalidArgumentError(path + ".required: must be an array of strings");
    for (const auto& r : req) {
      if (!r.is_string()) return InvalidArgumentError(path + ".required: must be an array of strings");
      const std::string quoted = Json(r.get<std::string>()).dump();
      const std::string key = quoted.substr(1, quoted.size() - 2);
      auto it = std::find_if(node.properties.begin(), node.properties.end(),
                             [&](const Property& p) { return p.key == key; });
      if (it == node.properties.end()) {
        return InvalidArgumentError(path + ".required: '" + r.get<std::string>() +
                                    "' is not in 'properties' (required properties must be listed)");
      }
      it->required = true;
    }
  }
  if (schema.contains("additionalProperties")) {
    const Json& add = schema.at("additionalProperties");
    if (!(add.is_boolean() && !add.get<bool>())) {
      TANDEM_ASSIGN_OR_RETURN(node.additional, Compile(add, path + ".additionalProperties"));
    }
  }
  return AddNode(std::move(node));
}

StatusOr<int> SchemaCompiler::CompileArray(const Json& schema, const std::string& path) {
  Node node;
  node.kind = NodeKind::kArray;
  if (schema.contains("prefixItems")) {
    const Json& prefix = schema.at("prefixItems");
    if (!prefix.is_array()) return InvalidArgumentError(path + ".prefixItems: must be an array of schemas");
    for (size_t i = 0; i < prefix.size(); ++i) {
      TANDEM_ASSIGN_OR_RETURN(int item, Compile(prefix[i], path + ".prefixItems[" + std::to_string(i) + "]"));
      node.prefix_items.push_back(item);
    }
  }
  const Json items = schema.contains("items") ? schema.at("items") : Json(true);
  if (items.is_array()) return InvalidArgumentError(path + ".items: must be a schema (use 'prefixItems' for tuples)");
  if (!(items.is_boolean() && !items.get<bool>())) {
    TANDEM_ASSIGN_OR_RETURN(node.items, Compile(items, path + ".items"));
  }
  TANDEM_ASSIGN_OR_RETURN(node.min_items, ReadCount(schema, path, "minItems", 0));
  TANDEM_ASSIGN_OR_RETURN(node.max_items, ReadCount(schema, path, "maxItems", -1));
  if (node.items < 0) {
    const int prefix = static_cast<int>(node.prefix_items.size());
    node.max_items = node.max_items < 0 ? prefix : std::min(node.max_items, prefix);
  }
  if (node.max_items >= 0 && node.min_items > node.max_items) {
    return InvalidArgumentError(path + ".minItems: larger than maxItems (or than the items allowed)");
  }
  return AddNode(std::move(node));
}

StatusOr<int> SchemaCompiler::CompileString(const Json& schema, const std::string& path) {
  Node node;
  node.kind = NodeKind::kString;
  TANDEM_ASSIGN_OR_RETURN(node.min_length, ReadCount(schema, path, "minLength", 0));
  TANDEM_ASSIGN_OR_RETURN(node.max_length, ReadCount(schema, path, "maxLength", -1));
  if (node.max_length >= 0 && node.min_length > node.max_length) {
    return InvalidArgumentError(path + ".minLength: larger than maxLength");
  }
  return AddNode(std::move(node));
}

}  // namespace tandem::grammar
