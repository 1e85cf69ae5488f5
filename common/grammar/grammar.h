// Grammar: a response format compiled to a byte-level grammar of JSON values.
//
// The spec (also the cache key) is {"type":"json_object"} or
// {"type":"json_schema","schema":{...}}; README.md lists the supported subset
// and the bounds on whitespace, numbers and nesting. A Grammar is independent
// of any vocabulary. Thread rule: immutable after Compile; thread-safe to share.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/grammar/grammar_node.h"

namespace tandem::grammar {

// Largest spec accepted, in bytes.
inline constexpr size_t kMaxSpecBytes = 1 << 20;
// Deepest '{'/'[' nesting accepted in the spec text.
inline constexpr int kMaxSpecNesting = 64;

class Grammar {
 public:
  // InvalidArgument naming the place and keyword ("schema.properties.age: unsupported keyword
  // 'pattern'") for malformed specs, unsupported keywords, bad values, unresolvable or circular
  // $refs, schemas no document satisfies (e.g. minItems > maxItems, an empty enum, a required
  // recursion) and specs over the size or nesting limits. Never throws.
  static StatusOr<std::shared_ptr<const Grammar>> Compile(std::string_view spec_json);

  // REQUIRES: 0 <= id < num_nodes(). Never kAlias for an id reachable from root().
  const Node& node(int id) const { return nodes_[id]; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  // The node of the whole document.
  int root() const { return root_; }

 private:
  Grammar(std::vector<Node> nodes, int root) : nodes_(std::move(nodes)), root_(root) {}

  std::vector<Node> nodes_;
  int root_ = -1;
};

// Resolves aliases and derives first_bytes and min_depth (grammar_derive.cc). InvalidArgument
// for circular $refs that never reach a value and for an unsatisfiable root.
Status DeriveGrammar(std::vector<Node>* nodes, int* root);

}  // namespace tandem::grammar
