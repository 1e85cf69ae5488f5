// Turns a JSON Schema (the practical subset listed in README.md) into grammar
// nodes. Errors name the place in the schema and the keyword, e.g.
// "schema.properties.age: unsupported keyword 'pattern'".
// Thread rule: single use, one thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"
#include "common/grammar/grammar_node.h"

namespace tandem::grammar {

// Most nodes one schema may compile to.
inline constexpr size_t kMaxNodes = 20000;
// Most values in one enum.
inline constexpr size_t kMaxEnumValues = 4096;

class SchemaCompiler {
 public:
  // `root` is the whole schema document ($refs resolve against it); it must outlive this object.
  explicit SchemaCompiler(const nlohmann::ordered_json& root) : root_(root) {}

  // Compiles the root schema; returns its node index.
  StatusOr<int> CompileRoot();
  // A node for any JSON object (keys free, values any JSON value).
  int AnyObject();

  std::vector<Node> TakeNodes() { return std::move(nodes_); }

 private:
  using Json = nlohmann::ordered_json;

  StatusOr<int> Compile(const Json& schema, const std::string& path);
  StatusOr<int> CompileRef(const Json& schema, const std::string& path);
  StatusOr<int> CompileAnyOf(const Json& schema, const std::string& path, const char* keyword);
  StatusOr<int> CompileEnum(const Json& schema, const std::string& path, const std::vector<std::string>& types);
  StatusOr<int> CompileType(const Json& schema, const std::string& path, const std::string& type);
  StatusOr<int> CompileObject(const Json& schema, const std::string& path);
  StatusOr<int> CompileArray(const Json& schema, const std::string& path);
  StatusOr<int> CompileString(const Json& schema, const std::string& path);
  StatusOr<std::vector<std::string>> ReadTypes(const Json& schema, const std::string& path);
  StatusOr<int> AddNode(Node node);
  int AnyValue();

  const Json& root_;
  std::vector<Node> nodes_;
  std::map<std::string, int> ref_nodes_;  // "$ref" string -> node (an alias until compiled)
  int any_value_ = -1;
  int any_object_ = -1;
  int depth_ = 0;  // recursion depth of Compile
};

}  // namespace tandem::grammar
